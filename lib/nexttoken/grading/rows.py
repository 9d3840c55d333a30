"""The grade rows, the stage after judging: one row per task of a submission, or one for the submission as
a whole, their text made safe to show (``text.clean``)."""

from typing import TypedDict

from .text import clean, one_line

MAX_REASON = 500  # characters of a reason in the CSV (the checks explain a mistake in a few lines)
NO_OUTPUTS = "no outputs were recorded for this task"  # the reason of a task no run recorded
NOTEBOOK = "-"  # the task of a row about a submission as a whole (unreadable, another chapter's, no chapter)


class Row(TypedDict):
    """One row of grades.csv, by column: one task of one submission, or (``about_notebook``) the submission
    as a whole. The grader makes them with ``task_row`` and ``notebook_row``; read back (--resume, merge),
    points and max_points are text."""
    submission: str
    task: str
    points: int
    max_points: int
    status: str
    reason: str
    library_calls: str  # rebuilt library functions called where no refusal scored the task


FIELDS = list(Row.__annotations__)  # grades.csv's columns, in order


def task_row(submission: str, task: str, points: int, max_points: int, status: str, reason: str,
             library_calls: str = "") -> Row:
    return Row(submission=submission, task=task, points=points, max_points=max_points, status=status,
               reason=reason, library_calls=library_calls)


def notebook_row(submission: str, status: str, reason: str, max_points: int = 0) -> Row:
    """The one row of a submission not graded task by task: 0 points of ``max_points``."""
    return task_row(submission, NOTEBOOK, 0, max_points, status, reason)


def submission_rows(name: str, problem: tuple[str, str] | None, recording, settings) -> list[Row]:
    """One submission's rows (``name`` as in the CSV), as its recording's decision (``decide``) says: one per
    task of its recording (``run.Recording``) where it is graded task by task; else one for the notebook as
    a whole, 0 of --chapter's points: wrong_chapter, or its problem (or its snapshot's, ``problem``: not read)."""
    decision = recording.decision if problem is None else None
    if decision is not None and decision.expected is not None:  # another chapter than --chapter's
        return [wrong_chapter(name, decision.chapter, decision.expected, decision.points)]
    if decision is not None and decision.graded:
        return clean_rows(task_rows(name, recording))
    status, reason = problem or decision.problem
    return [notebook_row(name, status, clean(reason)[:MAX_REASON], settings.chapter_points)]


def wrong_chapter(submission: str, found: str, expected: str, points: int) -> Row:
    """The one row of a notebook of another chapter: 0 of the assignment's ``points``."""
    return notebook_row(submission, "wrong_chapter",
                        f"this notebook is {found}'s (its metadata or the exercise module it imports), but the "
                        f"assignment is {expected} (--chapter): not graded; hand in your {expected} notebook",
                        points)


def for_assignment(rows: list[Row], expected: str | None, points: int) -> list[Row]:
    """The rows as the assignment counts them, whichever run wrote them (an earlier run --resume reads, the
    shards merge joins): a submission graded as another chapter becomes one wrong_chapter row, and a row
    for the notebook as a whole (unreadable, no chapter) is out of the chapter's ``points``, not "0 of 0"."""
    if expected is None:
        return rows
    others: dict[str, str] = {}  # a submission graded as another chapter -> that chapter
    for r in rows:
        if not about_notebook(r) and not r["task"].startswith(f"{expected}."):
            others.setdefault(r["submission"], r["task"].split(".")[0])
    out, replaced = [], set()
    for r in rows:
        name = r["submission"]
        if name in others:
            if name not in replaced:  # its rows become one
                replaced.add(name)
                out.append(wrong_chapter(name, others[name], expected, points))
        else:
            out.append({**r, "max_points": points} if about_notebook(r) else r)
    return out


def task_rows(name: str, recording) -> list[Row]:
    """One row per task of a recording (``run.Recording``); a task with no outputs says why, naming the first
    cell that stopped or raised."""
    notes = [f"your {text}" for text in recording.skip.values()]
    notes += [f"your code cell {n} raised {e}" for n, e in sorted(recording.cell_errors.items())
              if n not in recording.skip]
    rows = []
    for task_name, task in recording.tasks.items():
        status, reason = recording.results.get(task_name, ("error", NO_OUTPUTS))
        reason = with_notes(reason, definition_notes(task, status, recording.notes.get(task_name, {})))
        if status in ("missing", "error") and notes:
            reason += f" ({notes[0]})"
        rows.append(task_row(name, f"{recording.chapter}.{task_name}", task.points if status == "passed" else 0,
                             task.points, status, clean(reason)[:MAX_REASON],
                             clean(recording.calls.get(task_name, ""))))
    return rows


def definition_notes(task, status: str, notes: dict) -> list[str]:
    """In the grader's words, from the recorder's numbers: which of several cells' definitions of the
    function was graded (always said), and, where the task did not pass, a top-level loop that did not run
    but sets a name the function reads."""
    said = []
    defined, loop = notes.get("defined"), notes.get("loop")
    if defined:
        cells, counts, used = defined["cells"], defined["counts"], defined["used"]
        where = ", ".join(map(str, cells[:-1])) + f" and {cells[-1]}"
        if None not in counts and used in cells:
            said.append(f"{task.function} is defined in code cells {where}: graded with code cell {used}'s, the one "
                        f"your kernel ran last (execution count {counts[cells.index(used)]})")
        else:
            said.append(f"{task.function} is defined in code cells {where}: graded with the last, code cell "
                        f"{used}'s (its execution counts do not say which your kernel ran last: none were saved, or "
                        "they come from more than one kernel session)")
    if loop and status != "passed":
        said.append(f"code cell {loop['cell']} has a top-level loop (line {loop['line']}) that would set "
                    f"`{loop['name']}`, which {task.function} reads: the grader runs only a cell's definitions "
                    f"(imports, def, class, assignments), never a loop; build `{loop['name']}` in one assignment "
                    f"(a comprehension) or inside {task.function}")
    return said


def with_notes(reason: str, notes: list[str]) -> str:
    """The notes after the reason's first line, where the CSV's cut at MAX_REASON keeps them."""
    if not notes:
        return reason
    first, newline, rest = reason.partition("\n")
    return f"{first} ({'; '.join(notes)}){newline}{rest}"


def about_notebook(row: Row) -> bool:
    """Whether the row is about the submission as a whole (``notebook_row``), not one of its tasks."""
    return row["task"] == NOTEBOOK


def not_counted(row: Row) -> bool:
    """Whether the row is a task the grade does not count (a practice task by default: 0 of 0 points)."""
    return not about_notebook(row) and int(row["max_points"]) == 0


def clean_rows(rows: list[Row]) -> list[Row]:
    """Every field of every row as encodable text (the CSV and the summary can always be written)."""
    return [{k: clean(v) if isinstance(v, str) else v for k, v in r.items()} for r in rows]


def error_row(name: str, exc: BaseException) -> Row:
    """The row of a submission the grader failed on (a bug of ours): its other submissions are graded."""
    return notebook_row(name, "grader_error", one_line(clean(f"{type(exc).__name__}: {exc}"))[:MAX_REASON])
