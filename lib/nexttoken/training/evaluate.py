"""Measure the default model on the held-out speeches of Tiny Shakespeare.

    python -m nexttoken.evaluate --corpus ../shared/data/tinyshakespeare.txt [--json OUT.json]

Prints the mean validation loss of the shipped weights, the interpolated bigram baseline fitted on the
same training split, the rate at which temperature-0.8 samples from "ROMEO:\\n" end with
<|endoftext|> within 256 new tokens (50 seeded samples), and a few greedy and sampled generations.
"""

import argparse
import json
import time

import torch

from .. import fast
from .data import bigram_baseline_loss, load_corpus
from ..generate import generate, sample, temperature
from ..pretrained import load_pretrained
from ..tokenizer import END_OF_TEXT_ID, gpt2_tokenizer
from .train import validation_loss

PROMPT = "ROMEO:\n"


def eos_rate(model, n_samples=50, max_new_tokens=256, t=0.8, seed=0) -> float:
    """Fraction of seeded samples from PROMPT that end with <|endoftext|> within max_new_tokens."""
    enc = gpt2_tokenizer()
    prompt = torch.tensor([enc.encode(PROMPT)])
    ended = 0
    for i in range(n_samples):  # one row at a time: each stops at its own EOS instead of waiting for all
        out = generate(model, prompt, max_new_tokens, eos_token_id=END_OF_TEXT_ID,
                       logits_processors=[temperature(t)], select=sample,
                       generator=torch.Generator().manual_seed(seed + i))
        ended += int((out[0, prompt.shape[1]:] == END_OF_TEXT_ID).any())
    return ended / n_samples


def examples(model, n_sampled=3, max_new_tokens=80) -> dict[str, list[str]]:
    enc = gpt2_tokenizer()
    prompt = torch.tensor([enc.encode(PROMPT)])

    def text(ids):
        return enc.decode([t for t in ids.tolist() if t != END_OF_TEXT_ID])

    greedy = generate(model, prompt, max_new_tokens, eos_token_id=END_OF_TEXT_ID)
    sampled = [
        generate(model, prompt, max_new_tokens, eos_token_id=END_OF_TEXT_ID, logits_processors=[temperature(0.8)],
                 select=sample, generator=torch.Generator().manual_seed(seed))
        for seed in range(n_sampled)
    ]
    return {"greedy": [text(greedy[0])], "sampled_t0.8": [text(s[0]) for s in sampled]}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m nexttoken.evaluate",
                                     description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--corpus", required=True, help="path to tinyshakespeare.txt")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    start = time.time()
    model = load_pretrained()
    load_s = time.time() - start
    # The same weights stored in the order a one-row matmul reads fastest on CPU (values unchanged; see
    # nexttoken.fast): the 50 samples below are one-token steps, which read every weight at each step.
    fast.lay_out_for_cpu(model)
    train, valid = load_corpus(args.corpus)
    val = validation_loss(model, valid)
    baseline, lam = bigram_baseline_loss(train, valid)
    rate = eos_rate(model)
    figures = {
        "val_loss": round(val, 4),
        "bigram_val_loss": round(baseline, 4),
        "bigram_lambda": lam,
        "margin_nats": round(baseline - val, 4),
        "eos_rate_t0.8_256": rate,
        "parameters": model.num_parameters(),
        "load_seconds": round(load_s, 2),
        "examples": examples(model),
    }
    print(f"validation loss (held-out speeches): {val:.3f} nats/token")
    print(f"interpolated bigram baseline:        {baseline:.3f} nats/token (lambda {lam})")
    print(f"margin:                              {baseline - val:.3f} nats/token")
    print(f"samples ending with <|endoftext|>:   {rate:.0%} of 50 (T=0.8, within 256 tokens)")
    for kind, texts in figures["examples"].items():
        for t in texts:
            print(f"--- {kind}\n{t}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
