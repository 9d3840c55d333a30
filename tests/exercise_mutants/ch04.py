import torch

import nexttoken

from . import answers, bank

MUTANTS, mutant = bank()
CORRECT, correct = answers()


# q1: last_logits
@mutant("q1", expect="first position")
def first_position(logits):
    return logits[:, 0, :]


@mutant("q1", expect="batch dimension is gone")
def first_row(logits):
    return logits[0, -1]


@mutant("q1", expect="sliced the batch dimension")
def last_row(logits):
    return logits[-1]


@mutant("q1", expect="not the slice -1:")
def kept_time_axis(logits):
    return logits[:, -1:, :]


@mutant("q1", expect="sliced the vocabulary")
def last_vocab_entry(logits):
    return logits[..., -1]


@mutant("q1", expect="second-to-last")
def second_to_last(logits):
    return logits[:, -2, :] if logits.shape[1] > 1 else logits[:, -1, :] * 0


@mutant("q1", expect="row 0's scores")
def row_zero_for_all(logits):
    return logits[0, -1].expand(logits.shape[0], -1)


# q2: next_token_probs
@mutant("q2", expect="these are logits")
def logits_not_probs(model, input_ids):
    return model(input_ids)[:, -1, :]


@mutant("q2", expect="log-probabilities")
def log_probs(model, input_ids):
    return torch.log_softmax(model(input_ids)[:, -1, :], dim=-1)


@mutant("q2", expect="over the batch")
def softmax_over_batch(model, input_ids):
    return torch.softmax(model(input_ids)[:, -1, :], dim=0)


@mutant("q2", expect="over time")
def softmax_over_time(model, input_ids):
    return torch.softmax(model(input_ids), dim=1)[:, -1, :]


@mutant("q2", expect="first position")
def first_position_probs(model, input_ids):
    return torch.softmax(model(input_ids)[:, 0, :], dim=-1)


@mutant("q2", expect="last token alone")
def last_token_only(model, input_ids):
    return torch.softmax(model(input_ids[:, -1:])[:, -1, :], dim=-1)


@mutant("q2", expect="token ids")
def argmax_instead(model, input_ids):
    return torch.softmax(model(input_ids)[:, -1, :], dim=-1).argmax(-1)


# q3: stable_softmax
@mutant("q3", expect="overflows")
def naive(x):
    e = torch.exp(x)
    return e / e.sum(-1, keepdim=True)


@mutant("q3", expect="subtracted the minimum")
def minus_min(x):
    e = torch.exp(x - x.min(dim=-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


@mutant("q3", expect="not one maximum of the whole tensor")
def minus_global_max(x):
    e = torch.exp(x - x.max())
    return e / e.sum(-1, keepdim=True)


@mutant("q3", expect="wrong dimension")
def sum_over_first_dim(x):
    e = torch.exp(x - x.max(dim=-1, keepdim=True).values)
    return e / e.sum(0, keepdim=True)


@mutant("q3", expect="log-probabilities")
def log_softmax(x):
    shifted = x - x.max(-1, keepdim=True).values
    return shifted - torch.log(torch.exp(shifted).sum(-1, keepdim=True))


@mutant("q3", expect="scaling")
def divide_by_max(x):
    y = x / x.max(dim=-1, keepdim=True).values
    e = torch.exp(y - y.max(dim=-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


@mutant("q3", expect="in place")
def subtract_in_place(x):
    x -= x.max(dim=-1, keepdim=True).values
    e = torch.exp(x)
    return e / e.sum(-1, keepdim=True)


# q4: last_position_logits
def _hidden(model, ids, mask=True):
    T = ids.shape[1]
    x = model.token_embedding(ids) + model.position_embedding(torch.arange(T))
    m = nexttoken.causal_mask(T) if mask else torch.ones(T, T, dtype=torch.bool)
    for block in model.blocks:
        x, _ = block(x, m)
    return x


@mutant("q4", expect="last position only")
def head_on_every_position(model, input_ids):
    return model(input_ids)[:, -1, :]


@mutant("q4", expect="last position only")
def head_then_slice(model, input_ids):
    return model.lm_head(model.final_norm(_hidden(model, input_ids)))[:, -1, :]


@mutant("q4", expect="first position")
def first_position_head(model, input_ids):
    return model.lm_head(model.final_norm(_hidden(model, input_ids)[:, 0, :]))


@mutant("q4", expect="skipped the final norm")
def no_final_norm(model, input_ids):
    return model.lm_head(_hidden(model, input_ids)[:, -1, :])


@mutant("q4", expect="future positions are visible")
def no_mask(model, input_ids):
    return model.lm_head(model.final_norm(_hidden(model, input_ids, mask=False)[:, -1, :]))


@mutant("q4", expect="not -1:")
def head_output_kept_time_axis(model, input_ids):
    return model.lm_head(model.final_norm(_hidden(model, input_ids)[:, -1:, :]))


@mutant("q4", expect=None)
def last_token_alone(model, input_ids):
    return model.lm_head(model.final_norm(_hidden(model, input_ids[:, -1:])[:, -1, :]))


# --- the head on every position however it is written; a softmax that is torch's ---
def _blocks_output(model, input_ids):
    T = input_ids.shape[1]
    x = model.token_embedding(input_ids) + model.position_embedding(torch.arange(T))
    for block in model.blocks:
        x, _ = block(x, nexttoken.causal_mask(T))
    return x


@mutant("q4", expect="last position only")
def head_on_flattened_rows(model, input_ids):
    x = model.final_norm(_blocks_output(model, input_ids))
    B, T, d = x.shape
    return model.lm_head(x.reshape(B * T, d)).reshape(B, T, -1)[:, -1, :]


@mutant("q4", expect="last position only")
def multiply_by_head_weight(model, input_ids):
    x = model.final_norm(_blocks_output(model, input_ids))
    return (x @ model.lm_head.weight.T)[:, -1, :]


@mutant("q4", expect="last position only")
def einsum_with_head_weight(model, input_ids):
    x = model.final_norm(_blocks_output(model, input_ids))
    return torch.einsum("btd,vd->btv", x, model.lm_head.weight)[:, -1]


@mutant("q4", expect=None)
def layer_norm_without_its_parameters(model, input_ids):
    x = _blocks_output(model, input_ids)[:, -1, :]
    return model.lm_head(torch.nn.functional.layer_norm(x, (x.shape[-1],)))


@mutant("q4", expect=None)
def norm_twice(model, input_ids):
    x = _blocks_output(model, input_ids)[:, -1, :]
    return model.lm_head(model.final_norm(model.final_norm(x)))


@mutant("q3", expect="here: the softmax is what you are rebuilding")
def calls_torch_softmax(logits):
    return torch.softmax(logits, dim=-1)


@mutant("q3", expect="here: the softmax is what you are rebuilding")
def calls_functional_softmax(logits):
    return torch.nn.functional.softmax(logits, dim=-1)


@mutant("q3", expect=None)
def shift_only_when_large(logits):
    if logits.max() > 80:  # "exp only overflows for large logits"
        logits = logits - logits.amax(-1, keepdim=True)
    e = torch.exp(logits)
    return e / e.sum(-1, keepdim=True)


@mutant("q3", expect=None)
def clamped_probabilities(logits):
    e = torch.exp(logits - logits.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).clamp(min=1e-6)


@mutant("q3", expect=None)
def epsilon_in_the_denominator(logits):
    e = torch.exp(logits - logits.amax(-1, keepdim=True))
    return e / (e.sum(-1, keepdim=True) + 1e-3)


# --- right answers written another way ---
@correct("q3")
def softmax_via_logsumexp(logits):
    return torch.exp(logits - torch.logsumexp(logits, dim=-1, keepdim=True))


@correct("q4")
def head_via_last_slice_and_keepdim(model, input_ids):
    x = _blocks_output(model, input_ids)[:, -1:, :]
    return model.lm_head(model.final_norm(x)).squeeze(1)


# q5: next_token_probs_fixed (debug)
@mutant("q5", expect="one distribution for the whole batch")
def left_as_it_was(model, input_ids):
    logits = model(input_ids)
    return torch.softmax(logits[0, -1], dim=-1)


@mutant("q5", expect="dropout is still on")
def no_grad_is_not_eval(model, input_ids):
    with torch.no_grad():
        return torch.softmax(model(input_ids)[:, -1, :], dim=-1)


@mutant("q5", expect="dropout is still on")
def seeded_dropout(model, input_ids):
    torch.manual_seed(0)  # the same result every call, but dropout still zeroes activations
    return torch.softmax(model(input_ids)[:, -1, :], dim=-1)


@mutant("q5", expect="one distribution for the whole batch")
def eval_but_row_zero(model, input_ids):
    model.eval()
    return torch.softmax(model(input_ids)[0, -1], dim=-1)


@mutant("q5", expect=None)
def eval_but_first_position(model, input_ids):
    model.eval()
    return torch.softmax(model(input_ids)[:, 0], dim=-1)


@mutant("q5", expect="raw logits")  # the shared diagnosis names it
def eval_but_logits(model, input_ids):
    model.eval()
    with torch.no_grad():
        return model(input_ids)[:, -1, :]


@mutant("q5", expect="went over dimension 0")  # the shared diagnosis names it
def eval_but_softmax_over_batch(model, input_ids):
    model.eval()
    return torch.softmax(model(input_ids)[:, -1, :], dim=0)


@correct("q5")
def eval_then_back_to_training(model, input_ids):
    was = model.training
    model.eval()
    with torch.no_grad():
        probs = model(input_ids)[:, -1, :].softmax(-1)
    model.train(was)
    return probs


@correct("q5")
def eval_and_detach(model, input_ids):
    model.train(False)  # the same as model.eval()
    return torch.softmax(model(input_ids).detach()[:, -1], -1)


# --- a softmax without the max shift (the tests' logits were never large) ---
@mutant("q2", expect="overflows float32")
def probs_without_the_shift(model, input_ids):
    with torch.no_grad():
        e = torch.exp(model(input_ids)[:, -1, :])
    return e / e.sum(-1, keepdim=True)


@mutant("q5", expect="overflows float32")
def fixed_without_the_shift(model, input_ids):
    model.eval()
    with torch.no_grad():
        e = torch.exp(model(input_ids)[:, -1, :])
    return e / e.sum(-1, keepdim=True)


# squeeze() also drops the batch dimension of a batch of one
@mutant("q1", expect="dropped the batch dimension too")
def slice_then_squeeze(logits):
    return logits[:, -1:, :].squeeze()


@mutant("q1", expect="dropped the batch dimension too")
def index_then_squeeze(logits):
    return logits[:, -1].squeeze()


# the slips a learner made blind
@mutant("q1", expect="these are probabilities (a softmax over the vocabulary)")
def last_logits_as_probabilities(logits):
    return torch.softmax(logits[:, -1, :], dim=-1)


@mutant("q2", expect="you kept row 0 only")
def row_zero_made_a_batch(model, input_ids):
    with torch.no_grad():
        return torch.softmax(model(input_ids)[0, -1].unsqueeze(0), dim=-1)


@mutant("q2", expect="squeeze() with no dimension drops every dimension of size 1")
def squeezed(model, input_ids):
    with torch.no_grad():
        return torch.softmax(model(input_ids)[:, -1:, :].squeeze(), dim=-1)


@mutant("q2", expect="you subtracted one maximum of the whole batch, not one per row")
def shift_by_the_whole_batchs_max(model, input_ids):
    with torch.no_grad():
        last = model(input_ids)[:, -1, :]
    e = torch.exp(last - last.max())
    return e / e.sum(dim=-1, keepdim=True)


@mutant("q1", expect="you kept row 0 only")
def last_logits_of_row_zero(logits):
    return logits[0, -1].unsqueeze(0)


@correct("q2")
def softmax_by_hand_per_row(model, input_ids):
    with torch.no_grad():
        last = model(input_ids)[:, -1, :]
    e = torch.exp(last - last.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)
