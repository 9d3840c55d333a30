"""How the fast path's layers run: eagerly, or through ``torch.compile`` (each graph's warm-up announced on
stderr, and eager again wherever compiling fails).

Each way is a callable of ``run_layers``'s arguments, ``(input_ids, positions, mask, cache)``, chosen once by
``prepare``: ``Eager`` here, ``Compiled`` here (``compile=True``), ``Autotuned`` in ``autotune.py``
(``compile="max-autotune"``), ``AheadOfTime`` in ``package.py`` (``compile="ahead-of-time"``).
"""

import contextlib
import sys
import time
import warnings

import torch

from .static import run_layers


class Eager:
    """The layers as Python runs them, on ``runner`` (the model, or its oneDNN twin)."""

    compiled = False

    def __init__(self, runner):
        self.runner = runner

    def __call__(self, input_ids, positions, mask, cache):
        return run_layers(self.runner, input_ids, positions, mask, cache)


class Compiled:
    """``compile=True``: the layers through ``torch.compile``, a graph for the prompt and one for every step
    (dynamic shapes, so that a growing cache does not recompile it). The compiler fuses the small operations
    between the products (norms, residual adds, rotary turns, cache writes); each product stays one call,
    oneDNN's where ``prepare`` chose it (the op ``nexttoken::onednn_linear``).

    With ``fixed_shapes`` only the one-token step is compiled, with static shapes and
    ``mode="reduce-overhead"`` (on CUDA: recorded once as a CUDA graph and replayed, as gpt-fast's decode
    step); the prompt, whose length varies, runs eagerly. The first call of each graph compiles it: a line on
    stderr as it starts and one as it ends. Where compiling fails (no C++ compiler, an unsupported platform),
    it warns once and runs eagerly from then on: a bug of our own would fail the eager call too, so none is
    hidden.
    """

    wait = "up to a minute or two"

    def __init__(self, model, runner, fixed_shapes: bool):
        self.eager = Eager(runner)
        self.fixed_shapes = fixed_shapes
        self.graph_model, self.function = self.compile(model, runner, fixed_shapes)
        self.compiled = True  # until compiling fails
        self.warmed_up = set()  # the graphs compiled so far: "the prompt", "the one-token step"

    def compile(self, model, runner, fixed_shapes: bool):
        """What the compiled function is given as its model, and the function (compiled at its first call)."""
        if fixed_shapes:
            return runner, torch.compile(run_layers, dynamic=False, mode="reduce-overhead")
        return runner, torch.compile(run_layers, dynamic=True)

    def __call__(self, input_ids, positions, mask, cache):
        if not self.compiled or (self.fixed_shapes and not (cache is not None and cache.whole_window)):
            return self.eager(input_ids, positions, mask, cache)
        graph = "the one-token step" if input_ids.shape[1] == 1 else "the prompt"
        try:
            if graph in self.warmed_up:
                return self.function(self.graph_model, input_ids, positions, mask, cache)
            with announced(f"compiling {graph}'s graph ({self.wait})", f"{graph}'s graph compiled"):
                logits = self.function(self.graph_model, input_ids, positions, mask, cache)
            self.warmed_up.add(graph)
            return logits
        except Exception as error:
            self.compiled = False
            warnings.warn(f"torch.compile failed ({type(error).__name__}: {str(error)[:200]}); the fast path "
                          "runs eagerly (same tokens, without the compiler's gain)", stacklevel=2)
            return self.eager(input_ids, positions, mask, cache)


@contextlib.contextmanager
def announced(starting: str, done: str):
    """One line on stderr as a long job (seconds to minutes) starts, one with its time as it ends, so that a
    learner sees why the call waits."""
    print(f"nexttoken.fast: {starting}...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    yield
    print(f"nexttoken.fast: {done} in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
