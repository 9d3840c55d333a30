"""Chapter 5, the generation loop: tasks for the exercise notebook."""

import torch

from ..generate import generate
from .common import random_ids, small_model
from .task import Mistake, Task, compare_tensors

TASKS = ["q1", "q2"]


def _step(model, input_ids):
    return generate(model, input_ids, 1)


def _q1_diagnose(args, expected, got):
    model, ids = args
    if isinstance(got, torch.Tensor) and tuple(got.shape) == (ids.shape[0],):
        raise Mistake("you returned only the new token; append it to the sequence with torch.cat")
    if isinstance(got, torch.Tensor) and got.shape == ids.shape:
        raise Mistake("the sequence did not grow: append the new token (torch.cat along dim=1)")
    if isinstance(got, torch.Tensor) and got.shape == expected.shape and not torch.equal(got[:, :-1], ids):
        raise Mistake("the prompt changed: keep input_ids as they are and add one token at the end")
    compare_tensors(expected, got, "your extended sequence")


q1 = Task(
    name="q1", function="generation_step", title="one greedy step",
    cases=lambda: [(small_model(5), random_ids(5, 1, 4)), (small_model(6), random_ids(6, 3, 7))],
    reference=_step, diagnose=_q1_diagnose,
    hint_text="probs of the last position -> argmax(dim=-1) -> shape (B,); "
              "torch.cat([input_ids, next_token[:, None]], dim=1).",
    solution_text=("def generation_step(model, input_ids):\n    logits = model(input_ids)\n"
                   "    probs = torch.softmax(logits[:, -1, :], dim=-1)\n    next_token = probs.argmax(dim=-1)\n"
                   "    return torch.cat([input_ids, next_token[:, None]], dim=1)"),
)


def _q2_diagnose(args, expected, got):
    model, ids, n = args
    if isinstance(got, torch.Tensor) and got.dim() == 2 and got.shape[1] != expected.shape[1]:
        raise Mistake(f"expected {n} new tokens after the prompt of {ids.shape[1]}, "
                      f"got {got.shape[1] - ids.shape[1]}")
    compare_tensors(expected, got, "your generated sequence")


q2 = Task(
    name="q2", function="generate_greedy", title="the generation loop",
    cases=lambda: [(small_model(7), random_ids(7, 1, 3), 5), (small_model(8), random_ids(8, 2, 2), 8),
                   (small_model(9), random_ids(9, 1, 4), 0)],
    reference=lambda model, ids, n: generate(model, ids, n), diagnose=_q2_diagnose,
    hint_text="Repeat your generation_step max_new_tokens times (zero times returns the prompt). "
              "The test sequences fit in the context window.",
    solution_text=("def generate_greedy(model, input_ids, max_new_tokens):\n    ids = input_ids\n"
                   "    for _ in range(max_new_tokens):\n        ids = generation_step(model, ids)\n    return ids"),
)
