"""An LMS's own files in: Canvas's gradebook export taken as the roster as Canvas writes it, the files of
Canvas's "Download Submissions" placed on it by the Canvas user id in their names, ids an LMS keys by refused
when repeated, and no 0 in canvas.csv for a student whose file may be one the roster could not place. Run
through ``merge`` (every export from a grades CSV, seconds), and once graded for real (slow)."""

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nexttoken.exercises import chapter
from nexttoken.grading import cli, outputs, rosters
from nexttoken.grading.rows import FIELDS

ROOT = Path(__file__).resolve().parents[2]
CH05 = chapter("ch05")
# As Canvas exports it: a BOM, "Last, First" names, the Points Possible line, the test student, more columns.
CANVAS_EXPORT = ("\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,Chapter 5 (4242),Current Score\n"
                 "    Points Possible,,,,,2,\n"
                 "\"Ivanova, Daria\",1001,S-07,divanova,Section A,,\n"
                 "\"Okafor, Ben\",1002,S-08,bokafor,Section A,,\n"
                 "\"Lee, Ann\",4242,,alee,Section B,,\n"  # no SIS id; her user id is also a submission id below
                 "\"Moreau, Cat\",1004,S-10,cmoreau,Section B,,\n"
                 "\"Student, Test\",9999,,,Section A,,\n")
# As Canvas's Download Submissions names them: lastfirst[_LATE]_<user id>_<submission id>_<own name>.
DOWNLOADS = {"ivanovadaria_1001_555_ch05.ipynb": "S-07",
             "okaforben_LATE_1002_4242_ch05-1.ipynb": "S-08",  # late, resubmitted; 4242 is Ann's user id
             "leeann_4242_557_my notebook.ipynb": "4242"}


def rows_of(name, passed=True):
    return [dict(submission=name, task=f"ch05.{t}", points=int(passed), max_points=1,
                 status="passed" if passed else "failed", reason="r", library_calls="") for t in CH05.TASKS]


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def merge(tmp_path, names, roster_text, *extra):
    outputs.write_csv(tmp_path / "part.csv", FIELDS, [r for name in names for r in rows_of(name)])
    (tmp_path / "roster.csv").write_text(roster_text, encoding="utf-8")
    return cli.main(["merge", "part.csv", "--out", "grades.csv", "--roster", "roster.csv", "--chapter", "5",
                     "--gradebook", "book.csv", "--canvas", "canvas.csv", "--assignment", "Chapter 5 (4242)", *extra])


def test_canvas_gradebook_export_is_a_roster_as_it_comes(tmp_path):
    roster = rosters.read_roster(_write(tmp_path, CANVAS_EXPORT))
    assert roster.canvas and [s["name"] for s in roster] == ["Ivanova, Daria", "Okafor, Ben", "Lee, Ann",
                                                             "Moreau, Cat"]  # no Points Possible, no test student
    assert [s["student_id"] for s in roster] == ["S-07", "S-08", "4242", "S-10"]  # SIS id, else Canvas's
    assert roster.students[0]["canvas_id"] == "1001" and roster.students[0]["sis_login_id"] == "divanova"


def test_canvas_downloads_are_placed_by_user_id(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert merge(tmp_path, DOWNLOADS, CANVAS_EXPORT) == 0
    err = capsys.readouterr().err
    grades = read(tmp_path / "grades.csv")
    placed = {r["submission"]: r["student_id"] for r in grades if r["submission"] != "-"}
    assert placed == DOWNLOADS and "no_roster_entry" not in err and "several_students" not in err
    canvas = {r["ID"]: r["Chapter 5 (4242)"] for r in read(tmp_path / "canvas.csv")}
    core = str(len(CH05.CORE))
    assert canvas == {"1001": core, "1002": core, "4242": core, "1004": "0"}  # every file placed: Cat's 0 stands
    assert [r["SIS User ID"] for r in read(tmp_path / "canvas.csv")] == ["S-07", "S-08", "4242", "S-10"]


def test_a_file_canvas_did_not_name_gives_its_student_a_blank_not_a_0(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    names = ["ivanovadaria_1001_555_ch05.ipynb", "Moreau Cat - ch05 (1).ipynb"]  # renamed by hand
    assert merge(tmp_path, names, CANVAS_EXPORT) == 0
    err = capsys.readouterr().err
    canvas = {r["ID"]: r["Chapter 5 (4242)"] for r in read(tmp_path / "canvas.csv")}
    assert canvas["1004"] == "" and canvas["1002"] == "" and canvas["1001"] == str(len(CH05.CORE))
    assert "get a blank in canvas.csv, not 0" in err
    problem = next(p for p in read(tmp_path / "grades-problems.csv") if p["problem"] == "no_roster_entry")
    assert "by its name it is Moreau, Cat (S-10)" in problem["detail"]


def test_the_nearest_roster_line_is_named_by_name_too(tmp_path, monkeypatch, capsys):
    """A file named "First Last" against a roster whose name column says "Last, First"."""
    monkeypatch.chdir(tmp_path)
    roster = "file,student_id,name\ns07_*.ipynb,s07,\"Ivanova, Daria\"\ns08_*.ipynb,s08,\"Okafor, Ben\"\n"
    assert merge(tmp_path, ["Daria Ivanova - ch05 (1).ipynb"], roster) == 0
    problems = read(tmp_path / "grades-problems.csv")
    detail = next(p["detail"] for p in problems if p["problem"] == "no_roster_entry")
    assert "by its name it is Ivanova, Daria (s07), whose roster file is 's07_*.ipynb'" in detail


@pytest.mark.parametrize("column, lines", [("canvas_id", "2 and 3"), ("sis_user_id", "3 and 4"),
                                           ("email", "2 and 4")])
def test_an_id_an_lms_keys_by_is_refused_when_repeated(column, lines, tmp_path):
    values = {"canvas_id": ("11", "11", "13"), "sis_user_id": ("a", "b", "b"), "email": ("X@u.edu", "y@u.edu",
                                                                                         "x@U.edu")}[column]
    text = f"file,student_id,name,{column}\n" + "".join(f"s{i}.ipynb,s{i},S {i},{v}\n" for i, v in enumerate(values))
    with pytest.raises(rosters.RosterError, match=f"lines {lines}: {column} .* twice"):
        rosters.read_roster(_write(tmp_path, text))


def test_canvas_export_repeats_are_refused_too(tmp_path):
    text = CANVAS_EXPORT.replace("\"Moreau, Cat\",1004", "\"Moreau, Cat\",1001")
    with pytest.raises(rosters.RosterError, match="lines 3 and 6: canvas_id '1001' twice"):
        rosters.read_roster(_write(tmp_path, text))


def _write(tmp_path, text):
    path = tmp_path / "roster.csv"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.slow
def test_a_class_as_canvas_downloads_it_is_graded_with_no_file_unplaced(tmp_path):
    """Graded for real: the solutions under Canvas's download names, Canvas's export as the roster."""
    for name in DOWNLOADS:
        shutil.copy(ROOT / "solutions" / "ch05.ipynb", tmp_path / name)
    (tmp_path / "roster.csv").write_text(CANVAS_EXPORT, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "nexttoken.grade", "--out", "grades.csv", "--chapter", "5",
                           "--roster", "roster.csv", "--canvas", "canvas.csv", "--assignment", "Chapter 5 (4242)",
                           "--no-sandbox", "--trusted-as-root", "--allow-no-cgroup", "--jobs", "1", "--", *DOWNLOADS],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "problems: 1 missing_submission" in done.stderr  # Cat, who handed in nothing; no file unplaced
    canvas = {r["ID"]: r["Chapter 5 (4242)"] for r in read(tmp_path / "canvas.csv")}
    assert canvas == {"1001": str(len(CH05.CORE)), "1002": str(len(CH05.CORE)), "4242": str(len(CH05.CORE)),
                      "1004": "0"}
