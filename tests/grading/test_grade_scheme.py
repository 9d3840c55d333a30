"""What a grade counts (``assignment.Scheme``): by default the core tasks, as the lesson asks, so a learner who
does exactly the core gets the same LMS grade as one who does every task; --count-practice and --weight as an
instructor asks. Run through ``merge``, which writes every export from a grades CSV (seconds)."""

import csv
import json

import pytest

from nexttoken.exercises import chapter
from nexttoken.grading import assignment, cli, outputs
from nexttoken.grading.rows import FIELDS

CH05 = chapter("ch05")
CORE = [f"ch05.{name}" for name in CH05.CORE]
PRACTICE = [f"ch05.{name}" for name in CH05.TASKS if name not in CH05.CORE]
ROSTER = "file,student_id,name,canvas_id\ncore.ipynb,s1,Core Only,11\nall.ipynb,s2,Every Task,12\n" \
         "half.ipynb,s3,Half Core,13\n"


def rows_of(name, passed):
    """A submission's rows, each task passed (1 of 1) or not written yet, as the grader writes them."""
    return [dict(submission=name, task=f"ch05.{t}", points=int(f"ch05.{t}" in passed), max_points=1,
                 status="passed" if f"ch05.{t}" in passed else "not_implemented",
                 reason="all tests passed" if f"ch05.{t}" in passed else "still raises NotImplementedError",
                 library_calls="") for t in CH05.TASKS]


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def merged(tmp_path, monkeypatch, capsys):
    """merge of one class's grades CSV with every export; returns a function of the extra arguments."""
    monkeypatch.chdir(tmp_path)
    rows = rows_of("core.ipynb", CORE) + rows_of("all.ipynb", CORE + PRACTICE) + rows_of("half.ipynb", CORE[:1])
    outputs.write_csv(tmp_path / "part.csv", FIELDS, rows)
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")

    def merge(*extra):
        code = cli.main(["merge", "part.csv", "--out", "grades.csv", "--gradebook", "book.csv", "--roster",
                         "roster.csv", "--canvas", "canvas.csv", "--assignment", "Chapter 5 (42)", "--gradescope",
                         "gs", "--feedback", "fb", "--chapter", "5", *extra])
        return code, capsys.readouterr()
    return merge


def canvas_points(tmp_path):
    return {line["ID"]: line["Chapter 5 (42)"] for line in read(tmp_path / "canvas.csv")}


def test_a_learner_who_does_exactly_the_core_gets_full_marks_by_default(merged, tmp_path):
    assert CORE and PRACTICE  # the chapter has both kinds of task
    code, _ = merged()
    assert code == 0
    full, half = str(len(CORE)), str(len(CORE[:1]))
    assert canvas_points(tmp_path) == {"11": full, "12": full, "13": half}
    book = {line["student_id"]: line for line in read(tmp_path / "book.csv")}
    assert book["s1"]["total"] == book["s2"]["total"] == book["s1"]["max_points"] == full
    # practice is reported beside the grade: its status, in a column that says it is not counted
    assert book["s2"][f"{PRACTICE[0]} (not counted)"] == "passed"
    assert book["s1"][f"{PRACTICE[0]} (not counted)"] == "not_implemented"
    assert book["s1"][CORE[0]] == "1"
    for sid in ("s1", "s2"):
        results = json.loads((tmp_path / "gs" / sid / "results.json").read_text())
        assert results["score"] == len(CORE)
        practice = [t for t in results["tests"] if t["name"].endswith("(not counted)")]
        assert len(practice) == len(PRACTICE) and all(t["max_score"] == 0 for t in practice)
    feedback = (tmp_path / "fb" / "s1.md").read_text()
    assert f"**{full} of {full} points.**" in feedback
    assert f"## {PRACTICE[0]}: not_implemented (not counted)" in feedback
    grades = read(tmp_path / "grades.csv")  # every task's status stays in grades.csv; practice is 0 of 0
    practice_rows = [r for r in grades if r["task"] in PRACTICE and r["submission"] == "all.ipynb"]
    assert {(r["status"], r["points"], r["max_points"]) for r in practice_rows} == {("passed", "0", "0")}


def test_count_practice_counts_every_task(merged, tmp_path):
    code, _ = merged("--count-practice")
    assert code == 0
    assert canvas_points(tmp_path) == {"11": str(len(CORE)), "12": str(len(CH05.TASKS)), "13": "1"}
    assert "(not counted)" not in (tmp_path / "book.csv").read_text()


def test_weights_set_a_tasks_points_and_0_leaves_it_out(merged, tmp_path):
    code, _ = merged("--weight", f"{CORE[0].split('.')[1]}=3", "--weight", f"{PRACTICE[0]}=2")
    assert code == 0
    weighted = 3 + (len(CORE) - 1)
    assert canvas_points(tmp_path) == {"11": str(weighted), "12": str(weighted + 2), "13": "3"}
    code, _ = merged("--weight", f"{CORE[0]}=0")
    assert canvas_points(tmp_path)["13"] == "0" and f"{CORE[0]} (not counted)" in (tmp_path / "book.csv").read_text()


def test_the_scheme_is_applied_from_each_tasks_status_whatever_wrote_the_csv(merged, tmp_path):
    """A grades CSV written under one scheme, merged under another, gives what the other writes."""
    merged()
    (tmp_path / "default.csv").write_text((tmp_path / "grades.csv").read_text())
    code, _ = merged("--count-practice")
    assert code == 0
    assert cli.main(["merge", "default.csv", "--out", "again.csv", "--count-practice", "--roster", "roster.csv",
                     "--chapter", "5"]) == 0
    again, counted = (tmp_path / "again.csv").read_text(), (tmp_path / "grades.csv").read_text()
    assert again == counted != (tmp_path / "default.csv").read_text()


@pytest.mark.parametrize("weight, said", [("q2", "expected TASK=POINTS"), ("q2=-1", "expected TASK=POINTS"),
                                          ("ch05.q9=1", "no such task"), ("ch99.q1=1", "no such task")])
def test_a_bad_weight_is_refused_naming_the_argument(weight, said, merged, capsys):
    with pytest.raises(SystemExit) as stopped:
        merged("--weight", weight)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "--weight" in err and said in err


def test_a_bare_task_needs_the_chapter(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    outputs.write_csv(tmp_path / "part.csv", FIELDS, rows_of("core.ipynb", CORE))
    with pytest.raises(SystemExit):
        cli.main(["merge", "part.csv", "--out", "g.csv", "--weight", "q1=2"])
    assert "name the task with its chapter (e.g. ch05.q1)" in capsys.readouterr().err


def test_the_default_counts_each_chapters_core_tasks_or_every_task_of_a_chapter_without_core():
    for name in ("ch01", "ch05"):
        module = chapter(name)
        assert assignment.chapter_points(name) == sum(getattr(module, t).points for t in module.CORE) > 0
    ch07 = chapter("ch07")
    assert not ch07.CORE and assignment.chapter_points("ch07") == len(ch07.TASKS)  # not 0 of 0
    assert assignment.Scheme(practice=True).chapter_points("ch05") == len(CH05.TASKS)
