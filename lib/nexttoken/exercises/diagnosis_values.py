"""The diagnosis's families of values computed from a task's ``Source``: the logits' other forms and places
(``from_logits``), a sum of log-probabilities and what is built from it (``from_factors``), and a count
that is a sum of parts (``from_terms``)."""

import itertools
import math

import torch

from .diagnosis_base import (EPSILONS, FORMS, TEMPERATURES, Finding, all_forms, epsilon_words, num, same,
                             temperature_words, underflow_words)


def _positions(every, at):
    """(what, logits) of each position but the right one, ``at``."""
    T = every.shape[1]
    right = at % T
    named = {0: "the first position", right - 1: "the second-to-last position"}
    for t in range(T):
        if t != right:
            yield f"{named.get(t, f'position {t}')}'s logits (of T = {T}), not the last's", every[:, t]


def from_logits(e, g, source):
    """The output is one of the logits' other forms, another position's, or a half-done normalisation."""
    if source is None or source.logits is None:
        return
    x = source.logits.double()
    pick = source.pick or (lambda v: v)
    forms = all_forms(x)
    right = next((f for f, v in forms.items() if same(pick(v).to(e.dtype), e)), None)
    if right is None:  # the answer is none of the three forms: nothing here is sure
        return
    asked = FORMS[right]

    def fits(values):
        try:
            return same(pick(values).to(g.dtype), g)
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
         f"(a row sums to {num(rows.flatten()[0])}, not 1): softmax is exp(x) / exp(x).sum(-1)"),
        ("unnormalised", torch.exp(x - x.amax(-1, keepdim=True)), lambda: "these are exp(x - max), not divided by "
         "their sum (each row's largest is 1, and a row sums to more): softmax divides them by their sum"),
        ("logits_over_sum", x / x.sum(-1, keepdim=True), lambda: "you divided the logits by their sum: softmax "
         "divides the *exponentials* by theirs, exp(x) / exp(x).sum(-1) (logits can be negative; exponentials "
         "are not)"),
        ("sigmoid", torch.sigmoid(x), lambda: "this is a sigmoid of each logit, which squashes each score on its own "
         f"(a row sums to {num(torch.sigmoid(x).sum(-1).flatten()[0])}, not 1); softmax normalises over the "
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
        along_d = all_forms(x.movedim(d, -1))[right].movedim(-1, d)
        if right in ("probs", "log_probs") and fits(along_d):  # over a size-1 axis: every entry 1 (or 0)
            yield Finding("wrong_dim", f"the normalisation went over dimension {d} (of size {x.shape[d]}), not the "
                                       f"vocabulary: softmax each row of scores over the last dimension, dim=-1")
    if source.every is not None:
        every = source.every.double()
        for what, logits in _positions(every, source.at):
            if fits(all_forms(logits)[right]):
                yield Finding("position", f"you used {what}: the last position predicts the next token")
        for how, logits in (("averaged", every.mean(1)), ("took the maximum of", every.amax(1))):
            if fits(all_forms(logits)[right]):
                yield Finding("over_positions", f"you {how} the logits over the positions (dim=1): the next "
                                                 f"token's scores are the last position's, logits[:, -1, :]")
        for how, values in (("averaged", all_forms(every)[right].mean(1)),):
            if fits(values):
                yield Finding("over_positions", f"you {how} the {asked} over the positions (dim=1): the next "
                                                 f"token's are the last position's alone")
    if right == "log_probs":
        probs = forms["probs"]
        for eps in EPSILONS:
            for values in (probs.clamp(min=eps), probs + eps):
                if fits(torch.log(values)):
                    yield Finding("epsilon", epsilon_words(eps))
        for t in TEMPERATURES:
            if fits(torch.log_softmax(x / t, -1)):
                yield Finding("temperature", temperature_words(t, asked))


def from_factors(e, g, source):
    """For what is built from a sum of log-probabilities, ``of(total, count)``: a factor left out, the log of
    a sum, an epsilon before the log, a product that underflowed, a mean divided by the wrong count."""
    if source is None or source.factors is None:
        return
    p = source.factors.double()
    T = p.shape[-1]
    of = source.of or (lambda total, count: total)

    def fits(total, count=T):  # in the output's precision: exp(500) is inf in float32, as the learner's is
        return same(of(total, count).to(g.dtype), g)
    for which, kept in (("first", p[..., 1:]), ("last", p[..., :-1])):  # divided by the T - 1 kept, or by T
        if fits(torch.log(kept).sum(-1), T - 1) or fits(torch.log(kept).sum(-1), T):
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
    yield from _mean_outside_log(p, T, fits)
    if fits(torch.logsumexp(p, -1)):
        yield Finding("logsumexp", "a logsumexp of the probabilities is log(exp(p_1) + ... + exp(p_T)): it adds "
                                    "numbers given as logs, but these are probabilities; take log of each, then sum")
    if fits(torch.log1p(p).sum(-1)):
        yield Finding("log1p", "you took log(1 + p) (log1p) of each factor: the chain rule adds log p")
    product = p.float().prod(-1)
    if bool((product == 0).any()) and fits(torch.log(product).double()):
        yield Finding("underflow", underflow_words("the probabilities"))
    for eps in EPSILONS:
        for values in (p.clamp(min=eps), p + eps):
            if fits(torch.log(values).sum(-1)):
                yield Finding("epsilon", epsilon_words(eps))
    if source.of is not None:  # a mean: the right total, divided by another count than the row's T
        yield from _counts(p, T, fits)
        yield from _exponent_base(p, T, source.of, g)


def _mean_outside_log(p, T, fits):
    """The mean taken before the log, not after: of the probabilities, or of their inverses (an arithmetic
    mean where the chain rule's is geometric)."""
    for what, total in (("the probabilities", T * torch.log(p.mean(-1))),
                        ("the probabilities' inverses, 1 / p,", -T * torch.log((1 / p).mean(-1)))):
        if T > 1 and fits(total):
            yield Finding("mean_outside_log", f"you averaged {what} (an arithmetic mean) where the chain rule "
                                              f"averages their logs: perplexity is exp(-mean(log p)), a geometric "
                                              f"mean, not 1 / mean(p) nor mean(1 / p)")


def _exponent_base(p, T, of, g):
    """A perplexity raised in another base than e: 2 ** H or 10 ** H with H in nats."""
    total = torch.log(p).sum(-1)
    for base in (2, 10):
        if same(of(total * math.log(base), T).to(g.dtype), g):
            yield Finding("log_base", f"you raised {base} to the mean negative log-probability: these logs are "
                                      f"natural (nats, base e), so the power is of e, torch.exp, not {base} **")


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
    # after one number hard-coded, which the other inputs confirm or not
    if fits(total, T + 1):
        yield Finding("count_plus_1", f"you divided by N + 1 = {T + 1}: the mean divides the sum by the number of "
                                      f"tokens in a row, N = {T} (shape[-1])")
    if p.dim() == 2 and p.shape[0] != T and fits(total, p.shape[0]):
        yield Finding("count_rows", f"you divided by the number of rows, B = {p.shape[0]} (shape[0], the batch "
                                    f"size): a row's mean divides by its number of tokens, N = {T} (shape[-1])")


SCALES = {1 / 3: "a third of", 1 / 2: "half", 2: "twice", 3: "three times", 4: "four times"}


def from_terms(e, g, source):
    """A count that is a sum of parts (``source.terms``): one part left out, counted twice or a wrong number
    of times (one too few, one too many, another number of the configuration's), at another size, two parts
    left out, or every part of a kind (every bias, every norm) left out."""
    terms, numbers = source.terms, source.numbers or {}
    gap = int(g) - int(e)
    for term in terms:
        for times, how in _times(term.count, term.kind, numbers):
            if (times - term.count) * term.size == gap:
                yield _term_finding(f"terms_{term.name}_{how}", _times_words(term, times, how, numbers))
        for scale, words in SCALES.items():
            if term.kind != "block" and round((scale - 1) * term.size) * term.count == gap:
                yield _term_finding(f"terms_{term.name}_size_{scale:.3g}", f"your count is {_way(gap)}: it has "
                                    f"{words} the size of the {term.name}, which is {term.shape}")
    kinds = sorted({t.kind for t in terms} - {"group", "block", "weight"})
    for chosen in [(k,) for k in kinds] + list(itertools.combinations(kinds, 2)):
        if -sum(t.size * t.count for t in terms if t.kind in chosen) == gap:
            what = " and every ".join({"bias": "bias", "norm": "LayerNorm parameter"}.get(k, k) for k in chosen)
            yield _term_finding(f"terms_no_{'_'.join(chosen)}", f"your count is too low: it leaves out every {what}: "
                                f"it counts the weight matrices and tables only (as a rule of thumb such as "
                                f"12 x d_model^2 per block does); add them")
    leaves = [t for t in terms if t.kind not in ("group", "block")]
    for a, b in itertools.combinations(leaves, 2):
        if -(a.size * a.count + b.size * b.count) == gap:
            yield _term_finding(f"terms_no_{a.name}_{b.name}", f"your count is too low: it leaves out the {a.name} "
                                f"({a.shape}) and the {b.name} ({b.shape}): add them")


def _times(count, kind, numbers):
    """(how many times a part may have been counted, the family's word for it), the right count aside."""
    out = [(0, "missing"), (2 * count, "twice")]
    if kind == "block":  # one too few or too many of a repeated block; of one tensor in each, a coincidence
        out += [(count - 1, "one_fewer"), (count + 1, "one_more")]
    out += [(n, f"as_{name}") for name, n in numbers.items()]
    return [(times, how) for times, how in out if times != count and times >= 0]


def _times_words(term, times, how, numbers) -> str:
    # where a number of the configuration is that many too, it may be the one the count used: both are said
    also = "".join(f" ({times} is also {name} here: did you multiply by {name}?)"
                   for name, n in numbers.items() if n == times and how != f"as_{name}")
    if how == "missing":
        return f"your count is too low: it leaves out the {term.name} ({term.shape}): add it"
    if how == "twice":
        return f"your count is too high: it has the {term.name} twice ({term.shape}): count it once{also}"
    name = how[3:] if how.startswith("as_") else None
    return (f"your count is {_way(times - term.count)}: it has the {term.name} {times} time{'s' * (times != 1)}, "
            f"where the model has {term.count} "
            f"({term.shape})" + (f": you used {name} = {times}, not the right number" if name else
                                 f": {'one too few' if times < term.count else 'one too many'}{also}"))


def _way(gap) -> str:
    return "too high" if gap > 0 else "too low"


def _term_finding(family, words) -> Finding:
    """A count's finding: it shows nothing of the count, so a prediction's first tries may be told it; it says
    how the whole count was made, so it comes before a task's own rule."""
    return Finding(family, words, safe=words, leading=True)
