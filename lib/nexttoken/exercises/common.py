"""Test inputs shared by the chapters' tasks: small, seeded, the same in every process, and chosen so
that a wrong answer gives a different result (tests/exercises/test_exercises.py asserts it)."""

import torch

from ..model import Decoder, DecoderConfig

# The rule of every task that rebuilds the loop (chapters 5, 6 and 7): Task(forbid=NO_GENERATE).
NO_GENERATE = {"nexttoken.generate": "write the loop yourself: nexttoken.generate is what you are rebuilding"}


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def small_model(seed: int = 0, **overrides) -> Decoder:
    """A small random Decoder whose predictions depend on the context.

    Weights are drawn larger than GPT-2's initialisation (std 0.5, an untied LM head), so that a greedy
    continuation changes from step to step and from prompt to prompt: a GPT-2-style random model
    predicts nearly the same token whatever it reads, and then a loop that ignores its own output would
    pass. The norms are not the identity either (weights around 1, biases around 0, std 0.3): with
    weight 1 and bias 0, a norm skipped, applied twice or called without its parameters would pass.
    """
    config = DecoderConfig(**{**dict(vocab_size=50, context_length=16, d_model=32, n_layers=2, n_heads=4,
                                     tie_embeddings=False), **overrides})
    with torch.random.fork_rng():  # leave the learner's random state alone
        torch.manual_seed(seed)
        model = Decoder(config)
        for name, p in model.named_parameters():
            if "norm" in name:
                torch.nn.init.normal_(p, mean=1.0 if name.endswith("weight") else 0.0, std=0.3)
            else:
                torch.nn.init.normal_(p, std=0.5)
    return model.eval()


def random_ids(seed: int, batch: int, length: int, vocab: int = 50) -> torch.Tensor:
    return torch.randint(vocab, (batch, length), generator=seeded(seed))


def embed_with_positions(model, input_ids, positions=None):
    """Chapter 3's embeddings: token vectors plus position vectors (positions 0 .. T - 1 unless given).
    Chapter 3's tasks check it, chapter 4's last-position head starts from it."""
    if positions is None:
        positions = torch.arange(input_ids.shape[1])
    return model.token_embedding(input_ids) + model.position_embedding(positions)


def run_blocks(model, x, mask, blocks=None):
    """The residual stream ``x`` through the model's blocks in turn (or only ``blocks``), under ``mask``."""
    for block in model.blocks if blocks is None else blocks:
        x, _ = block(x, mask)
    return x


# --- strategies for the generated inputs (Task(generated=...)); hypothesis is imported only when used ---

def loop_params(longest: int = 16, batch: int = 3):
    """(seed, rows, prompt length, max_new_tokens) with prompt + new tokens <= ``longest`` (the test
    model's context_length): 0 and 1 new tokens, one row and several, T = 1 and the longest."""
    from hypothesis import strategies as st

    return st.tuples(st.integers(0, 999), st.integers(1, batch), st.integers(1, longest)).flatmap(
        lambda p: st.tuples(*map(st.just, p), st.integers(0, longest - p[2])))


def loop_case(params):
    """The arguments (model, input_ids, max_new_tokens) of a loop task from ``loop_params``."""
    seed, rows, length, n = params
    return small_model(seed), random_ids(seed, rows, length), n
