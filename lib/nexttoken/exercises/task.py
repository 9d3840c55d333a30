"""One exercise task: test inputs, a reference answer, and explanations of likely mistakes.

A task is judged in two halves, so that the batch grader can keep them in different processes:

- ``run(fn)`` calls the learner's function on every test input, where the learner's code runs, and
  keeps only plain data: each output, or the error it raised, or the fact that it changed an input.
- ``evaluate(outcomes)`` compares those outputs with the reference on fresh copies of the same
  (seeded) inputs and explains the first failure: a known mistake by name, else what differs.
  It never raises: anything unexpected becomes the task's error message.
"""

import contextlib
import copy
import dataclasses
import inspect
import io
import json
import numbers
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources

import torch
from torch.overrides import TorchFunctionMode

from ..grading.wire import MAX_LIST
from ..model import Decoder

SMALL = 24  # outputs with at most this many entries are printed in full in feedback
SMALL_INPUT = 12  # inputs, likewise (longer ones are described by dtype and shape)


class Mistake(Exception):
    """A wrong answer, explained in a learner's words."""


@dataclass
class Known:
    """A likely mistake, recognised by its output: ``wrong`` takes the task's inputs and returns what
    that mistake returns. When a learner's output equals it, feedback names the mistake."""
    message: str
    wrong: Callable


def describe(value) -> str:
    """A short, readable description of a test input or an output."""
    if isinstance(value, Decoder):
        c = value.config
        mode = f", dropout {c.dropout}, in training mode" if value.training and c.dropout else ""
        return (f"a small random Decoder (vocab {c.vocab_size}, context {c.context_length}, "
                f"d_model {c.d_model}, {counted(c.n_layers, 'layer')}{mode})")
    if isinstance(value, torch.Tensor):
        if value.numel() <= SMALL_INPUT:
            return show(value)
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    if isinstance(value, torch.Generator):
        return "a torch.Generator"
    if dataclasses.is_dataclass(value):
        return repr(value)  # a config is shown whole: the field that matters may be the last one
    if isinstance(value, (list, tuple)) and len(value) <= 6:
        return "(" + ", ".join(describe(v) for v in value) + ")"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _round(values):
    """Floats to 4 decimals, or 4 significant digits when smaller (a tiny probability is not 0)."""
    if isinstance(values, list):
        return [_round(v) for v in values]
    return round(values, 4) if abs(values) >= 1e-3 or values == 0 else float(f"{values:.4g}")


def show(t: torch.Tensor) -> str:
    """A small tensor in full, floats rounded (see _round), with its dtype when it is not the default."""
    values = _round(t.double().tolist()) if t.is_floating_point() else t.tolist()
    suffix = "" if t.dtype in (torch.float32, torch.int64, torch.bool) else f", dtype={t.dtype}"
    return f"tensor({values}{suffix})"


def plain(value):
    """The learner's output as plain data (tensors, numbers, lists) that can leave their process."""
    if isinstance(value, torch.Tensor):
        return value.detach().as_subclass(torch.Tensor).clone()
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, numbers.Integral):  # numpy.int64 and friends are ints too
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, (list, tuple)) and len(value) <= MAX_LIST:  # the grader's limit (wire.py)
        return [plain(v) for v in value]
    return f"<an object of type {type(value).__name__}>"


def copy_args(args):
    """Fresh copies of the tensor inputs and random generators, so that nothing a call does to them
    (changing a tensor, drawing from a generator) reaches the next call."""
    def fresh(a):
        if isinstance(a, torch.Tensor):
            return a.clone()
        if isinstance(a, torch.Generator):
            g = torch.Generator(device=a.device)
            g.set_state(a.get_state())
            return g
        return a
    return tuple(fresh(a) for a in args)


def _kind(dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "a bool tensor"
    if dtype.is_floating_point:
        return f"a float tensor ({dtype})"
    return f"an integer tensor ({dtype})"


def counted(k: int, noun: str, plural: str | None = None) -> str:
    """"1 row", "3 rows", "1 forward pass", "2 forward passes": a count with its noun in the right number."""
    return f"{k} {noun if k == 1 else plural or noun + 's'}"


def tokens(k: int) -> str:
    """"1 token", "3 tokens"."""
    return counted(k, "token")


def first_difference(expected: torch.Tensor, got: torch.Tensor, atol: float = 1e-4) -> str:
    """Where two tensors of the same shape first differ: that row of both, a few values either side of
    the difference, and how many entries differ in all."""
    e, g = expected.double(), got.double()
    if expected.is_floating_point():
        close = torch.isclose(g, e, atol=atol, rtol=1e-4, equal_nan=True)
    else:
        close = e == g
    where = (~close).nonzero()
    if len(where) == 0 or expected.dim() == 0:
        return ""
    index = [int(i) for i in where[0]]
    row, col = tuple(index[:-1]), index[-1]
    lo, hi = max(0, col - 3), min(expected.shape[-1], col + 4)
    fmt = (lambda x: f"{x:.4g}") if expected.is_floating_point() else (lambda x: f"{int(x)}")

    def around(t):
        values = ", ".join(fmt(x) for x in t[row][lo:hi].tolist())
        return f"[{'..., ' if lo else ''}{values}{', ...' if hi < t.shape[-1] else ''}]"
    return (f"first difference at index {index}: expected {fmt(e[tuple(index)].item())}, "
            f"got {fmt(g[tuple(index)].item())}; {len(where)} of {expected.numel()} "
            f"{'entry differs' if expected.numel() == 1 else 'entries differ'}\n"
            f"   in row {list(row)}, entries {lo} to {hi - 1}:\n"
            f"   expected {around(e)}\n"
            f"   got      {around(g)}")


def side_by_side(expected, got) -> str:
    """Expected and got, in full when small."""
    def one(v):
        if isinstance(v, torch.Tensor):
            return show(v) if v.numel() <= SMALL else f"a {v.dtype} tensor of shape {tuple(v.shape)}"
        return describe(v)
    return f"expected: {one(expected)}\n   got:      {one(got)}"


def compare(expected, got, what: str = "your output", atol: float = 1e-4) -> tuple[str, str] | None:
    """None if ``got`` is right; else (what is wrong, the evidence: expected vs got or first difference)."""
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return (f"{what} should be a tuple of {len(expected)} values, but it is {describe(got)}",
                    "")
        for i, (e, g) in enumerate(zip(expected, got)):
            problem = compare(e, g, f"element {i} of {what}", atol)
            if problem:
                return problem
        return None
    if isinstance(expected, bool) or not isinstance(expected, (int, float, torch.Tensor)):
        raise TypeError(f"the reference returned {type(expected).__name__}: no comparison for it")
    if isinstance(expected, (int, float)):
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if isinstance(expected, int):  # any integer type will do (int, numpy.int64, a 0-d int tensor)
            if isinstance(got, bool) or not isinstance(got, numbers.Integral):
                return (f"{what} should be an integer (a count is a whole number, int), but it is "
                        f"{describe(got)}", "")
            if got != expected:
                return f"{what} is wrong", f"expected: {expected}\n   got:      {got}"
            return None
        if isinstance(got, bool) or not isinstance(got, numbers.Real):
            return f"{what} should be a number, but it is {describe(got)}", ""
        if abs(got - expected) > atol + 1e-4 * abs(expected):
            return f"{what} is wrong", f"expected: {expected:.4f}\n   got:      {got:.4f}"
        return None
    if not isinstance(got, torch.Tensor):
        return f"{what} should be a torch.Tensor, but it is {describe(got)}", ""
    if got.device.type != "cpu":
        return f"{what} is on {got.device}, but the inputs are on the CPU: keep it there", ""
    if tuple(got.shape) != tuple(expected.shape):
        return (f"{what} has the wrong shape: expected {tuple(expected.shape)}, got {tuple(got.shape)}",
                side_by_side(expected, got) if max(got.numel(), expected.numel()) <= SMALL else "")
    if got.dtype != expected.dtype:
        if expected.dtype == torch.int64:
            why = "token ids are int64 (torch.long): indexing, embeddings and torch.cat expect it"
        elif expected.dtype == torch.bool:
            why = "a mask is a bool tensor (True/False), so that ~mask and masked_fill work on it"
        else:
            why = "keep the dtype of the inputs (did a Python float, .double() or an int tensor slip in?)"
        return (f"{what} should be {_kind(expected.dtype)}, but it is {_kind(got.dtype)}: {why}",
                side_by_side(expected, got) if got.numel() <= SMALL else "")
    if expected.is_floating_point():
        ok = torch.allclose(got.double(), expected.double(), atol=atol, rtol=1e-4, equal_nan=True)
    else:
        ok = torch.equal(got, expected)
    if ok:
        return None
    if torch.isnan(got.double()).any() and not torch.isnan(expected.double()).any():
        summary = f"{what} holds NaN where the right answer has numbers"
    else:
        summary = f"{what} has the right shape and dtype but wrong values"
    evidence = side_by_side(expected, got) if got.numel() <= SMALL else first_difference(expected, got, atol)
    return summary, evidence


def _matches(wrong_output, got) -> bool:
    """Loosely equal (values only), for recognising a known mistake."""
    try:
        if isinstance(wrong_output, torch.Tensor) and isinstance(got, torch.Tensor):
            if wrong_output.shape != got.shape:
                return False
            return bool(torch.allclose(got.double(), wrong_output.double(), atol=1e-4, rtol=1e-4, equal_nan=True))
        if isinstance(wrong_output, (tuple, list)) and isinstance(got, (tuple, list)):
            return len(wrong_output) == len(got) and all(_matches(w, g) for w, g in zip(wrong_output, got))
        if isinstance(wrong_output, (int, float)) and isinstance(got, (int, float)) and not isinstance(got, bool):
            return abs(wrong_output - got) <= 1e-6 * max(1.0, abs(wrong_output))
    except Exception:
        return False
    return False


def hidden_input(name: str) -> str:
    """How feedback names a held-out input without showing it."""
    return f"the held-out test \"{name}\" (held-out inputs and expected outputs are not shown)"


class HeldOutMissing(RuntimeError):
    """Held-out cases asked for in a build of the package that leaves them out."""


RULE = "forbidden call: "  # how a forbidden call's error begins (Task.run recognises it by this)


class _NoSoftmax(TorchFunctionMode):
    """Inside it, every softmax of torch (torch.softmax, Tensor.softmax, F.softmax, however imported)
    raises ``message``: a task that asks for a softmax by hand must not get it from torch."""

    def __init__(self, message: str):
        super().__init__()
        self.message = message

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("softmax", "_softmax", "special_softmax"):
            raise RuntimeError(self.message)
        return func(*args, **(kwargs or {}))


def _raising_code(message: str):
    """The code of a function that raises RuntimeError(message) whatever it is given. It is put in place
    of a library function's own code, so that every name bound to that function (``nexttoken.generate``,
    ``from nexttoken import generate``, ...) raises while a learner's function runs."""
    namespace: dict = {}
    exec(f"def forbidden(*args, **kwargs):\n    raise RuntimeError({message!r})", namespace)
    return namespace["forbidden"].__code__


@contextlib.contextmanager
def forbidding(rules: dict[str, str], args):
    """While inside, the calls named in ``rules`` raise an error that quotes the task's rule:
    "model(...)" (the Decoders among ``args``), "torch.softmax", "nexttoken.generate", "Decoder(...)"."""
    undo = []
    try:
        for call, rule in rules.items():
            message = f"{RULE}{call} was called, but the task says: {rule}"
            if call == "model(...)":
                for model in (a for a in args if isinstance(a, Decoder)):
                    def refuse(*_, **__):
                        raise RuntimeError(message)
                    for name in ("forward", "forward_unchecked", "run"):  # model(x), model.forward(x), ...: every door in
                        object.__setattr__(model, name, refuse)
                        undo.append(lambda m=model, n=name: object.__delattr__(m, n))
            elif call == "torch.softmax":
                mode = _NoSoftmax(message)
                mode.__enter__()
                undo.append(lambda m=mode: m.__exit__(None, None, None))
            elif call == "nexttoken.generate":
                function = inspect.unwrap(sys.modules["nexttoken.generate"].generate)
                code, function.__code__ = function.__code__, _raising_code(message)
                undo.append(lambda f=function, c=code: setattr(f, "__code__", c))
            elif call == "Decoder(...)":
                def refuse_init(*_, **__):
                    raise RuntimeError(message)
                init, Decoder.__init__ = Decoder.__init__, refuse_init
                undo.append(lambda i=init: setattr(Decoder, "__init__", i))
            else:
                raise ValueError(f"no way to forbid {call!r}")
        yield
    finally:
        for step in reversed(undo):
            step()


@dataclass
class Generated:
    """The bulk of a task's test inputs, made by hypothesis, after its hand-picked named cases.

    ``strategy()`` is a hypothesis strategy of plain parameters (seeds, lengths, counts) and
    ``build(params)`` turns one example into the task's arguments. The examples are drawn by
    scripts/make_cases.py (``draw_examples``: derandomized, so with a fixed seed) and stored in
    exercises/cases.json, the task's example database: every learner, every run and both halves of the
    grader read the same ones. When an answer fails one of them, ``check()`` asks hypothesis for the
    smallest parameters that still fail (its shrinking) and shows that input.
    """
    strategy: Callable  # () -> a hypothesis strategy (hypothesis is imported only to draw or shrink)
    build: Callable  # params -> the task's arguments (a tuple)
    count: int = 20  # how many examples scripts/make_cases.py stores
    key: str = ""  # "ch05.q2", set by the Task
    _params: list | None = field(default=None, repr=False)
    _built: list | None = field(default=None, repr=False)

    def params(self) -> list:
        if self._params is None:
            stored = json.loads(resources.files("nexttoken.exercises").joinpath("cases.json").read_text())
            if self.key not in stored:
                raise KeyError(f"no stored examples for {self.key}: run scripts/make_cases.py")
            self._params = stored[self.key]
        return self._params

    def cases(self) -> list[tuple]:
        """Fresh copies of the built inputs: a build makes a small model and may run it (chapter 6's EOS
        ids are tokens the model produces), which costs more than a copy, and the grader's judging half
        asks for the cases twice per submission."""
        if self._built is None:
            with one_thread():  # many tiny tensor operations
                self._built = [self.build(p) for p in self.params()]
        return copy.deepcopy(self._built)


@contextlib.contextmanager
def _hypothesis_as_a_check():
    """Hypothesis, silent and the same everywhere. Its messages, and anything the learner's function
    prints while it is searched over, stay out of the notebook's output. And its draws ignore the
    constants it would collect from local modules (it mixes constants from whatever local source files
    are imported into its draws, and caches them in ./.hypothesis): with them, the same seed would give
    other examples in a notebook, in the grader and in scripts/make_cases.py."""
    from hypothesis.internal.conjecture import providers  # internal: checked, and skipped if it moved

    local = getattr(providers, "_get_local_constants", None)
    cache = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        if local is not None and hasattr(providers, "Constants") and hasattr(cache, "clear"):
            cache.clear()  # constants cached before, local ones included
            providers._get_local_constants = providers.Constants
        try:
            yield
        finally:
            if local is not None and providers._get_local_constants is providers.Constants:
                providers._get_local_constants = local
                cache.clear()


def _hypothesis_settings(max_examples: int, **more):
    """Derandomized (a fixed seed: the same examples everywhere), and no example database written to disk."""
    from hypothesis import HealthCheck, settings
    return settings(derandomize=True, database=None, max_examples=max_examples, deadline=None,
                    suppress_health_check=list(HealthCheck), print_blob=False, **more)


def draw_examples(strategy, count: int) -> list:
    """``count`` distinct examples of ``strategy`` (fewer if it has fewer), the same on every machine with
    the same hypothesis: its derandomized generation, in the order it produces them (simplest first)."""
    from hypothesis import Phase, given

    found = []

    @given(strategy)
    def collect(params):
        params = json.loads(json.dumps(params))  # as stored: tuples become lists
        if params not in found:
            found.append(params)

    with _hypothesis_as_a_check():
        _hypothesis_settings(count, phases=[Phase.generate])(collect)()
    return found


def smallest_failing(generated: Generated, fails: Callable, seconds: float = 3.0):
    """The smallest parameters for which ``fails(params)`` is true, as hypothesis's shrinker finds them
    within ``seconds`` (the search is cut there and keeps the smallest found); None if it finds none or
    hypothesis is not installed."""
    try:
        from hypothesis import find
    except ImportError:
        return None
    stop = time.monotonic() + seconds
    smallest = []

    def condition(params):
        if time.monotonic() > stop or not fails(params):
            return False
        smallest[:] = [params]  # the shrinker only moves to smaller failing inputs: the last is the smallest
        return True

    with _hypothesis_as_a_check():
        try:
            find(generated.strategy(), condition, settings=_hypothesis_settings(4 * generated.count))
        except Exception:  # NoSuchExample, or the cut-off making the last example pass: keep what was found
            pass
    return smallest[0] if smallest else None


@contextlib.contextmanager
def one_thread():
    """torch on one thread while a check runs: its tensors are tiny, and there torch's intra-op threads
    cost more than they save (measured on a loaded 2-core machine: judging chapter 6 took 8.9 s with
    torch's default 2 threads, 0.6 s with 1). The caller's setting is restored on the way out."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def grading() -> bool:
    """True inside the batch grader, where checks in the notebook must do nothing (and cannot hang)."""
    return os.environ.get("NEXTTOKEN_GRADING") == "1"


KINDS = ("write", "predict", "debug", "empirical", "open")
PREDICT_TRIES = 3  # failed checks of a predict task that say how the guess is off without showing the answer


def unrevealed(expected, got) -> str:
    """The evidence of a wrong prediction without the right answer: what was predicted, and which way a
    number is off or how many entries of a tensor are wrong (not which ones: that would be the answer)."""
    if isinstance(expected, (int, float)) and not isinstance(got, bool) and isinstance(got, numbers.Real):
        return f"got:      {got}, which is too {'high' if got > expected else 'low'}"
    if isinstance(expected, torch.Tensor) and isinstance(got, torch.Tensor) and got.shape == expected.shape:
        wrong = int((got.double() != expected.double()).sum())
        shown = show(got) if got.numel() <= SMALL else f"a {got.dtype} tensor of shape {tuple(got.shape)}"
        if wrong == 0:  # the values are right, their type is not (the summary says which)
            return f"got:      {shown}"
        if got.numel() == 1:
            return f"got:      {shown}, with its only entry wrong"
        return f"got:      {shown}, with {wrong} of its {got.numel()} entries wrong"
    return f"got:      {describe(got)}"


@dataclass
class Task:
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
    # Calls the task's text rules out, each with the rule as the text says it (see ``forbidding``).
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
    _failing: int | None = field(default=None, repr=False)
    _failing_args: tuple | None = field(default=None, repr=False)
    _tries: int = field(default=0, repr=False)  # failed checks so far (a predict task reveals after PREDICT_TRIES)
    _revealing: bool = field(default=False, repr=False)  # set by check() once the tries are used up
    _named: Callable | None = field(default=None, repr=False)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Task.kind must be one of {KINDS}, got {self.kind!r}")
        if self.generated is not None and self._named is None:
            named, generated = self.cases, self.generated
            generated.key = f"{self.chapter}.{self.name}"
            self._named = named
            self.cases = lambda: named() + generated.cases()

    def named_cases(self) -> list[tuple]:
        """The hand-picked test inputs only (all of them when the task has no generated ones)."""
        return (self._named or self.cases)()

    @property
    def arg_names(self) -> list[str]:
        try:
            return list(inspect.signature(self.reference).parameters)
        except (TypeError, ValueError):
            return []

    def held_out_cases(self) -> list[tuple[str, tuple]]:
        """The grader's held-out inputs of this task, each with its name (exercises/held_out.py)."""
        try:
            from . import held_out
        except ImportError:
            raise HeldOutMissing("this is a student build of nexttoken: it has no held-out test cases "
                                 "(grade without --held-out, or install the full package)") from None
        return held_out.cases_of(f"{self.chapter}.{self.name}")

    def graded_cases(self, held_out: bool = False) -> tuple[list[tuple], dict[int, str]]:
        """The inputs a grading run uses, and {index: name} of those that are held out (after the visible
        ones, which are exactly what ``check`` runs)."""
        cases = self.cases()
        if not held_out:
            return cases, {}
        extra = self.held_out_cases()
        hidden = {len(cases) + i: name for i, (name, _) in enumerate(extra)}
        return cases + [args for _, args in extra], hidden

    def held_out_only(self, fn) -> tuple[str, str]:
        """(status, reason) of ``fn`` on the held-out inputs alone: how much they catch by themselves
        (tests/exercises/ and scripts/mutate_checks.py --held-out-only measure it)."""
        named = self.held_out_cases()
        cases = [args for _, args in named]
        status, reason, _ = self.judge(self._run_on(fn, cases), cases,
                                       hidden={i: name for i, (name, _) in enumerate(named)})
        return status, reason

    def run(self, fn, held_out: bool = False) -> list[tuple[str, object]]:
        """Call ``fn`` on every test input (and on the held-out ones too, with ``held_out``): a list of
        ("ok", output), ("not_implemented", ""), ("changed_input", message) or ("error", message). Runs
        where the learner's code runs."""
        return self._run_on(fn, self.graded_cases(held_out)[0])

    def _run_on(self, fn, cases) -> list[tuple[str, object]]:
        outcomes = []
        names = self.arg_names
        for args in cases:
            args = copy_args(args)
            before = copy_args(args)
            weights = [[p.detach().clone() for p in a.parameters()] if isinstance(a, Decoder) else None
                       for a in args]
            watching = self.watch(args) if self.watch else contextlib.nullcontext([])
            try:
                with watching as complaints, forbidding(self.forbid, args):
                    output = fn(*args)
            except NotImplementedError:
                outcomes.append(("not_implemented", ""))
                break
            except Exception as exc:  # the learner's bug, reported back to them
                if str(exc).startswith(RULE):
                    outcomes.append(("broke_rule", str(exc)[:300]))
                else:
                    outcomes.append(("error", f"{type(exc).__name__}: {str(exc)[:300]}"))
                break
            changed = self._changed_argument(args, before, weights, names)
            if changed:
                outcomes.append(("changed_input", changed))
                break
            if complaints:
                outcomes.append(("broke_rule", complaints[0]))
                break
            if isinstance(output, torch.Tensor) and output.device.type != "cpu":
                outcomes.append(("error", f"your function returned a tensor on {output.device}; the inputs "
                                          "are on the CPU, keep it there"))
                break
            outcomes.append(("ok", plain(output)))
        return outcomes

    @staticmethod
    def _changed_argument(args, before, weights, names) -> str | None:
        for i, (now, then, w) in enumerate(zip(args, before, weights)):
            name = names[i] if i < len(names) else f"argument {i + 1}"
            if isinstance(now, torch.Tensor) and not (now.shape == then.shape and
                                                      torch.equal(now.nan_to_num(), then.nan_to_num())):
                return (f"your function changed its input `{name}` in place; the caller's tensor must stay "
                        "as it was: use the out-of-place operation (masked_fill, not masked_fill_; "
                        "x = x + y, not x += y) or work on a .clone()")
            if w is not None and any(not torch.equal(p, q) for p, q in zip(now.parameters(), w)):
                return f"your function changed the weights of `{name}` (the model): only read them"
        return None

    def call_text(self, args) -> str:
        return f"{self.function}({', '.join(describe(a) for a in args)})"

    def _explain(self, args, value, tried, held_out_name: str | None = None) -> str | None:
        """None if ``value`` is right for ``args``; else the explanation a learner sees. ``tried`` is
        every (input, output) pair of this answer, so that a known mistake is named only when it
        explains all of them. A held-out input is named, and neither it nor the expected output shown."""
        if self.verify is not None:  # many right answers: the property is checked, not one output
            expected, problem = None, self.verify(copy_args(args), value)
        else:
            expected = self.reference(*copy_args(args))
            problem = compare(expected, value, atol=self.atol)
        if problem is None:
            return None
        summary, evidence = problem
        message = None
        if expected is None:
            message = self._known_mistake(tried)
        elif "should be" not in summary or not _matches(expected, value):  # a dtype slip alone is named as such
            message = self._known_mistake(tried) or self._diagnosis(args, expected, value)
        hide = self.kind == "predict" and expected is not None and not self._revealing
        if hide:  # a prediction: say how it is off, not what the right one is (nor its shape, which is part of it)
            summary = summary.split(": expected (")[0]
            evidence = unrevealed(expected, value)
        lines = [message or summary]
        if held_out_name is not None:
            return "\n".join(lines + [f"   input:    {hidden_input(held_out_name)}"])
        lines.append(f"   input:    {self.call_text(args)}")
        if evidence:
            lines.append(f"   {evidence}")
        if hide:
            lines.append(f"   (the expected answer is not shown: {self.name}.check shows it after {PREDICT_TRIES} "
                         f"failed tries; {self.name}.hint() gives a nudge)")
        lines.append(f"   reproduce: args = {self.name}.failing_input(); {self.function}(*args)")
        return "\n".join(lines)

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
                if not _matches(wrong, value):
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

    def judge(self, outcomes, cases=None, tried=(), hidden=None) -> tuple[str, str, int | None]:
        """(status, reason, index of the failing test input or None). Never raises. ``cases`` (the task's
        own by default) are the inputs the outcomes are of; ``tried`` adds (input, output) pairs that a
        known mistake must explain too; ``hidden`` is {index: name} of the held-out inputs among them."""
        try:
            with one_thread():
                return self._judge_each(outcomes, self.cases() if cases is None else cases, list(tried),
                                        hidden or {})
        except Exception as exc:  # a bug of the check itself must not cost other tasks anything
            return "error", f"the check could not judge this answer ({type(exc).__name__}: {exc})"[:300], None

    @staticmethod
    def _tried(cases, outcomes) -> list:
        return [(args, outcome[1]) for args, outcome in zip(cases, outcomes)
                if isinstance(outcome, (tuple, list)) and len(outcome) == 2 and outcome[0] == "ok"]

    def _judge_each(self, outcomes, cases, tried, hidden):
        """Each outcome against its input, in order: the first that is wrong decides."""
        if not isinstance(outcomes, list) or len(outcomes) == 0:
            return "error", "no results were recorded for this function", None
        tried = self._tried(cases, outcomes) + tried
        for index, (args, outcome) in enumerate(zip(cases, outcomes)):
            kind, value = outcome
            if kind == "missing":
                return "missing", str(value), None
            if kind == "not_implemented":
                return ("not_implemented",
                        f"{self.function} still raises NotImplementedError: write your code there", None)
            call = (f"{self.function}(...) on {hidden_input(hidden[index])}" if index in hidden
                    else self.call_text(args))
            if kind == "error":
                return "error", f"{call} raised {value}", index
            if kind in ("changed_input", "broke_rule"):
                return "failed", f"{value}.\n   input:    {call}", index
            if kind != "ok":
                return "error", f"an unknown outcome {kind!r} was recorded", None
            message = self._explain(args, value, tried, hidden.get(index))
            if message is not None:
                return "failed", message, index
        if len(outcomes) < len(cases):
            return "error", "fewer results than test inputs were recorded", None
        held = f" ({len(hidden)} of them held out)" if hidden else ""
        return "passed", f"all {len(cases)} tests passed{held}", None

    def evaluate(self, outcomes, held_out: bool = False) -> tuple[str, str]:
        """(status, reason) for outcomes from ``run`` (with the same ``held_out``), judged against the
        reference on fresh inputs."""
        cases, hidden = self.graded_cases(held_out)
        status, reason, _ = self.judge(outcomes, cases, hidden=hidden)
        return status, reason

    def check(self, fn) -> None:
        """Test your function now and say what looks wrong, if anything."""
        if grading():
            return
        if not callable(fn):
            print(f"❌ {self.name}: pass your function itself, e.g. {self.name}.check({self.function})")
            return
        self._revealing = self._tries >= PREDICT_TRIES
        try:
            with one_thread():
                cases = self.cases()
                outcomes = self._run_on(fn, cases)
                status, reason, self._failing = self.judge(outcomes, cases)
                self._failing_args = None
                if status != "passed" and self._failing is not None and self._failing >= len(cases) - self._n_generated():
                    reason = self._shrunk(fn, self._tried(cases, outcomes)) or reason
        finally:
            self._revealing = False
        if status == "passed":
            print(f"✅ {self.name} ({self.title}): correct, {reason}.")
            return
        if status != "not_implemented":
            self._tries += 1
        if self.kind == "predict" and status == "failed" and self._tries <= PREDICT_TRIES:
            reason += f"\n   try {self._tries} of {PREDICT_TRIES}" + (
                " (the next failed check shows the expected answer)" if self._tries == PREDICT_TRIES else "")
        print(f"❌ {self.name} ({self.title}): {reason}")

    def _n_generated(self) -> int:
        return len(self.generated.params()) if self.generated is not None else 0

    def _shrunk(self, fn, tried) -> str | None:
        """The feedback on the smallest failing input hypothesis finds from the generated ones (it is then
        what ``failing_input()`` gives), or None. Only in ``check()``: shrinking calls the learner's
        function again, which the grader's judging half cannot do."""
        def fails(params):
            case = [self.generated.build(params)]
            return self.judge(self._run_on(fn, case), case)[0] != "passed"

        params = smallest_failing(self.generated, fails)
        if params is None:
            return None
        args = [self.generated.build(params)]
        status, reason, _ = self.judge(self._run_on(fn, args), args, tried)
        if status == "passed":
            return None
        self._failing_args = args[0]
        return reason + "\n   (hypothesis shrank the failing test input to the smallest one it could find: this one)"

    def failing_input(self):
        """The arguments of the test your last ``check`` failed on (fresh copies), to call your function."""
        if self._failing_args is not None:
            return copy_args(self._failing_args)
        if self._failing is None:
            print(f"{self.name}: no failing test input recorded; run {self.name}.check({self.function}) first")
            return None
        return copy_args(self.cases()[self._failing])

    def hint(self, level: int = 1):
        """A nudge; ``hint(2)`` and ``hint(3)`` say more. None of them is the code: see ``solution()``."""
        if not self.hints:
            print(f"💡 {self.name}: no hint for this one; {self.name}.solution() shows an answer")
            return
        level = max(1, min(int(level), len(self.hints)))
        more = (f" (more: {self.name}.hint({level + 1}))" if level < len(self.hints)
                else f" (that is the last hint; {self.name}.solution() shows an answer)")
        print(f"💡 Hint {level} for {self.name}: {self.hints[level - 1]}{more}")

    def solution(self):
        """The solution notebook's code for this task (solutions/<chapter>.ipynb), where this build has it."""
        if not solutions_shipped():
            print(f"🔒 {self.name}: the solutions are withheld in this build of the course (a student build for "
                  f"a graded class); {self.name}.hint() still gives nudges, and your instructor has the answers")
            return
        print(f"Solution for {self.name} (from solutions/{self.chapter}.ipynb):\n{solution_source(self)}")


def solutions_shipped() -> bool:
    """False in a student build of the package (scripts/build_student_package.py), which leaves them out."""
    return resources.files("nexttoken.exercises").joinpath("solutions.json").is_file()


def solution_source(task: Task) -> str:
    """The code of the cell that defines ``task.function`` in the solution notebook, as shipped in the
    package by scripts/make_exercises.py (so that Colab, which has no solutions/ folder, shows it too)."""
    text = resources.files("nexttoken.exercises").joinpath("solutions.json").read_text()
    return json.loads(text)[task.chapter][task.function]
