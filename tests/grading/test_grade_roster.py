"""Exports keyed by the roster's student, assignments that name their chapter, names escaped on the
terminal: each attack run through ``python -m nexttoken.grade merge``, which writes every
export from grades CSVs without grading anything (seconds), then one sandboxed batch end to end (slow)."""

import csv
import json
import os
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from submissions import CH02_GOOD, HEADER, notebook

from nexttoken.grading import batch, cli, exports, outputs, rosters
from nexttoken.grading.rows import FIELDS, for_assignment
from nexttoken.grading.text import name_text, shown

ROOT = Path(__file__).resolve().parents[2]
CH02 = [f"ch02.q{i}" for i in range(1, 6)]
ESCAPE_NAME = "\x1b[2J\x1b[31mevil\u202egpj.ipynb"  # clears the screen, turns it red, reverses the text
NFD_JOSE = unicodedata.normalize("NFD", "José.ipynb")  # as a Mac writes it


def rows_of(name, points, tasks=CH02):
    return [dict(submission=name, task=t, points=p, max_points=1, status="passed" if p else "failed",
                 reason="all 5 tests passed" if p else "your output is wrong", library_calls="")
            for t, p in zip(tasks, points)]


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def merge(tmp_path, capsys, rows, roster_text, *extra):
    """grades CSV -> merge with every export, in tmp_path (the current folder), every task counted
    (--count-practice: these tests are about whose points go where, test_grade_scheme.py about which tasks
    count); returns (exit code, stdout, stderr)."""
    outputs.write_csv(tmp_path / "part.csv", FIELDS, rows)
    (tmp_path / "roster.csv").write_text(roster_text, encoding="utf-8")
    code = cli.main(["merge", "part.csv", "--out", "grades.csv", "--gradebook", "book.csv", "--roster", "roster.csv",
                     "--canvas", "canvas.csv", "--assignment", "Chapter 2 (42)", "--gradescope", "gs",
                     "--feedback", "fb", "--count-practice", *extra])
    out, err = capsys.readouterr()
    return code, out, err


ROSTER = ("file,student_id,name,canvas_id\nalice_*.ipynb,a1,Alice,101\nbob.ipynb,b2,Bob,102\n"
          "José.ipynb,j3,José,103\ncarol.ipynb,c4,Carol,104\n")
HONEST = {"alice_final.ipynb": "a1", "bob.ipynb": "b2", NFD_JOSE: "j3"}  # each with full marks
ATTACKS = {"b2.ipynb": [0] * 5,  # named after Bob's student id: sorted before bob.ipynb, it took b2.md
           "a1.ipynb": [1, 1, 1, 1, 0],  # after Alice's
           "alice_zzz.ipynb": [0] * 5,  # a second file on Alice's pattern, to lower her total
           ESCAPE_NAME: [0] * 5}


@pytest.fixture
def attacked(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [r for name in HONEST for r in rows_of(name, [1] * 5)]
    rows += [r for name, points in ATTACKS.items() for r in rows_of(name, points)]
    code, out, err = merge(tmp_path, capsys, rows, ROSTER)
    assert code == 0, err
    return tmp_path, out, err, rows


def test_a_file_named_after_a_classmate_takes_none_of_their_exports(attacked):
    folder, *_ = attacked
    assert sorted(p.name for p in (folder / "fb").iterdir()) == ["a1.md", "b2.md", "c4.md", "j3.md"]
    assert sorted(p.name for p in (folder / "gs").iterdir()) == ["a1", "b2", "c4", "j3"]
    bob = (folder / "fb" / "b2.md").read_text()
    assert "Bob (b2), `bob.ipynb`" in bob and "**5 of 5 points.**" in bob and "b2.ipynb" not in bob
    assert json.loads((folder / "gs" / "b2" / "results.json").read_text())["score"] == 5
    alice = (folder / "fb" / "a1.md").read_text()
    assert "Alice (a1), `alice_final.ipynb`" in alice and "**5 of 5 points.**" in alice
    assert "also handed in, not counted: `alice_zzz.ipynb` (0 of 5 points)" in alice and "a1.ipynb" not in alice
    for sid in ("a1", "j3"):
        assert json.loads((folder / "gs" / sid / "results.json").read_text())["score"] == 5


def test_honest_students_keep_full_marks_and_no_row_is_lost(attacked):
    folder, _, _, rows = attacked
    book = {r["student_id"]: r for r in read(folder / "book.csv")}
    assert [(book[s]["total"], book[s]["max_points"], book[s]["status"]) for s in ("a1", "b2", "j3")] == \
        [("5", "5", "duplicate_submission"), ("5", "5", "graded"), ("5", "5", "graded")]
    # Carol handed in nothing, but three files are nobody's here (one could be hers): a blank, not 0
    assert {r["ID"]: r["Chapter 2 (42)"] for r in read(folder / "canvas.csv")} == \
        {"101": "5", "102": "5", "103": "5", "104": ""}
    grades = read(folder / "grades.csv")
    assert len(grades) == len(rows) + 1  # every file's rows, and Carol's missing_submission row
    assert {r["submission"] for r in grades} == {*map(name_text, [*HONEST, *ATTACKS]), "-"}
    status = {r["submission"]: (r["student_id"], r["roster_status"]) for r in grades}
    assert status["b2.ipynb"] == status["a1.ipynb"] == status[name_text(ESCAPE_NAME)] == ("", "no_roster_entry")
    assert status[NFD_JOSE] == ("j3", "matched")  # NFD on disk, NFC in the roster: one name


def test_a_student_with_nothing_handed_in_is_a_missing_submission_of_the_assignments_points(attacked):
    folder, *_ = attacked
    carol = next(r for r in read(folder / "book.csv") if r["student_id"] == "c4")
    assert (carol["total"], carol["max_points"], carol["status"], carol["submission"]) == \
        ("0", "5", "missing_submission", "")
    feedback = (folder / "fb" / "c4.md").read_text()
    assert "**0 of 5 points.**" in feedback and "missing submission: no file matches 'carol.ipynb'" in feedback
    assert json.loads((folder / "gs" / "c4" / "results.json").read_text()) == \
        {"score": 0, "tests": [], "output": "missing submission: no file matches 'carol.ipynb'"}
    [row] = [r for r in read(folder / "grades.csv") if r["student_id"] == "c4"]
    assert (row["points"], row["max_points"], row["status"]) == ("0", "5", "missing_submission")


def test_the_roster_problems_are_on_the_console_and_in_the_problems_file(attacked):
    folder, out, err, _ = attacked
    assert ("roster: 4 students, 7 files; problems: 2 duplicate_submission, 1 missing_submission, "
            "3 no_roster_entry (all in grades-problems.csv)") in err
    problems = [(p["problem"], p["student_id"], p["submission"], p["detail"])
                for p in read(folder / "grades-problems.csv")]
    unmatched = {p[2]: p[3] for p in problems if p[0] == "no_roster_entry"}
    assert sorted(unmatched) == sorted(["b2.ipynb", "a1.ipynb", name_text(ESCAPE_NAME)])
    escaped = name_text(ESCAPE_NAME)  # which file, what the roster has, what to do (issue 66)
    assert unmatched[escaped] == (f"no line of the roster's 4 matches {shown(escaped)} in its file column (a "
                                  "file name or a pattern such as s12_*.ipynb): counted for no student; add or "
                                  "correct its student's line and run again (or merge this grades CSV with the "
                                  "corrected --roster)")
    for sid, file in (("b2", "bob.ipynb"), ("a1", "alice_*.ipynb")):  # named after a classmate's id
        assert unmatched[f"{sid}.ipynb"].startswith(f"{sid}.ipynb is named after {sid}'s student_id, but their "
                                                    f"roster file is '{file}': counted for no student")
    problems = [p for p in problems if p[0] != "no_roster_entry"]
    assert sorted(problems) == sorted([
        ("duplicate_submission", "a1", "alice_final.ipynb", "counted"),
        ("duplicate_submission", "a1", "alice_zzz.ipynb", "not counted"),
        ("missing_submission", "c4", "", "missing submission: no file matches 'carol.ipynb'")])
    assert "  duplicate_submission: a1 Alice: alice_zzz.ipynb: not counted" in err


def test_names_on_the_terminal_are_escaped(attacked, capsys):
    _, out, err, _ = attacked
    batch.progress(3, 9, ESCAPE_NAME, rows_of(ESCAPE_NAME, [1, 0]), 1.25)
    assert capsys.readouterr().err == "[3/9] \\x1b[2J\\x1b[31mevil\\u202egpj.ipynb 1/2 in 1.2 s\n"
    assert "\x1b" not in out + err and "\u202e" not in out + err
    assert "no_roster_entry: \\x1b[2J\\x1b[31mevil\\u202egpj.ipynb" in err
    assert shown("a\nb\tc\u2028é中\udcff") == "a\\nb\\tc\\u2028é中\\udcff"


def test_nothing_a_submission_wrote_is_rendered_as_markdown_in_its_feedback(tmp_path, capsys, monkeypatch):
    """A file name and a reason (which quotes what the learner's code raised) holding Markdown and HTML:
    the feedback shows them as text, in a code span and a code block longer than their backtick runs."""
    markdown_it = pytest.importorskip("markdown_it")
    monkeypatch.chdir(tmp_path)
    name = "alice_[x](mailto:x@evil.example) ``<b>bold.ipynb"  # no "/": a file name cannot hold one
    rows = rows_of(name, [0, 1, 1, 1, 1])
    rows[0]["reason"] = "error: ValueError: ```\n# Hacked\n[click](https://evil.example)\n<script>x</script>"
    code, _, err = merge(tmp_path, capsys, rows, ROSTER)
    assert code == 0, err
    html = markdown_it.MarkdownIt().render((tmp_path / "fb" / "a1.md").read_text())
    assert "<a " not in html and "<b>" not in html and "<script>" not in html and "<h1>Hacked" not in html
    assert html.count("<h1>") == 1 and "[x](mailto:x@evil.example)" in html and "# Hacked" in html
    graded = dict(rows[0], reason="```\n# Hacked\n<script>x</script>")  # a direct run keeps a reason's lines
    html = markdown_it.MarkdownIt().render(exports.feedback("x", [graded]))
    assert "<h1>Hacked" not in html and "<script>" not in html and "# Hacked" in html


def test_a_classmates_roster_line_can_only_be_matched_by_case_when_the_roster_says_so(tmp_path, capsys,
                                                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = rows_of("ALICE_final.ipynb", [1] * 5)
    code, _, err = merge(tmp_path, capsys, rows, ROSTER)
    assert code == 0 and "1 no_roster_entry" in err
    assert (tmp_path / "fb" / "a1.md").read_text().count("missing submission") == 1
    code, _, err = merge(tmp_path, capsys, rows, ROSTER, "--ignore-case")
    assert code == 0 and "no_roster_entry" not in err
    assert "**5 of 5 points.**" in (tmp_path / "fb" / "a1.md").read_text()
    (tmp_path / "roster2.csv").write_text("file,student_id,name\na.ipynb,Ab,A\nb.ipynb,AB,B\n")
    rosters.read_roster(tmp_path / "roster2.csv")  # two ids, case-sensitive
    with pytest.raises(rosters.RosterError, match="lines 2 and 3: student_id 'AB' twice"):
        rosters.read_roster(tmp_path / "roster2.csv", ignore_case=True)
    assert exports.student_keys(rosters.read_roster(tmp_path / "roster2.csv"))["Ab"].startswith("Ab~")


def test_a_notebook_of_another_chapter_gets_0_for_the_assignment(tmp_path, capsys, monkeypatch):
    """--chapter 2: a correct chapter-1 notebook (and a chapter-6 one, 6 tasks) get 0 of 5 with the
    reason, whichever run graded them; the honest chapter-2 notebook keeps its 5 of 5."""
    monkeypatch.chdir(tmp_path)
    ch01 = [f"ch01.q{i}" for i in range(1, 5)]
    ch06 = [f"ch06.q{i}" for i in range(1, 7)]
    rows = rows_of("alice_ch1.ipynb", [1] * 4, ch01) + rows_of("bob.ipynb", [1] * 5) + \
        rows_of("José.ipynb", [1] * 6, ch06)
    code, _, err = merge(tmp_path, capsys, rows, ROSTER, "--chapter", "2")
    assert code == 0, err
    grades = {(r["submission"], r["task"]): r for r in read(tmp_path / "grades.csv")}
    for name, found in (("alice_ch1.ipynb", "ch01"), ("José.ipynb", "ch06")):
        row = grades[(name, "-")]
        assert (row["points"], row["max_points"], row["status"]) == ("0", "5", "wrong_chapter")
        assert f"this notebook is {found}'s" in row["reason"] and "the assignment is ch02 (--chapter)" in row["reason"]
        assert not any(n == name and t != "-" for n, t in grades)
    book = {r["student_id"]: (r["total"], r["max_points"]) for r in read(tmp_path / "book.csv")}
    assert book == {"a1": ("0", "5"), "b2": ("5", "5"), "j3": ("0", "5"), "c4": ("0", "5")}
    assert all(int(r["Chapter 2 (42)"]) <= 5 for r in read(tmp_path / "canvas.csv"))
    assert "wrong_chapter" in (tmp_path / "fb" / "a1.md").read_text()


def test_for_assignment_leaves_a_run_without_chapter_as_it_was():
    from nexttoken.grading import assignment

    rows = rows_of("x.ipynb", [1] * 4, [f"ch01.q{i}" for i in range(1, 5)])
    assert for_assignment(rows, None, 5) is rows
    unreadable = [dict(submission="y", task="-", points=0, max_points=0, status="too_large", reason="r",
                       library_calls="")]
    every = assignment.Scheme(practice=True)  # not 0 of 0:
    assert for_assignment(unreadable, "ch05", assignment.chapter_points("ch05", every))[0]["max_points"] == 5
    assert assignment.chapter_arg("5") == assignment.chapter_arg("ch05") == assignment.chapter_arg("05") == "ch05"
    for bad in ("8", "ch00", "five"):
        with pytest.raises(Exception, match="expected a chapter"):
            assignment.chapter_arg(bad)


needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None and os.environ.get("CI", "").lower() != "true",
                                 reason="bubblewrap is not installed: run 'bash scripts/setup_sandbox.sh' as root")


@pytest.mark.slow
@needs_bwrap
def test_one_graded_batch_with_a_chapter_and_a_roster(tmp_path):
    """Graded for real (sandboxed), --chapter 2: a correct chapter-1 notebook handed in as Alice's gets
    0 of 5 and is never graded as chapter 1; Bob's correct chapter-2 notebook keeps 5 of 5 in every
    export although a file named after his id is in the batch; every name printed is escaped."""
    shutil.copy(ROOT / "solutions" / "ch01.ipynb", tmp_path / "alice_ch1.ipynb")
    notebook(tmp_path / "bob.ipynb", HEADER, *CH02_GOOD.values())
    notebook(tmp_path / "b2.ipynb", HEADER, "x = 1\n")
    notebook(tmp_path / ESCAPE_NAME, HEADER, "x = 1\n")
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    names = ["alice_ch1.ipynb", "bob.ipynb", "b2.ipynb", ESCAPE_NAME]
    done = subprocess.run([sys.executable, "-m", "nexttoken.grade",
                           "--count-practice", "--out", "grades.csv", "--chapter", "2",
                           "--roster", "roster.csv", "--gradebook", "book.csv", "--feedback", "fb", "--gradescope",
                           "gs", "--", *names], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "\x1b" not in done.stdout + done.stderr and "\u202e" not in done.stdout + done.stderr
    assert "\\x1b[2J\\x1b[31mevil\\u202egpj.ipynb" in done.stderr and "alice_ch1.ipynb wrong_chapter 0/5" in done.stderr
    assert "problems: 1 submission not graded task by task (1 wrong_chapter); 5 of the roster" in done.stdout
    page = (tmp_path / "grades-report.html").read_text()  # the class report, from this sandboxed batch
    assert (tmp_path / "grades-report.html").stat().st_mode & 0o777 == 0o600
    # one learner a student: Bob's file; the two files placed on no student are listed apart, not counted
    assert "ch02.q1</td><td>practice</td><td class=\"rate\">1 of 1 (100%)" in page and "wrong_chapter: 1" in page
    assert 'Files placed on no student (see the problems CSV): 2' in page
    grades = read(tmp_path / "grades.csv")
    [alice] = [r for r in grades if r["submission"] == "alice_ch1.ipynb"]
    assert (alice["status"], alice["points"], alice["max_points"], alice["student_id"]) == \
        ("wrong_chapter", "0", "5", "a1")
    assert [(r["task"], r["points"]) for r in grades if r["submission"] == "bob.ipynb"] == [(t, "1") for t in CH02]
    book = {r["student_id"]: (r["total"], r["max_points"], r["status"]) for r in read(tmp_path / "book.csv")}
    assert book == {"a1": ("0", "5", "wrong_chapter"), "b2": ("5", "5", "graded"),
                    "j3": ("0", "5", "missing_submission"), "c4": ("0", "5", "missing_submission")}
    assert json.loads((tmp_path / "gs" / "b2" / "results.json").read_text())["score"] == 5
    assert "**5 of 5 points.**" in (tmp_path / "fb" / "b2.md").read_text()
    assert "2 no_roster_entry" in done.stderr and "1 wrong_chapter" in done.stderr  # counted on the console
    assert "wrong_chapter: a1 Alice: alice_ch1.ipynb: this notebook is ch01's" in done.stderr
    problems = read(tmp_path / "grades-problems.csv")
    assert [(p["student_id"], p["submission"]) for p in problems if p["problem"] == "wrong_chapter"] == \
        [("a1", "alice_ch1.ipynb")]


def test_the_consoles_counts_take_their_nouns_number():
    from nexttoken.grading.cli import counted

    assert [counted(k, "submission") for k in (0, 1, 2)] == ["0 submissions", "1 submission", "2 submissions"]
