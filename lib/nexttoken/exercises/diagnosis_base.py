"""The shared diagnosis's vocabulary: what a task's answer is computed from (``Source``), what a diagnosis
says (``Finding``), and the comparisons and words every family of it uses (``diagnosis.py`` tries the
families; ``diagnosis_values``, ``diagnosis_layouts`` and ``diagnosis_loops`` hold them)."""

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .feedback import matches

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
    the chosen tokens' (``chosen`` (B, n)); ``fed`` (B, n) is the last token each step read, and
    ``step_logits`` (B, n, V) each step's raw logits. For a bool answer: ``mask`` (T, T) and ``column``, the
    answer being ``mask[:, column]`` (the positions that read token ``column``); or ``bounds``, each row's last
    slot before its True ones (counted from 1, None: none), with ``limit`` the most slots. For a count, a sum
    of parts: ``terms``, each a ``Term``, and ``numbers``, the configuration's named numbers."""
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
    step_logits: torch.Tensor | None = None
    mask: torch.Tensor | None = None
    column: int | None = None
    bounds: tuple | None = None
    limit: int | None = None
    terms: tuple = ()
    numbers: dict | None = None


@dataclass(frozen=True)
class Term:
    """One part of a count (a tensor, or a group of them): its name, its shape in words, its size, how many
    of it the model has, and its kind ("weight", "bias", "norm"; "group", several of them, is never one of a
    kind; "block", every tensor of a repeated block, is counted as a whole only)."""
    name: str
    shape: str
    size: int
    count: int
    kind: str = "weight"


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


def num(x) -> str:
    return f"{float(x):.4g}"


def same(candidate, got) -> bool:
    """The output equals this transformation of the right answer (one that is defined and finite somewhere)."""
    return isinstance(candidate, torch.Tensor) and matches(candidate, got)


def shown_at(expected, got) -> tuple[float, float]:
    """The right and the learner's value where they differ most: the entry that shows a mistake best."""
    e, g = expected.double().flatten(), got.double().flatten()
    gap = torch.nan_to_num((g - e).abs(), nan=math.inf, posinf=math.inf)
    i = int(gap.argmax())
    return float(e[i]), float(g[i])


def is_distribution(t) -> bool:
    """Rows of probabilities over the last dimension: >= 0, each summing to 1."""
    return (t.is_floating_point() and t.dim() >= 1 and t.shape[-1] > 1 and bool((t >= 0).all())
            and bool(torch.allclose(t.double().sum(-1), torch.ones(()).double(), atol=1e-4)))


FORMS = {"logits": "the logits themselves", "probs": "probabilities", "log_probs": "log-probabilities"}


def all_forms(x):
    return {"logits": x, "probs": torch.softmax(x, -1), "log_probs": torch.log_softmax(x, -1)}


def underflow_words(what) -> str:
    # the output cannot tell a product of probabilities that underflowed from one of their inverses that overflowed
    return (f"a product of {what} left float32's range: a product of many probabilities underflows to 0 (below "
            f"about 1e-45), one of their inverses overflows to inf, and its log is then infinite. Add the logs "
            f"instead of multiplying (the chain rule's sum)")


ROWS_SWAPPED = "your rows are the right ones in reverse order: row i of the output belongs to row i of the input"
ROWS_ALIKE = ("every row of your output is the same, but the rows' right answers differ: one answer for the "
              "whole batch, where each row needs its own")


def epsilon_words(eps) -> str:
    # a clamp at eps and eps added give the same logs within the tolerance: the message names both
    return (f"you raised the tiny probabilities before the log (a clamp at {eps:.3g}, or an epsilon of {eps:.3g} "
            f"added): every probability near {eps:.3g} or below then gets the wrong log. Take the log of the values "
            f"as they are (log_softmax never underflows; a sum of logs needs no guard)")


def temperature_words(t, asked) -> str:
    return (f"these are the right {asked} at a temperature of {t:.3g}, softmax(logits / {t:.3g}) "
            f"({'sharper' if t < 1 else 'flatter'} than the model's own): the task asks for temperature 1, the "
            f"logits as they are")
