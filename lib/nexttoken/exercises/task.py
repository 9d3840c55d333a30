"""One exercise task: test inputs, a reference answer, and explanations of likely mistakes."""

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..model import Decoder


class Mistake(Exception):
    """A wrong answer, explained in a learner's words."""


def describe(value) -> str:
    """A short, readable description of a test input."""
    if isinstance(value, Decoder):
        c = value.config
        return f"a small random Decoder (vocab {c.vocab_size}, d_model {c.d_model}, {c.n_layers} layers)"
    if isinstance(value, torch.Tensor):
        if value.numel() <= 12:
            return f"tensor({value.double().round(decimals=3).tolist() if value.is_floating_point() else value.tolist()})"
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return repr(value)


def plain(value):
    """The learner's output as plain data (tensors, numbers, lists) that can leave their kernel."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().as_subclass(torch.Tensor).clone()
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return f"<an object of type {type(value).__name__}>"


def copy_args(args):
    """Fresh copies of the inputs, so a function that edits its arguments in place breaks nothing."""
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def compare_tensors(expected: torch.Tensor, got, what: str = "your output", atol: float = 1e-4):
    """Raise a Mistake if ``got`` is not a tensor like ``expected`` (type, shape, dtype kind, values)."""
    if not isinstance(got, torch.Tensor):
        raise Mistake(f"{what} should be a torch.Tensor, but it is {describe(got)}")
    if tuple(got.shape) != tuple(expected.shape):
        raise Mistake(f"{what} has the wrong shape: expected {tuple(expected.shape)}, got {tuple(got.shape)}")
    if expected.dtype == torch.bool and got.dtype != torch.bool:
        raise Mistake(f"{what} should be a bool tensor (True/False), got dtype {got.dtype}")
    if expected.dtype.is_floating_point:
        if not got.dtype.is_floating_point:
            raise Mistake(f"{what} should hold floats, got dtype {got.dtype}")
        ok = torch.allclose(got.double(), expected.double(), atol=atol, rtol=1e-4, equal_nan=True)
    else:
        ok = torch.equal(got.long() if got.dtype != torch.bool else got, expected.long()
                         if expected.dtype != torch.bool else expected)
    if not ok:
        raise Mistake(f"{what} has the right shape but wrong values")


@dataclass
class Task:
    name: str  # "q1"
    function: str  # the name the learner's function must have in the notebook
    title: str
    cases: Callable[[], list[tuple]]  # test inputs, rebuilt identically on every call (seeded)
    reference: Callable  # the right answer (the library's own implementation)
    diagnose: Callable = None  # (args, expected, got) -> None, raising Mistake with an explanation
    hint_text: str = ""
    solution_text: str = ""
    points: int = 1
    chapter: str = field(default="", repr=False)

    def run(self, fn) -> list[tuple[str, object]]:
        """Call ``fn`` on every test input: a list of ("ok", output), ("not_implemented", ""),
        or ("error", message). Runs where the learner's code runs."""
        outcomes = []
        for args in self.cases():
            try:
                outcomes.append(("ok", plain(fn(*copy_args(args)))))
            except NotImplementedError:
                outcomes.append(("not_implemented", ""))
                break
            except Exception as exc:  # the learner's bug, reported back to them
                outcomes.append(("error", f"{type(exc).__name__}: {exc}"))
                break
        return outcomes

    def evaluate(self, outcomes) -> tuple[str, str]:
        """(status, reason) for outcomes from ``run``, judged against the reference on fresh inputs."""
        cases = self.cases()
        if len(outcomes) == 0 or not isinstance(outcomes, list):
            return "error", "no results were recorded for this function"
        for args, outcome in zip(cases, outcomes):
            kind, value = outcome
            inputs = ", ".join(describe(a) for a in args)
            if kind == "missing":
                return "missing", str(value)
            if kind == "not_implemented":
                return "not_implemented", f"{self.function} still raises NotImplementedError: write your code there"
            if kind == "error":
                return "error", f"{self.function}({inputs}) raised {value}"
            expected = self.reference(*copy_args(args))
            try:
                compare_tensors(expected, value)
            except Mistake as generic:
                try:  # name the likely mistake, when the task knows this wrong answer
                    if self.diagnose is not None:
                        self.diagnose(args, expected, value)
                    raise generic
                except Mistake as mistake:
                    return "failed", f"{mistake}. Input: {self.function}({inputs})"
        if len(outcomes) < len(cases):
            return "error", "fewer results than test inputs were recorded"
        return "passed", f"all {len(cases)} tests passed"

    def check(self, fn) -> None:
        """Test your function now and say what looks wrong, if anything."""
        if not callable(fn):
            print(f"❌ {self.name}: pass your function itself, e.g. {self.name}.check({self.function})")
            return
        status, reason = self.evaluate(self.run(fn))
        if status == "passed":
            print(f"✅ {self.name} ({self.title}): correct, {reason}.")
        else:
            print(f"❌ {self.name} ({self.title}): {reason}")

    def hint(self):
        print(f"💡 Hint for {self.name}: {self.hint_text}")

    def solution(self):
        print(f"Solution for {self.name}:\n{self.solution_text}")
