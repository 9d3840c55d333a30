"""Fixtures and pytest hooks. Plain helper functions live in helpers.py."""

import pytest
import torch

import nexttoken


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
