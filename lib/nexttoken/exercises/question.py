"""What a notebook's ``chNN.qN`` is (``Question``): one task, and one learner's tries at it: ``check``,
``failing_input``, ``hint`` and ``solution``, which the notebooks call. The task itself, and how an answer
is judged, is ``task.Task``'s."""

import json
import os
from dataclasses import replace
from importlib import resources

from ..recorder.calling import copy_args, one_thread
from .generated import smallest_failing
from .verdict import PREDICT_TRIES, Verdict, tried_pairs


def grading() -> bool:
    """True inside the batch grader, where checks in the notebook must do nothing (and cannot hang)."""
    return os.environ.get("NEXTTOKEN_GRADING") == "1"


class Question:
    """What a notebook's ``chNN.qN`` is: one task, and one learner's tries at it (how many checks failed,
    the input the last one failed on). ``check``, ``failing_input``, ``hint`` and ``solution`` are what the
    notebooks call; the task's declaration is read through it (``q1.function``, ``q1.cases()``)."""

    def __init__(self, task):  # a task.Task
        self.task = task
        self._tries = 0  # failed checks so far (a predict task reveals after PREDICT_TRIES)
        self._failing: int | None = None  # index of the test input the last check failed on
        self._failing_args: tuple | None = None  # or the input hypothesis shrank it to

    def __getattr__(self, name):
        if name == "task":  # not set yet: copying or unpickling an instance
            raise AttributeError(name)
        return getattr(self.task, name)

    def __repr__(self) -> str:
        return f"Question({self.task!r})"

    def check(self, fn) -> None:
        """Test your function now and say what looks wrong, if anything."""
        task = self.task
        if grading():
            return
        if not callable(fn):
            print(f"❌ {task.name}: pass your function itself, e.g. {task.name}.check({task.function})")
            return
        with one_thread():
            verdict = self._checked(fn, revealing=self._tries >= PREDICT_TRIES)
        if verdict.status == "passed":
            print(f"✅ {task.name} ({task.title}): correct, {verdict.text()}.")
            return
        reason = verdict.text()
        if verdict.status != "not_implemented":
            self._tries += 1
        if task.kind == "predict" and verdict.status == "failed" and self._tries <= PREDICT_TRIES:
            reason += f"\n   try {self._tries} of {PREDICT_TRIES}" + (
                " (the next failed check shows the expected answer)" if self._tries == PREDICT_TRIES else "")
        print(f"❌ {task.name} ({task.title}): {reason}")

    def _checked(self, fn, revealing: bool) -> Verdict:
        """The verdict on ``fn``'s outcomes on the task's inputs; the failing input is kept for
        ``failing_input``, shrunk by hypothesis when it is a generated one."""
        task = self.task
        cases = task.cases()
        outcomes = task.run(fn, cases)
        verdict = task.verdict(outcomes, cases, revealing=revealing)
        self._failing, self._failing_args = verdict.index, None
        if verdict.status != "passed" and verdict.index is not None \
                and verdict.index >= len(cases) - task.n_generated():
            verdict = self._shrunk(fn, tried_pairs(cases, outcomes), revealing) or verdict
        return verdict

    def _shrunk(self, fn, tried, revealing: bool) -> Verdict | None:
        """The feedback on the smallest failing input hypothesis finds from the generated ones (it is then
        what ``failing_input()`` gives), or None. Only in ``check()``: shrinking calls the learner's
        function again, which the grader's judging half cannot do."""
        task = self.task

        def fails(params):
            case = [task.generated.build(params)]
            return task.verdict(task.run(fn, case), case).status != "passed"

        params = smallest_failing(task.generated, fails)
        if params is None:
            return None
        args = [task.generated.build(params)]
        verdict = task.verdict(task.run(fn, args), args, tried, revealing=revealing)
        if verdict.status == "passed":
            return None
        self._failing_args = args[0]
        return replace(verdict, evidence=verdict.evidence + (
            "(hypothesis shrank the failing test input to the smallest one it could find: this one)",))

    def failing_input(self):
        """The arguments of the test your last ``check`` failed on (fresh copies), to call your function."""
        task = self.task
        if self._failing_args is not None:
            return copy_args(self._failing_args)
        if self._failing is None:
            print(f"{task.name}: no failing test input recorded; run {task.name}.check({task.function}) first")
            return None
        return copy_args(task.cases()[self._failing])

    def hint(self, level: int = 1):
        """A nudge; ``hint(2)`` and ``hint(3)`` say more. None of them is the code: see ``solution()``."""
        name, hints = self.task.name, self.task.hints
        if not hints:
            print(f"💡 {name}: no hint for this one; {name}.solution() shows an answer")
            return
        level = max(1, min(int(level), len(hints)))
        more = (f" (more: {name}.hint({level + 1}))" if level < len(hints)
                else f" (that is the last hint; {name}.solution() shows an answer)")
        print(f"💡 Hint {level} for {name}: {hints[level - 1]}{more}")

    def solution(self):
        """The solution notebook's code for this task (solutions/<chapter>.ipynb), where this build has it."""
        name = self.task.name
        if not solutions_shipped():
            print(f"🔒 {name}: the solutions are withheld in this build of the course (a student build for "
                  f"a graded class); {name}.hint() still gives nudges, and your instructor has the answers")
            return
        print(f"Solution for {name} (from solutions/{self.task.chapter}.ipynb):\n{solution_source(self.task)}")


def solutions_shipped() -> bool:
    """False in a student build of the package (scripts/build_student_package.py), which leaves them out."""
    return resources.files("nexttoken.exercises").joinpath("solutions.json").is_file()


def solution_source(task) -> str:
    """The code of the cell that defines ``task.function`` in the solution notebook, as shipped in the
    package by scripts/make_exercises.py (so that Colab, which has no solutions/ folder, shows it too)."""
    text = resources.files("nexttoken.exercises").joinpath("solutions.json").read_text()
    return json.loads(text)[task.chapter][task.function]
