"""Chapter 6, termination: tasks for the exercise notebook."""

import torch

from ..generate import generate
from .common import small_model
from .task import Mistake, Task, compare_tensors

TASKS = ["q1", "q2", "q3"]


def _update(finished, next_tokens, eos_token_id):
    return finished | (next_tokens == eos_token_id)


def _q1_diagnose(args, expected, got):
    finished, tokens, eos = args
    if isinstance(got, torch.Tensor) and got.shape == expected.shape:
        if (finished & ~got.bool()).any():
            raise Mistake("a row that had finished is unfinished again: once a row produced EOS it stays "
                          "finished (combine with |, not =)")
    compare_tensors(expected, got, "your finished flags")


q1 = Task(
    name="q1", function="update_finished", title="which rows have finished",
    cases=lambda: [(torch.tensor([False, False, True]), torch.tensor([7, 3, 5]), 3),
                   (torch.tensor([False, True, True, False]), torch.tensor([3, 1, 3, 2]), 3)],
    reference=_update, diagnose=_q1_diagnose,
    hint_text="A row is finished if it was already finished, or if its new token is the EOS id.",
    solution_text=("def update_finished(finished, next_tokens, eos_token_id):\n"
                   "    return finished | (next_tokens == eos_token_id)"),
)


def _pad(next_tokens, finished, pad_token_id):
    return torch.where(finished, pad_token_id, next_tokens)


def _q2_diagnose(args, expected, got):
    tokens, finished, pad = args
    if isinstance(got, torch.Tensor) and got.shape == expected.shape:
        if (got[finished] != pad).any():
            raise Mistake("a finished row is not padded: rows that finished earlier must get the pad id")
        if (got[~finished] != tokens[~finished]).any():
            raise Mistake("you replaced the token of a row still running (its EOS token, maybe: the EOS "
                          "itself is kept; only later slots are padding)")
    compare_tensors(expected, got, "your tokens")


q2 = Task(
    name="q2", function="pad_finished", title="padding finished rows",
    cases=lambda: [(torch.tensor([4, 9, 2]), torch.tensor([False, True, False]), 0),
                   (torch.tensor([3, 3, 8, 1]), torch.tensor([True, False, False, True]), 9)],
    reference=_pad, diagnose=_q2_diagnose,
    hint_text="torch.where(finished, pad_token_id, next_tokens): `finished` is the state before this step.",
    solution_text=("def pad_finished(next_tokens, finished, pad_token_id):\n"
                   "    return torch.where(finished, pad_token_id, next_tokens)"),
)


def _q3_cases():
    model = small_model(11)
    prompt = torch.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    free = generate(model, prompt, 6)[:, 3:]
    eos = int(free[0, 1])  # a token greedy decoding really produces, so rows stop at different steps
    return [(model, prompt, 6, eos, 0), (model, prompt[1:], 6, int(free[1, 0]), 49), (model, prompt, 6, 49, 0)]


def _q3_diagnose(args, expected, got):
    model, ids, n, eos, pad = args
    if isinstance(got, torch.Tensor) and got.dim() == 2 and got.shape[0] == expected.shape[0]:
        new, want = got[:, ids.shape[1]:], expected[:, ids.shape[1]:]
        for row in range(want.shape[0]):
            stops = (want[row] == eos).nonzero()
            if len(stops):
                s = int(stops[0])
                if s >= new.shape[1] or new[row, s] != eos:
                    raise Mistake(f"row {row}: its EOS token was dropped; the EOS is kept in the output")
                if (new[row, s + 1:] != pad).any():
                    raise Mistake(f"row {row} finished but was not padded after its EOS")
        if got.shape[1] > expected.shape[1]:
            raise Mistake("the loop went on after every row had finished: stop when all rows are done")
        if got.shape[1] < expected.shape[1]:
            raise Mistake("the loop stopped too early: stop when all rows are done, or after max_new_tokens")
    compare_tensors(expected, got, "your generated sequence")


q3 = Task(
    name="q3", function="generate_with_eos", title="a batch loop that stops",
    cases=_q3_cases,
    reference=lambda model, ids, n, eos, pad: generate(model, ids, n, eos_token_id=eos, pad_token_id=pad),
    diagnose=_q3_diagnose,
    hint_text="Keep a `finished` flag per row. Each step: pick the greedy token, pad_finished it, append, "
              "update_finished, and break if finished.all().",
    solution_text=("def generate_with_eos(model, input_ids, max_new_tokens, eos_token_id, pad_token_id):\n"
                   "    ids = input_ids\n    finished = torch.zeros(ids.shape[0], dtype=torch.bool)\n"
                   "    for _ in range(max_new_tokens):\n"
                   "        next_tokens = torch.softmax(model(ids)[:, -1, :], dim=-1).argmax(dim=-1)\n"
                   "        next_tokens = pad_finished(next_tokens, finished, pad_token_id)\n"
                   "        ids = torch.cat([ids, next_tokens[:, None]], dim=1)\n"
                   "        finished = update_finished(finished, next_tokens, eos_token_id)\n"
                   "        if finished.all():\n            break\n    return ids"),
)
