"""Chapter 2, the causal mask: tasks for the exercise notebook."""

import math

import torch

from ..model import causal_mask as library_causal_mask
from .diagnosis import Source
from .common import left_padded_mask, overflowed, random_ids, seeded, small_model, with_zeros
from .task import Known, Mistake, Question, Task, shortcut_rule

CHAPTER = "ch02"
TASKS = ["q1", "q2", "q3", "q4", "q5"]
# The core tasks: what the lesson asks of every learner and what an LMS grade counts by default (the notebook's
# "[core" headings say the same: tests/exercises/test_core_only.py); the rest is practice.
CORE = ["q5"]


def _q1_diagnose(args, expected, got):
    T = args[0]
    if tuple(got.shape) == (T, T) and got.dtype == torch.bool:
        if got[~library_causal_mask(T)].any():
            raise Mistake("future positions are visible: entry (i, j) must be False when j > i (the key comes "
                          "after the query); keep the diagonal and everything below it")
        if not got.diagonal().all():
            raise Mistake("a position cannot see itself: the diagonal (j == i) must be True (j <= i, not j < i)")


q1 = Question(Task(
    rebuilds=("nexttoken.model:causal_mask",),
    name="q1", function="causal_mask", title="the causal mask", chapter=CHAPTER,
    cases=lambda: [(1,), (3,), (6,), (17,), (40,)],  # 17 and 40: wider than any small fixed table
    # not the library's causal_mask: the rule makes it raise while the function checked runs
    reference=lambda T: torch.ones(T, T, dtype=torch.bool).tril(), diagnose=_q1_diagnose,
    forbid=shortcut_rule("nexttoken.causal_mask"),
    # recognised on every T tried, not on the first failing one alone: at T = 1 an inverted mask is [[False]],
    # which on its own looks like a hidden diagonal
    known=[
        Known("your mask is inverted: it is True for the future (j > i) and False for the past and the "
              "diagonal, the opposite of the rule. True marks a key the query may see: j <= i (torch.tril), "
              "not ~tril", lambda T: ~library_causal_mask(T)),
        Known("your mask is the causal mask transposed (torch.triu, not torch.tril): it shows each query the "
              "future (j > i) and hides its past (j < i). Keep the diagonal and the lower triangle",
              lambda T: library_causal_mask(T).T.contiguous()),
    ],
    hints=("Row i is a query and column j a key; which entries of the table are the query's past?",
           "The visible entries form a triangle that includes the diagonal; torch has a function that keeps "
           "one triangle of a matrix.",
           "Start from a (T, T) table of True (dtype=torch.bool) and keep its lower triangle."),
))


def _masked(scores):
    T = scores.shape[-1]
    return scores.masked_fill(~library_causal_mask(T), float("-inf"))


def _future_by_value(scores):
    return scores.masked_fill(scores.triu(1) != 0, float("-inf"))


def _past_by_value(scores):
    kept = scores.tril()
    return kept.masked_fill(kept == 0, float("-inf"))


def _q2_diagnose(args, expected, got):
    scores = args[0]
    if got.shape != expected.shape or not got.is_floating_point():
        return
    future = ~library_causal_mask(scores.shape[-1])
    if future.any() and (got[..., future] == 0).all():
        raise Mistake("the future holds 0, not -inf: softmax gives exp(0) = 1 a real weight, so the future "
                      "still leaks in. Fill with float('-inf')")
    if torch.isinf(got[..., ~future]).any():
        raise Mistake("you masked the past or the diagonal: only the entries with j > i (the future) are -inf")
    if future.any() and not torch.isinf(got[..., future]).all():
        fill = got[..., future][~torch.isinf(got[..., future])]
        if fill.max() < -1e4 and (fill == fill[0]).all():
            # exp(-1e9 - max) is exactly 0 in float32, so the weights come out the same here: what differs is
            # the masked score itself, and a finite fill masks only while every real score stays far above it
            raise Mistake(f"the future holds {float(fill[0]):g}, not -inf: a large negative number is not the "
                          f"same as -inf. Its softmax weight happens to underflow to exactly 0 in float32, but "
                          f"mask_scores returns the masked scores themselves, and a finite fill is only a "
                          f"stand-in that works while every real score stays far above it; -inf gives weight 0 "
                          f"whatever the scores. Fill with float('-inf')")
        raise Mistake("some future scores (j > i) are not -inf: fill every entry with j > i with float('-inf')")


def _q2_error(args, error):
    """A batch of scores, (..., T, T), read as if it were one (T, T) table."""
    scores = args[0]
    if scores.dim() <= 2:
        return None
    first, shape = scores.shape[0], tuple(scores.shape)
    if "must match the size of tensor" in error and f"({first})" in error:
        return (f"your mask is ({first}, {first}): T is the number of keys, the last dimension, scores.shape[-1]; "
                f"the scores here have shape {shape}, and scores.shape[0] = {first} is their first dimension, "
                f"not T")
    if "out of bounds for dimension" in error:
        return (f"out[i, j] indexes the first two dimensions, and for scores of shape {shape} those are not the "
                "query and the key: the query and the key are the last two, out[..., i, j] (or build the (T, T) "
                "mask once and use masked_fill, which broadcasts it over the leading dimensions)")


q2 = Question(Task(
    name="q2", function="mask_scores", title="masking the attention scores", chapter=CHAPTER, errors=_q2_error,
    cases=lambda: [(torch.randn(3, 3, generator=seeded(1)),), (torch.randn(1, 1, generator=seeded(3)),),
                   (torch.randn(2, 4, 5, 5, generator=seeded(2)),), (torch.randn(2, 20, 20, generator=seeded(4)),),
                   (with_zeros(torch.randn(5, 5, generator=seeded(5))),)],
    reference=_masked, diagnose=_q2_diagnose,
    known=[
        Known("the mask is inverted: you masked the past and the diagonal (where causal_mask(T) is True) and "
              "kept the future. -inf goes where the mask is False: masked_fill(~causal_mask(T), float('-inf'))",
              lambda s: s.masked_fill(library_causal_mask(s.shape[-1]), float("-inf"))),
        Known("you returned the softmax weights, not the masked scores: mask_scores stops before the softmax "
              "(attention_weights, q3, takes it). Return the scores with -inf in the future (j > i)",
              lambda s: torch.softmax(_masked(s), dim=-1)),
        Known("a future score of exactly 0 was not masked: you found the future by its value (scores.triu(1) "
              "!= 0), and a score can be 0. Mask by position, with ~causal_mask(T)", _future_by_value),
        Known("a past score of exactly 0 became -inf: you found the masked entries by their value (a 0 left by "
              "tril), and a real score can be 0. Mask by position, with ~causal_mask(T)", _past_by_value),
    ],
    hints=("Which value makes a softmax weight exactly 0?",
           "Build the mask for T = scores.shape[-1] with your causal_mask; it broadcasts over leading dims.",
           "Tensor.masked_fill puts a value wherever a bool mask is True: you want the future, so ~mask. "
           "Return a new tensor; the caller's scores stay as they were."),
))


def _scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])


def _weights(q, k):
    return torch.softmax(_masked(_scores(q, k)), dim=-1)


def _diagonal_hidden(q, k):
    s = _scores(q, k)
    return torch.softmax(s.masked_fill(~torch.ones_like(s, dtype=torch.bool).tril(-1), float("-inf")), -1)


def _q3_diagnose(args, expected, got):
    q, k = args
    if got.shape != expected.shape or not got.is_floating_point() or not torch.isnan(got).any():
        return
    if _scores(q, k).max() > 88:
        raise Mistake(f"NaN: {overflowed('scores', float(_scores(q, k).max()))}")
    if torch.allclose(got, _diagonal_hidden(q, k), atol=1e-4, equal_nan=True):
        raise Mistake("row 0 is NaN: query 0's only key is itself, and your mask hides it, so its softmax is "
                      "over nothing but -inf. The bug is in causal_mask (q1: the diagonal must be True), not here")
    raise Mistake("NaN in your weights: a softmax over a row that is all -inf, or arithmetic with -inf "
                  "(0 * -inf, inf - inf), gives NaN. Put -inf in the future scores with masked_fill (your "
                  "mask_scores), then take the softmax over the keys (dim=-1)")


q3 = Question(Task(
    name="q3", function="attention_weights", title="causal attention weights", chapter=CHAPTER,
    cases=lambda: [(torch.randn(4, 8, generator=seeded(3)), torch.randn(4, 8, generator=seeded(4))),
                   (torch.randn(1, 8, generator=seeded(7)), torch.randn(1, 8, generator=seeded(8))),  # T = 1
                   (torch.randn(2, 3, 6, 16, generator=seeded(5)), torch.randn(2, 3, 6, 16, generator=seeded(6))),
                   (torch.randn(1, 2, 20, 4, generator=seeded(9)), torch.randn(1, 2, 20, 4, generator=seeded(10))),
                   # query 2 is all zeros, so its scores are exactly 0: a mask found by value hides them
                   (torch.randn(5, 8, generator=seeded(11)).index_fill(0, torch.tensor([2]), 0.0),
                    torch.randn(5, 8, generator=seeded(12))),
                   # scores in the hundreds: exp without the max shift overflows (torch.softmax shifts)
                   (torch.randn(6, 8, generator=seeded(13)) * 12, torch.randn(6, 8, generator=seeded(14)) * 12)],
    reference=_weights, diagnose=_q3_diagnose,
    known=[
        Known("the mask is inverted: -inf went on the past and the diagonal (where causal_mask(T) is True), so "
              "each query attends to its future only, and the last query, which has none, gets NaN. Mask the "
              "future, ~causal_mask(T)",
              lambda q, k: torch.softmax(
                  _scores(q, k).masked_fill(library_causal_mask(q.shape[-2]), float("-inf")), -1)),
        Known("scores of exactly 0 were masked: you found the future by value (a 0 left by tril); mask by position "
              "with ~causal_mask(T) before the softmax",
              lambda q, k: torch.softmax(_past_by_value(_scores(q, k)), -1)),
        Known("a future score of exactly 0 got weight: you found the future by value (!= 0); mask by position",
              lambda q, k: torch.softmax(_future_by_value(_scores(q, k)), -1)),
        Known("you masked after the softmax: the weights of the past then no longer sum to 1. Put -inf in the "
              "future scores *before* the softmax",
              lambda q, k: torch.softmax(_scores(q, k), -1).masked_fill(~library_causal_mask(q.shape[-2]), 0.0)),
        Known("you forgot to divide the scores by sqrt(d) (d = q.shape[-1])",
              lambda q, k: torch.softmax(_masked(q @ k.transpose(-2, -1)), -1)),
        Known("you divided the scores by d; the scale is sqrt(d)",
              lambda q, k: torch.softmax(_masked(q @ k.transpose(-2, -1) / q.shape[-1]), -1)),
        Known("the softmax went over the queries (dim=-2); each query's weights over the keys are a row: "
              "softmax over dim=-1", lambda q, k: torch.softmax(_masked(_scores(q, k)), -2)),
        Known("future positions get weight: the scores were not masked (or masked with 0, not -inf)",
              lambda q, k: torch.softmax(_scores(q, k), -1)),
        Known("the future got weight: a score of 0 still has exp(0) = 1; mask with -inf",
              lambda q, k: torch.softmax(_scores(q, k).masked_fill(~library_causal_mask(q.shape[-2]), 0.0), -1)),
        Known("you transposed the weights: row i must be query i's weights over the keys (use "
              "q @ k.transpose(-2, -1), not k @ q.transpose(-2, -1))",
              lambda q, k: torch.softmax(_masked(k @ q.transpose(-2, -1) / math.sqrt(q.shape[-1])), -1)),
    ],
    hints=("Three steps: similarity scores, the mask, a normalisation. The order matters.",
           "Scores are the dot products of each query with each key, divided by sqrt(d); the mask goes on the "
           "scores, before the softmax.",
           "q @ k.transpose(-2, -1) has shape (..., T, T); after your mask_scores, softmax over the keys, "
           "which are the last dimension."),
))


def _padded(attention_mask):
    T = attention_mask.shape[-1]
    return library_causal_mask(T) & attention_mask.bool()[:, None, :]


def _q4_diagnose(args, expected, got):
    (mask,) = args
    T = mask.shape[-1]
    if tuple(got.shape) == (T, T):
        raise Mistake("you returned one (T, T) table; each row of the batch has its own padding, so the "
                      "result is (B, T, T): index the attention mask per row")


q4 = Question(Task(
    name="q4", function="padded_causal_mask", title="the causal mask of a left-padded batch", chapter=CHAPTER,
    cases=lambda: [(torch.tensor([[0, 1, 1]]),), (torch.tensor([[1]]),), (torch.tensor([[1, 1, 1, 1], [0, 0, 1, 1]]),),
                   (torch.tensor([[0, 0, 0, 1, 1], [1, 1, 1, 1, 1], [0, 1, 1, 1, 1]]),),
                   (left_padded_mask([13, 20, 1], 20),)],  # wider than any small fixed table
    reference=_padded, diagnose=_q4_diagnose,
    known=[
        Known("padding is visible: a pad slot (attention_mask 0) must be hidden as a *key* from every query",
              lambda m: library_causal_mask(m.shape[-1]).expand(m.shape[0], -1, -1)),
        Known("the future is visible: combine the padding with the causal mask (both must allow a key)",
              lambda m: m.bool()[:, None, :].expand(-1, m.shape[-1], -1)),
        Known("you hid pad *queries* (rows) instead of pad *keys* (columns): index the padding along the "
              "last dimension, attention_mask[:, None, :]",
              lambda m: library_causal_mask(m.shape[-1]) & m.bool()[:, :, None]),
        Known("you hid the real tokens and kept the padding: attention_mask is 1 for real tokens",
              lambda m: library_causal_mask(m.shape[-1]) & ~m.bool()[:, None, :]),
        Known("the diagonal is hidden: a real token always sees itself (j <= i)",
              lambda m: torch.ones(m.shape[-1], m.shape[-1], dtype=torch.bool).tril(-1) & m.bool()[:, None, :]),
    ],
    hints=("Two rules must both allow query i to look at key j: time order, and the key being a real token.",
           "The causal mask is the same for every row; the padding rule depends on the row and on the key "
           "(column) only.",
           "Combine a (T, T) causal mask with attention_mask reshaped to (B, 1, T) using &; broadcasting gives "
           "(B, T, T)."),
))


# q5 (predict): which positions' logits change when one token changes? The learner predicts from the
# mask alone; the reference finds out by running a model on two inputs that differ only at position j.

@torch.no_grad()
def _changed_positions(T, j):
    model = small_model(50)
    ids = random_ids(50, 1, T)
    other = ids.clone()
    other[0, j] = (ids[0, j] + 1) % model.config.vocab_size
    return (model(ids) - model(other)).abs().amax(-1)[0] > 1e-6


def _q5_diagnose(args, expected, got):
    T, j = args
    if tuple(got.shape) == (T, T):
        raise Mistake("you returned a whole (T, T) mask: the answer has one entry per position, shape (T,), True "
                      "where that position's row of the mask holds token j")
    if got.dtype == torch.bool and got.shape == expected.shape:
        if got[j] and not got[:j].any() and not got[j:].all():
            raise Mistake("not only the positions right after j: every later position, up to T - 1, reads token j "
                          "too (its row of the mask holds every earlier token)")
        if got[:j].any():
            raise Mistake(f"positions before j = {j} cannot change: their logits are computed from tokens 0 to t "
                          "only, and token j is not among them (the mask hides it)")
        if j < T and not got[j]:
            raise Mistake("position j itself changes: its own token is part of what it reads (the diagonal "
                          "of the mask is visible)")


q5 = Question(Task(
    name="q5", function="changed_positions", title="predict which logits change", chapter=CHAPTER, kind="predict",
    # positions from 0; a model of 16 positions. (6, 2) comes before any j = 0: there the past of j (<= j) and
    # j alone (== j) are one position, so a reversed direction would be shown on an input that hides it
    cases=lambda: [(1, 0), (6, 2), (5, 0), (5, 4), (16, 7)],
    reference=_changed_positions, diagnose=_q5_diagnose,
    source=lambda T, j: Source(mask=library_causal_mask(T), column=j),  # the answer is column j of the mask
    known=[
        Known("position j changes too: the mask keeps the diagonal, so position j reads its own token",
              lambda T, j: torch.arange(T) > j),
        Known("that is the past, not the future: a change at j reaches positions j, j + 1, ... (later "
              "positions read earlier tokens, not the other way round; row j of the mask is what position j reads, "
              "column j who reads token j)", lambda T, j: torch.arange(T) <= j),
        Known("without a mask every position would change; with the causal mask only some do",
              lambda T, j: torch.ones(T, dtype=torch.bool)),
        Known("not only position j: every later position reads token j too",
              lambda T, j: torch.arange(T) == j),
    ],
    hints=("Row t of the causal mask lists which tokens position t reads.",
           "Position t reads tokens 0 to t. Which positions have token j among those?",
           "Return a bool tensor of length T: True at t when j <= t (torch.arange(T) >= j)."),
))
