"""The code the grader runs inside a learner's kernel: call their function, save only its outputs.

Judging happens in the grader's own process, against the reference, so nothing a notebook redefines
or patches (checks, helpers, the library) changes a grade.
"""

import torch

from . import chapter


def record(chapter_name: str, task_name: str, namespace: dict, path: str) -> None:
    """Run task ``task_name`` of ``chapter_name`` on the function the notebook defines; save outcomes."""
    task = getattr(chapter(chapter_name), task_name)
    fn = namespace.get(task.function)
    if not callable(fn):
        outcomes = [("missing", f"the notebook does not define a function named {task.function}")]
    else:
        outcomes = task.run(fn)
    torch.save(outcomes, path)


SILENCE_SOURCE = """\
# Grader: the notebook's printed output and displayed values are not needed (and may be huge).
import os as _os, sys as _sys
_sys.stdout = _sys.stderr = open(_os.devnull, "w")
get_ipython().ast_node_interactivity = "none"
"""


def record_source(chapter_name: str, task_name: str, path: str) -> str:
    """The cell the grader appends to a submission to record one task."""
    return (
        "from nexttoken.exercises.harness import record as _record\n"
        f"_record({chapter_name!r}, {task_name!r}, globals(), {path!r})\n"
    )
