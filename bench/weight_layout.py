"""How fast is one token's matmul with each weight, in each memory layout? And how fast could a step be?

    .venv/bin/python bench/weight_layout.py           # GPT-2-small shape (124M), float32
    .venv/bin/python bench/weight_layout.py --tiny    # a seconds-long smoke run of the same code

With a batch of one, a generation step multiplies one vector by every weight matrix, so it is bound by
reading the weights from memory. This script times exactly that and nothing else: for each kind of
matrix in a GPT-2-small-shaped Decoder (qkv, attention output, MLP up, MLP down, LM head), a one-row
matmul with all of that kind's matrices back to back, once with each weight stored (out, in) as
nn.Linear keeps it and once stored (in, out) as GPT-2's Conv1D keeps it. It reports the bytes read per
second, which layout wins, the layout nexttoken.fast.lay_out_for_cpu picks, and how many tokens per
second the matmuls of a whole step alone would allow, as a fraction of the bandwidth bound of
bench/generate_speed.py (same copy-bandwidth convention): the ceiling for any loop built on these
kernels. Rounds are interleaved and each figure is a median.
"""

import argparse
import statistics
import time

import torch
from generate_speed import COPY_BYTES, big_copy  # the same copy, so the same bound

import nexttoken


def matrices_by_kind(model: nexttoken.Decoder) -> dict[str, list[torch.Tensor]]:
    """Every weight a step multiplies by, grouped by kind, each as (out, in)."""
    kinds = {"qkv": [], "attention out": [], "MLP up": [], "MLP down": []}
    for block in model.blocks:
        kinds["qkv"].append(block.attn.qkv.weight)
        kinds["attention out"].append(block.attn.proj.weight)
        kinds["MLP up"].append(block.mlp.up.weight)
        kinds["MLP down"].append(block.mlp.down.weight)
    kinds["LM head"] = [model.lm_head.weight]
    return {kind: [w.detach() for w in ws] for kind, ws in kinds.items()}


def one_row_matmuls(weights: list[torch.Tensor], layout: str):
    """A function doing x @ W.T for each W, with W stored as `layout` ('(out, in)' or '(in, out)')."""
    stored = [w.contiguous() if layout == "(out, in)" else w.t().contiguous().t() for w in weights]
    xs = [torch.randn(1, w.shape[1]) for w in stored]

    def run():
        for x, w in zip(xs, stored):
            x @ w.T

    return run


def main():
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="a small model: checks the script in seconds")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = nexttoken.DecoderConfig(d_model=64, n_layers=2, n_heads=4) if args.tiny else nexttoken.DecoderConfig()
    model = nexttoken.Decoder(config)
    kinds = matrices_by_kind(model)
    # The layout lay_out_for_cpu gives each kind, read off the model it was applied to.
    picked = {kind: "(in, out)" if ws[0].t().is_contiguous() else "(out, in)"
              for kind, ws in matrices_by_kind(nexttoken.fast.lay_out_for_cpu(model)).items()}
    del model  # only the copies below are timed

    jobs = {(kind, layout): one_row_matmuls(ws, layout)
            for kind, ws in kinds.items() for layout in ("(out, in)", "(in, out)")}
    jobs["copy"] = big_copy(torch.device("cpu"))
    times = {name: [] for name in jobs}
    with torch.no_grad():
        for job in jobs.values():  # warm-up
            job()
        for _ in range(args.rounds):
            for name, job in jobs.items():
                start = time.perf_counter()
                job()
                times[name].append(time.perf_counter() - start)
    seconds = {name: statistics.median(ts) for name, ts in times.items()}

    bandwidth = 2 * COPY_BYTES / seconds.pop("copy")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; one-row float32 matmuls, "
          f"median of {args.rounds} interleaved rounds")
    print(f"{'matrices':28s} {'MB':>6s} {'(out, in)':>10s} {'(in, out)':>10s}  faster  lay_out_for_cpu picks")
    best_step = rule_step = 0.0
    for kind, ws in kinds.items():
        n_bytes = sum(w.numel() * w.element_size() for w in ws)
        out_in, in_out = seconds[(kind, "(out, in)")], seconds[(kind, "(in, out)")]
        out_features, in_features = ws[0].shape
        rule = picked[kind]
        best_step += min(out_in, in_out)
        rule_step += seconds[(kind, rule)]
        faster = "(in, out)" if in_out < out_in else "(out, in)"
        print(f"{len(ws):2d} x {kind:13s} {out_features:5d}x{in_features:<5d} {n_bytes / 1e6:6.0f} "
              f"{n_bytes / out_in / 1e9:6.1f} GB/s {n_bytes / in_out / 1e9:6.1f} GB/s  {faster}  {rule}")
    n_bytes = sum(w.numel() * w.element_size() for ws in kinds.values() for w in ws)
    bound = bandwidth / n_bytes
    print(f"copy bandwidth {bandwidth / 1e9:.1f} GB/s (read + write); these weights: {n_bytes / 1e6:.0f} MB "
          f"-> bound {bound:.1f} tokens/s")
    for label, step in (("lay_out_for_cpu's layouts", rule_step), ("the faster layout of each", best_step)):
        print(f"matmuls alone, {label}: {1 / step:.1f} tokens/s = {1 / step / bound:.0%} of the bound")


if __name__ == "__main__":
    main()
