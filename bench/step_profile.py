"""What one steady step of the autotuned fast path is made of, by kind of work (torch.profiler).

    .venv/bin/python bench/step_profile.py                  # GPT-2-small shape, random weights
    .venv/bin/python bench/step_profile.py --model smollm2  # SmolLM2-135M-Instruct

The fast path with ``compile="max-autotune"`` (inductor's kernel profile turned on, so that each of the
graph's C++ kernels is a range of its own) generates 128 tokens after a 16-token prompt, as in
``generate_speed.py``; the profiler runs over tokens 65 to 128 only (started and stopped from the lesson's
own ``on_token`` hook), and the self time of every event is summed by kind and divided by the steps.
A generation without the profiler, in the same process, gives the step's time undisturbed; the
products' bound (c) is timed alike. The profiler adds its own cost per event: read the shares.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).parent))
import generate_speed  # noqa: E402  (the same models and prompt as the benchmark)

import nexttoken  # noqa: E402

def kind_of(event) -> str:
    """A profiler event -> the kind of work it is, from its name and whether it ran inside the compiled
    graph (an ancestor event named after the graph) or outside it (the loop, the fast path's forward, Dynamo)."""
    name, parent, inside = event.name.lower(), event.cpu_parent, False
    while parent is not None:
        if "compiled" in parent.name.lower():
            inside = True
        parent = parent.cpu_parent
    if "cache lookup" in name or "guard" in name:
        return "Dynamo's guards before each call"
    if "compiled" in name:
        return "the compiled graph's own call (its wrapper, arguments, outputs)"
    if "gemm" in name:  # inductor's GEMM template, its epilogue fused in
        return "products (every linear layer and the LM head)"
    if inside and any(p in name for p in ("softmax", "attention", "flash", "bmm")):  # before "addmm": a fused
        return "attention over the cache (one query)"  # attention kernel's name may list the qkv's bias add
    if any(p in name for p in ("linear", "addmm", "aten::mm", "packed", "mkl")):
        return "products (every linear layer and the LM head)"
    if inside and "cpp_fused" in name:
        return "the graph's other fused kernels (norms, residual adds, rotary, cache writes)"
    if inside:
        return "other ops inside the graph"
    if name.startswith("aten::"):
        return "the loop's ops outside the graph (logits slice, softmax, argmax, cat; StaticCache.take's positions)"
    return "other events outside the graph"


def main():
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--model", choices=["gpt2", "smollm2"], default="gpt2")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--tiny", action="store_true", help="a small model, seconds (the tests)")
    parser.add_argument("--top", type=int, default=25, help="also list the events with the most self time")
    args = parser.parse_args()
    args.device = "cpu"
    model, _, prompt, label = generate_speed.load_float32_models(args, torch.device("cpu"))
    n = args.new_tokens
    start = time.perf_counter()
    nexttoken.fast.AUTOTUNE_OPTIONS["cpp.enable_kernel_profile"] = True  # the one dict prepare reads: this process's
    fast = nexttoken.fast.prepare(model, compile="max-autotune")
    with torch.no_grad():
        fast.generate(prompt, n)
    print(f"warm-up: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    products = generate_speed.autotuned_step_products(model)
    products()

    clock = generate_speed.Clock()
    plain = []
    for _ in range(3):  # without the profiler
        fast.generate(prompt, n, on_token=clock.tick)
        plain.append(generate_speed.steady_step(clock.take()))
    c = min(min(generate_speed.seconds(products, torch.device("cpu"))[0] for _ in range(3)) for _ in range(3))

    prof = profile(activities=[ProfilerActivity.CPU])
    count = [0]

    def on_token(_):
        count[0] += 1
        clock.tick()
        if count[0] == n // 2:
            prof.start()

    fast.generate(prompt, n, on_token=on_token)
    prof.stop()
    profiled = generate_speed.steady_step(clock.take())
    steps = n - n // 2
    by_kind, by_name = {}, {}
    for event in prof.events():
        self_ms = event.self_cpu_time_total / 1e3 / steps
        kind = kind_of(event)
        by_kind[kind] = by_kind.get(kind, 0.0) + self_ms
        ms, calls, _ = by_name.get(event.name, (0.0, 0.0, kind))
        by_name[event.name] = (ms + self_ms, calls + 1 / steps, kind)

    print(f"model: {label}; fast path, compile=\"max-autotune\"; {n} new tokens, profiled over tokens "
          f"{n // 2 + 1} to {n} ({steps} steps)")
    print(f"steady step without the profiler: {statistics.median(plain) * 1e3:.2f} ms (3 generations: "
          + ", ".join(f"{t * 1e3:.2f}" for t in plain) + f"); its products alone (c): {c * 1e3:.2f} ms; "
          f"under the profiler: {profiled * 1e3:.2f} ms")
    total = sum(by_kind.values())
    print(f"per step, self time by kind (under the profiler; {total:.2f} ms of events, the rest is "
          f"Python between them: {profiled * 1e3 - total:.2f} ms):")
    for kind, ms in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"  {ms:7.3f} ms  {kind}")
    print(f"  {profiled * 1e3 - total:7.3f} ms  Python outside any event (the loop, the fast path's forward)")
    print(f"the {args.top} events with the most self time per step (ms, calls per step):")
    for name, (ms, calls, kind) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:args.top]:
        print(f"  {ms:7.3f} ms  {calls:6.1f}  {name[:80]}  [{kind.split(' (')[0]}]")


if __name__ == "__main__":
    main()
