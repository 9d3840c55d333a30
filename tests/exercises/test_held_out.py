"""The grader's held-out test inputs (nexttoken/exercises/held_out.py): other inputs than the visible ones,
at least as discriminating on their own, and named but never shown in feedback."""

import importlib

import pytest
import torch

from nexttoken.exercises import CHAPTERS, chapter, solutions
from nexttoken.exercises.held_out import CASES, cases_of, held_out_only, judged

TASKS = [(ch, name) for ch in CHAPTERS for name in chapter(ch).TASKS]


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape \
            and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, torch.Generator) or isinstance(b, torch.Generator):
        return isinstance(a, torch.Generator) and isinstance(b, torch.Generator) \
            and torch.equal(a.get_state(), b.get_state())
    if isinstance(a, torch.nn.Module) or isinstance(b, torch.nn.Module):
        return a is b
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def test_every_task_has_held_out_cases_and_nothing_else_does():
    assert set(CASES) == {f"{ch}.{name}" for ch, name in TASKS}


@pytest.mark.parametrize("ch,name", TASKS)
def test_held_out_cases_are_named_new_and_rebuilt_identically(ch, name):
    task = getattr(chapter(ch), name)
    held = cases_of(task)
    names = [n for n, _ in held]
    assert len(held) >= 3 and all(isinstance(n, str) and n for n in names) and len(set(names)) == len(names)
    visible = task.cases()
    for label, args in held:
        assert not any(same(args, v) for v in visible), f"{ch}.{name} held-out {label!r} is a visible case"
    again = cases_of(task)
    assert all(same(a, b) for (_, a), (_, b) in zip(held, again) if not any(
        isinstance(x, torch.nn.Module) for x in a))  # models are rebuilt, so compared by their outputs below
    solution = solutions(ch)[task.function]
    torch.manual_seed(0)
    assert held_out_only(task, solution)[0] == "passed"


def bank(ch):
    return importlib.import_module(f"exercise_mutants.{ch}")


@pytest.mark.slow  # about 50 s in all: every mutant again on other inputs, chapter 1's loops of 10,000 draws among them
@pytest.mark.parametrize("ch", CHAPTERS)
def test_held_out_cases_alone_reject_every_wrong_answer_and_pass_every_right_one(ch):
    """As discriminating as the visible cases: each mutant of the bank fails on the held-out inputs
    alone, and every right answer written differently passes them."""
    module = chapter(ch)
    survivors = []
    for m in bank(ch).MUTANTS:
        torch.manual_seed(0)
        if held_out_only(getattr(module, m.task), m.fn)[0] == "passed":
            survivors.append(f"{m.task}.{m.name}")
    assert not survivors, f"wrong answers the held-out cases alone let through: {survivors}"
    rejected = []
    for m in bank(ch).CORRECT:
        torch.manual_seed(0)
        status, reason = held_out_only(getattr(module, m.task), m.fn)
        if status != "passed":
            rejected.append(f"{m.task}.{m.name}: {reason}")
    assert not rejected, "\n".join(rejected)


def tuned_causal_mask(T):
    """Right on the visible inputs of ch02.q1 only: an answer fitted to what check() shows."""
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    return mask if T in (1, 3, 6, 17, 40) else mask.T


def test_an_answer_tuned_to_the_visible_cases_fails_the_held_out_ones_without_seeing_them():
    q1 = chapter("ch02").q1
    assert q1.evaluate(q1.run(tuned_causal_mask)) == ("passed", "all 5 tests passed")
    status, reason = held_out_only(q1, tuned_causal_mask)
    assert status == "failed"
    assert f"held-out test 1 of {len(cases_of(q1))}" in reason and "not shown" in reason
    assert "T = 2" not in reason  # its name would say its input
    for shown in ("tensor(", "expected:", "got:", "reproduce", "failing_input"):
        assert shown not in reason, (shown, reason)


def test_a_right_answer_passes_with_the_held_out_cases_counted():
    q1 = chapter("ch02").q1
    right = solutions("ch02")["causal_mask"]
    status, reason = held_out_only(q1, right)
    count = len(cases_of(q1))
    assert (status, reason) == ("passed", f"all {count} tests passed ({count} of them held out)")


def test_an_error_on_a_held_out_case_names_it_without_its_input():
    q2 = chapter("ch06").q4

    def fails_on_big_pad_ids(next_tokens, finished, pad_token_id):
        if pad_token_id > 20:
            raise ValueError("pad too big")
        return torch.where(finished, pad_token_id, next_tokens)

    status, reason = held_out_only(q2, fails_on_big_pad_ids)
    assert status == "error"
    assert reason.startswith("pad_finished(...) on held-out test ") and reason.endswith("it raised an exception")
    assert "pad too big" not in reason and "tensor(" not in reason and "pad id 50" not in reason


def test_nothing_of_the_learners_text_is_repeated_on_a_held_out_case():
    """The learner's process holds the held-out inputs while it runs them, so whatever text or value it
    returns or raises there could be those inputs: the verdict repeats none of it, whatever
    outcome was recorded: not even an exception's type, whose name its code chooses
    (type("<the inputs in CJK characters>", (Exception,), {}) would carry every ch02 input out)."""
    q1 = chapter("ch02").q1
    count = len(cases_of(q1))
    secret = "T=2 T=9 SECRET-HELD-OUT"
    for outcome in (("error", f"ValueError: {secret}"), ("error", f"{secret}: x"), ("error", "SECRET二九三三: x"),
                    ("broke_rule", secret),
                    ("changed_input", secret), ("ok", secret), ("ok", [secret]), ("missing", secret),
                    ("weird", secret)):
        status, reason = q1.evaluate([outcome] * count, *judged(q1))
        assert status != "passed" and "SECRET" not in reason and "T=2" not in reason, (outcome, reason)
        assert reason.startswith("causal_mask(...) on held-out test 1 of"), reason


def test_visible_feedback_is_unchanged_by_the_held_out_cases():
    """check() and the default grading run judge the visible inputs only, with their inputs shown."""
    q1 = chapter("ch02").q1
    status, reason = q1.evaluate(q1.run(lambda T: torch.ones(T, T, dtype=torch.bool).triu()))
    assert status == "failed" and "input:    causal_mask(T=3)" in reason and "held-out" not in reason
