"""nexttoken.fast.prepare and its static cache (fast/prepared.py, fast/static.py): the fast path gives the
plain loop's tokens, with the cache written in place (no timing here: see bench/).

The other modules' tests: test_fast_onednn.py, test_fast_compiled.py, test_fast_autotune.py,
test_fast_package.py, test_fast_torch_private.py; the public names: test_fast_api.py.
"""

import ast
import random
from pathlib import Path

import pytest
import torch
from fast_models import KERNEL_IDS, KERNELS, rope_gqa_model, tiny_model
from helpers import left_padded_batch

import nexttoken
from nexttoken import generate
from nexttoken.fast import prepare
from nexttoken.fast.static import StaticCache

FAST = Path(nexttoken.fast.__file__).parent


# --- prepare: the plain loop's tokens

@pytest.mark.parametrize("onednn", KERNELS, ids=KERNEL_IDS)
@pytest.mark.parametrize("seed, batch_size", [(s, b) for s in range(3) for b in (1, 2, 4)])
def test_same_tokens_as_the_plain_loop_with_left_padding(seed, batch_size, onednn):
    rng = random.Random(seed * 10 + batch_size)
    model = tiny_model(seed, n_layer=1 + seed % 3)
    ids, mask = left_padded_batch(rng, batch_size, 61, pad=60)
    expected = generate(model, ids, 12, attention_mask=mask)
    fast = prepare(model, onednn=onednn)
    if onednn is None:  # timed at prepare: whichever kernel was the faster here
        assert fast.linear in (nexttoken.fast.onednn_linear, nexttoken.fast.torch_linear)
    else:
        assert fast.linear is (nexttoken.fast.onednn_linear if onednn else nexttoken.fast.torch_linear)
    assert fast.generate(ids, 12, attention_mask=mask).tolist() == expected.tolist()


def test_same_tokens_without_a_mask_and_with_a_1d_prompt():
    model = tiny_model(3)
    ids = torch.tensor([5, 9, 2, 40])
    assert prepare(model).generate(ids, 10).tolist() == generate(model, ids, 10).tolist()


@pytest.mark.parametrize("seed", range(3))
def test_eos_finishes_rows_and_pads_them_as_the_plain_loop_does(seed):
    rng = random.Random(seed)
    model = tiny_model(seed)
    ids, mask = left_padded_batch(rng, 3, 61, pad=0)
    free = generate(model, ids, 10, attention_mask=mask)[:, ids.shape[1]:]
    eos = [int(free[0, 2]), int(free[1, 5])]  # tokens greedy decoding really produces: rows stop early
    expected = generate(model, ids, 10, attention_mask=mask, eos_token_id=eos, pad_token_id=59)
    fast = prepare(model).generate(ids, 10, attention_mask=mask, eos_token_id=eos, pad_token_id=59)
    assert fast.tolist() == expected.tolist()
    assert (expected[:, ids.shape[1]:] == 59).any()  # the case really has a finished, padded row


def test_zero_new_tokens_returns_the_prompt():
    model = tiny_model(0)
    ids = torch.tensor([[1, 2, 3]])
    assert prepare(model).generate(ids, 0).tolist() == ids.tolist()


@pytest.mark.parametrize("padded", [False, True])
def test_past_the_context_window_it_crops_as_the_plain_loop_does(padded):
    model = tiny_model(1, n_positions=16)  # window of 16: 10 + 20 tokens cross it
    rng = random.Random(7)
    if padded:
        ids, mask = left_padded_batch(rng, 2, 61, pad=0)
    else:
        ids = torch.tensor([[rng.randrange(61) for _ in range(10)]] * 2)
        ids[1, 0] = (ids[0, 0] + 1) % 61  # rows that differ
        mask = torch.ones_like(ids)
    expected = generate(model, ids, 20, attention_mask=mask)
    assert expected.shape[1] > 16
    assert prepare(model).generate(ids, 20, attention_mask=mask).tolist() == expected.tolist()


def test_same_tokens_on_an_rmsnorm_swiglu_untied_model():
    torch.manual_seed(0)
    config = nexttoken.DecoderConfig(vocab_size=50, context_length=24, d_model=32, n_layers=2, n_heads=4,
                                     norm="rmsnorm", mlp="swiglu", bias=False, tie_embeddings=False)
    model = nexttoken.Decoder(config).eval()
    for p in model.parameters():  # larger weights than the default init: varied tokens, not a repeat
        p.data.normal_(0, 0.3)
    ids, mask = left_padded_batch(random.Random(3), 3, 50, pad=0)
    expected = generate(model, ids, 30, attention_mask=mask)
    assert len(set(expected[:, ids.shape[1]:].flatten().tolist())) > 3
    assert prepare(model).generate(ids, 30, attention_mask=mask).tolist() == expected.tolist()


def test_logits_processors_sampling_and_streaming_pass_through():
    model = tiny_model(2)
    ids = torch.tensor([[4, 8, 15], [16, 23, 42]])
    kwargs = dict(logits_processors=[nexttoken.temperature(0.7)], select=nexttoken.sample)
    expected = generate(model, ids, 8, generator=torch.Generator().manual_seed(1), **kwargs)
    streamed = []
    fast = prepare(model).generate(ids, 8, generator=torch.Generator().manual_seed(1),
                                   on_token=streamed.append, **kwargs)
    assert fast.tolist() == expected.tolist()
    assert torch.stack(streamed, 1).tolist() == fast[:, 3:].tolist()


def test_the_logits_match_the_plain_forward_pass_at_the_last_position():
    model = tiny_model(4)
    ids, mask = left_padded_batch(random.Random(4), 3, 61, pad=0)
    expected = model(ids, mask)[:, -1:]  # left padding: every row's last position is a real token
    logits = prepare(model).forward_unchecked(ids, mask)
    assert logits.shape == (3, 1, model.config.vocab_size)
    assert torch.allclose(logits, expected, atol=1e-5)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_the_lm_head_reads_only_the_last_position(family):
    """How, not only what: the final norm and the LM head get one row per sequence, for the prompt as
    for each step (the loop keeps only the last position's logits)."""
    model = tiny_model(5) if family == "gpt2" else rope_gqa_model(5)
    rows = {"final_norm": [], "lm_head": []}
    for name, seen in rows.items():
        getattr(model, name).register_forward_hook(lambda module, args, out, seen=seen: seen.append(args[0].shape[1]))
    ids, mask = left_padded_batch(random.Random(5), 2, model.config.vocab_size, pad=0)
    expected = generate(model, ids, 6, attention_mask=mask)
    prepared = prepare(model)  # (which times the products once, on rows of its own)
    for seen in rows.values():
        seen.clear()
    assert prepared.generate(ids, 6, attention_mask=mask).tolist() == expected.tolist()
    assert ids.shape[1] > 1 and rows == {"final_norm": [1] * 6, "lm_head": [1] * 6}


def test_the_fast_path_runs_the_models_own_blocks(monkeypatch):
    """One forward pass, not two: a block's forward is what the fast path runs (patched here to count)."""
    model = tiny_model(1, n_layer=2)
    calls = []
    block_forward = type(model.blocks[0]).forward

    def counting(self, *args, **kwargs):
        calls.append(self)
        return block_forward(self, *args, **kwargs)

    monkeypatch.setattr(type(model.blocks[0]), "forward", counting)
    prepare(model, onednn=False).generate(torch.tensor([[1, 2, 3]]), 3)
    assert calls == [model.blocks[0], model.blocks[1]] * 3  # the prompt, then two one-token steps


def test_bad_arguments_are_refused_with_messages_that_name_them():
    model = tiny_model(0)
    with pytest.raises(TypeError, match="nexttoken.Decoder"):
        prepare("gpt2")
    with pytest.raises(TypeError, match="compile must be True, False, 'max-autotune' or 'ahead-of-time'"):
        prepare(model, compile="yes")
    with pytest.raises(TypeError, match="compile must be"):
        prepare(model, compile=1)  # an int is not a bool here
    with pytest.raises(TypeError, match="fixed_shapes must be True or False"):
        prepare(model, fixed_shapes=1)
    with pytest.raises(ValueError, match="max_new_tokens"):  # the loop's own checks
        prepare(model).generate(torch.tensor([[1, 2]]), -1)
    with pytest.raises(ValueError, match="input_ids holds id 99"):
        prepare(model).generate(torch.tensor([[1, 99]]), 3)


def test_training_mode_with_dropout_is_refused():
    config = nexttoken.DecoderConfig(vocab_size=50, context_length=16, d_model=16, n_layers=1, n_heads=2,
                                     dropout=0.1)
    model = nexttoken.Decoder(config)  # training mode by default
    with pytest.raises(ValueError, match="model.eval"):
        prepare(model).generate(torch.tensor([[1, 2]]), 3)
    assert prepare(model.eval()).generate(torch.tensor([[1, 2]]), 3).shape == (1, 5)


# --- the static cache

def test_the_cache_is_allocated_once_and_written_in_place():
    """Every step writes into the buffers the prompt allocated, at the next position of each row, and the
    cached keys are the plain cache's (``KVCache``) for the same tokens."""
    model = rope_gqa_model(3)
    prepared = prepare(model, onednn=False)
    ids, mask = left_padded_batch(random.Random(3), 2, model.config.vocab_size, pad=0)
    cache = prepared.new_cache()
    prepared.forward_unchecked(ids, mask, cache=cache)
    addresses = [b.data_ptr() for b in cache.keys + cache.values]
    plain = model.new_cache()
    model.forward_unchecked(ids, mask, cache=plain)
    for step in range(3):
        new = torch.tensor([[7 + step], [9 + step]])
        ids, mask = torch.cat([ids, new], 1), torch.cat([mask, torch.ones_like(new)], 1)
        prepared.forward_unchecked(ids[:, -1:], mask, cache=cache)
        model.forward_unchecked(ids[:, -1:], mask, cache=plain)
    assert [b.data_ptr() for b in cache.keys + cache.values] == addresses
    assert len(cache) == len(plain) == ids.shape[1]
    assert cache.keys[0].shape[2] == model.config.context_length  # the whole window, from the start
    torch.testing.assert_close(cache.keys[1][:, :, :len(cache)], plain.keys[1], rtol=1e-5, atol=1e-5)
    assert cache.real_tokens.tolist() == mask.sum(1).tolist()


def test_take_gives_a_padded_prompt_its_positions_and_mask_then_each_step_its_own():
    model = tiny_model(0, n_positions=16)
    cache = StaticCache()
    ids, mask = torch.tensor([[0, 0, 5, 6], [1, 2, 3, 4]]), torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    positions, seen = cache.take(model, ids, mask)
    assert positions.tolist() == [[0, 0, 0, 1], [0, 1, 2, 3]]
    assert seen.shape == (2, 1, 4, 4)
    assert seen[0, 0].tolist() == [[2 <= c <= r for c in range(4)] for r in range(4)]  # padding and causal
    assert seen[1, 0].tolist() == [[c <= r for c in range(4)] for r in range(4)]  # causal, no padding
    assert cache.write_at.tolist() == [0, 1, 2, 3] and len(cache) == 4 and cache.real_tokens.tolist() == [2, 4]
    positions, seen = cache.take(model, ids[:, :1], torch.cat([mask, torch.ones(2, 1, dtype=torch.long)], 1))
    assert positions.tolist() == [[2], [4]]  # each row's count of real tokens: the next position
    assert seen.shape == (2, 1, 1, 5) and seen[:, 0, 0].tolist() == [[False, False, True, True, True], [True] * 5]
    assert cache.write_at.tolist() == [4] and len(cache) == 5 and not cache.whole_window


def test_take_needs_no_mask_for_an_unpadded_step_and_reads_the_whole_window_with_fixed_shapes():
    model = tiny_model(0, n_positions=16)
    ids = torch.tensor([[3, 1, 4]])
    for fixed in (False, True):
        cache = StaticCache(fixed_shapes=fixed)
        _, seen = cache.take(model, ids, None)
        assert seen.shape == (3, 3)  # the prompt: the causal mask alone
        _, seen = cache.take(model, ids[:, :1], torch.ones(1, 4, dtype=torch.long))
        if not fixed:
            assert seen is None and not cache.whole_window
        else:  # every slot of the window, the 4 written so far seen
            assert cache.whole_window and seen.shape == (1, 1, 1, 16)
            assert seen[0, 0, 0].tolist() == [True] * 4 + [False] * 12


def test_the_cache_state_is_set_in_static_py_alone():
    """How: no other module of the fast path assigns an attribute of a cache, and in ``StaticCache`` the
    per-pass state (which positions a pass writes, how many are cached, whether it reads the whole window) is
    set in ``advance`` alone (and ``__init__``)."""
    for path in sorted(FAST.glob("*.py")):
        tree = ast.parse(path.read_text())
        stores = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)]
        if path.name != "static.py":
            assert not [ast.unparse(n) for n in stores if "cache" in ast.unparse(n.value)], path.name
            continue
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "StaticCache")
        per_pass = {"write_at", "length", "whole_window"}
        setters = {f.name for f in cls.body if isinstance(f, ast.FunctionDef) for n in ast.walk(f)
                   if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and n.attr in per_pass}
        assert setters == {"__init__", "advance"}, setters


# --- fixed shapes: every one-token step attends over the whole window, masked (what a CUDA graph needs)

@pytest.mark.parametrize("onednn", [None, False], ids=["default", "torch-matmul"])
@pytest.mark.parametrize("seed, batch_size", [(s, b) for s in range(3) for b in (1, 2, 4)])
def test_fixed_shapes_give_the_plain_loops_tokens(seed, batch_size, onednn):
    """Left padding, a GPT-2 block and a rotary grouped-query one, the window crossed (16 and 20 slots,
    up to 8 + 24 tokens), two generations in a row on the same buffers."""
    rng = random.Random(seed * 10 + batch_size)
    for model in (tiny_model(seed, n_positions=16), rope_gqa_model(seed)):
        vocab = model.config.vocab_size
        fast = prepare(model, onednn=onednn, fixed_shapes=True)
        for n in (5, 24):  # the second crosses the window; both reuse the kept buffers
            ids, mask = left_padded_batch(rng, batch_size, vocab, pad=vocab - 1)
            expected = generate(model, ids, n, attention_mask=mask)
            assert fast.generate(ids, n, attention_mask=mask).tolist() == expected.tolist()
        assert len(fast.kept) == 1  # one window of buffers for this batch size, reused


def test_fixed_shapes_with_eos_zero_steps_and_a_step_that_fills_the_window_exactly():
    model = tiny_model(4, n_positions=16)
    fast = prepare(model, fixed_shapes=True)
    ids, mask = left_padded_batch(random.Random(4), 3, 61, pad=0)
    free = generate(model, ids, 10, attention_mask=mask)[:, ids.shape[1]:]
    eos = [int(free[0, 2]), int(free[1, 5])]
    expected = generate(model, ids, 10, attention_mask=mask, eos_token_id=eos, pad_token_id=59)
    assert fast.generate(ids, 10, attention_mask=mask, eos_token_id=eos, pad_token_id=59).tolist() == \
        expected.tolist()
    assert fast.generate(ids, 0, attention_mask=mask).tolist() == ids.tolist()
    one = torch.tensor([[3, 1, 4, 1]])  # 4 + 12 = 16: the last step writes the window's last slot
    assert fast.generate(one, 12).tolist() == generate(model, one, 12).tolist()
