"""The picture of the loop (intro and chapter 5) shows what SmolLM2-135M-Instruct computes now."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # about 10 s: loads SmolLM2-135M
def test_loop_figure_is_up_to_date():
    spec = importlib.util.spec_from_file_location("draw_loop", ROOT / "scripts" / "draw_loop.py")
    draw_loop = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(draw_loop)
    facts = draw_loop.facts()
    assert facts["ids"] == [13701, 12666, 653]  # "AI enhances our" in SmolLM2's tokenizer, as chapter 1 prints
    assert draw_loop.up_to_date(facts, draw_loop.FIGURE.read_text()), "run scripts/draw_loop.py"
    assert not draw_loop.up_to_date({**facts, "chosen": facts["chosen"] + 1}, draw_loop.FIGURE.read_text())
