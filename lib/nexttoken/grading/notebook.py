"""Grading one submission: the recorder run again until every task has a result (a cell that hangs or
crashes is skipped in the next run, a task that does is charged alone; the tasks that forbid the
library's generate get a run of their own, without it), then one row per task."""

import time
from dataclasses import dataclass, field, replace

from ..exercises import chapter
from ..recorder.contract import CHAPTERS, NOTEBOOK_STATUSES
from .assignment import wrong_chapter
from .csvs import MAX_REASON, Row, clean, notebook_row, task_row
from .judge import case_count, judge, library_calls
from .orders import next_group, plan
from .runner import RunResult, Settings, Stop, run_once

NO_OUTPUTS = "no outputs were recorded for this task"


def tasks_of(chapter_name: str) -> list:
    module = chapter(chapter_name)
    return [getattr(module, name) for name in module.TASKS]


def notebook_problem(run: RunResult) -> tuple[str, str] | None:
    """(status, reason) when the first run did not read the notebook into a chapter we grade."""
    message = run.notebook
    if message is None:
        stop = run.stopped or Stop(None, "error", "it sent nothing")
        return "invalid_notebook", f"the sandbox stopped before the notebook was read ({stop.status}: {stop.detail})"
    if message.get("notebook") != "read":
        status = message.get("status")
        return (status if status in NOTEBOOK_STATUSES else "invalid_notebook",
                str(message.get("reason", "not a readable notebook")))
    if message.get("chapter") not in CHAPTERS:
        return "unknown_chapter", "no chapter in the notebook's metadata or imports"
    return None


@dataclass
class Recording:
    """What the runs of one submission recorded, task by task, and what its cells did."""
    tasks: dict  # task name -> Task
    results: dict = field(default_factory=dict)  # task name -> (status, reason)
    calls: dict = field(default_factory=dict)  # task name -> the library_calls column
    cell_errors: dict = field(default_factory=dict)  # learner's code cell number -> error text
    notes: dict = field(default_factory=dict)  # task name -> the visible run's notes (the recorder's form)
    skip: dict = field(default_factory=dict)  # code cells that hung or crashed: skipped in later runs


def grade_notebook(name: str, data: bytes, settings: Settings, slot: int = 0) -> list[Row]:
    """Rows for one submission (``name`` as in the CSV, ``data`` its snapshot); never raises for a bad
    submission. With --held-out, the tasks that pass on their visible inputs are run again, in a sandbox
    of their own, on their held-out inputs alone (``held_out_pass``)."""
    budget_end = time.monotonic() + settings.notebook_timeout
    visible = replace(settings, held_out=False)
    first = run_once(data, None, plan(None, visible), set(), visible, slot, budget_end)  # it finds the chapter
    problem = notebook_problem(first)
    if problem is not None:
        status, reason = problem
        return [notebook_row(name, status, clean(reason)[:MAX_REASON])]
    chapter_name = first.notebook["chapter"]
    if settings.chapter not in (None, chapter_name):  # --chapter: another chapter's work gets 0
        return [wrong_chapter(name, chapter_name, settings.chapter)]
    recording = Recording({t.name: t for t in tasks_of(chapter_name)})
    record(recording, data, chapter_name, list(recording.tasks), visible, slot, budget_end, first)
    if settings.held_out:
        held_out_pass(recording, data, chapter_name, settings, slot, budget_end)
    return rows_of(recording, name, chapter_name)


def rows_of(recording: Recording, name: str, chapter_name: str) -> list[Row]:
    """One row per task; a task with no outputs says why, naming the first cell that stopped or raised."""
    notes = [f"your {text}" for text in recording.skip.values()]
    notes += [f"your code cell {n} raised {e}" for n, e in sorted(recording.cell_errors.items())
              if n not in recording.skip]
    rows = []
    for task_name, task in recording.tasks.items():
        status, reason = recording.results.get(task_name, ("error", NO_OUTPUTS))
        reason = with_notes(reason, definition_notes(task, status, recording.notes.get(task_name, {})))
        if status in ("missing", "error") and notes:
            reason += f" ({notes[0]})"
        rows.append(task_row(name, f"{chapter_name}.{task_name}", task.points if status == "passed" else 0,
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
                        f"{used}'s (the notebook saved no execution counts to say which your kernel ran last)")
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


def held_out_pass(recording: Recording, data: bytes, chapter_name: str, settings: Settings, slot: int,
                  budget_end: float) -> None:
    """The tasks that passed on their visible inputs, run again on their held-out inputs alone, in runs of
    their own: the runs that showed the learner's text never held a held-out input. What these runs say
    is the grader's alone (``held_out_reason``); their cells' errors, stops and library calls are not
    repeated (the visible runs reported the same cells)."""
    passed = [n for n, (status, _) in recording.results.items() if status == "passed"]
    if not passed:
        return
    hidden = Recording(recording.tasks, skip=dict(recording.skip))
    record(hidden, data, chapter_name, passed, settings, slot, budget_end, None)
    for task_name in passed:
        status, reason = hidden.results.get(task_name, ("error", NO_OUTPUTS))
        recording.results[task_name] = (status, held_out_reason(recording.tasks[task_name], status, reason))
        # its library_calls: the visible run's (the held-out run's names come from a process that held the
        # held-out inputs, so they are not used)


# A held-out run that stopped, by the stop's status: the grader's words, never the stop's detail.
HELD_OUT_STOPS = {"timeout": "it ran past the time limit (--timeout, or the notebook's budget)",
                  "crashed": "the process running it stopped", "too_much_output": "it sent too much output",
                  "grader_error": "the grader could not judge it"}


def held_out_reason(task, status: str, reason: str) -> str:
    """The row's reason after the held-out run: a pass counted, a failure by its place (the check's
    verdict, whose words are ``task.HELD_OUT``'s), anything else by its status alone."""
    visible, held = case_count(task, False), case_count(task, True)
    if status == "passed":
        return f"all {visible + held} tests passed ({held} of them held out)"
    if reason.startswith(f"{task.function}(...) on held-out test"):
        return f"all {visible} visible tests passed, but {reason}"
    return f"all {visible} visible tests passed, but on the held-out tests: {HELD_OUT_STOPS.get(status, status)}"


def record(recording: Recording, data: bytes, chapter_name: str, pending: list[str], settings: Settings,
           slot: int, budget_end: float, first: RunResult | None) -> None:
    """Run the recorder until every task in ``pending`` has a result in ``recording``, one group of tasks
    at a time (``orders.next_group``), and again after a cell or task stopped a run: a cell that hangs or
    crashes is skipped in the next run, a task that does is charged alone. ``first``: a run already made
    of the first group."""
    run = first
    while pending:
        if run is None:
            group, rule = next_group(recording.tasks, pending)
            run = run_once(data, chapter_name, plan(group, settings), set(recording.skip), settings, slot,
                           budget_end, rule)
        pending = take_records(recording, run, pending, settings.held_out)
        if pending:
            pending = charge(recording, run, pending, settings)
        run = None


def take_records(recording: Recording, run: RunResult, pending: list[str], held_out: bool) -> list[str]:
    """The run's cell errors and each record judged; the tasks still without a result."""
    for number, error in run.cell_errors.items():
        recording.cell_errors.setdefault(number, error)
    for task_name in pending:
        if task_name in run.records:
            recording.results[task_name] = judge(recording.tasks[task_name], run.records[task_name], held_out)
            recording.calls[task_name] = library_calls(run.records[task_name])
            if not held_out:  # what a held-out run says is the grader's alone
                recording.notes[task_name] = run.records[task_name].get("notes") or {}
    return [task_name for task_name in pending if task_name not in recording.results]


def charge(recording: Recording, run: RunResult, pending: list[str], settings: Settings) -> list[str]:
    """What a run that left tasks without a result costs, and the tasks left for the next run: a run
    that ended as it should, its tasks without a record; a stop, the cell or task running then (or,
    where running again cannot help, every task left)."""
    if run.stopped is None:  # the run ended as it should: its tasks without a record get an error
        results = {task_name: ("error", NO_OUTPUTS) for task_name in run.tasks if task_name in pending}
        recording.results.update(results)
        return [task_name for task_name in pending if task_name not in results]
    stop = run.stopped
    detail = stop.detail
    if stop.status == "crashed" and run.out_of_memory:
        detail += f" (the sandbox used up its {settings.limits.total_memory_mb} MB of memory, --total-memory)"
    if stop.budget:
        result = ("timeout", f"the notebook's time budget of {settings.notebook_timeout} s (--notebook-timeout) "
                             "ran out before this task was recorded")
    elif stop.where is None:  # it stopped before any of the learner's code ran: the grader's side
        result = ("grader_error", f"the sandbox stopped while starting ({stop.status}: {detail}); are --memory, "
                                  "--total-memory or --processes too small?")
    elif stop.where[0] == "cell" and stop.where[1] not in recording.skip:  # charge the cell: skip it, run again
        recording.skip[stop.where[1]] = cell_note(stop, detail)
        return pending
    elif stop.where[0] == "task" and stop.where[1] in pending:  # charge the task alone
        task_name = stop.where[1]
        recording.results[task_name] = (stop.status, f"{recording.tasks[task_name].function}: {detail}")
        return [n for n in pending if n != task_name]
    else:  # no progress to make by running again (it stopped somewhere already charged)
        result = (stop.status, f"your notebook stopped: {detail}")
    recording.results.update(dict.fromkeys(pending, result))
    return []


def cell_note(stop: Stop, detail: str) -> str:
    """What a code cell that stopped a run did, as the rows of the tasks it cost say it."""
    number = stop.where[1]
    if stop.status == "timeout":
        return f"code cell {number} {detail}"
    if stop.forged:
        return f"code cell {number}: {detail}"
    return f"code cell {number} stopped the process ({stop.status}: {detail})"
