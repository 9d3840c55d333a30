"""Calling a learner's function on a task's test inputs: the one half of a check that runs where the
learner's code runs (in a notebook's ``check()``, and inside the batch grader's sandbox, as part of
``nexttoken.recorder``).

It keeps only plain data: each output, or the error it raised, or the fact that it changed an input or
broke one of the task's rules. It imports only torch and the lesson's library, never a task's reference,
known mistakes or held-out inputs: the sandbox runs this file, and those stay outside it (the other half,
judging, is ``nexttoken.exercises.task.Task.verdict``).
"""

import contextlib
import inspect
import numbers
import sys

import torch
from torch.overrides import TorchFunctionMode

from ..model import Decoder
from .contract import MAX_LIST, NO_THREAD, RULE, THREADS_REFUSED



def copy_args(args):
    """Fresh copies of the tensor and list inputs and random generators, so that nothing a call does to them
    (changing a tensor or a list, drawing from a generator) reaches the next call. Models are not copied: a task
    may call one model twice on purpose (chapter 7 looks for a cache kept between calls)."""
    def fresh(a):
        if isinstance(a, torch.Tensor):
            return a.clone()
        if isinstance(a, list):  # a list of steps or ids: a call may change it in place too
            return [fresh(x) for x in a]
        if isinstance(a, torch.Generator):
            g = torch.Generator(device=a.device)
            g.set_state(a.get_state())
            return g
        return a
    return tuple(fresh(a) for a in args)


def plain(value):
    """The learner's output as plain data (tensors, numbers, lists) that can leave their process. A tensor
    subclass is read as a plain tensor, without running any of its own code (its ``detach``, say)."""
    if isinstance(value, torch.Tensor):
        with torch._C.DisableTorchFunctionSubclass():
            return torch.Tensor.detach(value).as_subclass(torch.Tensor).clone()
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, numbers.Integral):  # numpy.int64 and friends are ints too
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, (list, tuple)) and len(value) <= MAX_LIST:
        return [plain(v) for v in value]
    return f"<an object of type {type(value).__name__}>"


# The softmax family: a log_softmax's exp, or a softmin of -x, is a softmax too.
SOFTMAXES = ("softmax", "_softmax", "special_softmax", "log_softmax", "_log_softmax", "special_log_softmax",
             "softmin")


class _NoSoftmax(TorchFunctionMode):
    """Inside it, every softmax of torch (torch.softmax, Tensor.softmax, F.softmax, log_softmax, softmin,
    ``torch.ops.aten._softmax`` and its overloads, however imported) raises an error that names it and quotes
    the task's ``rule``: a task that asks for a softmax by hand must not get it from torch. (A function mode,
    not a dispatch mode: entering one of those imports torch._dynamo, which rebinds torch's functions.)"""

    def __init__(self, rule: str):
        super().__init__()
        self.rule = rule

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = str(getattr(func, "__name__", "")).partition(".")[0]  # "_softmax.default": an op's overload
        if name in SOFTMAXES:
            raise RuntimeError(f"{RULE}torch's {name.removeprefix('special_').lstrip('_')} was called, but the "
                               f"task says: {self.rule}")
        return func(*args, **(kwargs or {}))


def _raising_code(message: str):
    """The code of a function that raises RuntimeError(message) whatever it is given. It is put in place
    of a library function's own code, so that every name bound to that function (``nexttoken.generate``,
    ``from nexttoken import generate``, ...) raises while a learner's function runs."""
    namespace: dict = {}
    exec(f"def forbidden(*args, **kwargs):\n    raise RuntimeError({message!r})", namespace)
    return namespace["forbidden"].__code__


def _library_function(call: str):
    """The function a rule names: "nexttoken.causal_mask" (a function of the library, under every name
    bound to it) or "model.embed" (a Decoder method, through any model or the class)."""
    owner, _, name = call.partition(".")
    found = getattr(sys.modules["nexttoken"] if owner == "nexttoken" else Decoder, name, None)
    if not inspect.isfunction(found):
        raise ValueError(f"no way to forbid {call!r}: it is not a function of the library")
    return found


@contextlib.contextmanager
def forbidding(rules: dict[str, str], args):
    """While inside, the calls named in ``rules`` raise an error that quotes the task's rule:
    "model(...)" (the Decoders among ``args``), "torch.softmax", "nexttoken.generate", "Decoder(...)", and any
    other function of the library ("nexttoken.causal_mask") or method of a Decoder ("model.embed")."""
    undo = []
    try:
        for call, rule in rules.items():
            message = f"{RULE}{call} was called, but the task says: {rule}"
            if call == "model(...)":
                for model in (a for a in args if isinstance(a, Decoder)):
                    def refuse(*_, **__):
                        raise RuntimeError(message)
                    # model(x), model.forward(x), ...: every door in
                    for name in ("forward", "forward_unchecked"):
                        object.__setattr__(model, name, refuse)
                        undo.append(lambda m=model, n=name: object.__delattr__(m, n))
                # and through the class (Decoder.forward(model, x)) or the function saved under another name:
                # the class's own functions raise too
                for function in (Decoder.forward, Decoder.forward_unchecked):
                    function = inspect.unwrap(function)
                    code, function.__code__ = function.__code__, _raising_code(message)
                    undo.append(lambda f=function, c=code: setattr(f, "__code__", c))
            elif call == "torch.softmax":
                mode = _NoSoftmax(rule)
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
            elif call.startswith(("nexttoken.", "model.")):  # any other library function, or a Decoder method
                function = inspect.unwrap(_library_function(call))
                code, function.__code__ = function.__code__, _raising_code(message)
                undo.append(lambda f=function, c=code: setattr(f, "__code__", c))
            else:
                raise ValueError(f"no way to forbid {call!r}")
        yield
    finally:
        for step in reversed(undo):
            step()


@contextlib.contextmanager
def one_thread():
    """torch on one thread while a check runs: its tensors are tiny, and there torch's intra-op threads
    cost more than they save (most of all on a machine whose cores are busy). The caller's setting is
    restored on the way out."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run_on(fn, cases, forbid: dict[str, str] | None = None, watch=None, arg_names=()) -> list[tuple[str, object]]:
    """Call ``fn`` on each test input, in order: a list of ("ok", output as plain data),
    ("not_implemented", ""), ("changed_input", message), ("broke_rule", message) or ("error", message);
    the first that is not "ok" ends it. ``forbid`` is the task's {call: rule} (see ``forbidding``) and
    ``watch`` its check of how (a context manager given the input, yielding a list of complaints)."""
    outcomes = []
    for args in cases:
        args = copy_args(args)
        before = copy_args(args)
        weights = [[p.detach().clone() for p in a.parameters()] if isinstance(a, Decoder) else None
                   for a in args]
        watching = watch(args) if watch else contextlib.nullcontext([])
        try:
            with watching as complaints, forbidding(forbid or {}, args):
                output = plain(fn(*args))  # inside the rules too: reading an output may run its code
        except NotImplementedError as exc:
            if not_written(exc):
                outcomes.append(("not_implemented", ""))
            else:  # torch's own (an op not implemented for a dtype or device): an error like any other
                outcomes.append(("error", f"NotImplementedError: {str(exc)[:300]}"))
            break
        except Exception as exc:  # the learner's bug, reported back to them
            if str(exc) == NO_THREAD:  # the grader's sandbox refuses threads (recorder.refuse_threads)
                outcomes.append(("broke_rule", f"{RULE}a thread was started, but {THREADS_REFUSED}"))
            elif str(exc).startswith(RULE):
                outcomes.append(("broke_rule", str(exc)[:300]))
            else:
                outcomes.append(("error", f"{type(exc).__name__}: {str(exc)[:300]}"))
            break
        changed = changed_argument(args, before, weights, arg_names)
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
        outcomes.append(("ok", output))
    return outcomes


STUB = "write your code here"  # what the exercise notebooks' stubs raise: NotImplementedError(STUB)


def not_written(exc: NotImplementedError) -> bool:
    """Whether a NotImplementedError means the function is not written yet: the stub's own
    (``raise NotImplementedError("write your code here")``), or a bare one the learner's code raised itself;
    not one a library raised (torch's "... not implemented for 'Half'"), which is the answer's error."""
    if str(exc) == STUB:
        return True
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = tb.tb_frame.f_globals.get("__name__", "") if tb is not None else ""
    return str(exc) == "" and not str(where).startswith(("torch", "nexttoken"))


def changed_argument(args, before, weights, names) -> str | None:
    """What the call changed of its inputs (a tensor or a list in place, a model's weights), or None."""
    for i, (now, then, w) in enumerate(zip(args, before, weights)):
        name = names[i] if i < len(names) else f"argument {i + 1}"
        if isinstance(now, torch.Tensor) and not (now.shape == then.shape and
                                                  torch.equal(now.nan_to_num(), then.nan_to_num())):
            return (f"your function changed its input `{name}` in place; the caller's tensor must stay "
                    "as it was: use the out-of-place operation (masked_fill, not masked_fill_; "
                    "x = x + y, not x += y) or work on a .clone()")
        if isinstance(now, list) and not same_list(now, then):
            return (f"your function changed its input `{name}`, a list, in place; the caller's list must stay "
                    "as it was: build a new list (or work on a copy, list(x))")
        if w is not None and any(not torch.equal(p, q) for p, q in zip(now.parameters(), w)):
            return f"your function changed the weights of `{name}` (the model): only read them"
    return None


def same_list(now: list, then) -> bool:
    """A list input as it was before the call: as long, each item the same (a tensor by its values)."""
    if not isinstance(then, list) or len(now) != len(then):
        return False
    for a, b in zip(now, then):
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                    and torch.equal(a, b)):
                return False
        elif isinstance(a, list):
            if not same_list(a, b):
                return False
        elif type(a) is not type(b) or a != b:
            return False
    return True
