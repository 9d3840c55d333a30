"""The training data of the default model: Tiny Shakespeare, split into speeches, tokenized with GPT-2's BPE."""

import math
from collections import Counter
from pathlib import Path

import torch

from ..tokenizer import END_OF_TEXT_ID, gpt2_tokenizer

VALIDATION_FRACTION = 0.1


def split_speeches(text: str) -> list[str]:
    """Speeches are separated by blank lines: "ROMEO:\\nline\\nline" is one speech."""
    return [s.strip("\n") for s in text.split("\n\n") if s.strip()]


def encode_speeches(speeches: list[str]) -> torch.Tensor:
    """One long int64 stream: each speech's tokens followed by <|endoftext|>, so the model learns to stop."""
    enc = gpt2_tokenizer()
    ids = []
    for speech in speeches:
        ids.extend(enc.encode_ordinary(speech))
        ids.append(END_OF_TEXT_ID)
    return torch.tensor(ids, dtype=torch.long)


def load_corpus(path: str | Path) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, validation) token streams; the last 10% of speeches are held out, never trained on."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"corpus {path} not found (the course reads ../shared/data/tinyshakespeare.txt)")
    speeches = split_speeches(path.read_text(encoding="utf-8"))
    n_train = len(speeches) - math.ceil(VALIDATION_FRACTION * len(speeches))
    return encode_speeches(speeches[:n_train]), encode_speeches(speeches[n_train:])


def bigram_baseline_loss(train: torch.Tensor, valid: torch.Tensor, vocab_size: int = 50257) -> tuple[float, float]:
    """Mean validation loss (nats/token) of an interpolated bigram model fitted on ``train``.

    p(b | a) = lam * count(a, b) / count(a) + (1 - lam) * p_unigram(b), with an add-one unigram
    so unseen tokens keep a small probability. lam is picked on ``valid`` from a grid, which
    flatters the baseline: beating it is then a fair test. Returns (loss, lam).
    """
    unigram = torch.bincount(train, minlength=vocab_size).double() + 1.0
    unigram /= unigram.sum()
    pair_counts = Counter(zip(train[:-1].tolist(), train[1:].tolist()))
    context_counts = Counter(train[:-1].tolist())
    pairs = list(zip(valid[:-1].tolist(), valid[1:].tolist()))
    bigram = torch.tensor([pair_counts.get(p, 0) / max(context_counts.get(p[0], 0), 1) for p in pairs])
    uni = unigram[valid[1:]]
    best = None
    for lam in [i / 20 for i in range(20)]:
        loss = -torch.log(lam * bigram + (1 - lam) * uni).mean().item()
        if best is None or loss < best[0]:
            best = (loss, lam)
    return best
