import itertools
import random

import pytest
import torch
from helpers import left_padded_batch, random_hf_gpt2

import nexttoken
from nexttoken import generate


def hf_generate(hf, ids, mask, max_new_tokens, eos, pad):
    return hf.generate(
        ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=False,
        eos_token_id=eos, pad_token_id=pad,
    )


CASES = list(itertools.product(range(4), [1, 2, 3, 4], ["int", "list", "none"], [True, False]))


@pytest.mark.parametrize("seed, batch_size, eos_kind, give_pad", CASES)
def test_matches_transformers_greedy_generate(seed, batch_size, eos_kind, give_pad):
    """Randomized: seeds, batch sizes 1-4, left padding, EOS as int / list / None, pad given or not."""
    rng = random.Random(1000 * seed + 10 * batch_size + len(eos_kind) + give_pad)
    hf = random_hf_gpt2(seed, n_layer=1 + seed % 3)
    model = nexttoken.from_hf_gpt2(hf)
    pad = 60 if give_pad else None
    ids, mask = left_padded_batch(rng, batch_size, 61, pad=60)
    n_new = 12
    # EOS ids that greedy decoding actually produces, so that rows really stop at different steps. Our
    # loop picks them (a transformers call costs ~10x more); the comparison below is with transformers.
    free_run = generate(model, ids, n_new, attention_mask=mask)[:, ids.shape[1]:]
    produced = free_run.flatten().tolist()
    eos = {"int": produced[rng.randrange(len(produced))],
           "list": [produced[rng.randrange(len(produced))], produced[rng.randrange(len(produced))]],
           "none": None}[eos_kind]
    expected = hf_generate(hf, ids, mask, n_new, eos, pad)
    ours = generate(model, ids, n_new, eos_token_id=eos, pad_token_id=pad, attention_mask=mask)
    assert ours.dtype == torch.int64
    assert ours.tolist() == expected.tolist()


@pytest.mark.parametrize("seed", range(3))
def test_each_row_of_a_left_padded_batch_gets_its_unbatched_result(seed):
    rng = random.Random(seed)
    model = nexttoken.from_hf_gpt2(random_hf_gpt2(seed))
    ids, mask = left_padded_batch(rng, 4, 61, pad=0)
    batched = generate(model, ids, 10, attention_mask=mask)
    for row in range(4):
        alone = ids[row][mask[row].bool()][None]
        assert batched[row, ids.shape[1]:].tolist() == generate(model, alone, 10)[0, alone.shape[1]:].tolist()


def test_finished_rows_are_padded_and_the_loop_stops_when_all_are_done():
    model = nexttoken.from_hf_gpt2(random_hf_gpt2(5))
    ids = torch.tensor([[3, 4, 5], [10, 11, 12]])
    free = generate(model, ids, 8)
    eos = int(free[0, 4])  # row 0's second new token: row 0 stops after 2 steps at most
    out = generate(model, ids, 8, eos_token_id=eos, pad_token_id=59)
    new = out[:, 3:]
    first_eos = [row.index(eos) if eos in row else None for row in new.tolist()]
    assert first_eos[0] is not None and first_eos[0] <= 1
    for row, stop in zip(new.tolist(), first_eos):
        if stop is not None:
            assert row[stop] == eos  # the EOS token is kept
            assert all(t == 59 for t in row[stop + 1:])  # then padding
    stops = [s + 1 if s is not None else 8 for s in first_eos]
    assert out.shape[1] == 3 + max(stops)  # the loop ends when every row has finished


def test_pad_defaults_to_the_first_eos_id():
    model = nexttoken.from_hf_gpt2(random_hf_gpt2(6))
    ids = torch.tensor([[1, 2], [30, 31]])
    free = generate(model, ids, 6)
    eos = [int(free[0, 2]), 58]
    out = generate(model, ids, 6, eos_token_id=eos)
    row0 = out[0, 2:].tolist()
    assert row0[0] == eos[0]
    assert all(t == eos[0] for t in row0[1:])


def test_eos_in_the_prompt_does_not_stop_anything():
    model = nexttoken.from_hf_gpt2(random_hf_gpt2(7))
    ids = torch.tensor([[5, 6, 7]])
    out = generate(model, ids, 4, eos_token_id=7)
    free = generate(model, ids, 4)
    assert out.shape[1] > 3 and out[0, 3] == free[0, 3]


def test_max_new_tokens_zero_returns_the_prompt(tiny_decoder):
    ids = torch.tensor([[1, 2, 3]], dtype=torch.int32)
    out = generate(tiny_decoder, ids, 0)
    assert out.dtype == torch.int64 and out.tolist() == [[1, 2, 3]]


def test_one_dimensional_prompt_is_a_batch_of_one(tiny_decoder):
    assert torch.equal(generate(tiny_decoder, torch.tensor([4, 5]), 3),
                       generate(tiny_decoder, torch.tensor([[4, 5]]), 3))


def test_inputs_are_not_mutated(tiny_decoder):
    ids = torch.tensor([[0, 4, 5], [6, 7, 8]])
    mask = torch.tensor([[0, 1, 1], [1, 1, 1]])
    ids_copy, mask_copy = ids.clone(), mask.clone()
    generate(tiny_decoder, ids, 5, attention_mask=mask, eos_token_id=3)
    assert torch.equal(ids, ids_copy) and torch.equal(mask, mask_copy)


def test_crops_to_the_context_window_instead_of_failing():
    hf = random_hf_gpt2(8, n_positions=16)
    model = nexttoken.from_hf_gpt2(hf)
    ids = torch.randint(61, (2, 10), generator=torch.Generator().manual_seed(0))
    out = generate(model, ids, 12)  # 22 tokens > 16 positions
    assert out.shape == (2, 22)
    # While the sequence fits, the tokens are transformers' tokens.
    fits = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, do_sample=False)
    assert out[:, :16].tolist() == fits.tolist()
    # Past the window, each token is the greedy choice given the last 16 tokens only.
    for t in range(16, 22):
        with torch.no_grad():
            assert torch.equal(out[:, t], model(out[:, t - 16:t])[:, -1].argmax(-1))


def test_on_token_streams_each_step(tiny_decoder):
    seen = []
    out = generate(tiny_decoder, torch.tensor([[1, 2], [3, 4]]), 5, on_token=lambda t: seen.append(t.clone()))
    assert len(seen) == 5 and all(t.shape == (2,) for t in seen)
    assert torch.equal(torch.stack(seen, dim=1), out[:, 2:])


def test_select_receives_probabilities_and_picks_tokens(tiny_decoder):
    calls = []

    def lowest_probability(probs, generator=None):
        calls.append(probs)
        return probs.argmin(-1)

    out = generate(tiny_decoder, torch.tensor([[1, 2]]), 3, select=lowest_probability)
    assert len(calls) == 3
    assert all(torch.allclose(p.sum(-1), torch.ones(1)) and p.shape == (1, 50) for p in calls)
    assert out[0, 2] == calls[0].argmin()


def test_sampling_is_reproducible_with_a_generator(tiny_decoder):
    prompt = torch.tensor([[1, 2, 3]])

    def run(seed):
        return generate(tiny_decoder, prompt, 10, select=nexttoken.sample,
                        generator=torch.Generator().manual_seed(seed))

    assert torch.equal(run(0), run(0))
    assert any(not torch.equal(run(0), run(s)) for s in range(1, 5))


def test_sample_follows_the_distribution():
    probs = torch.tensor([[0.0, 0.25, 0.75]]).repeat(4000, 1)
    draws = nexttoken.sample(probs, generator=torch.Generator().manual_seed(0))
    assert (draws == 0).sum() == 0
    assert abs((draws == 2).float().mean().item() - 0.75) < 0.03


def test_greedy_picks_the_first_of_equal_maxima():
    assert nexttoken.greedy(torch.tensor([[0.1, 0.45, 0.45]])).tolist() == [1]


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(input_ids=torch.zeros(1, 0, dtype=torch.long)), ValueError, "input_ids is empty"),
        (dict(input_ids=torch.zeros(1, 3)), TypeError, "input_ids must hold integer"),
        (dict(input_ids=[[1, 2]]), TypeError, "input_ids must be a torch.Tensor"),
        (dict(input_ids=torch.zeros(1, 1, 3, dtype=torch.long)), ValueError, "input_ids must have shape"),
        (dict(input_ids=torch.tensor([[1, 99]])), ValueError, "outside the vocabulary"),
        (dict(max_new_tokens=-1), ValueError, "max_new_tokens must be >= 0"),
        (dict(max_new_tokens=2.0), TypeError, "max_new_tokens must be an int"),
        (dict(attention_mask=torch.ones(2, 3)), ValueError, "attention_mask has shape"),
        (dict(attention_mask=torch.tensor([[0, 0]])), ValueError, "all zeros"),
        (dict(attention_mask=torch.tensor([[2, 1]])), ValueError, "only 0"),
        (dict(eos_token_id=[]), ValueError, "eos_token_id must be"),
        (dict(eos_token_id=[1, 200]), ValueError, "eos_token_id holds 200"),
        (dict(eos_token_id="3"), ValueError, "eos_token_id must be"),
        (dict(pad_token_id=1.5), TypeError, "pad_token_id"),
        (dict(pad_token_id=-1, eos_token_id=3), ValueError, "pad_token_id is -1"),
        (dict(select="greedy"), TypeError, "select must be"),
        (dict(on_token=3), TypeError, "on_token must be"),
        # A logits processor passed as select has the wrong shape: refused before the first step.
        (dict(select=nexttoken.temperature(0.8)), TypeError, r"select must be a function of \(probs, generator"),
        (dict(on_token=lambda: None), TypeError, "on_token must be a function of the new tokens, but"),
        (dict(logits_processors=[lambda scores: scores]), TypeError, r"logits_processors\[0\] .* cannot be called"),
        (dict(logits_processors=lambda ids, s: s), TypeError, "logits_processors must be a list"),
        (dict(logits_processors=[None]), TypeError, r"logits_processors\[0\] must be a function"),
        (dict(attention_mask=torch.tensor([[1, 0]])), ValueError, "padding_side='left'"),
    ],
)
def test_bad_input_is_named(tiny_decoder, kwargs, error, match):
    args = {"input_ids": torch.tensor([[1, 2]]), "max_new_tokens": 2, **kwargs}
    with pytest.raises(error, match=match):
        generate(tiny_decoder, **args)


CACHE_CASES = [
    dict(norm="layernorm", mlp="gelu", bias=True, tie_embeddings=True),
    dict(norm="rmsnorm", mlp="swiglu", bias=False, tie_embeddings=False),
]


def test_right_padding_is_refused_and_left_padding_passes(tiny_decoder):
    ids = torch.tensor([[5, 6, 7], [8, 9, 0]])
    with pytest.raises(ValueError, match="row 1 has padding .0. after a real token .1.: .*pad on the left"):
        generate(tiny_decoder, ids, 2, attention_mask=torch.tensor([[1, 1, 1], [1, 1, 0]]))
    with pytest.raises(ValueError, match="row 0 has padding"):  # a hole in the middle is refused too
        generate(tiny_decoder, ids, 2, attention_mask=torch.tensor([[1, 0, 1], [1, 1, 1]]))
    left = generate(tiny_decoder, ids, 2, attention_mask=torch.tensor([[1, 1, 1], [0, 1, 1]]))
    assert left.shape == (2, 5)


def test_arguments_are_checked_once_per_call_not_at_every_step(tiny_decoder, monkeypatch):
    import importlib

    calls = []
    original = importlib.import_module("nexttoken.checks").check_token_ids

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    for module in ("nexttoken.model", "nexttoken.generate"):  # nexttoken.generate is also the function
        monkeypatch.setattr(importlib.import_module(module), "check_token_ids", counting)
    for use_cache in (True, False):
        calls.clear()
        generate(tiny_decoder, torch.tensor([[1, 2]]), 6, use_cache=use_cache)
        assert len(calls) == 1


@pytest.mark.parametrize("variant", CACHE_CASES, ids=["gpt2-block", "rmsnorm-swiglu"])
@pytest.mark.parametrize("seed", range(3))
def test_cached_loop_gives_the_tokens_of_the_uncached_loop(variant, seed):
    """Left padding, EOS and pad, and cropping past the context window (prompt 1-8 + 20 new > 16)."""
    torch.manual_seed(seed)
    config = nexttoken.DecoderConfig(vocab_size=61, context_length=16, d_model=32, n_layers=2, n_heads=4,
                                     **variant)
    model = nexttoken.Decoder(config).eval()
    for p in model.parameters():  # larger weights than GPT-2's init, so the choices depend on context
        torch.nn.init.normal_(p, std=0.3)
    ids, mask = left_padded_batch(random.Random(seed), 3, 61, pad=0)
    plain = generate(model, ids, 20, attention_mask=mask, use_cache=False)
    eos = int(plain[1, ids.shape[1] + 3])
    for kwargs in (dict(), dict(eos_token_id=eos), dict(eos_token_id=[eos, 5], pad_token_id=60)):
        without = generate(model, ids, 20, attention_mask=mask, use_cache=False, **kwargs)
        with_cache = generate(model, ids, 20, attention_mask=mask, use_cache=True, **kwargs)
        assert with_cache.tolist() == without.tolist()


def test_cached_logits_match_a_full_forward_pass(tiny_decoder):
    x = torch.randint(50, (2, 9), generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 1], [1] * 9])
    full = tiny_decoder(x, attention_mask=mask)
    cache = tiny_decoder.new_cache()
    first = tiny_decoder(x[:, :5], attention_mask=mask[:, :5], cache=cache)
    steps = [tiny_decoder(x[:, t:t + 1], attention_mask=mask[:, :t + 1], cache=cache) for t in range(5, 9)]
    assert len(cache) == 9
    assert torch.allclose(torch.cat([first] + steps, dim=1)[0, 2:], full[0, 2:], atol=1e-5)
    assert torch.allclose(torch.cat([first] + steps, dim=1)[1], full[1], atol=1e-5)
    with pytest.raises(ValueError, match="attention_mask has shape"):
        tiny_decoder(x[:, :1], attention_mask=mask[:, :1], cache=cache)  # must cover the 9 cached too


def test_cache_buffer_grows_and_keeps_every_position():
    """KVCache writes into a buffer that doubles when full: what it returns is always the plain
    concatenation of everything appended, in order, across several growths."""
    cache = nexttoken.KVCache(n_layers=2)
    keys, values = [], []
    for T_new in (3, 1, 1, 1, 4, 1, 9):
        k, v = torch.randn(2, 4, T_new, 8), torch.randn(2, 4, T_new, 8)
        keys.append(k)
        values.append(v)
        all_k, all_v = cache.extend(0, k, v)
        assert torch.equal(all_k, torch.cat(keys, dim=2)) and torch.equal(all_v, torch.cat(values, dim=2))
    assert len(cache) == 20 and cache.key_buffers[0].shape[2] >= 20
    assert torch.equal(cache.keys[0], torch.cat(keys, dim=2)) and cache.keys[1] is None
