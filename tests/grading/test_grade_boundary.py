"""The trust boundary, attacked through real sandboxes: the submission's process holds no
reference, solution, held-out name or expected output, so reading, aliasing or patching what is there can
at most cost the attacker its own marks; an honest classmate in the same batch keeps full marks."""

import csv
import os
import shutil
import subprocess
import sys

import pytest
from submissions import HEADER, LOOKS, OTHERS, RIGHT_MASK, SNEAKS, notebook

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("bwrap") is None and os.environ.get("CI", "").lower() != "true",
                                 reason="bubblewrap is not installed: run 'sudo bash scripts/setup_sandbox.sh'")]

CH02 = [f"ch02.q{i}" for i in range(1, 6)]


def read(path) -> dict:
    with open(path, newline="", encoding="utf-8") as f:
        found = {}
        for r in csv.DictReader(f):
            found.setdefault(r["submission"], {})[r["task"]] = (r["status"], r["points"], r["reason"])
    return found


SWITCHED_OFF = {  # notebook: (its line, the part its row must name)
    "mode_off.ipynb": ("import torch.overrides\n_off = setattr(torch.overrides.TorchFunctionMode, '__enter__', "
                       "lambda self: self)\n", "TorchFunctionMode.__enter__"),
    "hook_off.ipynb": ("_off = setattr(torch.nn.Module, 'register_forward_pre_hook', lambda self, hook: None)\n",
                       "torch.nn.Module.register_forward_pre_hook"),
    "profile_off.ipynb": ("import sys\n_off = setattr(sys, 'setprofile', lambda f: None)\n", "sys.setprofile"),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    d = tmp_path_factory.mktemp("boundary")
    notebooks = {
        "honest.ipynb": [HEADER, "def causal_mask(T):\n" + RIGHT_MASK, *OTHERS],
        "looks.ipynb": [HEADER, LOOKS, *OTHERS],
        # The reference, by name, as a learner would alias it (it is not importable inside).
        "alias.ipynb": [HEADER, "causal_mask = ch02.q1.reference\n", *OTHERS],
        "alias_import.ipynb": [HEADER, "from nexttoken.exercises.ch02 import q1\ncausal_mask = q1.reference\n",
                               *OTHERS],
        # The recorder's code swapped in place (f.__code__ = ...), from an assignment that runs.
        "code_swap.ipynb": [HEADER, "import nexttoken.recorder.calling as calling\n_swap = setattr("
                                    "calling.changed_argument, '__code__', (lambda *a: None).__code__)\n",
                            "def causal_mask(T):\n" + RIGHT_MASK, *OTHERS],
        # A watch switched off and back on inside the task's own call: the same parts before and after it.
        "restored.ipynb": [HEADER, "import sys\nimport nexttoken\n"
                                   "def causal_mask(T):\n"
                                   "    hook = sys.getprofile()\n"
                                   "    sys.setprofile(None)  # the library-call watch off...\n"
                                   "    mask = nexttoken.causal_mask(T)\n"
                                   "    sys.setprofile(hook)  # ...and on again before the call ends\n"
                                   "    return mask\n", *OTHERS],
        # The forbidden function's own code, saved before the rule replaced it, put back for one call.
        "restored_code.ipynb": [HEADER, "import inspect\nimport nexttoken\n"
                                        "_own = inspect.unwrap(nexttoken.causal_mask).__code__\n"
                                        "def causal_mask(T):\n"
                                        "    f = inspect.unwrap(nexttoken.causal_mask)\n"
                                        "    rule, f.__code__ = f.__code__, _own  # the rule's code out...\n"
                                        "    try:\n"
                                        "        return nexttoken.causal_mask(T)\n"
                                        "    finally:\n"
                                        "        f.__code__ = rule  # ...and back\n", *OTHERS],
    }
    # What the rules and checks of how stand on, switched off from the learner's process by one setattr each
    # (each had passed a rule or check of how unreported): every task of theirs is reported, not graded.
    for name, (line, label) in SWITCHED_OFF.items():
        notebooks[name] = [HEADER, line, "def causal_mask(T):\n" + RIGHT_MASK, *OTHERS]
    for name, cells in notebooks.items():
        notebook(d / name, *cells)
    done = subprocess.run([sys.executable, "-m", "nexttoken.grade",
                           "--count-practice", "--held-out", "--out", "grades.csv",
                           "--jobs", "2", "--", *notebooks], cwd=d, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return read(d / "grades.csv")


def test_the_judging_half_is_not_in_the_sandbox(graded):
    status, points, reason = graded["looks.ipynb"]["ch02.q1"]
    assert (status, points) == ("passed", "1"), reason


def test_an_alias_of_the_reference_gets_nothing(graded):
    for name in ("alias.ipynb", "alias_import.ipynb"):
        rows = graded[name]
        assert rows["ch02.q1"][:2] in (("failed", "0"), ("error", "0"), ("missing", "0")), (name, rows["ch02.q1"])
        assert all(rows[t][:2] == ("passed", "1") for t in CH02[1:]), (name, rows)


def test_code_swapped_in_the_calling_half_is_reported_and_costs_only_the_swapper(graded):
    rows = graded["code_swap.ipynb"]
    assert all(status == "error" and points == "0" and "replaced part of the grader's recorder" in reason
               and "changed_argument.__code__" in reason for status, points, reason in rows.values()), rows


def test_what_a_rule_of_how_stands_on_switched_off_is_reported_and_not_graded(graded):
    for name, (_, label) in SWITCHED_OFF.items():
        rows = graded[name]
        assert all(status == "error" and points == "0" and "replaced part of the grader's recorder" in reason
                   and label in reason for status, points, reason in rows.values()), (name, rows)


def test_a_watch_switched_off_and_on_again_inside_the_call_is_reported_and_not_graded(graded):
    """The parts compared before and after the call are the same again; Python's audit hook saw the
    switch (sys.setprofile called, a function's code set) while the task's function ran."""
    for name, label in (("restored.ipynb", "sys.setprofile (called inside the task's function)"),
                        ("restored_code.ipynb", "causal_mask.__code__ (set inside the call)")):
        status, points, reason = graded[name]["ch02.q1"]
        assert (status, points) == ("error", "0") and "replaced part of the grader's recorder" in reason \
            and label in reason, (name, reason)
        assert all(graded[name][t][:2] == ("passed", "1") for t in CH02[1:]), (name, graded[name])


def test_the_honest_classmate_keeps_full_marks(graded):
    assert sorted(graded) == sorted(["honest.ipynb", "looks.ipynb", "alias.ipynb", "alias_import.ipynb",
                                     "code_swap.ipynb", "restored.ipynb", "restored_code.ipynb", *SWITCHED_OFF])
    assert {t: r[:2] for t, r in graded["honest.ipynb"].items()} == {t: ("passed", "1") for t in CH02}


CH05 = [f"ch05.q{i}" for i in range(1, 6)]


@pytest.fixture(scope="module")
def sneaks(tmp_path_factory):
    import nbformat

    d = tmp_path_factory.mktemp("sneaks")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for name in ("ch05", "ch07"):
        shutil.copy(os.path.join(root, "solutions", f"{name}.ipynb"), d / f"honest_{name}.ipynb")
    for label, cell in SNEAKS.items():
        nb = nbformat.read(os.path.join(root, "solutions", "ch05.ipynb"), as_version=4)
        nb.cells.append(nbformat.v4.new_code_cell(cell))
        nbformat.write(nb, d / f"{label}.ipynb")
    names = ["honest_ch05.ipynb", "honest_ch07.ipynb", *(f"{label}.ipynb" for label in SNEAKS)]
    done = subprocess.run([sys.executable, "-m", "nexttoken.grade",
                           "--count-practice", "--out", "grades.csv", "--jobs", "2", "--",
                           *names], cwd=d, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return read(d / "grades.csv")


def test_the_library_generate_is_out_of_reach_of_a_task_that_forbids_it(sneaks):
    """In a sandbox without generate, the rule is what they meet. (Without bubblewrap, --no-sandbox imports
    a package view with the same generate-less generate.py, so that calling.forbidding in the learner's
    process is not all that stands in their way: test_grade_end_to_end.py.)"""
    for label in SNEAKS:
        rows = sneaks[f"{label}.ipynb"]
        assert rows["ch05.q2"][:2] == ("failed", "0"), (label, rows["ch05.q2"])
        if label != "subclass":  # that one now reads its output as a plain tensor: the prompt alone, too short
            assert rows["ch05.q2"][2].startswith("forbidden call: nexttoken.generate"), (label, rows["ch05.q2"])
        assert all(rows[t][:2] == ("passed", "1") for t in CH05 if t != "ch05.q2"), (label, rows)


def test_right_answers_pass_in_both_runs(sneaks):
    """The tasks that forbid generate run in a sandbox without it; the others, with it: all pass."""
    for name in ("honest_ch05.ipynb", "honest_ch07.ipynb"):
        assert all(r[:2] == ("passed", "1") for r in sneaks[name].values()), (name, sneaks[name])
    assert len(sneaks["honest_ch07.ipynb"]) == 4
