"""Instant feedback for the exercise notebooks, in the style of Kaggle's learntools.

    from nexttoken.exercises import ch02
    ch02.q1.check(causal_mask)     # runs the task's tests on your function, says what looks wrong
    ch02.q1.hint()
    ch02.q1.solution()

Each task knows its test cases (inputs), a reference implementation (the library's own), and how to
explain a wrong answer. The same tests grade a whole class in batch (``python -m nexttoken.grade``):
there the learner's function runs in its own kernel and only its outputs come back for comparison.
"""

from .task import Mistake, Task

CHAPTERS = ("ch01", "ch02", "ch03", "ch04", "ch05", "ch06", "ch07")


def chapter(name: str):
    """The module of one chapter's tasks, e.g. ``chapter("ch02").q1``."""
    import importlib

    if name not in CHAPTERS:
        raise ValueError(f"chapter must be one of {CHAPTERS}, got {name!r}")
    return importlib.import_module(f"nexttoken.exercises.{name}")


__all__ = ["CHAPTERS", "Mistake", "Task", "chapter"]
