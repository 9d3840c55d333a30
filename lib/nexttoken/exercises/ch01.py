"""Chapter 1, the chain rule: tasks for the exercise notebook."""

import math

import torch

from ..recorder import watches
from .common import chain_tables, random_ids, seeded
from ..recorder.words import counted
from .diagnosis import Source
from .feedback import describe, side_by_side
from .task import Known, Mistake, Question, Task

CHAPTER = "ch01"
TASKS = ["q1", "q2", "q3", "q4"]
# The core tasks: what the lesson asks of every learner and what an LMS grade counts by default (the notebook's
# "[core" headings say the same: tests/exercises/test_core_only.py); the rest is practice.
CORE = ["q3"]


def _q1_cases():
    short = torch.rand(2, 5, generator=seeded(1)) * 0.9 + 0.05
    long = torch.rand(1, 400, generator=seeded(2)) * 0.02 + 0.001  # a product that underflows float32
    # tiny factors (a clamp or an epsilon shows) and factors of exactly 1 (log 1 = 0)
    tiny = torch.tensor([[1e-30, 1.0, 0.5], [1.0, 1.0, 1.0], [1e-8, 1e-12, 0.9]])
    return [(torch.tensor([[1.0, 0.5, 0.25]]),), (torch.tensor([[0.3]]),), (short,), (tiny,), (long,)]


def _q1_reference(step_probs):
    return torch.log(step_probs).sum(dim=-1)


def _q1_diagnose(args, expected, got):
    step_probs = args[0]
    if got.shape == expected.shape and torch.isinf(got).any() and not torch.isinf(expected).any():
        rows = torch.isinf(got).nonzero().flatten()
        products = step_probs.prod(dim=-1)
        if (products[rows] == 0).all():
            T, row = step_probs.shape[-1], int(rows[0])
            # The true product's size, from the right answer (its log): below float64's smallest number
            # too, so the message holds whichever float type the product was taken in.
            power = math.floor(float(expected[row]) / math.log(10))
            tiny = " (below even float64's smallest, about 5e-324)" if power < -324 else ""
            raise Mistake(f"you got {float(got[row])}: the product of {T} small probabilities is about 1e{power}"
                          f"{tiny}, so it underflows to 0 in float32 (smallest about 1e-45), and log(0) = -inf. "
                          f"Add log-probabilities instead of multiplying probabilities")
        row = int(rows[(products[rows] != 0).nonzero()[0, 0]])
        raise Mistake(f"you got {float(got[row])} in row {row}, whose factors' product is {float(products[row]):.3g}: "
                      f"that is not underflow, so something you took the log of was 0 (or you divided by 0). No "
                      f"factor is 0: take the log of each factor itself (log 1 = 0 for a factor of 1), then add")
    if got.shape == step_probs.shape:
        raise Mistake("you returned one value per step; sum over the time dimension (dim=-1) to get one "
                      "value per sequence")
    if got.shape == step_probs.shape[-1:] and step_probs.shape[0] != step_probs.shape[-1]:
        raise Mistake("you summed over the batch (dim=0); each sequence is a row: sum over dim=-1")


q1 = Question(Task(
    name="q1", function="log_prob_from_step_probs", title="log-probability of a sequence", chapter=CHAPTER,
    cases=_q1_cases, reference=_q1_reference, diagnose=_q1_diagnose, source=lambda p: Source(factors=p),
    known=[
        Known("you used log10; the chain rule in nats uses the natural log, torch.log",
              lambda p: torch.log10(p).sum(-1)),
        Known("you used log2 (bits); the chain rule in nats uses the natural log, torch.log",
              lambda p: torch.log2(p).sum(-1)),
        Known("you averaged the log-probabilities; the log of a product is their sum",
              lambda p: torch.log(p).mean(-1)),
        Known("these are probabilities, not log-probabilities: take the log of each factor, then sum",
              lambda p: p.prod(-1)),
        Known("you added the probabilities themselves; the log of a product is the sum of the logs",
              lambda p: p.sum(-1)),
        Known("the sign is flipped: a log-probability is <= 0 (you computed the negative log-likelihood)",
              lambda p: -torch.log(p).sum(-1)),
    ],
    hints=("The log turns the product of the chain rule into something easier to add up.",
           "log(a * b * c) = log a + log b + log c; each row of step_probs is one sequence.",
           "Take the natural log elementwise, then reduce over the last dimension."),
))


def _q2_cases():
    # Extreme logits (spread in the hundreds, offset by +500): softmax then log gives log(0) = -inf, and
    # exp without the max shift overflows; only log_softmax (or a shifted logsumexp) is right there.
    extreme = torch.randn(2, 5, 13, generator=seeded(9)) * 100 + 500
    return [(torch.randn(1, 3, 7, generator=seeded(5)) * 3, random_ids(6, 1, 3, vocab=7)),
            (torch.randn(1, 2, 5, generator=seeded(7)), random_ids(7, 1, 2, vocab=5)),  # T = 2: one value
            (torch.randn(2, 6, 11, generator=seeded(3)), random_ids(4, 2, 6, vocab=11)),
            (extreme, random_ids(8, 2, 5, vocab=13))]


def _q2_reference(logits, input_ids):
    log_probs = torch.log_softmax(logits[:, :-1], dim=-1)
    return log_probs.gather(-1, input_ids[:, 1:, None]).squeeze(-1)


def _q2_diagnose(args, expected, got):
    logits, ids = args
    if tuple(got.shape) == tuple(ids.shape):
        raise Mistake("you returned T values per row; position t predicts token t + 1, so there are T - 1: "
                      "drop the last position's logits and the first token")
    if got.shape != expected.shape:
        return
    # normalised over the batch or the positions instead of the vocabulary, however the log was taken: where
    # log(softmax(...)) underflowed to -inf, the right log_softmax over that dimension is far below 0
    finite = torch.isfinite(got)
    for dim, what in ((1, "positions (dim=1)"), (0, "batch (dim=0)")):
        wrong = _gather(torch.log_softmax(logits[:, :-1], dim), ids[:, 1:])
        if (wrong[~finite] < -80).all() and torch.allclose(got[finite], wrong[finite], atol=1e-4):
            raise Mistake(f"you normalised over the {what}, not over the vocabulary: after slicing, "
                          f"logits[:, :-1] is (B, T - 1, V), and each position's V logits are what softmax "
                          f"turns into probabilities. Use torch.log_softmax(..., dim=-1)")


def _gather(scores, ids):
    return scores.gather(-1, ids[..., None]).squeeze(-1)


def _q2_source(logits, ids):
    """The scores the answer normalises, and how it picks each target's entry of them."""
    return Source(logits=logits[:, :-1], pick=lambda values: _gather(values, ids[:, 1:]))


def _q2_error(args, error):
    if "Index tensor must have the same number of dimensions" in error:
        return ("gather needs an index with as many dimensions as the tensor it picks from: the targets "
                "input_ids[:, 1:] are (B, T - 1), the log-probabilities (B, T - 1, V). Add a trailing dimension, "
                "input_ids[:, 1:, None] (or .unsqueeze(-1)), and squeeze it from the result")


q2 = Question(Task(
    name="q2", function="token_log_probs_from_logits", title="per-token log-probabilities (teacher forcing)",
    chapter=CHAPTER, cases=_q2_cases, reference=_q2_reference, diagnose=_q2_diagnose, source=_q2_source,
    errors=_q2_error,
    known=[
        Known("off by one: you scored token t with the logits of position t; the logits of position t - 1 "
              "predict token t", lambda lg, ids: _gather(torch.log_softmax(lg[:, 1:], -1), ids[:, 1:])),
        Known("off by one: you scored token t (not t + 1) with position t's logits; the targets are "
              "input_ids[:, 1:]", lambda lg, ids: _gather(torch.log_softmax(lg[:, :-1], -1), ids[:, :-1])),
        Known("the shift is reversed: you paired position t + 1's logits with token t; position t's logits "
              "score the token after it, so the logits of positions 0 to T - 2 go with the tokens at 1 to T - 1",
              lambda lg, ids: _gather(torch.log_softmax(lg[:, 1:], -1), ids[:, :-1])),
        Known("these are probabilities; take their log (torch.log_softmax)",
              lambda lg, ids: _gather(torch.softmax(lg[:, :-1], -1), ids[:, 1:])),
        Known("you took the log of the softmax: a probability below about 1e-45 underflows to 0 in float32 (here "
              "the logits spread over hundreds), and log(0) = -inf, though its log-probability is a finite number. "
              "torch.log_softmax computes the log directly, without the underflow",
              lambda lg, ids: _gather(torch.log(torch.softmax(lg[:, :-1], -1)), ids[:, 1:])),
        Known("your log-sum-exp has no max shift: exp of a logit above 88 overflows float32 to inf, and "
              "x - log(inf) = -inf. Subtract each row's maximum before exp and add it back after the log, or use "
              "torch.log_softmax, which does",
              lambda lg, ids: (lambda x: _gather(x - torch.log(torch.exp(x).sum(-1, keepdim=True)), ids[:, 1:]))(
                  lg[:, :-1])),
        Known("these are raw logits: normalise them with log_softmax over the vocabulary first",
              lambda lg, ids: _gather(lg[:, :-1], ids[:, 1:])),
        Known("the log_softmax went over the wrong dimension: normalise over the vocabulary, dim=-1",
              lambda lg, ids: _gather(torch.log_softmax(lg, 1)[:, :-1], ids[:, 1:])),
        Known("the log_softmax went over the wrong dimension: normalise over the vocabulary, dim=-1",
              lambda lg, ids: _gather(torch.log_softmax(lg[:, :-1], 1), ids[:, 1:])),
    ],
    hints=("Which position's logits predict the token at position t? Not position t itself.",
           "Position t - 1 predicts token t: pair logits[:, :-1] with the targets input_ids[:, 1:].",
           "Normalise each position's logits into log-probabilities over the vocabulary, then pick the "
           "target's entry with .gather on the last dimension (it needs an index with a trailing 1)."),
))


def _q3_cases():
    return [(torch.tensor([[-0.5, -1.0, -1.5]]),), (torch.tensor([[-2.0]]),),  # N = 1: exp(2)
            (torch.log(torch.rand(2, 6, generator=seeded(7)) * 0.9 + 0.05),),
            (torch.log(torch.rand(3, 40, generator=seeded(8)) * 0.5 + 0.01),),
            # 300 tokens around log 0.007: their probabilities' product underflows float32 to 0
            (torch.log(torch.rand(2, 300, generator=seeded(6)) * 0.01 + 0.002),),
            # log-probabilities of exactly 0 (tokens the model was sure of): an average that skips zeros as if
            # they were padding divides by too few tokens
            (torch.tensor([[0.0, -1.2, -0.3, 0.0], [-0.7, 0.0, -2.0, -0.1]]),)]


def _perplexity(token_log_probs):
    return torch.exp(-token_log_probs.mean(dim=-1))


q3 = Question(Task(
    name="q3", function="perplexity", title="perplexity from token log-probabilities", chapter=CHAPTER,
    cases=_q3_cases, reference=_perplexity,
    # exp(-mean log p): the factors' logs, summed, divided by their count (a count or a factor can slip)
    source=lambda lp: Source(factors=torch.exp(lp), of=lambda total, count: torch.exp(-total / count)),
    known=[
        Known("the sign: the mean log-probability is negative; perplexity is exp of the mean *negative* "
              "log-probability (it is >= 1)", lambda lp: torch.exp(lp.mean(-1))),
        Known("you used the sum; perplexity uses the mean per token, so that long and short texts compare",
              lambda lp: torch.exp(-lp.sum(-1))),
        Known("this is the cross-entropy (mean negative log-probability) itself; perplexity is its exp",
              lambda lp: -lp.mean(-1)),
        Known("you averaged the probabilities' inverses; perplexity is exp of the average negative "
              "log-probability (a geometric mean, not an arithmetic one)", lambda lp: torch.exp(-lp).mean(-1)),
        Known("base 2 with natural logs: the log-probabilities are in nats, so use exp (base e)",
              lambda lp: torch.pow(2.0, -lp.mean(-1))),
        Known("you averaged over the batch (dim=0): one perplexity per row, average over dim=-1",
              lambda lp: torch.exp(-lp.mean(0))),
        Known("you left out the log-probabilities that are exactly 0: they are not padding but tokens of "
              "probability 1, and they count; average over every token of the row",
              lambda lp: torch.exp(-lp.sum(-1) / (lp != 0).sum(-1))),
    ],
    hints=("Perplexity is 1 for a model that is always sure and right, and V for a uniform guess over V "
           "tokens: which average of the log-probabilities gives that?",
           "It is the exponential of the cross-entropy, the mean negative log-probability per token.",
           "Average each row over its tokens (dim=-1), negate, exponentiate."),
))


# q4 (empirical): the chain rule, measured. Sampling a text token by token, each token from p(x_t | x<t),
# draws whole texts with probability p(x1) p(x2 | x1): counted over many draws, the frequencies of the
# two-token texts approach those products.

def _joint_frequencies(first_probs, next_probs, n_draws, generator):
    x1 = torch.multinomial(first_probs, n_draws, replacement=True, generator=generator)
    x2 = torch.multinomial(next_probs[x1], 1, generator=generator).squeeze(-1)
    V = first_probs.shape[0]
    return torch.bincount(x1 * V + x2, minlength=V * V).reshape(V, V).float() / n_draws


SIGMAS = 5  # each frequency within 5 standard deviations of its probability (plus 3 draws, below)


def _q4_cases():
    return [(*chain_tables(11, 4), 10_000, seeded(1)), (*chain_tables(12, 2), 10_000, seeded(2)),
            (*chain_tables(13, 6, spread=1.0), 20_000, seeded(3)), (*chain_tables(14, 3), 1, seeded(4)),
            (*chain_tables(15, 5), 7, seeded(5))]


def _q4_verify(args, got):
    """A count of the n draws that are the text (a, b) is Binomial(n, p) with p = p(a) p(b | a): its
    frequency has mean p and standard deviation sqrt(p (1 - p) / n). Any right way of drawing (multinomial,
    inverse CDF on uniforms, another generator call order) lands within SIGMAS of them nearly always (for
    one entry a normal tail of about 6e-7; for the at most 36 entries here, under 3e-5), and 3 / n more
    covers the tiniest probabilities, whose counts are 0, 1 or 2 and not normal. Every case is seeded, so
    one answer always gives the same result: a pass or a fail is not luck from run to run. Counts that sit
    closer to their expectations than a sample can (rounded expectations) are refused too: draws land that
    close with a probability under TOO_CLOSE (``_too_close``)."""
    first, table, n, _ = args
    V = first.shape[0]
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != (V, V) or not got.is_floating_point():
        return (f"your frequencies should be a float tensor of shape ({V}, {V}), one entry per text (x1, x2), "
                f"but they are {describe(got)}", "")
    p = first[:, None] * table
    if not torch.isfinite(got).all():  # NaN compares False with everything: it would slip through below
        bad = int((~torch.isfinite(got)).sum())
        return (f"your frequencies hold NaN or inf ({bad} of the {V * V} entries): a frequency is a count divided "
                f"by n_draws, a number between 0 and 1 (a division by 0, or the log or mean of an empty "
                f"selection, gives NaN)", side_by_side(p, got) if V * V <= 24 else "")
    counts = got.double() * n
    whole = (counts - counts.round()).abs().max() <= 1e-3
    for drawn in (n - 1, n + 1) if not (whole and round(float(counts.sum())) == n) else ():
        for by in (n, drawn):  # an off-by-one number of texts, divided by n_draws or by that number
            c = got.double() * by
            if drawn > 0 and (c - c.round()).abs().max() <= 1e-3 and round(float(c.sum())) == drawn:
                how = "range(1, n_draws) draws one fewer" if drawn < n else "a draw before the loop is one more"
                return (f"your table counts {counted(drawn, 'text')}, but n_draws = {n}: an off-by-one in the "
                        f"number of draws (range(n_draws) draws n_draws texts; {how})", "")
    if whole and abs(float(counts.sum()) - n) > 1e-3:
        return (f"your frequencies add up to {float(got.sum()):.4g}, not 1: the table should count all n_draws = "
                f"{n} texts, each once, and divide by n_draws", "")
    if (counts - counts.round()).abs().max() > 1e-3 or (counts < -1e-6).any():
        return ("your frequencies are not counts divided by n_draws: each entry should be (how many of the "
                "n_draws texts were (a, b)) / n_draws", side_by_side(p, got))
    tolerance = SIGMAS * (p * (1 - p) / n).sqrt() + 3 / n
    off = (got.double() - p.double()).abs() > tolerance.double()
    if off.any():
        a, b = (int(i) for i in off.nonzero()[0])
        return (f"{int(off.sum())} of the {V * V} frequencies are further from p(x1) p(x2 | x1) than chance "
                f"allows (about {SIGMAS} standard deviations of a count of {counted(n, 'draw')})",
                f"at (x1, x2) = ({a}, {b}): expected p(x1) p(x2 | x1) = {p[a, b]:.4f} within {tolerance[a, b]:.4f}, "
                f"got {got[a, b]:.4f}")
    return _too_close(p.double() * n, counts)


TOO_CLOSE = 1e-9  # the chance that honest draws land as close to their expectations as a refused table


def _too_close(expected, counts):
    """Counts that sit closer to their expectations than draws do: the expectations rounded, not a sample.
    Over the texts expected at least 100 times (where a count is near normal), Pearson's statistic
    X2 = sum (count - expected)^2 / expected of a sample is chi-square with one degree of freedom fewer than
    there are texts (or, the rest left out, up to one more: using the fewer is the cautious side); the chance
    that it falls below the table's is gammainc(df / 2, X2 / 2). Under TOO_CLOSE, the table was computed."""
    kept = expected >= 100
    df = int(kept.sum()) - 1
    if df < 1:  # too few draws to tell a sample from its expectation: nothing to say
        return None
    x2 = float((((counts - expected) ** 2) / expected)[kept].sum())
    chance = float(torch.special.gammainc(torch.tensor(df / 2, dtype=torch.float64),
                                          torch.tensor(x2 / 2, dtype=torch.float64)))
    if chance >= TOO_CLOSE:
        return None
    return ("your frequencies are closer to p(x1) p(x2 | x1) than random draws come: each count of a sample "
            "strays from its expectation by about its standard deviation, and these barely stray at all. "
            "Count the texts you drew; do not compute the frequencies from the probabilities",
            f"over the {df + 1} texts expected at least 100 times, Pearson's X2 = {x2:.3g}; draws land that close "
            f"with probability {chance:.1g}")


def _outer_of_marginals(first, table, n, generator):
    f = _joint_frequencies(first, table, n, generator)
    return f.sum(1)[:, None] * f.sum(0)[None, :]


q4 = Question(Task(
    name="q4", function="joint_frequencies", title="the chain rule, measured by sampling", chapter=CHAPTER,
    kind="empirical", cases=_q4_cases, reference=_joint_frequencies, verify=_q4_verify, watch=watches.draws_from,
    known=[
        Known("each count is right but not divided by n_draws: frequencies are counts / n_draws",
              lambda f, t, n, g: _joint_frequencies(f, t, n, g) * n),
        Known("the table is transposed: entry [a, b] counts the texts whose first token is a and second b",
              lambda f, t, n, g: _joint_frequencies(f, t, n, g).T),
        Known("the two tokens were counted apart, so the table lost what links them: count the pairs "
              "(x1, x2) of each text together, not the product of each token's own frequencies",
              _outer_of_marginals),
        Known("you divided each row by its own count: that estimates p(x2 | x1), one distribution per first "
              "token (and 0 / 0 = NaN for a first token never drawn); the task asks for the frequencies of "
              "whole texts, p(x1) p(x2 | x1): divide every count by n_draws",
              lambda f, t, n, g: (lambda c: c / c.sum(-1, keepdim=True))(_joint_frequencies(f, t, n, g))),
        Known("x2 was drawn from the columns of next_probs: row a of next_probs is p(x2 | x1 = a), so draw "
              "from next_probs[x1]", lambda f, t, n, g: _joint_frequencies(f, t.T / t.T.sum(-1, keepdim=True), n, g)),
    ],
    hints=("Draw each text the way generation does: its first token from p(x1), then its second from "
           "p(x2 | that first token). Then count.",
           "torch.multinomial(first_probs, n_draws, replacement=True, generator=generator) gives n first "
           "tokens; next_probs[x1] is then one row of probabilities per text, and multinomial draws one "
           "token from each row.",
           "Count the pairs: torch.bincount(x1 * V + x2, minlength=V * V).reshape(V, V), then divide by "
           "n_draws (a float tensor)."),
))
