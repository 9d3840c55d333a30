"""Test inputs shared by the chapters' tasks: small, seeded, and the same in every process."""

import torch

from ..model import Decoder, DecoderConfig


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def small_model(seed: int = 0, **overrides) -> Decoder:
    """A small random Decoder whose choices depend on the context (weights larger than GPT-2's init)."""
    config = DecoderConfig(**{**dict(vocab_size=50, context_length=16, d_model=32, n_layers=2, n_heads=4),
                              **overrides})
    with torch.random.fork_rng():  # leave the learner's random state alone
        torch.manual_seed(seed)
        model = Decoder(config)
        for p in model.parameters():
            torch.nn.init.normal_(p, std=0.3)
    return model.eval()


def random_ids(seed: int, batch: int, length: int, vocab: int = 50) -> torch.Tensor:
    return torch.randint(vocab, (batch, length), generator=seeded(seed))
