"""The benchmarks that compile for real (their --tiny mode): torch.compile's autotuning, an AOTInductor
package, inductor's kernel profile. A file of their own, so that the full run's last tier hands them to one
worker while the other runs the lowest versions, the GPU script on the CPU (test_gpu_script.py) and
test_bench.py."""

import os
import re
from unittest import mock

import pytest
import torch
from helpers import ROW, TINY, load_script, run_bench

import nexttoken


@pytest.mark.slow  # about a minute: the kernels autotuned in an empty cache folder, a package built
def test_generate_speed_runs_the_autotuned_fast_path_and_its_ahead_of_time_package(tmp_path):
    """--autotune: compile="max-autotune" (the compiler times its kernels per matrix); --ahead-of-time: the same
    step packaged (built here, the cache folder being empty): their rows, each step against (c), same tokens."""
    out = run_bench("generate_speed.py", *TINY, "--no-ctranslate2", "--autotune", "--ahead-of-time",
                    env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)})
    for name in ("fast path, max-autotune", "fast path, ahead-of-time"):
        assert re.search(name + " " + ROW + "same$", out, re.M)
        assert re.search(f"^steady step, {name}: " + r"[\d.]+ ms, its own \(c\) [\d.]+ ms: at \d+% of it", out, re.M)
    assert re.search(r"^bound \(c\), max-autotune: .* [\d.]+ ms, [\d.]+ tokens/s; "
                     r"fast path, max-autotune at \d+% of it, fast path, ahead-of-time at \d+% of it$", out, re.M)
    assert re.search(r"^ahead-of-time warm-up \(prepare [\d.]+ s, then the first call, prompt and step\): [\d.]+ s; "
                     r"its package built$", out, re.M)
    assert len(list(tmp_path.rglob("*.pt2"))) == 1
    assert "same tokens from all of them: True" in out


@pytest.mark.slow  # about 45 s: the probe autotunes each product's kernel
@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated:UserWarning")  # torch's own, while autotuning
def test_the_autotuned_products_probe_freezes_the_weights_even_with_gradients_on():
    """Bound (c) for the autotuned row times the products as compile="max-autotune" runs them: weights
    frozen into the graph (inductor's freeze), which inductor does only for a graph compiled without
    gradients. The probe turns them off itself, so a caller with gradients on still measures those kernels."""
    import torch._inductor.freezing as freezing  # here: seconds to import, and the fast tier collects this file

    speed = load_script("bench/generate_speed.py")
    torch.manual_seed(0)
    model = nexttoken.Decoder(nexttoken.DecoderConfig(vocab_size=64, context_length=16, d_model=32, n_layers=1,
                                                      n_heads=4, norm="rmsnorm", mlp="swiglu", bias=False))
    probe = speed.autotuned_step_products(model)
    assert torch.is_grad_enabled()
    with mock.patch.object(freezing, "freeze", wraps=freezing.freeze) as freeze:
        outputs = probe()
    assert freeze.called
    with torch.no_grad():  # the products themselves: every linear layer's, on a row of ones
        expected = [m(torch.ones(1, m.in_features)) for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.slow  # about a minute: compiles the autotuned step with inductor's kernel profile
def test_step_profile_splits_a_steady_step_by_kind():
    out = run_bench("step_profile.py", "--tiny", "--new-tokens", "16", "--top", "5")
    assert re.search(r"^steady step without the profiler: [\d.]+ ms .*its products alone \(c\): [\d.]+ ms", out, re.M)
    assert re.search(r"^ +[\d.]+ ms  products \(every linear layer and the LM head\)$", out, re.M)
    assert re.search(r"^ +-?[\d.]+ ms  Python outside any event", out, re.M)


@pytest.mark.slow  # about a minute: an export, the autotuning and an AOTInductor build, then a second process
def test_aot_step_builds_a_package_a_second_process_loads_with_the_plain_loops_tokens():
    """bench/aot_step.py: prepare(model, compile="ahead-of-time") in a process with an empty cache
    folder builds the step's package; a second process loads it, both with the plain loop's tokens (the script
    exits non-zero where either differs, or where the second builds again)."""
    out = run_bench("aot_step.py", "--tiny")
    process = (r": launch to its first packaged step [\d.]+ s, of them prepare [\d.]+ s \(the package {}, \d+ MB\); "
               r"that step [\d.]+ ms; steady step [\d.]+ ms; same tokens as the plain loop: True$")
    assert re.search(r"^first process \(nothing cached\)" + process.format("built"), out, re.M)
    assert re.search(r"^second process" + process.format("loaded"), out, re.M)
