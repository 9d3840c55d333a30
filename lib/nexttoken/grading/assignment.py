"""An assignment that names its chapter (``--chapter N``): the chapter and its points (a notebook of another
chapter gets 0 of them, with the reason: ``rows.wrong_chapter``), and the refusal of an LMS export of several
chapters' notebooks without it."""

import argparse
from collections import Counter

from ..exercises import CHAPTERS, chapter
from .rows import Row, about_notebook


def chapter_arg(text: str) -> str:
    """--chapter: 5, 05 or ch05 -> "ch05"."""
    name = f"ch{int(text.removeprefix('ch')):02d}" if text.removeprefix("ch").isdigit() else text
    if name not in CHAPTERS:
        raise argparse.ArgumentTypeError(f"expected a chapter, one of 1 to {len(CHAPTERS)} (or {CHAPTERS[0]}), "
                                         f"got {text!r}")
    return name


def chapter_points(name: str) -> int:
    """The most a notebook of this chapter can get: its tasks' points."""
    module = chapter(name)
    return sum(getattr(module, task).points for task in module.TASKS)


def exports_asked(args) -> list[str]:
    """The LMS exports ``args`` asks for: each files every submission's points under one assignment."""
    asked = [flag for flag, value in (("--canvas", args.canvas), ("--assignment", args.assignment),
                                      ("--gradescope", args.gradescope)) if value]
    if args.roster is not None and args.gradebook is not None:
        asked.append("--gradebook with --roster")
    return asked


def chapters_of(rows: list[Row]) -> Counter:
    """How many submissions of the rows were graded as each chapter (from their tasks' names)."""
    found = {r["submission"]: r["task"].split(".")[0] for r in rows if not about_notebook(r)}
    return Counter(found.values())


def mixed_chapters(args, chapters: Counter) -> str | None:
    """The refusal of an LMS export of notebooks of several chapters without --chapter (one assignment's
    column would hold points of another chapter's work), or None."""
    asked = exports_asked(args)
    if args.chapter is not None or len(chapters) < 2 or not asked:
        return None
    found = ", ".join(f"{name}: {n}" for name, n in sorted(chapters.items()))
    likely = chapters.most_common(1)[0][0]
    return (f"an LMS export ({', '.join(asked)}) files every submission's points under one assignment, but these "
            f"notebooks are of {len(chapters)} chapters ({found}); name the assignment's chapter with --chapter (e.g. "
            f"--chapter {int(likely[2:])}): a notebook of another chapter then gets 0 for it, with the reason")
