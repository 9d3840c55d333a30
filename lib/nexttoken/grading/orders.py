"""The work order: what the grader sends into a submission's sandbox, built outside it, from the tasks.

For each task: the name of the learner's function, the names of its arguments, its rules (``forbid``),
its check of how (by name, ``recorder.watches``), the library functions it rebuilds (``Task.rebuilds``, so
the sandbox can report their use) and its test inputs: the visible ones, or (a run of its own, ``held_out``)
the held-out ones alone, unnamed, so that no run that shows a learner's text ever held a held-out input.
What judges the outputs (the references, the known mistakes, which inputs are held out and their
names) stays here: the sandbox cannot import it (``sandbox.policy``: it shows only the library and the recorder).
"""

import threading

from ..exercises import chapter
from ..recorder.wire import pack_order
from .judge import JUDGING, judged_cases

_made: dict[tuple, bytes] = {}  # (chapter, tasks, held_out) -> the packed order: the same for every submission
_making = threading.Lock()


def work_order(chapter_name: str, task_names: list[str], held_out: bool) -> bytes:
    """The packed work order for these tasks of one chapter: their visible inputs, or with ``held_out``
    their held-out inputs alone (the inputs ``judge`` compares against, in the same order)."""
    key = (chapter_name, tuple(task_names), held_out)
    with _making:
        if key not in _made:
            module = chapter(chapter_name)
            with JUDGING:  # building inputs seeds torch's global random state, as judging does
                tasks = [order_of(getattr(module, name), held_out) for name in task_names]
            _made[key] = pack_order({"chapter": chapter_name, "tasks": tasks})
        return _made[key]


def order_of(task, held_out: bool) -> dict:
    return {"name": task.name, "function": task.function, "arg_names": task.arg_names,
            "forbid": dict(task.forbid), "watch": task.watch.__name__ if task.watch else None,
            "library": sorted(task.rebuilds), "cases": judged_cases(task, held_out)[0]}

