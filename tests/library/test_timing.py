"""nexttoken.timing: the median of the timed calls, the warm-up and set-up left untimed, the three loops
checked for equal tokens before they are timed, the report's text, and the two panels of chapter 7."""

from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")  # no display: draw off screen
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from nexttoken import timing  # noqa: E402
from nexttoken.timing import (  # noqa: E402
    ThreeLoops,
    median_seconds,
    milliseconds_per_step,
    plot_step_times,
    plot_total_tokens,
    report_three_loops,
    time_three_loops,
)


class FakeClock:
    """A perf_counter that moves only when a test says so: a call "takes" exactly the seconds it adds."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def takes(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=fake))
    return fake


def calls_taking(clock: FakeClock, durations: list[float]):
    """A function whose k-th call takes durations[k] seconds; ``calls`` records the arguments of each."""

    def run(*args):
        run.calls.append(args)
        clock.takes(durations[len(run.calls) - 1])

    run.calls = []
    return run


def test_the_median_of_the_repeats_is_returned(clock):
    # warm-up 50 s, then 4, 1, 9: the median is 4 (the mean would be 4.67, the first call 4, the last 9)
    run = calls_taking(clock, [50, 4, 1, 9])
    assert median_seconds(run, repeats=3) == 4
    assert len(run.calls) == 4


def test_the_warm_up_call_runs_first_and_is_not_timed(clock):
    # had the 100-second warm-up been timed, the median of (100, 1, 2) would be 2, of (100, 1) 50.5
    run = calls_taking(clock, [100, 1, 2])
    assert median_seconds(run, repeats=2) == 1.5
    assert len(run.calls) == 3


def test_without_warm_up_every_call_is_timed(clock):
    run = calls_taking(clock, [100, 1, 2])
    assert median_seconds(run, repeats=3, warmup=False) == 2
    assert len(run.calls) == 3


def test_the_set_up_runs_before_every_call_untimed_and_feeds_it(clock):
    made = []

    def setup():
        clock.takes(1000)  # far longer than the call: timed, it would dominate
        made.append(object())
        return made[-1]

    run = calls_taking(clock, [7, 3, 5, 4])
    assert median_seconds(run, repeats=3, setup=setup) == 4
    # a fresh set-up for the warm-up and for each timed call, each handed to its own call
    assert [args for args in run.calls] == [(m,) for m in made]
    assert len(made) == 4


@pytest.mark.parametrize("repeats", [0, -1, True, 2.5])
def test_repeats_must_be_a_positive_int(clock, repeats):
    with pytest.raises(ValueError, match=f"repeats must be a positive int, got {repeats!r}"):
        median_seconds(lambda: None, repeats=repeats)


def test_milliseconds_per_step_times_each_length_in_milliseconds(clock):
    # a step at length t takes t milliseconds; its set-up (untimed) takes a second
    prepared = []

    def setup(t):
        clock.takes(1.0)
        prepared.append(t)
        return f"cache of {t - 1}"

    seen = []

    def step(t, cache):
        seen.append((t, cache))
        clock.takes(t / 1000)

    lengths = [2, 16, 32]
    assert milliseconds_per_step(step, lengths, setup=setup) == pytest.approx(lengths)
    # each length: one warm-up and three timed calls, each after its own set-up for that same length
    assert prepared == [2] * 4 + [16] * 4 + [32] * 4
    assert seen == [(t, f"cache of {t - 1}") for t in prepared]


def test_milliseconds_per_step_without_set_up_calls_step_with_t_alone(clock):
    seen = []

    def step(t):
        seen.append(t)
        clock.takes(2 * t / 1000)

    assert milliseconds_per_step(step, [1, 5], repeats=1) == pytest.approx([2, 10])
    assert seen == [1, 1, 5, 5]  # a warm-up and one timed call each


def loop_taking(clock: FakeClock, seconds: list[float], tokens: torch.Tensor):
    """A generation loop whose k-th call takes seconds[k] and returns ``tokens``."""
    run = calls_taking(clock, seconds)

    def loop():
        run()
        return tokens

    loop.calls = run.calls
    return loop


def test_three_loops_are_warmed_up_once_then_timed(clock):
    tokens = torch.tensor([[1, 2, 3, 4]])
    # the first call of each (its warm-up and check) is slow and must not count
    no_cache = loop_taking(clock, [60, 9, 8, 10], tokens)
    last_row = loop_taking(clock, [60, 3, 2, 4], tokens.clone())
    cached = loop_taking(clock, [60, 1, 2, 3], tokens.clone())
    seconds = time_three_loops(no_cache, last_row, cached)
    assert seconds == ThreeLoops(no_cache=9, last_row=3, cached=2)
    assert [len(loop.calls) for loop in (no_cache, last_row, cached)] == [4, 4, 4]


@pytest.mark.parametrize("which", ["last_row", "cached"])
def test_three_loops_whose_tokens_differ_raise_before_timing(clock, which):
    tokens = torch.tensor([[1, 2, 3, 4]])
    other = torch.tensor([[1, 2, 3, 5]])  # the same prompt, one other token
    loops = {
        name: loop_taking(clock, [1] * 4, other if name == which else tokens)
        for name in ThreeLoops._fields
    }
    with pytest.raises(AssertionError, match=f"the {which} loop wrote other tokens"):
        time_three_loops(**loops)
    assert all(len(loop.calls) == 1 for loop in loops.values())  # nothing was timed


def test_the_report_reads_the_times_and_the_speed_ups():
    # the times chapter 7 printed once on the development machine
    text = report_three_loops("this model", ThreeLoops(0.944, 0.273, 0.234), new_tokens=12, prompt_len=96)
    assert text == (
        "this model, 12 tokens after 96: 944 ms without the cache, 273 ms with the head on the last row "
        "only, 234 ms with the cache\n"
        "  the head on the last row: 3.5x faster; the cache on top of that: 1.2x; in all: 4.0x"
    )


def test_the_report_names_the_model_and_the_lengths():
    text = report_three_loops("SmolLM2", ThreeLoops(2.0, 1.0, 0.25), new_tokens=5, prompt_len=7)
    assert text.startswith("SmolLM2, 5 tokens after 7: 2000 ms without the cache, 1000 ms with")
    assert text.endswith("last row: 2.0x faster; the cache on top of that: 4.0x; in all: 8.0x")


def test_the_step_times_panel():
    _, ax = plt.subplots()
    curves = {"no cache": [1.0, 2.0, 3.0], "KV cache": [0.5, 0.6, 0.5]}
    plot_step_times(ax, [2, 16, 32], curves, repeats=5)
    assert [line.get_label() for line in ax.get_lines()] == list(curves)
    assert [list(line.get_ydata()) for line in ax.get_lines()] == list(curves.values())
    assert all(line.get_marker() == "o" for line in ax.get_lines())
    assert ax.get_ylim()[0] == 0  # the flat line is read from zero
    assert ax.get_ylabel() == "milliseconds for one step (median of 5)"
    assert ax.get_title() == "Measured: the time of one step"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(curves)
    plt.close("all")


def test_the_total_tokens_panel():
    _, ax = plt.subplots()
    curves = {"no cache: quadratic": [4, 9, 15], "KV cache: linear": [4, 5, 6]}
    plot_total_tokens(ax, range(1, 4), prompt_len=4, curves=curves)
    assert [line.get_label() for line in ax.get_lines()] == list(curves)
    assert [list(line.get_xdata()) for line in ax.get_lines()] == [[1, 2, 3]] * 2
    assert all(line.get_marker() == "None" for line in ax.get_lines())  # lines only, as counted
    assert ax.get_xlabel() == "new tokens n (after a prompt of 4)"
    assert ax.get_title() == "Counted: the work of a whole generation"
    plt.close("all")
