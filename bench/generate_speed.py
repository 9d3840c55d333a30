"""How fast is the generation loop, against the engines a user could pick, and against two bounds?

    .venv/bin/python bench/generate_speed.py                  # GPT-2-small shape (124M), as in issue 15
    .venv/bin/python bench/generate_speed.py --model smollm2  # SmolLM2-135M-Instruct, the real weights
    .venv/bin/python bench/generate_speed.py --tiny           # a seconds-long smoke run of the same code
    .venv/bin/python bench/generate_speed.py --device cuda --dtype bfloat16   # on a GPU, in bfloat16
    .venv/bin/python bench/generate_speed.py --device cuda --compile --fixed-shapes   # + CUDA graphs (gpt-fast's)

One run, one machine: a GPT-2-small-shaped model with random weights (float32, batch 1, a 16-token
prompt, 128 new greedy tokens), on CUDA when available (``--device``), in float32 or bfloat16
(``--dtype``). Contenders, on the same weights:

- nexttoken's loop without the KV cache, and with it (``nexttoken.generate``, the lesson's loop);
- the cached loop after ``nexttoken.fast.lay_out_for_cpu`` (widening weights stored (in, out));
- the fast path, ``nexttoken.fast.prepare(model).generate`` (on CPU its linear layers run oneDNN's
  matmul or ``nn.Linear``'s, whichever ``prepare`` timed faster on the model's matrices), the same with
  oneDNN's (``onednn=True``) and with ``nn.Linear``'s own (``onednn=False``) on plain and laid-out weights,
  and with ``--compile`` also ``prepare(model, compile=True)`` (torch.compile: its warm-up, minutes,
  is printed), with ``--autotune`` also ``prepare(model, compile="max-autotune")`` (the compiler times
  its own C++ matrix kernels against the libraries'), with ``--ahead-of-time`` also
  ``prepare(model, compile="ahead-of-time")`` (the same autotuned step, built once into a package on disk
  and loaded by later processes: its warm-up, built or loaded, is printed); with ``--fixed-shapes`` also
  ``prepare(model, fixed_shapes=True)`` (every step attends over the whole window, masked), and with both, that step
  compiled once with ``mode="reduce-overhead"``, which a GPU records as a CUDA graph (gpt-fast's recipe);
- transformers' ``generate`` with its cache (the model the weights come from), and with its static
  cache (``cache_implementation="static"``), transformers' own recipe for fast generation: on a GPU its
  ``generate`` then compiles the one-token call itself (``torch.compile(mode="reduce-overhead")``, CUDA
  graphs; the prompt uncompiled), and with ``--compile`` on a CPU it is asked to do the same there (its
  ``CompileConfig``'s flag for other devices);
- CTranslate2 float32 (converted from the same transformers weights), when ``ctranslate2`` is
  installed (``pip install -e ".[bench]"``), in a worker process of its own: torch and CTranslate2
  each bring an OpenMP runtime, and two in one process disturb each other. Twice: with its default
  matrix backend (MKL on an Intel CPU) and with ``CT2_USE_MKL=0`` (oneDNN); the ratios printed last are
  against the faster of the two;
- with ``--model smollm2``, llama.cpp (llama-cpp-python, when installed), reference rows, not targets:
  on the GGUF file as stored (Q4_1 weights, about 5 bits each), and on a float32 copy of it
  (``gguf_float32.py``: the same dequantized weights every float32 contender reads, so that row compares
  engines at equal precision; written once under the user's cache directory). Its kernels are its own,
  so its tokens are counted against the float32 ones ("k/n agree") rather than required equal, and each
  row has its own bound: its file's tensor bytes per token at (b)'s bandwidth.

Every contender's tokens are compared with the cached loop's (in bfloat16 a near-tie may go either way
between two kernels, so there the run reports how many tokens agree instead of failing). Two bounds, from the
bytes of weights each new token must read: (a) divided by the bandwidth of a large copy (read + write, STREAM's
convention), (b) divided by the bandwidth a large matrix-vector product reads (a ~1 GB float32
matrix in both storage orders, multiplied by torch.mv and, on CPU, by oneDNN: the fastest of them),
which is what a generation step does. (a) is not a bound: a good engine beats it. (c) is the time of
the step's own matrix-vector products alone (every linear layer of the model applied to one row, back
to back, with the fast path's kernel): what a step would cost with nothing else in it, at the sizes
of this model's matrices, which read slower than one large matrix. With ``--autotune``, (c) is
timed again with the products compiled as ``compile="max-autotune"`` compiles them (the kernels it
picks, which read faster than oneDNN's): the autotuned rows' own (c), max-autotune's and ahead-of-time's.

With ``--model smollm2`` the model is SmolLM2-135M-Instruct (30 layers, rotary positions,
grouped-query attention; float32 from its GGUF file, ``nexttoken.load_smollm2``), the prompt "Once upon
a time"; transformers loads the same file itself (its own GGUF reader), and CTranslate2 converts that
model. The fast path runs the model's own blocks, so it runs both models.

Two figures per contender, from the same generations: the whole generation's tokens/s (prompt included,
as a user waits for it), and the *steady step*: the median time between two new tokens over the second
half of the generation (tokens 65 to 128 of 128), taken from the contender's own per-token hook (the
lesson's ``on_token``, which the fast path keeps since it runs the lesson's ``generate``; transformers'
``streamer``; CTranslate2's ``callback``; llama.cpp's token iterator), never from a copy of a loop. Bound
(c) models one such step, so its share is (c)'s time over the steady step's. The probes of every round are
printed too, so that a run in the machine's fast state (it has two speeds, minutes apart) shows as such.
``--core`` keeps only the contenders the targets name (the cached loop as the reference, the fast path,
the compiled ones asked for, transformers' ``generate``, CTranslate2, llama.cpp).

All of it is timed round after round (each contender once per round, each bandwidth probe too, as the
best of three calls), so a slow minute on a shared machine slows every contender alike. The load
average is printed per round, and a round whose cached loop took over 1.3x its median is flagged as
disturbed: compare only quiet runs.
"""

import argparse
import copy
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import transformers
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel

import nexttoken

PLAIN = "nexttoken, KV cache"  # the reference contender: the others' tokens are compared with its
DISTURBED = 1.3  # a round whose reference time exceeds its median by this factor is flagged


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def seconds(fn, device) -> tuple[float, object]:
    sync(device)
    start = time.perf_counter()
    result = fn()
    sync(device)
    return time.perf_counter() - start, result


class Clock:
    """Per-token timestamps of one generation, taken by the contender's own per-token hook (the lesson's
    ``on_token``, transformers' ``streamer``; a worker takes its own): the steady step is measured inside
    the same run that gives the whole generation's time, without a copy of any loop."""

    def __init__(self):
        self.stamps = []

    def tick(self, *_):
        self.stamps.append(time.perf_counter())

    def take(self) -> list[float]:
        stamps, self.stamps = self.stamps, []
        return stamps


class StampingStreamer(transformers.generation.streamers.BaseStreamer):
    """transformers' streamer hook: ``put`` is called with the prompt, then with each new token."""

    def __init__(self, clock: Clock):
        self.clock, self.prompt_seen = clock, False

    def put(self, value):
        if self.prompt_seen:
            self.clock.tick()
        self.prompt_seen = True

    def end(self):
        self.prompt_seen = False


def steady_step(stamps: list[float]) -> float | None:
    """The median time between consecutive new tokens over the second half of a generation: for 128 new
    tokens, tokens 65 to 128 (64 steps), far from the prompt's pass and the first steps' allocations; what
    bound (c), one step's products, is compared with. None where a contender stamped too few tokens."""
    if len(stamps) < 4:
        return None
    steps = [b - a for a, b in zip(stamps, stamps[1:])]  # steps[i]: token i + 2's step
    return statistics.median(steps[len(stamps) // 2 - 1:])


def interleaved_rounds(fns: dict, repeats: int, device, clock: Clock | None = None) -> tuple[dict, dict, dict, list]:
    """Each function's seconds per round, its steady step per round (``steady_step`` of the per-token
    stamps, None for a probe), its last result, and the load average before each round.

    A function may time itself (a worker reports its own generation time and stamps): it then returns
    (seconds, result) or (seconds, result, stamps) and sets ``fn.self_timed = True``. The others stamp
    their tokens on ``clock``.
    Interleaving matters on a shared machine: a slow minute slows every contender alike, instead of
    whichever happened to be running then.
    """
    times = {name: [] for name in fns}
    steps = {name: [] for name in fns}
    results, loads = {}, []
    for _ in range(repeats):
        loads.append(os.getloadavg()[0])
        for name, fn in fns.items():
            if clock is not None:
                clock.take()
            elapsed, result = seconds(fn, device)
            stamps = clock.take() if clock is not None else []
            if getattr(fn, "self_timed", False):
                elapsed, result, *own = result
                stamps = own[0] if own else stamps
            times[name].append(elapsed)
            steps[name].append(steady_step(stamps))
            results[name] = result
        print(f"round {len(loads)}/{repeats} done", file=sys.stderr, flush=True)  # progress
    loads.append(os.getloadavg()[0])
    return times, steps, results, loads


def best_of_three(fn, device):
    """A probe timed three times in a row, reporting its fastest call (a bound is the best the machine
    does; one call of a 1 GB probe is tens of milliseconds, easily caught by a neighbour's burst)."""
    def timed():
        return min(seconds(fn, device)[0] for _ in range(3)), None
    timed.self_timed = True
    return timed


COPY_BYTES = 1 << 29
MV_BYTES = 1 << 30


def big_copy(device, nbytes: int = COPY_BYTES):
    """A copy of nbytes to time: it moves 2 * nbytes (read + write, the STREAM 'copy' convention)."""
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)  # the first touch of dst's pages is not what we measure
    return lambda: dst.copy_(src)


def big_mv(device, nbytes: int = MV_BYTES, layout: str = "row-major", kernel: str = "torch.mv"):
    """A float32 matrix-vector product over an nbytes matrix: it reads nbytes (the vector is tiny).

    The same kind of read as a generation step at batch 1, without the rest of the step. The matrix
    is stored row-major (as nn.Linear keeps (out, in)) or column-major (as lay_out_for_cpu keeps it),
    and multiplied by ``torch.mv`` (MKL on x86 CPUs) or by oneDNN's linear (what the fast path uses
    on CPU): which one reads fastest depends on the machine, so all four are timed.
    """
    columns = 4096
    rows = nbytes // 4 // columns
    if layout == "row-major":
        matrix = torch.ones(rows, columns, dtype=torch.float32, device=device)
    else:
        matrix = torch.ones(columns, rows, dtype=torch.float32, device=device).t()
    vector = torch.ones(columns, dtype=torch.float32, device=device)
    if kernel == "oneDNN":
        return lambda: torch.ops.mkldnn._linear_pointwise(vector[None], matrix, None, "none", [None], "")
    return lambda: torch.mv(matrix, vector)


def step_products(model: nexttoken.Decoder, linear):
    """Every linear layer of the model (LM head included) applied to one row, back to back: the
    matrix-vector products of one generation step and nothing else, on the step's own weights."""
    layers = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    rows = [torch.ones(1, m.in_features, device=m.weight.device, dtype=m.weight.dtype) for m in layers]
    return lambda: [linear(m, x) for m, x in zip(layers, rows)]


def autotuned_step_products(model: nexttoken.Decoder):
    """The same products compiled as ``compile="max-autotune"`` compiles the step (weights frozen into
    the graph, each matrix's kernel chosen by timing): (c) for the kernels that path runs, not oneDNN's.
    The rows are the compiled function's argument, so that freezing cannot fold the products away; a
    SwiGLU's gate and up read one row, as in the step, so the compiler may make them one product there too.
    Gradients are turned off around the call: inductor freezes weights only in a graph compiled without
    them, and with them on this probe ran MKL's products on weights passed in, one thread, 49 to 65 ms for
    SmolLM2 against 19 ms frozen and autotuned (observed, AMD EPYC, 2026-12-03): no bound at all."""
    twin = nexttoken.fast.frozen_twin(model)
    layers = [m for m in twin.modules() if isinstance(m, torch.nn.Linear)]
    row_of = {m: torch.ones(1, m.in_features, device=m.weight.device, dtype=m.weight.dtype) for m in layers}
    for mlp in twin.modules():
        if isinstance(mlp, nexttoken.model.MLP) and mlp.kind == "swiglu":
            row_of[mlp.up] = row_of[mlp.gate]
    rows = [row_of[m] for m in layers]
    products = torch.compile(lambda xs: [m(x) for m, x in zip(layers, xs)])

    def run():
        with torch.no_grad(), torch._inductor.config.patch(nexttoken.fast.AUTOTUNE_OPTIONS):
            return products(rows)
    return run


def weight_bytes_per_token(model: nexttoken.Decoder) -> int:
    """Every weight is read once per new token, except the position table, of which one row is read.
    A tied embedding is one matrix: read in full by the LM head, one row by the lookup."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    if model.position_embedding is None:  # rotary positions: no table
        return total
    table = model.position_embedding.weight
    return total - table.numel() * table.element_size() + table[0].numel() * table.element_size()


class Worker:
    """A contender in a process of its own (``bench/*_worker.py``), asked for one generation at a time.

    CTranslate2 and llama.cpp each bring their own thread pool (OpenMP's), and two in one process can
    disturb each other's timing (and the torch contenders'). The worker times its own generation."""

    def __init__(self, script: str, *args, env: dict | None = None):
        env = dict(os.environ, TRANSFORMERS_VERBOSITY="error", HF_HUB_DISABLE_PROGRESS_BARS="1", **(env or {}))
        self.script = script
        self.process = subprocess.Popen([sys.executable, str(Path(__file__).parent / script), *map(str, args)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.version = self.reply("failed to start")["ready"]

    def reply(self, doing: str) -> dict:
        """The worker's next line, or a clear exit where it died (a crash in a native library says nothing)."""
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait(timeout=60)
            signal = f", signal {-code}" if code < 0 else ""
            raise SystemExit(f"the worker {self.script} {doing}: it exited with code {code}{signal} "
                             "(its error, if any, is above; --no-ctranslate2 or --no-llama-cpp leaves it out)")
        return json.loads(line)

    def generate(self, prompt: torch.Tensor, new_tokens: int) -> tuple[float, torch.Tensor, list[float]]:
        """(seconds spent generating, as timed in the worker; prompt + new tokens (1, P + n); the time of
        each new token from the generation's start, as the worker stamped them)."""
        time.sleep(0.5)  # as the worker does after its run: let torch's OpenMP threads stop spinning first
        self.process.stdin.write(json.dumps({"prompt": prompt[0].tolist(), "new_tokens": new_tokens}) + "\n")
        self.process.stdin.flush()
        reply = self.reply(f"died generating {new_tokens} tokens")
        return (reply["seconds"], torch.cat([prompt.cpu(), torch.tensor([reply["tokens"]])], dim=1),
                reply.get("stamps", []))

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=60)


def ctranslate2_worker(hf, threads: int, workdir: str, env: dict | None = None) -> Worker:
    """bench/ctranslate2_worker.py: the same weights, saved here, converted there to float32."""
    transformers.utils.logging.disable_progress_bar()
    hf.save_pretrained(workdir)  # safetensors and config.json, read back by the converter
    return Worker("ctranslate2_worker.py", workdir, threads, env=env)


def gguf_weight_bytes(path) -> int:
    """The bytes of a GGUF file's tensors (Q4_1 blocks as stored and a few float32 norms, or all float32):
    what llama.cpp reads per new token (the tied embedding is read in full once, as the LM head)."""
    import gguf

    return sum(int(tensor.n_bytes) for tensor in gguf.GGUFReader(path).tensors)


def first_difference(a: torch.Tensor, b: torch.Tensor) -> str:
    """'same', or the first position where two (1, P + n) token tensors differ."""
    a, b = a.cpu(), b.cpu()
    if a.shape == b.shape and torch.equal(a, b):
        return "same"
    n = min(a.shape[1], b.shape[1])
    differ = (a[:, :n] != b[:, :n]).any(dim=0).nonzero()
    return f"DIFFERENT from position {int(differ[0]) if len(differ) else n}"


def agreement(a: torch.Tensor, b: torch.Tensor, prompt_length: int) -> int:
    """How many new tokens of two (1, P + n) outputs agree before the first that does not (after it
    their contexts differ, so later tokens are not comparable)."""
    a, b = a.cpu()[0], b.cpu()[0]
    n = min(len(a), len(b))
    differ = (a[:n] != b[:n]).nonzero()
    return (int(differ[0]) if len(differ) else n) - prompt_length


def load_models(args, device, dtype):
    """(nexttoken's model, the transformers model with the same weights, the prompt, a label)."""
    model, hf, prompt, label = load_float32_models(args, device)
    return model.to(dtype), hf.to(dtype), prompt, label


def load_float32_models(args, device):
    if args.model == "smollm2":
        if args.tiny:
            raise SystemExit("--tiny builds a small GPT-2 shape; leave out --model smollm2")
        from nexttoken.smollm2 import GGUF_NAME, smollm2_path

        transformers.utils.logging.disable_progress_bar()
        path = smollm2_path()
        model = nexttoken.load_smollm2(path).to(device)
        loaded = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=GGUF_NAME, dtype=torch.float32)
        # the same float32 weights in a plain model: one loaded "from GGUF" refuses save_pretrained,
        # which the CTranslate2 worker needs
        config = copy.deepcopy(loaded.config)
        del config.quantization_config
        hf = type(loaded)(config)
        hf.load_state_dict(loaded.state_dict())
        hf = hf.to(device).eval()
        prompt = torch.tensor([nexttoken.smollm2_tokenizer(path).encode("Once upon a time")], device=device)
        return model, hf, prompt, "SmolLM2-135M-Instruct (Llama block, 30 layers)"
    torch.manual_seed(0)
    shape = dict(n_embd=64, n_layer=2, n_head=4) if args.tiny else dict(n_embd=768, n_layer=12, n_head=12)
    hf = GPT2LMHeadModel(GPT2Config(**shape, bos_token_id=None, eos_token_id=None)).to(device).eval()
    prompt = torch.randint(50257, (1, 16), generator=torch.Generator().manual_seed(0)).to(device)
    return nexttoken.from_hf_gpt2(hf), hf, prompt, "GPT-2 shape, random weights"


def main():
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="a small model: checks the script in seconds")
    parser.add_argument("--repeats", type=int, default=5, help="rounds (each runs every contender once)")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--compile", action="store_true", help="add the fast path under torch.compile (minutes)")
    parser.add_argument("--autotune", action="store_true",
                        help="add the fast path with compile='max-autotune' (about 5 minutes of warm-up on SmolLM2)")
    parser.add_argument("--ahead-of-time", action="store_true",
                        help="add the fast path with compile='ahead-of-time' (the autotuned step packaged on disk: "
                             "minutes to build the first time, then seconds to load; float32 on the CPU)")
    parser.add_argument("--fixed-shapes", action="store_true",
                        help="add the fast path with fixed_shapes=True (and compiled, with --compile: CUDA graphs "
                             "on a GPU); on a CPU its steps read the whole window")
    parser.add_argument("--core", action="store_true",
                        help="only the contenders the targets name: the cached loop (the reference), the fast path "
                             "(and --compile's, --autotune's, --ahead-of-time's), transformers generate, CTranslate2, "
                             "llama.cpp")
    parser.add_argument("--no-ctranslate2", action="store_true", help="leave CTranslate2 out even if installed")
    parser.add_argument("--no-llama-cpp", action="store_true", help="leave llama.cpp out even if installed")
    parser.add_argument("--model", choices=["gpt2", "smollm2"], default="gpt2",
                        help="gpt2: GPT-2-small shape, random weights; smollm2: SmolLM2-135M-Instruct")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto (the default): CUDA when available, else the CPU")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                        help="the weights' and activations' type for every contender but CTranslate2 (float32)")
    args = parser.parse_args()
    if args.repeats < 1 or args.new_tokens < 1:
        parser.error("--repeats and --new-tokens must be >= 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device here")
    device = torch.device(args.device if args.device != "auto" else "cuda" if torch.cuda.is_available() else "cpu")
    if args.ahead_of_time and (device.type != "cpu" or args.dtype != "float32"):
        parser.error("--ahead-of-time: float32 on the CPU only (what compile='ahead-of-time' runs)")
    dtype = getattr(torch, args.dtype)
    model, hf, prompt, label = load_models(args, device, dtype)
    n = args.new_tokens

    clock = Clock()  # every in-process contender stamps each new token on it (its steady step)
    tick = clock.tick
    runs = {} if args.core else {
        "nexttoken, no cache": lambda k: nexttoken.generate(model, prompt, k, use_cache=False, on_token=tick)}
    runs[PLAIN] = lambda k: nexttoken.generate(model, prompt, k, use_cache=True, on_token=tick)
    # The fast path runs the model's own blocks, so it runs both models.
    laid_out = nexttoken.fast.lay_out_for_cpu(copy.deepcopy(model))  # the same weights, (in, out) where wider
    fast = nexttoken.fast.prepare(model)
    fast_torch = nexttoken.fast.prepare(model, onednn=False)
    fast_laid_out = nexttoken.fast.prepare(laid_out, onednn=False)
    runs["fast path (prepare)"] = lambda k: fast.generate(prompt, k, on_token=tick)
    if not args.core:
        runs.update({
            "  same, lay_out_for_cpu": lambda k: nexttoken.generate(laid_out, prompt, k, use_cache=True, on_token=tick),
            "  same, onednn=False": lambda k: fast_torch.generate(prompt, k, on_token=tick),
            "  same, onednn=False, laid out": lambda k: fast_laid_out.generate(prompt, k, on_token=tick),
        })
    if nexttoken.fast.can_use_onednn(model) and not args.core:  # the default times both kernels, keeps the faster
        fast_onednn = nexttoken.fast.prepare(model, onednn=True)
        runs["  same, onednn=True"] = lambda k: fast_onednn.generate(prompt, k, on_token=tick)
    def hf_generate(k, model=hf, **extra):
        return model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=k, do_sample=False,
                              use_cache=True, pad_token_id=0, eos_token_id=None, streamer=StampingStreamer(clock),
                              **extra)

    runs["transformers generate"] = hf_generate
    if not args.core or device.type == "cuda":  # on a GPU: transformers' compiled recipe, the anchor there
        runs["  same, static cache"] = lambda k: hf_generate(k, cache_implementation="static")
    if args.compile:
        compiled = nexttoken.fast.prepare(model, compile=True)
        runs["fast path, torch.compile"] = lambda k: compiled.generate(prompt, k, on_token=tick)
        # transformers' recipe: with a static cache its generate compiles the one-token call itself
        # (CompileConfig: mode="reduce-overhead", CUDA graphs on a GPU) and runs the prompt uncompiled. On CUDA
        # it does so by default, so the static-cache row above is that recipe; on a CPU only when asked, with
        # the config's flag for other devices. (Our own torch.compile of the whole forward, the prompt included,
        # crashed on CUDA: "accessing tensor output of CUDAGraphs that has been overwritten by a subsequent
        # run", the static cache's tensors made inside a recorded graph's memory: bench/README.md, on a GPU.)
        if device.type == "cpu":
            recipe = transformers.CompileConfig(fullgraph=True)
            recipe._compile_all_devices = True  # transformers' switch for compiling off CUDA (a private field)
            runs["  transformers, static cache, torch.compile"] = lambda k: hf_generate(
                k, cache_implementation="static", compile_config=recipe)
    if args.autotune:  # the compiler times its own C++ matrix kernels against the libraries', per matrix
        autotuned = nexttoken.fast.prepare(model, compile="max-autotune")
        runs["fast path, max-autotune"] = lambda k: autotuned.generate(prompt, k, on_token=tick)
    if args.ahead_of_time:  # the same autotuned step, packaged on disk: built by the first process, loaded by later
        package_found = os.path.isfile(nexttoken.fast.step_package_path(model))
        started = time.perf_counter()
        ahead = nexttoken.fast.prepare(model, compile="ahead-of-time")  # the package loaded, or built first
        ahead_prepare_s = time.perf_counter() - started
        runs["fast path, ahead-of-time"] = lambda k: ahead.generate(prompt, k, on_token=tick)
    if args.fixed_shapes:
        fixed = nexttoken.fast.prepare(model, fixed_shapes=True)
        runs["fast path, fixed shapes"] = lambda k: fixed.generate(prompt, k, on_token=tick)
        if args.compile:  # gpt-fast's recipe: the step compiled once, mode="reduce-overhead" (CUDA graphs)
            fixed_compiled = nexttoken.fast.prepare(model, compile=True, fixed_shapes=True)
            runs["  same, torch.compile"] = lambda k: fixed_compiled.generate(prompt, k, on_token=tick)
    workers, skipped = {}, {}  # contender name -> Worker; engine -> why it has no row
    workdir = tempfile.TemporaryDirectory()
    if args.no_ctranslate2:
        skipped["CTranslate2 float32"] = "left out (--no-ctranslate2)"
    elif importlib.util.find_spec("ctranslate2") is None:
        skipped["CTranslate2 float32"] = 'not installed (pip install -e ".[bench]")'
    elif device.type != "cpu":
        skipped["CTranslate2 float32"] = "CPU only in this benchmark"
    elif dtype != torch.float32:
        skipped["CTranslate2 float32"] = "float32 only in this benchmark (its converted model)"
    else:
        worker = ctranslate2_worker(hf, torch.get_num_threads(), workdir.name)
        workers[f"CTranslate2 {worker.version} float32"] = worker
        # On an Intel CPU CTranslate2 multiplies with MKL by default, and with oneDNN when CT2_USE_MKL=0
        # (its only backend on AMD): measured on an Intel Xeon, 17 against 43 tokens/s on SmolLM2. Both
        # rows, so that the targets are set against its faster one on any CPU.
        workers["  same, CT2_USE_MKL=0 (oneDNN)"] = ctranslate2_worker(hf, torch.get_num_threads(), workdir.name,
                                                                     env={"CT2_USE_MKL": "0"})
    # llama.cpp: reference rows, not targets. One runs the GGUF file as stored (Q4_1 weights, its own kernels),
    # one a float32 copy of it (gguf_float32.py: the same dequantized weights the float32 contenders read, so
    # the row compares engines at equal precision). Their kernels sum in another order, so their tokens are
    # counted against the float32 ones, not required equal.
    gguf_files = {}  # contender name -> the GGUF file it runs
    if args.model != "smollm2":
        skipped["llama.cpp"] = "--model smollm2 only (the GGUF file is SmolLM2's)"
    elif args.no_llama_cpp:
        skipped["llama.cpp"] = "left out (--no-llama-cpp)"
    elif importlib.util.find_spec("llama_cpp") is None:
        skipped["llama.cpp"] = 'not installed (pip install -e ".[bench]" builds llama.cpp from source)'
    elif device.type != "cpu":
        skipped["llama.cpp"] = "CPU only in this benchmark"
    else:
        from gguf_float32 import cached_float32_copy
        from nexttoken.smollm2 import smollm2_path

        stored = smollm2_path()
        for kind, path in (("Q4_1 file", stored), ("float32 copy", cached_float32_copy(stored))):
            worker = Worker("llama_cpp_worker.py", path, torch.get_num_threads(), prompt.shape[1] + n + 1)
            workers[f"llama.cpp ({worker.version}) {kind}"] = worker
            gguf_files[f"llama.cpp ({worker.version}) {kind}"] = path
    for name, worker in workers.items():
        runs[name] = lambda k, worker=worker: worker.generate(prompt, k)

    # The bandwidth probes: ~1 GB each on the full model (so caches do not help), far less in --tiny.
    probe_bytes = (1 << 24) if args.tiny else None
    kernels = ["torch.mv"] + (["oneDNN"] if nexttoken.fast.can_use_onednn(model) else [])
    probes = {"copy": big_copy(device, probe_bytes or COPY_BYTES)}
    for kernel in kernels:
        for layout in ("row-major", "column-major"):
            probes[f"mv: {kernel}, {layout}"] = big_mv(device, probe_bytes or MV_BYTES, layout, kernel)
    copy_bytes, mv_bytes = 2 * (probe_bytes or COPY_BYTES), probe_bytes or MV_BYTES
    # (c): the step's own products with the fast path's kernel (the faster here of oneDNN's and MKL's)
    linear = fast.linear
    probes["step's products"] = step_products(model, linear)
    autotuned_rows = [name for name in ("fast path, max-autotune", "fast path, ahead-of-time") if name in runs]
    if autotuned_rows:  # (c) again, with the kernels the autotuner picks for these matrices
        probes["step's products, max-autotune"] = autotuned_step_products(model)

    warm_up = {}
    with torch.no_grad():
        for name, fn in runs.items():  # warm-up: first-call allocations, kernel choices, compiling
            warm_up[name], _ = seconds(lambda: fn(n), device)
            print(f"warm-up, {name.strip()}: {warm_up[name]:.1f} s", file=sys.stderr, flush=True)  # progress
        for name, fn in probes.items():  # a compiled probe compiles here, not in the first round
            warm_up[name], _ = seconds(fn, device)
            print(f"warm-up, probe {name}: {warm_up[name]:.1f} s", file=sys.stderr, flush=True)
        timed = {name: (lambda fn=fn: fn(n)) for name, fn in runs.items()}
        for name in workers:
            timed[name].self_timed = True
        timed.update({name: best_of_three(fn, device) for name, fn in probes.items()})
        times, steps, results, loads = interleaved_rounds(timed, args.repeats, device, clock)
    for worker in workers.values():
        worker.close()
    workdir.cleanup()

    for probe in probes:
        results.pop(probe)
        steps.pop(probe)
    per_round = {name: list(ts) for name, ts in times.items()}  # for the per-round lines below
    copy_bandwidth = copy_bytes / statistics.median(times.pop("copy"))
    # The fastest kernel and layout (by median): the most a matrix-vector product read here
    products_seconds = statistics.median(times.pop("step's products"))
    mv_bandwidths = {name: mv_bytes / statistics.median(times.pop(name)) for name in probes if name.startswith("mv")}
    mv_bandwidth = max(mv_bandwidths.values())
    per_token = weight_bytes_per_token(model)
    copy_bound, mv_bound = copy_bandwidth / per_token, mv_bandwidth / per_token
    products_bound = 1 / products_seconds
    autotuned_products = times.pop("step's products, max-autotune", None)
    n_linear = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    speed = {name: [n / t for t in ts] for name, ts in times.items()}
    median = {name: statistics.median(s) for name, s in speed.items()}
    # the steady step: per round the median step of the second half, then the median over rounds
    step = {name: statistics.median(ss) if None not in ss else None for name, ss in steps.items()}
    quantized = [name for name in results if name.startswith("llama.cpp")]  # not required to agree
    verdicts = {name: first_difference(results[PLAIN], out) for name, out in results.items()
                if name not in quantized}
    for name in quantized:
        verdicts[name] = (f"{agreement(results[PLAIN], results[name], prompt.shape[1])}/{n} new tokens "
                          "agree before the first difference")

    print(f"device: {device} ({torch.get_num_threads()} threads), torch {torch.__version__}")
    print(f"model: {label}, {model.num_parameters() / 1e6:.1f}M parameters, {args.dtype}, batch 1, "
          f"prompt {prompt.shape[1]}, {n} new tokens, {args.repeats} interleaved rounds")
    print(f"whole generation: tok/s over the {n} new tokens (prompt included), median (min-max) of the rounds; "
          f"steady step: median time between tokens {n // 2 + 1} to {n} of the same generations (per round, then "
          f"the median over rounds), its share of (c): (c)'s time / the step's")
    print(f"{'contender':32s} {'tok/s median (min-max)':>26s} {'of (b)':>7s} {'of (c)':>7s} {'step ms':>8s} "
          f"{'step, of (c)':>12s}  tokens vs {PLAIN}")
    for name, s in speed.items():
        spread = f"{median[name]:.2f} ({min(s):.2f}-{max(s):.2f})"
        steady = (f"{step[name] * 1e3:8.2f} {products_seconds / step[name]:12.0%}" if step[name]
                  else f"{'-':>8s} {'-':>12s}")
        print(f"  {name:30s} {spread:>26s} {median[name] / mv_bound:7.0%} {median[name] / products_bound:7.0%} "
              f"{steady}  {verdicts[name]}")
    for engine, why in skipped.items():
        print(f"  {engine:30s} skipped: {why}")
    same = all(v == "same" for name, v in verdicts.items() if name not in quantized)
    print(f"same tokens from all of them{' (llama.cpp aside)' if quantized else ''}: {same}")
    if dtype != torch.float32:
        agree = {name: agreement(results[PLAIN], out, prompt.shape[1]) for name, out in results.items()
                 if name != PLAIN and name not in quantized}
        print(f"new tokens agreeing with {PLAIN}'s ({args.dtype}) before the first difference: "
              + ", ".join(f"{name.strip()} {a}/{n}" for name, a in agree.items()))
    print(f"weights read per token: {per_token / 1e6:.1f} MB")
    print(f"bound (a), copy bandwidth {copy_bandwidth / 1e9:.1f} GB/s: {copy_bound:.2f} tokens/s "
          f"(not a real bound: a matrix-vector product reads faster than a copy moves)")
    print(f"matrix-vector read bandwidth, {mv_bytes / 2**30:.3g} GiB float32 matrix: "
          + ", ".join(f"{name[4:]} {bw / 1e9:.1f} GB/s" for name, bw in mv_bandwidths.items()))
    print(f"bound (b), matrix-vector read bandwidth {mv_bandwidth / 1e9:.1f} GB/s (the fastest of them): "
          f"{mv_bound:.2f} tokens/s")
    print(f"bound (c), the step's matrix-vector products alone ({n_linear} linear layers, "
          f"one row, {linear.__name__}), back to back: {products_seconds * 1e3:.1f} ms, "
          f"{products_bound:.2f} tokens/s (per-layer matrices of a few MB read slower than one 1 GiB matrix)")
    if autotuned_products is not None:
        autotuned_bound = 1 / statistics.median(autotuned_products)
        print(f"bound (c), max-autotune: the same products compiled with compile=\"max-autotune\"'s settings "
              f"(kernels chosen per matrix): {1e3 / autotuned_bound:.1f} ms, {autotuned_bound:.2f} tokens/s; "
              + ", ".join(f"{name} at {median[name] / autotuned_bound:.0%} of it" for name in autotuned_rows))
        for name in autotuned_rows:
            autotuned_step = step[name]
            print(f"steady step, {name}: {autotuned_step * 1e3:.2f} ms, its own (c) "
                  f"{1e3 / autotuned_bound:.2f} ms: at {1 / autotuned_bound / autotuned_step:.0%} of it; "
                  f"{(autotuned_step - 1 / autotuned_bound) * 1e3:.2f} ms a step beside its products")
    for name, path in gguf_files.items():
        file_bytes = gguf_weight_bytes(path)
        file_bound = mv_bandwidth / file_bytes
        print(f"{name}'s own bound: its file's {file_bytes / 1e6:.1f} MB of tensors per token at (b)'s "
              f"{mv_bandwidth / 1e9:.1f} GB/s: {file_bound:.2f} tokens/s; at {median[name] / file_bound:.0%} of it")
    if "nexttoken, no cache" in median:
        print(f"cached / uncached:       {median[PLAIN] / median['nexttoken, no cache']:.2f}x")
    print(f"cached / transformers:   {median[PLAIN] / median['transformers generate']:.2f}x")
    ct2 = [name for name in median if name.startswith("CTranslate2") or "CT2_USE_MKL" in name]
    fastest_ct2 = max(ct2, key=median.get, default=None)  # the ratios below are against its faster backend
    if fastest_ct2:
        print(f"CTranslate2's faster backend here: {fastest_ct2.strip()}")
        print(f"cached / CTranslate2:    {median[PLAIN] / median[fastest_ct2]:.2f}x")
    print(f"fast path / cached:      {median['fast path (prepare)'] / median[PLAIN]:.2f}x "
          f"(its products: {fast.linear.__name__}, which prepare timed the faster here)")
    if fastest_ct2:
        print(f"fast path / CTranslate2: {median['fast path (prepare)'] / median[fastest_ct2]:.2f}x")
        if args.compile:
            print(f"fast path compiled / CTranslate2: {median['fast path, torch.compile'] / median[fastest_ct2]:.2f}x")
        if args.autotune:
            ratio = median["fast path, max-autotune"] / median[fastest_ct2]
            print(f"fast path max-autotune / CTranslate2: {ratio:.2f}x")
        if args.ahead_of_time:
            ratio = median["fast path, ahead-of-time"] / median[fastest_ct2]
            print(f"fast path ahead-of-time / CTranslate2: {ratio:.2f}x")
    if args.compile:
        state = "compiled" if compiled.compiled else "FELL BACK to eager (see the warning above)"
        print(f"torch.compile warm-up (first call, prompt and step): {warm_up['fast path, torch.compile']:.1f} s; "
              f"{state}")
    if args.ahead_of_time:
        state = (("its package loaded" if package_found else "its package built") if ahead.compiled
                 else "FELL BACK to eager (see the warning above)")
        print(f"ahead-of-time warm-up (prepare {ahead_prepare_s:.1f} s, then the first call, prompt and step): "
              f"{ahead_prepare_s + warm_up['fast path, ahead-of-time']:.1f} s; {state}")
    # Per round, so that a round in the machine's fast (or slow) state is visible as such
    print("per round, probe (b) (the fastest matrix-vector read, GB/s): " + " ".join(
        f"{max(mv_bytes / ts[i] for name, ts in per_round.items() if name.startswith('mv')) / 1e9:.1f}"
        for i in range(args.repeats)))
    print("per round, probe (c) (ms): " + " ".join(f"{t * 1e3:.2f}" for t in per_round["step's products"]))
    if autotuned_products is not None:
        print("per round, probe (c), max-autotune (ms): " + " ".join(f"{t * 1e3:.2f}" for t in autotuned_products))
    for name in ["fast path (prepare)", "fast path, max-autotune", "fast path, ahead-of-time"] + ct2:
        if name in steps and None not in steps[name]:
            print(f"per round, {name.strip()}: steady step (ms) " + " ".join(f"{t * 1e3:.2f}" for t in steps[name])
                  + "; whole generation (tok/s) " + " ".join(f"{x:.2f}" for x in speed[name]))
    reference = times[PLAIN]
    usual = statistics.median(reference)
    disturbed = [i + 1 for i, t in enumerate(reference) if t > DISTURBED * usual]
    print("load average (1 min) before each round, then after the last: " + " ".join(f"{x:.2f}" for x in loads))
    print(f"disturbed rounds ({PLAIN} over {DISTURBED}x its median): "
          + (", ".join(map(str, disturbed)) + " -- rerun on a quiet machine" if disturbed else "none"))
    if not same and dtype == torch.float32:
        raise SystemExit("the contenders disagree on the tokens")


if __name__ == "__main__":
    main()
