"""The grader's exports: roster identity, Canvas, Gradescope, GitHub Classroom, feedback files.

Unit tests on rows (seconds), then one batch graded end to end with every export (slow, sandboxed)."""

import base64
import csv
import json
import os
import shutil
import subprocess
import sys

import pytest
from submissions import CH02_GOOD, HEADER, notebook

from nexttoken.exercises import chapter
from nexttoken.grading import exports, outputs, rosters
from nexttoken.grading.rows import FIELDS


def rows_of(name, points, status="passed", tasks=("ch02.q1", "ch02.q2")):
    return [dict(submission=name, task=t, points=p, max_points=1, status=status if p else "failed",
                 reason="all 5 tests passed" if p else "your output is wrong\n   input:    f(3)", library_calls="")
            for t, p in zip(tasks, points)]


ROSTER = rosters.Roster([
          dict(file="alice_*.ipynb", student_id="a1", name="Alice", email="", section="S1", canvas_id="101",
               sis_user_id="SIS-A", sis_login_id="alice", ),
          dict(file="bob.ipynb", student_id="b2", name="Bob", email="", section="S2", canvas_id="102",
               sis_user_id="", sis_login_id=""),
          dict(file="carol.ipynb", student_id="c3", name="Carol", email="", section="S1", canvas_id="103",
               sis_user_id="", sis_login_id="")])


def write_roster(tmp_path, text):
    path = tmp_path / "roster.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_roster_needs_its_columns_and_unique_ids(tmp_path):
    with pytest.raises(rosters.RosterError, match="needs the columns file, student_id, name .missing: student_id"):
        rosters.read_roster(write_roster(tmp_path, "file,name\nx.ipynb,X\n"))
    with pytest.raises(rosters.RosterError, match="lines 2 and 3: student_id 'a1' twice"):
        rosters.read_roster(write_roster(tmp_path, "file,student_id,name\nx,a1,X\ny,a1,Y\n"))
    with pytest.raises(rosters.RosterError, match="line 2: file and student_id must not be empty"):
        rosters.read_roster(write_roster(tmp_path, "file,student_id,name\n,a1,X\n"))
    roster = rosters.read_roster(write_roster(tmp_path, "\ufefffile,student_id,name,section\nx.ipynb,a1,X,S\n"))
    assert roster.students == [dict(file="x.ipynb", student_id="a1", name="X", email="", section="S", canvas_id="",
                           sis_user_id="", sis_login_id="", lms_id="")]


def test_every_file_and_every_student_is_accounted_for():
    rows = (rows_of("alice_v1.ipynb", [1, 0]) + rows_of("alice_v2.ipynb", [1, 1]) + rows_of("mallory.ipynb", [1, 1]))
    out = exports.with_identity(rows, ROSTER)
    by = {(r["submission"], r["task"]): r for r in out}
    assert {r["roster_status"] for r in out if r["submission"].startswith("alice")} == {"duplicate_submission"}
    assert by[("alice_v1.ipynb", "ch02.q1")]["student_id"] == "a1"
    assert by[("mallory.ipynb", "ch02.q1")]["roster_status"] == "no_roster_entry"  # kept, not dropped
    missing = [r for r in out if r["roster_status"] == "missing_submission"]
    assert [(r["student_id"], r["status"], r["points"]) for r in missing] == [("b2", "missing_submission", 0),
                                                                               ("c3", "missing_submission", 0)]
    assert len(out) == len(rows) + 2


def test_a_file_two_roster_lines_name_is_reported_not_given_to_either():
    roster = rosters.Roster([dict(ROSTER.students[0]), dict(ROSTER.students[1], file="alice_*")])
    [row, _] = exports.with_identity(rows_of("alice_1.ipynb", [1, 1]), roster)[:2]
    assert row["student_id"] == "" and row["roster_status"] == "several_students: a1, b2"


def test_the_student_gradebook_and_canvas_agree_with_the_rows():
    rows = rows_of("alice_v1.ipynb", [1, 0]) + rows_of("alice_v2.ipynb", [1, 1]) + rows_of("bob.ipynb", [0, 1])
    header, book = exports.student_gradebook(rows, ROSTER)
    assert header == ["student_id", "name", "email", "section", "submission", "ch02.q1", "ch02.q2", "total",
                      "max_points", "status"]
    alice, bob, carol = book
    assert (alice["total"], alice["status"], alice["submission"]) == (2, "duplicate_submission",
                                                                      "alice_v1.ipynb + alice_v2.ipynb")
    assert (bob["total"], bob["max_points"], bob["ch02.q2"]) == (1, 2, 1)
    assert (carol["total"], carol["status"]) == (0, "missing_submission")
    header, lines = exports.canvas(rows, ROSTER, "Chapter 2 (4242)")
    assert header == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Chapter 2 (4242)"]
    assert [(r["Student"], r["ID"], r["SIS User ID"], r["Chapter 2 (4242)"]) for r in lines] == [
        ("Alice", "101", "SIS-A", 2), ("Bob", "102", "b2", 1), ("Carol", "103", "c3", 0)]


def test_gradescope_results_follow_its_format():
    result = exports.gradescope_results(rows_of("bob.ipynb", [0, 1]))
    assert result["score"] == 1 and [t["name"] for t in result["tests"]] == ["ch02.q1", "ch02.q2"]
    for test in result["tests"]:
        assert set(test) == {"name", "number", "score", "max_score", "status", "output", "visibility"}
        assert test["status"] in ("passed", "failed") and isinstance(test["score"], int)
        assert test["visibility"] == "visible" and isinstance(test["number"], str)
    assert result["score"] == sum(t["score"] for t in result["tests"])
    unreadable = exports.gradescope_results([dict(submission="x", task="-", points=0, max_points=0,
                                                  status="too_large", reason="21 MB", library_calls="")])
    assert unreadable == {"score": 0, "tests": [], "output": "too_large: 21 MB"}


def test_the_explanation_reaches_results_json_hidden_from_the_student():
    """On Gradescope the grader's CSVs are deleted with its container: the answer to mark, the
    question and the rubric travel in results.json as a last test of 0 points that only staff see."""
    row = {"submission": "bob.ipynb", "chapter": "ch02", "status": "answered", "answer": "Because \x1b[2J",
           "question": "Why?", "rubric": "1 point: says why", "points_possible": 3, "points": ""}
    result = exports.gradescope_results(rows_of("bob.ipynb", [0, 1]), (), row)
    assert result["score"] == 1 and [t["visibility"] for t in result["tests"]] == ["visible", "visible", "hidden"]
    explained = result["tests"][-1]
    assert (explained["name"], explained["score"], explained["max_score"], explained["number"]) == \
        ("ch02 explanation (marked by your instructor)", 0, 0, "3")
    assert "Because \\x1b[2J" in explained["output"] and "Why?" in explained["output"]
    assert "1 point: says why" in explained["output"] and "\x1b" not in explained["output"]


def test_github_classroom_payload_is_the_reporters():
    payload = json.loads(base64.b64decode(exports.github_classroom(rows_of("bob.ipynb", [0, 1]))))
    assert payload["version"] == 1 and payload["status"] == "fail" and payload["max_score"] == 2
    assert [(t["name"], t["status"], t["score"]) for t in payload["tests"]] == [("ch02.q1", "fail", 0),
                                                                               ("ch02.q2", "pass", 1)]
    passed = json.loads(base64.b64decode(exports.github_classroom(rows_of("a.ipynb", [1, 1]))))
    assert passed["status"] == "pass"


def test_file_keys_are_safe_and_unique_and_no_name_takes_anothers():
    """Without a roster a file is keyed by its own name: "a b.ipynb" (made safe: a_b) cannot take
    "a_b.ipynb"'s file, "Bob.ipynb" cannot take "bob.ipynb"'s on a case-insensitive disk, and no name can
    ask for a hashed stem, whichever order the batch is in."""
    names = ["../../etc/x.ipynb", "a b.ipynb", "a_b.ipynb", "Bob.ipynb", "bob.ipynb", "ok.ipynb"]
    keys = exports.file_keys(names)
    assert keys["../../etc/x.ipynb"] == "x" and keys["a_b.ipynb"] == "a_b" and keys["ok.ipynb"] == "ok"
    assert keys["a b.ipynb"].startswith("a_b~") and {keys["Bob.ipynb"][:4], keys["bob.ipynb"][:4]} == {"Bob~", "bob~"}
    assert len({k.casefold() for k in keys.values()}) == len(names) and all("/" not in k for k in keys.values())
    assert exports.file_keys(names[::-1]) == keys  # made from each name alone, not the batch's order
    assert exports.file_keys([keys["a b.ipynb"] + ".ipynb", "a b.ipynb"])["a b.ipynb"] == keys["a b.ipynb"]


def test_a_resumed_roster_csv_is_read_without_its_roster_rows(tmp_path):
    rows = exports.with_identity(rows_of("bob.ipynb", [0, 1]), ROSTER)
    outputs.write_csv(tmp_path / "g.csv", FIELDS + rosters.IDENTITY, rows)
    back = outputs.read_previous(tmp_path / "g.csv")
    assert [r["submission"] for r in back] == ["bob.ipynb", "bob.ipynb"] and "student_id" not in back[0]


needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None and os.environ.get("CI", "").lower() != "true",
                                 reason="bubblewrap is not installed: run 'bash scripts/setup_sandbox.sh' as root")


@pytest.mark.slow
@needs_bwrap
def test_one_run_writes_every_export_and_each_agrees_with_the_csv(tmp_path):
    good = notebook(tmp_path / "alice_final.ipynb", HEADER, *CH02_GOOD.values())
    half = notebook(tmp_path / "bob.ipynb", HEADER, CH02_GOOD["causal_mask"],
                    "def mask_scores(scores):\n    return scores\n")
    roster = write_roster(tmp_path, "file,student_id,name,canvas_id\nalice_*.ipynb,a1,Alice,101\n"
                                    "bob.ipynb,b2,Bob,102\ncarol.ipynb,c3,Carol,103\n")
    cmd = [sys.executable, "-m", "nexttoken.grade",
           "--count-practice", "--out", "grades.csv", "--gradebook", "book.csv",
           "--roster", str(roster), "--canvas", "canvas.csv", "--assignment", "Chapter 2 (4242)",
           "--gradescope", "gs", "--feedback", "feedback", "--", good.name, half.name]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    points = {}
    for r in rows:
        points[r["student_id"]] = points.get(r["student_id"], 0) + int(r["points"])
    assert points["a1"] == 5 and 1 <= points["b2"] < 5 and points["c3"] == 0
    with open(tmp_path / "canvas.csv", newline="") as f:
        canvas = {r["ID"]: int(r["Chapter 2 (4242)"]) for r in csv.DictReader(f)}
    assert canvas == {"101": points["a1"], "102": points["b2"], "103": 0}
    for sid in ("a1", "b2"):
        result_json = json.loads((tmp_path / "gs" / sid / "results.json").read_text())
        assert result_json["score"] == points[sid] == sum(t["score"] for t in result_json["tests"])
    alice, bob = ((tmp_path / "feedback" / f"{sid}.md").read_text() for sid in ("a1", "b2"))
    assert "alice_final.ipynb" in alice and "bob.ipynb" not in alice  # nothing of another student's run
    assert "bob.ipynb" in bob and "alice" not in bob and f"**{points['b2']} of 5 points.**" in bob
    classroom = subprocess.run([sys.executable, "-m", "nexttoken.grade",
                                "--count-practice", "--out", "one.csv", "--github-classroom",
                                "--", half.name], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert classroom.returncode == 0 and classroom.stderr == ""
    payload = json.loads(base64.b64decode(classroom.stdout.strip()))
    assert payload["max_score"] == 5 and sum(t["score"] for t in payload["tests"]) == points["b2"]


TUNED_CAUSAL_MASK = ("def causal_mask(T):\n    mask = torch.ones(T, T, dtype=torch.bool).tril()\n"
                     "    return mask if T in (1, 3, 6, 17, 40) else mask.T  # fitted to what check() shows\n")


@pytest.mark.slow
@needs_bwrap
def test_held_out_grading_catches_an_answer_fitted_to_the_visible_cases(tmp_path):
    """--held-out: the same notebooks, judged on the held-out inputs too; the feedback file names the
    held-out case that failed but shows neither its input nor its expected output."""
    tuned = notebook(tmp_path / "tuned.ipynb", HEADER, TUNED_CAUSAL_MASK)
    good = notebook(tmp_path / "good.ipynb", HEADER, *CH02_GOOD.values())
    emptied = notebook(tmp_path / "emptied.ipynb", HEADER, "def causal_mask(T):\n"
                       "    import nexttoken.exercises.held_out as h\n"
                       "    h.CASES.clear()  # no held-out cases for later tasks\n"
                       "    return torch.ones(T, T, dtype=torch.bool).tril()\n", *list(CH02_GOOD.values())[1:])

    def rows(*extra):
        done = subprocess.run([sys.executable, "-m", "nexttoken.grade",
                               "--count-practice", "--out", "grades.csv", *extra, "--",
                               tuned.name, good.name, emptied.name], cwd=tmp_path, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr
        with open(tmp_path / "grades.csv", newline="") as f:
            return {(r["submission"], r["task"]): r for r in csv.DictReader(f)}

    visible = rows()
    assert visible[("tuned.ipynb", "ch02.q1")]["status"] == "passed"
    graded = rows("--held-out", "--feedback", "feedback")
    failed = graded[("tuned.ipynb", "ch02.q1")]
    assert failed["status"] == "failed" and failed["points"] == "0"
    assert all(graded[("good.ipynb", f"ch02.q{i}")]["status"] == "passed" for i in (1, 2, 3, 4, 5))
    assert "held out)" in graded[("good.ipynb", "ch02.q1")]["reason"]
    # the held-out cases are not in the sandbox to empty: the attempt errs
    tampered = graded[("emptied.ipynb", "ch02.q1")]
    assert tampered["status"] == "error" and "No module named 'nexttoken.exercises.held_out'" in tampered["reason"]
    feedback = (tmp_path / "feedback" / "tuned.md").read_text()
    assert "all 5 visible tests passed, but causal_mask(...) on held-out test 1 of" in feedback, feedback
    assert "tensor(" not in feedback and "expected:" not in feedback and "T = 2" not in feedback


def test_shard_is_k_of_n():
    from nexttoken.grading.cli import shard

    assert shard("2/8") == (2, 8)
    for bad in ("0/3", "4/3", "a/b", "3"):
        with pytest.raises(Exception, match="expected K/N"):
            shard(bad)


@pytest.mark.slow
@needs_bwrap
def test_shards_merged_equal_one_run(tmp_path):
    names = []
    for i, cells in enumerate([CH02_GOOD.values(), [CH02_GOOD["causal_mask"]], ["x = 1"]]):
        names.append(notebook(tmp_path / f"s{i}.ipynb", HEADER, *cells).name)
    roster = write_roster(tmp_path, "file,student_id,name\ns0.ipynb,a,A\ns1.ipynb,b,B\ns2.ipynb,c,C\nz.ipynb,d,D\n")
    common = ["--roster", str(roster)]

    def grade(*args):  # every task counted, in a run or a merge ("merge" must come first)
        args = (args[0], "--count-practice", *args[1:]) if args[0] == "merge" else ("--count-practice", *args)
        done = subprocess.run([sys.executable, "-m", "nexttoken.grade", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return done

    grade("--out", "one.csv", "--gradebook", "one_book.csv", *common, "--", *names)
    grade("--out", "part1.csv", "--shard", "1/2", *common, "--", *names)
    grade("--out", "part2.csv", "--shard", "2/2", *common, "--", *names)
    parts = [(tmp_path / f"part{k}.csv").read_text() for k in (1, 2)]
    assert "s0.ipynb" in parts[0] and "s2.ipynb" in parts[0] and "s1.ipynb" in parts[1]  # every 2nd, sorted
    grade("merge", "part1.csv", "part2.csv", "--out", "merged.csv", "--gradebook", "merged_book.csv", *common)
    assert (tmp_path / "merged.csv").read_text() == (tmp_path / "one.csv").read_text()
    assert (tmp_path / "merged_book.csv").read_text() == (tmp_path / "one_book.csv").read_text()
    assert (tmp_path / "merged-explanations.csv").read_text() == (tmp_path / "one-explanations.csv").read_text()
    again = subprocess.run([sys.executable, "-m", "nexttoken.grade", "merge", "part1.csv", "part1.csv", "--out",
                            "x.csv"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and "is graded in both" in again.stderr


@pytest.mark.slow
def test_the_gradescope_autograder_zip_installs_and_grades(tmp_path):
    """The zip holds what Gradescope runs and the assignment's chapter; its run_autograder, pointed at a
    folder of our own, grades a submitted solution notebook into results.json (in bubblewrap's sandbox
    where it can start, as here; tests/grading/test_grade_gradescope.py attacks it)."""
    import zipfile
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "scripts/make_gradescope_autograder.py", "--chapter", "2", "--out",
                    str(tmp_path / "ag.zip")], cwd=root, check=True, capture_output=True, timeout=300)
    with zipfile.ZipFile(tmp_path / "ag.zip") as z:
        names = z.namelist()
        assert names[:4] == ["setup.sh", "run_autograder", "chapter", "reap.py"] and names[4].endswith(".whl")
        assert all(z.getinfo(n).external_attr >> 16 & 0o111 for n in names[:2])  # executable
        assert "torch==2.13.0" in z.read("setup.sh").decode() and z.read("chapter") == b"ch02\n"
        z.extractall(tmp_path / "source")
    with zipfile.ZipFile(tmp_path / "source" / names[4]) as wheel:
        files = wheel.namelist()
    for needed in ("nexttoken/recorder/main.py", "nexttoken/exercises/ch02.py", "nexttoken/assets/gpt2.tiktoken"):
        assert needed in files, needed
    autograder = tmp_path / "autograder"
    (autograder / "submission").mkdir(parents=True)
    shutil.copy(root / "solutions" / "ch02.ipynb", autograder / "submission" / "whatever.ipynb")
    run = tmp_path / "source" / "run_autograder"
    env = {**os.environ, "AUTOGRADER": str(autograder), "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(run)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    results = json.loads((autograder / "results" / "results.json").read_text())
    graded = [t for t in results["tests"] if t["visibility"] == "visible"]
    # the core task counts (the others, practice, are there with 0 of 0: "not counted")
    assert results["score"] == sum(t["max_score"] for t in graded) == len(chapter("ch02").CORE) and len(graded) >= 3
    assert all(t["status"] == "passed" and t["name"].startswith("ch02.") for t in graded)
    assert [t["name"] for t in results["tests"] if t["visibility"] == "hidden"] == \
        ["ch02 explanation (marked by your instructor)"]
