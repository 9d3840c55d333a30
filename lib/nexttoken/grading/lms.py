"""An LMS's own files, read as they come: its gradebook export as the class (a ``Form`` of ``FORMS``, known by
its columns), and the names its bulk download gives each student's file, which hold the student's id in
that LMS (``Form.id_in``). ``rosters`` reads a roster through them where it is not the course's own form.

- Canvas: Grades > Export (``Student, ID, SIS User ID, SIS Login ID, Section``, a "Points Possible" line,
  Student View's "Student, Test"); Download Submissions names a file ``lastfirst[_LATE]_<user id>_<submission
  id>_<the learner's name for it>``.
- Moodle: the assignment's grading worksheet (``Identifier`` "Participant 123456", ``Full name``, ``Email
  address``, ...); "Download all submissions" puts each student's files in a folder, or a name, holding
  ``<Full name>_<participant id>_assignsubmission_file_``.
- Blackboard: the Grade Center's export (``Last Name, First Name, Username, Student ID``, ...); "Download
  assignment" names a file ``<assignment>_<username>_attempt_<YYYY-MM-DD-HH-MM-SS>_<file>`` (a username with
  an underscore in it is not read from such a name: its file is then placed by no one, and said so).
"""

import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Form:
    """One LMS's gradebook export and download names."""
    name: str  # "Canvas"
    columns: tuple[str, ...]  # the columns that make a CSV this LMS's export
    download: str  # how its download names a file, for the problems file's words
    id_pattern: re.Pattern  # the student's id in that LMS, in a submission's path (group "id")
    students: Callable[[list[dict]], list[dict]]  # the export's lines -> the roster's students

    def id_in(self, name: str) -> str | None:
        """The student's id in this LMS that a submission's path (as the grader was given it) holds."""
        found = self.id_pattern.search(name.replace("\\", "/"))
        return found["id"] if found else None


def _text(row: dict, column: str) -> str:
    return (row.get(column) or "").strip()


def _needs(line: int, form: str, who: str, value: str, what: str) -> None:
    if not value:
        raise ValueError(f"line {line}: {form}'s export gives {who or 'a student'} no {what}: export it again")


def canvas_students(lines: list[dict]) -> list[dict]:
    """Canvas's export: student_id the SIS User ID (Canvas's user id where there is none); the "Points
    Possible" line and the test student left out."""
    students = []
    for line, row in enumerate(lines, start=2):
        name, user = _text(row, "Student"), _text(row, "ID")
        if name in ("Points Possible", "Student, Test"):
            continue
        _needs(line, "Canvas", name, user if user.isdigit() else "", f"user id (ID {user!r})")
        students.append({"file": f"*_{user}_*", "student_id": _text(row, "SIS User ID") or user, "name": name,
                         "section": _text(row, "Section"), "canvas_id": user, "lms_id": user,
                         "sis_user_id": _text(row, "SIS User ID"), "sis_login_id": _text(row, "SIS Login ID"),
                         "line": line})
    return students


def moodle_students(lines: list[dict]) -> list[dict]:
    """Moodle's grading worksheet: the participant id (of "Participant 123456") is the student's id."""
    students = []
    for line, row in enumerate(lines, start=2):
        name, participant = _text(row, "Full name"), _text(row, "Identifier").removeprefix("Participant ").strip()
        _needs(line, "Moodle", name, participant if participant.isdigit() else "", "participant id (Identifier)")
        students.append({"file": f"*_{participant}_assignsubmission_file_*", "student_id": participant,
                         "name": name, "email": _text(row, "Email address"), "lms_id": participant, "line": line})
    return students


def blackboard_students(lines: list[dict]) -> list[dict]:
    """Blackboard's Grade Center export: the username is the student's id in its downloads' names."""
    students = []
    for line, row in enumerate(lines, start=2):
        user = _text(row, "Username")
        name = ", ".join(part for part in (_text(row, "Last Name"), _text(row, "First Name")) if part)
        _needs(line, "Blackboard", name, user, "username")
        students.append({"file": f"*_{user}_attempt_*", "student_id": _text(row, "Student ID") or user,
                         "name": name, "sis_login_id": user, "lms_id": user, "line": line})
    return students


FORMS = (
    Form("Canvas", ("Student", "ID", "SIS User ID", "SIS Login ID", "Section"),
         "lastfirst_<user id>_<submission id>_<file>",
         re.compile(r"(?:^|/)[^_/]+(?:_LATE)?_(?P<id>\d+)_\d+_[^/]+$"), canvas_students),
    Form("Moodle", ("Identifier", "Full name"), "a folder or name <Full name>_<participant id>_assignsubmission_file_",
         re.compile(r"_(?P<id>\d+)_assignsubmission_file_"), moodle_students),
    Form("Blackboard", ("Last Name", "First Name", "Username"),
         "<assignment>_<username>_attempt_<YYYY-MM-DD-HH-MM-SS>_<file>",
         re.compile(r"_(?P<id>[^_/]+)_attempt_\d{4}(?:-\d{2}){5}"), blackboard_students),
)


def form_of(columns: list[str]) -> Form | None:
    """The LMS whose export has these columns (and no ``file`` column, which is the course's own form)."""
    if "file" in columns:
        return None
    return next((form for form in FORMS if all(c in columns for c in form.columns)), None)
