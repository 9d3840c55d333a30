"""How fast is the generation loop? Uncached vs cached vs transformers, and the memory-bandwidth bound.

    .venv/bin/python bench/generate_speed.py            # GPT-2-small shape (124M), as in the issue
    .venv/bin/python bench/generate_speed.py --tiny     # a seconds-long smoke run of the same code

One run, one machine: a GPT-2-small-shaped model with random weights (float32, batch 1, a 16-token
prompt, 128 new greedy tokens), on CUDA when available. Reports tokens/s (median of --repeats runs)
for nexttoken's loop without and with the KV cache and for transformers' generate() with its cache,
on the same weights (through from_hf_gpt2), checks that all three produce the same tokens, and
compares the cached loop with the memory-bandwidth bound: the bytes of weights each new token must
read, divided by a copy bandwidth measured in the same run.
"""

import argparse
import statistics
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

import nexttoken


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def median_seconds(fn, repeats: int, device, warmup=None) -> tuple[float, object]:
    (warmup or fn)()  # first-call allocations and kernel selection are not what we measure
    times = []
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        result = fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def copy_bandwidth(device, n_bytes: int = 1 << 29, repeats: int = 5) -> float:
    """Bytes moved per second by a large tensor copy (read + write, the STREAM 'copy' convention)."""
    src = torch.ones(n_bytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    seconds, _ = median_seconds(lambda: dst.copy_(src), repeats, device)
    return 2 * n_bytes / seconds


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

    runs = {
        "nexttoken, no cache": lambda k: nexttoken.generate(model, prompt, k, use_cache=False),
        "nexttoken, KV cache": lambda k: nexttoken.generate(model, prompt, k, use_cache=True),
        "transformers generate": lambda k: hf.generate(
            prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=k, do_sample=False,
            use_cache=True, pad_token_id=0),
    }
    with torch.no_grad():  # warm-up: a short run of each (a full uncached run would take minutes)
        results = {name: median_seconds(lambda: fn(n), args.repeats, device, warmup=lambda: fn(8))
                   for name, fn in runs.items()}
    outputs = [r[1] for r in results.values()]
    same = all(torch.equal(outputs[0], o) for o in outputs[1:])
    speed = {name: n / seconds for name, (seconds, _) in results.items()}

    bandwidth = copy_bandwidth(device)
    per_token = weight_bytes_per_token(model)
    bound = bandwidth / per_token
    params = model.num_parameters()
    print(f"device: {device} ({torch.get_num_threads()} threads), torch {torch.__version__}")
    print(f"model: GPT-2 shape, {params / 1e6:.1f}M parameters, float32, batch 1, prompt 16, {n} new tokens")
    for name, tps in speed.items():
        print(f"  {name:24s} {tps:8.2f} tokens/s (median of {args.repeats})")
    print(f"same tokens from all three: {same}")
    print(f"cached / uncached:       {speed['nexttoken, KV cache'] / speed['nexttoken, no cache']:.2f}x")
    print(f"cached / transformers:   {speed['nexttoken, KV cache'] / speed['transformers generate']:.2f}x")
    print(f"copy bandwidth: {bandwidth / 1e9:.1f} GB/s; weights read per token: {per_token / 1e6:.0f} MB")
    print(f"bandwidth bound: {bound:.2f} tokens/s; cached loop reaches {speed['nexttoken, KV cache'] / bound:.0%}")
    if not same:
        raise SystemExit("the three loops disagree on the tokens")


if __name__ == "__main__":
    main()
