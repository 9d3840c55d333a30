"""Honest notebooks that lost marks with no cause named, through the whole grader: each a copy of the
chapter 2 solution with one thing an honest learner's kernel ran without complaint. Each is graded as its
kernel ran it (full marks), or with a reason that names the real cause. Then two answers that reach what
their task rebuilds another way: each breaks the task's rule, or is named in its row's library_calls. (The
recorder's side alone: tests/recorder/test_kernel.py, tests/recorder/test_rules.py.)"""

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

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("bwrap") is None and os.environ.get("CI", "").lower() != "true",
                                 reason="bubblewrap is not installed: run 'sudo bash scripts/setup_sandbox.sh'")]
BASE = nbformat.read(ROOT / "solutions" / "ch02.ipynb", as_version=4)
TASKS = [f"ch02.q{i}" for i in range(1, 6)]
FLOAT = "def causal_mask(T):\n    return torch.ones(T, T).tril()\n"


def display_debug(nb):
    """A debugging display(...) left in causal_mask: every Jupyter kernel has display."""
    cell = defining(nb, "causal_mask")
    cell.source = cell.source.replace("    ### BEGIN SOLUTION\n", "    display(T)\n    ### BEGIN SOLUTION\n")


def settings_dict(nb):
    """SETTINGS = {} in one cell, SETTINGS["dtype"] = ... in a later one, read by causal_mask."""
    cell = defining(nb, "causal_mask")
    at = nb.cells.index(cell)
    nb.cells[at:at] = [nbformat.v4.new_code_cell("SETTINGS = {}"),
                       nbformat.v4.new_code_cell('SETTINGS["dtype"] = torch.bool\nSETTINGS["diagonal"] = 0')]
    cell.source = ('def causal_mask(T):\n    return torch.ones(T, T, dtype=SETTINGS["dtype"])'
                   '.tril(SETTINGS["diagonal"])\n')


def restarted(nb):
    """A float draft of causal_mask above the right one kept count 14 from before a kernel restart; after it
    the learner ran every other cell (1 to 12), then q5's two cells again (13 and 14). The right one ran last,
    and the draft's stale 14 outranked it."""
    for cell in code_cells(nb):  # no saved times: only the counts say anything
        cell.metadata.pop("execution", None)
    at = nb.cells.index(defining(nb, "causal_mask"))
    nb.cells.insert(at, nbformat.v4.new_code_cell(FLOAT, execution_count=14))
    code_cells(nb)[-2].execution_count, code_cells(nb)[-1].execution_count = 13, 14


def colab_times(nb):
    """The same stale draft, without the duplicate count, in a notebook Colab saved: its cells' times say
    the right one ran last."""
    for cell in code_cells(nb):
        cell.metadata.pop("execution", None)
        cell.metadata["executionInfo"] = {"status": "ok", "timestamp": 1_700_000_000_000 + 1000 * cell.execution_count}
    at = nb.cells.index(defining(nb, "causal_mask"))
    nb.cells.insert(at, nbformat.v4.new_code_cell(FLOAT, execution_count=14,
                                                  metadata={"executionInfo": {"timestamp": 1_600_000_000_000}}))


def torch_not_implemented(nb):
    """causal_mask through a sparse tensor, whose tril torch has no kernel for: torch's NotImplementedError."""
    defining(nb, "causal_mask").source = ("def causal_mask(T):\n"
                                          "    return torch.ones(T, T).to_sparse().tril().to_dense().bool()\n")


def code_copy(nb):
    """Not honest: causal_mask made from a renamed copy of the library's code, which the rule (that replaces
    the library function's code in place) does not reach."""
    defining(nb, "causal_mask").source = (
        "import types\n\ncausal_mask = types.FunctionType(nexttoken.model.causal_mask.__code__.replace("
        "co_name='mine'), vars(nexttoken.model), 'causal_mask', (0, None))\n")


VARIANTS = {f.__name__: f for f in (display_debug, settings_dict, restarted, colab_times, torch_not_implemented,
                                    code_copy)}


def grade(folder: Path, names: list[str]) -> dict:
    """{submission without .ipynb: {task: its grades.csv row}}."""
    done = subprocess.run([sys.executable, "-m", "nexttoken.grade",
                           "--count-practice", "--jobs", "1", "--out", "grades.csv", "--",
                           *names], cwd=folder, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict = {}
    with open(folder / "grades.csv", newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            found.setdefault(r["submission"].removesuffix(".ipynb"), {})[r["task"]] = r
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("honest")
    names = []
    for name, edit in VARIANTS.items():
        nb = copy.deepcopy(BASE)
        edit(nb)
        nbformat.write(nb, folder / f"{name}.ipynb")
        names.append(f"{name}.ipynb")
    return grade(folder, names)


def full_marks(rows) -> bool:
    """Every task passed, at its full points (a practice task's are 0)."""
    return {t: r["status"] for t, r in rows.items()} == dict.fromkeys(TASKS, "passed") and \
        all(r["points"] == r["max_points"] for r in rows.values())


@pytest.mark.parametrize("name", ["display_debug", "settings_dict", "restarted", "colab_times"])
def test_graded_as_its_kernel_ran_it(graded, name):
    assert full_marks(graded[name]), graded[name]


def test_counts_of_two_kernel_sessions_are_not_said_to_be_the_last_run(graded):
    reason = graded["restarted"]["ch02.q1"]["reason"]
    assert "causal_mask is defined in code cells 3 and 4: graded with the last, code cell 4's" in reason, reason
    assert "the one your kernel ran last (execution count" not in reason, reason
    reason = graded["colab_times"]["ch02.q1"]["reason"]
    assert "graded with code cell 4's, the one your kernel ran last (execution count 3)" in reason, reason


def test_torchs_own_not_implemented_error_is_an_error_not_an_unwritten_function(graded):
    row = graded["torch_not_implemented"]["ch02.q1"]
    assert row["status"] == "error" and "raised NotImplementedError: Could not run 'aten::tril'" in row["reason"], row
    assert "write your code there" not in row["reason"], row


def test_a_copy_of_the_library_functions_code_is_named_as_a_library_call(graded):
    row = graded["code_copy"]["ch02.q1"]
    assert row["library_calls"] == "nexttoken.model.causal_mask", row


def test_a_log_softmax_breaks_the_rule_that_forbids_every_softmax_of_torch(tmp_path):
    nb = nbformat.read(ROOT / "solutions" / "ch04.ipynb", as_version=4)
    [cell] = [c for c in code_cells(nb) if c.source.startswith("def stable_softmax(")]
    cell.source = "def stable_softmax(logits):\n    return logits.log_softmax(dim=-1).exp()\n"
    nbformat.write(nb, tmp_path / "log_softmax.ipynb")
    rows = grade(tmp_path, ["log_softmax.ipynb"])["log_softmax"]
    row = rows.pop("ch04.q3")
    assert row["status"] == "failed" and "torch's log_softmax was called, but the task says: do not call " \
        "torch.softmax" in row["reason"], row
    # the rule changed nothing of torch that the tasks after it would see as replaced
    assert {t: r["status"] for t, r in rows.items()} == dict.fromkeys(rows, "passed"), rows
