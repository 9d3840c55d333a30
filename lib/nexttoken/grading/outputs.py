"""What a grading run or a merge writes from the grade rows: grades.csv and the gradebook, the
explanations' answers, the exports (Canvas, Gradescope, feedback) and the roster's problems."""

import json
import sys
from collections import Counter
from pathlib import Path

from . import assignment, explanations, exports, report, rosters
from ..recorder.words import counted
from .csvs import FIELDS, Row, gradebook, shown, write_csv


def most_points(args, rows: list[Row]) -> int:
    """The assignment's points: its chapter's with --chapter, else the most a graded submission can get."""
    return exports.assignment_max(rows, assignment.chapter_points(args.chapter) if args.chapter else None)


def write_grades(args, rows: list[Row], roster: rosters.Roster | None) -> list[Row]:
    """grades.csv and the gradebook; returns the rows in the order written: by submission (a stable sort,
    each submission's tasks in order), so that merged shards give exactly what one run writes."""
    rows = sorted(assignment.for_assignment(rows, args.chapter), key=lambda r: r["submission"])
    most = most_points(args, rows)
    if roster is None:
        write_csv(args.out, FIELDS, rows)
    else:
        write_csv(args.out, FIELDS + rosters.IDENTITY, exports.with_identity(rows, roster, most))
    if args.gradebook is not None:
        write_csv(args.gradebook, *(gradebook(rows) if roster is None else
                                    exports.student_gradebook(rows, roster, most)))
    return rows


def problems_path(out: Path) -> Path:
    """Where a run with --roster lists the roster's problems: next to --out (grades.csv: grades-problems.csv)."""
    return out.with_name(f"{out.stem}-problems.csv")


def report_roster(args, rows: list[Row], roster: rosters.Roster) -> int:
    """Every roster problem in the problems file, and on stderr their counts and the first few, named;
    returns how many there are."""
    found = exports.problems(rows, roster)
    write_csv(problems_path(args.out), exports.PROBLEM_FIELDS, found)
    counts = Counter(p["problem"] for p in found)
    said = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "none"
    files = counted(len(exports.per_submission(rows)), "file")
    print(f"roster: {counted(len(roster.students), 'student')}, {files}; problems: {said}"
          f" (all in {shown(problems_path(args.out))})", file=sys.stderr)
    for p in found[:20]:  # e.g. "duplicate_submission: a1 Alice: alice_v2.ipynb: not counted"
        who = f"{p['student_id']} {p['name']}".strip()
        parts = (p["problem"], who, Path(p["submission"]).name if p["submission"] else "", p["detail"])
        print("  " + shown(": ".join(part for part in parts if part)), file=sys.stderr)
    if len(found) > 20:
        print(f"  ... and {len(found) - 20} more", file=sys.stderr)
    return len(found)


def write_explanations(args, rows: list[Row], answers: dict[str, dict], roster: rosters.Roster | None) -> None:
    """The explanations' answers next to --out, for the instructor to mark (no points counted here)."""
    explanations.write(explanations.explanations_path(args.out), rows, answers, roster, args.chapter)


def write_exports(args, rows: list[Row], roster: rosters.Roster | None, answers: dict[str, dict]) -> None:
    """Canvas, Gradescope and the feedback files, from the same rows as grades.csv: with a roster, one
    of each per roster student, named by the roster; without, one per submission. Each results.json also
    holds the explanation's answer, question and rubric as a test of 0 points hidden from the student,
    for the instructor to mark (on Gradescope the grader's CSVs are not kept)."""
    if args.canvas is not None:
        write_csv(args.canvas, *exports.canvas(rows, roster, args.assignment))
    for folder in (args.gradescope, args.feedback):
        if folder is not None:
            folder.mkdir(exist_ok=True)
    explained = {r["submission"]: r for r in explanations.export_rows(rows, answers, args.chapter)}
    for stem, results, feedback in exports.per_file(rows, roster, most_points(args, rows), explained):
        if args.gradescope is not None:
            (args.gradescope / stem).mkdir(exist_ok=True)
            exports.write_text(args.gradescope / stem / "results.json", json.dumps(results, indent=2) + "\n")
        if args.feedback is not None:
            exports.write_text(args.feedback / f"{stem}.md", feedback)


def write_report(args, rows: list[Row], answers: dict[str, dict]) -> Path:
    """The class report next to --out (grades.csv: grades-report.html; ``report``), from the rows as
    grades.csv holds them; returns its path."""
    path = report.report_path(args.out)
    explained = explanations.export_rows(rows, answers, args.chapter)
    exports.write_text(path, report.page(args.out.name, rows, most_points(args, rows), explained,
                                         explanations.explanations_path(args.out)))
    return path
