"""The class report says what to reteach: the mistakes of learners who attempted a task, ranked by how many
made them, core first; what was not attempted, apart; students counted, not files, with the roster's missing
and unplaced; identical notebooks and identical explanation answers listed; the assignment's name in the
title; nothing cut mid-word. Built by ``merge`` from a grades CSV and its explanations CSV (seconds)."""

import html
import re

import pytest

from nexttoken.exercises import chapter
from nexttoken.grading import cli, outputs, report
from nexttoken.grading.rows import FIELDS

CH05 = chapter("ch05")
CORE, PRACTICE = CH05.CORE[0], next(t for t in CH05.TASKS if t not in CH05.CORE)
WRONG = "your loop appended the token before it scored it"
HF_HABIT = "generate_greedy(model, ids, 3) raised AttributeError: 'Tensor' object has no attribute 'logits'"
LONG = "the output differs " + "because of a very long explanation of what went wrong " * 6
ROSTER = ("file,student_id,name\nann.ipynb,s1,Ann\nben*.ipynb,s2,Ben\ncat.ipynb,s3,Cat\ndan.ipynb,s4,Dan\n"
          "eve.ipynb,s5,Eve\n")
SAME_ANSWER = "The model keeps no memory between calls, so each step reads the whole sequence again."


def row(name, task, status, reason="all tests passed"):
    return dict(submission=name, task=f"ch05.{task}", points=int(status == "passed"), max_points=1, status=status,
                reason=reason, library_calls="")


def explanation(name, answer, digest):
    return dict(submission=name, chapter="ch05", status="answered" if answer else "no_answer", answer=answer,
                question="", rubric="", points_possible="", points="", notebook_sha256=digest)


@pytest.fixture
def page(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [row("ann.ipynb", CORE, "failed", WRONG), row("ann.ipynb", PRACTICE, "not_implemented", "stub"),
            row("ben.ipynb", CORE, "failed", WRONG), row("ben.ipynb", PRACTICE, "passed"),
            row("ben-old.ipynb", CORE, "failed", LONG), row("ben-old.ipynb", PRACTICE, "failed", LONG),
            row("cat.ipynb", CORE, "error", HF_HABIT), row("cat.ipynb", PRACTICE, "not_implemented", "stub"),
            row("dan.ipynb", CORE, "missing", "the function was not defined (your code cell 4 raised SyntaxError: "
                "invalid syntax)"), row("dan.ipynb", PRACTICE, "not_implemented", "stub"),
            row("zed.ipynb", CORE, "passed"), row("zed.ipynb", PRACTICE, "passed")]
    outputs.write_csv(tmp_path / "part.csv", FIELDS, rows)
    outputs.write_csv(tmp_path / "part-explanations.csv", outputs.EXPLANATION_FIELDS,
                      [explanation("ann.ipynb", SAME_ANSWER, "aa"), explanation("ben.ipynb", SAME_ANSWER.upper(), "bb"),
                       explanation("ben-old.ipynb", "", "cc"), explanation("cat.ipynb", "", "aa"),
                       explanation("dan.ipynb", "Something else entirely, in my own words here.", "dd"),
                       explanation("zed.ipynb", "", "ee")])
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    assert cli.main(["merge", "part.csv", "--out", "grades.csv", "--roster", "roster.csv", "--chapter", "5",
                     "--assignment", "Lesson 1, chapter 5 (4242)"]) == 0
    return (tmp_path / "grades-report.html").read_text(encoding="utf-8")


def test_the_reteach_list_ranks_the_mistakes_of_those_who_attempted_core_first(page):
    reteach = re.search(r'<ol id="reteach">(.*?)</ol>', page).group(1)
    items = re.findall(r"<li>(.*?)</li>", reteach)
    assert len(items) == 3  # Ann's and Ben's one mistake, Cat's error, Dan's syntax error: all the core task's
    assert items[0].startswith('<span class="count">2 of 4</span> students who attempted') and WRONG in items[0]
    assert all(f"#task-ch05.{CORE}" in item for item in items)
    said = " ".join(items)
    assert "raised AttributeError: &#x27;Tensor&#x27; object has no attribute &#x27;logits&#x27;" in said
    assert html.escape(report.SYNTAX) in said  # not "the function is missing"
    assert "NotImplementedError" not in reteach  # not attempted is apart
    assert LONG[:40] not in page  # Ben's older file does not count: only his counted file is his


def test_not_attempted_students_and_the_roster_are_apart(page):
    not_attempted = page[page.index('id="not-attempted"'):]
    assert f"ch05.{PRACTICE} (practice): 3 of 4" in not_attempted  # Ann, Cat, Dan; not Ben's older file
    assert "4 students graded, 1 with nothing handed in" in page  # Eve; zed.ipynb is nobody's
    assert re.search(r'<ul id="missing"><li>Eve \(s5\)</li></ul>', page)
    assert re.search(r'<ul id="unplaced"><li>zed.ipynb</li></ul>', page)
    assert re.search(r'<ul id="superseded"><li>ben-old.ipynb</li></ul>', page)


def test_identical_notebooks_and_answers_are_listed(page):
    assert re.search(r'<ul id="same-bytes"><li>ann.ipynb, cat.ipynb</li></ul>', page)
    assert re.search(r'<ul id="same-answers"><li>ann.ipynb, ben.ipynb</li></ul>', page)


def test_the_title_is_the_assignment_and_nothing_is_cut_mid_word(page):
    assert "<h1>Class report: Lesson 1, chapter 5 (4242)</h1>" in page
    assert report.shortened(LONG).endswith("explanation of...") or report.shortened(LONG).endswith("...")
    assert all(not word or LONG.split().count(word) for word in report.shortened(LONG)[:-3].split())
    assert len(report.shortened(LONG)) <= report.MAX_NAME
    assert report.shortened("short") == "short"


def test_of_files_with_equal_points_an_answered_one_counts_and_every_answer_reaches_gradescope(tmp_path,
                                                                                                 monkeypatch):
    """The stated rule: the most points, then an answered explanation, then the name. An older file with an
    empty explanation, whose name sorts first, no longer counts; the other answered file's answer is kept
    for the instructor too (a hidden test named by its file)."""
    monkeypatch.chdir(tmp_path)
    import json

    files = ("bob-a-old.ipynb", "bob-b.ipynb", "bob-c.ipynb")
    rows = [row(name, task, "passed") for name in files for task in CH05.TASKS]
    outputs.write_csv(tmp_path / "part.csv", FIELDS, rows)
    outputs.write_csv(tmp_path / "part-explanations.csv", outputs.EXPLANATION_FIELDS,
                      [explanation("bob-a-old.ipynb", "", "x1"), explanation("bob-b.ipynb", SAME_ANSWER, "x2"),
                       explanation("bob-c.ipynb", "An answer of my own, written for the other file.", "x3")])
    (tmp_path / "roster.csv").write_text("file,student_id,name\nbob-*.ipynb,b2,Bob\n", encoding="utf-8")
    assert cli.main(["merge", "part.csv", "--out", "grades.csv", "--roster", "roster.csv", "--chapter", "5",
                     "--gradescope", "gs", "--gradebook", "book.csv"]) == 0
    problems = {p["submission"]: p["detail"] for p in outputs.read_csv(tmp_path / "grades-problems.csv", "problems",
                                                                         [outputs.exports.PROBLEM_FIELDS])}
    assert problems == {"bob-a-old.ipynb": "not counted", "bob-b.ipynb": "counted", "bob-c.ipynb": "not counted"}
    tests = json.loads((tmp_path / "gs" / "b2" / "results.json").read_text())["tests"]
    hidden = [t for t in tests if t["visibility"] == "hidden"]
    assert len(hidden) == 2 and "| " + SAME_ANSWER in hidden[0]["output"]
    assert "bob-c.ipynb: another file of yours, not counted" in hidden[1]["name"]
    assert "| An answer of my own" in hidden[1]["output"]


def test_a_feedback_file_shows_a_reasons_lines_as_lines_after_a_merge(tmp_path, monkeypatch):
    """grades.csv holds a reason on one line (its lines joined by " | "); the feedback file, made from it by
    merge, shows it as the check printed it: the summary, then each line of evidence on its own line."""
    monkeypatch.chdir(tmp_path)
    reason = "the output has the wrong shape\n   input:    f(3)\n   expected: (2, 3)\n   got:      (3, 2)"
    outputs.write_csv(tmp_path / "part.csv", FIELDS, [row("ann.ipynb", CORE, "failed", reason)])
    assert " | input:    f(3) | " in (tmp_path / "part.csv").read_text()
    assert cli.main(["merge", "part.csv", "--out", "grades.csv", "--feedback", "fb"]) == 0
    text = (tmp_path / "fb" / "ann.md").read_text()
    assert "the output has the wrong shape\n   input:    f(3)\n   expected: (2, 3)\n   got:      (3, 2)\n" in text
    assert " | " not in text
