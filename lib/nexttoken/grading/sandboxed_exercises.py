"""What ``nexttoken.exercises`` is inside the grader's sandbox: this file is bound over that package's
``__init__.py`` there (``sandbox.hidden_files``), and the tasks' modules are hidden (an empty device in
their place, which Python does not import: ``import nexttoken.exercises.ch02`` fails). A notebook's
``from nexttoken.exercises import ch02`` still imports, and a leftover ``ch02.q1.hint()`` or
``args = ch02.q1.failing_input()`` does nothing, but no task is there: no reference, no known mistake, no
held-out input or solution. Only the two files the recorder needs are real: ``calling`` (calling a
function on its inputs, with the task's rules) and ``watches`` (the checks of how).
"""

CHAPTERS = ("ch01", "ch02", "ch03", "ch04", "ch05", "ch06", "ch07")  # as nexttoken.exercises (a test compares)


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
