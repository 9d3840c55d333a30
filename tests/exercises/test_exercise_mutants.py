"""Mutation testing of the exercise checks: every wrong answer in tests/exercise_mutants/ must fail its
task's check, and a mistake the check claims to recognise must get its specific message."""

import importlib
import importlib.util
from pathlib import Path

import pytest
import torch
from helpers import load_script

from nexttoken.exercises import CHAPTERS, chapter

ROOT = Path(__file__).resolve().parents[2]


def bank(ch):
    return importlib.import_module(f"exercise_mutants.{ch}").MUTANTS
MIN_MUTANTS_PER_TASK = 6


def feedback(task, fn) -> tuple[str, str]:
    """The verdict ``check()`` gives (without its shrinking): the answer run on one fresh copy of the
    task's inputs, then judged on that same copy."""
    cases = task.cases()
    return task.evaluate(task.run(fn, cases), cases)


# Chapters 5 and 6's banks build a small model for most inputs of each of their 145 mutants (a fresh copy of the
# inputs per mutant, as check() makes): 12 and 10 s of the fast tier's test time (measured), which ran 87-97 s
# from clean clones on a 2-core AMD EPYC, against its aim of 90 s.
# They run in the full run's slow tier (in the sandbox tests' session, there the shorter one by 14 s without them);
# `.venv/bin/python -m pytest tests/exercises -k every_mutant` runs every bank.
SLOW_BANKS = ("ch05", "ch06")


@pytest.mark.parametrize("ch", [pytest.param(ch, marks=[pytest.mark.slow, pytest.mark.sandbox_session])
                                if ch in SLOW_BANKS else ch for ch in CHAPTERS])
def test_every_mutant_is_rejected_with_its_message(ch, terminal_summary):
    module = chapter(ch)
    survivors, wrong_message = [], []
    for m in bank(ch):
        torch.manual_seed(0)  # mutants that draw from the global random state do the same in every run
        status, reason = feedback(getattr(module, m.task), m.fn)
        if status == "passed":
            survivors.append(f"{m.task}.{m.name}")
        elif m.expect is not None and m.expect not in reason:
            wrong_message.append(f"{m.task}.{m.name}: expected {m.expect!r} in:\n{reason}")
        elif m.expect is None and status == "failed":
            # an unnamed mistake still gets the evidence: expected vs got, or the first difference
            assert "expected" in reason or "first difference" in reason, (m.name, reason)
    total = len(bank(ch))
    terminal_summary.append(f"exercise mutants {ch}: {total - len(survivors)}/{total} rejected, "
                            f"{total - len(survivors) - len(wrong_message)} with the expected message")
    assert not survivors, f"wrong answers that pass the check: {survivors}"
    assert not wrong_message, "\n\n".join(wrong_message)


@pytest.mark.parametrize("ch", CHAPTERS)
def test_every_task_has_a_bank_of_wrong_answers(ch):
    counts = {name: 0 for name in chapter(ch).TASKS}
    for m in bank(ch):
        counts[m.task] += 1
    assert all(n >= MIN_MUTANTS_PER_TASK for n in counts.values()), counts
    assert len(chapter(ch).TASKS) >= 3


def right_answers(ch):
    return importlib.import_module(f"exercise_mutants.{ch}").CORRECT


@pytest.mark.parametrize("ch", CHAPTERS)
def test_right_answers_written_differently_pass(ch):
    """Right answers that differ from the solution (another formula, numpy integers, other shapes on the
    way) pass: the checks judge the result and the stated rules, not the solution's wording."""
    module = chapter(ch)
    rejected = []
    for m in right_answers(ch):
        torch.manual_seed(0)
        status, reason = feedback(getattr(module, m.task), m.fn)
        if status != "passed":
            rejected.append(f"{m.task}.{m.name}: {reason}")
    assert right_answers(ch) and not rejected, "\n\n".join(rejected)


@pytest.mark.slow  # 1 to 2 minutes in the full run: hundreds of mutants, each checked
@pytest.mark.sandbox_session  # the other session of scripts/test.sh's slow tier is the longer one
def test_no_machine_made_mutant_of_a_solution_survives():
    """scripts/mutate_checks.py's mutants of every solution function fail their check, except those
    listed as equivalent (with why) in scripts/equivalent_mutants.txt; and every listed one still occurs."""
    mutate = load_script("scripts/mutate_checks.py")
    equivalent = mutate.equivalent_mutants()
    survivors, equivalent_seen = [], 0
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # hundreds of tiny runs: threads only contend
    try:
        for ch in CHAPTERS:
            namespace = mutate.solution_namespace(ch)
            for name in chapter(ch).TASKS:
                _, same, left = mutate.mutate_task(getattr(chapter(ch), name), namespace, equivalent, show=False)
                survivors += left
                equivalent_seen += same
    finally:
        torch.set_num_threads(threads)
    assert not survivors, survivors
    assert equivalent_seen == len(equivalent), "an entry of equivalent_mutants.txt no longer occurs"


@pytest.mark.slow  # about a minute
@pytest.mark.sandbox_session  # as above: the other session was still 95 s longer (clean clone, the EPYC)
def test_mutmut_leaves_no_survivor_in_chapter_one(tmp_path):
    """scripts/mutate_checks.py --tool mutmut works end to end (mutmut's own mutants, its fork server, the
    survivors read back and matched with equivalent_mutants_mutmut.txt) on the smallest chapter; the
    whole course takes minutes: .venv/bin/python scripts/mutate_checks.py --tool mutmut."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "mutate_checks.py"), "--tool", "mutmut", "ch01",
                          "--keep", str(tmp_path / "mutmut")], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    total = run.stdout.strip().splitlines()[-1]
    assert total.startswith("total: ") and " 0 survived" in total and not total.startswith("total: 0 killed"), total
