"""How fast is the generation loop? Uncached vs cached vs transformers, and the memory-bandwidth bound.

    .venv/bin/python bench/generate_speed.py            # GPT-2-small shape (124M), as in the issue
    .venv/bin/python bench/generate_speed.py --tiny     # a seconds-long smoke run of the same code

One run, one machine: a GPT-2-small-shaped model with random weights (float32, batch 1, a 16-token
prompt, 128 new greedy tokens), on CUDA when available. Reports tokens/s (median of --repeats runs)
for nexttoken's loop without and with the KV cache, the cached loop again after
nexttoken.fast.lay_out_for_cpu (widening weights stored (in, out): what that layout is worth), and
transformers' generate() with its cache, on the same weights (through from_hf_gpt2). Checks that all
produce the same tokens, and compares the cached loop with the memory-bandwidth bound: the bytes of
weights each new token must read, divided by a copy bandwidth measured in the same run. The runs are
interleaved (round after round of each), so a slow minute on a shared machine slows all of them.
"""

import argparse
import copy
import statistics
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

import nexttoken


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def seconds(fn, device) -> tuple[float, object]:
    sync(device)
    start = time.perf_counter()
    result = fn()
    sync(device)
    return time.perf_counter() - start, result


def interleaved_medians(fns: dict, repeats: int, device) -> dict:
    """Median seconds and last result of each function, timed in rounds that run every function once.

    Interleaving matters on a shared machine: a slow minute slows every contender alike, instead of
    whichever happened to be running then.
    """
    times = {name: [] for name in fns}
    results = {}
    for _ in range(repeats):
        for name, fn in fns.items():
            elapsed, results[name] = seconds(fn, device)
            times[name].append(elapsed)
    return {name: (statistics.median(times[name]), results[name]) for name in fns}


COPY_BYTES = 1 << 29


def big_copy(device):
    """A copy of COPY_BYTES to time: it moves 2 * COPY_BYTES (read + write, the STREAM 'copy' convention)."""
    src = torch.ones(COPY_BYTES // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)  # the first touch of dst's pages is not what we measure
    return lambda: dst.copy_(src)


def weight_bytes_per_token(model: nexttoken.Decoder) -> int:
    """Every weight is read once per new token, except the position table, of which one row is read.
    A tied embedding is one matrix: read in full by the LM head, one row by the lookup."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    table = model.position_embedding.weight
    return total - table.numel() * table.element_size() + table[0].numel() * table.element_size()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a small model: checks the script in seconds")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=128)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    shape = dict(n_embd=64, n_layer=2, n_head=4) if args.tiny else dict(n_embd=768, n_layer=12, n_head=12)
    hf = GPT2LMHeadModel(GPT2Config(**shape, bos_token_id=None, eos_token_id=None)).to(device).eval()
    model = nexttoken.from_hf_gpt2(hf)
    prompt = torch.randint(50257, (1, 16), generator=torch.Generator().manual_seed(0)).to(device)
    n = args.new_tokens

    laid_out = nexttoken.fast.lay_out_for_cpu(copy.deepcopy(model))  # the same weights, (in, out) where wider
    runs = {
        "nexttoken, no cache": lambda k: nexttoken.generate(model, prompt, k, use_cache=False),
        "nexttoken, KV cache": lambda k: nexttoken.generate(model, prompt, k, use_cache=True),
        "  same, lay_out_for_cpu": lambda k: nexttoken.generate(laid_out, prompt, k, use_cache=True),
        "transformers generate": lambda k: hf.generate(
            prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=k, do_sample=False,
            use_cache=True, pad_token_id=0),
    }
    with torch.no_grad():
        for fn in runs.values():  # warm-up: first-call allocations and kernel choices are not measured
            fn(8)
        timed = {name: (lambda fn=fn: fn(n)) for name, fn in runs.items()}
        timed["copy"] = big_copy(device)  # one per round too: the bound comes from the same minutes
        results = interleaved_medians(timed, args.repeats, device)
    copy_seconds, _ = results.pop("copy")
    bandwidth = 2 * COPY_BYTES / copy_seconds
    outputs = [r[1] for r in results.values()]
    same = all(torch.equal(outputs[0], o) for o in outputs[1:])
    speed = {name: n / elapsed for name, (elapsed, _) in results.items()}

    per_token = weight_bytes_per_token(model)
    bound = bandwidth / per_token
    params = model.num_parameters()
    print(f"device: {device} ({torch.get_num_threads()} threads), torch {torch.__version__}")
    print(f"model: GPT-2 shape, {params / 1e6:.1f}M parameters, float32, batch 1, prompt 16, {n} new tokens")
    for name, tps in speed.items():
        print(f"  {name:24s} {tps:8.2f} tokens/s (median of {args.repeats})")
    print(f"same tokens from all of them: {same}")
    print(f"cached / uncached:       {speed['nexttoken, KV cache'] / speed['nexttoken, no cache']:.2f}x")
    print(f"cached / transformers:   {speed['nexttoken, KV cache'] / speed['transformers generate']:.2f}x")
    print(f"cached, lay_out_for_cpu / plain nn.Linear weights: "
          f"{speed['  same, lay_out_for_cpu'] / speed['nexttoken, KV cache']:.2f}x")
    print(f"copy bandwidth: {bandwidth / 1e9:.1f} GB/s; weights read per token: {per_token / 1e6:.0f} MB")
    best = max(speed['nexttoken, KV cache'], speed['  same, lay_out_for_cpu'])
    print(f"bandwidth bound: {bound:.2f} tokens/s; the faster cached loop reaches {best / bound:.0%}")
    if not same:
        raise SystemExit("the loops disagree on the tokens")


if __name__ == "__main__":
    main()
