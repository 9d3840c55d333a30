"""What a grading run or a merge writes from the grade rows, the last stage: grades.csv and the gradebook, the
explanations' answers, the exports (Canvas, Gradescope, feedback), the class report and the roster's
problems, each written whole, through a temporary file and an atomic rename (``write_atomically``); and the
CSVs read back, for --resume and merge.

The explanations' CSV, next to --out (grades.csv: grades-explanations.csv), is for the instructor to mark:
each submission's answer to its chapter's explanation question (``nexttoken/exercises/explanations.py``), as
``read.read_answer`` read it, with the question, the rubric and the points possible. Nothing here scores an
answer: the ``points`` column is left blank for the instructor, and no total of grades.csv or the exports
counts it. ``--resume`` keeps the answers already in it (and any points the instructor typed there), and
``merge`` joins the shards' files, found next to each shard's grades CSV.
"""

import csv
import json
import os
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..exercises import explanations as source
from ..recorder.words import counted
from . import exports, report, rosters
from .assignment import Assignment
from .rosters import IDENTITY
from .rows import FIELDS, Row, about_notebook, for_assignment
from .text import clean, escape, one_line, shown, unescape

# The explanations' CSV: the answer after the question and the rubric, as in every export.
# notebook_sha256: the notebook's bytes' digest, which shows the instructor notebooks of the same bytes.
EXPLANATION_FIELDS = ["submission", "chapter", "status", "question", "rubric", "points_possible", "answer", "points",
                      "notebook_sha256"]
BEFORE_DIGESTS = EXPLANATION_FIELDS[:-1]  # older
ANSWER_FIRST = ["submission", "chapter", "status", "answer", "question", "rubric", "points_possible", "points"]  # older
WITHHELD = "not in this build (a student build leaves the rubric out): export with the full package"
# status: answered, cut (longer than read.MAX_ANSWER), no_answer (empty, or the placeholder untouched),
# not_read (not JSON, or too many JSON values to parse), or the notebook's own status where it was not
# graded as a chapter (invalid_notebook, wrong_chapter, too_large, ...), missing_submission (--roster).


class UnreadableCSV(ValueError):
    """A CSV given to read back (--resume's --out, a shard to merge) that is not one the grader wrote; the
    message names the file and what is wrong, and the command line says which argument gave it."""


def write_atomically(path: Path, write, newline: str | None = None) -> None:
    """``write(f)`` into a temporary file next to ``path`` (mode 0600), flushed to disk, then renamed over
    ``path``: a reader, or a grader killed midway, sees the old file or the new one, never half of it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline=newline, encoding="utf-8", errors="backslashreplace") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    write_atomically(path, lambda f: f.write(text))


def write_csv(path: Path, header: list[str], rows: list[dict]) -> None:
    """Any CSV of the grader's (``rows`` by column), every cell through ``clean`` and ``escape``."""
    def write(f):
        writer = csv.writer(f)
        writer.writerow(header)
        for r in rows:  # a reason keeps its lines for the feedback files; in a CSV it is one line
            writer.writerow([escape(one_line(clean(r.get(h, ""))) if h == "reason" else clean(r.get(h, "")))
                             for h in header])
    write_atomically(path, write, newline="")


def read_csv(path: Path, kind: str, columns: list[list[str]]) -> list[dict]:
    """The lines of a CSV the grader wrote, each cell unescaped, without the roster's missing_submission
    lines (made again from --roster at each write); ``kind`` names it in the error of one that is not."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames not in columns:
                raise UnreadableCSV(f"{path} is not {kind} (columns {reader.fieldnames})")
            return [{k: unescape(v or "") for k, v in r.items()} for r in reader
                    if r.get("roster_status") != "missing_submission"]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise UnreadableCSV(f"{path} is not {kind} ({type(exc).__name__}: {exc})") from None


def read_previous(path: Path) -> list[Row]:
    """The rows of a grades CSV (an earlier run's, for --resume; a shard's, for merge); a missing file is an
    empty start."""
    if not path.exists():
        return []
    rows = [Row(**{k: v for k, v in r.items() if k not in IDENTITY})
            for r in read_csv(path, "a grades CSV", [FIELDS, FIELDS + IDENTITY])]
    for number, r in enumerate(rows, start=2):
        if not (r["points"].isdigit() and r["max_points"].isdigit()):
            raise UnreadableCSV(f"{path} line {number}: points are not whole numbers")
    return rows


def read_answers(path: Path) -> dict[str, dict]:
    """{submission: {"status", "answer", "points", "notebook_sha256"}} of an earlier run's explanations CSV
    (for --resume and merge; an older one has no digests: ""). Missing file: {}."""
    if not path.exists():
        return {}
    columns = [layout for fields in (EXPLANATION_FIELDS, BEFORE_DIGESTS, ANSWER_FIRST)
               for layout in (fields, IDENTITY + fields)]
    return {r["submission"]: {k: r.get(k, "") for k in ("status", "answer", "points", "notebook_sha256")}
            for r in read_csv(path, "an explanations CSV", columns)}


def explanations_path(out: Path) -> Path:
    """Where the answers go: next to --out (grades.csv: grades-explanations.csv), as the roster's problems."""
    return out.with_name(f"{out.stem}-explanations.csv")


def question_columns(chapter: str, table: dict | None) -> dict:
    """The question, rubric and points possible of a chapter's explanation ("" where none is known)."""
    if not chapter:
        return {"question": "", "rubric": "", "points_possible": ""}
    if table is None:
        return {"question": "", "rubric": WITHHELD, "points_possible": ""}
    entry = table[chapter]
    rubric = "\n".join(f"{p['points']} point{'s' if p['points'] != 1 else ''}: {p['point']}" for p in entry["rubric"])
    return {"question": entry["question"], "rubric": rubric, "points_possible": entry["points"]}


def explanation_rows(rows: list[Row], answers: dict[str, dict], expected: str | None = None) -> list[dict]:
    """One line of the explanations' CSV per submission of the grades ``rows`` (in their order): its chapter
    (from its tasks, else --chapter's), its answer, and that chapter's question and rubric. A notebook not
    graded as a chapter (one row for the whole notebook: invalid, another chapter's, too large) has its
    status and no answer."""
    table = source.table()
    out = []
    for name, mine in exports.per_submission(rows).items():
        tasks = [r["task"] for r in mine if not about_notebook(r)]
        chapter = tasks[0].split(".")[0] if tasks else (expected or "")
        if tasks:
            got = answers.get(name, {"status": "not_read", "answer": ""})
            status, answer = got["status"], got["answer"]
        else:
            status, answer = mine[0]["status"], ""
        mine_answer = answers.get(name, {})
        out.append({"submission": name, "chapter": chapter, "status": status, "answer": answer,
                    **question_columns(chapter, table), "points": mine_answer.get("points", ""),
                    "notebook_sha256": mine_answer.get("notebook_sha256", "")})
    return out


def missing_line(expected: str | None, table: dict | None) -> dict:
    """The explanations' line of a roster student with no file: no answer, the assignment's question."""
    return {"submission": "-", "chapter": expected or "", "status": "missing_submission", "answer": "",
            **question_columns(expected or "", table), "points": "", "notebook_sha256": ""}


@dataclass(frozen=True)
class Outputs:
    """What a run or a merge writes, and for which assignment, built once from the command line
    (``outputs_of``): --out (grades.csv; the explanations, the report and the roster's problems go next to
    it), --gradebook, --canvas, --gradescope and --feedback where given."""
    out: Path
    assignment: Assignment = field(default_factory=Assignment)
    gradebook: Path | None = None
    canvas: Path | None = None
    gradescope: Path | None = None
    feedback: Path | None = None

    def lms_exports(self, roster: bool) -> list[str]:
        """The LMS exports asked for (with a ``roster`` or not): each files every submission's points under
        one assignment."""
        asked = [flag for flag, value in (("--canvas", self.canvas), ("--assignment", self.assignment.name),
                                          ("--gradescope", self.gradescope)) if value]
        return asked + (["--gradebook with --roster"] if roster and self.gradebook is not None else [])


def outputs_of(args, assignment: Assignment) -> Outputs:
    return Outputs(args.out, assignment, args.gradebook, args.canvas, args.gradescope, args.feedback)


def most_points(to: Outputs, rows: list[Row]) -> int:
    """The assignment's points: its chapter's with --chapter, else the most a graded submission can get."""
    expected = to.assignment
    return exports.assignment_max(rows, expected.points if expected.chapter else None)


def write_grades(to: Outputs, rows: list[Row], roster: rosters.Roster | None,
                 answers: dict[str, dict] | None = None) -> list[Row]:
    """grades.csv and the gradebook; returns the rows in the order written: by submission (a stable sort,
    each submission's tasks in order), so that merged shards give exactly what one run writes. ``answers``
    (the explanations' answers by file) decide which of a student's files of equal points counts."""
    expected = to.assignment
    rows = expected.scheme.counted(for_assignment(rows, expected.chapter, expected.points))
    rows = sorted(rows, key=lambda r: r["submission"])
    most = most_points(to, rows)
    if roster is None:
        write_csv(to.out, FIELDS, rows)
    else:
        write_csv(to.out, FIELDS + rosters.IDENTITY, exports.with_identity(rows, roster, most))
    if to.gradebook is not None:
        answered = exports.answered_files(answers or {})
        write_csv(to.gradebook, *(exports.gradebook(rows) if roster is None else
                                    exports.student_gradebook(rows, roster, most, answered)))
    return rows


def problems_path(out: Path) -> Path:
    """Where a run with --roster lists the roster's problems: next to --out (grades.csv: grades-problems.csv)."""
    return out.with_name(f"{out.stem}-problems.csv")


def report_roster(to: Outputs, rows: list[Row], roster: rosters.Roster, answers: dict[str, dict] | None = None) -> int:
    """Every roster problem in the problems file, and on stderr their counts and the first few, named;
    returns how many there are."""
    found = exports.problems(rows, roster, exports.answered_files(answers or {}))
    write_csv(problems_path(to.out), exports.PROBLEM_FIELDS, found)
    counts = Counter(p["problem"] for p in found)
    said = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "none"
    files = counted(len(exports.per_submission(rows)), "file")
    print(f"roster: {counted(len(roster.students), 'student')}, {files}; problems: {said}"
          f" (all in {shown(problems_path(to.out))})", file=sys.stderr)
    for p in found[:20]:  # e.g. "duplicate_submission: a1 Alice: alice_v2.ipynb: not counted"
        who = f"{p['student_id']} {p['name']}".strip()
        parts = (p["problem"], who, Path(p["submission"]).name if p["submission"] else "", p["detail"])
        print("  " + shown(": ".join(part for part in parts if part)), file=sys.stderr)
    if len(found) > 20:
        print(f"  ... and {len(found) - 20} more", file=sys.stderr)
    lost = exports.unplaced(rows, roster)
    if lost and to.canvas is not None:
        without = sum(r.counted is None for r in exports.results(rows, roster, 0)[0])
        print(f"{counted(len(lost), 'file')} could not be placed on the roster, so the {counted(without, 'student')} "
              f"with no file get a blank in {shown(to.canvas)}, not 0 (Canvas leaves a blank grade as it was): "
              "place every file (correct the roster) and run python -m nexttoken.grade merge again with it",
              file=sys.stderr)
    return len(found)


def write_explanations(to: Outputs, rows: list[Row], answers: dict[str, dict], roster: rosters.Roster | None) -> None:
    """The explanations' answers next to --out, for the instructor to mark (no points counted here)."""
    path, lines = explanations_path(to.out), explanation_rows(rows, answers, to.assignment.chapter)
    if roster is None:
        write_csv(path, EXPLANATION_FIELDS, lines)
    else:  # the instructor marks by student: the IDENTITY columns first
        table = source.table()
        write_csv(path, IDENTITY + EXPLANATION_FIELDS,
                  rosters.with_identity(lines, roster, lambda s: missing_line(to.assignment.chapter, table)))


def write_exports(to: Outputs, rows: list[Row], roster: rosters.Roster | None, answers: dict[str, dict]) -> None:
    """Canvas, Gradescope and the feedback files, from the same rows as grades.csv: with a roster, one
    of each per roster student, named by the roster; without, one per submission. Each results.json also
    holds the explanation's answer, question and rubric as a test of 0 points hidden from the student,
    for the instructor to mark (on Gradescope the grader's CSVs are not kept)."""
    if to.canvas is not None:
        write_csv(to.canvas, *exports.canvas(rows, roster, to.assignment.name))
    for folder in (to.gradescope, to.feedback):
        if folder is not None:
            folder.mkdir(exist_ok=True)
    explained = {r["submission"]: r for r in explanation_rows(rows, answers, to.assignment.chapter)}
    for stem, results, feedback in exports.per_file(rows, roster, most_points(to, rows), explained):
        if to.gradescope is not None:
            (to.gradescope / stem).mkdir(exist_ok=True)
            write_text(to.gradescope / stem / "results.json", json.dumps(results, indent=2) + "\n")
        if to.feedback is not None:
            write_text(to.feedback / f"{stem}.md", feedback)


def write_report(to: Outputs, rows: list[Row], answers: dict[str, dict], roster: rosters.Roster | None = None) -> Path:
    """The class report next to --out (grades.csv: grades-report.html; ``report``), from the rows as
    grades.csv holds them: with a roster, one learner a student (their counted file), the roster's missing,
    unplaced and superseded files listed; titled by the assignment (--assignment, else --chapter); returns
    its path."""
    path = report.report_path(to.out)
    explained = explanation_rows(rows, answers, to.assignment.chapter)
    expected = to.assignment
    title = expected.name or (f"{expected.chapter} ({to.out.name})" if expected.chapter else to.out.name)
    learners, listed = rows, None
    if roster is not None:
        found = exports.results(rows, roster, 0, exports.answered_files(answers))[0]
        learners = [r for result in found for r in result.rows]
        listed = {"missing": [f"{r.student['name']} ({r.student['student_id']})" for r in found if r.counted is None],
                  "unplaced": exports.unplaced(rows, roster),
                  "superseded": [f for r in found for f in r.files if f != r.counted]}
    write_text(path, report.page(title, learners, most_points(to, rows), explained, explanations_path(to.out),
                                 to.assignment.scheme.describe(), listed))
    return path
