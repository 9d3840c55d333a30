"""Facts the chapters state, each held against the code it describes (the library, or the chapter's own
cells and stored outputs), so that an edit which makes one of them false fails here: rotary positions
(chapter 3), the mask of a left-padded batch (chapter 2), the two slices (chapter 4), what the loop costs
and how it stops (chapter 5), a batch whose rows finish at different steps (chapter 6), and where the
table of contents puts chapter 7 and the CPU appendix."""

import re
from pathlib import Path

import nbformat
import pytest
import torch
import yaml
from helpers import load_script

import nexttoken
from nexttoken.model import rotary_angles, rotate

ROOT = Path(__file__).resolve().parents[2]
split_core = load_script("scripts/core_clock.py").split_core  # the clock's rule: what is core


def chapter(number: int):
    (path,) = (ROOT / "chapters").glob(f"0{number}_*.ipynb")
    return nbformat.read(path, as_version=4).cells


def core(number: int, kind: str) -> list:
    return [c for c, deeper in split_core(chapter(number)) if not deeper and c.cell_type == kind]


def core_markdown(number: int) -> str:
    return "\n".join(c.source for c in core(number, "markdown"))


def printed(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def one_cell(cells: list, text: str):
    found = [c for c in cells if text in c.source]
    assert len(found) == 1, f"{len(found)} cells hold {text!r}"
    return found[0]


# ---------------------------------------------------------------------------------------------------
# Chapter 3: a rotary score depends on the query's and the key's contents and on their offset


def turned(v: torch.Tensor, position: int) -> torch.Tensor:
    """v (head_dim,) turned as a block turns a query or key at ``position`` (SmolLM2's rope_theta)."""
    cos, sin = rotary_angles(torch.tensor([[position]]), v.shape[-1], 100000.0)
    return rotate(v.view(1, 1, 1, -1), cos, sin).view(-1)


def test_a_rotary_score_depends_on_contents_and_offset_not_on_place():
    generator = torch.Generator().manual_seed(0)
    q, k, other = torch.randn(3, 64, generator=generator, dtype=torch.float64).float()

    def score(m, n, key=k):
        return (turned(q, m) @ turned(key, n)).item()

    assert score(5, 2) == pytest.approx(score(105, 102), abs=1e-4)  # both shifted: the same score
    assert score(5, 2) != pytest.approx(score(5, 3), abs=1e-2)  # another offset
    assert score(5, 2) != pytest.approx(score(5, 2, other), abs=1e-2)  # another key
    text = core_markdown(3)
    assert "how far apart they are" not in text
    assert "contents" in text and "offset $m - n$" in text


def test_the_rotary_cos_and_sin_store_each_pairs_angle_twice():
    cos, sin = rotary_angles(torch.arange(3)[None], 64, 100000.0)
    assert cos.shape == sin.shape == (1, 1, 3, 64)
    assert torch.equal(cos[..., :32], cos[..., 32:]) and torch.equal(sin[..., :32], sin[..., 32:])
    assert len(set(sin[0, 0, 1].tolist())) == 32  # 32 pairs, 32 angles at position 1
    cell = one_cell(core(3, "code"), "cos, sin = rotary")
    assert "32 pairs" in cell.source and "twice" in cell.source
    assert "one angle per position and pair" not in cell.source


# ---------------------------------------------------------------------------------------------------
# Chapter 2: one (T, T) table serves a batch of real tokens; a left-padded batch gets a table per row


def test_a_left_padded_batch_masks_each_row_on_its_own():
    model = nexttoken.load_pretrained()
    ids = torch.tensor([[50256, 40, 716, 257], [13, 40, 716, 257]])
    attention_mask = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])
    with torch.no_grad():
        _, attention = model(ids, attention_mask=attention_mask, return_attention=True)
    weights = attention[0]  # (B, heads, T, T)
    assert torch.all(weights[0, :, 1:, 0] == 0)  # row 0's pad, hidden from its real queries
    assert torch.all(weights[1, :, 1:, 0] > 0)  # row 1's first token, seen
    sentence = one_cell(core(2, "markdown"), "The first row sees only itself").source
    assert "left-padded" in sentence and "every sequence" not in sentence


def test_the_core_of_chapter_2_draws_block_0s_real_weights():
    cell = one_cell(core(2, "code"), "show_attention(")
    assert "nexttoken.load_pretrained()" in "".join(c.source for c in core(2, "code"))
    assert "attention[0][0, 0]" in cell.source  # checked against the model's own weights
    assert any("image/png" in o.get("data", {}) for o in cell.outputs)


# ---------------------------------------------------------------------------------------------------
# Chapter 4: the training slice and the generation slice, in the core


def test_the_two_slices_are_in_the_core_and_right():
    text = core_markdown(4)
    assert "| training | `logits[:, :-1, :]` against `ids[:, 1:]`" in text
    assert "| generation | `logits[:, -1, :]`" in text
    model = nexttoken.load_pretrained()
    ids = torch.tensor([[5962, 22307, 25, 198, 8421, 356]])
    with torch.no_grad():
        logits = model(ids)
    graded = torch.log_softmax(logits[:, :-1, :], -1).gather(-1, ids[:, 1:, None])[..., 0]
    assert torch.allclose(graded, nexttoken.token_log_probs(model, ids), atol=1e-4)


# ---------------------------------------------------------------------------------------------------
# Chapter 5: what the loop costs, printed; how the article's loop is read; nothing "above" that is below


def test_the_loops_cost_is_printed_and_adds_up():
    cell = one_cell(core(5, "code"), "recording_model")
    out = printed(cell)
    seen = [int(n) for n in re.search(r"step by step: \[([\d, ]+)\]", out).group(1).split(",")]
    T, N = seen[0], len(seen)
    assert seen == [T + t for t in range(N)]
    assert f"{N} steps: {sum(seen)} positions processed" in out
    assert sum(seen) == N * T + N * (N - 1) // 2
    assert "$NT + N(N-1)/2$" in core_markdown(5)


def test_the_article_answer_states_what_the_loops_do():
    answer = one_cell(core(5, "markdown"), "What to check your answer against").source
    assert "perhaps" not in answer
    assert "stops after exactly `n` steps" in answer
    # chapter 1's loop has the break the answer names
    assert any("break" in c.source and "eos" in c.source.lower() for c in chapter(1) if c.cell_type == "code")
    bigram = one_cell(chapter(5), "Greedy decoding of the bigram model falls into a loop").source
    assert "repetitions above" not in bigram  # the Shakespeare model repeats only in the sections below it


# ---------------------------------------------------------------------------------------------------
# Chapter 6: the core shows a batch whose rows finish at different steps


def test_the_core_batch_finishes_unevenly():
    cell = one_cell(core(6, "code"), "pair = torch.tensor(")
    steps = [(int(a), int(b)) for a, b in re.findall(r"EOS at step (\d+) of (\d+)", printed(cell))]
    assert len(steps) == 2
    (first, width), (last, width_again) = steps
    assert width == width_again == last > first  # the slowest row sets the width; the other is padded


# ---------------------------------------------------------------------------------------------------
# The table of contents: chapter 7 is lesson 2's first reading; the CPU appendix is for contributors


def test_the_toc_places_chapter_7_and_the_appendix():
    parts = {p["caption"]: [c["file"] for c in p["chapters"]]
             for p in yaml.safe_load((ROOT / "_toc.yml").read_text())["parts"]}
    (seven,) = [caption for caption, files in parts.items() if "chapters/07_making_the_loop_fast" in files]
    assert seven.startswith("Lesson 2, first reading")
    assert "appendix/cpu_weight_layout" in parts["For contributors"]
    assert sum("appendix/cpu_weight_layout" in files for files in parts.values()) == 1
