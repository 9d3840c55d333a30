"""The library's ahead-of-time path: what its first build costs, and how soon a new process reaches its speed.

    .venv/bin/python bench/aot_step.py                   # SmolLM2-135M-Instruct
    .venv/bin/python bench/aot_step.py --tiny            # a small model with SmolLM2's kind of block (the tests)

``prepare(model, compile="max-autotune")`` compiles its graphs in every new process (minutes: inductor's graph
cache refuses a graph holding oneDNN-packed weights); ``prepare(model, compile="ahead-of-time")`` loads the
max-autotune twin's one-token step from a package on disk, building it there first where there is none
(``nexttoken.fast.build_step_package``; later processes only load it: ``nexttoken.fast.load_step_package``).
This script runs two processes one after the other, each
``prepare(model, compile="ahead-of-time").generate(prompt, n, on_token=...)`` as a learner calls it, with the
user's cache directory (``XDG_CACHE_HOME``) pointed at a new empty folder, so that the first one starts as on
a machine that has never built anything: its build includes the autotuning of every product. The second finds
the first one's package and the timings there.

For each process: the seconds from its launch (Python's start, imports, the model's load included) to its first
step through the package, of them ``prepare``'s (the build, or the load), that first step alone, the steady step
(the median time between tokens over the second half), and whether its tokens are the plain loop's. Batch of
one, no padding: the case the package runs.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

import nexttoken
from nexttoken.fast import prepare, step_package_path


def load_model(tiny: bool):
    if not tiny:
        return nexttoken.load_smollm2().eval(), torch.tensor([nexttoken.smollm2_tokenizer().encode("Once upon a time")])
    torch.manual_seed(0)
    config = nexttoken.DecoderConfig(vocab_size=100, context_length=128, d_model=32, n_layers=2, n_heads=4,
                                     n_kv_heads=2, positions="rope", norm="rmsnorm", mlp="swiglu", bias=False)
    return nexttoken.Decoder(config).eval(), torch.tensor([[1, 2, 3, 4]])


def one_process(launched: float, tiny: bool, new_tokens: int) -> dict:
    """What this process measures of itself; ``launched``: the parent's clock (time.time()) as it started it."""
    model, prompt = load_model(tiny)
    package = step_package_path(model)
    found = os.path.isfile(package)
    stamps = []

    def stamp(*_):
        stamps.append(time.time())

    with torch.no_grad():
        started = time.time()
        fast = prepare(model, compile="ahead-of-time")  # the build (minutes) or the load (seconds)
        prepare_s = time.time() - started
        out = fast.generate(prompt, new_tokens, on_token=stamp)
        same = torch.equal(out, nexttoken.generate(model, prompt, new_tokens))
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]  # gaps[0]: the first step, through the package
    return {"found_package": found, "package_mb": os.path.getsize(package) / 1e6, "prepare_s": prepare_s,
            "to_first_step_s": stamps[1] - launched, "first_step_s": gaps[0],
            "steady_ms": statistics.median(gaps[len(gaps) // 2:]) * 1e3, "same": same}


def run_process(cache: str, tiny: bool, new_tokens: int) -> dict:
    command = [sys.executable, __file__, "--process", str(time.time()), "--new-tokens", str(new_tokens)]
    reply = subprocess.run(command + ["--tiny"] * tiny, capture_output=True, text=True,
                           env={**os.environ, "XDG_CACHE_HOME": cache})
    if reply.returncode:
        raise SystemExit(f"a process failed:\n{reply.stderr[-3000:]}")
    return json.loads(reply.stdout.splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="a small model: seconds to a minute (the tests)")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--process", metavar="LAUNCHED", type=float, help="(internal) one measured process")
    args = parser.parse_args()
    if not 3 <= args.new_tokens <= 100:  # both windows hold a 4-token prompt and 100 more
        parser.error("--new-tokens must be 3 to 100")
    if args.process is not None:
        print(json.dumps(one_process(args.process, args.tiny, args.new_tokens)))
        return
    with tempfile.TemporaryDirectory() as cache:
        first = run_process(cache, args.tiny, args.new_tokens)
        second = run_process(cache, args.tiny, args.new_tokens)
    for name, run in (("first process (nothing cached)", first), ("second process", second)):
        print(f"{name}: launch to its first packaged step {run['to_first_step_s']:.1f} s, of them prepare "
              f"{run['prepare_s']:.1f} s (the package {'loaded' if run['found_package'] else 'built'}, "
              f"{run['package_mb']:.0f} MB); that step {run['first_step_s'] * 1e3:.1f} ms; steady step "
              f"{run['steady_ms']:.2f} ms; same tokens as the plain loop: {run['same']}")
    if first["found_package"] or not second["found_package"]:
        raise SystemExit("the first process should build the package and the second load it")
    if not (first["same"] and second["same"]):
        raise SystemExit("the packaged steps gave other tokens than the plain loop")


if __name__ == "__main__":
    main()
