import pytest
import torch

import nexttoken
from nexttoken import Decoder, DecoderConfig, causal_mask


def small(**overrides):
    base = dict(vocab_size=50, context_length=16, d_model=32, n_layers=2, n_heads=4)
    return DecoderConfig(**{**base, **overrides})


def test_causal_mask_is_lower_triangular():
    m = causal_mask(4)
    assert m.dtype == torch.bool and m.shape == (4, 4)
    for i in range(4):
        for j in range(4):
            assert bool(m[i, j]) == (j <= i)
    assert causal_mask(0).shape == (0, 0)
    with pytest.raises(ValueError, match="T must be"):
        causal_mask(-1)
    with pytest.raises(ValueError, match="past must be"):
        causal_mask(2, past=-1)


@pytest.mark.parametrize("T, past", [(1, 0), (1, 5), (3, 4), (6, 0)])
def test_causal_mask_with_a_past_is_the_last_rows_of_the_full_mask(T, past):
    assert torch.equal(causal_mask(T, past), causal_mask(past + T)[past:])


def test_the_model_builds_its_mask_with_causal_mask(tiny_decoder, monkeypatch):
    """The chapter 2 function is on the model's path: with and without a cache."""
    import nexttoken.model

    calls = []

    def recording(T, past=0, device=None):
        calls.append((T, past))
        return causal_mask(T, past, device=device)

    monkeypatch.setattr(nexttoken.model, "causal_mask", recording)
    cache = tiny_decoder.new_cache()
    tiny_decoder(torch.tensor([[1, 2, 3]]), cache=cache)
    tiny_decoder(torch.tensor([[4]]), cache=cache)
    assert calls == [(3, 0), (1, 3)]


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("mlp", ["gelu", "swiglu"])
@pytest.mark.parametrize("tie", [True, False])
def test_logits_shape_and_causality(norm, mlp, tie):
    torch.manual_seed(0)
    model = Decoder(small(norm=norm, mlp=mlp, tie_embeddings=tie, bias=norm == "layernorm")).eval()
    x = torch.randint(50, (3, 10))
    logits = model(x)
    assert logits.shape == (3, 10, 50) and logits.dtype == torch.float32
    # Change the token at position 6: the logits before it must not move, the ones from it on must.
    y = x.clone()
    y[:, 6] = (y[:, 6] + 1) % 50
    changed = model(y)
    assert torch.equal(logits[:, :6], changed[:, :6])
    assert not torch.allclose(logits[:, 6:], changed[:, 6:])


def test_tied_and_untied_heads():
    tied = Decoder(small(tie_embeddings=True))
    untied = Decoder(small(tie_embeddings=False))
    assert tied.lm_head.weight is tied.token_embedding.weight
    assert untied.lm_head.weight is not untied.token_embedding.weight
    assert untied.num_parameters() - tied.num_parameters() == 50 * 32


def test_rmsnorm_swiglu_block_has_no_biases_or_layernorm():
    model = Decoder(small(norm="rmsnorm", mlp="swiglu", bias=False))
    assert not any(isinstance(m, torch.nn.LayerNorm) for m in model.modules())
    assert not any(name.endswith("bias") for name, _ in model.named_parameters())
    assert model.blocks[0].mlp.up.out_features == 8 * 32 // 3


def test_left_padding_gives_the_logits_of_the_row_alone():
    torch.manual_seed(1)
    model = Decoder(small()).eval()
    row = torch.randint(50, (1, 5))
    padded = torch.cat([torch.full((1, 3), 7), row], dim=1)
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1]])
    alone = model(row)
    batched = model(padded, attention_mask=mask)
    assert torch.isfinite(batched).all()
    assert torch.allclose(batched[:, 3:], alone, atol=1e-5)


def test_positions_from_mask():
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    assert nexttoken.positions_from_mask(mask).tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]]


def test_one_dimensional_input_is_a_batch_of_one(tiny_decoder):
    x = torch.randint(50, (6,))
    assert torch.equal(tiny_decoder(x), tiny_decoder(x[None]))


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("d_model", 30, "divisible by n_heads"),
        ("norm", "batchnorm", "norm must be"),
        ("mlp", "relu", "mlp must be"),
        ("n_layers", 0, "n_layers must be a positive int"),
        ("dropout", 1.5, "dropout"),
    ],
)
def test_config_rejects_bad_values(field, value, match):
    with pytest.raises(ValueError, match=match):
        small(**{field: value})


def test_forward_rejects_bad_input(tiny_decoder):
    with pytest.raises(TypeError, match="input_ids must hold integer"):
        tiny_decoder(torch.zeros(1, 3))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tiny_decoder(torch.tensor([[1, 50]]))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tiny_decoder(torch.tensor([[-1, 2]]))
    with pytest.raises(ValueError, match="empty"):
        tiny_decoder(torch.zeros(1, 0, dtype=torch.long))
    with pytest.raises(ValueError, match="context_length is 16"):
        tiny_decoder(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match="attention_mask has shape"):
        tiny_decoder(torch.zeros(2, 3, dtype=torch.long), attention_mask=torch.ones(2, 4))
    with pytest.raises(ValueError, match="row 1 is all zeros"):
        tiny_decoder(torch.zeros(2, 3, dtype=torch.long), attention_mask=torch.tensor([[1, 1, 1], [0, 0, 0]]))
    with pytest.raises(TypeError, match="config must be a DecoderConfig"):
        Decoder({"d_model": 8})


def test_attention_weights_are_returned_and_causal(tiny_decoder):
    x = torch.randint(50, (2, 7))
    logits, attention = tiny_decoder(x, return_attention=True)
    assert torch.allclose(logits, tiny_decoder(x), atol=1e-5)  # explicit steps vs the fused call
    assert len(attention) == 2 and attention[0].shape == (2, 4, 7, 7)
    assert torch.allclose(attention[1].sum(-1), torch.ones(2, 4, 7))
    future = ~causal_mask(7)
    assert (attention[0][..., future] == 0).all()  # no weight on any future key


def test_without_the_causal_mask_the_past_sees_the_future(tiny_decoder):
    x = torch.randint(50, (1, 8))
    y = x.clone()
    y[0, 7] = (y[0, 7] + 1) % 50
    assert torch.equal(tiny_decoder(x)[:, :7], tiny_decoder(y)[:, :7])
    assert not torch.allclose(tiny_decoder(x, causal=False)[:, :7], tiny_decoder(y, causal=False)[:, :7])
    _, attention = tiny_decoder(x, causal=False, return_attention=True)
    assert (attention[0][..., ~causal_mask(8)] > 0).all()


def test_decoder_builds_plain_nn_linear_weights():
    """The lesson's model: every weight contiguous, (out, in), as nn.Linear stores it."""
    model = Decoder(small())
    assert all(p.is_contiguous() for p in model.parameters())
    assert model.lm_head.weight is model.token_embedding.weight


def test_lay_out_for_cpu_changes_only_the_memory_order():
    """lay_out_for_cpu stores a widening layer (in, out) and leaves a narrowing one as nn.Linear keeps it;
    shapes (out, in), values, parameter objects, the tie and the logits stay the same."""
    torch.manual_seed(0)
    model = Decoder(small(tie_embeddings=True)).eval()
    x = torch.randint(50, (2, 7))
    before = model(x)
    params = list(model.parameters())
    state = {name: t.clone() for name, t in model.state_dict().items()}
    assert nexttoken.fast.lay_out_for_cpu(model) is model
    qkv, down = model.blocks[0].attn.qkv.weight, model.blocks[0].mlp.down.weight
    assert qkv.shape == (96, 32) and qkv.t().is_contiguous() and not qkv.is_contiguous()
    assert down.shape == (32, 128) and down.is_contiguous()
    assert model.lm_head.weight is model.token_embedding.weight and model.lm_head.weight.t().is_contiguous()
    assert all(a is b for a, b in zip(params, model.parameters()))  # through .data: same Parameter objects
    assert all(torch.equal(state[name], t) for name, t in model.state_dict().items())
    assert torch.allclose(model(x), before, atol=1e-5)
    nexttoken.fast.lay_out_for_cpu(model)  # a second call changes nothing
    assert model.blocks[0].attn.qkv.weight.t().is_contiguous()
    moved = model.to(torch.float64)  # .to() keeps the layout and the tie
    assert moved.lm_head.weight is moved.token_embedding.weight and moved.lm_head.weight.t().is_contiguous()


def test_save_and_load_keep_values(tmp_path):
    torch.manual_seed(0)
    model = nexttoken.fast.lay_out_for_cpu(Decoder(small(tie_embeddings=False)).eval())
    nexttoken.save_decoder(model, tmp_path, dtype=torch.float32)
    loaded = nexttoken.load_decoder(tmp_path)
    x = torch.randint(50, (1, 9))
    assert torch.allclose(loaded(x), model(x), atol=1e-6)
    assert all(p.is_contiguous() for p in loaded.parameters())  # a loaded model is the plain one


def test_rows_of_the_mask_a_cached_step_uses_are_those_of_the_causal_mask(tiny_decoder):
    """A cached step builds only its own rows of the mask: same attention as the full mask's last rows."""
    x = torch.randint(50, (1, 8), generator=torch.Generator().manual_seed(1))
    _, full = tiny_decoder(x, return_attention=True)
    cache = tiny_decoder.new_cache()
    tiny_decoder(x[:, :5], cache=cache)
    _, step = tiny_decoder(x[:, 5:], cache=cache, return_attention=True)
    for layer_full, layer_step in zip(full, step):
        assert torch.allclose(layer_step, layer_full[:, :, 5:], atol=1e-6)
        assert torch.equal(layer_step > 0, causal_mask(8)[5:].expand_as(layer_step))


def test_return_attention_is_off_by_default_and_means_the_same_at_every_level(tiny_decoder):
    """CausalSelfAttention, Block and Decoder: weights only when asked, the same output either way."""
    x = torch.randint(50, (2, 7))
    h = torch.randn(2, 7, 32)
    mask = causal_mask(7)[None, None]
    block = tiny_decoder.blocks[0]
    for layer in (block.attn, block):
        fused_out, none = layer(h, mask)
        explicit_out, weights = layer(h, mask, return_attention=True)
        assert none is None and weights.shape == (2, 4, 7, 7)
        assert torch.allclose(fused_out, explicit_out, atol=1e-5)
    assert isinstance(tiny_decoder(x), torch.Tensor)
    logits, attention = tiny_decoder(x, return_attention=True)
    assert torch.allclose(logits, tiny_decoder(x), atol=1e-5)
    h0 = block.norm1(tiny_decoder.token_embedding(x) + tiny_decoder.position_embedding(torch.arange(7)))
    _, direct = block.attn(h0, mask, return_attention=True)
    assert torch.allclose(direct, attention[0], atol=1e-6)


@pytest.mark.parametrize("norm, mlp", [("layernorm", "gelu"), ("rmsnorm", "swiglu")])
def test_fused_attention_equals_the_step_by_step_attention(norm, mlp):
    """model(x) runs scaled_dot_product_attention; return_attention=True runs the explicit steps of
    chapter 2. Same logits, with left padding (pad slots that see no key) and with a cache."""
    torch.manual_seed(0)
    model = Decoder(small(norm=norm, mlp=mlp)).eval()
    x = torch.randint(50, (2, 9))
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1, 1], [1] * 9])
    fused = model(x, attention_mask=mask)
    explicit, _ = model(x, attention_mask=mask, return_attention=True)
    assert not fused.isnan().any()
    assert torch.allclose(fused, explicit, atol=1e-5)
    cache = model.new_cache()
    model(x[:, :6], attention_mask=mask[:, :6], cache=cache)
    step = model(x[:, 6:], attention_mask=mask, cache=cache)
    assert torch.allclose(step, explicit[:, 6:], atol=1e-5)


def test_too_long_with_a_cache_says_to_pass_only_the_new_tokens():
    """Feeding the whole sequence again to a cache that holds its start is the usual way to overflow the
    window with a cache: the message points at the new tokens, not at cropping (which would be wrong)."""
    model = Decoder(small()).eval()
    ids = torch.randint(0, 50, (1, 10))
    cache = model.new_cache()
    with torch.no_grad():
        model(ids, cache=cache)
        with pytest.raises(ValueError, match=r"the cache already holds 10.*input_ids\[:, -1:\]") as info:
            model(torch.cat([ids, ids[:, :1]], dim=1), cache=cache)
    assert "crop it" not in str(info.value)
    assert len(cache) == 10  # nothing half-done: the failed call appended nothing
