"""Honest but careless notebooks through the whole grader, each a copy of the chapter 2 solution
with one thing a learner does on Colab or in Jupyter: graded as its kernel ran it (full marks), or, where
the grader cannot, with a reason that names the real cause, and its explanation kept. (The recorder's side
alone: tests/recorder/test_kernel.py.)"""

import copy
import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from helpers import code_cells, defining

from nexttoken.exercises import explanations as source

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("bwrap") is None and os.environ.get("CI", "").lower() != "true",
                                 reason="bubblewrap is not installed: run 'sudo bash scripts/setup_sandbox.sh'")]
BASE = nbformat.read(ROOT / "solutions" / "ch02.ipynb", as_version=4)
TASKS = [f"ch02.q{i}" for i in range(1, 6)]
ANSWER = "The mask hides every later position, so the logits at t depend on tokens up to t alone."


def twice_defined(nb):
    """The right causal_mask run last (count 14), an older float one further down (count 13; a count the
    notebook's other cells do not hold: two cells of one count would be two kernel sessions)."""
    defining(nb, "causal_mask").execution_count = 14
    nb.cells.append(nbformat.v4.new_code_cell("def causal_mask(T):\n    return torch.ones(T, T).tril()\n",
                                              execution_count=13))


def loop_table(nb):
    """causal_mask reads a table a top-level loop fills: the grader runs no loop, and says so."""
    defining(nb, "causal_mask").source = ("MASKS = {}\nfor T in range(1, 80):\n"
                                          "    MASKS[T] = torch.ones(T, T, dtype=torch.bool).tril()\n\n"
                                          "def causal_mask(T):\n    return MASKS[T]\n")


def colab_import(nb):
    """import ipywidgets, which Colab has and the grader does not, before import torch."""
    code_cells(nb)[1].source = "import ipywidgets\n" + code_cells(nb)[1].source


def assigned_magic(nb):
    code_cells(nb)[1].source = "t = %time 1 + 1\n" + code_cells(nb)[1].source


def writefile(nb):
    """A helper module written by %%writefile and imported by the answer."""
    cell = defining(nb, "causal_mask")
    at = nb.cells.index(cell)
    nb.cells.insert(at, nbformat.v4.new_code_cell("%%writefile masks.py\nimport torch\n\n\ndef tril(T):\n"
                                                  "    return torch.ones(T, T, dtype=torch.bool).tril()\n"))
    cell.source = "from masks import tril\n\n\ndef causal_mask(T):\n    return tril(T)\n"


def python_312(nb):
    """An f-string that reuses its quotes inside (Python 3.12, Colab's) in causal_mask's cell."""
    cell = defining(nb, "causal_mask")
    cell.source = 'NAMES = {"mask": "causal"}\nLABEL = f"{NAMES["mask"]} mask"\n\n\n' + cell.source


def answer_cell(nb):
    [cell] = [c for c in nb.cells if source.ours(c, "answer")]
    return cell


def answer_in_the_question(nb):
    """The explanation typed into the question cell, below its question; the answer cell left as it was."""
    [question] = [c for c in nb.cells if source.is_question(c)]
    question.source += "\n\n" + ANSWER
    answer_cell(nb).source = source.marker("ch02") + "\n" + source.PLACEHOLDER


def answer_under_a_heading(nb):
    """The answer cell retyped (no metadata, no marker) under a heading of the learner's own."""
    cell = answer_cell(nb)
    nb.cells[nb.cells.index(cell)] = nbformat.v4.new_markdown_cell("### My answer\n\n" + ANSWER)


VARIANTS = {f.__name__: f for f in (twice_defined, loop_table, colab_import, assigned_magic, writefile, python_312,
                                    answer_in_the_question, answer_under_a_heading)}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("careless")
    names = ["honest.ipynb"]
    nbformat.write(BASE, folder / "honest.ipynb")
    for name, edit in VARIANTS.items():
        nb = copy.deepcopy(BASE)
        edit(nb)
        nbformat.write(nb, folder / f"{name}.ipynb")
        names.append(f"{name}.ipynb")
    done = subprocess.run([sys.executable, "-m", "nexttoken.grade",
                           "--count-practice", "--held-out", "--jobs", "2", "--out",
                           "grades.csv", "--", *names], cwd=folder, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict = {}
    with open(folder / "grades.csv", newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            found.setdefault(r["submission"], {})[r["task"]] = r
    with open(folder / "grades-explanations.csv", newline="", encoding="utf-8") as f:
        answers = {r["submission"]: r for r in csv.DictReader(f)}
    return found, answers


def full_marks(rows) -> bool:
    return {t: (r["status"], r["points"]) for t, r in rows.items()} == {t: ("passed", "1") for t in TASKS}


@pytest.mark.parametrize("name", ["honest", "twice_defined", "colab_import", "assigned_magic", "writefile",
                                  "answer_in_the_question", "answer_under_a_heading"])
def test_graded_as_its_kernel_ran_it(graded, name):
    rows, _ = graded
    assert full_marks(rows[f"{name}.ipynb"]), rows[f"{name}.ipynb"]


def test_a_function_defined_twice_is_said_in_its_row(graded):
    rows, _ = graded
    reason = rows["twice_defined.ipynb"]["ch02.q1"]["reason"]
    assert "causal_mask is defined in code cells 3 and 13: graded with code cell 3's, the one your kernel ran " \
           "last (execution count 14)" in reason, reason


def test_what_the_grader_cannot_run_is_named(graded):
    rows, _ = graded
    loop = rows["loop_table.ipynb"]
    for task in ("ch02.q1", "ch02.q2", "ch02.q4"):  # causal_mask, and the two answers that call it
        assert loop[task]["points"] == "0" and "has a top-level loop (line 2) that would set `MASKS`" in \
            loop[task]["reason"], loop[task]
    assert loop["ch02.q5"]["status"] == "passed"
    if sys.version_info >= (3, 12):  # the grader's Python reads it: graded as it ran
        assert full_marks(rows["python_312.ipynb"])
        return
    newer = rows["python_312.ipynb"]["ch02.q1"]
    assert newer["status"] == "missing" and "needs Python 3.12 (an f-string that uses its own quotes inside its " \
        f"braces); the grader runs Python {sys.version_info.major}.{sys.version_info.minor}" in newer["reason"], newer


def test_the_explanation_is_read_wherever_it_was_written_below_its_question(graded):
    _, answers = graded
    for name in ("answer_in_the_question", "answer_under_a_heading"):
        answer = answers[f"{name}.ipynb"]
        assert answer["status"] == "answered" and ANSWER in answer["answer"], answer
