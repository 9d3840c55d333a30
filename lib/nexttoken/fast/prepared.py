"""``prepare(model)``: the model run by the fast path, with ``nexttoken.generate``'s arguments and tokens; and
``load_step_package``, the ahead-of-time path's second step (the first is ``build_step_package``)."""

import functools
import warnings

import torch

from ..generate import generate
from ..model import Decoder
from .autotune import Autotuned
from .compiled import Compiled, Eager
from .onednn import can_use_onednn, faster_linear, onednn_linear, torch_linear, with_onednn_linears
from .package import AheadOfTime, build_step_package, check_float32_cpu, loaded_step, step_package_path, weights_digest
from .static import StaticCache, uncached_inputs

class Prepared:
    """A ``Decoder`` run by the fast path: ``generate`` has ``nexttoken.generate``'s arguments and tokens.

    It looks like a ``Decoder`` to the generation loop (``config``, ``new_cache``, ``forward_unchecked``), so
    the loop itself (its checks, EOS, padding, logits processors, cropping past the window) is the lesson's
    own ``nexttoken.generate``, not a copy of it; and the forward pass runs the model's own blocks (through
    ``Decoder.embed``, ``Block``, ``final_norm`` and ``lm_head``): only the mask, the positions, the cache and
    the matmul kernel differ. A new kind of norm, MLP or attention in ``model.py`` is the fast path's too.

    ``run_layers`` is how the layers run, chosen by ``prepare``: ``Eager``, ``Compiled``, ``Autotuned`` or
    ``AheadOfTime``; ``linear`` is the matmul kernel ``prepare`` chose (``onednn_linear`` or ``torch_linear``).
    """

    def __init__(self, model: Decoder, linear, run_layers, fixed_shapes: bool = False):
        self.model = model
        self.config = model.config
        self.linear = linear
        self.run_layers = run_layers
        self.fixed_shapes = fixed_shapes
        self.kept = {}  # with fixed shapes: the cache buffers, kept between generations (one window a batch size)
        self.generate = functools.partial(generate, self)  # prepared.generate(ids, n, eos_token_id=...)

    @property
    def compiled(self) -> bool:
        """Whether the compiler's code runs the layers (False where it was not asked for, or failed)."""
        return self.run_layers.compiled

    def new_cache(self) -> StaticCache:
        return StaticCache(self.fixed_shapes, self.kept if self.fixed_shapes else None)

    def forward_unchecked(self, input_ids, attention_mask=None, *, cache: StaticCache | None = None):
        """``Decoder.forward_unchecked`` with fewer small operations per step, and the logits of the last
        position only, (B, 1, vocab): the one the generation loop reads. Arguments are already checked by
        ``generate``. What it saves, per step: no mask at all for a one-token step when no row is padded (the
        new token may see every cached key); positions from a running count, not a cumulative sum over the
        mask; the cache written in place, never reallocated (``StaticCache.take``)."""
        if self.model.training and self.config.dropout > 0:
            raise ValueError("the fast path is for inference: call model.eval() (dropout is active in training mode)")
        if cache is None:
            positions, mask = uncached_inputs(input_ids, attention_mask)
        else:
            positions, mask = cache.take(self.model, input_ids, attention_mask)
            if cache.whole_window:
                # The step's ids are a view of the growing sequence, whose stride changes every step: a copy
                # of their own keeps the step's inputs the same (a compiled graph would otherwise recompile)
                input_ids = input_ids.clone(memory_format=torch.contiguous_format)  # (clone alone keeps the stride)
        return self.run_layers(input_ids, positions, mask, cache)


def prepare(model: Decoder, compile: bool | str = False, onednn: bool | None = None,
            fixed_shapes: bool = False) -> Prepared:
    """The opt-in fast path: ``prepare(model).generate(input_ids, max_new_tokens, ...)``.

    Same arguments, same checks and the same tokens as ``nexttoken.generate(model, ...)``, for every block
    ``DecoderConfig`` builds (GPT-2's, and the Llama family's with rotary positions and grouped-query
    attention); the model and its weights are shared, not copied, and not changed (apply ``lay_out_for_cpu``
    yourself if it helps on your machine: ``bench/generate_speed.py`` measures it). Inference only: it
    refuses a model in training mode with dropout, whose tokens would be random anyway.

    ``onednn``: run the linear layers with oneDNN's matmul (``onednn_linear``). ``None`` (the default) does
    so where it applies (a float32 model on the CPU, a PyTorch built with oneDNN) and where it is faster than
    ``nn.Linear``'s on this model's matrices, timed once here (``faster_linear``: a fraction of a second for
    SmolLM2), so the choice can differ between machines; ``True`` requires it, ``False`` keeps
    ``nn.Linear``'s own (MKL on x86 CPUs, cuBLAS on CUDA). ``prepared.linear`` says which one runs.

    ``compile=True`` runs the layers through ``torch.compile`` (needs a C++ compiler on CPU): the first call
    compiles them (a minute or two for SmolLM2 on 2 cores; a line on stderr as each graph's compile starts
    and ends); where compiling fails, it warns and runs eagerly. Its floats may differ from the eager ones in
    the last bits (fused kernels), so a near-tie could pick another token: the tests check its tokens on small
    models, the benchmark on GPT-2 and SmolLM2, where it gave the plain loop's.

    ``compile="max-autotune"`` also lets the compiler pick each product's kernel by timing its own C++ matrix
    kernels against the libraries', makes a SwiGLU's gate and up products one, calls the graph's kernels from
    generated C++ (``AUTOTUNE_OPTIONS``) and writes a step's attention as one product per key/value head
    (``one_query_attention``): minutes of warm-up at the first call, in every new process, and on a CPU the
    fastest path here. The weights are then *frozen* into the compiled graph, packed into a copy of their own
    (the model's memory again): a change to the model's weights after the first call is not seen by this
    prepared model; prepare it again. For the same reason the compiler's checks on that frozen copy before
    each call are left out (``not_on_the_model``).

    ``compile="ahead-of-time"``: the max-autotune step from a package on disk, loaded here (seconds) from
    ``step_package_path(model)``, and built there first where this machine has none (``build_step_package``:
    minutes, a line on stderr as each phase starts and ends). Steps of one unpadded row run through it, the
    prompt and everything else eagerly. A float32 model on the CPU; weights frozen into the package as in
    max-autotune. Where the package cannot be built or loaded (no C++ compiler, say), it warns and runs
    eagerly, as ``compile=True`` does. To build once and load by path, as two steps of your own:
    ``build_step_package`` and ``load_step_package``.

    ``fixed_shapes=True`` makes every one-token step the same shapes: its attention reads the cache's whole
    window (context_length slots), the slots not written yet masked, instead of the positions written so far.
    That is more work per step (on a CPU, much more for a long window), and what a CUDA graph needs: with
    ``compile=True`` the step is compiled once, with ``mode="reduce-overhead"``, which on CUDA records it as a
    graph and replays it (gpt-fast's recipe). Same tokens (tested on the CPU, eager and compiled). The cache's
    buffers are then kept by the prepared model between generations (one window per batch size), so run one
    generation at a time.
    """
    check_prepare_arguments(model, compile, onednn, fixed_shapes)
    runner, linear = matmul_kernel(model, onednn)
    if compile == "ahead-of-time":
        run_layers = ahead_of_time(model, runner)
    elif compile == "max-autotune":
        run_layers = Autotuned(model, runner, fixed_shapes)
    else:
        run_layers = Compiled(model, runner, fixed_shapes) if compile else Eager(runner)
    return Prepared(model, linear, run_layers, fixed_shapes)


def load_step_package(model: Decoder, path: str | None = None, onednn: bool | None = None) -> Prepared:
    """The fast path with its one-token steps run by the package at ``path`` (default:
    ``step_package_path(model)``), which ``build_step_package(model, path)`` built: seconds. The rest is
    ``prepare(model, compile="ahead-of-time", onednn=onednn)``'s, but nothing is built here: a missing
    package, or one that holds other weights than the model's, is an error."""
    check_prepare_arguments(model, "ahead-of-time", onednn, False)
    runner, linear = matmul_kernel(model, onednn)
    step = loaded_step(model, path or step_package_path(model))
    return Prepared(model, linear, AheadOfTime(runner, step, model.config.context_length))


def ahead_of_time(model: Decoder, runner):
    """``compile="ahead-of-time"``'s layers: the package at ``step_package_path(model)`` loaded, built first
    where there is none (or one an older nexttoken built); ``Eager`` with a warning where that fails."""
    try:
        digest = weights_digest(model)
        path = step_package_path(model, digest)
        try:
            step = loaded_step(model, path, digest)
        except (FileNotFoundError, ValueError):
            step = loaded_step(model, build_step_package(model, path), digest)
    except Exception as error:  # no C++ compiler, an export torch cannot make...: eagerly, as compile=True
        warnings.warn(f"the ahead-of-time step could not be built or loaded ({type(error).__name__}: "
                      f"{str(error)[:200]}); the fast path runs eagerly (same tokens, without the "
                      "compiler's gain)", stacklevel=3)
        return Eager(runner)
    return AheadOfTime(runner, step, model.config.context_length)


def matmul_kernel(model: Decoder, onednn: bool | None):
    """(what the layers run: the model or its oneDNN twin, the kernel: ``onednn_linear`` or ``torch_linear``);
    ``onednn=None``: where both apply, the faster on this machine."""
    if onednn is None:
        onednn = can_use_onednn(model) and faster_linear(model, (onednn_linear, torch_linear)) is onednn_linear
    return (with_onednn_linears(model), onednn_linear) if onednn else (model, torch_linear)


def check_prepare_arguments(model, compile, onednn, fixed_shapes) -> None:
    if not isinstance(model, Decoder):
        raise TypeError(f"model must be a nexttoken.Decoder, got {type(model).__name__}")
    if not (isinstance(compile, bool) or compile in ("max-autotune", "ahead-of-time")):
        raise TypeError(f"compile must be True, False, 'max-autotune' or 'ahead-of-time', got {compile!r}")
    if onednn not in (None, True, False):
        raise TypeError(f"onednn must be None, True or False, got {onednn!r}")
    if not isinstance(fixed_shapes, bool):
        raise TypeError(f"fixed_shapes must be True or False, got {fixed_shapes!r}")
    if compile == "ahead-of-time":
        if fixed_shapes:
            raise ValueError("compile='ahead-of-time' is for a float32 model on the CPU, without fixed_shapes")
        check_float32_cpu(model)
    if onednn and not can_use_onednn(model):
        raise ValueError("onednn=True needs a float32 model on the CPU and a PyTorch built with oneDNN "
                         f"(torch.backends.mkldnn.is_available() is {torch.backends.mkldnn.is_available()})")
