"""What an assignment counts: its chapter (``--chapter N``: a notebook of another chapter gets 0 of its points,
with the reason, ``rows.wrong_chapter``), which tasks its grade counts and with what weight (``Scheme``: by
default the core tasks, as the lesson asks), and the refusal of an LMS export of several chapters' notebooks
without --chapter."""

import argparse
from collections import Counter
from dataclasses import dataclass, field

from ..exercises import CHAPTERS, chapter
from .rows import Row, about_notebook


def chapter_arg(text: str) -> str:
    """--chapter: 5, 05 or ch05 -> "ch05"."""
    name = f"ch{int(text.removeprefix('ch')):02d}" if text.removeprefix("ch").isdigit() else text
    if name not in CHAPTERS:
        raise argparse.ArgumentTypeError(f"expected a chapter, one of 1 to {len(CHAPTERS)} (or {CHAPTERS[0]}), "
                                         f"got {text!r}")
    return name


@dataclass(frozen=True)
class Scheme:
    """Which tasks a grade counts, and each one's points. The lesson asks every learner for its core tasks
    (each chapter module's ``CORE``) and offers the rest as practice, so by default a grade counts the core
    tasks at their points and a practice task at 0: a learner who does exactly what the course asks gets
    full marks (a chapter with no core tasks, chapter 7, counts every task). ``practice`` (--count-practice)
    counts the practice tasks too; ``weights`` (--weight ch05.q3=2) sets a task's points, 0 leaving it out.
    No partial credit: a task's points are all or none."""
    practice: bool = False
    weights: dict[str, int] = field(default_factory=dict)  # "ch05.q3" -> points

    def weight(self, task: str) -> int | None:
        """The points a task ("ch05.q3") is worth in the grade: 0 for one the grade does not count; None for
        a task this build does not know (a CSV an older or newer grader wrote keeps its own points)."""
        if task in self.weights:
            return self.weights[task]
        chapter_name, _, name = task.partition(".")
        if chapter_name not in CHAPTERS or name not in chapter(chapter_name).TASKS:
            return None
        module = chapter(chapter_name)
        counted = self.practice or name in module.CORE or not module.CORE  # a chapter with no core: every task
        return getattr(module, name).points if counted else 0

    def chapter_points(self, name: str) -> int:
        """The most a notebook of this chapter can get: its counted tasks' points."""
        return sum(self.weight(f"{name}.{task}") or 0 for task in chapter(name).TASKS)

    def counted(self, rows: list[Row]) -> list[Row]:
        """The rows with their points as this scheme counts them, from each task's status (all or none);
        the same whatever scheme an earlier run (--resume) or a shard (merge) wrote them with."""
        out = []
        for r in rows:
            most = None if about_notebook(r) else self.weight(r["task"])
            if most is None:
                out.append(r)
                continue
            out.append({**r, "points": most if r["status"] == "passed" else 0, "max_points": most})
        return out

    def describe(self) -> str:
        """What the grade counts, in a sentence (the gradebook's, the report's and the summary's words)."""
        said = "every task, core and practice" if self.practice else "the core tasks (practice tasks count 0)"
        if self.weights:
            said += "; weights: " + ", ".join(f"{task} {points}" for task, points in sorted(self.weights.items()))
        return f"the grade counts {said}"


def weight_arg(text: str) -> tuple[str, int]:
    """--weight: "ch05.q3=2" or "q3=2" (the task of --chapter's chapter) -> ("ch05.q3", 2) or ("q3", 2)."""
    task, equals, points = text.partition("=")
    if not equals or not points.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected TASK=POINTS such as ch05.q3=2 (a whole number of points, 0 "
                                         f"to leave the task out), got {text!r}")
    return task.strip(), int(points)


@dataclass(frozen=True)
class Assignment:
    """What the grade is of, built once from the command line (``assignment_of``): the assignment's chapter
    (--chapter; None: any chapter's notebook is graded as its own), the most a notebook of it can get as the
    scheme counts (0 without --chapter), its name (--assignment) and what the grade counts (``Scheme``)."""
    chapter: str | None = None
    scheme: Scheme = field(default_factory=Scheme)
    name: str | None = None
    points: int = 0


def assignment_of(args) -> Assignment:
    """The assignment --chapter, --assignment, --count-practice and --weight describe, or ValueError."""
    scheme = scheme_of(args)
    points = chapter_points(args.chapter, scheme) if args.chapter else 0
    return Assignment(args.chapter, scheme, args.assignment, points)


def scheme_of(args) -> Scheme:
    """The grading scheme --count-practice and --weight ask for, each weighted task checked to exist."""
    weights = {}
    for task, points in args.weight or []:
        if "." not in task:
            if args.chapter is None:
                raise ValueError(f"--weight {task}={points}: name the task with its chapter (e.g. ch05.{task}) "
                                 "or give --chapter")
            task = f"{args.chapter}.{task}"
        chapter_name, _, name = task.partition(".")
        if chapter_name not in CHAPTERS or name not in chapter(chapter_name).TASKS:
            raise ValueError(f"--weight {task}={points}: no such task (a task is named as ch05.q3)")
        weights[task] = points
    return Scheme(practice=args.count_practice, weights=weights)


def chapter_points(name: str, scheme: Scheme | None = None) -> int:
    """The most a notebook of this chapter can get, as ``scheme`` counts (default: the core tasks)."""
    return (scheme or Scheme()).chapter_points(name)


def chapters_of(rows: list[Row]) -> Counter:
    """How many submissions of the rows were graded as each chapter (from their tasks' names)."""
    found = {r["submission"]: r["task"].split(".")[0] for r in rows if not about_notebook(r)}
    return Counter(found.values())


def mixed_chapters(expected: str | None, asked: list[str], chapters: Counter) -> str | None:
    """The refusal of the LMS exports ``asked`` (``outputs.Outputs.lms_exports``) of notebooks of several
    chapters without --chapter (``expected``: one assignment's column would hold points of another chapter's
    work), or None."""
    if expected is not None or len(chapters) < 2 or not asked:
        return None
    found = ", ".join(f"{name}: {n}" for name, n in sorted(chapters.items()))
    likely = chapters.most_common(1)[0][0]
    return (f"an LMS export ({', '.join(asked)}) files every submission's points under one assignment, but these "
            f"notebooks are of {len(chapters)} chapters ({found}); name the assignment's chapter with --chapter (e.g. "
            f"--chapter {int(likely[2:])}): a notebook of another chapter then gets 0 for it, with the reason")
