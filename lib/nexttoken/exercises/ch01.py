"""Chapter 1, the chain rule: tasks for the exercise notebook."""

import torch

from .common import random_ids, seeded
from .task import Mistake, Task, compare_tensors

TASKS = ["q1", "q2"]


def _q1_cases():
    short = torch.rand(2, 5, generator=seeded(1)) * 0.9 + 0.05
    long = torch.rand(1, 400, generator=seeded(2)) * 0.02 + 0.001  # a product that underflows float32
    return [(short,), (long,), (torch.tensor([[1.0, 0.5, 0.25]]),)]


def _q1_reference(step_probs):
    return torch.log(step_probs).sum(dim=-1)


def _q1_diagnose(args, expected, got):
    step_probs = args[0]
    if isinstance(got, torch.Tensor) and got.shape == expected.shape:
        if torch.isinf(got).any() and not torch.isinf(expected).any():
            raise Mistake("you got -inf: multiplying hundreds of small probabilities underflows to 0. "
                          "Add log-probabilities instead of multiplying probabilities")
        if torch.allclose(got.double(), torch.log10(step_probs.double()).sum(-1), atol=1e-4):
            raise Mistake("you used log10; the chain rule in nats uses the natural log, torch.log")
        if torch.allclose(got.double(), torch.log(step_probs.double()).mean(-1), atol=1e-4):
            raise Mistake("you averaged the log-probabilities; the log of a product is their sum")
    if isinstance(got, torch.Tensor) and got.shape == step_probs.shape:
        raise Mistake("you returned one value per step; sum over the time dimension to get one per sequence")
    compare_tensors(expected, got)


q1 = Task(
    name="q1", function="log_prob_from_step_probs", title="log-probability of a sequence",
    cases=_q1_cases, reference=_q1_reference, diagnose=_q1_diagnose,
    hint_text="log(a * b * c) = log a + log b + log c. Take torch.log of the probabilities, then sum over dim=-1.",
    solution_text="def log_prob_from_step_probs(step_probs):\n    return torch.log(step_probs).sum(dim=-1)",
)


def _q2_cases():
    return [(torch.randn(2, 6, 11, generator=seeded(3)), random_ids(4, 2, 6, vocab=11)),
            (torch.randn(1, 3, 7, generator=seeded(5)) * 3, random_ids(6, 1, 3, vocab=7))]


def _q2_reference(logits, input_ids):
    log_probs = torch.log_softmax(logits[:, :-1], dim=-1)
    return log_probs.gather(-1, input_ids[:, 1:, None]).squeeze(-1)


def _q2_diagnose(args, expected, got):
    logits, ids = args
    if isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(ids.shape):
        raise Mistake("you returned T values per row; position t predicts token t + 1, so there are T - 1: "
                      "drop the last position's logits and the first token")
    if isinstance(got, torch.Tensor) and got.shape == expected.shape:
        unshifted = torch.log_softmax(logits[:, 1:], -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        if torch.allclose(got, unshifted, atol=1e-4):
            raise Mistake("off by one: the logits at position t - 1 (not t) score token t")
        if (got > 0).any():
            raise Mistake("some values are positive: use log_softmax (log-probabilities are <= 0), not raw logits")
        probs = torch.softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        if torch.allclose(got, probs, atol=1e-4):
            raise Mistake("these are probabilities; take their log (use torch.log_softmax)")
    compare_tensors(expected, got)


q2 = Task(
    name="q2", function="token_log_probs_from_logits", title="per-token log-probabilities (teacher forcing)",
    cases=_q2_cases, reference=_q2_reference, diagnose=_q2_diagnose,
    hint_text="Position t - 1 predicts token t: use logits[:, :-1] and targets input_ids[:, 1:]. "
              "torch.log_softmax over the vocabulary, then .gather(-1, targets[..., None]).",
    solution_text=("def token_log_probs_from_logits(logits, input_ids):\n"
                   "    log_probs = torch.log_softmax(logits[:, :-1], dim=-1)\n"
                   "    return log_probs.gather(-1, input_ids[:, 1:, None]).squeeze(-1)"),
)
