"""Forged recorder messages: the learner's code can find the run's nonce and the recorder's
``send`` in the recorder's frames, and write messages the grader takes as the recorder's. A message out of
the recorder's order or form costs the cell or task it was sent from, never the submitter's other rows
(``{"cell": true}`` must not make every later run crash at start, nor an early ``{"done": true}`` leave every
later task unrecorded), and never a classmate's."""

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from submissions import HEADER, OTHERS, RIGHT_MASK, notebook

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("bwrap") is None and os.environ.get("CI", "").lower() != "true",
                                 reason="bubblewrap is not installed: run 'sudo bash scripts/setup_sandbox.sh'")]

CH02 = [f"ch02.q{i}" for i in range(1, 6)]
FORGE = ("def forge(message):\n"
         "    import sys\n"
         "    frame = sys._getframe(1)\n"
         "    while frame is not None and 'send' not in frame.f_locals:\n"
         "        frame = frame.f_back\n"
         "    frame.f_locals['send'](message)\n"
         "    return 0\n")
# Sent from inside causal_mask (task q1), which then answers correctly: each must cost q1 alone.
FROM_Q1 = {
    "cell_true": '{"cell": True}',  # a "cell" that is a bool: it was skipped as "True", and every run crashed
    "done_early": '{"done": True}',  # the later tasks went unrecorded
    "record_wrong_form": '{"record": "q1", "outcomes": {"ok": 1}, "library": "x", "tampered": {"k": 1}}',
    "record_of_another_task": '{"record": "q2", "outcomes": [["ok", 1]], "library": [], "tampered": []}',
    "task_out_of_order": '{"task": "q5"}',  # then hangs: the time was charged to q5
    "a_second_notebook": '{"notebook": "read", "chapter": ["ch02"], "nbformat": 4}',
    "unknown_kind": '{"surprise": [1, 2]}',
    "cell_error_dict": '{"cell_error": 1, "error": {"a": 1}}',
}
HANGS = {"task_out_of_order"}
# Floods from cells, each of which, before, cost the grader's own CPU and bought another run of the notebook.
FLOOD = ("def flood(make, n):\n"
         "    import sys\n"
         "    frame = sys._getframe(1)\n"
         "    while frame is not None and 'send' not in frame.f_locals:\n"
         "        frame = frame.f_back\n"
         "    for i in range(n):\n"
         "        frame.f_locals['send'](make(frame.f_locals['number'], i))\n"
         "    return 0\n")
FROM_CELLS = {  # a cell's valid-looking error again and again; a huge one; cells the notebook does not have
    "errors_again": [f"x{i} = flood(lambda n, i: {{'cell_error': n, 'error': 'E' * 900}}, 50)\n" for i in range(8)],
    "one_huge_error": ["x = flood(lambda n, i: {'cell_error': n, 'error': 'E' * 4_000_000}, 8)\n"],
    "endless_cells": ["x = flood(lambda n, i: {'cell': n + 1 + i}, 700_000)\n"],
}


def attack(message: str, hang: bool) -> str:
    return ("def causal_mask(T):\n    forge(" + message + ")\n"
            + ("    import time\n    time.sleep(60)\n" if hang else "") + RIGHT_MASK)


def read(path: Path) -> dict:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    found = {}
    for r in rows:
        found.setdefault(r["submission"], {})[r["task"]] = r
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    d = tmp_path_factory.mktemp("forged")
    names = ["honest.ipynb"]
    notebook(d / "honest.ipynb", HEADER, "def causal_mask(T):\n" + RIGHT_MASK, *OTHERS)
    for label, message in FROM_Q1.items():
        names.append(f"{label}.ipynb")
        notebook(d / names[-1], HEADER, FORGE, attack(message, label in HANGS), *OTHERS)
    # From a cell (a default value is computed when the def runs): no honest cell does it, and each such stop
    # would buy another run, so the tasks left are charged, naming the cell, and the notebook is not run again.
    names.append("done_in_a_cell.ipynb")
    notebook(d / names[-1], HEADER, FORGE, "def causal_mask(T):\n" + RIGHT_MASK, *OTHERS,
             "def nothing(x=forge({'done': True})):\n    return x\n")
    for label, cell in FROM_CELLS.items():
        names.append(f"{label}.ipynb")
        notebook(d / names[-1], HEADER, FORGE, FLOOD, "def causal_mask(T):\n" + RIGHT_MASK, *OTHERS, *cell)
    done = subprocess.run([sys.executable, "-m", "nexttoken.grade",
                           "--count-practice", "--out", "grades.csv", "--jobs", "2",
                           "--timeout", "20", "--", *names], cwd=d, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return read(d / "grades.csv"), names


def test_a_forged_message_from_a_task_costs_that_task_alone(graded):
    rows, _ = graded
    for label in FROM_Q1:
        mine = rows[f"{label}.ipynb"]
        assert sorted(mine) == CH02, label  # no row lost
        q1 = mine["ch02.q1"]
        assert (q1["status"], q1["points"]) == ("error", "0") and "malformed or forged" in q1["reason"], (label, q1)
        for task in CH02[1:]:
            assert (mine[task]["status"], mine[task]["points"]) == ("passed", "1"), (label, task, mine[task])


def test_a_forged_message_from_a_cell_is_charged_to_the_submission_and_named(graded):
    """No run again for it: every task left gets 0, and its reason names the cell and what it sent."""
    rows, _ = graded
    for label in ("done_in_a_cell", *FROM_CELLS):
        mine = rows[f"{label}.ipynb"]
        assert sorted(mine) == CH02, label
        for task, r in mine.items():
            assert (r["status"], r["points"]) == ("error", "0"), (label, task, r)
            assert r["reason"].startswith("your code cell ") and "not run again" in r["reason"], (label, r)
            assert "malformed or forged" in r["reason"], (label, r)


def test_the_honest_classmate_keeps_full_marks_and_every_file_has_its_rows(graded):
    rows, names = graded
    assert sorted(rows) == sorted(names)
    assert {t: (r["status"], r["points"]) for t, r in rows["honest.ipynb"].items()} == \
        {t: ("passed", "1") for t in CH02}
