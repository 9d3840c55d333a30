"""The benchmarks still run (their --tiny mode): speed is reported there, never asserted here."""

import importlib.util
import os
import re
from pathlib import Path

import pytest
import torch
from helpers import ROW, TINY, load_script, run_bench

import nexttoken

ROOT = Path(__file__).resolve().parents[2]
HAS_CTRANSLATE2 = importlib.util.find_spec("ctranslate2") is not None
HAS_LLAMA_CPP = importlib.util.find_spec("llama_cpp") is not None
# where the fast path can run oneDNN's products (x86 builds of PyTorch), the bench has a row for them
HAS_ONEDNN = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


CONTENDERS = ["nexttoken, no cache", "nexttoken, KV cache", "fast path (prepare)", "same, onednn=False",
              "transformers generate", "same, static cache"]


@pytest.mark.slow  # 5-12 s: runs the benchmark in a subprocess
def test_generate_speed_prints_every_contender_both_bounds_and_the_load():
    out = run_bench("generate_speed.py", *TINY)
    assert "same tokens from all of them: True" in out
    onednn = ["same, onednn=True"] * HAS_ONEDNN
    for name in CONTENDERS + onednn + ["CTranslate2", "same, CT2_USE_MKL=0 (oneDNN)"] * HAS_CTRANSLATE2:
        assert re.search(re.escape(name) + ROW + "same$", out, re.M), name
    if not HAS_CTRANSLATE2:
        assert re.search(r"CTranslate2 float32 +skipped: not installed", out)
    assert re.search(r"llama.cpp +skipped: --model smollm2 only", out)  # the GGUF file is SmolLM2's
    assert re.search(r"^bound \(a\), copy bandwidth [\d.]+ GB/s: [\d.]+ tokens/s", out, re.M)
    assert re.search(r"^bound \(b\), matrix-vector read bandwidth [\d.]+ GB/s \(the fastest of them\): "
                     r"[\d.]+ tokens/s", out, re.M)
    assert re.search(r"^matrix-vector read bandwidth, .*torch.mv, row-major [\d.]+ GB/s", out, re.M)
    assert re.search(r"^bound \(c\), the step's matrix-vector products alone \(9 linear layers, .*: [\d.]+ ms, "
                     r"[\d.]+ tokens/s", out, re.M)
    assert re.search(r"^load average \(1 min\) before each round, then after the last: [\d.]+ [\d.]+$", out, re.M)
    assert re.search(r"^fast path / cached: +[\d.]+x \(its products: (onednn|torch)_linear, which prepare timed",
                     out, re.M)
    if HAS_CTRANSLATE2:  # the ratios are against its faster backend of the two
        assert re.search(r"^CTranslate2's faster backend here: (CTranslate2 [\d.]+ float32|same, CT2_USE_MKL=0)",
                         out, re.M)
    assert "disturbed rounds" in out
    # the probes of every round, so that a run in the machine's fast state shows as such
    assert re.search(r"^per round, probe \(b\) .*GB/s\): [\d.]+$", out, re.M)
    assert re.search(r"^per round, probe \(c\) \(ms\): [\d.]+$", out, re.M)
    assert re.search(r"^per round, fast path \(prepare\): steady step \(ms\) [\d.]+; whole generation", out, re.M)


@pytest.mark.slow  # 5-12 s: runs the benchmark in a subprocess
def test_generate_speed_core_keeps_the_contenders_the_targets_name():
    out = run_bench("generate_speed.py", *TINY, "--core", "--no-ctranslate2")
    for name in ["nexttoken, KV cache", "fast path (prepare)", "transformers generate"]:
        assert re.search(re.escape(name) + r".* [\d.]+ \([\d.]+-[\d.]+\) +\d+% +\d+% +[\d.]+ +\d+%  same$", out, re.M)
    for name in ["no cache", "onednn=False", "static cache", "lay_out_for_cpu"]:
        assert name not in out
    assert "same tokens from all of them: True" in out


def load_bench():
    return load_script("bench/generate_speed.py")


def test_the_steady_step_is_the_median_step_of_the_second_half():
    bench = load_bench()
    # 8 tokens: the first after a slow prompt pass, then steps of 1, 1, 1 and 2, 2, 2, 5 (the second half)
    stamps = [10.0, 11.0, 12.0, 13.0, 15.0, 17.0, 19.0, 24.0]
    assert bench.steady_step(stamps) == 2.0  # steps of tokens 5 to 8
    stamps = [float(t) for t in range(128)]  # 128 tokens, 1 s apart but token 64's step (outside the half)
    stamps[63:] = [t + 100 for t in stamps[63:]]
    assert bench.steady_step(stamps) == 1.0
    assert bench.steady_step([1.0]) is None


def test_each_contender_stamps_its_own_tokens():
    """The steady step comes from each contender's own per-token hook: the lesson's on_token, the fast
    path's (the lesson's generate), transformers' streamer: one stamp per new token."""
    bench = load_bench()
    torch.manual_seed(0)
    from transformers import GPT2Config, GPT2LMHeadModel

    hf = GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=64, n_positions=32,
                                    bos_token_id=None, eos_token_id=None)).eval()
    model = nexttoken.from_hf_gpt2(hf)
    prompt = torch.tensor([[1, 2, 3]])
    clock = bench.Clock()
    nexttoken.generate(model, prompt, 6, on_token=clock.tick)
    assert len(clock.take()) == 6
    nexttoken.fast.prepare(model).generate(prompt, 5, on_token=clock.tick)
    assert len(clock.take()) == 5
    hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=7, do_sample=False,
                pad_token_id=0, eos_token_id=None, streamer=bench.StampingStreamer(clock))
    stamps = clock.take()
    assert len(stamps) == 7 and stamps == sorted(stamps)


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
    assert re.search(r"fast path, fixed shapes .* [\d.]+ \([\d.]+-[\d.]+\) +\d+% +\d+% +[\d.]+ +\d+%  same$", out, re.M)
    assert "same tokens from all of them: True" in out


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
        assert re.search(re.escape(name) + ROW + "same$", out, re.M), name
    assert re.search(r"^bound \(c\), the step's matrix-vector products alone \(151 linear layers", out, re.M)
    if HAS_LLAMA_CPP:  # installed by hand: its row counts agreeing tokens, and it has its own bound
        for kind in ("Q4_1 file", "float32 copy"):  # as stored, and at the float32 contenders' precision
            assert re.search(r"llama\.cpp \([\d.]+\) " + kind + ROW + r"\d/4 new tokens agree", out, re.M)
            assert re.search(r"^llama.cpp \([\d.]+\) " + kind + r"'s own bound: its file's [\d.]+ MB", out, re.M)
    else:
        assert re.search(r"llama.cpp +skipped: not installed", out)


def test_a_worker_that_dies_ends_the_run_with_a_clear_message(tmp_path):
    """A native library that crashes (llama.cpp's AMX kernels on an Intel CPU: a segfault, no message)
    ends the run naming the worker and its exit, not with a JSON error on an empty line."""
    bench = load_script("bench/generate_speed.py")
    script = tmp_path / "dying_worker.py"
    script.write_text('import json, os\nprint(json.dumps({"ready": "1.0"}), flush=True)\ninput()\nos.abort()\n')
    worker = bench.Worker(str(script))
    assert worker.version == "1.0"
    with pytest.raises(SystemExit, match=r"dying_worker.py died generating 2 tokens: it exited with code -6, signal 6"):
        worker.generate(torch.tensor([[1, 2]]), 2)
    script.write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(SystemExit, match=r"dying_worker.py failed to start: it exited with code 3 "):
        bench.Worker(str(script))


def test_the_autotuned_path_keeps_its_compiler_cache_per_torch_version_and_cpu(tmp_path, monkeypatch):
    """compile="max-autotune" points inductor's cache (its per-matrix timings, its compiled kernels) at the
    user's cache directory, one folder per torch version and CPU; a TORCHINDUCTOR_CACHE_DIR already set wins."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    where = nexttoken.fast.autotune_cache_dir()
    assert where.startswith(str(tmp_path / "nexttoken" / "inductor" / f"torch-{torch.__version__}-cpu-"))
    assert where == nexttoken.fast.autotune_cache_dir()  # the same CPU, the same folder
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "recorded")  # so that monkeypatch puts back what was there
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    nexttoken.fast.use_autotune_cache_dir()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == where
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())  # inductor's own, set by importing transformers
    nexttoken.fast.use_autotune_cache_dir()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == where
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    nexttoken.fast.use_autotune_cache_dir()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")


def test_the_float32_gguf_copy_holds_the_dequantized_values_and_every_field(tmp_path):
    """gguf_float32.float32_copy (llama.cpp's equal-precision row): each tensor the stored one dequantized,
    in float32; the metadata copied, but the file type, which now says float32; no half file left."""
    import gguf
    import numpy as np

    copier = load_script("bench/gguf_float32.py")
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((4, 64), dtype=np.float32) * 3  # rows of Q8_0 blocks (32 values each)
    norm = rng.standard_normal(64, dtype=np.float32)
    source = tmp_path / "tiny.Q8_0.gguf"
    writer = gguf.GGUFWriter(source, "llama")
    writer.add_block_count(1)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_token_list(["a", "b"])
    writer.add_tensor("blk.0.w", gguf.quants.quantize(weight, gguf.GGMLQuantizationType.Q8_0),
                      raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("blk.0.norm", norm)
    for write in (writer.write_header_to_file, writer.write_kv_data_to_file, writer.write_tensors_to_file,
                  writer.close):
        write()

    target = copier.float32_copy(source, tmp_path / "tiny.F32.gguf")
    stored, copied = gguf.GGUFReader(source), gguf.GGUFReader(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.F32.gguf", "tiny.Q8_0.gguf"]
    assert copied.fields["general.file_type"].contents() == gguf.LlamaFileType.ALL_F32
    for name in ("general.architecture", "llama.block_count", "tokenizer.ggml.tokens"):
        assert copied.fields[name].contents() == stored.fields[name].contents(), name
    for before, after in zip(stored.tensors, copied.tensors, strict=True):
        assert (after.name, after.tensor_type) == (before.name, gguf.GGMLQuantizationType.F32)
        np.testing.assert_array_equal(after.data, gguf.quants.dequantize(before.data, before.tensor_type))
    assert not np.array_equal(copied.tensors[0].data, weight)  # Q8_0 rounds: the copy holds what was stored
    np.testing.assert_allclose(copied.tensors[0].data, weight, atol=0.1)
