"""``compile="max-autotune"``: the compiler times its own C++ matrix kernels against the libraries' for each
product, on weights frozen into the graph, and writes a step's attention as one product per key/value head.

Its pieces are shared with the ahead-of-time package (``package.py``), which builds the same step once: the
compiler's settings (``AUTOTUNE_OPTIONS``), where its caches live (``autotune_cache_dir``), the frozen twin
and its attention (``frozen_twin``, ``with_step_attention``).
"""

import copy
import hashlib
import math
import os
import platform

import torch
from torch import nn

from ..model import CausalSelfAttention, Decoder
from .compiled import Compiled
from .static import run_layers
from .torch_private import (compile_with_guard_filter, function_of_its_own, guard_root, inductor_default_cache_dir,
                            inductor_settings, point_inductor_cache_at)

# Inductor's settings on a CPU: time its C++ GEMM template against ATen's kernels for each matrix
# (max_autotune, CPP and ATEN), on weights packed once into the kernel's layout, which needs them frozen into
# the graph as constants (freezing). Two more cut the time between the products: the graph's kernels called
# from generated C++ rather than a generated Python function (cpp_wrapper), and SwiGLU's gate and up products,
# which read the same row, done as one product over both frozen matrices (cpp.enable_concat_linear, off by
# default on CPU). What each setting gains: bench/README.md.
AUTOTUNE_OPTIONS = {"max_autotune": True, "max_autotune_gemm_backends": "CPP,ATEN", "freezing": True,
                    "cpp_wrapper": True, "cpp.enable_concat_linear": True}


class Autotuned(Compiled):
    """``compile="max-autotune"``: ``Compiled``'s warm-up and fallback, on the model's frozen twin
    (``frozen_twin``: the weights' memory shared, frozen into the graph), its step's attention made
    ``one_query_attention``, with ``AUTOTUNE_OPTIONS`` applied around every call.

    The twin is this object's alone and never changed, so Dynamo's guards on it are left out
    (``not_on_the_model``), and the compiled function is a copy of ``run_layers`` of its own
    (``function_of_its_own``), so that another prepared model of the same shapes never passes those weaker
    guards with its own weights. With fixed shapes (CUDA graphs, whose replay makes the kernel calls)
    ``cpp_wrapper``, a CPU setting, is left off."""

    wait = "minutes: the compiler times its kernels"

    def compile(self, model, runner, fixed_shapes: bool):
        use_autotune_cache_dir()
        cuda_graphs = {"triton.cudagraphs": True, "cpp_wrapper": False} if fixed_shapes else {}
        settings = inductor_settings(AUTOTUNE_OPTIONS | cuda_graphs)
        function = compile_with_guard_filter(function_of_its_own(run_layers), dynamic=not fixed_shapes,
                                             guard_filter=not_on_the_model)

        def with_settings(*args):  # the first call compiles with them
            with settings:
                return function(*args)
        return with_step_attention(frozen_twin(model)), with_settings


def frozen_twin(model: Decoder) -> Decoder:
    """The same code and weights (their memory shared, not copied) as parameters that need no gradient:
    inductor's freezing folds those into the graph as constants, and leaves alone the ones that need one
    (then no kernel is autotuned: it autotunes the products of frozen weights only)."""
    memo = {id(p): nn.Parameter(p.detach(), requires_grad=False) for p in model.parameters()}
    return copy.deepcopy(model, memo=memo).eval()


def one_query_attention(q, k, v, mask=None):
    """Attention for one new token per row (a generation step): ``F.scaled_dot_product_attention``'s
    output, its grouped query heads made the rows of one product per key/value head.

    q: (B, heads, 1, head_dim); k, v: (B, kv heads, keys, head_dim), each kv head serving a group of
    heads / kv heads query heads (grouped-query attention; one head each for GPT-2); mask: None or bool
    (B, 1, 1, keys), True where the token may look. A kv head's group of queries are the rows of one
    product with its keys, so each key and value is read once per kv head, not once per query head.
    Compiled, inductor recognizes the product, softmax and product and calls its flash attention for the
    CPU on (B, kv heads, group, head_dim) queries; written as a broadcast multiply and a sum, it became a
    loop over keys that recomputed the queries' rotary turn inside it (bench/README.md has both profiles).
    The new token is real and sees itself, so a row always has a key: no NaN to clear, unlike
    ``fused_attention``'s padded prompt rows.
    """
    B, H, _, D = q.shape
    n_kv = k.shape[1]
    q = q.reshape(B, n_kv, H // n_kv, D)  # a kv head's group of query heads: the rows of one product
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (B, kv heads, group, keys)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # (B, 1, 1, keys) broadcasts over heads
    weights = torch.softmax(scores, dim=-1)
    return (weights @ v).reshape(B, H, 1, D)  # (B, kv heads, group, head_dim) -> (B, heads, 1, head_dim)


class StepAttention(CausalSelfAttention):
    """The model's attention, with a one-token step's computed by ``one_query_attention``: what the
    autotuned twin runs: the compiler sees its products and fuses what lies around them."""

    def fused_attention(self, q, k, v, mask):
        if q.shape[2] == 1 and not self.training:
            return one_query_attention(q, k, v, mask)
        return super().fused_attention(q, k, v, mask)


def with_step_attention(twin: Decoder) -> Decoder:
    """``twin`` (a copy of the model's, never the model itself), its attention modules made
    ``StepAttention`` in place: the same weights and code but for that one call. Returns twin."""
    for module in twin.modules():
        if type(module) is CausalSelfAttention:
            module.__class__ = StepAttention
    return twin


def not_on_the_model(guards) -> list[bool]:
    """Dynamo's guard filter for the autotuned step: keep every guard but those on the argument ``model``
    (the frozen twin). Before each call Dynamo checks that the call still matches what the graph was
    compiled for; nearly all of a step's guards are on the twin (every module's type and empty hook dicts,
    every parameter's identity), and checking them took a noticeable part of a step (bench/README.md). The
    twin is made by ``prepare``, seen by nothing else and never changed, and its weights are frozen into the
    graph anyway; the guards on what does change (the ids, the positions, the mask, the cache's buffers and
    length, torch's global state) stay."""
    return [guard_root(guard) != "model" for guard in guards]


def autotune_cache_dir() -> str:
    """Where the autotuned path keeps what the compiler can reuse in a later run: under the user's cache
    directory (``$XDG_CACHE_HOME``, else ``~/.cache``), one folder per torch version and CPU (its model name
    and instruction-set flags, hashed), since a kernel timed faster on one CPU may not be on another and
    inductor's own key for a CPU machine names neither.

    What is reused: each matrix's autotuning timings (inductor's local autotune cache) and the compiled C++
    kernels (its code cache), so a second run skips the benchmarking of every product's kernels. What is
    not: the compiled graph itself. Inductor's graph cache refuses a frozen graph that holds oneDNN-packed
    weights ("mkldnn tensors unpickleable"), and the autotuned graph holds them wherever ATen's oneDNN
    product is chosen; turning the packing off let the cache keep the graphs but made every step slower
    (bench/README.md), so the packing stays, and the ahead-of-time package is the way to skip the warm-up."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith(("model name", "flags")):
                    cpu += line
                if line.startswith("flags"):
                    break
    except OSError:
        pass
    key = hashlib.sha256(cpu.encode()).hexdigest()[:12]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "nexttoken", "inductor", f"torch-{torch.__version__}-cpu-{key}")


def use_autotune_cache_dir() -> None:
    """Point inductor's cache at ``autotune_cache_dir()``, unless ``TORCHINDUCTOR_CACHE_DIR`` names another
    place than inductor's default (then that place is kept: set it yourself to choose one). Inductor writes
    its default into the variable the first time it looks (importing transformers' models does), so the
    default counts as unset."""
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR") in (None, inductor_default_cache_dir()):
        point_inductor_cache_at(autotune_cache_dir())
