import pytest
import torch

import nexttoken


def random_hf_gpt2(seed: int, vocab_size: int = 61, n_positions: int = 32, n_embd: int = 32,
                   n_layer: int = 2, n_head: int = 4, tie: bool = False):
    """A random tiny transformers GPT-2, built locally (no download).

    initializer_range=0.1 and an untied head: with small tied random embeddings a model only repeats
    its last token, which would test nothing. No EOS/BOS/pad ids in its config, so only what a test
    passes to generate() counts.
    """
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=vocab_size, n_positions=n_positions, n_embd=n_embd, n_layer=n_layer, n_head=n_head,
        initializer_range=0.1, tie_word_embeddings=tie, bos_token_id=None, eos_token_id=None,
        pad_token_id=None,
    )
    return GPT2LMHeadModel(config).eval()


@pytest.fixture
def tiny_decoder():
    """A random nexttoken Decoder with a small vocabulary, in eval mode."""
    torch.manual_seed(0)
    config = nexttoken.DecoderConfig(vocab_size=50, context_length=16, d_model=32, n_layers=2, n_heads=4)
    return nexttoken.Decoder(config).eval()


_summary_lines: list[str] = []


@pytest.fixture(scope="session")
def terminal_summary() -> list[str]:
    """Lines a test appends to be printed at the end of the run (say, where it saved screenshots)."""
    return _summary_lines


def pytest_terminal_summary(terminalreporter):
    for line in _summary_lines:
        terminalreporter.write_line(line)
