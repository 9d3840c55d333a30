"""The roster: the class as a CSV (one line per student, with the ``file`` name or pattern of their
notebook), read and checked once, and matched to the submissions' file names. Every export keyed by
student (grades.csv's and the explanations' identity columns, the gradebook, Canvas, Gradescope, the
feedback files) is made from ``match``: a file is a student's only where exactly one roster line names it.
"""

import csv
import fnmatch
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

IDENTITY = ["student_id", "name", "roster_status"]  # the columns a CSV gains with --roster

REQUIRED = ("file", "student_id", "name")  # file: a submission's file name, or a pattern (s12_*.ipynb)
OPTIONAL = ("email", "section", "canvas_id", "sis_user_id", "sis_login_id")
# A line's roster_status (IDENTITY): matched, no_roster_entry (a file no roster line names),
# several_students (a file that two lines name), duplicate_submission (a student with two files: both
# graded, both reported) or missing_submission (a student with no file: a row of 0 points). A student's
# gradebook status is also wrong_chapter where their one file is another chapter's notebook (0 points).


class RosterError(ValueError):
    """A roster that cannot be used as it is: the message says what to fix."""


def folded(text: str, ignore_case: bool = False) -> str:
    """A name as names are compared: NFC (a Mac writes "é" as e + a combining accent, the roster's
    spreadsheet as one character) and, with --ignore-case, Unicode case folding."""
    text = unicodedata.normalize("NFC", text)
    return text.casefold() if ignore_case else text


@dataclass
class Roster:
    """The class: one dict per student (REQUIRED and OPTIONAL columns), and how names are compared."""
    students: list[dict] = field(default_factory=list)
    ignore_case: bool = False

    def __iter__(self):
        return iter(self.students)


def read_roster(path: Path, ignore_case: bool = False) -> Roster:
    """The roster's students, each a dict of REQUIRED and OPTIONAL columns (missing optional ones: "")."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:  # -sig: a spreadsheet's BOM is no column
            reader = csv.DictReader(f)
            columns = reader.fieldnames or []
            students = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise RosterError(f"--roster: cannot read {path} ({type(exc).__name__}: {exc})") from None
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise RosterError(f"--roster: {path} needs the columns {', '.join(REQUIRED)} (missing: "
                          f"{', '.join(missing)}; it has {', '.join(columns) or 'none'})")
    seen = set()
    for line, student in enumerate(students, start=2):
        if not (student.get("file") or "").strip() or not (student.get("student_id") or "").strip():
            raise RosterError(f"--roster: {path} line {line}: file and student_id must not be empty")
        sid = folded(student["student_id"].strip(), ignore_case)  # ids that only look different are one
        if sid in seen:
            raise RosterError(f"--roster: {path} line {line}: student_id {student['student_id']!r} twice")
        seen.add(sid)
    return Roster([{c: (s.get(c) or "").strip() for c in (*REQUIRED, *OPTIONAL)} for s in students], ignore_case)


def owners(names: list[str], roster: Roster) -> dict[str, list[dict]]:
    """For each submission (its name as in the CSV), the roster students whose ``file`` matches its
    file name (a pattern, as fnmatch reads it), both compared as ``folded`` says."""
    patterns = [(folded(s["file"], roster.ignore_case), s) for s in roster]
    found = {}
    for name in names:
        base = folded(Path(name).name, roster.ignore_case)
        found[name] = [s for pattern, s in patterns if fnmatch.fnmatchcase(base, pattern)]
    return found


def match(names: list[str], roster: Roster) -> tuple[dict[str, list[str]], dict[str, str]]:
    """({student_id: the files that are theirs}, {file: its roster_status}). A file is a student's only
    where exactly one roster line names it: a file no line names, or two lines name, is nobody's."""
    files_of: dict[str, list[str]] = {s["student_id"]: [] for s in roster}
    status = {}
    for name, students in owners(names, roster).items():
        if len(students) == 1:
            files_of[students[0]["student_id"]].append(name)
        elif students:
            status[name] = "several_students: " + ", ".join(s["student_id"] for s in students)
        else:
            status[name] = "no_roster_entry"
    for files in files_of.values():
        for name in files:
            status[name] = "duplicate_submission" if len(files) > 1 else "matched"
    return files_of, status


def missing_reason(student: dict) -> str:
    return f"missing submission: no file matches {student['file']!r}"


def with_identity(lines: list[dict], roster: Roster, missing_line) -> list[dict]:
    """The lines (dicts with a "submission"), each with the student it belongs to (IDENTITY columns), then
    for each student with no file ``missing_line(student)``, theirs. Nothing is dropped: a file nobody
    owns keeps its lines, unowned."""
    files_of, status = match(list(dict.fromkeys(r["submission"] for r in lines)), roster)
    owner = {name: s for s in roster for name in files_of[s["student_id"]]}
    out = [{**r, **identity(owner.get(r["submission"]), status[r["submission"]])} for r in lines]
    out += [{**missing_line(s), **identity(s, "missing_submission")} for s in roster if not files_of[s["student_id"]]]
    return out


def identity(student: dict | None, roster_status: str) -> dict:
    """The IDENTITY columns of a line: its student's (none: "") and its roster_status."""
    student = student or {}
    return {"student_id": student.get("student_id", ""), "name": student.get("name", ""),
            "roster_status": roster_status}
