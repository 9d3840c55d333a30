"""Opt-in speed-ups that change how a model is stored or run, never what it computes.

Nothing in the lesson needs them: ``Decoder(config)`` builds plain ``nn.Linear`` weights and
``nexttoken.generate`` runs the readable forward pass. The benchmarks in ``bench/`` apply them, and so
can you (see the appendix on CPU weight layout):

- ``lay_out_for_cpu(model)``: widening weights stored (in, out) in memory.
- ``prepare(model)``: the same model, its own blocks, run with a preallocated cache, no mask where
  none is needed and, on CPU, the faster here of oneDNN's and MKL's matrix products (timed once);
  ``prepare(model).generate(ids, n, ...)``
  gives the tokens ``nexttoken.generate(model, ids, n, ...)`` gives. ``compile=True`` compiles its
  layers, ``compile="max-autotune"`` also lets the compiler pick each matrix product's kernel (the
  fastest CPU path here), ``fixed_shapes=True`` gives every step one shape (for CUDA graphs).
"""

import copy
import functools
import hashlib
import math
import os
import platform
import sys
import time
import types
import warnings

import torch
import torch.nn.functional as F
from torch import nn

from .generate import generate
from .model import CausalSelfAttention, Decoder, causal_mask, positions_from_mask


def lay_out_for_cpu(model: nn.Module) -> nn.Module:
    """Store each widening linear layer's weight in memory as (in, out), GPT-2's own layout. Returns model.

    Generating one token multiplies a single vector by every weight matrix, so a step's time is mostly
    spent reading weights from memory, and how fast a matrix is read depends on how it is laid out.
    On CPU (MKL), a one-row matmul reads a matrix that widens (out >= in: qkv, the MLP's up projection,
    the LM head) faster stored (in, out), as GPT-2's Conv1D keeps it, and one that narrows (the MLP's
    down projection) faster as nn.Linear keeps it, (out, in). How much depends on the CPU:
    ``bench/weight_layout.py`` measures both layouts on yours (bench/README.md has dated figures).

    Values, shapes and results are unchanged: only the memory order (the strides). The new storage is
    assigned through ``.data``, so every parameter stays the same object: an optimizer holding it, and
    a tied LM head / token embedding, are not disturbed. ``load_state_dict`` copies values into this
    layout; building a new ``Decoder`` (``load_decoder``, ``load_pretrained``) gives plain weights again.
    """
    for module in model.modules():
        if isinstance(module, nn.Linear) and module.out_features >= module.in_features:
            weight = module.weight
            if not weight.t().is_contiguous():  # not laid out yet (a second call changes nothing)
                weight.data = weight.data.t().contiguous().t()
    return model


class StaticCache:
    """Keys and values of every layer in buffers allocated once, as long as the context window.

    The model's blocks write into it as into a ``KVCache``, through ``extend`` (the cache owns its
    update, as gpt-fast's ``KVCache.update`` does), but it never reallocates: a step only writes its
    new keys and values in place. It also remembers which cached positions are padding, and each row's
    count of real tokens, so that a one-token step needs neither the whole attention mask nor a
    cumulative sum over it. Its memory is the full window's from the start:
    n_layers * 2 * B * n_kv_heads * context_length * head_dim floats (75 MB per row for GPT-2 small).

    ``fixed_shapes=True``: a one-token step attends over the whole buffer, its unwritten slots masked,
    so that every step has the same shapes (what a CUDA graph replays; see ``prepare``).
    """

    def __init__(self, fixed_shapes: bool = False, kept: dict | None = None):
        self.fixed_shapes = fixed_shapes
        self.kept = kept  # buffers to reuse, by (batch, dtype, device): a CUDA graph replays fixed addresses
        self.write_at = None  # int64 (T,): the positions this forward pass writes (set by fast_run)
        self.whole_window = False  # whether this pass's attention reads every slot (fixed shapes, a step)
        self.length = 0  # positions cached before the current forward pass (every layer's start)
        self.keys = self.values = None  # per layer: (B, kv heads, context_length, head_dim), at the first step
        self.key_is_token = None  # bool (B, context_length): False at a padding slot
        self.padded = False  # whether any row has padding (then attention needs a mask at every step)
        self.real_tokens = None  # int64 (B,): real tokens cached per row = the next token's position

    def __len__(self) -> int:  # how many positions are cached (what generate asks)
        return self.length

    def allocate(self, config, batch: int, like: torch.Tensor) -> None:
        where = (batch, like.dtype, like.device)
        if self.kept is not None and where in self.kept:  # an earlier generation's: its slots are masked
            self.keys, self.values = self.kept[where]
            return
        # One buffer per layer, not one for all: a layer's write then touches its own tensor only (below).
        # With fixed shapes a step reads every slot, masked: zeros, since a NaN left in fresh memory would
        # pass through the mask (its weight is 0, but 0 * NaN is NaN).
        new = like.new_zeros if self.fixed_shapes else like.new_empty
        shape = (batch, config.n_kv_heads, config.context_length, config.head_dim)
        self.keys = [new(shape) for _ in range(config.n_layers)]
        self.values = [new(shape) for _ in range(config.n_layers)]
        if self.kept is not None:
            if like.is_cuda:  # written in place by the recorded step: the graph must own these addresses
                for buffer in self.keys + self.values:
                    torch._dynamo.mark_static_address(buffer)
            self.kept[where] = (self.keys, self.values)

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Write the new positions' keys and values (B, kv heads, T_new, head_dim) in place; return all
        of this layer's (views of the buffer, no copy).

        Written with ``index_copy_`` at the new positions, not by assigning to a slice: under
        ``torch.compile`` a slice assignment into a cache buffer became a copy of the whole buffer
        (every layer's, at every layer of every step: seen with ``TORCH_LOGS=output_code``, torch 2.13),
        which made the compiled fast path slower than the eager one; ``index_copy_`` stays in place.
        The positions are a tensor (``write_at``), not the Python int ``length``, so that with fixed
        shapes a compiled step does not depend on how long the cache is (one graph for every step)."""
        keys, values = self.keys[layer], self.values[layer]
        keys.index_copy_(2, self.write_at, k)
        values.index_copy_(2, self.write_at, v)
        if self.whole_window:  # every slot: those not written yet are masked out (fast_run's mask)
            return keys, values
        end = self.length + k.shape[2]
        return keys[:, :, :end], values[:, :, :end]


def torch_linear(module: nn.Linear, x):
    return module(x)


def onednn_linear(module: nn.Module, x):
    """``module(x)`` for a linear layer, computed by oneDNN's matrix product instead of the BLAS library's.

    PyTorch's x86 builds ship two matrix libraries: MKL, which ``nn.Linear`` calls, and oneDNN
    (named "mkldnn" in PyTorch). For the one-row products of a generation step oneDNN reads the
    weights faster on some CPUs than MKL reads them in its faster storage order;
    ``bench/generate_speed.py`` compares both on yours (bench/README.md has dated figures).
    Same weights, read in place: nothing is copied. The sums run in another order, so the last
    bits of the logits may differ from ``module(x)``'s, as between any two matmul kernels. The op
    has no gradient: with gradients on, this is ``F.linear``, what ``nn.Linear`` computes.
    Inside ``torch.compile`` it is the opaque op ``nexttoken::onednn_linear`` (below).
    """
    if torch.is_grad_enabled() and module.weight.requires_grad:
        return F.linear(x, module.weight, module.bias)
    if torch.compiler.is_compiling():
        return torch.ops.nexttoken.onednn_linear(x, module.weight, module.bias)
    return torch.ops.mkldnn._linear_pointwise(x, module.weight, module.bias, "none", [None], "")


# The compiler cannot lower oneDNN's op itself (torch 2.13 raises a LoweringException), so a compiled
# graph would fall back to nn.Linear's MKL products, the slower ones on CPU. Registered as an op of our
# own, with its output's shape for the compiler, it stays one call the graph makes, as in eager mode.
# torch.library.define and impl rather than the @custom_op decorator: the decorator adds a Python
# dispatch to every call (bench/README.md has the figures).
def _has_our_op() -> bool:  # already registered: this module imported again (importlib.reload)
    try:
        return hasattr(torch.ops.nexttoken, "onednn_linear")
    except (AttributeError, RuntimeError):
        return False


if hasattr(torch.ops.mkldnn, "_linear_pointwise") and not _has_our_op():
    torch.library.define("nexttoken::onednn_linear", "(Tensor x, Tensor weight, Tensor? bias) -> Tensor")

    @torch.library.impl("nexttoken::onednn_linear", "cpu")
    def _onednn_linear_op(x, weight, bias):
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [None], "")

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
    return (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
            and all(p.device.type == "cpu" and p.dtype == torch.float32 for p in model.parameters()))


def faster_linear(model: nn.Module, kernels, passes: int = 3):
    """The kernel (of ``kernels``, each called as ``kernel(module, x)``) that runs this model's one-row
    products fastest on this machine, timed: every linear layer once per pass, the best of ``passes``
    passes each, after one pass that warms it up. Which of oneDNN and MKL wins depends on the CPU
    (bench/README.md: oneDNN on an AMD CPU with AVX2, MKL on an Intel Xeon with AVX-512)."""
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


class Prepared:
    """A ``Decoder`` run by ``fast_run``: ``generate`` has ``nexttoken.generate``'s arguments and tokens.

    It looks like a ``Decoder`` to the generation loop (``config``, ``new_cache``, ``forward_unchecked``), so the loop
    itself (its checks, EOS, padding, logits processors, cropping past the window) is the lesson's own
    ``nexttoken.generate``, not a copy of it; and the forward pass runs the model's own blocks (through
    ``Decoder.embed``, ``Block``, ``final_norm`` and ``lm_head``): only the mask, the positions, the
    cache and the matmul kernel differ. A new kind of norm, MLP or attention in ``model.py`` is the fast
    path's too. Its ``forward_unchecked`` returns the last position's logits only, (B, 1, vocab): all
    the loop reads (``run_layers``).
    """

    def __init__(self, model: Decoder, compile: bool | str = False, onednn: bool = False, fixed_shapes: bool = False):
        self.model = model
        self.fixed_shapes = fixed_shapes
        self.kept = {}  # with fixed shapes: the cache buffers, kept between generations
        self.config = model.config
        self.linear = onednn_linear if onednn else torch_linear
        self.runner = with_onednn_linears(model) if onednn else model  # what the layers run, compiled or not
        self.generate = functools.partial(generate, self)  # prepared.generate(ids, n, eos_token_id=...)
        # Compiled, the layers become a graph per prompt length and one for the one-token step (dynamic
        # shapes, so that a growing cache does not recompile it); the compiler fuses the small operations
        # between the products (norms, residual adds, rotary turns, cache writes), and each product is
        # one call, oneDNN's where ``onednn`` (through ``nexttoken::onednn_linear``).
        # With fixed shapes only the one-token step is compiled, with static shapes and
        # mode="reduce-overhead" (on CUDA: the step recorded once as a CUDA graph and replayed, as
        # gpt-fast's decode step); the prompt, whose length varies, runs eagerly.
        # "max-autotune": the graph is given the model's nn.Linear layers, and the compiler times its own
        # C++ matrix kernels (on weights it packs once, frozen into the graph) against the libraries';
        # the one-token step's attention is one product per key/value head (one_query_attention).
        self.autotuned = compile == "max-autotune"
        if self.autotuned:
            use_autotune_cache_dir()
        self.graph_model = with_step_attention(frozen_twin(model)) if self.autotuned else self.runner
        # max-autotune: the compiler's settings, entered around each compiled call (the first compiles with them)
        self.inductor_settings = None
        if self.autotuned:
            # fixed shapes are for CUDA graphs, whose replay makes the kernel calls: cpp_wrapper, a CPU
            # setting, is left off there
            cuda_graphs = {"triton.cudagraphs": True, "cpp_wrapper": False}
            import torch._inductor.config as inductor  # the compiler's settings (imported only when used)
            # one patch object, entered at every call: torch builds a class for each new one (tens of us)
            self.inductor_settings = inductor.patch(AUTOTUNE_OPTIONS | (cuda_graphs if fixed_shapes else {}))
            # the twin is this object's alone and never changed: its guards are left out (see below)
            self.layers = torch.compile(function_of_its_own(run_layers), dynamic=not fixed_shapes,
                                        options={"guard_filter_fn": not_on_the_model})
        elif compile and fixed_shapes:
            self.layers = torch.compile(run_layers, dynamic=False, mode="reduce-overhead")
        else:
            self.layers = torch.compile(run_layers, dynamic=True) if compile else run_layers
        self.compiled = bool(compile) and compile != "ahead-of-time"
        self.ahead_of_time = compile == "ahead-of-time"
        self.packaged_step = None  # ahead of time: the step's package, loaded (or built) at the first step
        self.warmed_up = set()  # the graphs compiled so far: "the prompt", "the one-token step"

    def new_cache(self) -> StaticCache:
        # With fixed shapes the buffers are kept from one generation to the next (one window per batch
        # size): a CUDA graph replays the addresses it recorded.
        return StaticCache(self.fixed_shapes, self.kept if self.fixed_shapes else None)

    def forward_unchecked(self, input_ids, attention_mask=None, *, cache: StaticCache | None = None):
        return fast_run(self.model, input_ids, attention_mask, cache, self.call_layers)

    def call_layers(self, *args):
        cache = args[-1]
        if self.ahead_of_time:
            return self.packaged_or_eager(*args)
        if not self.compiled or (self.fixed_shapes and not (cache is not None and cache.whole_window)):
            return run_layers(self.runner, *args)
        try:
            return self.warm_up_or_call(args)
        except Exception as error:  # no C++ compiler, an unsupported platform...: run eagerly instead
            # (a bug of our own would fail the eager call below too, so it is not hidden)
            warnings.warn(f"torch.compile failed ({type(error).__name__}: {str(error)[:200]}); "
                          "the fast path runs eagerly (same tokens, without the compiler's gain)", stacklevel=2)
            self.compiled = False
            return run_layers(self.runner, *args)

    def packaged_or_eager(self, input_ids, positions, mask, cache):
        """compile="ahead-of-time": a one-token step of one unpadded row through the package (built or loaded
        at the first), everything else (the prompt, batches, padding, the window's last slot) eagerly."""
        if (input_ids.shape != (1, 1) or mask is not None or cache is None
                or cache.length + 1 >= self.config.context_length):
            return run_layers(self.runner, input_ids, positions, mask, cache)
        if self.packaged_step is None:
            try:
                self.packaged_step = load_or_build_step(self.model)
            except Exception as error:  # no C++ compiler, an export torch cannot make...: eagerly, as compile=True
                warnings.warn(f"the ahead-of-time step could not be built or loaded ({type(error).__name__}: "
                              f"{str(error)[:200]}); the fast path runs eagerly (same tokens, without the "
                              "compiler's gain)", stacklevel=2)
                self.ahead_of_time = False
                return run_layers(self.runner, input_ids, positions, mask, cache)
        keys_after = torch.empty(cache.length + 1)  # its size is the package's dynamic number of keys
        return self.packaged_step(input_ids, cache.write_at, cache.keys, cache.values, keys_after)

    def compiled_call(self, args):
        if not self.autotuned:
            return self.layers(self.graph_model, *args)
        with self.inductor_settings:
            return self.layers(self.graph_model, *args)

    def warm_up_or_call(self, args):
        """The compiled layers' call; the first call of each graph compiles it, which takes seconds to
        minutes on a CPU: one line on stderr as it starts and one when it is done, so a learner sees why."""
        graph = "the one-token step" if args[0].shape[1] == 1 else "the prompt"
        if graph in self.warmed_up:
            return self.compiled_call(args)
        wait = "minutes: the compiler times its kernels" if self.autotuned else "up to a minute or two"
        print(f"nexttoken.fast: compiling {graph}'s graph ({wait})...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        logits = self.compiled_call(args)
        self.warmed_up.add(graph)
        print(f"nexttoken.fast: {graph}'s graph compiled in {time.perf_counter() - start:.0f} s",
              file=sys.stderr, flush=True)
        return logits


def autotune_cache_dir() -> str:
    """Where ``compile="max-autotune"`` keeps what the compiler can reuse in a later run: under the user's
    cache directory (``$XDG_CACHE_HOME``, else ``~/.cache``), one folder per torch version and CPU (its
    model name and instruction-set flags, hashed), since a kernel timed faster on one CPU may not be on another
    and inductor's own key for a CPU machine names neither.

    What is reused: each matrix's autotuning timings (inductor's local autotune cache) and the compiled
    C++ kernels (its code cache), so a second run skips the benchmarking of every product's kernels (what
    that saves: bench/README.md). What is not: the compiled graph itself. Inductor's graph cache refuses a
    frozen graph that holds oneDNN-packed weights (torch 2.13: "mkldnn tensors unpickleable"), and the
    autotuned graph holds them wherever ATen's ``_linear_pointwise`` is chosen (the prompt's products):
    tracing, lowering and code generation are paid again in every process. Without the packing
    (``cpp.weight_prepack=False``) the graph cache did keep both graphs, but a second process still took
    80 s to warm up (tracing and freezing come before the cache's look-up) and every step ran 1.9x slower
    (SmolLM2, one measurement each: bench/README.md), so the packing stays."""
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
    default counts as unset. It reads the variable at every look-up: this applies to the compiles that follow
    in this process."""
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:  # torch < 2.6 kept it beside the other runtime helpers
        from torch._inductor.runtime.runtime_utils import default_cache_dir

    if os.environ.get("TORCHINDUCTOR_CACHE_DIR") in (None, default_cache_dir()):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = autotune_cache_dir()


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
    Compiled, inductor recognizes the product, softmax and product and calls its flash attention for
    the CPU on (B, kv heads, group, head_dim) queries: SmolLM2's step attention then took 0.99 ms for its
    30 layers (one profile, bench/README.md). Written before as a broadcast multiply and a sum, it became
    one loop over keys with the queries' rotary turn (cos and sin included) recomputed inside it: 3.27 ms
    (another profile). Only the autotuned twin uses it (``StepAttention``). The new token is real and
    sees itself, so a row always has a key: no NaN to clear, unlike ``fused_attention``'s padded prompt rows.
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
    autotuned twin runs (``Prepared``): the compiler sees its products and fuses what lies around them."""

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


def function_of_its_own(function):
    """A copy of ``function`` with a code object of its own. Dynamo keeps the graphs it compiles, and
    their guards, on the code object: a prepared model that compiles its own copy never has its graphs
    tried on (nor reused for) another prepared model's call."""
    return types.FunctionType(function.__code__.replace(), function.__globals__, function.__name__,
                              function.__defaults__, function.__closure__)


def root_name(source) -> str:
    while hasattr(source, "base"):  # model._modules['blocks']... -> model
        source = source.base
    return getattr(source, "local_name", "")


def not_on_the_model(guards) -> list[bool]:
    """Dynamo's guard filter for the autotuned step: keep every guard but those on the argument
    ``model`` (the frozen twin). Before each call Dynamo checks that the call still matches what the
    graph was compiled for. For SmolLM2 that was 9,524 guards for the two graphs (the prompt's and the
    step's), all but 262 on the twin (every module's type and empty hook dicts, every parameter's
    identity): about 1.1 ms of a 19 ms token (torch.profiler's "TorchDynamo Cache Lookup", on the AMD
    EPYC of bench/README.md). The twin is made by ``prepare``, seen by nothing else and never changed,
    and its weights are frozen into the graph anyway; the guards on what does change (the ids, the
    positions, the mask, the cache's buffers and length, torch's global state) stay. Measured there,
    9 interleaved rounds of 32 tokens in one process: 69.07 tokens/s against 65.20 with every guard."""
    return [root_name(guard.orig_guard.originating_source) != "model" for guard in guards]


class PackagedStep(nn.Module):
    """One generation step of the autotuned twin, as ``torch.export`` sees it: the new token (1, 1), its
    position (1,), every layer's key and value buffers (written in place at the position) and a tensor whose
    length is the number of keys after the write (a size, so that the export keeps it symbolic)."""

    def __init__(self, twin: Decoder):
        super().__init__()
        self.twin = twin

    def forward(self, input_ids, position, keys, values, keys_after):
        cache = StaticCache()
        cache.keys, cache.values, cache.write_at = keys, values, position
        cache.length = keys_after.shape[0] - 1
        return run_layers(self.twin, input_ids, position[None], None, cache)


def step_package_path(model: Decoder) -> str:
    """Where the model's packaged step is kept: in ``autotune_cache_dir()`` (one folder per torch version and
    CPU), named by a hash of the model's configuration and weights, since the package holds the weights."""
    digest = hashlib.sha256(repr(model.config).encode())
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return os.path.join(autotune_cache_dir(), "steps", digest.hexdigest()[:24] + ".pt2")


def build_step_package(model: Decoder, path: str) -> None:
    """Export the autotuned twin's one-token step and compile it with ``AUTOTUNE_OPTIONS`` into ``path``
    (AOTInductor; through a temporary name of this process's, so that neither a failed or interrupted build nor
    two processes building at once leave a broken package)."""
    config = model.config
    shape = (1, config.n_kv_heads, config.context_length, config.head_dim)
    keys = [torch.zeros(shape) for _ in range(config.n_layers)]
    values = [torch.zeros(shape) for _ in range(config.n_layers)]
    example = (torch.tensor([[0]]), torch.tensor([4]), keys, values, torch.empty(5))
    # the window's last slot is left out: there keys[:, :, :end] is the whole buffer, another graph
    keys_after = torch.export.Dim("keys_after", min=2, max=config.context_length - 1)
    shapes = {"input_ids": None, "position": None, "keys": [None] * len(keys), "values": [None] * len(values),
              "keys_after": {0: keys_after}}
    twin = with_step_attention(frozen_twin(model))
    with torch.no_grad():
        program = torch.export.export(PackagedStep(twin), example, dynamic_shapes=shapes, strict=False)
        use_autotune_cache_dir()  # the per-matrix timings the max-autotune path keeps there too
        settings = {name: value for name, value in AUTOTUNE_OPTIONS.items() if name != "cpp_wrapper"}  # C++ anyway
        os.makedirs(os.path.dirname(path), exist_ok=True)
        partial = f"{path}.{os.getpid()}.partial.pt2"
        try:
            torch._inductor.aoti_compile_and_package(program, package_path=partial, inductor_configs=settings)
            os.replace(partial, path)
        finally:
            if os.path.exists(partial):
                os.remove(partial)


def load_or_build_step(model: Decoder):
    """The model's packaged step, loaded (seconds), or built first where this machine has none (minutes)."""
    path = step_package_path(model)
    if not os.path.isfile(path):
        print(f"nexttoken.fast: building the one-token step's package, once (minutes): {path}",
              file=sys.stderr, flush=True)
        start = time.perf_counter()
        build_step_package(model, path)
        print(f"nexttoken.fast: built in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    return torch._inductor.aoti_load_package(path)


# Inductor's settings for compile="max-autotune" on a CPU: time its C++ GEMM template against ATen's
# kernels for each matrix (max_autotune, CPP and ATEN), on weights packed once into the kernel's layout,
# which needs them frozen into the graph as constants (freezing). Applied with
# torch._inductor.config.patch around the call: given to torch.compile as options=, they are not applied
# (nothing is autotuned). Two more cut the time between the products: the graph's kernels called from
# generated C++ rather than a generated Python function (cpp_wrapper), and SwiGLU's gate and up products,
# which read the same row, done as one product over both frozen matrices (cpp.enable_concat_linear, off by
# default on CPU). What each setting gains, measured: bench/README.md.
AUTOTUNE_OPTIONS = {"max_autotune": True, "max_autotune_gemm_backends": "CPP,ATEN", "freezing": True,
                    "cpp_wrapper": True, "cpp.enable_concat_linear": True}


def prepare(model: Decoder, compile: bool | str = False, onednn: bool | None = None,
            fixed_shapes: bool = False) -> Prepared:
    """The opt-in fast path: ``prepare(model).generate(input_ids, max_new_tokens, ...)``.

    Same arguments, same checks and the same tokens as ``nexttoken.generate(model, ...)``, for every
    block ``DecoderConfig`` builds (GPT-2's, and the Llama family's with rotary positions and
    grouped-query attention); the model and its weights are shared, not copied, and not changed (apply
    ``lay_out_for_cpu`` yourself if it helps on your machine: ``bench/generate_speed.py`` measures it).
    Inference only: it refuses a model in training mode with dropout, whose tokens would be random anyway.

    ``onednn``: run the linear layers with oneDNN's matmul (``onednn_linear``). ``None`` (the
    default) does so where it applies (a float32 model on the CPU, a PyTorch built with oneDNN) and
    where it is faster than ``nn.Linear``'s on this model's matrices, timed once here
    (``faster_linear``: a fraction of a second for SmolLM2), so the choice can differ between
    machines; ``True`` requires it, ``False`` keeps ``nn.Linear``'s own (MKL on x86 CPUs, cuBLAS on
    CUDA). ``prepared.linear`` says which one runs.

    ``compile=True`` runs the layers through ``torch.compile`` (needs a C++ compiler on CPU): the first call
    compiles them (a minute or two for SmolLM2 on 2 cores; a line on stderr as each graph's compile starts
    and ends); where compiling fails, it warns and runs eagerly. Its floats may differ from the eager ones
    in the last bits (fused kernels), so a near-tie could pick another token: the tests check its tokens on
    small models, the benchmark on GPT-2 and SmolLM2, where it gave the plain loop's.

    ``compile="max-autotune"`` also lets the compiler pick each product's kernel by timing its own C++
    matrix kernels against the libraries', makes a SwiGLU's gate and up products one, calls the
    graph's kernels from generated C++ (``AUTOTUNE_OPTIONS``) and writes a step's attention as one
    product per key/value head (``one_query_attention``): minutes of warm-up (about 5 for
    SmolLM2 on 2 cores), and on a CPU the fastest path here. The weights are then *frozen* into the
    compiled graph, packed into a copy of their own (the model's memory again): a change to the model's
    weights after the first call is not seen by this prepared model; prepare it again. For the same
    reason the compiler's checks on that frozen copy before each call are left out
    (``not_on_the_model``).

    ``compile="ahead-of-time"``: the max-autotune twin's one-token step exported and compiled once into a
    package on disk (AOTInductor: ``build_step_package``, minutes, the first time this machine sees these
    weights), which every later process loads in seconds (``load_or_build_step``; kept under
    ``step_package_path``); steps of one unpadded row run through it, the prompt and everything else eagerly.
    A float32 model on the CPU; weights frozen into the package as in max-autotune. Where the package cannot be
    built or loaded (no C++ compiler, say), it warns and runs eagerly, as ``compile=True`` does.

    ``fixed_shapes=True`` makes every one-token step the same shapes: its attention reads the cache's
    whole window (context_length slots), the slots not written yet masked, instead of the positions
    written so far. That is more work per step (on a CPU, much more for a long window), and what a
    CUDA graph needs: with ``compile=True`` the step is compiled once, with
    ``mode="reduce-overhead"``, which on CUDA records it as a graph and replays it (gpt-fast's recipe).
    Same tokens (tested on the CPU, eager and compiled). The cache's buffers are then kept by the
    prepared model between generations (one window per batch size), so run one generation at a time.
    """
    if not isinstance(model, Decoder):
        raise TypeError(f"model must be a nexttoken.Decoder, got {type(model).__name__}")
    if not (isinstance(compile, bool) or compile in ("max-autotune", "ahead-of-time")):
        raise TypeError(f"compile must be True, False, 'max-autotune' or 'ahead-of-time', got {compile!r}")
    if compile == "ahead-of-time" and (fixed_shapes or model.token_embedding.weight.device.type != "cpu"
                                       or model.token_embedding.weight.dtype != torch.float32):
        raise ValueError("compile='ahead-of-time' is for a float32 model on the CPU, without fixed_shapes")
    if onednn not in (None, True, False):
        raise TypeError(f"onednn must be None, True or False, got {onednn!r}")
    if not isinstance(fixed_shapes, bool):
        raise TypeError(f"fixed_shapes must be True or False, got {fixed_shapes!r}")
    if onednn and not can_use_onednn(model):
        raise ValueError("onednn=True needs a float32 model on the CPU and a PyTorch built with oneDNN "
                         f"(torch.backends.mkldnn.is_available() is {torch.backends.mkldnn.is_available()})")
    if onednn is None:  # where both apply, the faster on this machine
        onednn = can_use_onednn(model) and faster_linear(model, (onednn_linear, torch_linear)) is onednn_linear
    return Prepared(model, compile, onednn, fixed_shapes)


def fast_run(model: Decoder, input_ids, attention_mask=None, cache: StaticCache | None = None, layers=None):
    """``Decoder.forward_unchecked`` with fewer small operations per step, and the logits of the last
    position only, (B, 1, vocab): the one the generation loop reads (``run_layers``).

    Arguments are already checked by ``generate``, as for ``Decoder.forward_unchecked``. What it saves, per step:
    no mask at all for a one-token step when no row is padded (the new token may see every cached
    key); positions from a running count, not a cumulative sum over the mask; the cache written in
    place, never reallocated. ``layers(input_ids, positions, mask, cache)`` runs the model's layers
    (``run_layers`` on ``model`` by default).
    """
    config = model.config
    if model.training and config.dropout > 0:
        raise ValueError("the fast path is for inference: call model.eval() (dropout is active in training mode)")
    B, T = input_ids.shape
    past = 0 if cache is None else cache.length
    end = past + T
    if cache is None or past == 0:  # the prompt (or a cropped window, without cache): as the model's
        padded = attention_mask is not None and not bool(attention_mask.all())
        positions = (positions_from_mask(attention_mask) if padded
                     else torch.arange(T, device=input_ids.device).expand(B, T))
        key_is_token = attention_mask.bool() if padded else None
    else:  # one step of the loop: every new token is real (generate appends ones to the mask)
        padded = cache.padded
        positions = cache.real_tokens[:, None] + torch.arange(T, device=input_ids.device)
    if cache is not None:
        if past == 0:
            param = model.token_embedding.weight
            cache.allocate(config, B, param)
            cache.padded = padded
            cache.key_is_token = torch.ones(B, config.context_length, dtype=torch.bool, device=param.device)
            if padded:
                cache.key_is_token[:, :T] = key_is_token
            cache.real_tokens = positions[:, -1] + 1 if not padded else attention_mask.sum(-1)
        else:
            cache.real_tokens = cache.real_tokens + T
        key_is_token = cache.key_is_token[:, :end]
        cache.write_at = torch.arange(past, end, device=input_ids.device)
        cache.whole_window = cache.fixed_shapes and past > 0 and T == 1

    # Which keys each query may see: None (every key: one new token, no padding) or a bool mask.
    mask = None
    if cache is not None and cache.whole_window:  # every slot of the window: those written so far
        written = torch.arange(config.context_length, device=input_ids.device) < end
        mask = (cache.key_is_token & written)[:, None, None, :]  # (B, 1, 1, context_length)
        # The step's ids are a view of the growing sequence, whose stride changes every step: a copy of
        # their own keeps the step's inputs the same (a compiled graph would otherwise recompile)
        input_ids = input_ids.clone(memory_format=torch.contiguous_format)  # (clone alone keeps the stride)
    elif padded:
        mask = key_is_token[:, None, None, :]  # (B, 1, 1, keys)
        if T > 1:
            mask = mask & causal_mask(T, past, device=input_ids.device)
    elif T > 1:  # the prompt, or several new tokens after cached ones (not a step generate takes)
        mask = causal_mask(T, past, device=input_ids.device)

    if layers is None:
        layers = functools.partial(run_layers, model)
    logits = layers(input_ids, positions, mask, cache)
    if cache is not None:
        cache.length = end  # after every layer has written its keys and values at past..end - 1
    return logits


def run_layers(model: Decoder, input_ids, positions, mask, cache: StaticCache | None):
    """The model's own embeddings, blocks, final norm and LM head, on the fast path's mask and cache.

    The final norm and the LM head see the last position only, the one whose logits the loop keeps
    (transformers' ``logits_to_keep=1``): for a prompt of T tokens that is T - 1 rows of the largest
    product left out (GPT-2 small: 38.6 M multiply-adds a row). A one-token step is unchanged."""
    x, rotary = model.embed(input_ids, positions)
    for block in model.blocks:
        x, _ = block(x, mask, cache, rotary=rotary)
    return model.lm_head(model.final_norm(x[:, -1:]))
