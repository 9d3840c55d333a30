"""What ``nexttoken.exercises`` is inside the grader's sandbox: the sandbox shows this file as that package's
``__init__.py`` and nothing else of the package (``nexttoken.grading.sandbox.policy``), so ``import
nexttoken.exercises.ch02`` fails there. A notebook's ``from nexttoken.exercises import ch02`` still imports,
and a leftover ``ch02.q1.hint()`` or ``args = ch02.q1.failing_input()`` does nothing, but no task is there:
no reference, no known mistake, no held-out input or solution.
"""

from nexttoken.recorder.contract import CHAPTERS  # absolute: inside, this file is nexttoken/exercises/__init__.py


class NotWhileGrading:
    """Any attribute of it and any call to it give nothing (the batch grader judges outside the sandbox)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __call__(self, *args, **kwargs):
        return None

    def __repr__(self):
        return "<not available inside the grader's sandbox>"


def __getattr__(name):
    if name in CHAPTERS:
        return NotWhileGrading()
    raise AttributeError(f"module 'nexttoken.exercises' has no attribute {name!r} inside the grader's sandbox")
