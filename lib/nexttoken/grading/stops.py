"""What a run that ended without a record of every task it was to record costs, and what runs next: a run
that ended as it should, its tasks without a record; a stop, the cell or task running then: a cell that
hangs or crashes is skipped in the next run, a task that does is charged alone, and a cell that forges a
message or floods the grader is charged to the submission, whose tasks left get its stop and no run again.
``run.record`` hands each run here."""

from .follow import RunResult, Stop
from .rows import NO_OUTPUTS


def charge(recording, run: RunResult, pending: list[str], settings) -> list[str]:
    """What a run that left tasks of ``pending`` without a record costs in ``recording`` (``run.Recording``:
    its results, the cells it skips), under ``settings`` (``run.Settings``), and the tasks left for the next
    run: a run that ended as it should, its tasks without a record; a stop, the cell or task running then
    (or, where running again cannot help, every task left)."""
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
    elif stop.where[0] == "cell" and (stop.forged or stop.status == "too_much_output"):
        # no honest cell does either (a cell sends the grader a few short messages), and each such stop would
        # buy another run: the submission pays, not the grader, and its rows say which cell did it
        result = ("error", f"your {cell_note(stop, detail)}: a notebook that does this is not run again, so "
                           "this task was not graded")
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
