"""One exercise task, declared (``Task``): test inputs, a reference answer, rules and explanations of likely
mistakes; and its judgement (``Task.verdict``).

A task is judged in two halves, so that the batch grader can keep them in different processes:

- ``run(fn)`` calls the learner's function on every test input, where the learner's code runs, and
  keeps only plain data: each output, or the error it raised, or the fact that it changed an input
  (``calling.run_on``; in the grader, the same code runs inside the sandbox on inputs sent to it).
- ``verdict(outcomes)`` compares those outputs with the reference on fresh copies of the same
  (seeded) inputs and explains the first failure: a known mistake by name, else what differs, as a
  ``Verdict`` (status, summary, evidence) whose text the notebook prints and the grader's CSV holds.
  It never raises: anything unexpected becomes the task's error message.

The rest is by role: ``calling`` (the first half, which is all the grader's sandbox has), ``watches``
(checks of how), ``verdict`` (what judging says), ``question`` (a notebook's ``chNN.qN``: a task and one
learner's tries at it; the chapters import ``Question`` from here), ``feedback`` (describing and comparing
values), ``generated`` (hypothesis's inputs).
"""

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..recorder.calling import copy_args, one_thread, run_on
from . import diagnosis
from .feedback import compare, describe, hidden_input, matches, unrevealed
from .generated import Generated
from .question import Question  # noqa: F401 (the chapters import it from here)
from .verdict import HELD_OUT, PREDICT_TRIES, Verdict, tried_pairs


class Mistake(Exception):
    """A wrong answer, explained in a learner's words."""


@dataclass
class Known:
    """A likely mistake, recognised by its output: ``wrong`` takes the task's inputs and returns what
    that mistake returns. When a learner's output equals it, feedback names the mistake."""
    message: str
    wrong: Callable


def shortcut_rule(call: str, named: str | None = None, what: str = "it", doing: str = "rebuilding") -> dict[str, str]:
    """The one rule of every task that rebuilds a library function, as ``Task(forbid=...)``: while the
    learner's function runs, ``call`` raises an error that quotes this sentence, and the task's text states
    it word for word ("Do not call `nexttoken.generate` here: it is what you are rebuilding";
    tests/exercises/test_exercises.py checks that the text holds it)."""
    return {call: f"do not call {named or call} here: {what} is what you are {doing}"}


KINDS = ("write", "predict", "debug", "empirical", "open")


@dataclass(frozen=True, eq=False)
class Task:
    """One exercise, declared: what the learner writes (the function's name, its arguments, as the
    reference's), the rules, the test inputs, the right answer and the known mistakes. It holds no
    learner's state (that is ``Question``'s); ``verdict`` judges one answer's recorded outcomes."""
    name: str  # "q1"
    function: str  # the name the learner's function must have in the notebook
    title: str
    cases: Callable[[], list[tuple]]  # test inputs, smallest first, rebuilt identically on every call (seeded)
    reference: Callable  # the right answer (the library's own implementation where there is one)
    known: list[Known] = field(default_factory=list)  # mistakes recognised by their output
    diagnose: Callable | None = None  # (args, expected, got) -> None, or raises Mistake (shape rules etc.)
    hints: tuple[str, ...] = ()  # nudges, vaguest first; none of them is the code
    chapter: str = ""
    points: int = 1
    atol: float = 1e-4
    # Calls the task's text rules out, each with the rule as the text says it (see ``calling.forbidding``).
    forbid: dict[str, str] = field(default_factory=dict)
    # A check of *how*: a context manager that, given a test input, instruments it while the learner's
    # function runs and yields a list, to which it adds what that function did wrong (read on exit).
    watch: Callable | None = None
    # The bulk of the inputs, made by hypothesis; ``cases`` then holds the named ones, which come first.
    generated: Generated | None = None
    # What the task asks: "write" a function the chapter builds, "predict" an outcome before running it,
    # "debug" a given broken function, "empirical" (a measured result, judged with a stated tolerance),
    # "open" (any answer with the asked-for property).
    kind: str = "write"
    # Instead of comparing with ``reference``: (args, output) -> None if the output is right, else
    # (what is wrong, evidence). For tasks with many right answers ("empirical", "open").
    verify: Callable | None = None
    # (args, the error's text) -> a message naming the mistake that raises it, or None: an error that says
    # only what broke (a shape mismatch deep in torch) then says why too.
    errors: Callable | None = None
    # "module:qualname" of the library functions the answer rebuilds (the reference is, or wraps, one of
    # them): the grader's sandbox watches for calls to them and reports them (the CSV's library_calls).
    rebuilds: tuple[str, ...] = ()
    # args -> diagnosis.Source: what the right answer is computed from (the logits it normalises, the
    # probabilities whose logs it adds), so that an unlisted mistake can be named from them too (a sigmoid
    # of the logits, another position's); without it, the diagnosis works from the right answer alone.
    source: Callable | None = None
    _named: Callable | None = field(default=None, init=False, repr=False)  # ``cases`` as declared

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Task.kind must be one of {KINDS}, got {self.kind!r}")
        if self.generated is not None:  # the declared cases come first, then hypothesis's
            named, generated = self.cases, self.generated
            generated.key = f"{self.chapter}.{self.name}"
            object.__setattr__(self, "_named", named)
            object.__setattr__(self, "cases", lambda: named() + generated.cases())

    def named_cases(self) -> list[tuple]:
        """The hand-picked test inputs only (all of them when the task has no generated ones)."""
        return (self._named or self.cases)()

    def n_generated(self) -> int:
        """How many of ``cases()`` hypothesis made (they come last)."""
        return len(self.generated.params()) if self.generated is not None else 0

    @property
    def arg_names(self) -> list[str]:
        try:
            return list(inspect.signature(self.reference).parameters)
        except (TypeError, ValueError):
            return []

    def run(self, fn, cases=None) -> list[tuple[str, object]]:
        """Call ``fn`` on every test input (the task's own, or ``cases``): a list of ("ok", output),
        ("not_implemented", ""), ("changed_input", message) or ("error", message). Runs where the
        learner's code runs."""
        return run_on(fn, self.cases() if cases is None else cases, self.forbid, self.watch, self.arg_names)

    def call_text(self, args) -> str:
        """The call as feedback shows it, each input after its argument's name: f(x=..., n=3)."""
        names = self.arg_names[:len(args)]  # a reference may take more (a switch its known mistakes use)
        names = names if len(names) == len(args) else [""] * len(args)
        return f"{self.function}({', '.join((f'{n}=' if n else '') + describe(a) for n, a in zip(names, args))})"

    def _wrong_output(self, args, value, tried, revealing: bool) -> Verdict | None:
        """None if ``value`` is right for ``args``; else what a learner is told. ``tried`` is every (input,
        output) pair of this answer, so that a known mistake is named only when it explains all of them.
        A prediction's feedback says how it is off, not the right answer, unless ``revealing``."""
        if self.verify is not None:  # many right answers: the property is checked, not one output
            problem = self.verify(copy_args(args), value)
            if problem is None:
                return None
            summary, evidence = problem
            return self._failed(args, self._known_mistake(tried) or summary, evidence)
        expected = self.reference(*copy_args(args))
        difference = compare(expected, value, atol=self.atol)
        if difference is None:
            return None
        message = None
        hidden = self.kind == "predict" and not revealing  # no words that show the answer
        if difference.kind != "type" or not matches(expected, value):  # a dtype slip alone is named as such
            # how the whole output was made (a loop's steps, a layout's boundary) comes before a rule's fact
            message = self._known_mistake(tried) \
                or self._named_transformation(args, expected, value, tried, leading=True, hidden=hidden) \
                or self._diagnosis(args, expected, value)
            if message is None:
                message = self._named_transformation(args, expected, value, tried, hidden=hidden)
                if message is not None and difference.kind == "shape" and not hidden:  # the shapes, then
                    return self._failed(args, message, f"shape: expected {tuple(expected.shape)}, got "
                                                       f"{tuple(value.shape)}\n   {difference.evidence}".rstrip())
        if self.kind == "predict" and not revealing:  # nor the expected shape, which is part of the answer
            return self._failed(args, message or difference.summary, unrevealed(expected, value), hidden=True)
        return self._failed(args, message or difference.summary + difference.answer, difference.evidence)

    def _failed(self, args, headline: str, evidence: str, hidden: bool = False) -> Verdict:
        """A wrong output: the headline, the input, the evidence, and how to call the function on it again."""
        lines = [f"input:    {self.call_text(args)}"] + ([evidence] if evidence else [])
        if hidden:
            lines.append(f"(the expected answer is not shown: {self.name}.check shows it after {PREDICT_TRIES} "
                         f"failed tries; {self.name}.hint() gives a nudge)")
        lines.append(f"reproduce: args = {self.name}.failing_input(); {self.function}(*args)")
        return Verdict("failed", headline, tuple(lines))

    def _known_mistake(self, tried) -> str | None:
        """The message of the first known mistake whose output equals the answer's on every input tried
        (where that mistake gives an output at all: logits[:, -2] has none for T = 1). One input that it
        explains is not enough: two different mistakes can agree on one."""
        for known in self.known:
            explained = 0
            for args, value in tried:
                try:
                    wrong = known.wrong(*copy_args(args))
                except Exception:
                    continue
                if not matches(wrong, value):
                    break
                explained += 1
            else:
                if explained:
                    return known.message
        return None

    def _diagnosis(self, args, expected, value) -> str | None:
        """The message of the first shape or value rule of ``diagnose`` that applies."""
        if self.diagnose is None:
            return None
        try:
            self.diagnose(args, expected, value)
        except Mistake as mistake:
            return str(mistake)
        except Exception:  # a rule that does not apply to this output's type or shape
            pass
        return None

    def _named_transformation(self, args, expected, value, tried, leading=False, hidden=False) -> str | None:
        """What the output is, in the shared vocabulary (``diagnosis``): the first transformation of the right
        answer that explains every output tried (each is right, or that transformation of its right answer);
        else a fact about the output (its rows do not sum to 1), or None. ``leading``: only the findings told
        before the task's own rules; ``hidden``: only words that do not show the answer (a prediction's)."""
        if self.atol < 1e-4:  # the diagnosis matches within 1e-4: coarser than this task's own tolerance
            return None
        if leading and not diagnosis.may_lead(expected):  # before building a source, which can cost a loop
            return None
        try:
            candidates = [found for found in diagnosis.findings(expected, value, self._source(args), leading)
                          if (found.leading or not leading) and (found.safe is not None or not hidden)
                          and not found.weak]
            if leading and not candidates:
                return None
            if not candidates and not isinstance(expected, str):
                return None if hidden else diagnosis.properties(expected, value, self._source(args))
            # the other inputs' right answers, computed only now: a reference can be a whole generation loop
            rights = [(self.reference(*copy_args(a)), got, a) for a, got in tried]
            others = [(right, got, self._source(a)) for right, got, a in rights
                      if compare(right, got, atol=self.atol) is not None]
            for found in candidates:
                if all(any(again.family == found.family for again in diagnosis.findings(*other, leading=leading))
                       for other in others):
                    return found.safe if hidden else found.message
            if leading:
                return None
            found = diagnosis.across([(right, got) for right, got, _ in rights])
            if hidden:
                return found.safe if found else None
            return found.message if found else diagnosis.properties(expected, value, self._source(args))
        except Exception:  # a transformation that does not apply to this output
            return None

    def _source(self, args):
        return self.source(*copy_args(args)) if self.source is not None else None

    def _error_diagnosis(self, args, error) -> str | None:
        """What an error the learner's call raised means: the task's own rule, else the shared one's words."""
        try:
            own = self.errors(args, str(error)) if self.errors is not None else None
        except Exception:  # a rule that does not apply to these inputs
            own = None
        return own or diagnosis.torch_error(str(error))

    def verdict(self, outcomes, cases=None, tried=(), hidden=None, revealing: bool = False) -> Verdict:
        """What is wrong with the answer whose ``outcomes`` were recorded on ``cases`` (the task's own by
        default), or that it passed. Never raises. ``tried`` adds (input, output) pairs that a known mistake
        must explain too; ``hidden`` is {index: name} of the held-out inputs among them; ``revealing``: a
        prediction's feedback may show the expected answer (its tries are used up)."""
        try:
            with one_thread():
                return self._first_failure(outcomes, self.cases() if cases is None else cases, list(tried),
                                           hidden or {}, revealing)
        except Exception as exc:  # a bug of the check itself must not cost other tasks anything
            return Verdict("error", f"the check could not judge this answer ({type(exc).__name__}: {exc})"[:300])

    def evaluate(self, outcomes, cases=None, hidden=None) -> tuple[str, str]:
        """(status, reason) for outcomes recorded on ``cases`` (the task's own by default; ``hidden`` is
        {index: name} of the held-out ones among them), judged against the reference on fresh inputs."""
        verdict = self.verdict(outcomes, cases, hidden=hidden)
        return verdict.status, verdict.text()

    def _first_failure(self, outcomes, cases, tried, hidden, revealing) -> Verdict:
        """Each outcome against its input, in order: the first that is wrong decides."""
        if not isinstance(outcomes, list) or len(outcomes) == 0:
            return Verdict("error", "no results were recorded for this function")
        tried = tried_pairs(cases, outcomes) + tried
        for index, (args, outcome) in enumerate(zip(cases, outcomes)):
            kind, value = outcome
            if index in hidden:  # nothing of the input, the expected output or the learner's own text
                verdict = self._held_out_verdict(kind, value, args)
                if verdict is not None:
                    where = hidden_input(sorted(hidden).index(index), len(hidden))
                    return Verdict(verdict[0], f"{self.function}(...) on {where}: {verdict[1]}", index=index)
                continue
            verdict = self._visible_verdict(kind, value, args, index, tried, revealing)
            if verdict is not None:
                return verdict
        if len(outcomes) < len(cases):
            return Verdict("error", "fewer results than test inputs were recorded")
        held = f" ({len(hidden)} of them held out)" if hidden else ""
        return Verdict("passed", f"all {len(cases)} tests passed{held}")

    def _visible_verdict(self, kind, value, args, index, tried, revealing) -> Verdict | None:
        """None if the outcome on a visible input is right; else what a learner is told, with the input."""
        if kind == "missing":
            return Verdict("missing", str(value))
        if kind == "not_implemented":
            return Verdict("not_implemented",
                           f"{self.function} still raises NotImplementedError: write your code there")
        call = self.call_text(args)
        if kind == "error":
            why = self._error_diagnosis(args, value)
            raised = f"{call} raised {value}"
            return Verdict("error", why, (raised,), index) if why else Verdict("error", raised, index=index)
        if kind in ("changed_input", "broke_rule"):
            return Verdict("failed", f"{value}.", (f"input:    {call}",), index)
        if kind != "ok":
            return Verdict("error", f"an unknown outcome {kind!r} was recorded")
        wrong = self._wrong_output(args, value, tried, revealing)
        return None if wrong is None else replace(wrong, index=index)

    def _held_out_verdict(self, kind, value, args) -> tuple[str, str] | None:
        """None if a held-out input's outcome is right; else (status, what went wrong) from a fixed
        vocabulary of the grader's (``HELD_OUT``). The outcome's kind, text and values are the learner's
        process's, which holds the held-out inputs while it runs them: none of its text is repeated (not
        an exception's type name either, which its code names freely), and no known mistake is named (which
        one would be the learner's choice too)."""
        if kind != "ok":
            return HELD_OUT.get(kind, HELD_OUT["unknown"])
        if self.verify is not None:
            return None if self.verify(copy_args(args), value) is None else HELD_OUT["wrong"]
        difference = compare(self.reference(*copy_args(args)), value, atol=self.atol)
        if difference is None:
            return None
        return HELD_OUT.get(f"wrong {difference.kind}", HELD_OUT["wrong"])
