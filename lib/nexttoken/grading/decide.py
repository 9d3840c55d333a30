"""The decision on one submission, made once, when its first run's recorder says what it read (its first
message, the notebook's, sent before any learner code runs: the sandbox reads the notebook, never the
grader): the chapter found, and whether it is graded task by task. Not, where the notebook was not read
into a chapter we grade (a refused notebook, no chapter, no message: one row, its status and reason), or
where it is another chapter than the assignment's (--chapter: one wrong_chapter row, no task run).
``orders.plan`` asks it for the first run and keeps it on the run's result (``follow.RunResult``); the
later runs carry it (``run.Job``), and ``run.run_submission`` and ``rows.submission_rows`` act on it."""

from dataclasses import dataclass

from ..exercises import chapter
from ..recorder.contract import notebook_problem


@dataclass(frozen=True)
class Decision:
    """What one submission is graded as. Task by task (``graded``): its chapter's ``tasks``; else one row
    for the notebook as a whole, 0 of the assignment's ``points``: its ``problem`` (status, reason), or,
    a notebook of another chapter than the assignment's (``expected``), wrong_chapter."""
    chapter: str | None = None  # the notebook's, as the recorder read it; None: none we grade
    tasks: tuple[str, ...] = ()  # the chapter's tasks, every one run and judged; (): none is run
    problem: tuple[str, str] | None = None  # (status, reason): not read into a chapter we grade
    expected: str | None = None  # the assignment's chapter (--chapter), where the notebook is another's
    points: int = 0  # --chapter's points: the most of the notebook's one row

    @property
    def graded(self) -> bool:
        """Whether the submission is graded task by task (else it gets one row, ``problem`` or wrong_chapter)."""
        return self.problem is None and self.expected is None


def decide(message: dict | None, settings, stopped=None) -> Decision:
    """The decision from the recorder's first message (``message``; None: the run sent none, and ``stopped``,
    its ``follow.Stop`` or None, says why) and the assignment (``settings.chapter``, ``chapter_points``)."""
    points = settings.chapter_points
    if message is None:
        how = f"{stopped.status}: {stopped.detail}" if stopped is not None else "error: it sent nothing"
        return Decision(problem=("invalid_notebook", f"the sandbox stopped before the notebook was read ({how})"),
                        points=points)
    problem = notebook_problem(message)
    if problem is not None:
        return Decision(problem=problem, points=points)
    found = message["chapter"]
    if settings.chapter not in (None, found):  # another chapter's work is not run
        return Decision(found, expected=settings.chapter, points=points)
    return Decision(found, tuple(chapter(found).TASKS), points=points)
