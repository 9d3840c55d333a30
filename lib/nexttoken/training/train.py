"""Train a small ``Decoder`` on Tiny Shakespeare (GPT-2 tokenizer, full vocabulary).

    python -m nexttoken.train --corpus ../shared/data/tinyshakespeare.txt --out runs/mine
    python -m nexttoken.train --recipe default --corpus ../shared/data/tinyshakespeare.txt --out runs/default

Seeded; shows a progress bar with the current loss; writes config.json, model.safetensors (fp16)
and metrics.json (train/validation loss, tokens seen, wall time, hardware) into --out.
``--recipe default`` is the one command that made the shipped model (both of its phases).
"""

import argparse
import json
import math
import os
import platform
import shutil
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from .data import load_corpus
from ..model import Decoder, DecoderConfig
from ..pretrained import load_decoder, save_decoder


# With --init-from, the architecture comes from the saved config, not from these options.
ARCHITECTURE_ARGS = ("d_model", "n_layers", "n_heads", "context_length")

# A recipe is a list of phases, each a list of options; every phase after the first starts
# from the previous phase's saved weights (float16, as shipped) with a fresh optimizer.
# "default" made the shipped model: a 1200-step cosine schedule stopped at step 700 (where
# its first run was stopped by hand, to fit a working session), then 80 steps from a lower
# learning rate.
# "smoke" has the same shape at a toy size, for the tests.
RECIPES = {
    "default": [
        ["--n-layers", "6", "--dropout", "0.15", "--lr", "3e-3", "--steps", "1200",
         "--stop-at", "700", "--eval-every", "100"],
        ["--dropout", "0.15", "--batch-size", "32", "--steps", "80", "--lr", "0.0006",
         "--warmup", "10", "--weight-decay", "0.1", "--eval-every", "20", "--seed", "7"],
    ],
    "smoke": [
        ["--d-model", "16", "--n-layers", "1", "--n-heads", "2", "--context-length", "16",
         "--batch-size", "4", "--steps", "6", "--stop-at", "4", "--warmup", "2", "--eval-every", "2"],
        ["--batch-size", "4", "--steps", "2", "--lr", "0.0006", "--warmup", "1",
         "--eval-every", "1", "--seed", "7"],
    ],
}


def random_windows(stream: torch.Tensor, batch_size: int, length: int, generator: torch.Generator):
    """A batch of (inputs, targets): windows of ``length`` tokens and the same windows shifted by one."""
    starts = torch.randint(len(stream) - length - 1, (batch_size,), generator=generator)
    windows = torch.stack([stream[s : s + length + 1] for s in starts.tolist()])
    return windows[:, :-1], windows[:, 1:]


@torch.no_grad()
def validation_loss(model: Decoder, stream: torch.Tensor, batch_size: int = 16) -> float:
    """Mean cross-entropy (nats/token) over the whole stream, cut into back-to-back windows."""
    was_training = model.training
    model.eval()
    L = model.config.context_length
    n_windows = (len(stream) - 1) // L
    total, count = 0.0, 0
    for first in range(0, n_windows, batch_size):
        starts = range(first * L, min(first + batch_size, n_windows) * L, L)
        windows = torch.stack([stream[s : s + L + 1] for s in starts])
        logits = model(windows[:, :-1])
        total += F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten(), reduction="sum").item()
        count += windows[:, 1:].numel()
    model.train(was_training)
    return total / count


def learning_rate(step: int, args) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m nexttoken.train", description=(__doc__ or "").partition("\n")[0])
    p.add_argument("--recipe", choices=sorted(RECIPES),
                   help="run a recorded multi-phase recipe; the other training options are not allowed with it")
    p.add_argument("--corpus", required=True, help="path to tinyshakespeare.txt")
    p.add_argument("--out", required=True, help="folder for config.json, model.safetensors, metrics.json")
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--n-layers", type=int, default=4)
    p.add_argument("--n-heads", type=int, default=4)
    p.add_argument("--context-length", type=int, default=128)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=2000, help="length of the learning-rate schedule")
    p.add_argument("--stop-at", type=int, default=None,
                   help="stop after this many steps of the --steps schedule (default: run it all)")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--init-from", help="start from the weights (and config) saved in this folder, "
                   "e.g. to continue with a lower learning rate")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    args = p.parse_args(argv)
    if args.recipe:
        given = [k for k, v in vars(args).items()
                 if k not in ("recipe", "corpus", "out", "threads") and v != p.get_default(k)]
        if given:
            p.error(f"--recipe {args.recipe} fixes the training options; remove "
                    + ", ".join("--" + k.replace("_", "-") for k in given))
    if args.stop_at is not None and not 1 <= args.stop_at <= args.steps:
        p.error(f"--stop-at must be between 1 and --steps ({args.steps}), got {args.stop_at}")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.recipe:
        run_recipe(args)
    else:
        metrics = train_once(args)
        print(json.dumps({k: v for k, v in metrics.items() if k != "history"}, indent=2))


def run_recipe(args) -> None:
    """Run each phase of ``RECIPES[args.recipe]`` into ``--out/phase-N``; the last phase's weights
    and one metrics.json (both phases' histories) go into ``--out``."""
    out = Path(args.out)
    common = ["--corpus", args.corpus] + (["--threads", str(args.threads)] if args.threads else [])
    phases, previous = [], None
    for number, options in enumerate(RECIPES[args.recipe], start=1):
        folder = out / f"phase-{number}"
        argv = common + ["--out", str(folder)] + options
        argv += ["--init-from", str(previous)] if previous else []
        phases.append(train_once(parse_args(argv)))
        previous = folder
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(previous / name, out / name)
    last = phases[-1]
    metrics = {
        **{k: last[k] for k in ("train_loss", "val_loss", "train_tokens", "val_tokens", "parameters",
                                "hardware", "torch")},
        "tokens_seen": sum(p["tokens_seen"] for p in phases),
        "wall_time_s": round(sum(p["wall_time_s"] for p in phases), 1),
        "command": f"python -m nexttoken.train --recipe {args.recipe} --corpus {args.corpus} --out {args.out}",
        "phases": [{"command": p["command"], "history": p["history"]} for p in phases],
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    print(json.dumps({k: v for k, v in metrics.items() if k != "phases"}, indent=2))


def train_once(args) -> dict:
    """One training run as the options say; writes weights and metrics.json into ``args.out``. ``args`` is
    read, not changed: with ``--init-from`` the architecture (context length included) is the saved model's."""
    torch.manual_seed(args.seed)
    batches = torch.Generator().manual_seed(args.seed)
    train, valid = load_corpus(args.corpus)
    if args.init_from:
        model = load_decoder(args.init_from)
        model.config.dropout = args.dropout
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = args.dropout
    else:
        config = DecoderConfig(
            context_length=args.context_length, d_model=args.d_model, n_layers=args.n_layers,
            n_heads=args.n_heads, dropout=args.dropout,
        )
        model = Decoder(config)
    model.train()
    context_length = model.config.context_length
    # Weight decay on matrices only, not on norms and biases (the usual GPT recipe).
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.95),
    )
    out = Path(args.out)
    history = []
    start = time.time()
    last_step = args.stop_at or args.steps
    bar = tqdm(range(last_step), desc="training", mininterval=2.0)
    for step in bar:
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, args)
        inputs, targets = random_windows(train, args.batch_size, context_length, batches)
        loss = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        bar.set_postfix(loss=f"{loss.item():.3f}")
        if (step + 1) % args.eval_every == 0 or step + 1 == last_step:
            val = validation_loss(model, valid)
            history.append({"step": step + 1, "train_loss": round(loss.item(), 4), "val_loss": round(val, 4),
                            "minutes": round((time.time() - start) / 60, 1)})
            bar.write(json.dumps(history[-1]))
            save_decoder(model, out)  # keep the latest weights on disk as training goes
    wall = time.time() - start
    metrics = {
        "train_loss": validation_loss(model, train[: len(valid)]),  # same-size slice, dropout off
        "val_loss": validation_loss(model, valid),
        "tokens_seen": last_step * args.batch_size * context_length,
        "train_tokens": len(train),
        "val_tokens": len(valid),
        "parameters": model.num_parameters(),
        "wall_time_s": round(wall, 1),
        "hardware": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores, "
                    f"{torch.get_num_threads()} torch threads",
        "torch": torch.__version__,
        "command": "python -m nexttoken.train " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
            if v is not None and not (args.init_from and k in ARCHITECTURE_ARGS)),
        "history": history,
    }
    save_decoder(model, out)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    return metrics


if __name__ == "__main__":
    main()
