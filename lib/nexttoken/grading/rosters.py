"""The roster: the class as a CSV, read and checked once, and matched to the submissions' file names. Two
kinds are read: the course's own form (one line per student, with the ``file`` name or pattern of their
notebook), and an LMS's gradebook export as the LMS writes it (Canvas, Moodle, Blackboard: ``lms.FORMS``),
whose students are matched to the files of that LMS's bulk download by the id its names hold
(``lms.Form.id_in``). Every export keyed by student (grades.csv's and the explanations' identity columns,
the gradebook, Canvas, Gradescope, the feedback files) is made from ``match``: a file is a student's only
where exactly one roster line names it.
"""

import csv
import difflib
import fnmatch
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from . import lms

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
    """The class: one dict per student (REQUIRED and OPTIONAL columns, and ``lms_id``), how names are
    compared, and the LMS whose export it is (its files then matched by the id in their names), if any."""
    students: list[dict] = field(default_factory=list)
    ignore_case: bool = False
    form: lms.Form | None = None

    def __iter__(self):
        return iter(self.students)


# Ids an LMS keys its rows by: one of them twice would put one student's grade on two rows, or two on one.
UNIQUE = ("student_id", "canvas_id", "sis_user_id", "sis_login_id", "email", "lms_id")
KEPT = (*REQUIRED, *OPTIONAL, "lms_id")  # a student's fields (lms_id: an LMS export's, never a column)


def read_roster(path: Path, ignore_case: bool = False) -> Roster:
    """The roster's students, each a dict of KEPT fields (missing ones: ""), from the course's own form or
    an LMS's gradebook export."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:  # -sig: a spreadsheet's BOM is no column
            reader = csv.DictReader(f)
            columns = reader.fieldnames or []
            students = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise RosterError(f"--roster: cannot read {path} ({type(exc).__name__}: {exc})") from None
    form = lms.form_of(columns)
    if form is not None:
        try:
            students = form.students(students)
        except ValueError as exc:
            raise RosterError(f"--roster: {path} {exc}") from None
    missing = [c for c in REQUIRED if c not in columns]
    if missing and form is None:
        exports = "; ".join(f"{f.name}: {', '.join(f.columns)}" for f in lms.FORMS)
        raise RosterError(f"--roster: {path} needs the columns {', '.join(REQUIRED)} (missing: "
                          f"{', '.join(missing)}; it has {', '.join(columns) or 'none'}), or to be an LMS's "
                          f"gradebook export as the LMS writes it ({exports}, ...)")
    for line, student in enumerate(students, start=2):
        if not (student.get("file") or "").strip() or not (student.get("student_id") or "").strip():
            raise RosterError(f"--roster: {path} line {student.get('line', line)}: file and student_id must not "
                              "be empty")
    check_unique(path, students, ignore_case)
    return Roster([{c: (s.get(c) or "").strip() for c in KEPT} for s in students], ignore_case, form)


def check_unique(path: Path, students: list[dict], ignore_case: bool) -> None:
    """Refuses a roster where an id an LMS keys by (``UNIQUE``) is on two lines, naming both."""
    for column in UNIQUE:
        seen: dict[str, int] = {}
        for line, student in enumerate(students, start=2):
            value = (student.get(column) or "").strip()
            if not value:
                continue
            key = folded(value, ignore_case or column == "email")  # ids that only look different are one
            line = student.get("line", line)
            if key in seen:
                raise RosterError(f"--roster: {path} lines {seen[key]} and {line}: {column} {value!r} twice (one "
                                  "id, two students: every export would give one of them the other's grade)")
            seen[key] = line


def owners(names: list[str], roster: Roster) -> dict[str, list[dict]]:
    """For each submission (its name as in the CSV), the roster students whose ``file`` matches its
    file name (a pattern, as fnmatch reads it), both compared as ``folded`` says; for an LMS's export, the
    student whose id in that LMS the file's path holds."""
    if roster.form is not None:
        by_id = {s["lms_id"]: s for s in roster}
        return {name: [by_id[found]] if (found := roster.form.id_in(name)) in by_id else [] for name in names}
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


def name_words(text: str) -> list[str]:
    """The words of a person's or a file's name, as compared: case-folded, accents dropped ("Éva" -> "eva")."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return re.findall(r"[^\W\d_]+", plain.casefold())


def named_after(base: str, roster: Roster) -> dict | None:
    """The one roster student whose name a file's name holds (every word of it, in any order, or squashed
    together as Canvas writes it: "ivanovadaria"), or None (none, or several)."""
    words = name_words(Path(base).stem)
    squashed = "".join(words)
    found = []
    for s in roster:
        theirs = name_words(s["name"])
        if len(theirs) >= 2 and (set(theirs) <= set(words) or "".join(theirs) in squashed
                                 or "".join(reversed(theirs)) in squashed):
            found.append(s)
    return found[0] if len(found) == 1 else None


def no_entry_detail(name: str, roster: Roster) -> str:
    """What the problems file says of a file no roster line names: what the roster has near it (by pattern,
    by id, by the student's name), and what to do."""
    base = Path(name).name
    by_name = named_after(base, roster)
    who = f"{by_name['name']} ({by_name['student_id']})" if by_name else ""
    if roster.form is not None:
        form, found = roster.form, roster.form.id_in(name)
        said = (f"{name} is not named as {form.name}'s download names a file ({form.download})" if found is None
                else f"{name} holds {form.name} id {found}, which no line of its export has (a student who joined "
                     "after it was exported? export it again)")
        return (f"{said}{f'; by its name it is {who}' if who else ''}: counted for no student; give the file "
                f"its {form.name} name, or merge this grades CSV with a roster of the course's own form that names "
                "it")
    by_case = [s for s in roster if fnmatch.fnmatchcase(folded(base, True), folded(s["file"], True))]
    if by_case and not roster.ignore_case:
        return (f"{base} matches {by_case[0]['student_id']}'s roster file {by_case[0]['file']!r} but for upper and "
                "lower case: run again with --ignore-case, or correct that line's file column")
    by_id = [s for s in roster if folded(s["student_id"], True) == folded(Path(base).stem, True)]
    if by_id:  # perhaps the student's own, or a classmate's file named to take their place: look at it
        return (f"{base} is named after {by_id[0]['student_id']}'s student_id, but their roster file is "
                f"{by_id[0]['file']!r}: counted for no student; if it is theirs, correct that line's file column "
                "and run again")

    def stem(text: str) -> str:  # ".ipynb", which every name has, makes no two names alike
        return folded(text, roster.ignore_case).removesuffix(".ipynb")

    files = {stem(s["file"]): s for s in roster}
    near = difflib.get_close_matches(stem(base), list(files), n=1, cutoff=0.6)
    nearest = f"; the nearest is {files[near[0]]['file']!r} ({files[near[0]]['student_id']})" if near else ""
    if by_name:
        nearest = f"; by its name it is {who}, whose roster file is {by_name['file']!r}" + nearest
    return (f"no line of the roster's {len(roster.students)} matches {base} in its file column (a file name or a "
            f"pattern such as s12_*.ipynb){nearest}: counted for no student; add or correct its student's line "
            "and run again (or merge this grades CSV with the corrected --roster)")


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
