"""Wrong answers that learners really write, one bank per chapter (mutation testing of the checks).

Each mutant is a function registered with ``@mutant(task, expect=...)``. tests/exercises/test_exercise_mutants.py
runs every one through its task's check: it must fail, and where ``expect`` is given, the feedback must
contain that text (the check claims to recognise this mistake). ``expect=None`` marks a mistake the
check does not name: it must still fail, with the generic message and the evidence (expected vs got).
``@correct(task)`` registers a right answer written differently from the solution: it must pass.
"""

from dataclasses import dataclass
from collections.abc import Callable


@dataclass
class Mutant:
    task: str
    fn: Callable
    expect: str | None

    @property
    def name(self) -> str:
        return self.fn.__name__


def bank():
    """A fresh list and the decorator that fills it."""
    mutants: list[Mutant] = []

    def mutant(task: str, expect: str | None = None):
        def register(fn):
            mutants.append(Mutant(task, fn, expect))
            return fn
        return register

    return mutants, mutant


def answers():
    """A fresh list of right answers and the decorator that fills it."""
    right: list[Mutant] = []

    def correct(task: str):
        def register(fn):
            right.append(Mutant(task, fn, None))
            return fn
        return register

    return right, correct
