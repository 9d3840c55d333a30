"""The work orders: which tasks each run of a submission records, and what the grader sends into its
sandbox for them, built outside it, from the tasks.

Runs, in order: the first, on whose first message the submission is decided (``decide``: its chapter,
and whether it is graded task by task), records every task of that chapter that may use the library's
generate; the tasks that forbid it follow in a sandbox without it (``generate_rule``), and with
--held-out the tasks that passed run again on their held-out inputs alone (``run.held_out_pass``).

For each task: the name of the learner's function, the names of its arguments, its rules (``forbid``),
its check of how (by name, ``recorder.watches``), the library functions it rebuilds (``Task.rebuilds``, so
the sandbox can report their use) and its test inputs: the visible ones, or (a run of its own, ``held_out``)
the held-out ones alone, unnamed, so that no run that shows a learner's text ever held a held-out input.
What judges the outputs (the references, the known mistakes, which inputs are held out and their
names) stays here: the sandbox cannot import it (``sandbox.policy``: it shows only the library and the recorder).
"""

import threading

from ..exercises import chapter
from ..recorder.contract import RULE
from ..recorder.wire import pack_order
from .cases import judged_cases
from .decide import Decision, decide

GENERATE = "nexttoken.generate"
_made: dict[tuple, bytes] = {}  # (chapter, tasks, held_out) -> the packed order: the same for every submission
_making = threading.Lock()


def work_order(chapter_name: str, task_names: list[str], held_out: bool) -> bytes:
    """The packed work order for these tasks of one chapter: their visible inputs, or with ``held_out``
    their held-out inputs alone (the inputs ``judge`` compares against, in the same order)."""
    key = (chapter_name, tuple(task_names), held_out)
    with _making:
        if key not in _made:
            module = chapter(chapter_name)  # its inputs draw from generators of their own (common.small_model)
            tasks = [order_of(getattr(module, name), held_out) for name in task_names]
            _made[key] = pack_order({"chapter": chapter_name, "tasks": tasks})
        return _made[key]


def generate_rule(task) -> str | None:
    """The message the library's generate raises in the sandbox of a task that forbids it, or None."""
    rule = task.forbid.get(GENERATE)
    return None if rule is None else f"{RULE}{GENERATE} was called, but the task says: {rule}"


def first_tasks(chapter_name: str) -> list[str]:
    """The tasks of a chapter that the first run records: those that do not forbid nexttoken.generate.
    The others are recorded by a run of their own, in a sandbox without it."""
    module = chapter(chapter_name)
    return [name for name in module.TASKS if generate_rule(getattr(module, name)) is None]


def next_group(tasks: dict, pending: list[str]) -> tuple[list[str], str | None]:
    """The tasks of ``pending`` the next run records, and the message generate raises in its sandbox
    (None: the library's own): those that may use generate first, then those that forbid it (in a sandbox,
    or without bubblewrap a package view, whose generate.py has no loop)."""
    group = [name for name in pending if generate_rule(tasks[name]) is None]
    return (group, None) if group else (pending, generate_rule(tasks[pending[0]]))


def next_run(tasks: dict | None, pending: list[str] | None, settings, decision: Decision | None = None):
    """What the next run of ``pending``'s tasks (of ``tasks``, name -> Task) is handed (``plan``), and the
    message generate raises in its sandbox (``next_group``). ``pending`` None: the first run, which finds
    the chapter and records the tasks that may use generate; a later one carries its ``decision``."""
    if pending is None:
        return plan(None, settings), None
    group, rule = next_group(tasks, pending)
    return plan(group, settings, decision), rule


def plan(tasks: list[str] | None, settings, decision: Decision | None = None):
    """What a run is handed (``run.run_once``): given the recorder's first message (what it read), the
    decision on the submission (``decide.Decision``), the tasks it records and their packed work order, or
    no order (not graded task by task, or a message that does not name the chapter decided). ``tasks``
    None: the first run's (``first_tasks``), whose message is decided on (``decide``); a later run's
    carries the first run's ``decision``."""
    def order_for(message: dict) -> tuple[Decision, list[str], bytes | None]:
        decided = decision or decide(message, settings)
        if not decided.graded or message.get("notebook") != "read" or message.get("chapter") != decided.chapter:
            return decided, [], None
        chosen = first_tasks(decided.chapter) if tasks is None else tasks
        return decided, chosen, work_order(decided.chapter, chosen, settings.held_out)
    return order_for


def order_of(task, held_out: bool) -> dict:
    return {"name": task.name, "function": task.function, "arg_names": task.arg_names,
            "forbid": dict(task.forbid), "watch": task.watch.__name__ if task.watch else None,
            "library": sorted(task.rebuilds), "cases": judged_cases(task, held_out)[0]}

