"""Chapter 2, the causal mask: tasks for the exercise notebook."""

import math

import torch

from ..model import causal_mask as library_causal_mask
from .common import seeded
from .task import Mistake, Task, compare_tensors

TASKS = ["q1", "q2", "q3"]


def _q1_diagnose(args, expected, got):
    if isinstance(got, torch.Tensor) and got.shape == expected.shape:
        got_bool = got.bool()
        T = args[0]
        future = ~library_causal_mask(T)
        if got_bool[future].any():
            raise Mistake("future positions are visible: entry (i, j) must be False when j > i "
                          "(a lower-triangular mask, torch.tril)")
        if T > 0 and not got_bool.diagonal().all():
            raise Mistake("a position cannot see itself: the diagonal (j == i) must be True")
    compare_tensors(expected, got, "your mask")


q1 = Task(
    name="q1", function="causal_mask", title="the causal mask",
    cases=lambda: [(1,), (4,), (7,)], reference=lambda T: library_causal_mask(T), diagnose=_q1_diagnose,
    hint_text="torch.ones(T, T, dtype=torch.bool).tril() keeps the diagonal and everything below it.",
    solution_text="def causal_mask(T):\n    return torch.ones(T, T, dtype=torch.bool).tril()",
)


def _masked(scores):
    T = scores.shape[-1]
    return scores.masked_fill(~library_causal_mask(T), float("-inf"))


def _q2_diagnose(args, expected, got):
    scores = args[0]
    if isinstance(got, torch.Tensor) and got.shape == expected.shape:
        future = ~library_causal_mask(scores.shape[-1])
        if (got[..., future] == 0).all() and future.any():
            raise Mistake("you used 0 instead of -inf for the future: softmax gives exp(0) = 1 a real weight, "
                          "so the future still leaks in. Fill with float('-inf')")
        if not torch.isinf(got[..., future]).all():
            raise Mistake("some future scores (j > i) are not -inf")
        if torch.isinf(got[..., ~future]).any():
            raise Mistake("you masked the past or the diagonal: only j > i should be -inf")
    compare_tensors(expected, got, "your masked scores")


q2 = Task(
    name="q2", function="mask_scores", title="masking the attention scores",
    cases=lambda: [(torch.randn(3, 3, generator=seeded(1)),), (torch.randn(2, 4, 5, 5, generator=seeded(2)),)],
    reference=_masked, diagnose=_q2_diagnose,
    hint_text="scores.masked_fill(~mask, float('-inf')) with mask = causal_mask(T) for T = scores.shape[-1]. "
              "Don't change scores in place (no trailing underscore).",
    solution_text=("def mask_scores(scores):\n    T = scores.shape[-1]\n"
                   "    return scores.masked_fill(~causal_mask(T), float('-inf'))"),
)


def _weights(q, k):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(_masked(scores), dim=-1)


def _q3_diagnose(args, expected, got):
    q, k = args
    if isinstance(got, torch.Tensor) and got.shape == expected.shape:
        if torch.isnan(got).any():
            raise Mistake("NaN in your weights: are you multiplying 0 by -inf, or masking after the softmax?")
        future = ~library_causal_mask(q.shape[-2])
        if (got[..., future].abs() > 1e-6).any():
            raise Mistake("future positions get weight: mask the scores with -inf before the softmax")
        unscaled = torch.softmax(_masked(q @ k.transpose(-2, -1)), -1)
        if torch.allclose(got, unscaled, atol=1e-5):
            raise Mistake("you forgot to divide the scores by sqrt(head_dim)")
        if not torch.allclose(got.sum(-1), torch.ones(got.shape[:-1]), atol=1e-4):
            raise Mistake("each row of weights should sum to 1: take the softmax over the last dimension (keys)")
    compare_tensors(expected, got, "your attention weights")


q3 = Task(
    name="q3", function="attention_weights", title="causal attention weights",
    cases=lambda: [(torch.randn(4, 8, generator=seeded(3)), torch.randn(4, 8, generator=seeded(4))),
                   (torch.randn(2, 3, 6, 16, generator=seeded(5)), torch.randn(2, 3, 6, 16, generator=seeded(6)))],
    reference=_weights, diagnose=_q3_diagnose,
    hint_text="scores = q @ k.transpose(-2, -1) / sqrt(d); mask them with -inf (your mask_scores); "
              "softmax over the last dimension.",
    solution_text=("def attention_weights(q, k):\n"
                   "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
                   "    return torch.softmax(mask_scores(scores), dim=-1)"),
)
