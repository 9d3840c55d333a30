"""nexttoken.fast.prepare: the fast path gives the plain loop's tokens (no timing here: see bench/)."""

import os
import random
import re
import time
import warnings
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers import left_padded_batch, random_hf_gpt2

import nexttoken
from nexttoken import generate
from nexttoken.fast import prepare


def tiny_model(seed, **shape):
    return nexttoken.from_hf_gpt2(random_hf_gpt2(seed, **shape))


ONEDNN = nexttoken.fast.can_use_onednn(tiny_model(0))  # x86 CPU builds of PyTorch: yes
KERNELS = [None, pytest.param(True, marks=pytest.mark.skipif(not ONEDNN, reason="no oneDNN here")), False]


@pytest.mark.parametrize("onednn", KERNELS, ids=["default", "onednn", "torch-matmul"])
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


def test_the_default_kernel_is_the_faster_one_on_the_models_own_matrices(monkeypatch):
    """onednn=None times both kernels on the model's matrices (faster_linear) and takes the winner."""
    model = tiny_model(0)
    calls = []

    def slow(module, x):
        calls.append(x.shape)
        time.sleep(0.001)
        return module(x)

    quick = nexttoken.fast.torch_linear
    assert nexttoken.fast.faster_linear(model, (slow, quick)) is quick
    assert nexttoken.fast.faster_linear(model, (quick, slow)) is quick
    n_linear = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    assert len(calls) == 2 * 4 * n_linear  # every layer, one row, in 4 passes (1 to warm up), each time
    assert all(shape[0] == 1 for shape in calls)
    for winner in (nexttoken.fast.onednn_linear, nexttoken.fast.torch_linear):
        monkeypatch.setattr(nexttoken.fast, "faster_linear", lambda model, kernels: winner)
        assert prepare(model).linear is (winner if ONEDNN else nexttoken.fast.torch_linear)


def test_onednn_linear_equals_the_module_and_is_refused_where_it_cannot_run():
    torch.manual_seed(0)
    layer = torch.nn.Linear(16, 40)
    x = torch.randn(2, 3, 16)
    with torch.no_grad():
        assert torch.allclose(nexttoken.fast.onednn_linear(layer, x), layer(x), atol=1e-6)
    assert nexttoken.fast.onednn_linear(layer, x).requires_grad  # with gradients on: nn.Linear itself
    with pytest.raises(ValueError, match="onednn=True needs a float32 model on the CPU"):
        prepare(tiny_model(0).double(), onednn=True)
    assert prepare(tiny_model(0).double()).linear is nexttoken.fast.torch_linear  # default: falls back
    with pytest.raises(TypeError, match="onednn must be None, True or False"):
        prepare(tiny_model(0), onednn="yes")


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


def test_rmsnorm_swiglu_untied_model():
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


def test_bad_arguments_are_refused_with_the_loops_messages():
    model = tiny_model(0)
    with pytest.raises(TypeError, match="nexttoken.Decoder"):
        prepare("gpt2")
    with pytest.raises(ValueError, match="max_new_tokens"):
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


def test_a_failing_compiler_falls_back_to_eager_with_a_warning(monkeypatch):
    """A compiler that fails stands in for a machine without one (the real compile: the slow test below)."""
    def broken_compile(fn, **kwargs):
        def compiled(*args, **kwargs):
            raise RuntimeError("no C++ compiler found")
        return compiled

    monkeypatch.setattr(torch, "compile", broken_compile)
    model = tiny_model(1)
    ids = torch.tensor([[7, 3, 9]])
    prepared = prepare(model, compile=True)
    with pytest.warns(UserWarning, match="torch.compile failed .*no C\\+\\+ compiler found.*runs eagerly"):
        out = prepared.generate(ids, 6)
    assert out.tolist() == generate(model, ids, 6).tolist()
    assert not prepared.compiled


def test_compile_must_be_a_bool():
    with pytest.raises(TypeError, match="compile must be True, False, 'max-autotune' or 'ahead-of-time'"):
        prepare(tiny_model(0), compile="yes")


@pytest.mark.parametrize("onednn", KERNELS, ids=["default", "onednn", "torch-matmul"])
def test_a_compiled_graph_runs_the_same_layers_as_the_eager_path(monkeypatch, onednn):
    """The compiled layers are given what the eager path runs: the oneDNN twin where oneDNN applies
    (its products are then the opaque op nexttoken::onednn_linear), the model itself otherwise."""
    seen = []

    def recording_compile(fn, **kwargs):
        def compiled(model, *args):
            seen.append(model)
            return fn(model, *args)
        return compiled

    monkeypatch.setattr(torch, "compile", recording_compile)
    model = tiny_model(0)
    ids = torch.tensor([[1, 2, 3]])
    prepared = prepare(model, compile=True, onednn=onednn)
    assert prepared.generate(ids, 4).tolist() == generate(model, ids, 4).tolist()
    assert seen and all(m is prepared.runner for m in seen)
    uses_onednn = prepared.linear is nexttoken.fast.onednn_linear
    if onednn is not None:  # forced; None: the timed choice, either one
        assert uses_onednn == onednn
    assert (prepared.runner is model) != uses_onednn
    seen.clear()  # max-autotune: the compiler picks every product's kernel, so it is given nn.Linear layers,
    # of a twin whose weights share the model's memory and need no gradient (what freezing folds in)
    autotuned = prepare(model, compile="max-autotune", onednn=onednn)
    assert autotuned.generate(ids, 4).tolist() == generate(model, ids, 4).tolist()
    twin = autotuned.graph_model
    assert seen and all(m is twin for m in seen)
    assert any(isinstance(m, torch.nn.Linear) for m in twin.modules())
    assert all(not p.requires_grad for p in twin.parameters())
    assert [p.data_ptr() for p in twin.parameters()] == [p.data_ptr() for p in model.parameters()]
    assert all(p.requires_grad for p in model.parameters())  # the model itself is left alone


def test_the_compilers_view_of_the_onednn_op_is_registered_correctly():
    """torch.library.opcheck: the op's schema, its shape function for the compiler (register_fake)
    and its results agree, for a row, a prompt's rows and a layer without bias."""
    if not nexttoken.fast.can_use_onednn(tiny_model(0)):
        pytest.skip("this PyTorch has no oneDNN linear op")
    torch.manual_seed(0)
    weight, bias = torch.randn(40, 16), torch.randn(40)
    for x, b in ((torch.randn(1, 1, 16), bias), (torch.randn(2, 5, 16), bias), (torch.randn(3, 16), None)):
        torch.library.opcheck(torch.ops.nexttoken.onednn_linear.default, (x, weight, b))
        assert torch.allclose(torch.ops.nexttoken.onednn_linear(x, weight, b),
                              torch.nn.functional.linear(x, weight, b), atol=1e-5)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # torch's own import
@pytest.mark.parametrize("fixed_shapes", [False, True], ids=["growing", "fixed"])
def test_really_compiled_it_gives_the_plain_loops_tokens_without_falling_back(fixed_shapes):
    """A real torch.compile (seconds to a minute on 2 cores): the prompt's graph and the step's, or with
    fixed shapes the step's alone (mode="reduce-overhead"), the cache written in place by index_copy_,
    oneDNN as the opaque op; no fallback warning."""
    torch._dynamo.reset()
    model = tiny_model(3, n_layer=2)
    ids, mask = left_padded_batch(random.Random(3), 2, 61, pad=60)
    prepared = prepare(model, compile=True, fixed_shapes=fixed_shapes)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the fallback's warning would fail the test
        out = prepared.generate(ids, 6, attention_mask=mask)
    assert prepared.compiled
    assert out.tolist() == generate(model, ids, 6, attention_mask=mask).tolist()


def test_the_onednn_twin_shares_every_parameter_and_leaves_the_model_alone():
    model = tiny_model(2)
    before = {name: type(m) for name, m in model.named_modules()}
    twin = nexttoken.fast.with_onednn_linears(model)
    assert {name: type(m) for name, m in model.named_modules()} == before  # the model is unchanged
    assert [id(p) for p in twin.parameters()] == [id(p) for p in model.parameters()]  # shared, not copied
    assert not any(isinstance(m, torch.nn.Linear) for m in twin.modules())
    assert twin.lm_head.weight is model.lm_head.weight
    tied = nexttoken.Decoder(nexttoken.DecoderConfig(vocab_size=50, context_length=8, d_model=16, n_layers=1,
                                                     n_heads=2))  # tie_embeddings=True by default
    assert nexttoken.fast.with_onednn_linears(tied).lm_head.weight is tied.token_embedding.weight  # stays tied
    ids = torch.tensor([[4, 8, 15, 16]])
    with torch.no_grad():
        model.blocks[0].mlp.up.weight.mul_(2.0)  # a change to the model's weights is the twin's too
        assert torch.allclose(twin(ids), model(ids), atol=1e-5)


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
    torch.testing.assert_close(nexttoken.fast.one_query_attention(q, k, v, mask), expected, rtol=1e-4, atol=1e-5)


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
        nexttoken.fast.one_query_attention(q, k, v)
    assert made and max(made) <= k.numel(), max(made)  # per query head it would be group * k.numel()


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_the_autotuned_twin_computes_a_steps_attention_with_one_query_attention(monkeypatch, family):
    """How the autotuned path attends (its compiler replaced here by the eager call, to see the calls):
    its twin's attention modules are StepAttention, the model's own are left as they were, every
    one-token step goes through one_query_attention and the prompt through the fused call, padded or
    not, and the tokens are the plain loop's."""
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: fn)
    calls = []
    one_query = nexttoken.fast.one_query_attention

    def spy(q, k, v, mask=None):
        calls.append((q.shape[2], mask is None))
        return one_query(q, k, v, mask)
    monkeypatch.setattr(nexttoken.fast, "one_query_attention", spy)
    model = tiny_model(2, n_layer=2) if family == "gpt2" else rope_gqa_model(2)
    prepared = prepare(model, compile="max-autotune", onednn=False)
    attention = [m for m in prepared.graph_model.modules() if isinstance(m, nexttoken.model.CausalSelfAttention)]
    assert len(attention) == 2 and all(type(m) is nexttoken.fast.StepAttention for m in attention)
    assert all(type(block.attn) is nexttoken.model.CausalSelfAttention for block in model.blocks)
    ids = torch.tensor([[3, 1, 4, 1]])
    assert prepared.generate(ids, 5).tolist() == generate(model, ids, 5).tolist()
    assert calls == [(1, True)] * 2 * 4  # 2 layers, 4 one-token steps (the 1st token comes from the prompt)
    calls.clear()
    ids, mask = left_padded_batch(random.Random(2), 3, model.config.vocab_size, pad=model.config.vocab_size - 1)
    out = prepared.generate(ids, 5, attention_mask=mask)
    assert out.tolist() == generate(model, ids, 5, attention_mask=mask).tolist()
    assert calls == [(1, False)] * 2 * 4  # padded rows: the step's mask is passed on


# --- fixed shapes: every one-token step attends over the whole window, masked (what a CUDA graph needs)

def rope_gqa_model(seed=0):
    torch.manual_seed(seed)
    config = nexttoken.DecoderConfig(vocab_size=50, context_length=20, d_model=32, n_layers=2, n_heads=4,
                                     n_kv_heads=2, norm="rmsnorm", mlp="swiglu", bias=False, positions="rope",
                                     tie_embeddings=False)
    model = nexttoken.Decoder(config).eval()
    for p in model.parameters():
        p.data.normal_(0, 0.3)
    return model


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
    with pytest.raises(TypeError, match="fixed_shapes must be True or False"):
        prepare(model, fixed_shapes=1)


def counting_compile(counter):
    """torch.compile with dynamo's CompileCounter as the backend (no C++ compiler, seconds): it counts
    the graphs compiled, and runs each as traced."""
    real = torch.compile

    def compile_(fn, **kwargs):
        kwargs.pop("mode", None)  # a backend and a mode (or inductor's options) are exclusive
        kwargs.pop("options", None)
        return real(fn, backend=counter, **kwargs)
    return compile_


@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # torch's own import
@pytest.mark.parametrize("fixed_shapes", [False, True], ids=["growing", "fixed"])
@pytest.mark.parametrize("compile", [True, "max-autotune"])
def test_a_compiled_step_is_compiled_once_not_once_per_length(monkeypatch, capsys, fixed_shapes, compile):
    """Dynamic shapes (the default): one graph for the prompt, one for every step; fixed shapes: one
    graph, the step's (the prompt runs eagerly), also for a second generation on the kept buffers.
    Each graph's warm-up says so on stderr as it starts and when it is done (a line a phase)."""
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    counter = CompileCounter()
    monkeypatch.setattr(torch, "compile", counting_compile(counter))
    model = tiny_model(5, n_positions=32)
    fast = prepare(model, compile=compile, onednn=False, fixed_shapes=fixed_shapes)
    ids = torch.tensor([[7, 3, 9, 1]])
    assert fast.generate(ids, 10).tolist() == generate(model, ids, 10).tolist()
    assert fast.compiled
    assert counter.frame_count == (1 if fixed_shapes else 2)
    graphs = ["the one-token step"] if fixed_shapes else ["the prompt", "the one-token step"]
    lines = capsys.readouterr().err.splitlines()
    assert [line.split("'s graph")[0] for line in lines] == [f"nexttoken.fast: {verb}{g}" for g in graphs
                                                            for verb in ("compiling ", "")]
    assert all(re.search(r"compiled in \d+ s$", line) for line in lines[1::2])
    if fixed_shapes:
        other = torch.tensor([[2, 8, 1, 8, 2, 8]])  # another prompt length, the same step shapes
        assert fast.generate(other, 6).tolist() == generate(model, other, 6).tolist()
        assert counter.frame_count == 1


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # torch's own import
@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_really_autotuned_it_gives_the_plain_loops_tokens(family):
    """compile="max-autotune" for real, on a tiny model (the compiler times its kernels per matrix; with
    a SwiGLU MLP it also makes the gate and up products one, cpp.enable_concat_linear)."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model = tiny_model(6, n_layer=1) if family == "gpt2" else rope_gqa_model(6)
    ids, mask = left_padded_batch(random.Random(6), 2, model.config.vocab_size, pad=model.config.vocab_size - 1)
    prepared = prepare(model, compile="max-autotune")
    with warnings.catch_warnings(record=True) as seen:  # torch's own (a TypedStorage deprecation) may pass
        warnings.simplefilter("always")
        out = prepared.generate(ids, 5, attention_mask=mask)
    assert not [w for w in seen if "torch.compile failed" in str(w.message)]  # not the fallback's
    assert prepared.compiled and prepared.autotuned
    assert out.tolist() == generate(model, ids, 5, attention_mask=mask).tolist()
    if not torch.backends.mkldnn.is_available():
        return  # the count below is of the weights packed for x86 (oneDNN's layout)
    # how: the weights inductor packed for its kernels, in two graphs (the prompt's and the step's): four
    # products a layer in both families (a SwiGLU's gate and up as one), and the LM head
    packed = counters["inductor"]["mkldnn_linear_weight_pack_matcher_count"]
    assert packed == 2 * (4 * model.config.n_layers + 1)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated:UserWarning")  # torch's own, while autotuning
def test_autotuned_models_with_the_same_shapes_keep_their_own_graphs(monkeypatch):
    """The autotuned step leaves out Dynamo's guards on the frozen twin (``not_on_the_model``), among them
    each weight's identity. Two prepared models of the same shapes but different weights must still run
    their own weights: each compiles a copy of ``run_layers`` with a code object of its own, so the
    second never passes the first's (weaker) guards and runs its frozen weights."""
    torch._dynamo.reset()
    filtered = []  # (guards made, guards kept) per compiled graph: the filter is the one prepare applies

    def counting(guards):
        keep = not_on_the_model(guards)
        filtered.append((len(keep), sum(keep)))
        return keep
    not_on_the_model = nexttoken.fast.not_on_the_model
    monkeypatch.setattr(nexttoken.fast, "not_on_the_model", counting)
    first, second = rope_gqa_model(1), rope_gqa_model(2)
    ids, mask = left_padded_batch(random.Random(3), 2, first.config.vocab_size, pad=first.config.vocab_size - 1)
    for model in (first, second):
        out = prepare(model, compile="max-autotune").generate(ids, 5, attention_mask=mask)
        assert out.tolist() == generate(model, ids, 5, attention_mask=mask).tolist()
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
    prepared.layers = torch.compile(nexttoken.fast.function_of_its_own(nexttoken.fast.run_layers), dynamic=True,
                                    options={"guard_filter_fn": recording})
    prepared.generate(torch.tensor([[1, 2, 3]]), 2)
    keep = nexttoken.fast.not_on_the_model(entries)
    kept = {g.name for g, k in zip(entries, keep) if k}
    dropped = {g.name for g, k in zip(entries, keep) if not k}
    assert {"input_ids", "positions", "mask", "cache.keys[0]", "cache.values[1]", "cache.length"} <= kept
    assert "model._modules['blocks']._modules['0']._modules['attn']._modules['qkv']._parameters['weight']" in dropped
    assert all(name == "model" or name.startswith(("model.", "model[", "dict(type(model")) for name in dropped)
    assert not any(name.startswith("model") for name in kept)


AHEAD_SCRIPT = """
import sys, torch, nexttoken
from nexttoken.fast import prepare
sys.path[:0] = [{tests!r}, {helpers!r}]
from test_fast import rope_gqa_model
model = rope_gqa_model()
ids = torch.tensor([[3, 1, 4, 1]])
out = prepare(model, compile="ahead-of-time", onednn=False).generate(ids, 12)
print(out.tolist() == nexttoken.generate(model, ids, 12).tolist())
"""


@pytest.mark.slow  # 40-60 s: an export and an AOTInductor build, then a second process
def test_ahead_of_time_builds_the_step_once_and_a_new_process_loads_it(tmp_path, monkeypatch):
    """compile="ahead-of-time": the plain loop's tokens (a prompt, steps through the package, a batch and
    padding eagerly, cropping past the window); the package is kept under the user's cache directory and a
    second process loads it without building."""
    import subprocess
    import sys

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    model = rope_gqa_model()
    prepared = prepare(model, compile="ahead-of-time", onednn=False)
    ids = torch.tensor([[3, 1, 4, 1]])
    window = model.config.context_length
    for new in (0, 1, 12, window):  # window: past the context, cropped
        assert torch.equal(prepared.generate(ids, new), generate(model, ids, new)), new
    ids, mask = left_padded_batch(random.Random(1), 2, model.config.vocab_size, pad=0)
    assert torch.equal(prepared.generate(ids, 6, attention_mask=mask), generate(model, ids, 6, attention_mask=mask))
    assert len(list(tmp_path.rglob("*.pt2"))) == 1
    script = AHEAD_SCRIPT.format(tests=str(Path(__file__).parent), helpers=str(Path(__file__).parents[1]))
    second = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)})
    assert second.stdout.strip() == "True", second.stderr[-2000:]
    assert "building" not in second.stderr  # loaded, not built again


def test_ahead_of_time_packages_are_named_by_the_weights_and_refuse_what_they_cannot_run():
    model = rope_gqa_model()
    name = nexttoken.fast.step_package_path(model)
    assert name == nexttoken.fast.step_package_path(rope_gqa_model())  # the same weights, the same package
    with torch.no_grad():
        model.blocks[0].attn.proj.weight[0, 0] += 1e-3
    assert nexttoken.fast.step_package_path(model) != name  # a package holds its weights: another one
    with pytest.raises(ValueError, match="float32 model on the CPU, without fixed_shapes"):
        prepare(model, compile="ahead-of-time", fixed_shapes=True)
    with pytest.raises(ValueError, match="float32 model on the CPU"):
        prepare(model.to(torch.bfloat16), compile="ahead-of-time")


def test_ahead_of_time_warns_and_runs_eagerly_where_the_build_fails_leaving_no_package(tmp_path, monkeypatch):
    """A build that fails halfway (here the compiler writes part of the file, then raises, as a missing C++
    compiler would) leaves nothing under the cache folder, and generation goes on eagerly with the same tokens."""
    def half_a_build(program, package_path, inductor_configs):
        Path(package_path).write_bytes(b"half a package")
        raise RuntimeError("no C++ compiler found")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", half_a_build)
    model = rope_gqa_model()
    prepared = prepare(model, compile="ahead-of-time", onednn=False)
    ids = torch.tensor([[3, 1, 4, 1]])
    with pytest.warns(UserWarning, match="could not be built or loaded .*no C\\+\\+ compiler found.* runs eagerly"):
        out = prepared.generate(ids, 5)
    assert torch.equal(out, generate(model, ids, 5))
    assert not prepared.ahead_of_time  # not tried again at every step
    assert [p.name for p in tmp_path.rglob("*") if p.is_file() and "steps" in p.parts] == []
