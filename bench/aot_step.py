"""The autotuned step compiled ahead of time (AOTInductor): what a first build costs, how fast a new process loads it.

    .venv/bin/python bench/aot_step.py                   # SmolLM2-135M-Instruct
    .venv/bin/python bench/aot_step.py --tiny            # a small model with SmolLM2's kind of block (the tests)

``prepare(model, compile="max-autotune")`` compiles its graphs in every new process (minutes: inductor's graph
cache refuses a graph holding oneDNN-packed weights); ``compile="ahead-of-time"`` does not. Here its package is
built as ``prepare`` builds it (``nexttoken.fast.build_step_package``: the max-autotune twin's one-token step
exported with ``torch.export``, the cache's buffers as inputs written in place, the number of keys a dynamic
size, and compiled with ``AUTOTUNE_OPTIONS`` by ``torch._inductor.aoti_compile_and_package``), into a temporary
folder rather than the cache: the first build. Then a new process, this script again with ``--load``, loads the package
(``torch._inductor.aoti_load_package``), runs the prompt through the eager fast path and every step through the
package, and reports how long the load took, the steady step, and whether the tokens are the plain loop's.
Batch of one, no padding: the only case the package covers.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

import nexttoken
import nexttoken.fast as fast


def load_model(tiny: bool):
    if not tiny:
        return nexttoken.load_smollm2().eval(), torch.tensor([nexttoken.smollm2_tokenizer().encode("Once upon a time")])
    torch.manual_seed(0)
    config = nexttoken.DecoderConfig(vocab_size=100, context_length=128, d_model=32, n_layers=2, n_heads=4,
                                     n_kv_heads=2, positions="rope", norm="rmsnorm", mlp="swiglu", bias=False)
    return nexttoken.Decoder(config).eval(), torch.tensor([[1, 2, 3, 4]])


def build(model, package: str) -> float:
    """Export the step and compile it into ``package`` (the library's ``build_step_package``); its seconds."""
    start = time.perf_counter()
    fast.build_step_package(model, package)
    return time.perf_counter() - start


def load_and_run(model, prompt, package: str, new_tokens: int) -> dict:
    start = time.perf_counter()
    step = torch._inductor.aoti_load_package(package)
    loaded = time.perf_counter() - start
    with torch.no_grad():
        cache = fast.prepare(model, onednn=False).new_cache()
        ids = torch.cat([prompt, fast.fast_run(model, prompt, None, cache).argmax(-1)], dim=1)  # the prompt, eager
        gaps = []
        for _ in range(new_tokens - 1):
            n = ids.shape[1]
            start = time.perf_counter()
            logits = step(ids[:, -1:], torch.tensor([n - 1]), cache.keys, cache.values, torch.empty(n))
            gaps.append(time.perf_counter() - start)
            ids = torch.cat([ids, logits.argmax(-1)], dim=1)
        same = torch.equal(ids, nexttoken.generate(model, prompt, new_tokens))
    return {"load_s": loaded, "step_ms": statistics.median(gaps[len(gaps) // 2:]) * 1e3, "same": same}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a small model: seconds to a minute (the tests)")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--load", metavar="PACKAGE", help="(the second process) load PACKAGE and generate")
    args = parser.parse_args()
    model, prompt = load_model(args.tiny)
    if not 1 <= args.new_tokens <= model.config.context_length - prompt.shape[1]:
        parser.error(f"--new-tokens must be 1 to {model.config.context_length - prompt.shape[1]} (the window)")
    if args.load:
        print(json.dumps(load_and_run(model, prompt, args.load, args.new_tokens)))
        return
    with tempfile.TemporaryDirectory() as folder:
        package = str(Path(folder) / "step.pt2")
        seconds = build(model, package)
        print(f"first build (export and compile): {seconds:.1f} s; package {Path(package).stat().st_size / 1e6:.0f} MB")
        start = time.perf_counter()
        command = [sys.executable, __file__, "--load", package, "--new-tokens", str(args.new_tokens)]
        reply = subprocess.run(command + ["--tiny"] * args.tiny, capture_output=True, text=True)
        if reply.returncode:
            raise SystemExit(f"the second process failed:\n{reply.stderr[-3000:]}")
        second = json.loads(reply.stdout.splitlines()[-1])
        print(f"second process: {time.perf_counter() - start:.1f} s in all (start, model, load, {args.new_tokens} "
              f"tokens and the plain loop's); aoti_load_package {second['load_s']:.1f} s; steady step "
              f"{second['step_ms']:.2f} ms; same tokens as the plain loop: {second['same']}")
        if not second["same"]:
            raise SystemExit("the package's steps gave other tokens than the plain loop")


if __name__ == "__main__":
    main()
