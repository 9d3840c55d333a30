import torch

from . import answers, bank

MUTANTS, mutant = bank()
CORRECT, correct = answers()


def _greedy(model, ids):
    return torch.softmax(model(ids)[:, -1, :], dim=-1).argmax(dim=-1)


# q1: generation_step
@mutant("q1", expect="only the new tokens")
def new_token_only(model, input_ids):
    return _greedy(model, input_ids)


@mutant("q1", expect="did not grow")
def not_appended(model, input_ids):
    return input_ids


@mutant("q1", expect="one token for the whole batch")
def row_zero_prediction(model, input_ids):
    next_token = model(input_ids)[0, -1].argmax()
    return torch.cat([input_ids, next_token.expand(input_ids.shape[0])[:, None]], dim=1)


@mutant("q1", expect="first position")
def first_position(model, input_ids):
    return torch.cat([input_ids, model(input_ids)[:, 0].argmax(-1)[:, None]], dim=1)


@mutant("q1", expect="one token for the whole batch")
def flattened_argmax(model, input_ids):
    next_token = model(input_ids)[:, -1].argmax()
    return torch.cat([input_ids, next_token.repeat(input_ids.shape[0])[:, None]], dim=1)


@mutant("q1", expect="only the last token")
def last_token_only(model, input_ids):
    return torch.cat([input_ids, _greedy(model, input_ids[:, -1:])[:, None]], dim=1)


@mutant("q1", expect="int64")
def float_ids(model, input_ids):
    return torch.cat([input_ids.float(), _greedy(model, input_ids).float()[:, None]], dim=1)


@mutant("q1", expect="argmin")
def argmin(model, input_ids):
    return torch.cat([input_ids, model(input_ids)[:, -1].argmin(-1)[:, None]], dim=1)


@mutant("q1", expect=None)
def sampled(model, input_ids):
    probs = torch.softmax(model(input_ids)[:, -1], -1)
    return torch.cat([input_ids, torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(0))], dim=1)


# q2: generate_greedy, which returns (ids, log_prob)
def _scored(model, input_ids, max_new_tokens, read=lambda ids, prompt: ids, position=-1, score="log_softmax"):
    """A learner's scored loop: ``read`` what the model reads, ``score`` what is added up per step."""
    ids, total = input_ids, torch.zeros(input_ids.shape[0])
    for _ in range(max_new_tokens):
        logits = model(read(ids, input_ids))[:, position]
        token = logits.argmax(-1)
        values = {"log_softmax": torch.log_softmax(logits, -1), "softmax": torch.softmax(logits, -1),
                  "logits": logits, "log_of_softmax": torch.softmax(logits, -1).log()}[score]
        total = total + values.gather(-1, token[:, None])[:, 0]
        ids = torch.cat([ids, token[:, None]], dim=1)
    return ids, total


@mutant("q2", expect="every new token is the same")
def refeeds_the_prompt(model, input_ids, max_new_tokens):
    return _scored(model, input_ids, max_new_tokens, read=lambda ids, prompt: prompt)


@mutant("q2", expect="only the newest token")
def feeds_last_token(model, input_ids, max_new_tokens):
    return _scored(model, input_ids, max_new_tokens, read=lambda ids, prompt: ids[:, -1:])


@mutant("q2", expect="row 0's tokens")
def row_zero_logits(model, input_ids, max_new_tokens):
    ids, total = input_ids, torch.zeros(input_ids.shape[0])
    for _ in range(max_new_tokens):
        log_probs = torch.log_softmax(model(ids)[0, -1], -1)
        token = log_probs.argmax().expand(ids.shape[0])
        total = total + log_probs[token]
        ids = torch.cat([ids, token[:, None]], dim=1)
    return ids, total


@mutant("q2", expect="your loop stopped late: 1 step too many")
def one_step_too_many(model, input_ids, max_new_tokens):
    return _scored(model, input_ids, max_new_tokens + 1 if max_new_tokens else 0)


@mutant("q2", expect="first position")
def first_position_each_step(model, input_ids, max_new_tokens):
    return _scored(model, input_ids, max_new_tokens, position=0)


@mutant("q2", expect="new tokens")
def returns_only_new_tokens(model, input_ids, max_new_tokens):
    ids, total = _scored(model, input_ids, max_new_tokens)
    return ids[:, input_ids.shape[1]:], total


@mutant("q2", expect="returned only the sequence")
def forgets_the_score(model, input_ids, max_new_tokens):
    return _scored(model, input_ids, max_new_tokens)[0]


@mutant("q2", expect="adds up probabilities")
def sums_probabilities(model, input_ids, max_new_tokens):
    return _scored(model, input_ids, max_new_tokens, score="softmax")


@mutant("q2", expect="product of the chosen tokens' probabilities")
def multiplies_probabilities(model, input_ids, max_new_tokens):
    ids, total = input_ids, torch.ones(input_ids.shape[0])
    for _ in range(max_new_tokens):
        probs = torch.softmax(model(ids)[:, -1], -1)
        token = probs.argmax(-1)
        total = total * probs.gather(-1, token[:, None])[:, 0]
        ids = torch.cat([ids, token[:, None]], dim=1)
    return ids, total


@mutant("q2", expect="sums the chosen tokens' logits")
def sums_logits(model, input_ids, max_new_tokens):
    return _scored(model, input_ids, max_new_tokens, score="logits")


@mutant("q2", expect="averages the log-probabilities")
def averages(model, input_ids, max_new_tokens):
    ids, total = _scored(model, input_ids, max_new_tokens)
    return ids, total / max(max_new_tokens, 1)


@mutant("q2", expect="only the last step's")
def keeps_the_last_step(model, input_ids, max_new_tokens):
    ids, total = input_ids, torch.zeros(input_ids.shape[0])
    for _ in range(max_new_tokens):
        log_probs = torch.log_softmax(model(ids)[:, -1], -1)
        token = log_probs.argmax(-1)
        total = log_probs.gather(-1, token[:, None])[:, 0]
        ids = torch.cat([ids, token[:, None]], dim=1)
    return ids, total


@mutant("q2", expect=None)
def scores_the_runner_up(model, input_ids, max_new_tokens):  # the log-probability of the second-best token
    ids, total = input_ids, torch.zeros(input_ids.shape[0])
    for _ in range(max_new_tokens):
        log_probs = torch.log_softmax(model(ids)[:, -1], -1)
        top = log_probs.topk(2, dim=-1)
        total = total + top.values[:, 1]
        ids = torch.cat([ids, top.indices[:, :1]], dim=1)
    return ids, total


@mutant("q2", expect=None)
def counts_the_prompt_too(model, input_ids, max_new_tokens):  # adds log p of the prompt's own tokens
    ids, total = _scored(model, input_ids, max_new_tokens)
    if input_ids.shape[1] > 1:
        total = total + torch.log_softmax(model(input_ids)[:, :-1], -1).gather(-1, input_ids[:, 1:, None]).sum((1, 2))
    return ids, total


@mutant("q2", expect="zeros: with max_new_tokens = 0")
def none_for_no_steps(model, input_ids, max_new_tokens):
    return _scored(model, input_ids, max_new_tokens) if max_new_tokens else (input_ids, None)


@mutant("q4", expect="exp of anything above 88 overflows")
def softmax_by_hand_unshifted(model, input_ids, generator):
    e = model(input_ids)[:, -1].exp()
    return torch.cat([input_ids, torch.multinomial(e / e.sum(-1, keepdim=True), 1, generator=generator)], dim=1)


# q3: generate_from_bigram
@mutant("q3", expect="read the column")
def column_instead_of_row(probs, input_ids, max_new_tokens):
    ids = input_ids
    for _ in range(max_new_tokens):
        ids = torch.cat([ids, probs[:, ids[:, -1]].argmax(dim=0)[:, None]], dim=1)
    return ids


@mutant("q3", expect="first token of each row")
def first_token_context(probs, input_ids, max_new_tokens):
    ids = input_ids
    for _ in range(max_new_tokens):
        ids = torch.cat([ids, probs[ids[:, 0]].argmax(-1)[:, None]], dim=1)
    return ids


@mutant("q3", expect="every new token is the same")
def repeats(probs, input_ids, max_new_tokens):
    nxt = probs[input_ids[:, -1]].argmax(-1)
    return torch.cat([input_ids] + [nxt[:, None]] * max_new_tokens, dim=1)


@mutant("q3", expect="new tokens after the prompt")
def one_short(probs, input_ids, max_new_tokens):
    ids = input_ids
    for _ in range(max_new_tokens - 1):
        ids = torch.cat([ids, probs[ids[:, -1]].argmax(-1)[:, None]], dim=1)
    return ids


@mutant("q3", expect=None)
def bigram_argmin(probs, input_ids, max_new_tokens):
    ids = input_ids
    for _ in range(max_new_tokens):
        ids = torch.cat([ids, probs[ids[:, -1]].argmin(-1)[:, None]], dim=1)
    return ids


@mutant("q3", expect="int64")
def bigram_float_ids(probs, input_ids, max_new_tokens):
    ids = input_ids.float()
    for _ in range(max_new_tokens):
        ids = torch.cat([ids, probs[ids[:, -1].long()].argmax(-1).float()[:, None]], dim=1)
    return ids


# q4: sample_step
@mutant("q4", expect="did not draw from `generator`")
def greedy_instead(model, input_ids, generator):
    return torch.cat([input_ids, model(input_ids)[:, -1].argmax(-1)[:, None]], dim=1)


@mutant("q4", expect="generator=generator")
def global_random_state(model, input_ids, generator):
    probs = torch.softmax(model(input_ids)[:, -1], -1)
    return torch.cat([input_ids, torch.multinomial(probs, 1)], dim=1)


@mutant("q4", expect="first position")
def sampled_first_position(model, input_ids, generator):
    probs = torch.softmax(model(input_ids)[:, 0], -1)
    return torch.cat([input_ids, torch.multinomial(probs, 1, generator=generator)], dim=1)


@mutant("q4", expect=None)
def sample_from_logits(model, input_ids, generator):  # negative "probabilities": multinomial refuses
    return torch.cat([input_ids, torch.multinomial(model(input_ids)[:, -1], 1, generator=generator)], dim=1)


@mutant("q4", expect="generator=generator")
def new_generator_each_call(model, input_ids, generator):
    probs = torch.softmax(model(input_ids)[:, -1], -1)
    return torch.cat([input_ids, torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(0))], dim=1)


@mutant("q4", expect="an extra dimension of size 1")  # the shared diagnosis names it
def unsqueezed_twice(model, input_ids, generator):
    probs = torch.softmax(model(input_ids)[:, -1], -1)
    return torch.cat([input_ids[:, :, None], torch.multinomial(probs, 1, generator=generator)[:, :, None]], dim=1)


@mutant("q4", expect="generator=generator")
def softmax_without_last_slice_temperature(model, input_ids, generator):
    probs = torch.softmax(model(input_ids)[:, -1] / 2.0, -1)
    return torch.cat([input_ids, torch.multinomial(probs, 1, generator=generator)], dim=1)


# --- zero steps, a batch of one, near-miss sampling, the library's own loop ---
@mutant("q2", expect="do not call nexttoken.generate here: it is what you are rebuilding")
def greedy_by_library(model, input_ids, max_new_tokens):
    import nexttoken

    return nexttoken.generate(model, input_ids, max_new_tokens)


@mutant("q3", expect="after the prompt of")
def bigram_do_while(probs, input_ids, max_new_tokens):
    ids = input_ids
    while True:  # a do-while: one step even when max_new_tokens is 0
        ids = torch.cat([ids, probs[ids[:, -1]].argmax(-1)[:, None]], dim=1)
        if ids.shape[1] - input_ids.shape[1] >= max_new_tokens:
            return ids


@mutant("q3", expect="after the prompt of")
def bigram_first_then_range_minus_one(probs, input_ids, max_new_tokens):
    ids = torch.cat([input_ids, probs[input_ids[:, -1]].argmax(-1)[:, None]], dim=1)
    for _ in range(max_new_tokens - 1):
        ids = torch.cat([ids, probs[ids[:, -1]].argmax(-1)[:, None]], dim=1)
    return ids


def _probs(model, input_ids):
    return torch.softmax(model(input_ids)[:, -1, :], dim=-1)


@mutant("q4", expect=None)
def squeezed_draw(model, input_ids, generator):
    next_token = torch.multinomial(_probs(model, input_ids), 1, generator=generator).squeeze()
    return torch.cat([input_ids, next_token[:, None]], dim=1)  # breaks at B = 1


@mutant("q4", expect="did not draw from `generator`")
def reseed_global_from_generator(model, input_ids, generator):
    torch.manual_seed(generator.initial_seed())
    return torch.cat([input_ids, torch.multinomial(_probs(model, input_ids), 1)], dim=1)


@mutant("q4", expect="no top-k, top-p or temperature")
def silent_top_k_50(model, input_ids, generator):
    probs = _probs(model, input_ids)
    top = probs.topk(min(50, probs.shape[-1]), dim=-1)
    kept = torch.zeros_like(probs).scatter(-1, top.indices, top.values)
    return torch.cat([input_ids, torch.multinomial(kept, 1, generator=generator)], dim=1)


@mutant("q4", expect="no top-k, top-p or temperature")
def silent_top_p_09(model, input_ids, generator):
    probs = _probs(model, input_ids)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    drop = sorted_probs.cumsum(-1) - sorted_probs > 0.9
    kept = torch.zeros_like(probs).scatter(-1, order, sorted_probs.masked_fill(drop, 0.0))
    return torch.cat([input_ids, torch.multinomial(kept, 1, generator=generator)], dim=1)


@mutant("q4", expect="no top-k, top-p or temperature")
def silent_temperature(model, input_ids, generator):
    probs = torch.softmax(model(input_ids)[:, -1, :] / 0.9, dim=-1)
    return torch.cat([input_ids, torch.multinomial(probs, 1, generator=generator)], dim=1)


# --- right answers written another way ---
@correct("q2")
def greedy_inline_log_of_softmax(model, input_ids, max_new_tokens):
    return _scored(model, input_ids, max_new_tokens, score="log_of_softmax")


@correct("q2")
def steps_then_one_pass(model, input_ids, max_new_tokens):  # the tokens first, then chapter 1's one pass
    ids = input_ids
    for _ in range(max_new_tokens):
        ids = torch.cat([ids, model(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
    log_probs = torch.log_softmax(model(ids)[:, :-1].double(), -1).gather(-1, ids[:, 1:, None])[..., 0]
    return ids, log_probs[:, input_ids.shape[1] - 1:].sum(-1).float()


@correct("q2")
def probabilities_logged_at_the_end(model, input_ids, max_new_tokens):  # a product of few factors is safe here
    ids, total = input_ids, torch.ones(input_ids.shape[0], dtype=torch.float64)
    for _ in range(max_new_tokens):
        probs = torch.softmax(model(ids)[:, -1].double(), -1)
        token = probs.argmax(-1)
        total = total * probs.gather(-1, token[:, None])[:, 0]
        ids = torch.cat([ids, token[:, None]], dim=1)
    return ids, total.log().float()


@correct("q4")
def sample_with_logits_softmax_dim_1(model, input_ids, generator):
    probs = model(input_ids)[:, -1, :].softmax(dim=1)
    return torch.cat([input_ids, probs.multinomial(num_samples=1, generator=generator)], dim=-1)


# q5: greedy_trap (open)
def _score(model, prompt, continuation):
    ids = torch.cat([prompt, continuation[None]], dim=1)
    log_probs = torch.log_softmax(model(ids)[0, :-1].detach(), dim=-1)
    return float(log_probs[prompt.shape[1] - 1:].gather(-1, continuation[:, None]).sum())


def _greedy4(model, prompt, n=4):
    ids = prompt
    for _ in range(n):
        ids = torch.cat([ids, model(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return ids[0, prompt.shape[1]:]


@mutant("q5", expect="starts with the greedy token")
def the_greedy_path(model):
    prompt = torch.tensor([[0]])
    return prompt, _greedy4(model, prompt)


@mutant("q5", expect="not more probable than greedy's")
def second_best_first_token_unchecked(model):
    prompt = torch.tensor([[0]])
    second = model(prompt)[0, -1].topk(2).indices[1:]
    return prompt, torch.cat([second, _greedy4(model, torch.cat([prompt, second[None]], 1), 3)])


@mutant("q5", expect="not more probable than greedy's")
def compares_only_the_first_token(model):
    # "a more probable continuation": a first token more probable than greedy's is impossible, so this
    # picks the least improbable other first token and stops thinking
    prompt = torch.tensor([[1]])
    first = model(prompt)[0, -1].topk(2).indices[1:]
    return prompt, torch.cat([first, first, first, first])


@mutant("q5", expect="should be an int64 tensor of shape (4,)")
def continuation_with_a_batch_dimension(model):
    for token in range(model.config.vocab_size):
        prompt = torch.tensor([[token]])
        greedy = _greedy4(model, prompt)
        for first in range(model.config.vocab_size):
            if first == int(greedy[0]):
                continue
            path = torch.cat([torch.tensor([first]), _greedy4(model, torch.tensor([[token, first]]), 3)])
            if _score(model, prompt, path) > _score(model, prompt, greedy):
                return prompt, path[None]
    raise RuntimeError("none found")


@mutant("q5", expect="should hold 4 tokens")
def three_tokens(model):
    prompt = torch.tensor([[0]])
    return prompt, _greedy4(model, prompt)[1:]


@mutant("q5", expect="return two tensors")
def only_the_continuation(model):
    return _greedy4(model, torch.tensor([[0]]))


@mutant("q5", expect="should be (1, P)")
def empty_prompt(model):
    return torch.zeros(1, 0, dtype=torch.long), torch.tensor([1, 2, 3, 4])


@mutant("q5", expect="outside the vocabulary")
def ids_past_the_vocabulary(model):
    return torch.tensor([[0]]), torch.tensor([model.config.vocab_size, 0, 0, 0])


@correct("q5")
def search_by_probability_not_log(model):
    """Products of probabilities instead of sums of logs (fine for 4 tokens), and two-token prompts."""
    V = model.config.vocab_size
    for a in range(V):
        for b in range(2):
            prompt = torch.tensor([[a, b]])
            greedy = _greedy4(model, prompt)

            def p(path):
                ids = torch.cat([prompt, path[None]], 1)
                probs = torch.softmax(model(ids)[0, :-1], -1)[1:]
                return probs.gather(-1, path[:, None]).prod()
            for first in model(prompt)[0, -1].argsort(descending=True)[1:]:
                path = torch.cat([first[None], _greedy4(model, torch.cat([prompt, first[None, None]], 1), 3)])
                if p(path) > p(greedy) * (1 + 1e-4):
                    return prompt, path
    raise RuntimeError("none found")


# --- a loop that stops on GPT-2's EOS id (the task asks for exactly max_new_tokens) ---
@mutant("q2", expect="GPT-2's EOS id 50256")
def stops_on_gpt2_eos(model, input_ids, max_new_tokens):
    ids, total = input_ids, torch.zeros(input_ids.shape[0])
    for _ in range(max_new_tokens):
        log_probs = torch.log_softmax(model(ids)[:, -1], -1)
        next_token = log_probs.argmax(-1)
        total = total + log_probs.gather(-1, next_token[:, None])[:, 0]
        ids = torch.cat([ids, next_token[:, None]], dim=1)
        if (next_token == 50256).all():
            break
    return ids, total


# --- messages that name the mistake made ---
@mutant("q1", expect="second-to-last position")
def second_to_last_position(model, input_ids):
    return torch.cat([input_ids, model(input_ids)[:, -2].argmax(-1)[:, None]], dim=1)


@mutant("q1", expect="one per position")
def argmax_at_every_position(model, input_ids):
    next_tokens = torch.softmax(model(input_ids), dim=-1).argmax(dim=-1)  # (B, T): the last position not taken
    return torch.cat([input_ids, next_tokens], dim=1)


# the slips a learner made blind
@mutant("q1", expect="Make the new tokens a column, next_token[:, None]")
def cat_without_column(model, input_ids):
    next_token = model(input_ids)[:, -1, :].argmax(dim=-1)
    return torch.cat([input_ids, next_token], dim=1)


@mutant("q2", expect="log_probs[torch.arange(B), next_id]")
def every_rows_entry(model, input_ids, max_new_tokens):
    ids, total = input_ids, torch.zeros(input_ids.shape[0])
    for _ in range(max_new_tokens):
        log_probs = torch.log_softmax(model(ids)[:, -1, :], dim=-1)
        next_id = log_probs.argmax(dim=-1)
        total = total + log_probs[:, next_id]
        ids = torch.cat([ids, next_id[:, None]], dim=1)
    return ids, total


# the slips a learner made blind
@mutant("q1", expect="you joined along dim=0, the rows")
def cat_along_the_rows(model, input_ids):
    with torch.no_grad():
        next_token = torch.softmax(model(input_ids)[:, -1, :], dim=-1).argmax(dim=-1)
    return torch.cat([input_ids, next_token[:, None]], dim=0)


@mutant("q1", expect="the argmax went over the rows (dim=0)")
def argmax_over_the_rows(model, input_ids):
    with torch.no_grad():
        next_token = torch.softmax(model(input_ids)[:, -1, :], dim=-1).argmax(dim=0)
    return torch.cat([input_ids, next_token[:, None]], dim=1)


@mutant("q1", expect="a draw (torch.multinomial) picks other tokens")
def sampled_not_greedy(model, input_ids):
    with torch.no_grad():
        probs = torch.softmax(model(input_ids)[:, -1, :], dim=-1)
    return torch.cat([input_ids, torch.multinomial(probs, 1)], dim=1)


@mutant("q1", expect="do not call nexttoken.generate here: it is what you are rebuilding")
def the_librarys_step(model, input_ids):
    import nexttoken

    return nexttoken.generate(model, input_ids, 1)


@mutant("q2", expect="after the first step the model read only the newest token")
def newest_token_after_the_first_step(model, input_ids, max_new_tokens):
    ids, total, feed = input_ids, torch.zeros(input_ids.shape[0]), input_ids
    with torch.no_grad():
        for _ in range(max_new_tokens):
            log_probs = torch.log_softmax(model(feed)[:, -1, :], dim=-1)
            next_id = log_probs.argmax(dim=-1)
            total = total + log_probs.gather(-1, next_id[:, None])[:, 0]
            ids = torch.cat([ids, next_id[:, None]], dim=1)
            feed = next_id[:, None]
    return ids, total


@mutant("q4", expect="do not call nexttoken.generate here: it is what you are rebuilding")
def the_librarys_sampled_step(model, input_ids, generator):
    import nexttoken

    return nexttoken.generate(model, input_ids, 1, select=nexttoken.sample, generator=generator)
