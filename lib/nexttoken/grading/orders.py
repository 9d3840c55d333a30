"""The work order: what the grader sends into a submission's sandbox, built outside it, from the tasks.

For each task: the name of the learner's function, the names of its arguments, its rules (``forbid``),
its check of how (by name, ``exercises.watches``), the library functions it re-implements (by name, so the
sandbox can report their use) and its test inputs: the visible ones, or (a run of its own, ``held_out``)
the held-out ones alone, unnamed, so that no run that shows a learner's text ever held a held-out input.
What judges the outputs (the references, the known mistakes, which inputs are held out and their
names) stays here: the sandbox cannot import it (``sandbox.hidden_files``).
"""

import os
import sys
import threading
import types

from ..exercises import chapter
from ..exercises.calling import copy_args
from .judge import JUDGING, judged_cases
from .wire import pack_order

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
            "library": sorted(library_names(task)), "cases": judged_cases(task, held_out)[0]}


def library_names(task) -> set[str]:
    """"module:qualname" of the library functions a task's answer re-implements: a nexttoken function
    (outside nexttoken.exercises and nexttoken.grading) with the task's function name, or one whose result
    the reference returns as its own (the reference is a thin wrapper of it, e.g.
    ``lambda T: causal_mask(T)``, even through a decorator such as torch.no_grad). Found by running the
    reference on the task's first input under a profile hook (by ``work_order``, under ``JUDGING``)."""
    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../nexttoken
    exercises = os.path.join(ours, "exercises")
    outside = ("nexttoken.exercises", "nexttoken.grading")
    found = set()
    for name, mod in list(sys.modules.items()):
        if name.startswith("nexttoken") and not name.startswith(outside):
            fn = getattr(mod, task.function, None)
            if isinstance(fn, types.FunctionType) and fn.__code__.co_filename.startswith(ours):
                found.add(f"{fn.__module__}:{fn.__qualname__}")

    returned = []

    def called_by_exercises(frame) -> bool:
        """Called from the task's code, perhaps through wrappers outside nexttoken (torch.no_grad)."""
        caller = frame.f_back
        while caller is not None and not caller.f_code.co_filename.startswith(ours):
            caller = caller.f_back
        return caller is not None and caller.f_code.co_filename.startswith(exercises)

    def profile(frame, event, arg):
        name = frame.f_code.co_filename
        if event == "return" and name.startswith(ours) and not name.startswith(exercises) \
                and called_by_exercises(frame):
            returned.append((frame.f_globals.get("__name__", ""), frame.f_code.co_qualname, arg))

    sys.setprofile(profile)
    try:
        result = task.reference(*copy_args(task.cases()[0]))
    except Exception:
        result = None
    finally:
        sys.setprofile(None)
    return found | {f"{module}:{qualname}" for module, qualname, value in returned
                    if result is not None and value is result and "<" not in qualname}
