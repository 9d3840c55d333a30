"""nexttoken.fast.compiled: the layers through torch.compile (compile=True), each graph's warm-up announced,
and eager again where compiling fails."""

import random
import re
import warnings

import pytest
import torch
from fast_models import KERNEL_IDS, KERNELS, tiny_model
from helpers import left_padded_batch

import nexttoken
from nexttoken import generate
from nexttoken.fast import prepare


def test_a_failing_compiler_falls_back_to_eager_with_a_warning(monkeypatch):
    """A compiler that fails stands in for a machine without one (the real compile: the slow test below)."""
    def broken_compile(fn, **kwargs):
        def compiled(*args, **kwargs):
            raise RuntimeError("no C++ compiler found")
        return compiled

    monkeypatch.setattr(torch, "compile", broken_compile)
    model = tiny_model(1)
    ids = torch.tensor([[7, 3, 9]])
    prepared = prepare(model, compile=True)
    assert prepared.compiled
    with pytest.warns(UserWarning, match="torch.compile failed .*no C\\+\\+ compiler found.*runs eagerly"):
        out = prepared.generate(ids, 6)
    assert out.tolist() == generate(model, ids, 6).tolist()
    assert not prepared.compiled
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once: not tried again at every step
        assert prepared.generate(ids, 3).tolist() == generate(model, ids, 3).tolist()


@pytest.mark.parametrize("onednn", KERNELS, ids=KERNEL_IDS)
def test_a_compiled_graph_runs_the_same_layers_as_the_eager_path(monkeypatch, onednn):
    """The compiled layers are given what the eager path runs: the oneDNN twin where oneDNN applies
    (its products are then the opaque op nexttoken::onednn_linear), the model itself otherwise."""
    seen = []

    def recording_compile(fn, **kwargs):
        def compiled(model, *args):
            seen.append(model)
            return fn(model, *args)
        return compiled

    monkeypatch.setattr(torch, "compile", recording_compile)
    model = tiny_model(0)
    ids = torch.tensor([[1, 2, 3]])
    prepared = prepare(model, compile=True, onednn=onednn)
    assert prepared.generate(ids, 4).tolist() == generate(model, ids, 4).tolist()
    runner = prepared.run_layers.eager.runner
    assert len(seen) == 4 and all(m is runner for m in seen)  # the prompt and three steps, all compiled
    uses_onednn = prepared.linear is nexttoken.fast.onednn_linear
    if onednn is not None:  # forced; None: the timed choice, either one
        assert uses_onednn == onednn
    assert (runner is model) != uses_onednn


def counting_compile(counter):
    """torch.compile with dynamo's CompileCounter as the backend (no C++ compiler, seconds): it counts
    the graphs compiled, and runs each as traced."""
    real = torch.compile

    def compile_(fn, **kwargs):
        kwargs.pop("mode", None)  # a backend and a mode (or inductor's options) are exclusive
        kwargs.pop("options", None)
        return real(fn, backend=counter, **kwargs)
    return compile_


@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # torch's own import
@pytest.mark.parametrize("fixed_shapes", [False, True], ids=["growing", "fixed"])
@pytest.mark.parametrize("compile", [True, "max-autotune"])
def test_a_compiled_step_is_compiled_once_not_once_per_length(monkeypatch, capsys, fixed_shapes, compile):
    """Dynamic shapes (the default): one graph for the prompt, one for every step; fixed shapes: one
    graph, the step's (the prompt runs eagerly), also for a second generation on the kept buffers.
    Each graph's warm-up says so on stderr as it starts and when it is done (a line a phase)."""
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    counter = CompileCounter()
    monkeypatch.setattr(torch, "compile", counting_compile(counter))
    model = tiny_model(5, n_positions=32)
    fast = prepare(model, compile=compile, onednn=False, fixed_shapes=fixed_shapes)
    ids = torch.tensor([[7, 3, 9, 1]])
    assert fast.generate(ids, 10).tolist() == generate(model, ids, 10).tolist()
    assert fast.compiled
    assert counter.frame_count == (1 if fixed_shapes else 2)
    graphs = ["the one-token step"] if fixed_shapes else ["the prompt", "the one-token step"]
    lines = capsys.readouterr().err.splitlines()
    assert [line.split("'s graph")[0] for line in lines] == [f"nexttoken.fast: {verb}{g}" for g in graphs
                                                            for verb in ("compiling ", "")]
    assert all(re.search(r"compiled in \d+ s$", line) for line in lines[1::2])
    if fixed_shapes:
        other = torch.tensor([[2, 8, 1, 8, 2, 8]])  # another prompt length, the same step shapes
        assert fast.generate(other, 6).tolist() == generate(model, other, 6).tolist()
        assert counter.frame_count == 1


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # torch's own import
@pytest.mark.parametrize("fixed_shapes", [False, True], ids=["growing", "fixed"])
def test_really_compiled_it_gives_the_plain_loops_tokens_without_falling_back(fixed_shapes):
    """A real torch.compile (seconds to a minute on 2 cores): the prompt's graph and the step's, or with
    fixed shapes the step's alone (mode="reduce-overhead"), the cache written in place by index_copy_,
    oneDNN as the opaque op; no fallback warning."""
    torch._dynamo.reset()
    model = tiny_model(3, n_layer=2)
    ids, mask = left_padded_batch(random.Random(3), 2, 61, pad=60)
    prepared = prepare(model, compile=True, fixed_shapes=fixed_shapes)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the fallback's warning would fail the test
        out = prepared.generate(ids, 6, attention_mask=mask)
    assert prepared.compiled
    assert out.tolist() == generate(model, ids, 6, attention_mask=mask).tolist()
