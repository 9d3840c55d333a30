"""nexttoken.fast.autotune: compile="max-autotune" (the compiler times its kernels per matrix, on the model's
frozen twin), its one-query attention, and the guard filter that leaves out the checks on the twin."""

import random
import warnings

import pytest
import torch
from fast_models import KERNEL_IDS, KERNELS, rope_gqa_model, tiny_model
from helpers import left_padded_batch
from hypothesis import given, settings
from hypothesis import strategies as st

import nexttoken
from nexttoken import generate
from nexttoken.fast import autotune, prepare
from nexttoken.fast.static import run_layers
from nexttoken.fast.torch_private import function_of_its_own


@pytest.mark.parametrize("onednn", KERNELS, ids=KERNEL_IDS)
def test_the_autotuned_graph_is_given_a_frozen_twin_of_linear_layers(monkeypatch, onednn):
    """The compiler picks every product's kernel, so it is given nn.Linear layers (whatever ``onednn`` says
    for the eager prompt), of a twin whose weights share the model's memory and need no gradient (what
    freezing folds in); the model itself is left alone."""
    seen = []

    def recording_compile(fn, **kwargs):
        def compiled(model, *args):
            seen.append(model)
            return fn(model, *args)
        return compiled

    monkeypatch.setattr(torch, "compile", recording_compile)
    model = tiny_model(0)
    ids = torch.tensor([[1, 2, 3]])
    autotuned = prepare(model, compile="max-autotune", onednn=onednn)
    assert autotuned.generate(ids, 4).tolist() == generate(model, ids, 4).tolist()
    twin = autotuned.run_layers.graph_model
    assert seen and all(m is twin for m in seen)
    assert any(isinstance(m, torch.nn.Linear) for m in twin.modules())
    assert all(not p.requires_grad for p in twin.parameters())
    assert [p.data_ptr() for p in twin.parameters()] == [p.data_ptr() for p in model.parameters()]
    assert all(p.requires_grad for p in model.parameters())


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(batch=st.integers(1, 3), n_kv=st.integers(1, 3), group=st.integers(1, 3), keys=st.integers(1, 9),
       head_dim=st.sampled_from([1, 4, 16]), masked=st.booleans(), logit_scale=st.sampled_from([0.0, 1.0, 30.0]),
       seed=st.integers(0, 2**16))
def test_one_query_attention_is_the_fused_calls_output(batch, n_kv, group, keys, head_dim, masked, logit_scale, seed):
    """``one_query_attention`` (the autotuned step's attention) against F.scaled_dot_product_attention,
    over the shapes a step meets: one key (the first step after a 1-token prompt) to several, batch of
    one, grouped heads (a kv head shared by 1 to 3 query heads), padded keys, all-equal to near-one-hot
    weights (logits scaled by 0 to 30)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, n_kv * group, 1, head_dim, generator=g) * logit_scale
    k, v = (torch.randn(batch, n_kv, keys, head_dim, generator=g) for _ in range(2))
    mask = None
    if masked:  # padding slots; the newest key (the token itself) is always seen
        mask = torch.rand(batch, 1, 1, keys, generator=g) > 0.4
        mask[..., -1] = True
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=group > 1)
    torch.testing.assert_close(autotune.one_query_attention(q, k, v, mask), expected, rtol=1e-4, atol=1e-5)


def test_one_query_attention_reads_each_key_head_once_for_its_group():
    """How it attends, not only what: no tensor as large as the keys copied once per query head (a
    repeat_interleave of k, or a broadcast product of q with k before the sum) is made; the largest is
    the keys' own transpose, or the scores."""
    from torch.utils._python_dispatch import TorchDispatchMode

    batch, n_kv, group, keys, head_dim = 2, 3, 4, 50, 16
    q = torch.randn(batch, n_kv * group, 1, head_dim)
    k, v = torch.randn(2, batch, n_kv, keys, head_dim)
    made = []

    class Sizes(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            made.extend(t.numel() for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor))
            return out

    with Sizes():
        autotune.one_query_attention(q, k, v)
    assert made and max(made) <= k.numel(), max(made)  # per query head it would be group * k.numel()


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_the_autotuned_twin_computes_a_steps_attention_with_one_query_attention(monkeypatch, family):
    """How the autotuned path attends (its compiler replaced here by the eager call, to see the calls):
    its twin's attention modules are StepAttention, the model's own are left as they were, every
    one-token step goes through one_query_attention and the prompt through the fused call, padded or
    not, and the tokens are the plain loop's."""
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: fn)
    calls = []
    one_query = autotune.one_query_attention

    def spy(q, k, v, mask=None):
        calls.append((q.shape[2], mask is None))
        return one_query(q, k, v, mask)
    monkeypatch.setattr(autotune, "one_query_attention", spy)
    model = tiny_model(2, n_layer=2) if family == "gpt2" else rope_gqa_model(2)
    prepared = prepare(model, compile="max-autotune", onednn=False)
    twin = prepared.run_layers.graph_model
    attention = [m for m in twin.modules() if isinstance(m, nexttoken.model.CausalSelfAttention)]
    assert len(attention) == 2 and all(type(m) is autotune.StepAttention for m in attention)
    assert all(type(block.attn) is nexttoken.model.CausalSelfAttention for block in model.blocks)
    ids = torch.tensor([[3, 1, 4, 1]])
    assert prepared.generate(ids, 5).tolist() == generate(model, ids, 5).tolist()
    assert calls == [(1, True)] * 2 * 4  # 2 layers, 4 one-token steps (the 1st token comes from the prompt)
    calls.clear()
    ids, mask = left_padded_batch(random.Random(2), 3, model.config.vocab_size, pad=model.config.vocab_size - 1)
    out = prepared.generate(ids, 5, attention_mask=mask)
    assert out.tolist() == generate(model, ids, 5, attention_mask=mask).tolist()
    assert calls == [(1, False)] * 2 * 4  # padded rows: the step's mask is passed on


def really_autotuned(model, ids, mask) -> torch.Tensor:
    """compile="max-autotune" for real, on a tiny model (the compiler times its kernels per matrix; with a
    SwiGLU MLP it also makes the gate and up products one, cpp.enable_concat_linear): its tokens, after
    checking that it ran autotuned, not eagerly, and packed each product's weights for its kernels."""
    from torch._dynamo.utils import counters

    counters.clear()
    prepared = prepare(model, compile="max-autotune")
    with warnings.catch_warnings(record=True) as seen:  # torch's own (a TypedStorage deprecation) may pass
        warnings.simplefilter("always")
        out = prepared.generate(ids, 5, attention_mask=mask)
    assert not [w for w in seen if "torch.compile failed" in str(w.message)]  # not the fallback's
    assert prepared.compiled and isinstance(prepared.run_layers, autotune.Autotuned)
    if torch.backends.mkldnn.is_available():  # the count is of the weights packed for x86 (oneDNN's layout)
        # how: the weights inductor packed for its kernels, in two graphs (the prompt's and the step's):
        # four products a layer in both families (a SwiGLU's gate and up as one), and the LM head
        packed = counters["inductor"]["mkldnn_linear_weight_pack_matcher_count"]
        assert packed == 2 * (4 * model.config.n_layers + 1)
    return out


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # torch's own import
def test_really_autotuned_it_gives_the_plain_loops_tokens():
    """A GPT-2 block autotuned for real gives the plain loop's tokens (a Llama block's are checked below, in
    the test of two models of the same shapes: each autotune costs about a minute)."""
    torch._dynamo.reset()
    model = tiny_model(6, n_layer=1)
    ids, mask = left_padded_batch(random.Random(6), 2, model.config.vocab_size, pad=model.config.vocab_size - 1)
    assert really_autotuned(model, ids, mask).tolist() == generate(model, ids, 5, attention_mask=mask).tolist()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated:UserWarning")  # torch's own, while autotuning
def test_autotuned_models_with_the_same_shapes_keep_their_own_graphs(monkeypatch):
    """The autotuned step leaves out Dynamo's guards on the frozen twin (``not_on_the_model``), among them
    each weight's identity. Two prepared models of the same shapes but different weights must still run
    their own weights: each compiles a copy of ``run_layers`` with a code object of its own, so the
    second never passes the first's (weaker) guards and runs its frozen weights. (Both are Llama blocks,
    each autotuned for real, with the plain loop's tokens.)"""
    torch._dynamo.reset()
    filtered = []  # (guards made, guards kept) per compiled graph: the filter is the one prepare applies

    def counting(guards):
        keep = not_on_the_model(guards)
        filtered.append((len(keep), sum(keep)))
        return keep
    not_on_the_model = autotune.not_on_the_model
    monkeypatch.setattr(autotune, "not_on_the_model", counting)
    first, second = rope_gqa_model(1), rope_gqa_model(2)
    ids, mask = left_padded_batch(random.Random(3), 2, first.config.vocab_size, pad=first.config.vocab_size - 1)
    for model in (first, second):
        assert really_autotuned(model, ids, mask).tolist() == generate(model, ids, 5, attention_mask=mask).tolist()
    assert len(filtered) == 4 and all(0 < kept < made / 2 for made, kept in filtered)  # prompt and step, twice
    assert not torch.equal(generate(first, ids, 5, attention_mask=mask), generate(second, ids, 5, attention_mask=mask))


@pytest.mark.slow  # about 25 s: a real torch.compile
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # torch's own import
def test_the_guard_filter_keeps_the_guards_on_what_changes_between_calls():
    """What ``not_on_the_model`` keeps, read off the guards Dynamo makes for a real (not autotuned) step."""
    entries = []

    def recording(guards):
        entries.extend(guards)
        return [True] * len(guards)
    model = rope_gqa_model(0)
    prepared = prepare(model, compile=True)
    prepared.run_layers.function = torch.compile(function_of_its_own(run_layers), dynamic=True,
                                                 options={"guard_filter_fn": recording})
    prepared.generate(torch.tensor([[1, 2, 3]]), 2)
    keep = autotune.not_on_the_model(entries)
    kept = {g.name for g, k in zip(entries, keep) if k}
    dropped = {g.name for g, k in zip(entries, keep) if not k}
    assert {"input_ids", "positions", "mask", "cache.keys[0]", "cache.values[1]", "cache.length"} <= kept
    assert "model._modules['blocks']._modules['0']._modules['attn']._modules['qkv']._parameters['weight']" in dropped
    assert all(name == "model" or name.startswith(("model.", "model[", "dict(type(model")) for name in dropped)
    assert not any(name.startswith("model") for name in kept)

