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
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..tokenizer import END_OF_TEXT_ID
from .feedback import matches, overflowed

# The epsilons and clamps learners put before a log, and the temperatures they try (solved for exactly where
# the output is a distribution; tried from this list where it is a log-probability).
EPSILONS = (1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-12, 1e-15, 1e-20, 1e-30, 1e-38, 1.1754944e-38, 1e-45)
TEMPERATURES = tuple(round(t / 20, 2) for t in range(2, 61) if t != 20) + (1 / 0.8, 1 / 0.7, 1 / 0.9)


@dataclass(frozen=True)
class Source:
    """What a task's right answer is computed from, for the diagnosis: ``logits`` (..., V), the scores it
    normalises or returns as they are, with ``pick`` making the answer's shape of per-vocabulary values
    (gathering the targets; none: the answer is (..., V)); ``every`` (B, T, V), the logits of every position
    when ``logits`` is one of them, ``every[:, at]``; or ``factors`` (..., T), the probabilities whose
    logs, added over the last dimension, give the answer: ``of(total, count)`` (the sum itself by default;
    a perplexity is exp(-total / count)). For a loop that generates and scores (a pair (ids, score)):
    ``prompt_length``, and ``steps`` (B, n, V), each step's log-probabilities, the score being the sum of
    the chosen tokens' (``chosen`` (B, n)); ``fed`` (B, n) is the last token each step read."""
    logits: torch.Tensor | None = None
    pick: Callable | None = None
    every: torch.Tensor | None = None
    at: int = -1
    factors: torch.Tensor | None = None
    of: Callable | None = None
    prompt_length: int | None = None
    steps: torch.Tensor | None = None
    chosen: torch.Tensor | None = None
    fed: torch.Tensor | None = None


@dataclass(frozen=True)
class Finding:
    """A named transformation: its family (the same key in every task) and the learner's words. ``safe``: the
    words that show nothing of the right answer (its values or its shape), which a prediction's first tries
    may be told; None where the finding cannot be said without them. ``leading``: it says how the whole output
    was made (a loop's steps, a layout's boundary), so it is told before a task's own rules, which state one
    fact of one input."""
    family: str
    message: str
    safe: str | None = None
    leading: bool = False
    weak: bool = False  # consistent with this family but no evidence of it: confirms it, never proposes it


def _num(x) -> str:
    return f"{float(x):.4g}"


def _same(candidate, got) -> bool:
    """The output equals this transformation of the right answer (one that is defined and finite somewhere)."""
    return isinstance(candidate, torch.Tensor) and matches(candidate, got)


def _shown_at(expected, got) -> tuple[float, float]:
    """The right and the learner's value where they differ most: the entry that shows a mistake best."""
    e, g = expected.double().flatten(), got.double().flatten()
    gap = torch.nan_to_num((g - e).abs(), nan=math.inf, posinf=math.inf)
    i = int(gap.argmax())
    return float(e[i]), float(g[i])


def _is_distribution(t) -> bool:
    """Rows of probabilities over the last dimension: >= 0, each summing to 1."""
    return (t.is_floating_point() and t.dim() >= 1 and t.shape[-1] > 1 and bool((t >= 0).all())
            and bool(torch.allclose(t.double().sum(-1), torch.ones(()).double(), atol=1e-4)))


FORMS = {"logits": "the logits themselves", "probs": "probabilities", "log_probs": "log-probabilities"}


def _forms(x):
    return {"logits": x, "probs": torch.softmax(x, -1), "log_probs": torch.log_softmax(x, -1)}


def name(expected, got, source: Source | None = None) -> Finding | None:
    """The transformation of the right answer that the output is, if one is: the first that fits."""
    return next(findings(expected, got, source), None)


def may_lead(expected) -> bool:
    """Whether a wrong output of this right answer can have a leading finding: a layout's, a loop's."""
    return isinstance(expected, (tuple, list)) or (isinstance(expected, torch.Tensor) and expected.dtype == torch.bool)


def findings(expected, got, source: Source | None = None, leading: bool = False):
    """Every transformation of the right answer that the output is, most telling first (on one input two
    can agree: with logits in the hundreds, a logsumexp whose maximum was not added back is the logits).
    ``leading``: only where leading ones can be (a layout, a loop's ids), the rest not tried."""
    if isinstance(expected, (tuple, list)) and isinstance(got, (tuple, list)) and len(got) == len(expected):
        yield from _in_pair(expected, got, source, leading)
        return
    if not (isinstance(expected, torch.Tensor) and isinstance(got, torch.Tensor)) or got.is_complex():
        return
    if expected.dtype == torch.bool:
        yield from _layout(expected, got)
        return
    if leading:
        return
    if tuple(got.shape) != tuple(expected.shape):
        every = source.every if source is not None else None
        if every is not None and got.dim() == every.dim() and got.shape[:2] == every.shape[:2] \
                and _same(expected, got.select(1, source.at)):
            yield Finding("extra_axis", f"you kept every position, {tuple(got.shape)}: the next token's answer is "
                                        f"the last position's alone, {tuple(expected.shape)} (index time with -1)")
        yield from _reshaped(expected, got)
        return
    if not got.is_floating_point() or not expected.is_floating_point():
        return
    if source is not None and source.logits is not None and torch.isnan(got).any() \
            and not torch.isnan(expected).any() and float(source.logits.max()) > 88:
        yield Finding("overflow", f"NaN: {overflowed('logits', float(source.logits.max()))}")
    with torch.no_grad():
        yield from _from_logits(expected, got, source)
        yield from _from_factors(expected, got, source)
        yield from _from_expected(expected, got)


def _in_pair(e, g, source, leading=False):
    """A pair (ids, score) of a loop, judged at its first wrong element: the ids by where the loop parted from
    the reference's, the score by the families of a number (and of a loop's steps, from ``source``)."""
    for i, (right, mine) in enumerate(zip(e, g)):
        if matches(right, mine):
            continue
        if i == 0 and source is not None and source.prompt_length is not None:
            yield from _parting(right, mine, source.prompt_length)
            return
        for found in findings(right, mine, source if i == 1 else None, leading):
            yield Finding(found.family, f"element {i} of your output: {found.message}", leading=found.leading)
        if i == 1 and source is not None and source.steps is not None and not leading:
            yield from _from_steps(right, mine, source)
        return


def _parting(e, g, P):
    """The ids of a greedy loop against the reference's: how the new tokens part from the right ones."""
    if not (isinstance(g, torch.Tensor) and g.dim() == 2 and g.shape[0] == e.shape[0] and g.shape[1] >= P
            and torch.equal(g[:, :P], e[:, :P])):
        return
    right, mine = e[:, P:], g[:, P:]
    n, m = right.shape[1], mine.shape[1]
    if n and m == 2 * n and torch.equal(mine[:, ::2], mine[:, 1::2]) and torch.equal(mine[:, 0], right[:, 0]):
        yield Finding("appended_twice", f"every new token is appended twice ({m} new tokens for max_new_tokens = "
                                        f"{n}, in pairs): append each step's token once", leading=True)
    elif m != n and torch.equal(mine[:, :min(n, m)], right[:, :min(n, m)]):
        how, end, k = ("too many", "late", m - n) if m > n else ("too few", "early", n - m)
        after = ""
        if m < n and m and bool((mine[:, -1] == END_OF_TEXT_ID).all()):
            after = f", right after GPT-2's EOS id {END_OF_TEXT_ID}, but this loop has no EOS rule"
        yield Finding("stopped_" + end, f"your loop stopped {end}{after}: {k} step{'s' * (k != 1)} {how} ({m} new "
                                        f"token{'s' * (m != 1)} where max_new_tokens = {n}; the ones it made are "
                                        f"right): one step per new token, range(max_new_tokens)", leading=True)
    elif m == n and n:
        step = int((mine != right).any(0).nonzero()[0])
        row = int((mine[:, step] != right[:, step]).nonzero()[0])
        yield Finding("parted", f"your loop parts from the greedy one at new token {step + 1} of row {row}: "
                                f"{int(mine[row, step])} where the argmax of that step's logits is "
                                f"{int(right[row, step])} (the steps before it are right)")


def _from_steps(e, g, source):
    """A loop's score against the steps it took: the wrong entry of each step's log-probabilities added, or
    their product taken (which underflows)."""
    lp, chosen, fed = source.steps.double(), source.chosen, source.fed
    if lp.shape[1] == 0:
        return
    if _same(lp.sum(-1).sum(-1), g):
        yield Finding("whole_vocabulary", "log_prob adds the log-probabilities of the whole vocabulary at each "
                                          "step: take the chosen token's entry alone (gather with its id)")
    if fed is not None and _same(lp.gather(-1, fed[..., None])[..., 0].sum(-1), g):
        yield Finding("wrong_token", "log_prob scores the wrong token: at each step it takes the log-probability "
                                     "of the last token the model read, not of the token the step chose")
    for t in TEMPERATURES:  # each step's logits over t: log-probabilities are logits up to a shift, which it keeps
        if _same(torch.log_softmax(lp / t, -1).gather(-1, chosen[..., None])[..., 0].sum(-1), g):
            yield Finding("temperature", _temperature_words(t, "log-probabilities"))
    product = torch.exp(lp.gather(-1, chosen[..., None])[..., 0]).float().prod(-1)
    if bool((product == 0).any()) and _same(torch.log(product), g):
        yield Finding("underflow", _underflow_words("the chosen tokens' probabilities"))


def _underflow_words(what) -> str:
    # the output cannot tell a product of probabilities that underflowed from one of their inverses that overflowed
    return (f"a product of {what} left float32's range: a product of many probabilities underflows to 0 (below "
            f"about 1e-45), one of their inverses overflows to inf, and its log is then infinite. Add the logs "
            f"instead of multiplying (the chain rule's sum)")


def _layout(e, g):
    """A bool layout (a mask, the positions that change, the padded slots): the right one inverted, shifted by
    one place along the last dimension, reversed, with its rows reversed or all alike, or transposed. None of
    the words shows the answer."""
    if g.dtype != torch.bool:
        return
    if tuple(g.shape) != tuple(e.shape):
        if g.dim() == 2 and tuple(g.shape) == tuple(e.shape)[::-1] and e.shape[0] != e.shape[1] \
                and torch.equal(e.T, g):
            words = ("your layout is transposed: rows and columns swapped (one row per row of the input, one "
                     "column per position or slot)")
            yield Finding("transposed", words, safe=words, leading=True)
        if e.dim() == 2 and tuple(g.shape) == tuple(e.shape[1:]) and torch.equal(e[0], g):
            words = "you gave row 0 alone: the answer has one row per row of the input"
            yield Finding("row0", words, safe=words, leading=True)
        return

    def told(family, words):
        return Finding(family, words, safe=words, leading=True)
    if torch.equal(~e, g):
        yield told("inverted", "True and False are swapped: every entry is the opposite of the right one (a "
                               "condition inverted: > where <= is meant, or a ~ too many)")
    if e.shape[-1] == 1 and not torch.equal(e, g):  # a shift moves every entry out of sight: not contradicted
        yield Finding("shifted", "", safe="", weak=True)
    if e.shape[-1] > 1 and not torch.equal(e, g):
        if torch.equal(g[..., :-1], e[..., 1:]):
            yield told("shifted", "each row's True entries are shifted one place earlier (towards index 0) than "
                                  "the right ones: an off-by-one at the boundary (is the boundary itself, such as "
                                  "position j or a row's EOS step, on the right side? places counted from 0 or from "
                                  "1?)")
        if torch.equal(g[..., 1:], e[..., :-1]):
            yield told("shifted", "each row's True entries are shifted one place later (away from index 0) than "
                                  "the right ones: an off-by-one at the boundary (is the boundary itself, such as "
                                  "position j or a row's EOS step, on the right side? places counted from 0 or from "
                                  "1?)")
        if torch.equal(e.flip(-1), g):
            yield told("reversed", "your entries are in reverse order along the last dimension, as if the places "
                                   "were counted from the end: index 0 is the first position")
    if e.dim() >= 2 and e.shape[0] > 1 and not torch.equal(e, e[:1].expand_as(e)):
        if torch.equal(e.flip(0), g):
            yield told("rows_swapped", ROWS_SWAPPED)
        if torch.equal(g, g[:1].expand_as(g)):  # a fact, not how the output was made: after a task's rules
            yield Finding("rows_alike", ROWS_ALIKE, safe=ROWS_ALIKE)


ROWS_SWAPPED = "your rows are the right ones in reverse order: row i of the output belongs to row i of the input"
ROWS_ALIKE = ("every row of your output is the same, but the rows' right answers differ: one answer for the "
              "whole batch, where each row needs its own")


def _reshaped(e, g):
    """An output of another shape that is the right one rearranged, reduced or with an axis too many."""
    if g.dim() == 2 and e.dim() == 2 and tuple(g.shape) == tuple(e.shape)[::-1] and _same(e.T, g):
        yield Finding("transposed", f"your output is the right one transposed: {tuple(g.shape)} where "
                                     f"{tuple(e.shape)} is asked (rows and columns swapped)")
    if e.dim() >= 1 and tuple(g.shape) == tuple(e.shape[1:]) and _same(e[0], g):
        if e.shape[0] > 1:
            yield Finding("row0", f"you kept row 0 only: {tuple(g.shape)} is the first row's answer, and the "
                                   f"batch has {e.shape[0]} rows; keep every row, {tuple(e.shape)}")
        else:  # a batch of one: the same slip, or a squeeze too many
            yield Finding("row0", f"the batch dimension is gone: {tuple(g.shape)} where {tuple(e.shape)} is asked "
                                   f"(an index [0], or a squeeze() of every size-1 dimension); keep every row")
    if any(g.shape[d] == 1 and tuple(g.shape[:d] + g.shape[d + 1:]) == tuple(e.shape) for d in range(g.dim())) \
            and _same(e.reshape(g.shape), g):  # e with a size-1 axis inserted
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
            if _same(total, g):
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
                if _same(reduced, g):
                    yield Finding("reduced", f"you {how} the right values over dimension {d} (of size "
                                              f"{e.shape[d]}): the task asks for each of them, {tuple(e.shape)}")
    if g.dim() == e.dim() + 1:
        for d in range(g.dim()):
            for i, which in ((-1, "last"), (0, "first")):
                if tuple(g.shape[:d] + g.shape[d + 1:]) == tuple(e.shape) \
                        and _same(e, g.select(d, i)):
                    yield Finding("extra_axis", f"your output keeps an axis too many, {tuple(g.shape)}: its "
                                                 f"{which} entry along dimension {d} is the right answer, and the "
                                                 f"task asks for that one alone, {tuple(e.shape)}")


def _positions(every, at):
    """(what, logits) of each position but the right one, ``at``."""
    T = every.shape[1]
    right = at % T
    named = {0: "the first position", right - 1: "the second-to-last position"}
    for t in range(T):
        if t != right:
            yield f"{named.get(t, f'position {t}')}'s logits (of T = {T}), not the last's", every[:, t]


def _from_logits(e, g, source):
    """The output is one of the logits' other forms, another position's, or a half-done normalisation."""
    if source is None or source.logits is None:
        return
    x = source.logits.double()
    pick = source.pick or (lambda v: v)
    forms = _forms(x)
    right = next((f for f, v in forms.items() if _same(pick(v).to(e.dtype), e)), None)
    if right is None:  # the answer is none of the three forms: nothing here is sure
        return
    asked = FORMS[right]

    def fits(values):
        try:
            return _same(pick(values).to(g.dtype), g)
        except Exception:  # a form that cannot be picked this way
            return False

    for f, values in forms.items():
        if f != right and fits(values):
            how = {"logits": "the raw logits (scores), not normalised",
                   "probs": "probabilities (a softmax)", "log_probs": "log-probabilities (a log_softmax)"}[f]
            yield Finding(f"form_{f}", f"these are {how}; the task asks for {asked}")
    rows = torch.exp(x).sum(-1)
    halves = [
        ("unnormalised", torch.exp(x), lambda: f"these are the exponentials of the logits, not divided by their sum "
         f"(a row sums to {_num(rows.flatten()[0])}, not 1): softmax is exp(x) / exp(x).sum(-1)"),
        ("unnormalised", torch.exp(x - x.amax(-1, keepdim=True)), lambda: "these are exp(x - max), not divided by "
         "their sum (each row's largest is 1, and a row sums to more): softmax divides them by their sum"),
        ("logits_over_sum", x / x.sum(-1, keepdim=True), lambda: "you divided the logits by their sum: softmax "
         "divides the *exponentials* by theirs, exp(x) / exp(x).sum(-1) (logits can be negative; exponentials "
         "are not)"),
        ("sigmoid", torch.sigmoid(x), lambda: "this is a sigmoid of each logit, which squashes each score on its own "
         f"(a row sums to {_num(torch.sigmoid(x).sum(-1).flatten()[0])}, not 1); softmax normalises over the "
         "vocabulary"),
        ("max_only", x - x.amax(-1, keepdim=True), lambda: "you subtracted each row's maximum but not the log of the "
         "sum of the exponentials: x - max is not normalised. log_softmax(x) = x - logsumexp(x); the maximum is "
         "only a shift that keeps exp from overflowing"),
        ("max_not_added_back", forms["log_probs"] + x.amax(-1, keepdim=True), lambda: "the maximum you subtracted "
         "inside the logsumexp was not added back: logsumexp(x) = max + log(sum(exp(x - max)))"),
        ("whole_tensor", x - torch.logsumexp(x.flatten(), 0), lambda: "you normalised over the whole tensor at once "
         "(every dimension, one constant for all): normalise each position's scores over the vocabulary, dim=-1"),
    ]
    if right == "logits" and fits(x - x.amax(-1, keepdim=True)):
        yield Finding("row_offset", "you subtracted each row's maximum: the task asks for the logits as they are "
                                    "(the shift matters to exp, in a softmax, not here)")
    if right == "logits" and fits(torch.sigmoid(x)):
        yield Finding("sigmoid", "these are sigmoids of the logits (each squashed into (0, 1) on its own): the "
                                 "task asks for the logits themselves")
    for family, values, message in halves:
        if right in ("probs", "log_probs") and fits(values):
            yield Finding(family, message())
    yield from _elsewhere(x, source, right, asked, forms, fits)


def _elsewhere(x, source, right, asked, forms, fits):
    """The right form, computed from the wrong place: another axis, another position, a mean over positions,
    an epsilon or a clamp before the log, a temperature."""
    for d in range(x.dim() - 1):  # normalised along another axis than the vocabulary
        along_d = _forms(x.movedim(d, -1))[right].movedim(-1, d)
        if right in ("probs", "log_probs") and fits(along_d):  # over a size-1 axis: every entry 1 (or 0)
            yield Finding("wrong_dim", f"the normalisation went over dimension {d} (of size {x.shape[d]}), not the "
                                       f"vocabulary: softmax each row of scores over the last dimension, dim=-1")
    if source.every is not None:
        every = source.every.double()
        for what, logits in _positions(every, source.at):
            if fits(_forms(logits)[right]):
                yield Finding("position", f"you used {what}: the last position predicts the next token")
        for how, logits in (("averaged", every.mean(1)), ("took the maximum of", every.amax(1))):
            if fits(_forms(logits)[right]):
                yield Finding("over_positions", f"you {how} the logits over the positions (dim=1): the next "
                                                 f"token's scores are the last position's, logits[:, -1, :]")
        for how, values in (("averaged", _forms(every)[right].mean(1)),):
            if fits(values):
                yield Finding("over_positions", f"you {how} the {asked} over the positions (dim=1): the next "
                                                 f"token's are the last position's alone")
    if right == "log_probs":
        probs = forms["probs"]
        for eps in EPSILONS:
            for values in (probs.clamp(min=eps), probs + eps):
                if fits(torch.log(values)):
                    yield Finding("epsilon", _epsilon_words(eps))
        for t in TEMPERATURES:
            if fits(torch.log_softmax(x / t, -1)):
                yield Finding("temperature", _temperature_words(t, asked))


def _epsilon_words(eps) -> str:
    # a clamp at eps and eps added give the same logs within the tolerance: the message names both
    return (f"you raised the tiny probabilities before the log (a clamp at {eps:.3g}, or an epsilon of {eps:.3g} "
            f"added): every probability near {eps:.3g} or below then gets the wrong log. Take the log of the values "
            f"as they are (log_softmax never underflows; a sum of logs needs no guard)")


def _temperature_words(t, asked) -> str:
    return (f"these are the right {asked} at a temperature of {t:.3g}, softmax(logits / {t:.3g}) "
            f"({'sharper' if t < 1 else 'flatter'} than the model's own): the task asks for temperature 1, the "
            f"logits as they are")


def _from_factors(e, g, source):
    """For what is built from a sum of log-probabilities, ``of(total, count)``: a factor left out, the log of
    a sum, an epsilon before the log, a product that underflowed, a mean divided by the wrong count."""
    if source is None or source.factors is None:
        return
    p = source.factors.double()
    T = p.shape[-1]
    of = source.of or (lambda total, count: total)

    def fits(total, count=T):  # in the output's precision: exp(500) is inf in float32, as the learner's is
        return _same(of(total, count).to(g.dtype), g)
    for which, kept in (("first", p[..., 1:]), ("last", p[..., :-1])):
        if fits(torch.log(kept).sum(-1), T - 1):
            if T == 1:  # leaving out either gives the empty sum, 0: which one is not sure
                yield Finding("factor_missing", "you left out a factor: with T = 1 a row's log-probability is "
                                                "log p_1, and your sum is empty, 0 (a slice such as [1:] or "
                                                "range(1, T) skips one)")
            else:
                yield Finding("factor_missing", f"you left out the {which} factor: a row's log-probability adds "
                                                 f"the logs of all its {T} factors, log p_1 + ... + log p_{T}")
    if fits(torch.log(p.sum(-1))):
        yield Finding("log_of_sum", "you took the log of the sum of the probabilities (logsumexp of their logs "
                                     "is that too): the log of a *product* is the sum of the logs")
    if fits(torch.logsumexp(p, -1)):
        yield Finding("logsumexp", "a logsumexp of the probabilities is log(exp(p_1) + ... + exp(p_T)): it adds "
                                    "numbers given as logs, but these are probabilities; take log of each, then sum")
    if fits(torch.log1p(p).sum(-1)):
        yield Finding("log1p", "you took log(1 + p) (log1p) of each factor: the chain rule adds log p")
    product = p.float().prod(-1)
    if bool((product == 0).any()) and fits(torch.log(product).double()):
        yield Finding("underflow", _underflow_words("the probabilities"))
    for eps in EPSILONS:
        for values in (p.clamp(min=eps), p + eps):
            if fits(torch.log(values).sum(-1)):
                yield Finding("epsilon", _epsilon_words(eps))
    if source.of is not None:  # a mean: the right total, divided by another count than the row's T
        yield from _counts(p, T, fits)


def _counts(p, T, fits):
    """A mean over a row's T factors divided by another count: T - 1, every entry of the batch, or one number
    written into the code (which fits a row of that length only)."""
    total = torch.log(p).sum(-1)
    if fits(total, T - 1):  # with T = 1 that divides by 0
        yield Finding("count_minus_1", f"you divided by N - 1 = {T - 1}: the mean divides the sum by the number of "
                                       f"tokens in a row, N = {T} (shape[-1])")
    if p.dim() == 2 and p.shape[0] > 1 and fits(total, p.numel()):
        yield Finding("count_all", f"you divided each row's sum by the number of entries of the whole batch, "
                                   f"{p.numel()} (B x N, numel()): a row's mean divides by its own N = {T}")
    for k in range(1, 65):
        if k != T and fits(total, k):
            yield Finding(f"count_{k}", f"you divided by {k} whatever the row's length (a number of tokens "
                                        f"hard-coded?): this row has N = {T}; divide by its own length, shape[-1]")


def _from_expected(e, g):
    """Transformations of the right answer alone, for any task: its rows, its sign, a factor, a shift, a
    missing normalisation, a temperature, a top-k."""
    right, mine = _shown_at(e, g)
    if e.dim() >= 1 and e.shape[0] > 1 and not torch.allclose(e, e[:1].expand_as(e)):
        if _same(e[:1].expand_as(e), g):
            yield Finding("row0", "every row has row 0's answer: one answer for the whole batch (an index "
                                   "such as [0] serves a batch of one only); keep every row's own")
        if _same(e.flip(0), g):
            yield Finding("rows_swapped", "your rows are the right ones in reverse order: row i of the output "
                                           "belongs to row i of the input")
    if bool((e.abs() > 1e-6).any()) and _same(-e, g):
        yield Finding("sign", f"the sign is flipped: your values are the negatives of the right ones ({_num(mine)} "
                               f"where {_num(right)} is right)")
    if _is_distribution(e):
        yield from _distribution(e, g)
    if e.dim() >= 1 and e.shape[-1] > 1:
        if _same(e.sort(-1, descending=True).values, g) or _same(e.sort(-1).values, g):
            yield Finding("sorted", "your rows are sorted: the values are right, but entry i of a row belongs "
                                     "to token i, so keep them in the vocabulary's order")
        if _same(e[..., :-1], g[..., 1:]) or _same(e[..., 1:], g[..., :-1]):
            yield Finding("shifted", "your values are the right ones shifted by one place along the last "
                                      "dimension: check which index pairs with which (an off-by-one)")
    if bool((e <= 0).all()) and _same(torch.exp(e), g):
        yield Finding("exp_of", "your values are exp of the right ones: probabilities where their logs are "
                                 "asked (take the log)")
    if bool((e > 0).all()) and _same(torch.log(e), g):
        yield Finding("log_of", "your values are the log of the right ones: log-probabilities where the "
                                 "probabilities themselves are asked")
    scale = float((g.double() * e.double()).sum() / (e.double() ** 2).sum()) if (e != 0).any() else 0.0
    # a factor solved for fits any one number: unless it is a log base's, it says something only where it fits several
    if math.isfinite(scale) and abs(scale) > 1e-6 and abs(scale - 1) > 1e-3 and _same(e * scale, g):
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
            yield Finding("constant", f"every value is off by the same amount, {_num(offset.mean())}: a constant "
                                       f"was added or left out (such as a normaliser taken over the whole tensor)")
        elif e.dim() >= 1 and e.shape[-1] > 2 and float((offset - offset[..., :1]).abs().max()) <= 1e-4 \
                and float(offset.abs().min()) > 1e-3:  # a shift, not the noise of a few entries off
            yield Finding("row_offset", f"each row is off by its own constant (row 0 by {_num(offset.flatten()[0])}): "
                                        f"a shift per row, such as subtracting the row's maximum or its logsumexp, "
                                        f"added or left out")


def _distribution(e, g):
    """The right answer is rows of probabilities: the output is them unnormalised, tempered or top-k'd."""
    ed, gd = e.double(), g.double()
    ratio = gd / ed
    if bool((gd >= 0).all()) and torch.isfinite(ratio).all() and (ed > 1e-30).all():
        per_row = ratio.mean(-1, keepdim=True)
        if _same(ed * per_row, g) and not torch.allclose(per_row, torch.ones(()).double(), atol=1e-4):
            yield Finding("unnormalised", f"your rows are proportional to the right probabilities but sum to "
                                           f"{_num(gd.sum(-1).flatten()[0])}, not 1: they were not divided by their "
                                           f"sum (softmax is exp(x) / exp(x).sum(-1))")
    if _is_distribution(g) and (gd > 0).all() and (ed > 0).all():
        le, lg = torch.log(ed), torch.log(gd)  # logits up to a constant per row: solve softmax(le / t) = g
        le, lg = le - le.mean(-1, keepdim=True), lg - lg.mean(-1, keepdim=True)
        slope = float((le * lg).sum() / (le * le).sum())
        if slope > 0 and abs(slope - 1) > 1e-3 and _same(torch.softmax(le * slope, -1), g):
            yield Finding("temperature", _temperature_words(1 / slope, "probabilities"))
    if _is_distribution(g):
        kept = gd > 0
        k = int(kept.sum(-1).max())
        if k < e.shape[-1] and bool((kept.sum(-1) == k).all()):
            top = ed.topk(k, -1).indices
            mask = torch.zeros_like(kept).scatter(-1, top, True)
            renormalised = torch.where(mask, ed, 0) / torch.where(mask, ed, 0).sum(-1, keepdim=True)
            if torch.equal(mask, kept) and _same(renormalised, g):
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
    if _is_distribution(expected):
        if (g < 0).any():
            return (f"your output holds negative values (down to {_num(g.min())}), but probabilities are >= 0: "
                    f"they are exponentials divided by their sum")
        sums = g.sum(-1).flatten()
        off = int((sums - 1).abs().argmax())
        if abs(float(sums[off]) - 1) > 1e-4:
            return (f"your rows should be probability distributions, but row {off} sums to {_num(sums[off])}, not 1: "
                    f"each row's values are its exponentials divided by exactly their own sum")
    log_probs = source is not None and (source.factors is not None or source.logits is not None) \
        and bool((expected <= 0).all())
    if log_probs and (g > 1e-4).any():
        return (f"your output holds positive values (up to {_num(g.max())}), but these are log-probabilities: the "
                f"log of a probability, at most 1, is at most 0")
    if g.dim() >= 1 and g.shape[0] > 1 and torch.allclose(g, g[:1].expand_as(g)) \
            and not torch.allclose(expected, expected[:1].expand_as(expected)):
        return ("every row of your output is the same, but the rows' right answers differ: one answer for the "
                "whole batch, where each row needs its own")
    return None
