"""nexttoken.fast.onednn: oneDNN's matmul for the linear layers, the twin that runs it, and the timing that
picks it or nn.Linear's on this machine."""

import time

import pytest
import torch
from fast_models import ONEDNN, tiny_model

import nexttoken
from nexttoken.fast import onednn, prepare


def test_the_default_kernel_is_the_faster_one_on_the_models_own_matrices(monkeypatch):
    """onednn=None times both kernels on the model's matrices (faster_linear) and takes the winner."""
    model = tiny_model(0)
    calls = []

    def slow(module, x):
        calls.append(x.shape)
        time.sleep(0.001)
        return module(x)

    quick = onednn.torch_linear
    assert onednn.faster_linear(model, (slow, quick)) is quick
    assert onednn.faster_linear(model, (quick, slow)) is quick
    n_linear = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    assert len(calls) == 2 * 4 * n_linear  # every layer, one row, in 4 passes (1 to warm up), each time
    assert all(shape[0] == 1 for shape in calls)
    for winner in (onednn.onednn_linear, onednn.torch_linear):
        monkeypatch.setattr(nexttoken.fast.prepared, "faster_linear", lambda model, kernels: winner)
        assert prepare(model).linear is (winner if ONEDNN else onednn.torch_linear)


def test_onednn_linear_equals_the_module_and_is_refused_where_it_cannot_run():
    torch.manual_seed(0)
    layer = torch.nn.Linear(16, 40)
    x = torch.randn(2, 3, 16)
    with torch.no_grad():
        assert torch.allclose(onednn.onednn_linear(layer, x), layer(x), atol=1e-6)
    assert onednn.onednn_linear(layer, x).requires_grad  # with gradients on: nn.Linear itself
    with pytest.raises(ValueError, match="onednn=True needs a float32 model on the CPU"):
        prepare(tiny_model(0).double(), onednn=True)
    assert prepare(tiny_model(0).double()).linear is onednn.torch_linear  # default: falls back
    with pytest.raises(TypeError, match="onednn must be None, True or False"):
        prepare(tiny_model(0), onednn="yes")


def test_the_compilers_view_of_the_onednn_op_is_registered_correctly():
    """torch.library.opcheck: the op's schema, its shape function for the compiler (register_fake)
    and its results agree, for a row, a prompt's rows and a layer without bias."""
    if not ONEDNN:
        pytest.skip("this PyTorch has no oneDNN linear op")
    torch.manual_seed(0)
    weight, bias = torch.randn(40, 16), torch.randn(40)
    for x, b in ((torch.randn(1, 1, 16), bias), (torch.randn(2, 5, 16), bias), (torch.randn(3, 16), None)):
        torch.library.opcheck(torch.ops.nexttoken.onednn_linear.default, (x, weight, b))
        assert torch.allclose(torch.ops.nexttoken.onednn_linear(x, weight, b),
                              torch.nn.functional.linear(x, weight, b), atol=1e-5)


def test_the_onednn_twin_shares_every_parameter_and_leaves_the_model_alone():
    model = tiny_model(2)
    before = {name: type(m) for name, m in model.named_modules()}
    twin = onednn.with_onednn_linears(model)
    assert {name: type(m) for name, m in model.named_modules()} == before  # the model is unchanged
    assert [id(p) for p in twin.parameters()] == [id(p) for p in model.parameters()]  # shared, not copied
    assert not any(isinstance(m, torch.nn.Linear) for m in twin.modules())
    assert twin.lm_head.weight is model.lm_head.weight
    tied = nexttoken.Decoder(nexttoken.DecoderConfig(vocab_size=50, context_length=8, d_model=16, n_layers=1,
                                                     n_heads=2))  # tie_embeddings=True by default
    assert onednn.with_onednn_linears(tied).lm_head.weight is tied.token_embedding.weight  # stays tied
    ids = torch.tensor([[4, 8, 15, 16]])
    with torch.no_grad():
        model.blocks[0].mlp.up.weight.mul_(2.0)  # a change to the model's weights is the twin's too
        assert torch.allclose(twin(ids), model(ids), atol=1e-5)


def test_prepare_runs_the_layers_on_the_onednn_twin_only_where_onednn_runs():
    model = tiny_model(0)
    assert prepare(model, onednn=False).run_layers.runner is model
    if ONEDNN:
        twin = prepare(model, onednn=True).run_layers.runner
        assert twin is not model and any(isinstance(m, onednn.OneDNNLinear) for m in twin.modules())
        assert not any(isinstance(m, torch.nn.Linear) for m in twin.modules())


@pytest.mark.skipif(not ONEDNN, reason="no oneDNN here")
def test_onednn_linear_runs_onednns_op_and_nn_linear_does_not():
    """How: the op each kernel dispatches (torch's dispatcher, recorded): oneDNN's linear for onednn_linear,
    an ordinary matmul for torch_linear."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    layer, x = torch.nn.Linear(16, 40), torch.randn(1, 1, 16)
    for kernel, expected in ((onednn.onednn_linear, True), (onednn.torch_linear, False)):
        seen = []
        with torch.no_grad(), Ops():
            kernel(layer, x)
        assert any("mkldnn._linear_pointwise" in op for op in seen) == expected, seen
