"""The Llama-family block (rotary positions, grouped-query attention) against transformers' Llama."""

import itertools
import random

import pytest
import torch
from helpers import left_padded_batch, random_hf_llama

import nexttoken
from nexttoken import DecoderConfig, generate
from nexttoken.smollm2 import unpermute_rotary

# (query heads, key/value heads): grouped-query ratios 1, 2 and 3
HEADS = [(6, 6), (6, 3), (6, 2)]


@pytest.mark.parametrize("heads, theta, tie", list(itertools.product(HEADS, [10000.0, 100000.0], [False, True])))
def test_from_hf_llama_logits_match_with_left_padding(heads, theta, tie):
    n_head, n_kv = heads
    hf = random_hf_llama(n_kv, n_head=n_head, n_kv_head=n_kv, theta=theta, tie=tie)
    model = nexttoken.from_hf_llama(hf)
    c = model.config
    assert (c.positions, c.n_kv_heads, c.rope_theta, c.tie_embeddings) == ("rope", n_kv, theta, tie)
    assert model.position_embedding is None and not model.training
    x = torch.randint(61, (3, 20), generator=torch.Generator().manual_seed(n_kv))
    mask = torch.ones_like(x)
    mask[0, :5] = 0
    positions = nexttoken.positions_from_mask(mask)
    with torch.no_grad():
        assert torch.allclose(model(x), hf(x).logits, atol=1e-4)
        theirs = hf(x, attention_mask=mask, position_ids=positions).logits
        assert torch.allclose(model(x, attention_mask=mask)[0, 5:], theirs[0, 5:], atol=1e-4)


CASES = list(itertools.product(range(3), HEADS, [1, 3], ["int", "none"], [True, False]))


@pytest.mark.parametrize("seed, heads, batch_size, eos_kind, use_cache", CASES)
def test_generate_matches_transformers_llama_greedy(seed, heads, batch_size, eos_kind, use_cache):
    """Left-padded batches of 1 and 3, EOS ids the model really produces, cache on and off."""
    rng = random.Random(100 * seed + 10 * batch_size + heads[1] + use_cache)
    hf = random_hf_llama(seed, n_layer=1 + seed, n_head=heads[0], n_kv_head=heads[1],
                         theta=[10000.0, 500.0, 100000.0][seed], tie=seed == 1)
    model = nexttoken.from_hf_llama(hf)
    ids, mask = left_padded_batch(rng, batch_size, 61, pad=60)
    free = generate(model, ids, 10, attention_mask=mask)[:, ids.shape[1]:].flatten().tolist()
    eos = free[rng.randrange(len(free))] if eos_kind == "int" else None
    expected = hf.generate(ids, attention_mask=mask, max_new_tokens=10, do_sample=False,
                           eos_token_id=eos, pad_token_id=60 if eos is not None else None)
    ours = generate(model, ids, 10, attention_mask=mask, eos_token_id=eos,
                    pad_token_id=60 if eos is not None else None, use_cache=use_cache)
    assert ours.tolist() == expected.tolist()


def test_zero_new_tokens_and_eos_in_the_prompt():
    model = nexttoken.from_hf_llama(random_hf_llama(4))
    ids = torch.tensor([[5, 9, 5, 7]])
    assert torch.equal(generate(model, ids, 0, eos_token_id=5), ids)
    # EOS inside the prompt stops nothing: only generated tokens count
    assert generate(model, ids, 6, eos_token_id=int(ids[0, 0])).shape[1] > ids.shape[1]


def test_sampling_with_warpers_matches_transformers_llama():
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper

    hf = random_hf_llama(5, n_head=6, n_kv_head=3)
    model = nexttoken.from_hf_llama(hf)
    ids = torch.tensor([[3, 14, 15], [9, 2, 6]])
    torch.manual_seed(11)
    ours = generate(model, ids, 12, select=nexttoken.sample,
                    logits_processors=[TemperatureLogitsWarper(0.9), TopKLogitsWarper(7)])
    torch.manual_seed(11)
    theirs = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=12, do_sample=True,
                         temperature=0.9, top_k=7, top_p=1.0)
    assert ours.tolist() == theirs.tolist()


def test_the_cache_stores_the_key_value_heads_only():
    model = nexttoken.from_hf_llama(random_hf_llama(6, n_head=6, n_kv_head=2))
    cache = model.new_cache()
    model(torch.tensor([[1, 2, 3, 4]]), cache=cache)
    assert cache.keys[0].shape == (1, 2, 4, 8) and cache.values[1].shape == (1, 2, 4, 8)


def test_cropping_past_the_window_restarts_rotary_positions_at_zero():
    """Past context_length the loop crops to the last window and recomputes it: positions 0..L-1."""
    model = nexttoken.from_hf_llama(random_hf_llama(7, max_positions=12))
    ids = torch.randint(61, (2, 8), generator=torch.Generator().manual_seed(0))
    out = generate(model, ids, 10)
    assert out.shape == (2, 18)
    for t in range(12, 18):
        with torch.no_grad():
            assert torch.equal(out[:, t], model(out[:, t - 12:t])[:, -1].argmax(-1))


def test_rotary_scores_depend_on_the_distance_between_positions_only():
    """A query at m and a key at n score the same as at m + s and n + s; learned tables do not."""
    from nexttoken.model import rotary_angles, rotate

    q, k = torch.randn(2, 1, 1, 1, 16).unbind(0)

    def score(m, n):
        cos_m, sin_m = rotary_angles(torch.tensor([[m]]), 16, 10000.0)
        cos_n, sin_n = rotary_angles(torch.tensor([[n]]), 16, 10000.0)
        return float((rotate(q, cos_m, sin_m) * rotate(k, cos_n, sin_n)).sum())

    assert score(7, 3) == pytest.approx(score(107, 103), abs=1e-4)
    assert score(7, 3) != pytest.approx(score(7, 4), abs=1e-3)
    assert score(3, 3) == pytest.approx(float((q * k).sum()), abs=1e-5)  # same position: no turn at all


def test_unpermute_rotary_undoes_llama_cpp_reordering():
    """llama.cpp's converter permutes q/k rows (convert_hf_to_gguf.py, LlamaModel.permute)."""
    n_heads, head_dim, d_in = 3, 8, 5
    w = torch.randn(n_heads * head_dim, d_in)
    llama_cpp = w.reshape(n_heads, 2, head_dim // 2, d_in).swapaxes(1, 2).reshape(w.shape)
    assert not torch.equal(llama_cpp, w)
    assert torch.equal(unpermute_rotary(llama_cpp, n_heads), w)


@pytest.mark.parametrize("kwargs, match", [
    (dict(positions="alibi"), "positions must be 'learned' or 'rope'"),
    (dict(n_kv_heads=3), r"n_kv_heads must be a positive int that divides n_heads \(4\)"),
    (dict(n_kv_heads=0), "n_kv_heads"),
    (dict(n_kv_heads=True), "n_kv_heads"),
    (dict(rope_theta=0), "rope_theta must be a number > 0"),
    (dict(positions="rope", d_model=12, n_heads=4), "head_dim .* must be even"),
])
def test_impossible_configs_are_refused(kwargs, match):
    args = dict(vocab_size=10, context_length=8, d_model=16, n_layers=1, n_heads=4) | kwargs
    with pytest.raises(ValueError, match=match):
        DecoderConfig(**args)


@pytest.mark.parametrize("change, match", [
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(attention_bias=True), "attention_bias"),
    (dict(mlp_bias=True), "mlp_bias"),
])
def test_from_hf_llama_refuses_what_it_does_not_model(change, match):
    hf = random_hf_llama(0)
    for name, value in change.items():
        setattr(hf.config, name, value)
    with pytest.raises(ValueError, match=match):
        nexttoken.from_hf_llama(hf)


def test_from_hf_llama_refuses_other_models():
    with pytest.raises(TypeError, match="LlamaForCausalLM"):
        nexttoken.from_hf_llama(torch.nn.Linear(2, 2))


def test_a_rope_model_saves_and_loads(tmp_path):
    model = nexttoken.from_hf_llama(random_hf_llama(9, n_kv_head=3))
    nexttoken.save_decoder(model, tmp_path, dtype=torch.float32)
    again = nexttoken.load_decoder(tmp_path)
    x = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        assert torch.equal(again(x), model(x))


@pytest.mark.parametrize("n_kv_head", [6, 2, 1], ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("onednn", [None, False], ids=["default", "torch-matmul"])
def test_the_fast_path_gives_the_plain_loops_tokens_on_rotary_grouped_models(n_kv_head, onednn):
    """The fast path runs the model's own blocks: rotary positions and grouped-query attention included,
    with left padding (positions from the running count) and a batch."""
    model = nexttoken.from_hf_llama(random_hf_llama(10, n_kv_head=n_kv_head))
    ids = torch.tensor([[0, 0, 5, 9, 2], [7, 3, 8, 1, 4]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    expected = nexttoken.generate(model, ids, 12, attention_mask=mask)
    fast = nexttoken.fast.prepare(model, onednn=onednn)
    assert fast.generate(ids, 12, attention_mask=mask).tolist() == expected.tolist()
    one = torch.tensor([[5, 9, 2]])
    assert fast.generate(one, 8).tolist() == nexttoken.generate(model, one, 8).tolist()


def test_a_missing_gguf_file_names_the_set_up_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="scripts/setup.sh"):
        nexttoken.load_smollm2(tmp_path / "absent.gguf")


def test_explicit_and_fused_grouped_attention_agree():
    """return_attention runs chapter 2's steps with the key/value heads repeated; the fused call
    pairs them without copying: the same logits."""
    model = nexttoken.from_hf_llama(random_hf_llama(11, n_head=6, n_kv_head=2))
    x = torch.tensor([[4, 8, 15, 16, 23, 42]])
    with torch.no_grad():
        explicit, weights = model(x, return_attention=True)
        assert weights[0].shape == (1, 6, 6, 6)  # one row of weights per query head
        assert torch.allclose(explicit, model(x), atol=1e-5)


def test_a_rotary_model_runs_in_bfloat16_as_transformers_does():
    """The rotary angles are computed in float32 and applied in the model's dtype (a float32 cos once
    turned bfloat16 queries and keys into float32 ones, and attention refused the mix)."""
    hf = random_hf_llama(1, n_head=6, n_kv_head=2)
    model = nexttoken.from_hf_llama(hf).to(torch.bfloat16)
    hf = hf.to(torch.bfloat16)
    x = torch.randint(61, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(x)
        assert logits.dtype == torch.bfloat16
        assert torch.allclose(logits.float(), hf(x).logits.float(), atol=0.1)  # bfloat16 rounding
    ours = generate(model, x, 6)
    assert ours.shape == (2, 18)
    assert nexttoken.fast.prepare(model).generate(x, 6).tolist() == ours.tolist()


def test_past_the_window_transformers_goes_on_with_a_rotary_model():
    """What generate's docstring says of transformers past the context: a rotary model has no position
    table to run out of, so its generate goes on (nexttoken's crops instead: the test above)."""
    hf = random_hf_llama(7, max_positions=12)
    ids = torch.randint(61, (1, 8), generator=torch.Generator().manual_seed(0))
    out = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=10, do_sample=False, pad_token_id=0)
    assert out.shape == (1, 18)


def test_the_one_llama_conversion_refuses_what_does_not_fit():
    from nexttoken.hf import LLAMA_LAYER, llama_config, llama_decoder

    config = llama_config(vocab_size=11, context_length=8, d_model=12, n_layers=2, n_heads=2, n_kv_heads=1,
                          d_ff=16, norm_eps=1e-5, rope_theta=10000.0, tie_embeddings=True)
    model = nexttoken.Decoder(config)
    layer = {name: t for name, t in zip(LLAMA_LAYER, [model.blocks[0].norm1.weight,
             *model.blocks[0].attn.qkv.weight.split([12, 6, 6]), model.blocks[0].attn.proj.weight,
             model.blocks[0].norm2.weight, model.blocks[0].mlp.gate.weight, model.blocks[0].mlp.up.weight,
             model.blocks[0].mlp.down.weight])}
    embedding, norm = model.token_embedding.weight, model.final_norm.weight
    with pytest.raises(ValueError, match="n_layers=2"):
        llama_decoder(config, embedding, [layer], norm)
    with pytest.raises(ValueError, match="lm_head"):
        llama_decoder(config, embedding, [layer, layer], norm, lm_head=embedding)
    copy = llama_decoder(config, embedding, [layer, layer], norm)
    assert torch.equal(copy.blocks[1].attn.qkv.weight, model.blocks[0].attn.qkv.weight)
    assert copy.lm_head.weight is copy.token_embedding.weight


def test_an_uninitialized_decoder_leaves_the_global_generator_alone():
    """load_smollm2 builds its Decoder without drawing the 134 million random numbers it would throw away:
    the global generator is where it was, and nn.init works again afterwards."""
    from nexttoken.hf import uninitialized_decoder

    config = DecoderConfig(vocab_size=50, context_length=8, d_model=16, n_layers=2, n_heads=2)
    fills = {name: getattr(torch.nn.init, name) for name in ("normal_", "uniform_", "kaiming_uniform_", "zeros_")}
    torch.manual_seed(0)
    uninitialized_decoder(config)
    assert all(getattr(torch.nn.init, name) is fill for name, fill in fills.items())
    after = torch.rand(3)
    torch.manual_seed(0)
    assert torch.equal(after, torch.rand(3))
    torch.manual_seed(0)
    nexttoken.Decoder(config)
    assert not torch.equal(torch.rand(3), after)  # a real Decoder draws: the check above can fail
