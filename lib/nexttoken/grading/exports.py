"""What an instructor takes away from one grading run: the students (a roster), an LMS's import file
(Canvas), a grading service's results (Gradescope, GitHub Classroom) and one feedback file per submission.

All of it is made from the rows the grader wrote (``csvs.FIELDS``), so every export agrees with
grades.csv: the same points, the same totals.
"""

import base64
import csv
import fnmatch
import json
import os
import re
import tempfile
from pathlib import Path

REQUIRED = ("file", "student_id", "name")  # file: a submission's file name, or a pattern (s12_*.ipynb)
OPTIONAL = ("email", "section", "canvas_id", "sis_user_id", "sis_login_id")
# A row's roster_status (csvs.IDENTITY): matched, no_roster_entry (a file no roster line names),
# several_students (a file that two lines name), duplicate_submission (a student with two files: both
# graded, both reported) or missing_submission (a student with no file: a row of 0 points).


class RosterError(ValueError):
    """A roster that cannot be used as it is: the message says what to fix."""


def read_roster(path: Path) -> list[dict]:
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
        if student["student_id"] in seen:
            raise RosterError(f"--roster: {path} line {line}: student_id {student['student_id']!r} twice")
        seen.add(student["student_id"])
    return [{c: (s.get(c) or "").strip() for c in (*REQUIRED, *OPTIONAL)} for s in students]


def owners(names: list[str], roster: list[dict]) -> dict[str, list[dict]]:
    """For each submission (its name as in the CSV), the roster students whose ``file`` matches its
    file name (a pattern, case-sensitive, as fnmatch reads it)."""
    return {name: [s for s in roster if fnmatch.fnmatchcase(Path(name).name, s["file"])] for name in names}


def with_identity(rows: list[dict], roster: list[dict]) -> list[dict]:
    """The rows, each with the student it belongs to (IDENTITY columns), then one missing_submission row
    per student with no file. Nothing is dropped: a file nobody owns keeps its rows, unowned."""
    names = list(dict.fromkeys(r["submission"] for r in rows))
    found = owners(names, roster)
    files_of: dict[str, list[str]] = {}
    for name, students in found.items():
        if len(students) == 1:
            files_of.setdefault(students[0]["student_id"], []).append(name)
    out = []
    for r in rows:
        students = found[r["submission"]]
        if not students:
            out.append({**r, "student_id": "", "name": "", "roster_status": "no_roster_entry"})
        elif len(students) > 1:
            ids = ", ".join(s["student_id"] for s in students)
            out.append({**r, "student_id": "", "name": "", "roster_status": f"several_students: {ids}"})
        else:
            s = students[0]
            status = "duplicate_submission" if len(files_of[s["student_id"]]) > 1 else "matched"
            out.append({**r, "student_id": s["student_id"], "name": s["name"], "roster_status": status})
    for s in roster:
        if s["student_id"] not in files_of:
            out.append(dict(submission="-", task="-", points=0, max_points=0, status="missing_submission",
                            reason=f"no submission matches {s['file']!r}", library_calls="",
                            student_id=s["student_id"], name=s["name"], roster_status="missing_submission"))
    return out


def totals(rows: list[dict]) -> dict[str, tuple[int, int]]:
    """(points, max_points) per submission."""
    sums: dict[str, tuple[int, int]] = {}
    for r in rows:
        points, most = sums.get(r["submission"], (0, 0))
        sums[r["submission"]] = (points + int(r["points"]), most + int(r["max_points"]))
    return sums


def student_gradebook(rows: list[dict], roster: list[dict]) -> tuple[list[str], list[dict]]:
    """One row per roster student: the submission counted (of two, the one with more points: both are
    named and the status says duplicate_submission), each task's points, total and max_points."""
    identified = with_identity(rows, roster)
    task_names = sorted({r["task"] for r in rows if r["task"] != "-"})
    sums = totals(rows)
    book = []
    for s in roster:
        mine = [r for r in identified if r["student_id"] == s["student_id"] and r["submission"] != "-"]
        files = list(dict.fromkeys(r["submission"] for r in mine))
        entry = {"student_id": s["student_id"], "name": s["name"], "email": s["email"], "section": s["section"],
                 "submission": " + ".join(files), "total": 0, "max_points": 0,
                 "status": "missing_submission" if not files else
                 ("duplicate_submission" if len(files) > 1 else "graded")}
        if files:
            counted = max(files, key=lambda f: sums[f][0])
            entry["total"], entry["max_points"] = sums[counted]
            entry.update({r["task"]: r["points"] for r in mine if r["submission"] == counted and r["task"] != "-"})
        book.append(entry)
    header = ["student_id", "name", "email", "section", "submission", *task_names, "total", "max_points", "status"]
    return header, book


def canvas(rows: list[dict], roster: list[dict], assignment: str) -> tuple[list[str], list[dict]]:
    """Canvas's gradebook import: Student, ID, SIS User ID, SIS Login ID, Section, and the assignment's
    column, named as Canvas exports it ("NAME (ID)"), holding each student's total points."""
    _, book = student_gradebook(rows, roster)
    by_id = {s["student_id"]: s for s in roster}
    header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", assignment]
    return header, [{"Student": e["name"], "ID": by_id[e["student_id"]]["canvas_id"],
                     "SIS User ID": by_id[e["student_id"]]["sis_user_id"] or e["student_id"],
                     "SIS Login ID": by_id[e["student_id"]]["sis_login_id"], "Section": e["section"],
                     assignment: e["total"]} for e in book]


def file_keys(names: list[str], roster: list[dict] | None) -> dict[str, str]:
    """A safe, unique file name stem per submission: its student's id where the roster names exactly
    one, else its own name with anything but letters, digits, ".", "_" and "-" replaced."""
    found = owners(names, roster) if roster else {n: [] for n in names}
    keys, used = {}, set()
    for name in names:
        students = found[name]
        stem = students[0]["student_id"] if len(students) == 1 else Path(name).stem
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", stem).strip(".")[:80] or "submission"
        key, n = stem, 2
        while key in used:
            key, n = f"{stem}-{n}", n + 1
        used.add(key)
        keys[name] = key
    return keys


def gradescope_results(rows: list[dict]) -> dict:
    """One submission's rows in Gradescope's autograder format (results.json)."""
    tests = [{"name": r["task"], "number": str(i), "score": int(r["points"]), "max_score": int(r["max_points"]),
              "status": "passed" if r["status"] == "passed" else "failed",
              "output": f"{r['status']}: {r['reason']}", "visibility": "visible"}
             for i, r in enumerate((r for r in rows if r["task"] != "-"), start=1)]
    problems = [f"{r['status']}: {r['reason']}" for r in rows if r["task"] == "-"]
    result = {"score": sum(int(r["points"]) for r in rows), "tests": tests}
    if problems:  # a file that could not be graded at all: said at the top, where the student looks
        result["output"] = "\n".join(problems)
    return result


def github_classroom(rows: list[dict]) -> str:
    """The JSON a GitHub Classroom runner reports ({version, status, max_score, tests}), base64-encoded as
    the autograding reporter reads it (from the ``<RUNNER>_RESULTS`` variable)."""
    graded = [r for r in rows if r["task"] != "-"]
    tests = [{"name": r["task"], "status": "pass" if r["status"] == "passed" else "fail",
              "message": r["reason"], "score": int(r["points"]), "max_score": int(r["max_points"])}
             for r in graded]
    failed_to_grade = not graded or any(r["status"] == "grader_error" for r in rows)
    status = "error" if failed_to_grade else ("pass" if all(t["status"] == "pass" for t in tests) else "fail")
    payload = {"version": 1, "status": status, "max_score": sum(int(r["max_points"]) for r in graded),
               "tests": tests}
    return base64.b64encode(json.dumps(payload).encode()).decode("ascii")


def feedback(name: str, rows: list[dict]) -> str:
    """A submission's feedback, in Markdown: each task's points, status and the check's explanation."""
    points, most = sum(int(r["points"]) for r in rows), sum(int(r["max_points"]) for r in rows)
    lines = [f"# Feedback: {Path(name).name}", "", f"**{points} of {most} points.**", ""]
    for r in rows:
        title = "the notebook" if r["task"] == "-" else r["task"]
        lines += [f"## {title}: {r['status']} ({r['points']}/{r['max_points']})", "", "```", r["reason"], "```", ""]
    return "\n".join(lines)


def write_text(path: Path, text: str) -> None:
    """Write through a temporary file and an atomic rename, as the CSVs are."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def per_submission(rows: list[dict]) -> dict[str, list[dict]]:
    """The rows grouped by submission (the grader's own, without roster-made missing_submission rows)."""
    grouped: dict[str, list[dict]] = {}
    for r in rows:
        grouped.setdefault(r["submission"], []).append(r)
    return grouped
