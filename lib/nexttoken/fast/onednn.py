"""oneDNN's matrix product for the linear layers, and the timing that picks it or MKL's on this machine.

PyTorch's x86 builds ship two matrix libraries: MKL, which ``nn.Linear`` calls, and oneDNN (named "mkldnn"
in PyTorch). Which reads a one-row product's weights faster depends on the CPU, so ``prepare`` times both on
the model's own matrices (``faster_linear``) and keeps the faster; ``bench/generate_speed.py`` compares them on
yours (bench/README.md has dated figures).
"""

import copy
import time

import torch
import torch.nn.functional as F
from torch import nn

from ..model import Decoder
from .torch_private import has_onednn_matmul, onednn_matmul


def torch_linear(module: nn.Linear, x):
    return module(x)


def onednn_linear(module: nn.Module, x):
    """``module(x)`` for a linear layer, computed by oneDNN's matrix product instead of the BLAS library's.

    Same weights, read in place: nothing is copied. The sums run in another order, so the last bits of the
    logits may differ from ``module(x)``'s, as between any two matmul kernels. The op has no gradient: with
    gradients on, this is ``F.linear``, what ``nn.Linear`` computes. Inside ``torch.compile`` it is the
    opaque op ``nexttoken::onednn_linear`` (below).
    """
    if torch.is_grad_enabled() and module.weight.requires_grad:
        return F.linear(x, module.weight, module.bias)
    if torch.compiler.is_compiling():
        return torch.ops.nexttoken.onednn_linear(x, module.weight, module.bias)
    return onednn_matmul(x, module.weight, module.bias)


# The compiler cannot lower oneDNN's op itself (it raises a LoweringException), so a compiled graph would
# fall back to nn.Linear's MKL products, the slower ones where oneDNN won the timing. Registered as an op of
# our own, with its output's shape for the compiler, it stays one call the graph makes, as in eager mode.
# torch.library.define and impl rather than the @custom_op decorator: the decorator adds a Python dispatch
# to every call (bench/README.md has the figures).
def _has_our_op() -> bool:  # already registered: this module imported again (importlib.reload)
    try:
        return hasattr(torch.ops.nexttoken, "onednn_linear")
    except (AttributeError, RuntimeError):
        return False


if has_onednn_matmul() and not _has_our_op():
    torch.library.define("nexttoken::onednn_linear", "(Tensor x, Tensor weight, Tensor? bias) -> Tensor")

    @torch.library.impl("nexttoken::onednn_linear", "cpu")
    def _onednn_linear_op(x, weight, bias):
        return onednn_matmul(x, weight, bias)

    @torch.library.register_fake("nexttoken::onednn_linear")
    def _onednn_linear_shape(x, weight, bias):
        return x.new_empty((*x.shape[:-1], weight.shape[0]))


class OneDNNLinear(nn.Module):
    """An ``nn.Linear``'s weight and bias (the very same Parameter objects, not copies), multiplied by
    oneDNN's matmul (``onednn_linear``)."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.weight, self.bias = linear.weight, linear.bias

    def forward(self, x):
        return onednn_linear(self, x)


def with_onednn_linears(model: Decoder) -> Decoder:
    """A twin of ``model``: the same code (its blocks' own forward) and the same parameters, shared, not
    copied (a weight changed in one is changed in both), with every ``nn.Linear`` run by oneDNN. The
    model itself is not changed. In eval mode: the fast path is for inference."""
    twin = copy.deepcopy(model, memo={id(p): p for p in model.parameters()})
    for module in list(twin.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Linear):
                setattr(module, name, OneDNNLinear(child))
    return twin.eval()


def can_use_onednn(model: nn.Module) -> bool:
    """Whether oneDNN's linear layers apply: a float32 model on the CPU, a PyTorch built with oneDNN."""
    return has_onednn_matmul() and all(p.device.type == "cpu" and p.dtype == torch.float32
                                       for p in model.parameters())


def faster_linear(model: nn.Module, kernels, passes: int = 3):
    """The kernel (of ``kernels``, each called as ``kernel(module, x)``) that runs this model's one-row
    products fastest on this machine, timed: every linear layer once per pass, the best of ``passes``
    passes each, after one pass that warms it up."""
    layers = [m for m in model.modules() if isinstance(m, nn.Linear)]
    rows = [torch.ones(1, m.in_features, dtype=m.weight.dtype, device=m.weight.device) for m in layers]

    def best_pass(kernel):
        seconds = []
        for _ in range(passes + 1):
            start = time.perf_counter()
            for module, x in zip(layers, rows):
                kernel(module, x)
            seconds.append(time.perf_counter() - start)
        return min(seconds[1:])  # the first pass pays for first-call allocations

    with torch.no_grad():
        return min(kernels, key=best_pass)
