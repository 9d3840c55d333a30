"""What a wrong output *is*, for every task alike: the right answer under a family of transformations (another
row or position, another axis, the sign, a factor, a normalisation left out or done twice, a temperature, a
top-k, an epsilon before the log, ...), each named in one vocabulary, so that a slip reads the same in every
chapter. ``Task.verdict`` asks here when the task's own known mistakes and rules have said nothing.

A diagnosis must be sure: the learner's output equals the transformed right answer (within the checks'
tolerance) on the failing input, and ``Task`` confirms it on every other input the answer was run on (each
output is either right or the same transformation of the right one). When no transformation fits,
``properties`` states only facts about the output (its rows sum to 3.41; it holds negative values).

A task can say what its answer is computed from (``Task(source=...)``, a ``Source``): the logits it
normalises, or the probabilities whose logs it adds. The transformations of those (a sigmoid, exp without
the division, another position's logits) can then be named too; without it, only the right answer's own.

The families live beside this file: ``diagnosis_values`` (what is computed from logits, from factors, or
summed from parts), ``diagnosis_layouts`` (bool layouts), ``diagnosis_loops`` (a loop's pair of ids and
score); ``diagnosis_base`` holds ``Source``, ``Finding`` and the words they share.
"""

import math

import torch

from ..checks import is_whole
from .diagnosis_base import (ROWS_SWAPPED, Finding, Source, Term, is_distribution, num, same, shown_at,
                             temperature_words)
from .diagnosis_layouts import layout
from .diagnosis_loops import in_pair
from .diagnosis_values import from_factors, from_logits, from_terms
from .feedback import overflowed

__all__ = ["Finding", "Source", "Term", "across", "findings", "may_lead", "name", "properties"]



def name(expected, got, source: Source | None = None) -> Finding | None:
    """The transformation of the right answer that the output is, if one is: the first that fits."""
    return next(findings(expected, got, source), None)


def may_lead(expected) -> bool:
    """Whether a wrong output of this right answer can have a leading finding: a layout's, a loop's, a count's."""
    return isinstance(expected, (tuple, list)) or is_whole(expected) \
        or (isinstance(expected, torch.Tensor) and expected.dtype == torch.bool)


def _whole(value) -> int | None:
    """A count as an int (an int, a numpy integer, a one-entry integer tensor), or None for anything else."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point() \
            and value.dtype != torch.bool:
        return int(value)
    return int(value) if is_whole(value) else None


def findings(expected, got, source: Source | None = None, leading: bool = False):
    """Every transformation of the right answer that the output is, most telling first (on one input two
    can agree: with logits in the hundreds, a logsumexp whose maximum was not added back is the logits).
    ``leading``: only where leading ones can be (a layout, a loop's ids), the rest not tried."""
    if isinstance(expected, (tuple, list)) and isinstance(got, (tuple, list)) and len(got) == len(expected):
        yield from in_pair(expected, got, source, leading, findings)
        return
    if source is not None and source.terms and is_whole(expected) and _whole(got) is not None:
        yield from from_terms(expected, _whole(got), source)
        return
    if not (isinstance(expected, torch.Tensor) and isinstance(got, torch.Tensor)) or got.is_complex():
        return
    if expected.dtype == torch.bool:
        yield from layout(expected, got, source)
        return
    if leading:
        return
    if tuple(got.shape) != tuple(expected.shape):
        every = source.every if source is not None else None
        if every is not None and got.dim() == every.dim() and got.shape[:2] == every.shape[:2] \
                and same(expected, got.select(1, source.at)):
            yield Finding("extra_axis", f"you kept every position, {tuple(got.shape)}: the next token's answer is "
                                        f"the last position's alone, {tuple(expected.shape)} (index time with -1)")
        yield from _reshaped(expected, got)
        return
    if not got.is_floating_point() or not expected.is_floating_point():
        return
    if source is not None and source.logits is not None and torch.isnan(got).any() \
            and not torch.isnan(expected).any() and float(source.logits.max()) > 88:
        yield Finding("overflow", f"NaN: {overflowed('logits', float(source.logits.max()))}")
    if got.dtype != expected.dtype and same(expected.to(got.dtype), got):
        right, mine = shown_at(expected, got)
        yield Finding("dtype", f"your output is {got.dtype}, and its values are the right ones rounded to that "
                               f"precision ({num(mine)} where {num(right)} is right): keep {expected.dtype}, the "
                               f"dtype of the inputs (a .half(), .to(...) or a tensor made in another dtype?)")
    with torch.no_grad():
        yield from from_logits(expected, got, source)
        yield from from_factors(expected, got, source)
        yield from _from_expected(expected, got)


def _reshaped(e, g):
    """An output of another shape that is the right one rearranged, reduced or with an axis too many."""
    if g.dim() == 2 and e.dim() == 2 and tuple(g.shape) == tuple(e.shape)[::-1] and same(e.T, g):
        yield Finding("transposed", f"your output is the right one transposed: {tuple(g.shape)} where "
                                     f"{tuple(e.shape)} is asked (rows and columns swapped)")
    if e.dim() >= 1 and tuple(g.shape) == tuple(e.shape[1:]) and same(e[0], g):
        if e.shape[0] > 1:
            yield Finding("row0", f"you kept row 0 only: {tuple(g.shape)} is the first row's answer, and the "
                                   f"batch has {e.shape[0]} rows; keep every row, {tuple(e.shape)}")
        else:  # a batch of one: the same slip, or a squeeze too many
            yield Finding("row0", f"the batch dimension is gone: {tuple(g.shape)} where {tuple(e.shape)} is asked "
                                   f"(an index [0], or a squeeze() of every size-1 dimension); keep every row")
    if e.dim() >= 1 and e.shape[0] > 1 and tuple(g.shape) == (1, *e.shape[1:]) and same(e[:1], g):
        yield Finding("row0", f"you kept row 0 only: {tuple(g.shape)} is the first row's answer, and the batch has "
                               f"{e.shape[0]} rows (a return inside the loop over the rows, or a slice [:1]); keep "
                               f"every row, {tuple(e.shape)}")
    if any(g.shape[d] == 1 and tuple(g.shape[:d] + g.shape[d + 1:]) == tuple(e.shape) for d in range(g.dim())) \
            and same(e.reshape(g.shape), g):  # e with a size-1 axis inserted
        yield Finding("extra_axis", f"your output has an extra dimension of size 1, {tuple(g.shape)} where "
                                    f"{tuple(e.shape)} is asked (keepdim=True, a slice such as -1: that keeps "
                                    f"its axis, or an unsqueeze): the values are right, drop that dimension")
    if not (e.is_floating_point() and g.is_floating_point()) and e.is_floating_point() and e.dim() >= 1:
        if tuple(g.shape) == tuple(e.shape[:-1]) and torch.equal(g.long(), e.argmax(-1)):
            yield Finding("argmax", "these are token ids (the argmax of each row): the task asks for the values "
                                     "over the whole last dimension, not which one is largest")
        return
    if not (e.is_floating_point() and g.is_floating_point()):
        return
    if g.dim() == 0 and e.dim() >= 1:
        for how, total in (("summed", e.sum()), ("averaged", e.mean())) if e.numel() > 1 else ():  # one: not sure how
            if same(total, g):
                yield Finding("one_value", f"one value for the whole batch: you {how} the right values over "
                                            f"every dimension; the task asks for {tuple(e.shape)}, one per row")
        if e.dim() == 1:  # (B,) asked: one number is one value for the whole batch, whatever it holds
            yield Finding("one_value", f"one value for the whole batch, shape (): the task asks for one per row, "
                                       f"{tuple(e.shape)}")
    if g.dim() + 1 == e.dim():
        for d in range(e.dim()):
            if tuple(g.shape) != tuple(e.shape[:d] + e.shape[d + 1:]):
                continue
            for how, reduced in (("summed", e.sum(d)), ("averaged (a mean)", e.mean(d))):
                if same(reduced, g):
                    yield Finding("reduced", f"you {how} the right values over dimension {d} (of size "
                                              f"{e.shape[d]}): the task asks for each of them, {tuple(e.shape)}")
    if g.dim() == e.dim() + 1:
        for d in range(g.dim()):
            for i, which in ((-1, "last"), (0, "first")):
                if tuple(g.shape[:d] + g.shape[d + 1:]) == tuple(e.shape) \
                        and same(e, g.select(d, i)):
                    yield Finding("extra_axis", f"your output keeps an axis too many, {tuple(g.shape)}: its "
                                                 f"{which} entry along dimension {d} is the right answer, and the "
                                                 f"task asks for that one alone, {tuple(e.shape)}")


def _from_expected(e, g):
    """Transformations of the right answer alone, for any task: its rows, its sign, a factor, a shift, a
    missing normalisation, a temperature, a top-k."""
    right, mine = shown_at(e, g)
    if e.dim() >= 1 and e.shape[0] > 1 and not torch.allclose(e, e[:1].expand_as(e)):
        if same(e[:1].expand_as(e), g):
            yield Finding("row0", "every row has row 0's answer: one answer for the whole batch (an index "
                                   "such as [0] serves a batch of one only); keep every row's own")
        if same(e.flip(0), g):
            yield Finding("rows_swapped", ROWS_SWAPPED)
        for how, total in (("sum", e.sum(0, keepdim=True)), ("mean", e.mean(0, keepdim=True))):
            if same(total.expand_as(e), g):
                yield Finding("batch_total", f"every row holds the {how} over the batch of the right values (a {how} "
                                             f"over dim=0, or over every dimension): each row needs its own")
    if bool((e.abs() > 1e-6).any()) and same(-e, g):
        yield Finding("sign", f"the sign is flipped: your values are the negatives of the right ones ({num(mine)} "
                               f"where {num(right)} is right)")
    if is_distribution(e):
        yield from _distribution(e, g)
    if e.dim() >= 1 and e.shape[-1] > 1:
        if same(e.sort(-1, descending=True).values, g) or same(e.sort(-1).values, g):
            yield Finding("sorted", "your rows are sorted: the values are right, but entry i of a row belongs "
                                     "to token i, so keep them in the vocabulary's order")
        if same(e[..., :-1], g[..., 1:]) or same(e[..., 1:], g[..., :-1]):
            yield Finding("shifted", "your values are the right ones shifted by one place along the last "
                                      "dimension: check which index pairs with which (an off-by-one)")
    if bool((e <= 0).all()) and same(torch.exp(e), g):
        yield Finding("exp_of", "your values are exp of the right ones: probabilities where their logs are "
                                 "asked (take the log)")
    if bool((e > 0).all()) and same(torch.log(e), g):
        yield Finding("log_of", "your values are the log of the right ones: log-probabilities where the "
                                 "probabilities themselves are asked")
    scale = float((g.double() * e.double()).sum() / (e.double() ** 2).sum()) if (e != 0).any() else 0.0
    # a factor solved for fits any one number: unless it is a log base's, it says something only where it fits several
    if math.isfinite(scale) and abs(scale) > 1e-6 and abs(scale - 1) > 1e-3 and same(e * scale, g):
        for base, factor in (("2 (log2, bits)", 1 / math.log(2)), ("10 (log10)", 1 / math.log(10))):
            if abs(scale - factor) < 1e-3 * factor:
                yield Finding("log_base", f"these are logs in base {base}: natural logs (torch.log) are asked; "
                                           f"yours are {scale:.4g} times the right ones")
        if e.numel() >= 3:
            yield Finding("factor", f"your values are the right ones times {scale:.4g} (a factor too many or too "
                                     f"few: a sum where a mean is asked, or the reverse, or a scale)")
    offset = (g.double() - e.double())
    if bool(torch.isfinite(offset).all()) and offset.numel() > 1:
        if float(offset.max() - offset.min()) <= 1e-4 and abs(float(offset.mean())) > 1e-4:
            yield Finding("constant", f"every value is off by the same amount, {num(offset.mean())}: a constant "
                                       f"was added or left out (such as a normaliser taken over the whole tensor)")
        elif e.dim() >= 1 and e.shape[-1] > 2 and float((offset - offset[..., :1]).abs().max()) <= 1e-4 \
                and float(offset.abs().min()) > 1e-3:  # a shift, not the noise of a few entries off
            yield Finding("row_offset", f"each row is off by its own constant (row 0 by {num(offset.flatten()[0])}): "
                                        f"a shift per row, such as subtracting the row's maximum or its logsumexp, "
                                        f"added or left out")


def _distribution(e, g):
    """The right answer is rows of probabilities: the output is them unnormalised, tempered or top-k'd."""
    ed, gd = e.double(), g.double()
    ratio = gd / ed
    if bool((gd >= 0).all()) and torch.isfinite(ratio).all() and (ed > 1e-30).all():
        per_row = ratio.mean(-1, keepdim=True)
        if same(ed * per_row, g) and not torch.allclose(per_row, torch.ones(()).double(), atol=1e-4):
            yield Finding("unnormalised", f"your rows are proportional to the right probabilities but sum to "
                                           f"{num(gd.sum(-1).flatten()[0])}, not 1: they were not divided by their "
                                           f"sum (softmax is exp(x) / exp(x).sum(-1))")
    if is_distribution(g) and (gd > 0).all() and (ed > 0).all():
        le, lg = torch.log(ed), torch.log(gd)  # logits up to a constant per row: solve softmax(le / t) = g
        le, lg = le - le.mean(-1, keepdim=True), lg - lg.mean(-1, keepdim=True)
        slope = float((le * lg).sum() / (le * le).sum())
        if slope > 0 and abs(slope - 1) > 1e-3 and same(torch.softmax(le * slope, -1), g):
            yield Finding("temperature", temperature_words(1 / slope, "probabilities"))
    if is_distribution(g):
        kept = gd > 0
        k = int(kept.sum(-1).max())
        if k < e.shape[-1] and bool((kept.sum(-1) == k).all()):
            top = ed.topk(k, -1).indices
            mask = torch.zeros_like(kept).scatter(-1, top, True)
            renormalised = torch.where(mask, ed, 0) / torch.where(mask, ed, 0).sum(-1, keepdim=True)
            if torch.equal(mask, kept) and same(renormalised, g):
                yield Finding("top_k", f"only the {k} largest probabilities of each row are kept (a top-k, "
                                        f"renormalised): the task asks for the whole distribution")


def across(pairs) -> Finding | None:
    """A mistake seen only across inputs, from (right answer, output) of every input tried: a word answer
    that is the other of two words on every one of them (the cases are swapped)."""
    words = {right for right, _ in pairs}
    if len(words) == 2 and all(isinstance(got, str) for _, got in pairs) \
            and all(got in words and got != right for right, got in pairs):
        a, b = sorted(words)
        return Finding("swapped_labels", f"your answer is the other word on every test input ({a!r} where {b!r} "
                                         f"is right, and the reverse): the two cases are swapped (a condition "
                                         f"inverted, or the words returned the wrong way round)")
    return None


def properties(expected, got, source: Source | None = None) -> str | None:
    """Facts about an output that no transformation explained, where the right answer has them: probabilities
    that are not >= 0 or do not sum to 1, log-probabilities above 0, a batch whose rows are all alike."""
    if not (isinstance(expected, torch.Tensor) and isinstance(got, torch.Tensor)) or got.shape != expected.shape \
            or not got.is_floating_point() or not expected.is_floating_point() or not torch.isfinite(got).all():
        return None  # NaN or inf: the comparison's own words say it
    g = got.double()
    if is_distribution(expected):
        if (g < 0).any():
            return (f"your output holds negative values (down to {num(g.min())}), but probabilities are >= 0: "
                    f"they are exponentials divided by their sum")
        sums = g.sum(-1).flatten()
        off = int((sums - 1).abs().argmax())
        if abs(float(sums[off]) - 1) > 1e-4:
            return (f"your rows should be probability distributions, but row {off} sums to {num(sums[off])}, not 1: "
                    f"each row's values are its exponentials divided by exactly their own sum")
    log_probs = source is not None and (source.factors is not None or source.logits is not None) \
        and bool((expected <= 0).all())
    if log_probs and (g > 1e-4).any():
        return (f"your output holds positive values (up to {num(g.max())}), but these are log-probabilities: the "
                f"log of a probability, at most 1, is at most 0")
    if g.dim() >= 1 and g.shape[0] > 1 and torch.allclose(g, g[:1].expand_as(g)) \
            and not torch.allclose(expected, expected[:1].expand_as(expected)):
        return ("every row of your output is the same, but the rows' right answers differ: one answer for the "
                "whole batch, where each row needs its own")
    return None

# Torch's own words for a mistake any task can make, and the learner's words for it: the first whose torch
# text is in the error names it (a task's own ``errors=`` rule, which knows more, comes first).
TORCH_ERRORS = [
    (("must be Tensor, not tuple", "'tuple' object has no attribute"),
     "a pair went on where a tensor belongs: a block (or a model asked for its attention) returns two things, "
     "its output and its attention weights; unpack them, x, _ = block(x, mask)"),
    (("stack expects a non-empty TensorList", "expected a non-empty list of Tensors"),
     "torch.stack or torch.cat got an empty list: a loop that ran no step (max_new_tokens = 0) collected "
     "nothing; start from a tensor of the right shape (torch.zeros(B), or the prompt itself) instead"),
]


def torch_error(error: str) -> str | None:
    """A torch error the learner's call raised, in the learner's words, or None when it is none of these."""
    for texts, words in TORCH_ERRORS:
        if any(text in error for text in texts):
            return words
    return None
