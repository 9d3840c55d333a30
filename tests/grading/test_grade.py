"""The batch grader: solutions score full marks, stubs score zero, and hostile submissions are contained."""

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from submissions import CH02_GOOD, HEADER, notebook

ROOT = Path(__file__).resolve().parents[2]
# Without bubblewrap the grader refuses to run: skip, except under CI=true, where the tests then fail.
pytestmark = [pytest.mark.slow,  # graded batches of notebooks: minutes, not seconds
              pytest.mark.skipif(shutil.which("bwrap") is None and os.environ.get("CI", "").lower() != "true",
                                 reason="bubblewrap is not installed: run 'sudo bash scripts/setup_sandbox.sh'")]


def grade(paths, tmp_path, timeout=20) -> dict:
    out = tmp_path / "grades.csv"
    result = subprocess.run(
        [sys.executable, "-m", "nexttoken.grade",
         "--count-practice", *map(str, paths), "--out", str(out), "--timeout", str(timeout)],
        capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "wrote" in result.stdout  # the summary went to the terminal
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0].keys()) == ["submission", "task", "points", "max_points", "status", "reason", "library_calls"]
    assert all("\n" not in row["reason"] for row in rows)  # one line per reason, whatever the check said
    progress = [line for line in result.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == len(paths) and progress[-1].startswith(f"[{len(paths)}/{len(paths)}] "), result.stderr
    by_file = {}
    for row in rows:
        by_file.setdefault(Path(row["submission"]).name, {})[row["task"]] = row
    return by_file


@pytest.fixture(scope="module")
def hostile_grades(tmp_path_factory):
    """One batch holding every kind of broken submission, plus a good one: none may stop the batch."""
    d = tmp_path_factory.mktemp("submissions")
    good = list(CH02_GOOD.values())
    paths = [
        notebook(d / "good.ipynb", HEADER, *good),
        d / "not_json.ipynb",
        notebook(d / "syntax_error.ipynb", HEADER, good[0], "def mask_scores(scores)\n    return scores\n", good[2]),
        notebook(d / "import_error.ipynb", "import does_not_exist\n", HEADER, *good),
        notebook(d / "endless_function.ipynb", HEADER, good[0],
                 "def mask_scores(scores):\n    while True:\n        try:\n            pass\n"
                 "        except KeyboardInterrupt:\n            pass\n", good[2]),
        notebook(d / "endless_cell.ipynb", HEADER, *good, "def forever():\n    while True:\n        try:\n"
                 "            pass\n        except KeyboardInterrupt:\n            pass\n",
                 "state = forever()\n"),
        notebook(d / "kernel_exit.ipynb", HEADER, *good[:2],
                 "def attention_weights(q, k):\n    import os\n    os._exit(1)\n"),
        notebook(d / "flood.ipynb", HEADER, *good, "for _ in range(50):\n    print('x' * 100_000)\n'y' * 5_000_000\n"),
        notebook(d / "patched_checks.ipynb", HEADER,
                 "def causal_mask(T):\n    raise NotImplementedError\n",
                 "import nexttoken.exercises.task as task\n"
                 "task.Task.evaluate = lambda self, outcomes: ('passed', 'all good')\n"
                 "task.compare_tensors = lambda *a, **k: None\n"
                 "ch02.q1.check = lambda fn: print('✅ correct')\n"),
        notebook(d / "no_chapter.ipynb", "x = 1\n", chapter=None),
        notebook(d / "ch05.ipynb", HEADER, *good, chapter=None),  # a misleading file name; imports say ch02
    ]
    paths[1].write_text("{ this is not json")
    return grade(paths, d, timeout=8)


def statuses(rows):
    return {task: (r["status"], int(r["points"])) for task, r in rows.items()}


def test_a_good_submission_scores_full_marks(hostile_grades):
    assert statuses(hostile_grades["good.ipynb"]) == {
        "ch02.q1": ("passed", 1), "ch02.q2": ("passed", 1), "ch02.q3": ("passed", 1), "ch02.q4": ("passed", 1),
        "ch02.q5": ("passed", 1)}


def test_invalid_json(hostile_grades):
    [row] = hostile_grades["not_json.ipynb"].values()
    assert row["status"] == "invalid_notebook" and row["points"] == "0"


def test_syntax_error_costs_only_the_task_it_breaks(hostile_grades):
    rows = hostile_grades["syntax_error.ipynb"]
    assert rows["ch02.q1"]["status"] == "passed"
    assert rows["ch02.q2"]["status"] == "missing" and "SyntaxError" in rows["ch02.q2"]["reason"]
    assert rows["ch02.q3"]["status"] == "error"  # it calls the missing mask_scores


def test_exception_at_import_does_not_stop_the_rest(hostile_grades):
    assert all(s == "passed" for s, _ in statuses(hostile_grades["import_error.ipynb"]).values())


def test_endless_loop_in_a_function_times_out_alone(hostile_grades):
    rows = statuses(hostile_grades["endless_function.ipynb"])
    assert rows["ch02.q2"] == ("timeout", 0)
    assert rows["ch02.q1"] == ("passed", 1)


def test_a_cell_that_hangs_is_skipped_and_costs_no_task(hostile_grades):
    rows = hostile_grades["endless_cell.ipynb"]
    assert all(r["status"] == "passed" and r["points"] == "1" for r in rows.values())


def test_a_dying_kernel_costs_only_its_task(hostile_grades):
    rows = statuses(hostile_grades["kernel_exit.ipynb"])
    assert rows["ch02.q3"] == ("crashed", 0)
    assert rows["ch02.q1"] == ("passed", 1) and rows["ch02.q2"] == ("passed", 1)


def test_megabytes_of_output_are_graded_normally(hostile_grades):
    assert all(s == "passed" for s, _ in statuses(hostile_grades["flood.ipynb"]).values())


def test_patched_checks_do_not_change_the_grade(hostile_grades):
    rows = statuses(hostile_grades["patched_checks.ipynb"])
    assert rows["ch02.q1"] == ("not_implemented", 0)
    assert rows["ch02.q2"] == ("missing", 0)


def test_chapter_comes_from_content_not_file_name(hostile_grades):
    assert "no_chapter.ipynb" in hostile_grades
    assert list(hostile_grades["no_chapter.ipynb"].values())[0]["status"] == "unknown_chapter"
    assert set(hostile_grades["ch05.ipynb"]) == {"ch02.q1", "ch02.q2", "ch02.q3", "ch02.q4", "ch02.q5"}


def test_solutions_score_full_marks_and_exercises_zero(tmp_path):
    solutions = sorted((ROOT / "solutions").glob("*.ipynb"))
    exercises = sorted((ROOT / "exercises").glob("*.ipynb"))
    assert len(solutions) >= 6 and [p.name for p in solutions] == [p.name for p in exercises]
    copies = []
    for folder, paths in (("solution", solutions), ("exercise", exercises)):
        for p in paths:  # renamed copies: the grader must not rely on file names
            copy = tmp_path / f"{folder}-{len(copies)}.ipynb"
            copy.write_bytes(p.read_bytes())
            copies.append(copy)
    grades = grade(copies, tmp_path, timeout=60)
    for name, rows in grades.items():
        if name.startswith("solution"):
            assert all(r["status"] == "passed" and r["points"] == r["max_points"] and not r["library_calls"]
                       for r in rows.values()), \
                [(r["status"], r["reason"]) for r in rows.values()]
        else:
            assert all(r["status"] == "not_implemented" and r["points"] == "0" for r in rows.values()), rows
    chapters = {task.split(".")[0] for rows in grades.values() for task in rows}
    assert chapters >= {"ch01", "ch02", "ch03", "ch04", "ch05", "ch06"}


def test_the_throughput_benchmark_runs():
    """bench/grade_throughput.py still works (one copy of chapter 2's solution, quicker to grade than chapter 5's,
    its default); its figures are reported there, never asserted."""
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "grade_throughput.py"), "--n", "1", "--notebook",
                             str(ROOT / "solutions" / "ch02.ipynb")], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "sandbox overhead with --jobs 1" in result.stdout


def test_the_class_scale_benchmark_runs():
    """--class: a synthetic class with hostile notebooks is graded whole; figures reported, never asserted.
    With --jobs 2 only (without --jobs it grades the class twice, with --jobs 1 then 2)."""
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "grade_throughput.py"), "--class", "10",
                             "--timeout", "3", "--jobs", "2"], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "a synthetic class of 10 (1 hostile)" in result.stdout and "a class of 1,000" in result.stdout
