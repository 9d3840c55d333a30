"""Instant feedback for the exercise notebooks, in the style of Kaggle's learntools.

    from nexttoken.exercises import ch02
    ch02.q1.check(causal_mask)     # runs the task's tests on your function, says what looks wrong
    args = ch02.q1.failing_input() # the input the last check failed on, to try causal_mask(*args)
    ch02.q1.hint()                 # a nudge; hint(2) and hint(3) say more
    ch02.q1.solution()             # the solution notebook's code

Each task knows its test cases (inputs, smallest first), a reference implementation (the library's own
where there is one), the outputs of its known mistakes, and how to explain any other wrong answer. The
same tests grade a whole class in batch (``python -m nexttoken.grade``): there the learner's function runs
in a sandboxed recorder process (``nexttoken.recorder``, whose ``calling`` and ``watches`` a ``check()``
here uses too) and only its outputs come back for comparison; this package is not in the sandbox. With
``--held-out`` the grader also judges each task on held-out inputs (``held_out.py``) that no ``check`` runs.
tests/exercise_mutants/ holds the wrong answers every check is tested against.
"""

from ..recorder.contract import CHAPTERS
from .task import Mistake, Task


def chapter(name: str):
    """The module of one chapter's tasks, e.g. ``chapter("ch02").q1``."""
    import importlib

    if name not in CHAPTERS:
        raise ValueError(f"chapter must be one of {CHAPTERS}, got {name!r}")
    return importlib.import_module(f"nexttoken.exercises.{name}")


def solutions(name: str) -> dict:
    """The solution notebook's functions of one chapter, defined as the notebook defines them (from the
    shipped solutions.json, with the notebook's imports): {function name: function}. Tests and
    scripts/mutate_checks.py run them through the checks."""
    import json
    import math
    from importlib import resources

    import torch

    import nexttoken

    shipped = resources.files(__name__).joinpath("solutions.json")
    if not shipped.is_file():
        raise FileNotFoundError("this is a student build of nexttoken: the solutions (solutions.json) are withheld")
    table = json.loads(shipped.read_text())[name]
    namespace = {"math": math, "torch": torch, "nexttoken": nexttoken}
    for source in dict.fromkeys(table.values()):  # a cell that defines two functions is run once
        exec(compile(source, f"<solutions/{name}.ipynb>", "exec"), namespace)
    return {function: namespace[function] for function in table}


__all__ = ["CHAPTERS", "Mistake", "Task", "chapter", "solutions"]
