"""The bulk of a task's test inputs, made by hypothesis: strategies of plain parameters, the examples
drawn from them once (scripts/make_cases.py, stored in cases.json), and the shrinking that finds the
smallest failing input for ``check()``.
"""

import contextlib
import copy
import io
import json
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources

from ..recorder.calling import one_thread

_BUILDING = threading.RLock()  # a build may ask for another task's generated inputs


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
        with _BUILDING:  # built once, whatever threads ask (the batch grader's --jobs)
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
    within ``seconds`` (the search is cut there and keeps the smallest found); None if it finds none."""
    from hypothesis import find
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
