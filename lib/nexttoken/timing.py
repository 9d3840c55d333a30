"""Timing the generation loop: the stopwatch, the report and the plots of chapter 7, kept out of the lesson.

What a chapter times (one step with or without a cache, a whole loop) is lesson and stays in the chapter;
how to time it fairly is plumbing and lives here:

- ``median_seconds``: the median wall-clock time of a few calls, after an untimed warm-up call, with an
  optional untimed set-up before each call (say, filling a cache).
- ``milliseconds_per_step``: ``median_seconds`` of one step at each of several context lengths.
- ``time_three_loops``: the median time of three generation loops that must write the same tokens (no
  cache; no cache but the LM head on the last position only; a KV cache), checked before timing.
- ``report_three_loops``: those times and their ratios as two lines of text.
- ``plot_step_times`` and ``plot_total_tokens``: the two panels of chapter 7's figure, each drawn on
  matplotlib axes that the caller made (so this module itself does not import matplotlib).

Times are medians because a single run is at the mercy of whatever else the machine does at that moment:
the median ignores the odd slow run that a mean would average in.
"""

import functools
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch

from .checks import check_positive_int


def median_seconds(
    run: Callable[..., Any],
    repeats: int = 3,
    *,
    setup: Callable[[], Any] | None = None,
    warmup: bool = True,
) -> float:
    """The median of ``repeats`` wall-clock times of ``run()``, in seconds.

    With ``setup``, each call is ``run(setup())``: the set-up runs before every call and only ``run`` is
    timed (for a cached step, the set-up fills a fresh cache, since a step changes the cache it uses).
    With ``warmup`` (the default), one more call, set-up included, runs first and is not timed: the first
    call of a model pays once for memory allocations and lazy initialisation that later calls do not.
    """
    check_positive_int(repeats, "repeats")

    def call_once() -> float:
        args = () if setup is None else (setup(),)
        start = time.perf_counter()  # after the set-up: it is not timed
        run(*args)
        return time.perf_counter() - start

    if warmup:
        call_once()  # thrown away
    return statistics.median(call_once() for _ in range(repeats))


def milliseconds_per_step(
    step: Callable[..., Any],
    lengths: Sequence[int],
    repeats: int = 3,
    *,
    setup: Callable[[int], Any] | None = None,
) -> list[float]:
    """For each context length ``t`` in ``lengths``: the median milliseconds of ``step(t)``, after a
    warm-up call (see ``median_seconds``).

    With ``setup``, each call is ``step(t, setup(t))`` and ``setup(t)`` is not timed: for example, a
    cached step at length ``t`` whose set-up runs the ``t - 1`` earlier tokens into a new cache.
    """
    times = []
    for t in lengths:
        # bind t now: a closure would otherwise see the loop's last t
        run = functools.partial(step, t)
        prepare = None if setup is None else functools.partial(setup, t)
        times.append(1000 * median_seconds(run, repeats, setup=prepare))
    return times


class ThreeLoops(NamedTuple):
    """Median seconds of one whole generation by each of chapter 7's three greedy loops."""

    no_cache: float  # the whole context through the whole model at every step
    last_row: float  # no cache, but the LM head on the last position only
    cached: float  # a KV cache: only the newest token at every step after the first


def time_three_loops(
    no_cache: Callable[[], torch.Tensor],
    last_row: Callable[[], torch.Tensor],
    cached: Callable[[], torch.Tensor],
    repeats: int = 3,
) -> ThreeLoops:
    """The median seconds of three calls of each loop (see ``ThreeLoops``), each a function of no
    arguments that generates and returns its tokens.

    First every loop runs once, untimed: that run is the warm-up, and its tokens must be equal in all
    three (a faster loop that writes other text is no speed-up); if they are not, ``AssertionError``
    says which loop differs. Then each loop is timed ``repeats`` times with no further warm-up.
    """
    loops = ThreeLoops(no_cache, last_row, cached)
    tokens = [loop() for loop in loops]  # the warm-up, and the check
    for name, out in zip(ThreeLoops._fields[1:], tokens[1:]):
        if not torch.equal(out, tokens[0]):
            raise AssertionError(f"the {name} loop wrote other tokens than the no_cache loop")
    return ThreeLoops(*(median_seconds(loop, repeats, warmup=False) for loop in loops))


def report_three_loops(name: str, seconds: ThreeLoops, new_tokens: int, prompt_len: int) -> str:
    """Two lines: the milliseconds of each loop, then how many times faster each saving makes it.

    ``name`` names the model; ``new_tokens`` and ``prompt_len`` say what was generated. The first factor
    is the head's saving alone (no cache needed), the second the cache's on top of it, the third both.
    """
    ms = [f"{1000 * s:.0f} ms" for s in seconds]
    return (
        f"{name}, {new_tokens} tokens after {prompt_len}: {ms[0]} without the cache, "
        f"{ms[1]} with the head on the last row only, {ms[2]} with the cache\n"
        f"  the head on the last row: {seconds.no_cache / seconds.last_row:.1f}x faster; "
        f"the cache on top of that: {seconds.last_row / seconds.cached:.1f}x; "
        f"in all: {seconds.no_cache / seconds.cached:.1f}x"
    )


def plot_step_times(ax, lengths: Sequence[int], curves: dict[str, Sequence[float]], repeats: int = 3):
    """Chapter 7's measured panel on the matplotlib axes ``ax``: one line with dots per entry of
    ``curves`` (its legend label: milliseconds per step at each of ``lengths``), from y = 0 up, so that a
    flat line reads as flat and not as noise magnified. ``repeats`` is what each point is the median of."""
    for label, ms in curves.items():
        ax.plot(lengths, ms, "o-", label=label)
    ax.set_xlabel("context length t (tokens the new token may see)")
    ax.set_ylabel(f"milliseconds for one step (median of {repeats})")
    ax.set_title("Measured: the time of one step")
    ax.set_ylim(bottom=0)
    ax.legend()


def plot_total_tokens(
    ax, new_tokens: Sequence[int], prompt_len: int, curves: dict[str, Sequence[int]]
):
    """Chapter 7's counted panel on the matplotlib axes ``ax``: one line per entry of ``curves`` (its
    legend label: the tokens processed in total by a generation of each number of ``new_tokens`` after
    a prompt of ``prompt_len``)."""
    for label, totals in curves.items():
        ax.plot(new_tokens, totals, label=label)
    ax.set_xlabel(f"new tokens n (after a prompt of {prompt_len})")
    ax.set_ylabel("tokens processed in total")
    ax.set_title("Counted: the work of a whole generation")
    ax.legend()
