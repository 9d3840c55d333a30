"""The benchmarks still run (their --tiny mode): speed is reported there, never asserted here."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import torch
import torch._inductor.freezing as freezing

import nexttoken

ROOT = Path(__file__).resolve().parents[2]
HAS_CTRANSLATE2 = importlib.util.find_spec("ctranslate2") is not None
HAS_LLAMA_CPP = importlib.util.find_spec("llama_cpp") is not None
# where the fast path can run oneDNN's products (x86 builds of PyTorch), the bench has a row for them
HAS_ONEDNN = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def run_bench(script, *args):
    result = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


# 32 new tokens, not 128: the uncached loop's cost grows with the square of the length
TINY = ["--tiny", "--repeats", "1", "--new-tokens", "32"]
CONTENDERS = ["nexttoken, no cache", "nexttoken, KV cache", "fast path (prepare)", "same, onednn=False",
              "transformers generate", "same, static cache"]


@pytest.mark.slow  # 5-12 s: runs the benchmark in a subprocess
def test_generate_speed_prints_every_contender_both_bounds_and_the_load():
    out = run_bench("generate_speed.py", *TINY)
    assert "same tokens from all of them: True" in out
    onednn = ["same, onednn=True"] * HAS_ONEDNN
    for name in CONTENDERS + onednn + ["CTranslate2", "same, CT2_USE_MKL=0 (oneDNN)"] * HAS_CTRANSLATE2:
        # a row: the name, a median with its (min-max), fractions of bounds (b) and (c), the token verdict
        assert re.search(re.escape(name) + r".* [\d.]+ \([\d.]+-[\d.]+\) +\d+% +\d+%  same$", out, re.M), name
    if not HAS_CTRANSLATE2:
        assert re.search(r"CTranslate2 float32 +skipped: not installed", out)
    assert re.search(r"llama.cpp Q4_1 +skipped: --model smollm2 only", out)  # the GGUF file is SmolLM2's
    assert re.search(r"^bound \(a\), copy bandwidth [\d.]+ GB/s: [\d.]+ tokens/s", out, re.M)
    assert re.search(r"^bound \(b\), matrix-vector read bandwidth [\d.]+ GB/s \(the fastest of them\): "
                     r"[\d.]+ tokens/s", out, re.M)
    assert re.search(r"^matrix-vector read bandwidth, .*torch.mv, row-major [\d.]+ GB/s", out, re.M)
    assert re.search(r"^bound \(c\), the step's matrix-vector products alone \(9 linear layers, .*: [\d.]+ ms, "
                     r"[\d.]+ tokens/s", out, re.M)
    assert re.search(r"^load average \(1 min\) before each round, then after the last: [\d.]+ [\d.]+$", out, re.M)
    assert re.search(r"^fast path / cached: +[\d.]+x \(its products: (onednn|torch)_linear, which prepare timed", out, re.M)
    if HAS_CTRANSLATE2:  # the ratios are against its faster backend of the two
        assert re.search(r"^CTranslate2's faster backend here: (CTranslate2 [\d.]+ float32|same, CT2_USE_MKL=0)", out, re.M)
    assert "disturbed rounds" in out


@pytest.mark.slow  # 5-12 s: runs the benchmark in a subprocess
def test_generate_speed_skips_ctranslate2_cleanly():
    out = run_bench("generate_speed.py", *TINY, "--no-ctranslate2")
    assert re.search(r"CTranslate2 float32 +skipped: left out \(--no-ctranslate2\)", out)
    assert not re.search(r"CTranslate2 [\d.]+ float32", out)  # no row for it
    assert "same tokens from all of them: True" in out


@pytest.mark.slow  # 5-12 s: runs the benchmark in a subprocess
def test_generate_speed_runs_in_bfloat16_and_counts_agreeing_tokens():
    """The --dtype path (as a GPU run would use it), here on the CPU: every contender in bfloat16,
    CTranslate2 left out (it converts to float32), the tokens' agreement reported."""
    out = run_bench("generate_speed.py", *TINY, "--dtype", "bfloat16", "--device", "cpu")
    assert "parameters, bfloat16, batch 1" in out
    assert re.search(r"^new tokens agreeing with nexttoken, KV cache's \(bfloat16\) before the first difference: "
                     r"nexttoken, no cache \d+/32, .*static cache \d+/32$", out, re.M)
    if HAS_CTRANSLATE2:
        assert re.search(r"CTranslate2 float32 +skipped: float32 only", out)


@pytest.mark.slow  # 5-12 s: runs the benchmark in a subprocess
def test_generate_speed_runs_the_fixed_shape_fast_path():
    """--fixed-shapes (what a GPU run with CUDA graphs uses), eagerly here: its row, the same tokens."""
    out = run_bench("generate_speed.py", *TINY, "--no-ctranslate2", "--fixed-shapes")
    assert re.search(r"fast path, fixed shapes .* [\d.]+ \([\d.]+-[\d.]+\) +\d+% +\d+%  same$", out, re.M)
    assert "same tokens from all of them: True" in out


@pytest.mark.slow
def test_generate_speed_runs_the_autotuned_fast_path():
    """--autotune: compile="max-autotune" (the compiler times its kernels per matrix): its row, same tokens."""
    out = run_bench("generate_speed.py", *TINY, "--no-ctranslate2", "--autotune")
    assert re.search(r"fast path, max-autotune .* [\d.]+ \([\d.]+-[\d.]+\) +\d+% +\d+%  same$", out, re.M)
    assert re.search(r"^bound \(c\), max-autotune: .* [\d.]+ ms, [\d.]+ tokens/s; fast path, max-autotune at \d+% of it$",
                     out, re.M)
    assert "same tokens from all of them: True" in out


@pytest.mark.slow  # about 45 s: the probe autotunes each product's kernel
def test_the_autotuned_products_probe_freezes_the_weights_even_with_gradients_on():
    """Bound (c) for the autotuned row times the products as compile="max-autotune" runs them: weights
    frozen into the graph (inductor's freeze), which inductor does only for a graph compiled without
    gradients. The probe turns them off itself, so a caller with gradients on still measures those kernels."""
    spec = importlib.util.spec_from_file_location("generate_speed", ROOT / "bench" / "generate_speed.py")
    speed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(speed)
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


@pytest.mark.slow  # 5-12 s: runs the benchmark in a subprocess
def test_weight_layout_runs_in_tiny_mode():
    assert "of the bound" in run_bench("weight_layout.py", "--tiny", "--rounds", "1")


@pytest.mark.slow
def test_generate_speed_runs_on_smollm2():
    """The real model's run: its contenders (the fast path too: it runs the model's own blocks), same tokens."""
    out = run_bench("generate_speed.py", "--model", "smollm2", "--repeats", "1", "--new-tokens", "4",
                    "--no-ctranslate2")
    assert "model: SmolLM2-135M-Instruct" in out
    assert re.search(r"^same tokens from all of them( \(llama.cpp aside\))?: True$", out, re.M)
    for name in ["nexttoken, no cache", "nexttoken, KV cache", "fast path (prepare)", "transformers generate"]:
        assert re.search(re.escape(name) + r".* [\d.]+ \([\d.]+-[\d.]+\) +\d+% +\d+%  same$", out, re.M), name
    assert re.search(r"^bound \(c\), the step's matrix-vector products alone \(151 linear layers", out, re.M)
    if HAS_LLAMA_CPP:  # installed by hand: its row counts agreeing tokens, and it has its own bound
        assert re.search(r"llama\.cpp \([\d.]+\) Q4_1 .* [\d.]+ \([\d.]+-[\d.]+\) +\d+% +\d+%  \d/4 new tokens agree",
                         out, re.M)
        assert re.search(r"^llama.cpp's own bound: the GGUF file's [\d.]+ MB of tensors per token \(Q4_1\)", out, re.M)
    else:
        assert re.search(r"llama.cpp Q4_1 +skipped: not installed", out)


def test_a_worker_that_dies_ends_the_run_with_a_clear_message(tmp_path):
    """A native library that crashes (llama.cpp's AMX kernels on an Intel CPU: a segfault, no message)
    ends the run naming the worker and its exit, not with a JSON error on an empty line."""
    spec = importlib.util.spec_from_file_location("generate_speed", ROOT / "bench" / "generate_speed.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    script = tmp_path / "dying_worker.py"
    script.write_text('import json, os\nprint(json.dumps({"ready": "1.0"}), flush=True)\ninput()\nos.abort()\n')
    worker = bench.Worker(str(script))
    assert worker.version == "1.0"
    with pytest.raises(SystemExit, match=r"dying_worker.py died generating 2 tokens: it exited with code -6, signal 6"):
        worker.generate(torch.tensor([[1, 2]]), 2)
    script.write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(SystemExit, match=r"dying_worker.py failed to start: it exited with code 3 "):
        bench.Worker(str(script))
