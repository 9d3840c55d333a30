"""An LMS's own files in: Canvas's gradebook export taken as the roster as Canvas writes it, the files of
Canvas's "Download Submissions" placed on it by the Canvas user id in their names (Moodle's grading
worksheet and Blackboard's Grade Center export, with their downloads' names, likewise), ids an LMS keys by
refused when repeated, and no 0 in canvas.csv for a student whose file may be one the roster could not
place. Run through ``merge`` (every export from a grades CSV, seconds), and once graded for real (slow)."""

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
    assert roster.form.name == "Canvas" and [s["name"] for s in roster] == ["Ivanova, Daria", "Okafor, Ben", "Lee, Ann",
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


MOODLE_WORKSHEET = ("Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed\n"
                   "Participant 250001,Daria Ivanova,daria@uni.example,Submitted for grading,,2.00,Yes\n"
                   "Participant 250002,Ben Okafor,ben@uni.example,Submitted for grading,,2.00,Yes\n"
                   "Participant 250003,Cat Moreau,cat@uni.example,No submission,,2.00,Yes\n")
# Moodle's "Download all submissions": a folder per student (or, without folders, the same text in the name).
MOODLE_DOWNLOADS = {"submissions/Daria Ivanova_250001_assignsubmission_file_/ch05.ipynb": "250001",
                    "Ben Okafor_250002_assignsubmission_file_ch05 (2).ipynb": "250002"}
BLACKBOARD_EXPORT = ("Last Name,First Name,Username,Student ID,Last Access,Availability,Chapter 5 [Total Pts: 2 "
                     "Score] |1234\nIvanova,Daria,divanova,S-07,,Yes,\nOkafor,Ben,bokafor,S-08,,Yes,\n")
BLACKBOARD_DOWNLOADS = {"Chapter 5_divanova_attempt_2026-12-01-10-15-00_ch05.ipynb": "S-07",
                        "Chapter 5_bokafor_attempt_2026-12-02-09-00-00_my_ch05.ipynb": "S-08"}


@pytest.mark.parametrize("export, downloads, form", [(MOODLE_WORKSHEET, MOODLE_DOWNLOADS, "Moodle"),
                                                     (BLACKBOARD_EXPORT, BLACKBOARD_DOWNLOADS, "Blackboard")])
def test_moodle_and_blackboard_exports_are_rosters_and_their_downloads_are_placed(export, downloads, form,
                                                                                   tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert rosters.read_roster(_write(tmp_path, export)).form.name == form
    outputs.write_csv(tmp_path / "part.csv", FIELDS, [r for name in downloads for r in rows_of(name)])
    assert cli.main(["merge", "part.csv", "--out", "grades.csv", "--roster", "roster.csv", "--chapter", "5"]) == 0
    assert "no_roster_entry" not in capsys.readouterr().err
    placed = {r["submission"]: r["student_id"] for r in read(tmp_path / "grades.csv") if r["submission"] != "-"}
    assert placed == downloads


def test_an_lms_export_without_its_id_is_refused_naming_the_line(tmp_path):
    text = MOODLE_WORKSHEET.replace("Participant 250002", "")
    with pytest.raises(rosters.RosterError, match="line 3: Moodle's export gives Ben Okafor no participant id"):
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
