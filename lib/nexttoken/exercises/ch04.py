"""Chapter 4, logit slicing: tasks for the exercise notebook."""

import torch

from ..model import causal_mask
from ..recorder import watches
from .common import (dropout_model, embed_with_positions, loud, overflow, random_ids, rows_far_apart, run_blocks,
                     seeded, small_model)
from .diagnosis import Source
from .task import Known, Mistake, Question, Task, shortcut_rule

CHAPTER = "ch04"
TASKS = ["q1", "q2", "q3", "q4", "q5"]
# The core tasks: what the lesson asks of every learner and what an LMS grade counts by default (the notebook's
# "[core" headings say the same: tests/exercises/test_core_only.py); the rest is practice.
CORE = ["q4"]


def _q1_diagnose(args, expected, got):
    (logits,) = args
    B, T, V = logits.shape
    if tuple(got.shape) == (V,):
        raise Mistake("the batch dimension is gone: logits[0, -1] (or logits[-1, -1]) is one row's scores; "
                      "keep every row with logits[:, -1, :]")
    if tuple(got.shape) == (B, 1, V):
        raise Mistake("the result is (B, 1, V): index the time axis with -1, not the slice -1:, to drop it")
    if tuple(got.shape) == (T, V) and (T, V) != (B, V):
        raise Mistake("you sliced the batch dimension (logits[-1]); slice time: logits[:, -1, :]")
    if tuple(got.shape) == (B, T) and T != V:
        raise Mistake("you sliced the vocabulary (logits[..., -1]): the last *position* is the middle axis")
    if tuple(got.shape) == (1, V) and B > 1:
        raise Mistake(ROW_ZERO_ONLY)


ROW_ZERO_ONLY = ("you kept row 0 only: logits[0, -1] is the first row's scores (and .unsqueeze(0) only makes them "
                 "(1, V)), which serves a batch of one; keep every row with logits[:, -1, :], (B, V)")
SQUEEZED = ("squeeze() with no dimension drops every dimension of size 1, so for a batch of one (B = 1) it dropped "
            "the batch dimension too: (V,), not (1, V). Squeeze only the time axis, .squeeze(1), or index it "
            "with -1: logits[:, -1, :]")


q1 = Question(Task(
    name="q1", function="last_logits", title="the last position's logits", chapter=CHAPTER,
    cases=lambda: [(torch.randn(1, 3, 5, generator=seeded(3)),), (torch.randn(1, 1, 4, generator=seeded(4)),),
                   (torch.randn(2, 5, 11, generator=seeded(1)),), (torch.randn(3, 1, 7, generator=seeded(2)),)],
    reference=lambda logits: logits[:, -1, :], diagnose=_q1_diagnose,
    source=lambda logits: Source(logits=logits[:, -1], every=logits),
    known=[
        Known("you took the first position; the next token is predicted by the last one",
              lambda lg: lg[:, 0, :]),
        Known("you took the second-to-last position; the last one (-1) predicts the next token",
              lambda lg: lg[:, -2, :]),
        Known(SQUEEZED, lambda lg: lg[:, -1:, :].squeeze()),
        Known("every row got row 0's scores: logits[0, -1] serves a batch of one only; keep the batch "
              "dimension", lambda lg: lg[0, -1].expand(lg.shape[0], -1)),
        Known("these are probabilities (a softmax over the vocabulary): last_logits returns the scores as they "
              "are; the softmax is the next step, next_token_probs (question 2)",
              lambda lg: torch.softmax(lg[:, -1, :], dim=-1)),
    ],
    hints=("Which position predicts a token we do not have yet?",
           "The dimensions are (batch, time, vocabulary): keep all of two of them.",
           "Index with : for every row, -1 for the last time step, : for every token."),
))


@torch.no_grad()
def _next_token_probs(model, input_ids):
    return torch.softmax(model(input_ids)[:, -1, :], dim=-1)


@torch.no_grad()
def _q2_source(model, input_ids):
    """Every position's logits: the answer is the last one's, normalised."""
    every = model(input_ids)
    return Source(logits=every[:, -1], every=every)


def _q2_diagnose(args, expected, got):
    model, ids = args
    B, V = expected.shape
    if tuple(got.shape) == (1, V) and B > 1:
        raise Mistake(ROW_ZERO_ONLY)
    if tuple(got.shape) == (V,) and B == 1:
        raise Mistake(SQUEEZED)
    if got.shape == expected.shape and got.is_floating_point() and torch.isnan(got).any():
        with torch.no_grad():
            overflow(args[0].eval()(args[1])[:, -1])
    if got.dim() == 1 and not got.is_floating_point():
        raise Mistake("these are token ids (an argmax): return the whole distribution, probabilities over "
                      "the vocabulary")


q2 = Question(Task(
    name="q2", function="next_token_probs", title="next-token probabilities", chapter=CHAPTER,
    cases=lambda: [(small_model(3), random_ids(3, 3, 6)), (small_model(4), random_ids(4, 1, 1)),
                   (small_model(5), random_ids(5, 2, 16)),
                   (loud(small_model(7)), random_ids(7, 2, 5)),  # logits in the hundreds: exp overflows unshifted
                   rows_far_apart(100)],  # one row's logits over 100 below the other's: one max per row
    reference=_next_token_probs, diagnose=_q2_diagnose, source=_q2_source,
    known=[
        Known("you subtracted one maximum of the whole batch, not one per row: a row whose logits sit far below "
              "another's underflows to 0 everywhere, and 0 / 0 is NaN. Subtract each row's own maximum "
              "(amax(dim=-1, keepdim=True)), or use torch.softmax, which does",
              torch.no_grad()(lambda m, ids: (lambda lg: (lambda e: e / e.sum(-1, keepdim=True))(
                  torch.exp(lg - lg.max())))(m(ids)[:, -1, :]))),
        Known("these are logits: turn them into probabilities with torch.softmax over the vocabulary",
              torch.no_grad()(lambda m, ids: m(ids)[:, -1, :])),
        Known("these are log-probabilities (log_softmax); the task asks for probabilities",
              torch.no_grad()(lambda m, ids: torch.log_softmax(m(ids)[:, -1, :], -1))),
        Known("the softmax went over the batch (dim=0): normalise each row over the vocabulary, dim=-1",
              torch.no_grad()(lambda m, ids: torch.softmax(m(ids)[:, -1, :], 0))),
        Known("the softmax went over time (dim=1) before slicing: normalise over the vocabulary, dim=-1",
              torch.no_grad()(lambda m, ids: torch.softmax(m(ids), 1)[:, -1, :])),
        Known("you used the first position's logits; the last position predicts the next token",
              torch.no_grad()(lambda m, ids: torch.softmax(m(ids)[:, 0, :], -1))),
        Known("you ran the model on the last token alone: it must read the whole context, model(input_ids)",
              torch.no_grad()(lambda m, ids: torch.softmax(m(ids[:, -1:])[:, -1, :], -1))),
    ],
    hints=("Forward, slice, normalise: the first half of a generation step.",
           "model(input_ids) gives (B, T, V); chapter 4 keeps one position of it.",
           "softmax over the vocabulary (dim=-1) of the last position's logits."),
))


def _q3_cases():
    return [(torch.tensor([1.0, 2.0, 3.0]),), (torch.tensor([[5.0]]),),
            (torch.tensor([[1000.0, 1001.0, 1002.0], [-1000.0, -999.0, -998.0]]),),
            (torch.tensor([[-1000.0, -1001.0, -1002.0]]),),  # only very negative: exp underflows unshifted
            # spread rows: probabilities down to about 1e-30, where a clamp or an epsilon shows
            (torch.randn(2, 3, 9, generator=seeded(4)) * 40,), (torch.linspace(0.0, 69.0, 24).reshape(2, 12),)]


def _q3_diagnose(args, expected, got):
    if got.shape == expected.shape and got.is_floating_point() and torch.isnan(got).any():
        if (args[0].amax(-1) > 88).any():
            raise Mistake("NaN: exp(1000) overflows to inf in float32 and inf / inf is NaN. Subtract each "
                          "row's maximum before exp (softmax does not change when you shift a row)")
        raise Mistake("NaN: a whole row underflowed to 0 (exp(-1000) is 0 in float32) and 0 / 0 is NaN. "
                      "Always subtract each row's own maximum, whatever the size of the logits, and not one "
                      "maximum of the whole tensor")


q3 = Question(Task(
    name="q3", function="stable_softmax", title="a numerically stable softmax", chapter=CHAPTER,
    cases=_q3_cases, reference=lambda logits: torch.softmax(logits, dim=-1), diagnose=_q3_diagnose,
    atol=1e-35,  # relative error only: tiny probabilities must be right too, not merely below 1e-4
    forbid=shortcut_rule("torch.softmax", "torch.softmax (or F.softmax, Tensor.softmax)", "the softmax"),
    known=[
        Known("you subtracted the minimum; subtract the maximum, so that the largest exponent is exp(0) = 1 and "
              "nothing overflows",
              lambda x: (lambda e: e / e.sum(-1, keepdim=True))(torch.exp(x - x.amin(-1, keepdim=True)))),
        Known("you subtracted one maximum of the whole tensor, not one per row: a row far below it underflows "
              "to 0 and 0 / 0 is NaN. Subtract each row's own maximum, not one maximum of the whole tensor",
              lambda x: (lambda e: e / e.sum(-1, keepdim=True))(torch.exp(x - x.max()))),
        Known("the sum went over the wrong dimension: normalise over the last one (dim=-1, keepdim=True)",
              lambda x: (lambda e: e / e.sum(0, keepdim=True))(torch.exp(x - x.amax(-1, keepdim=True)))),
        Known("you returned log-probabilities; the softmax's values are probabilities",
              lambda x: torch.log_softmax(x, -1)),
        Known("you divided by the maximum instead of subtracting it: a softmax is unchanged by a *shift* of "
              "the scores, not by a scaling", lambda x: torch.softmax(x / x.amax(-1, keepdim=True), -1)),
    ],
    hints=("exp(1000) is inf in float32. What can you do to a row of scores that leaves its softmax unchanged?",
           "softmax(x) = softmax(x - c) for any constant c per row; pick c so that the largest exponent is 0.",
           "x - x.max(dim=-1, keepdim=True).values, then exp, then divide by the sum over dim=-1 (keepdim=True)."),
))


@torch.no_grad()
def _last_position_logits(model, input_ids, slice_at=-1, norm=True, mask=True):
    T = input_ids.shape[1]
    m = causal_mask(T) if mask else torch.ones(T, T, dtype=torch.bool)
    h = run_blocks(model, embed_with_positions(model, input_ids), m)[:, slice_at, :]  # chapter 3, to the blocks
    return model.lm_head(model.final_norm(h) if norm else h)


@torch.no_grad()
def _varied_pass(model, input_ids, piece):
    """Chapter 3's forward pass to the last position's logits with one piece of it done another way (``piece``:
    a key of ``_PIECES``), as a learner building it by hand might."""
    T = input_ids.shape[1]
    x = model.token_embedding(input_ids)
    if piece != "no_positions":
        x = x + model.position_embedding(torch.arange(T) + (piece == "positions_from_1"))
    if piece == "norm_first":
        x = model.final_norm(x)
    if piece == "sliced_before":
        x, T = x[:, -1:], 1
    mask = ~causal_mask(T) if piece == "mask_inverted" else causal_mask(T)
    mask = mask.float() if piece == "float_mask" else mask  # a float mask is added to the scores: it hides nothing
    blocks = {"blocks_reversed": list(model.blocks)[::-1], "last_block_only": model.blocks[-1:],
              "first_block_only": model.blocks[:1]}.get(piece, model.blocks)
    for block in blocks:
        y, _ = block(x, mask)
        x = x + y if piece == "residual_again" else y
        x = model.final_norm(x) if piece == "norm_each_block" else x
    h = x.mean(1) if piece == "mean_positions" else x[:, -1]
    if piece not in ("norm_first", "norm_each_block"):  # normed after every block, the last one's is the final
        h = model.final_norm(h)
    if piece == "norm_twice":
        h = model.final_norm(h)
    return h @ model.token_embedding.weight.T if piece == "tied_head" else model.lm_head(h)


# Each piece of the forward pass done another way, and what that piece should be (chapter 3's pass, in order).
_ONE_BLOCK = "only one of the model's blocks ran: every block of model.blocks runs, in order, each on the last's output"
_PIECES = {
    "no_positions": "the position vectors are missing: the blocks read token vectors plus position vectors, "
                    "model.position_embedding(torch.arange(T))",
    "positions_from_1": "the positions are counted from 1: the first token is at position 0, torch.arange(T)",
    "norm_first": "the final norm came before the blocks: it comes after the last block, just before the LM head",
    "norm_twice": "the final norm is applied twice: once, after the last block",
    "blocks_reversed": "the blocks ran in reverse order: model.blocks in order, block 0 first",
    "last_block_only": _ONE_BLOCK,
    "first_block_only": _ONE_BLOCK,
    "residual_again": "you added each block's input to its output: a block adds its residual itself, x, _ = "
                      "block(x, mask)",
    # a mask that hides every earlier position from the last (~mask | diagonal, triu) gives the same output
    "sliced_before": "the last position saw only itself in the blocks: you kept it before the blocks, or a mask hid "
                     "the earlier positions from it. Attention mixes positions, so every block needs every "
                     "position under causal_mask(T); keep x[:, -1, :] after the blocks, before the final norm",
    "float_mask": "the mask is a float tensor: a float mask is added to the attention scores, so its 0s hide "
                  "nothing; pass the bool causal_mask(T) as it is (True where a position may read)",
    "norm_each_block": "the final norm ran after every block: it runs once, after the last block only, just "
                       "before the LM head (the blocks normalise their own inputs)",
    "mask_inverted": "the mask is inverted: True marks what a position may read, causal_mask(T) as it is (no ~)",
    "tied_head": "you multiplied by the token embedding's matrix: these models' LM head is a matrix of its own "
                 "(untied); apply model.lm_head",
    "mean_positions": "you averaged the positions' vectors: the last position's alone predicts the next token, "
                      "x[:, -1, :]",
}


def _q4_source(model, input_ids):
    with torch.no_grad():
        every = model(input_ids)
    return Source(logits=every[:, -1], every=every)


def _q4_diagnose(args, expected, got):
    model, ids = args
    if tuple(got.shape) == (ids.shape[0], 1, model.config.vocab_size):
        raise Mistake("the result is (B, 1, vocab_size): slice the position with -1 (not -1:) to drop the "
                      "time axis")


q4 = Question(Task(
    name="q4", function="last_position_logits", title="an LM head on the last position only", chapter=CHAPTER,
    cases=lambda: [(small_model(21), random_ids(21, 1, 4)), (small_model(23), random_ids(23, 1, 1)),
                   (small_model(22), random_ids(22, 3, 7)), (small_model(24), random_ids(24, 2, 16))],
    reference=_last_position_logits, diagnose=_q4_diagnose, watch=watches.head_on_last_position_only,
    source=_q4_source,
    known=[
        Known("you kept the first position; the last one predicts the next token",
              lambda m, ids: _last_position_logits(m, ids, slice_at=0)),
        Known("you skipped the final norm before the LM head",
              lambda m, ids: _last_position_logits(m, ids, norm=False)),
        Known("future positions are visible in the blocks: pass causal_mask(T) to each block (the last "
              "position's output depends on the other positions' earlier layers)",
              lambda m, ids: _last_position_logits(m, ids, mask=False)),
        *[Known(words, lambda m, ids, piece=piece: _varied_pass(m, ids, piece)) for piece, words in _PIECES.items()],
    ],
    hints=("With GPT-2's vocabulary the LM head is the model's biggest matrix, and its work on every "
           "position but the last is thrown away. Where in chapter 3's forward pass can you drop the other positions?",
           "Everything up to the final norm needs every position (attention mixes them); the head does not.",
           "Run chapter 3's forward pass up to the blocks, keep x[:, -1, :], then final norm and lm_head."),
))


# q5 (debug): a classmate's next-token function, with two bugs (the notebook hands it out, and its bank
# tests/exercise_mutants/ch04.py holds it as `left_as_it_was`). The test models have dropout 0.3 and are
# left in training mode, as a model is after a training loop.

@torch.no_grad()
def _inference_probs(model, input_ids):
    was_training = model.training
    model.eval()
    try:
        return torch.softmax(model(input_ids)[:, -1, :], dim=-1)
    finally:
        model.train(was_training)


@torch.no_grad()
def _q5_source(model, input_ids):
    """Every position's logits at inference (dropout off), as the right answer computes them."""
    was_training = model.training
    try:
        every = model.eval()(input_ids)
    finally:
        model.train(was_training)
    return Source(logits=every[:, -1], every=every)


def _q5_diagnose(args, expected, got):
    model, ids = args
    B, V = expected.shape
    if got.shape == expected.shape and got.is_floating_point() and torch.isnan(got).any():
        was_training = model.training
        try:
            with torch.no_grad():
                overflow(model.eval()(ids)[:, -1])
        finally:
            model.train(was_training)
    if tuple(got.shape) == (V,) and B > 1:
        raise Mistake("one distribution for the whole batch: logits[0, -1] is row 0's last position; keep "
                      "every row with logits[:, -1, :]")
    if got.shape == expected.shape and got.is_floating_point() \
            and torch.allclose(got.sum(-1), torch.ones(B), atol=1e-4):
        raise Mistake("these are probabilities, but not the model's at inference: dropout is still on (the "
                      "model is in training mode, so each call zeroes other activations). Call model.eval() "
                      "before the forward pass; torch.no_grad() alone does not switch dropout off")


q5 = Question(Task(
    name="q5", function="next_token_probs_fixed", title="debug a next-token function", chapter=CHAPTER,
    kind="debug",
    cases=lambda: [(dropout_model(51), random_ids(51, 3, 5)), (dropout_model(52), random_ids(52, 1, 1)),
                   (dropout_model(53), random_ids(53, 2, 16)),
                   (loud(dropout_model(54)), random_ids(54, 2, 4))],  # logits in the hundreds: exp overflows unshifted
    reference=_inference_probs, diagnose=_q5_diagnose, source=_q5_source,
    hints=("Call the broken function twice on the same input and compare; then give it a batch of three "
           "rows and look at the shape of what comes back.",
           "Two bugs: one is about the model's mode (what dropout does while training), one about which "
           "rows of the logits are kept.",
           "model.eval() before the forward pass (inside torch.no_grad()), and logits[:, -1, :] instead of "
           "logits[0, -1]."),
))
