"""The picture of the loop (intro and chapter 5) shows what SmolLM2-135M-Instruct computes now."""

from pathlib import Path

import pytest
from helpers import load_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # about 10 s: loads SmolLM2-135M
def test_loop_figure_is_up_to_date():
    draw_loop = load_script("scripts/draw_loop.py")
    facts = draw_loop.facts()
    assert facts["ids"] == [13701, 12666, 653]  # "AI enhances our" in SmolLM2's tokenizer, as chapter 1 prints
    assert draw_loop.up_to_date(facts, draw_loop.FIGURE.read_text()), "run scripts/draw_loop.py"
    assert not draw_loop.up_to_date({**facts, "chosen": facts["chosen"] + 1}, draw_loop.FIGURE.read_text())
