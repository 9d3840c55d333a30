"""A class's batch as an instructor runs it (issue 66): an LMS export of notebooks of several chapters is
refused without --chapter, before anything is graded or written; the class report (pass rates, the named
mistakes by count, the points' histogram, the explanations to mark); the console's progress and summary;
what the problems file and the feedback files say. The batch runs through ``cli.main`` with the sandboxed
grading replaced by rows made from each notebook's metadata (seconds; the sandboxed batch that writes the
report is ``test_grade_roster.test_one_graded_batch_with_a_chapter_and_a_roster``)."""

import csv
import html
import io
import json
import re
import sys
from pathlib import Path

import pytest
from submissions import recorded

from nexttoken.exercises import chapter
from nexttoken.grading import batch, cli, outputs, report, sandbox
from nexttoken.grading.rows import FIELDS, task_row

ROOT = Path(__file__).resolve().parents[2]
CH05 = chapter("ch05")
OFF_BY_ONE = CH05.q1.known[0].message  # a known mistake of ch05.q1, as its feedback names it


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def exercise(path: Path, chapter_name: str, plan: dict | None = None, metadata: bool = True) -> str:
    """The course's exercise notebook of a chapter, saved as a submission; ``plan`` ({task: reason, or
    None for a pass}) is what the stand-in grader gives it."""
    nb = json.loads((ROOT / "exercises" / f"{chapter_name}.ipynb").read_text(encoding="utf-8"))
    nb["metadata"]["plan"] = plan or {}
    if not metadata:
        del nb["metadata"]["nexttoken"]
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path.name


@pytest.fixture
def graded(tmp_path, monkeypatch):
    """cli.main with a stand-in for the sandboxed run: each notebook's rows from its chapter (its metadata,
    else what ``stand_in_chapter`` says) and its plan; ``graded`` lists the notebooks it ran."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sandbox, "find_cgroups", lambda: (None, "no cgroup in this test"))
    ran, stand_in_chapter = [], {}

    def run_submission(data, settings, slot=0, boxes=None):
        name = min(p.name for p in tmp_path.glob("*.ipynb") if p.read_bytes() == data)  # of the same bytes, one
        ran.append(name)
        nb = json.loads(data)
        found = nb["metadata"].get("nexttoken", {}).get("chapter") or stand_in_chapter[name]
        plan = nb["metadata"]["plan"]
        return recorded(found, {task: ("passed", "all 8 tests passed") if plan.get(task) is None else
                                ("failed", plan[task]) for task in chapter(found).TASKS}, settings=settings)

    monkeypatch.setattr(batch, "run_submission", run_submission)

    def run(*argv):  # every task counted (test_grade_scheme.py is about which tasks count)
        return cli.main(["--no-sandbox", "--trusted-as-root", "--allow-no-cgroup", "--jobs", "1", "--count-practice",
                         *argv])

    return run, ran, stand_in_chapter


ROSTER = "file,student_id,name,canvas_id\nann.ipynb,s1,Ann,11\nben.ipynb,s2,Ben,12\ncat.ipynb,s3,Cat,13\n"
EXPORTS = {"canvas": ["--roster", "roster.csv", "--canvas", "canvas.csv", "--assignment", "Chapter 5 (4242)"],
           "gradescope": ["--gradescope", "gs"],
           "gradebook": ["--roster", "roster.csv", "--gradebook", "book.csv"]}


def mixed_class(folder: Path, ch01_metadata: bool = True) -> list[str]:
    (folder / "roster.csv").write_text(ROSTER, encoding="utf-8")
    return [exercise(folder / "ann.ipynb", "ch05"), exercise(folder / "ben.ipynb", "ch05"),
            exercise(folder / "cat.ipynb", "ch01", metadata=ch01_metadata)]


@pytest.mark.parametrize("export", sorted(EXPORTS))
def test_an_export_of_several_chapters_is_refused_before_anything_is_graded(graded, tmp_path, capsys, export):
    run, ran, _ = graded
    names = mixed_class(tmp_path)
    code = run("--out", "grades.csv", *EXPORTS[export], "--", *names)
    err = capsys.readouterr().err
    assert code == 2 and ran == [], err
    assert "these notebooks are of 2 chapters (ch01: 1, ch05: 2)" in err and "--chapter 5" in err, err
    assert "nothing was graded or written" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*names, "roster.csv"])  # nothing written


def test_the_chapter_found_from_the_imports_counts_too(graded, tmp_path, capsys):
    """A notebook without the course's metadata is of the chapter whose exercise module it imports."""
    run, ran, _ = graded
    names = mixed_class(tmp_path, ch01_metadata=False)
    assert run("--out", "grades.csv", *EXPORTS["canvas"], "--", *names) == 2 and ran == []
    assert "(ch01: 1, ch05: 2)" in capsys.readouterr().err


def test_with_its_chapter_the_export_holds_the_assignments_points_only(graded, tmp_path, capsys):
    run, ran, _ = graded
    names = mixed_class(tmp_path)
    assert run("--out", "grades.csv", "--chapter", "5", *EXPORTS["canvas"], "--", *names) == 0
    assert {r["ID"]: r["Chapter 5 (4242)"] for r in read(tmp_path / "canvas.csv")} == \
        {"11": "5", "12": "5", "13": "0"}  # Cat's chapter-1 notebook: 0 of chapter 5's points
    assert run("--out", "other.csv", "--", *names) == 0  # no export: a mixed batch is graded as it is
    assert {r["task"].split(".")[0] for r in read(tmp_path / "other.csv")} == {"ch01", "ch05"}


def test_a_chapter_only_grading_finds_still_stops_the_exports(graded, tmp_path, capsys):
    """A notebook whose chapter only the sandbox finds: the grades are written, no export, exit 1."""
    run, ran, stand_in_chapter = graded
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    names = [exercise(tmp_path / "ann.ipynb", "ch05"), exercise(tmp_path / "cat.ipynb", "ch01", metadata=False)]
    nb = json.loads((tmp_path / "cat.ipynb").read_text())
    nb["cells"] = [c for c in nb["cells"] if "nexttoken.exercises" not in "".join(c["source"])]
    (tmp_path / "cat.ipynb").write_text(json.dumps(nb))
    stand_in_chapter["cat.ipynb"] = "ch01"
    assert run("--out", "grades.csv", *EXPORTS["canvas"], "--", *names) == 1
    assert "no export was written" in capsys.readouterr().err and len(ran) == 2
    assert (tmp_path / "grades.csv").exists() and not (tmp_path / "canvas.csv").exists()


def test_merge_refuses_an_export_of_several_chapters(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [task_row(name, f"{c}.q1", 1, 1, "passed", "ok") for name, c in (("ann.ipynb", "ch05"),
                                                                                ("cat.ipynb", "ch01"))]
    outputs.write_csv(tmp_path / "part.csv", FIELDS, rows)
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    assert cli.main(["merge", "part.csv", "--out", "grades.csv", *EXPORTS["canvas"]]) == 2
    assert "(ch01: 1, ch05: 1)" in capsys.readouterr().err and not (tmp_path / "grades.csv").exists()


def class_of_five(folder: Path) -> list[str]:
    """Five ch05 notebooks: two with q1's off-by-one mistake, one with q2's output of the wrong shape, one
    whose name and answer try to write HTML; q3 to q5 pass everywhere."""
    plans = {"ann.ipynb": {}, "ben.ipynb": {"q1": OFF_BY_ONE + "\ninput: ..."},
             "cat.ipynb": {"q1": OFF_BY_ONE, "q2": "the output has the wrong shape\nexpected (2, 3)"},
             "<b>dan.ipynb": {"q1": "the output is wrong\n..."}, "eve.ipynb": {}}
    names = [exercise(folder / name, "ch05", plan) for name, plan in plans.items()]
    nb = json.loads((folder / "eve.ipynb").read_text())
    answer = next(i for i, c in enumerate(nb["cells"]) if "double-click to edit" in "".join(c["source"]))
    nb["cells"][answer]["source"] = "<script>alert(1)</script> The model keeps no memory between calls."
    (folder / "eve.ipynb").write_text(json.dumps(nb))
    return names


def test_the_class_report_shows_pass_rates_named_mistakes_points_and_the_answers(graded, tmp_path, capsys):
    run, _, _ = graded
    names = class_of_five(tmp_path)
    assert run("--out", "grades.csv", "--chapter", "5", "--", *names) == 0
    path = tmp_path / "grades-report.html"
    assert path.stat().st_mode & 0o777 == 0o600
    page = path.read_text(encoding="utf-8")
    assert 'ch05.q1</td><td>practice</td><td class="rate">2 of 5 (40%)' in page
    assert 'ch05.q3</td><td>practice</td><td class="rate">5 of 5 (100%)' in page
    assert f'<span class="count">2</span> {html.escape(OFF_BY_ONE)}</li>' in page  # the feedback's own name
    assert '<span class="count">1</span> the output has the wrong shape</li>' in page
    reteach = re.search(r'<ol id="reteach">(.*?)</ol>', page).group(1)  # the core task first, then by count
    assert re.findall(r'href="#task-(ch05\.q\d)"', reteach) == ["ch05.q2", "ch05.q1", "ch05.q1"]
    assert "<svg" in page and "submissions by points" in page  # the histogram: 3 of 5 points: 2, 4: 1, 5: 2
    bars = re.findall(r'<text x="[\d.]+" y="[\d.]+" text-anchor="middle">(\d+)</text>', page)
    assert bars[0::2] == ["0", "0", "0", "1", "2", "2"] and bars[1::2] == ["0", "1", "2", "3", "4", "5"]
    assert '<a id="answers-csv" href="grades-explanations.csv">' in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; The model keeps no memory" in page and "<script" not in page
    assert "&lt;b&gt;dan.ipynb" in page and "<b>dan" not in page
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # nothing to fetch: offline
    assert sorted(p.name for p in tmp_path.glob("grades*")) == ["grades-explanations.csv", "grades-report.html",
                                                                "grades.csv"]


def test_the_console_prints_a_summary_not_a_table(graded, tmp_path, capsys):
    run, _, _ = graded
    names = class_of_five(tmp_path)
    assert run("--out", "grades.csv", "--", *names) == 0
    out, err = capsys.readouterr()
    assert "ch05.q1" not in out and "ann.ipynb" not in out  # no per-task table
    lines = out.splitlines()
    assert len(lines) == 6 and lines[0].startswith("graded 5 submissions in ")
    assert lines[1] == ("5 submissions in all; points (of 5): mean 4.2, median 4; submissions by points 3: 1, "
                        "4: 2, 5: 2")
    assert lines[2] == "The grade counts every task, core and practice"
    assert lines[3] == "problems: 0 submissions not graded task by task"
    assert lines[5] == "the class report (pass rates, mistakes, points): grades-report.html"
    progress = [line for line in err.splitlines() if line.startswith("[")]  # through a pipe: a line each
    assert len(progress) == 5 and progress[-1].startswith("[5/5] ") and "\r" not in err


def test_on_a_terminal_the_progress_is_a_bar_redrawn_in_place(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stderr", Terminal())
    rows = [task_row("a.ipynb", "ch05.q1", 1, 1, "passed", "")]
    batch.progress(1, 4, "a.ipynb", rows, 1.0)
    batch.progress(4, 4, "d.ipynb", rows, 1.0)
    said = sys.stderr.getvalue()
    assert said.startswith("\r\x1b[K|" + "#" * 7 + "." * 23 + "| [1/4] a.ipynb 1/1 in 1.0 s\r")
    assert said.endswith("|" + "#" * 30 + "| [4/4] d.ipynb 1/1 in 1.0 s\n") and said.count("\n") == 1


def test_a_file_no_roster_line_names_is_explained(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [task_row(name, "ch05.q1", 1, 1, "passed", "ok") for name in ("ANN.ipynb", "bne.ipynb", "zz.ipynb")]
    outputs.write_csv(tmp_path / "part.csv", FIELDS, rows)
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    assert cli.main(["merge", "part.csv", "--out", "grades.csv", "--roster", "roster.csv"]) == 0
    detail = {p["submission"]: p["detail"] for p in read(tmp_path / "grades-problems.csv")
              if p["problem"] == "no_roster_entry"}
    assert detail["ANN.ipynb"].startswith("ANN.ipynb matches s1's roster file 'ann.ipynb' but for upper and lower "
                                          "case: run again with --ignore-case")
    assert "the nearest is 'ben.ipynb' (s2)" in detail["bne.ipynb"]
    assert detail["zz.ipynb"] == ("no line of the roster's 3 matches zz.ipynb in its file column (a file name or a "
                                  "pattern such as s12_*.ipynb): counted for no student; add or correct its "
                                  "student's line and run again (or merge this grades CSV with the corrected "
                                  "--roster)")
    assert "the class report: grades-report.html" in capsys.readouterr().out  # a merge writes it too


def test_the_feedback_names_the_explanation_question_the_instructor_marks(graded, tmp_path):
    run, _, _ = graded
    names = class_of_five(tmp_path)
    assert run("--out", "grades.csv", "--feedback", "fb", "--", *names) == 0
    question = json.loads((ROOT / "lib/nexttoken/exercises/explanations.json").read_text())["ch05"]["question"]
    for name, found in (("ann", "No answer was found"), ("eve", "Your answer was found")):
        text = (tmp_path / "fb" / f"{name}.md").read_text()
        assert "## The explanation: marked by your instructor" in text
        assert "The explanation question of ch05 (the \"Explain\" question in your notebook, 3 points) is marked by " \
               "your instructor, not by the grader: its points are not in the total above." in text
        assert f"> {question}" in text and found in text


def test_the_report_is_a_page_of_its_own_with_no_network(tmp_path):
    """Built from rows alone (as a merge does): an empty class still gives a page."""
    page = report.page("g.csv", [], 5, [], tmp_path / "g-explanations.csv")
    assert page.startswith("<!DOCTYPE html>") and "0 submissions" in page and "<script" not in page


NOT_OURS = {"other columns": b"name,score\nann.ipynb,5\n",
            "not UTF-8": b"submission,task\n\xff\xfe\n",
            "points not whole": ",".join(FIELDS).encode() + b"\nann.ipynb,ch05.q1,one,1,passed,ok,\n"}


@pytest.mark.parametrize("kind", NOT_OURS)
def test_a_csv_the_grader_did_not_write_is_named_with_the_argument_that_gave_it(graded, tmp_path, capsys, kind):
    """The grades CSV read back is refused, exit 2, nothing graded or written: a shard given to merge is
    named as merge's (no word of --resume); --out given to --resume, as --resume's."""
    run, ran, _ = graded
    outputs.write_csv(tmp_path / "part1.csv", FIELDS, [task_row("ann.ipynb", "ch05.q1", 1, 1, "passed", "ok")])
    (tmp_path / "part2.csv").write_bytes(NOT_OURS[kind])
    assert cli.main(["merge", "part1.csv", "part2.csv", "--out", "merged.csv"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m nexttoken.grade merge: part2.csv") and "--resume" not in err, err
    assert not (tmp_path / "merged.csv").exists()
    names = [exercise(tmp_path / "ann.ipynb", "ch05")]
    assert run("--resume", "--out", "part2.csv", "--", *names) == 2
    err = capsys.readouterr().err
    assert "python -m nexttoken.grade: --resume: part2.csv" in err and ran == [], err
    assert (tmp_path / "part2.csv").read_bytes() == NOT_OURS[kind]


def test_an_explanations_csv_the_grader_did_not_write_names_the_shard_it_came_with(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    outputs.write_csv(tmp_path / "part1.csv", FIELDS, [task_row("ann.ipynb", "ch05.q1", 1, 1, "passed", "ok")])
    (tmp_path / "part1-explanations.csv").write_text("name,answer\nann.ipynb,because\n", encoding="utf-8")
    assert cli.main(["merge", "part1.csv", "--out", "merged.csv"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m nexttoken.grade merge: part1-explanations.csv is not an explanations CSV"), err
    assert "--resume" not in err and not (tmp_path / "merged.csv").exists()
