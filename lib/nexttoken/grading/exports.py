"""What an instructor takes away from one grading run: the students (a roster), an LMS's import file
(Canvas), a grading service's results (Gradescope, GitHub Classroom) and one feedback file per submission.

All of it is made from the rows the grader wrote (``rows.FIELDS``), so every export agrees with
grades.csv: the same points, the same totals. With a roster, every export is keyed by the roster's
student, never by a file name: a file can only ever reach the row and the files of the one student whose
``file`` pattern it matches, and a file that matches no student, or one of several files of one student,
is reported (``problems``), never merged into anyone else's.
"""

import base64
import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from . import rosters
from .rows import NOTEBOOK, Row, about_notebook, not_counted, notebook_row
from .text import clean, shown
from .rosters import Roster, match, missing_reason, no_entry_detail

PROBLEM_FIELDS = ["problem", "student_id", "name", "submission", "detail"]


def with_identity(rows: list[Row], roster: Roster, most: int = 0) -> list[dict]:
    """grades.csv's rows, each with the student it belongs to (IDENTITY columns), then one
    missing_submission row per student with no file, out of ``most`` points (the assignment's)."""
    return rosters.with_identity(rows, roster, lambda s: notebook_row(NOTEBOOK, "missing_submission",
                                                                      missing_reason(s), most))


def totals(rows: list[dict]) -> dict[str, tuple[int, int]]:
    """(points, max_points) per submission."""
    sums: dict[str, tuple[int, int]] = {}
    for r in rows:
        points, most = sums.get(r["submission"], (0, 0))
        sums[r["submission"]] = (points + int(r["points"]), most + int(r["max_points"]))
    return sums


def assignment_max(rows: list[dict], chapter_max: int | None = None) -> int:
    """The assignment's points: its chapter's (--chapter), else the most any graded submission can get."""
    return chapter_max if chapter_max is not None else max((m for _, m in totals(rows).values()), default=0)


@dataclass
class Result:
    """One roster student's result: the files that are theirs, the one counted and its rows."""
    student: dict
    files: list[str]
    counted: str | None  # None: nothing handed in
    rows: list[dict]
    total: int
    max_points: int

    @property
    def status(self) -> str:
        if not self.files:
            return "missing_submission"
        if len(self.files) > 1:
            return "duplicate_submission"
        return "wrong_chapter" if any(r["status"] == "wrong_chapter" for r in self.rows) else "graded"

    def notes(self, sums: dict) -> list[str]:
        """What the student's feedback and results say besides the counted file's rows."""
        if self.counted is None:
            return [missing_reason(self.student)]
        return [f"also handed in, not counted: {code_span(Path(f).name)} ({sums[f][0]} of {sums[f][1]} points); "
                "your instructor has been told" for f in self.files if f != self.counted]


def results(rows: list[dict], roster: Roster, most: int,
            answered: frozenset = frozenset()) -> tuple[list[Result], dict]:
    """One Result per roster student, in the roster's order, and the (points, max_points) per file. Of a
    student's several files one counts, by one rule: the most points, then an answered explanation
    (``answered``: the files whose answer was found), then the file whose name sorts first. A second file
    (someone else's, named to match) can never lower a student's total; it is reported (``problems``)."""
    grouped, sums = per_submission(rows), totals(rows)
    files_of, _ = match(list(grouped), roster)
    out = []
    for s in roster:
        files = files_of[s["student_id"]]
        counted = min(files, key=lambda f: (-sums[f][0], f not in answered, f)) if files else None
        total, top = sums[counted] if counted else (0, most)
        out.append(Result(s, files, counted, grouped.get(counted, []), total, top))
    return out, sums


def task_column(row: Row) -> str:
    """A task's gradebook column: its name ("ch05.q1"), and for a task the grade does not count (a practice
    task, by default) "ch05.q3 (not counted)", whose cells hold the task's status, not points."""
    return f"{row['task']} (not counted)" if not_counted(row) else row["task"]


def task_cell(row: Row):
    """A task's gradebook cell: its points, or for a task the grade does not count its status (passed,
    failed, not_implemented, ...)."""
    return row["status"] if not_counted(row) else row["points"]


def task_names(rows: list[Row]) -> list[str]:
    """The gradebook's task columns: the counted tasks, then those not counted, each sorted."""
    columns = {(not_counted(r), r["task"]): task_column(r) for r in rows if not about_notebook(r)}
    return [columns[key] for key in sorted(columns)]


def gradebook(rows: list[Row]) -> tuple[list[str], list[dict]]:
    """One row per submission: each task's points (or, not counted, its status), the total and the maximum
    (what an LMS imports)."""
    book: dict[str, dict] = {}
    for r in rows:
        entry = book.setdefault(r["submission"], {"submission": r["submission"], "total": 0, "max_points": 0})
        if not about_notebook(r):
            entry[task_column(r)] = task_cell(r)
        entry["total"] += int(r["points"])
        entry["max_points"] += int(r["max_points"])
    return ["submission", *task_names(rows), "total", "max_points"], list(book.values())


def student_gradebook(rows: list[dict], roster: Roster, most: int = 0,
                      answered: frozenset = frozenset()) -> tuple[list[str], list[dict]]:
    """One row per roster student: the submission counted (of two, the one with more points: both are
    named and the status says duplicate_submission), each task's points, total and max_points (for a
    student with no file: 0 of the assignment's ``most``, missing_submission)."""
    book = []
    for result in results(rows, roster, most, answered)[0]:
        s = result.student
        entry = {"student_id": s["student_id"], "name": s["name"], "email": s["email"], "section": s["section"],
                 "submission": " + ".join(result.files), "total": result.total, "max_points": result.max_points,
                 "status": result.status}
        entry.update({task_column(r): task_cell(r) for r in result.rows if not about_notebook(r)})
        book.append(entry)
    header = ["student_id", "name", "email", "section", "submission", *task_names(rows), "total", "max_points",
              "status"]
    return header, book


def unplaced(rows: list[dict], roster: Roster) -> list[str]:
    """The files of the rows that are no roster student's (no line names them, or several do)."""
    _, status = match(list(dict.fromkeys(r["submission"] for r in rows)), roster)
    return [name for name, why in status.items() if why not in ("matched", "duplicate_submission")]


def canvas(rows: list[dict], roster: Roster, assignment: str) -> tuple[list[str], list[dict]]:
    """Canvas's gradebook import: Student, ID, SIS User ID, SIS Login ID, Section, and the assignment's
    column, named as Canvas exports it ("NAME (ID)"), holding each student's total points. A student with
    no file gets 0 only where every file of the batch is placed on the roster; while one is not (it may be
    theirs), a blank, which Canvas's import leaves as it was."""
    lines, blank = [], bool(unplaced(rows, roster))
    for result in results(rows, roster, 0)[0]:
        s = result.student
        points = "" if blank and result.counted is None else result.total
        lines.append({"Student": s["name"], "ID": s["canvas_id"], "SIS User ID": s["sis_user_id"] or s["student_id"],
                      "SIS Login ID": s["sis_login_id"], "Section": s["section"], assignment: points})
    return ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", assignment], lines


def problems(rows: list[dict], roster: Roster, answered: frozenset = frozenset()) -> list[dict]:
    """What the instructor must look at (PROBLEM_FIELDS): a file no roster line names or several do, each
    file of a student with more than one (which one counted), and each student with none."""
    _, status = match(list(dict.fromkeys(r["submission"] for r in rows)), roster)
    found = [dict(problem=why.split(":")[0], student_id="", name="", submission=name,
                  detail=no_entry_detail(name, roster) if why == "no_roster_entry" else why)
             for name, why in status.items() if why not in ("matched", "duplicate_submission")]
    for result in results(rows, roster, 0, answered)[0]:
        s = result.student
        for r in rows:  # a file of another chapter's notebook: graded 0, easy to miss among the totals
            if r["status"] == "wrong_chapter" and r["submission"] in result.files:
                found.append(dict(problem="wrong_chapter", student_id=s["student_id"], name=s["name"],
                                  submission=r["submission"], detail=r["reason"]))
        if result.status == "missing_submission":
            found.append(dict(problem="missing_submission", student_id=s["student_id"], name=s["name"],
                              submission="", detail=missing_reason(s)))
        elif result.status == "duplicate_submission":
            found += [dict(problem="duplicate_submission", student_id=s["student_id"], name=s["name"],
                           submission=f, detail="counted" if f == result.counted else "not counted")
                      for f in result.files]
    return found


SAFE_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")  # no "~": only a hashed stem has one


def safe_stems(wanted: dict[str, str]) -> dict[str, str]:
    """A file name stem for each key, made from that key alone, never from the batch's order: the text
    it wants where that is a safe name no other key wants (compared case-folded: a Mac's disk), else the
    text made safe plus "~" and a hash of the key. No text can take the stem another key gets: a safe
    stem has no "~", and a hashed one is its own key's."""
    count = Counter(text.casefold() for text in wanted.values())
    stems = {}
    for key, text in wanted.items():
        if SAFE_STEM.fullmatch(text) and count[text.casefold()] == 1:
            stems[key] = text
        else:
            digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
            stems[key] = (re.sub(r"[^A-Za-z0-9._-]", "_", text).strip(".")[:60] or "submission") + "~" + digest
    return stems


def student_keys(roster: Roster) -> dict[str, str]:
    """The feedback and Gradescope file stem of each student: their student_id (made safe)."""
    return safe_stems({s["student_id"]: s["student_id"] for s in roster})


def file_keys(names: list[str]) -> dict[str, str]:
    """Without a roster, each submission's file stem: its own file's stem (made safe)."""
    return safe_stems({name: Path(name).stem for name in names})


def gradescope_results(rows: list[dict], notes: list[str] = (), explanation: dict | None = None,
                       others: list[dict] = ()) -> dict:
    """One submission's rows in Gradescope's autograder format (results.json); ``notes`` (a missing or a
    second submission) are said at the top, where the student looks. ``explanation`` (a row of the
    explanations CSV) becomes a last test of 0 points, hidden from the student: the answer to mark, the
    question and the rubric (``explanation_test``); ``others``, the answered explanations of the student's
    files that did not count, follow it, each named by its file, so the instructor marks knowing every one."""
    tests = [{"name": task_column(r), "number": str(i), "score": int(r["points"]), "max_score": int(r["max_points"]),
              "status": "passed" if r["status"] == "passed" else "failed",
              "output": clean(f"{r['status']}: {r['reason']}"), "visibility": "visible"}
             for i, r in enumerate((r for r in rows if not about_notebook(r)), start=1)]
    said = [clean(f"{r['status']}: {r['reason']}") for r in rows if about_notebook(r)] + [clean(n) for n in notes]
    if explanation is not None and explanation.get("chapter"):
        tests.append(explanation_test(explanation, len(tests) + 1))
    for other in others:
        if other.get("chapter"):
            test = explanation_test(other, len(tests) + 1)
            tests.append({**test, "name": f"{test['name']}, in {shown(Path(other['submission']).name)}: "
                                          "another file of yours, not counted"})
    result = {"score": sum(int(r["points"]) for r in rows), "tests": tests}
    if said:
        result["output"] = "\n".join(said)
    return result


def explanation_test(row: dict, number: int) -> dict:
    """The explanation as a Gradescope test the instructor reads and the student never sees ("hidden"):
    no points (the instructor marks it, e.g. in a manually graded question of the assignment). The question
    and the rubric come first, from the grader; the answer last, each of its lines quoted ("| "), so nothing
    it holds can pass for a question, a rubric or a note of the grader's."""
    answer = "\n".join(f"| {line}" for line in clean(row["answer"]).split("\n")) if row["answer"] else "(none)"
    output = (f"status: {row['status']}\n\nquestion:\n{row['question']}\n\nrubric ({row['points_possible']} points, "
              f"to mark by hand):\n{row['rubric']}\n\n{ANSWER_HEADING}\n{answer}")
    return {"name": f"{row['chapter']} explanation (marked by your instructor)", "number": str(number),
            "score": 0, "max_score": 0, "status": "passed", "output": clean(output), "visibility": "hidden"}


ANSWER_HEADING = ("the learner's answer, as written (each of its lines after \"| \"; a character that does not "
                  "render is shown as its escape, such as \\u200b):")


def github_classroom(rows: list[dict]) -> str:
    """The JSON a GitHub Classroom runner reports ({version, status, max_score, tests}), base64-encoded as
    the autograding reporter reads it (from the ``<RUNNER>_RESULTS`` variable)."""
    graded = [r for r in rows if not about_notebook(r)]
    tests = [{"name": task_column(r), "status": "pass" if r["status"] == "passed" else "fail",
              "message": clean(r["reason"]), "score": int(r["points"]), "max_score": int(r["max_points"])}
             for r in graded]
    failed_to_grade = not graded or any(r["status"] == "grader_error" for r in rows)
    status = "error" if failed_to_grade else ("pass" if all(t["status"] == "pass" for t in tests) else "fail")
    payload = {"version": 1, "status": status, "max_score": sum(int(r["max_points"]) for r in graded),
               "tests": tests}
    return base64.b64encode(json.dumps(payload).encode()).decode("ascii")


def longest_run_of_backticks(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def code_span(name: str) -> str:
    """A file name as Markdown shows it as it is (no link, no heading, no HTML): inline code, between
    more backticks than it holds in a row, its control characters escaped."""
    name = shown(name)
    ticks = "`" * (longest_run_of_backticks(name) + 1)
    pad = " " if name[:1] == "`" or name[-1:] == "`" else ""
    return f"{ticks}{pad}{name}{pad}{ticks}"


def feedback(title: str, rows: list[dict], notes: list[str] = (), most: int | None = None,
             explanation: dict | None = None) -> str:
    """Feedback in Markdown: the points (of ``most``, else of the rows' maximum), any ``notes``, then each
    task's points, status and the check's explanation. A reason is in a code block whose fence is longer
    than any run of backticks in it, so nothing in it (a submission's text) is rendered as Markdown."""
    points = sum(int(r["points"]) for r in rows)
    most = sum(int(r["max_points"]) for r in rows) if most is None else most
    lines = [f"# Feedback: {shown(title)}", "", f"**{points} of {most} points.**", ""]
    lines += [f"- {shown(note)}" for note in notes] + ([""] if notes else [])
    if any(not_counted(r) for r in rows):
        lines += ["Tasks marked \"not counted\" (practice, unless your instructor says otherwise) are checked "
                  "for you to learn from; they are not part of the points.", ""]
    for r in rows:
        heading = "the notebook" if about_notebook(r) else shown(r["task"])
        score = "not counted" if not_counted(r) else f"{r['points']}/{r['max_points']}"
        reason = clean(r["reason"])
        fence = "`" * max(3, longest_run_of_backticks(reason) + 1)
        lines += [f"## {heading}: {shown(r['status'])} ({score})", "", fence, *reason_lines(reason), fence, ""]
    return "\n".join(lines + explanation_section(explanation))


def reason_lines(reason: str) -> list[str]:
    """A reason as lines: its summary, then its evidence indented, whether it comes from the run (its lines)
    or from a grades CSV (--resume, merge: the lines joined by " | ", ``text.one_line``)."""
    parts = [part.strip() for part in re.split(r"\n| \| ", reason) if part.strip()]
    return parts[:1] + [f"   {part}" for part in parts[1:]]


# What the feedback says of the learner's answer to the explanation question, by its status.
ANSWER_FOUND = {"answered": "your answer was found and goes to your instructor as you wrote it",
                "cut": "your answer was found; it is long, and your instructor reads its first 2000 characters",
                "no_answer": "no answer was found: the answer cell under the question is empty or still holds "
                             "its placeholder",
                "not_read": "your notebook could not be read to find your answer: your instructor will open it"}


def explanation_section(row: dict | None) -> list[str]:
    """The feedback's last section, where the notebook was graded as a chapter: its explanation question,
    named (``row``: the explanations CSV's row), is marked by the instructor and is no part of the points
    above."""
    if row is None or not row.get("chapter") or row.get("status") not in ANSWER_FOUND:
        return []
    possible = f", {row['points_possible']} points" if row.get("points_possible") else ""
    lines = ["## The explanation: marked by your instructor", "",
             f"The explanation question of {row['chapter']} (the \"Explain\" question in your notebook"
             f"{possible}) is marked by your instructor, not by the grader: its points are not in the total above.",
             ""]
    if row.get("question"):
        question = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", clean(row["question"]))  # its links: the notebook's
        lines += [f"> {line}" for line in question.split("\n")] + [""]
    return lines + [f"{ANSWER_FOUND[row['status']][0].upper()}{ANSWER_FOUND[row['status']][1:]}.", ""]


def student_feedback(result: Result, sums: dict, explanation: dict | None = None) -> str:
    """A roster student's feedback file: titled by the roster, made from their counted file's rows only."""
    s = result.student
    title = f"{s['name']} ({s['student_id']})" + (f", {code_span(Path(result.counted).name)}" if result.counted else "")
    return feedback(title, result.rows, result.notes(sums), result.max_points, explanation)


def per_file(rows: list[dict], roster: Roster | None, most: int,
             explained: dict[str, dict] | None = None) -> list[tuple[str, dict, str]]:
    """(file stem, Gradescope results, feedback) for each roster student, named by the roster and made
    from their counted file's rows only; without a roster, for each submission, named by its file.
    ``explained``: the explanations CSV's row of each submission, for its results.json."""
    explained = explained or {}
    if roster is None:
        grouped = per_submission(rows)
        keys = file_keys(list(grouped))
        return [(keys[name], gradescope_results(mine, (), explained.get(name)),
                 feedback(code_span(Path(name).name), mine, explanation=explained.get(name)))
                for name, mine in grouped.items()]
    found, sums = results(rows, roster, most, answered_files(explained))
    keys = student_keys(roster)
    return [(keys[r.student["student_id"]],
             gradescope_results(r.rows, r.notes(sums), explained.get(r.counted),
                                [explained[f] for f in r.files if f != r.counted and f in answered_files(explained)]),
             student_feedback(r, sums, explained.get(r.counted))) for r in found]


def answered_files(explained: dict[str, dict]) -> frozenset:
    """The files whose explanation answer was found (``explained``: the explanations' answers, or the
    explanations CSV's rows, by file): of a student's files of equal points, one of these counts."""
    return frozenset(name for name, e in explained.items() if e.get("status") in ("answered", "cut"))


def per_submission(rows: list[dict]) -> dict[str, list[dict]]:
    """The rows grouped by submission (the grader's own, without roster-made missing_submission rows)."""
    grouped: dict[str, list[dict]] = {}
    for r in rows:
        grouped.setdefault(r["submission"], []).append(r)
    return grouped
