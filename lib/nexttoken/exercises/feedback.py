"""How a check talks about values: describing an input, showing a small tensor, comparing an output with
the expected one and saying where it differs, and what a wrong prediction may be told without the answer.
The judging half's words (``task.Task.verdict``); nothing here runs the learner's code.
"""

import dataclasses
import math

import torch

from ..checks import is_real, is_whole
from ..model import Decoder
from ..recorder.words import counted

SMALL = 24  # outputs with at most this many entries are printed in full in feedback
SMALL_INPUT = 12  # inputs, likewise (longer ones are described by dtype and shape)


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
    """A small tensor in full, floats rounded (see _round), with its dtype when it is not the default. A
    tensor with few entries but many rows (shape (4194304, 0): no entries, four million empty lists) is
    described instead: what ``tolist`` builds grows with every dimension, a 0 one counted as 1."""
    if math.prod(max(d, 1) for d in t.shape) > SMALL:
        return f"a {t.dtype} tensor of shape {tuple(t.shape)}"
    values = _round(t.double().tolist()) if t.is_floating_point() else t.tolist()
    suffix = "" if t.dtype in (torch.float32, torch.int64, torch.bool) else f", dtype={t.dtype}"
    return f"tensor({values}{suffix})"


def _kind(dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "a bool tensor"
    if dtype.is_floating_point:
        return f"a float tensor ({dtype})"
    return f"an integer tensor ({dtype})"


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


@dataclasses.dataclass(frozen=True)
class Difference:
    """How an output differs from the expected one: its kind ("type": not the kind of value asked for,
    "shape", "device", "values"), the summary, the evidence (expected against got), and the part of the
    summary that shows the expected answer (the expected shape), which a prediction's feedback leaves out."""
    kind: str
    summary: str
    evidence: str = ""
    answer: str = ""


def _compare_words(expected: str, got, what: str) -> Difference | None:
    """A word answer, such as "eos" or "length": None if it is the expected one."""
    if not isinstance(got, str):
        return Difference("type", f"{what} should be a str, but it is {describe(got)}")
    if got != expected:
        return Difference("values", f"{what} is wrong", f"expected: {expected!r}\n   got:      {got!r}")
    return None


def compare(expected, got, what: str = "your output", atol: float = 1e-4) -> Difference | None:
    """None if ``got`` is right; else what is wrong, with the evidence (expected vs got or first difference)."""
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return Difference("type", f"{what} should be a tuple of {len(expected)} values, but it is {describe(got)}")
        for i, (e, g) in enumerate(zip(expected, got)):
            problem = compare(e, g, f"element {i} of {what}", atol)
            if problem:
                return problem
        return None
    if isinstance(expected, str):
        return _compare_words(expected, got, what)
    if isinstance(expected, bool) or not isinstance(expected, (int, float, torch.Tensor)):
        raise TypeError(f"the reference returned {type(expected).__name__}: no comparison for it")
    if isinstance(expected, (int, float)):
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if isinstance(expected, int):  # any integer type will do (int, numpy.int64, a 0-d int tensor)
            if not is_whole(got):
                return Difference("type", f"{what} should be an integer (a count is a whole number, int), but it "
                                          f"is {describe(got)}")
            if got != expected:
                return Difference("values", f"{what} is wrong", f"expected: {expected}\n   got:      {got}")
            return None
        if not is_real(got):
            return Difference("type", f"{what} should be a number, but it is {describe(got)}")
        if abs(got - expected) > atol + 1e-4 * abs(expected):
            return Difference("values", f"{what} is wrong", f"expected: {expected:.4f}\n   got:      {got:.4f}")
        return None
    if not isinstance(got, torch.Tensor):
        return Difference("type", f"{what} should be a torch.Tensor, but it is {describe(got)}")
    if got.device.type != "cpu":
        return Difference("device", f"{what} is on {got.device}, but the inputs are on the CPU: keep it there")
    if tuple(got.shape) != tuple(expected.shape):
        return Difference("shape", f"{what} has the wrong shape",
                          side_by_side(expected, got) if max(got.numel(), expected.numel()) <= SMALL else "",
                          f": expected {tuple(expected.shape)}, got {tuple(got.shape)}")
    if got.dtype != expected.dtype:
        if expected.dtype == torch.int64:
            why = "token ids are int64 (torch.long): indexing, embeddings and torch.cat expect it"
        elif expected.dtype == torch.bool:
            why = "a mask is a bool tensor (True/False), so that ~mask and masked_fill work on it"
        else:
            why = "keep the dtype of the inputs (did a Python float, .double() or an int tensor slip in?)"
        return Difference("type", f"{what} should be {_kind(expected.dtype)}, but it is {_kind(got.dtype)}: {why}",
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
    return Difference("values", summary, evidence)


def matches(wrong_output, got) -> bool:
    """Loosely equal (values only), for recognising a known mistake."""
    try:
        if isinstance(wrong_output, torch.Tensor) and isinstance(got, torch.Tensor):
            if wrong_output.shape != got.shape:
                return False
            return bool(torch.allclose(got.double(), wrong_output.double(), atol=1e-4, rtol=1e-4, equal_nan=True))
        if isinstance(wrong_output, (tuple, list)) and isinstance(got, (tuple, list)):
            return len(wrong_output) == len(got) and all(matches(w, g) for w, g in zip(wrong_output, got))
        if isinstance(wrong_output, str) or isinstance(got, str):
            return wrong_output == got
        if isinstance(wrong_output, (int, float)) and isinstance(got, (int, float)) and not isinstance(got, bool):
            return abs(wrong_output - got) <= 1e-6 * max(1.0, abs(wrong_output))
    except Exception:
        return False
    return False


def hidden_input(number: int, count: int) -> str:
    """How feedback names a held-out input: by its place alone (a name could describe the input)."""
    return f"held-out test {number + 1} of {count} (held-out inputs, outputs and errors are not shown)"


def exception_type(error_text) -> str:
    """The exception's type in a recorded "Type: message", or "an exception": all that feedback on a
    held-out input repeats of it."""
    head = str(error_text).partition(":")[0].strip()
    return head if head.replace(".", "").replace("_", "").isalnum() and len(head) <= 60 else "an exception"


def unrevealed(expected, got) -> str:
    """The evidence of a wrong prediction without the right answer: what was predicted, and which way a
    number is off or how many entries of a tensor are wrong (not which ones: that would be the answer)."""
    if isinstance(expected, (int, float)) and is_real(got):
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


def overflowed(what: str, peak: float) -> str:
    """Why a softmax by hand gave inf or NaN: ``what`` (the logits, the scores) reach ``peak``."""
    return (f"the {what} reach {peak:.0f}, and exp of anything above 88 overflows float32 to inf (inf / inf is "
            "NaN). Subtract each row's maximum before exp, or use torch.softmax, which does")
