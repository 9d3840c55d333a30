"""Fixtures and pytest hooks. Plain helper functions live in helpers.py."""

from pathlib import Path

import pytest

GRADING = Path(__file__).parent / "grading"

# run_watch.py: each slow test's start and end on the terminal, even through a pipe; the run fails if a test
# leaves a process, a kernel or a file behind
pytest_plugins = ["run_watch"]


@pytest.fixture
def tiny_decoder():
    """A random nexttoken Decoder with a small vocabulary, in eval mode."""
    import torch  # here, not at the top: pytest-xdist's controller reads this file and runs no test

    import nexttoken

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


@pytest.hookimpl(tryfirst=True)  # before pytest's -m reads the markers
def pytest_collection_modifyitems(config, items):
    """Every test of tests/grading/ is marked ``sandbox``, as the few elsewhere that run the grader in its
    sandbox are by hand: scripts/test.sh's slow tier runs them one at a time, in a session of their own (they
    look for processes of the sandbox's user ids, which a batch graded beside them would show), beside a
    session of the other slow tests."""
    for item in items:
        if item.path.is_relative_to(GRADING):
            item.add_marker(pytest.mark.sandbox)
