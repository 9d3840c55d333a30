"""Predict tasks cannot be solved by reading the answer off a failed check: a failed check says
which way a number is off, or how many entries of a tensor are wrong, and shows the expected answer only
after PREDICT_TRIES failed tries in the notebook; the grader (Task.evaluate) never shows it."""

import importlib

import pytest
import torch

from nexttoken.exercises import CHAPTERS, chapter
from nexttoken.recorder.calling import copy_args
from nexttoken.exercises.feedback import show
from nexttoken.exercises.task import PREDICT_TRIES

PREDICT = [(ch, name) for ch in CHAPTERS for name in chapter(ch).TASKS
           if getattr(chapter(ch), name).kind == "predict"]


def test_there_are_predict_tasks():
    assert {"ch02.q5", "ch03.q3", "ch06.q8", "ch07.q4"} <= {f"{ch}.{name}" for ch, name in PREDICT}


def _expected_texts(task, reason):
    """How the expected output of the failing input would read in the feedback."""
    for args in task.cases():
        if task.call_text(args) in reason:
            expected = task.reference(*copy_args(args))
            return [f"expected: {expected}"] + ([show(expected)] if isinstance(expected, torch.Tensor)
                                                else [f" {expected}\n", f" {expected},"])
    return []


@pytest.mark.parametrize("ch, name", PREDICT)
def test_the_grader_never_shows_a_predict_tasks_answer(ch, name):
    task = getattr(chapter(ch), name)
    wrong = [m for m in importlib.import_module(f"exercise_mutants.{ch}").MUTANTS if m.task == name]
    assert len(wrong) >= 6
    for m in wrong:
        torch.manual_seed(0)
        status, reason = task.evaluate(task.run(m.fn))
        if status != "failed" or "reproduce:" not in reason:  # judged outputs (not a broken rule or an error)
            continue
        assert "expected:" not in reason and "expected answer is not shown" in reason, (m.name, reason)
        rest = "\n".join(line for line in reason.splitlines()  # all but the input and the learner's output
                         if not line.strip().startswith(("input:", "got:"))) + "\n"
        for text in _expected_texts(task, reason):
            assert text not in rest, (m.name, text, reason)


def _checks(task, fn, capsys, times):
    task._tries = 0
    try:
        outputs = []
        for _ in range(times):
            task.check(fn)
            outputs.append(capsys.readouterr().out)
        return outputs
    finally:
        task._tries = 0


def test_a_wrong_count_says_which_way_it_is_off_and_shows_the_answer_after_three_tries(capsys):
    q4 = chapter("ch07").q4
    right = q4.reference
    high = _checks(q4, lambda P, n, cached: right(P, n, cached) + 1, capsys, PREDICT_TRIES + 1)
    for i, out in enumerate(high[:PREDICT_TRIES], start=1):
        assert out.startswith("❌") and "which is too high" in out and "expected:" not in out, out
        assert f"try {i} of {PREDICT_TRIES}" in out, out
    assert "the next failed check shows the expected answer" in high[PREDICT_TRIES - 1]
    assert f"expected: {right(4, 1, False)}" in high[-1] and "too high" not in high[-1], high[-1]
    low = _checks(q4, lambda P, n, cached: right(P, n, cached) - 1, capsys, 1)[0]
    assert "which is too low" in low and "expected:" not in low, low


def test_a_wrong_tensor_prediction_counts_its_wrong_entries_without_showing_them(capsys):
    q5 = chapter("ch02").q5
    out = _checks(q5, lambda T, j: torch.arange(T) > j, capsys, 1)[0]  # position j itself left out
    assert "position j changes too" in out and "changed_positions(T=1, j=0)" in out, out
    assert "got:      tensor([False]), with its only entry wrong" in out and "expected:" not in out, out
    out = _checks(q5, lambda T, j: torch.arange(T) >= j if T == 1 else torch.arange(T) > j, capsys, 1)[0]
    assert "changed_positions(T=6, j=2)" in out and "1 of its 6 entries wrong" in out, out
    assert "expected:" not in out and "tensor([False, False, True, True, True, True])" not in out, out


def test_the_tries_count_across_answers(capsys):
    from nexttoken.exercises.ch03 import _count  # the count by formula (q3's reference builds the model)

    q3 = chapter("ch03").q3
    q3._tries = 0
    try:
        for offset in range(1, PREDICT_TRIES + 1):  # three different wrong answers: three tries
            q3.check(lambda c, k=offset: _count(c) + k)
        capsys.readouterr()
        q3.check(lambda c: _count(c) - 5)
        assert f"expected: {_count(q3.cases()[0][0])}" in capsys.readouterr().out
        q3.check(_count)
        assert capsys.readouterr().out.startswith("✅")
    finally:
        q3._tries = 0


def test_a_stub_does_not_use_up_a_try(capsys):
    q6 = chapter("ch06").q8

    def stub(eos_steps, max_new_tokens):
        raise NotImplementedError("write your code here")
    assert all("NotImplementedError" in out for out in _checks(q6, stub, capsys, PREDICT_TRIES + 1))
    q6._tries = 0
    try:
        for _ in range(PREDICT_TRIES + 1):
            q6.check(stub)
        assert q6._tries == 0
    finally:
        q6._tries = 0


def test_a_reversed_direction_is_shown_on_an_input_where_it_shows(capsys):
    """At j = 0 the past of j and j alone are the same one position: the first input that rejects '<= j'
    must have positions on both sides of j, so the learner's got tensor shows the reversal."""
    out = _checks(chapter("ch02").q5, lambda T, j: torch.arange(T) <= j, capsys, 1)[0]
    assert "that is the past, not the future" in out and "changed_positions(T=6, j=2)" in out, out
    assert "tensor([True, True, True, False, False, False])" in out, out
