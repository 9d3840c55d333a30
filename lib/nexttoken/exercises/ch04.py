"""Chapter 4, logit slicing: tasks for the exercise notebook."""

import torch

from .common import random_ids, seeded, small_model
from .task import Mistake, Task, compare_tensors

TASKS = ["q1", "q2"]


def _q1_diagnose(args, expected, got):
    logits = args[0]
    if isinstance(got, torch.Tensor) and got.shape == expected.shape and torch.equal(got, logits[:, 0]):
        raise Mistake("you took the first position; the next token is predicted by the last one, logits[:, -1, :]")
    if isinstance(got, torch.Tensor) and got.shape == logits[-1].shape:
        raise Mistake("you sliced the batch dimension (logits[-1]); slice time: logits[:, -1, :]")
    compare_tensors(expected, got, "your slice")


q1 = Task(
    name="q1", function="last_logits", title="the last position's logits",
    cases=lambda: [(torch.randn(2, 5, 11, generator=seeded(1)),), (torch.randn(3, 1, 7, generator=seeded(2)),)],
    reference=lambda logits: logits[:, -1, :], diagnose=_q1_diagnose,
    hint_text="Dimensions are (batch, time, vocab): keep every row, the last time step, every token.",
    solution_text="def last_logits(logits):\n    return logits[:, -1, :]",
)


@torch.no_grad()
def _next_token_probs(model, input_ids):
    return torch.softmax(model(input_ids)[:, -1, :], dim=-1)


def _q2_diagnose(args, expected, got):
    model, ids = args
    if isinstance(got, torch.Tensor) and got.shape == expected.shape:
        if not torch.allclose(got.sum(-1), torch.ones(got.shape[0]), atol=1e-4):
            raise Mistake("each row should sum to 1: apply softmax over the vocabulary (dim=-1)")
        with torch.no_grad():
            if torch.allclose(got, model(ids)[:, -1, :], atol=1e-5):
                raise Mistake("these are logits: turn them into probabilities with torch.softmax")
    compare_tensors(expected, got, "your probabilities")


q2 = Task(
    name="q2", function="next_token_probs", title="next-token probabilities",
    cases=lambda: [(small_model(3), random_ids(3, 2, 6)), (small_model(4), random_ids(4, 1, 1))],
    reference=_next_token_probs, diagnose=_q2_diagnose,
    hint_text="logits = model(input_ids); keep logits[:, -1, :]; torch.softmax(..., dim=-1).",
    solution_text=("def next_token_probs(model, input_ids):\n    logits = model(input_ids)\n"
                   "    return torch.softmax(logits[:, -1, :], dim=-1)"),
)
