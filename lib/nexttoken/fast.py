"""Opt-in speed-ups that change how a model is stored or run, never what it computes.

Nothing in the lesson needs them: ``Decoder(config)`` builds plain ``nn.Linear`` weights and
``nexttoken.generate`` runs the readable forward pass. The benchmarks in ``bench/`` apply them, and so
can you (see the appendix on CPU weight layout):

- ``lay_out_for_cpu(model)``: widening weights stored (in, out) in memory.
- ``prepare(model)``: the same model run by a leaner forward pass with a preallocated cache and,
  on CPU, oneDNN's matrix products; ``prepare(model).generate(ids, n, ...)`` gives the tokens
  ``nexttoken.generate(model, ids, n, ...)`` gives.
"""

import functools
import warnings

import torch
import torch.nn.functional as F
from torch import nn

from .generate import generate
from .model import Decoder, causal_mask, positions_from_mask


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
    """Keys and values of every layer in one buffer allocated once, as long as the context window.

    ``KVCache`` grows its buffers as the sequence grows (copying them when full); this one never
    reallocates, so a step only writes its new keys and values in place. It also remembers which
    cached positions are padding, and each row's count of real tokens, so that a one-token step needs
    neither the whole attention mask nor a cumulative sum over it. Its memory is the full window's
    from the start: n_layers * 2 * B * context_length * d_model floats (75 MB per row for GPT-2 small).
    """

    def __init__(self):
        self.length = 0
        self.kv = None  # (n_layers, 2, B, heads, context_length, head_dim), allocated at the first step
        self.key_is_token = None  # bool (B, context_length): False at a padding slot
        self.padded = False  # whether any row has padding (then attention needs a mask at every step)
        self.real_tokens = None  # int64 (B,): real tokens cached per row = the next token's position

    def __len__(self) -> int:  # how many positions are cached (what generate asks)
        return self.length


def torch_linear(module: nn.Linear, x):
    return module(x)


def onednn_linear(module: nn.Linear, x):
    """``module(x)``, computed by oneDNN's matrix product instead of the BLAS library's.

    PyTorch's x86 builds ship two matrix libraries: MKL, which ``nn.Linear`` calls, and oneDNN
    (named "mkldnn" in PyTorch). For the one-row products of a generation step oneDNN reads the
    weights faster on some CPUs than MKL reads them in its faster storage order;
    ``bench/generate_speed.py`` compares both on yours (bench/README.md has dated figures).
    Same weights, read in place: nothing is copied. The sums run in another order, so the last
    bits of the logits may differ from ``module(x)``'s, as between any two matmul kernels. The op
    has no gradient: with gradients on, this falls back to ``module(x)``.
    """
    if torch.is_grad_enabled() and module.weight.requires_grad:
        return module(x)
    return torch.ops.mkldnn._linear_pointwise(x, module.weight, module.bias, "none", [None], "")


def can_use_onednn(model: nn.Module) -> bool:
    """Whether oneDNN's linear layers apply: a float32 model on the CPU, a PyTorch built with oneDNN."""
    return (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
            and all(p.device.type == "cpu" and p.dtype == torch.float32 for p in model.parameters()))


class Prepared:
    """A ``Decoder`` run by ``fast_run``: ``generate`` has ``nexttoken.generate``'s arguments and tokens.

    It looks like a ``Decoder`` to the generation loop (``config``, ``new_cache``, ``run``), so the loop
    itself (its checks, EOS, padding, logits processors, cropping past the window) is the lesson's own
    ``nexttoken.generate``, not a copy of it: only the forward pass differs.
    """

    def __init__(self, model: Decoder, compile: bool = False, onednn: bool = False):
        self.model = model
        self.config = model.config
        self.linear = onednn_linear if onednn else torch_linear
        self.generate = functools.partial(generate, self)  # prepared.generate(ids, n, eos_token_id=...)
        # The layers' tensor work, eager or compiled. Compiled, it becomes two graphs (observed with
        # torch 2.13): one for the prompt, one for the one-token step, with dynamic shapes so that a
        # growing cache does not recompile it. A prompt of another length compiles once more.
        self.layers = torch.compile(run_layers, dynamic=True) if compile else run_layers
        self.compiled = compile

    def new_cache(self) -> StaticCache:
        return StaticCache()

    def run(self, input_ids, attention_mask=None, *, cache: StaticCache | None = None):
        return fast_run(self.model, input_ids, attention_mask, cache, self.call_layers)

    def call_layers(self, *args):
        if not self.compiled:
            return run_layers(*args, linear=self.linear)
        try:
            # nn.Linear inside the graph: the compiler picks its own matmul kernels (and with
            # torch 2.13 it cannot lower oneDNN's op when given it: observed, a LoweringException)
            return self.layers(*args, linear=torch_linear)
        except Exception as error:  # no C++ compiler, an unsupported platform...: run eagerly instead
            # (a bug of our own would fail the eager call below too, so it is not hidden)
            warnings.warn(f"torch.compile failed ({type(error).__name__}: {str(error)[:200]}); "
                          "the fast path runs eagerly (same tokens, without the compiler's gain)", stacklevel=2)
            self.compiled = False
            return run_layers(*args, linear=self.linear)


def prepare(model: Decoder, compile: bool = False, onednn: bool | None = None) -> Prepared:
    """The opt-in fast path: ``prepare(model).generate(input_ids, max_new_tokens, ...)``.

    Same arguments, same checks and the same tokens as ``nexttoken.generate(model, ...)``; the model
    and its weights are shared, not copied, and not changed (apply ``lay_out_for_cpu`` yourself if it
    helps on your machine: ``bench/generate_speed.py`` measures it). Inference only: it refuses a
    model in training mode with dropout, whose tokens would be random anyway.

    ``onednn``: run the linear layers with oneDNN's matmul (``onednn_linear``). ``None`` (the
    default) does so where it applies (a float32 model on the CPU, a PyTorch built with oneDNN),
    ``True`` requires it, ``False`` keeps ``nn.Linear``'s own (MKL on x86 CPUs, cuBLAS on CUDA).

    ``compile=True`` runs the layers through ``torch.compile`` (needs a C++ compiler on CPU): the first
    call compiles them, for minutes; where compiling fails, it warns and runs eagerly. Its floats may
    differ from the eager ones in the last bits (fused kernels), so a near-tie could pick another token:
    the eager fast path is the one tested to give the plain loop's tokens.
    """
    if not isinstance(model, Decoder):
        raise TypeError(f"model must be a nexttoken.Decoder, got {type(model).__name__}")
    config = model.config
    if config.positions != "learned" or config.n_kv_heads != config.n_heads:
        # Not yet: its one-view q, k, v split and its position lookup are GPT-2's block.
        raise ValueError(
            "nexttoken.fast.prepare runs models with learned positions and n_kv_heads == n_heads only; "
            f"this one has positions={config.positions!r}, n_kv_heads={config.n_kv_heads} "
            f"(n_heads={config.n_heads}): use nexttoken.generate(model, ...)"
        )
    if not isinstance(compile, bool):
        raise TypeError(f"compile must be True or False, got {compile!r}")
    if onednn not in (None, True, False):
        raise TypeError(f"onednn must be None, True or False, got {onednn!r}")
    if onednn and not can_use_onednn(model):
        raise ValueError("onednn=True needs a float32 model on the CPU and a PyTorch built with oneDNN "
                         f"(torch.backends.mkldnn.is_available() is {torch.backends.mkldnn.is_available()})")
    return Prepared(model, compile, can_use_onednn(model) if onednn is None else onednn)


def fast_run(model: Decoder, input_ids, attention_mask=None, cache: StaticCache | None = None, layers=None):
    """``Decoder.run`` (logits (B, T, vocab)) with fewer small operations per step.

    Arguments are already checked by ``generate``, as for ``Decoder.run``. What it saves, per step:
    the causal mask is not built for a one-token step (the new token may see every cached key), nor any
    mask at all when no row is padded; positions come from a running count, not a cumulative sum over
    the mask; the cache is written in place; queries, keys and values are split by one view.
    ``layers`` does the tensor work: ``run_layers`` (the default) or a compiled version of it.
    """
    config = model.config
    if model.training and config.dropout > 0:
        raise ValueError("the fast path is for inference: call model.eval() (dropout is active in training mode)")
    B, T = input_ids.shape
    heads, head_dim = config.n_heads, config.head_dim
    past = 0 if cache is None else cache.length
    end = past + T
    if cache is None or past == 0:  # the prompt (or a cropped window, without cache): as Decoder.run
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
            cache.kv = param.new_empty(config.n_layers, 2, B, heads, config.context_length, head_dim)
            cache.padded = padded
            cache.key_is_token = torch.ones(B, config.context_length, dtype=torch.bool, device=param.device)
            if padded:
                cache.key_is_token[:, :T] = key_is_token
            cache.real_tokens = positions[:, -1] + 1 if not padded else attention_mask.sum(-1)
        else:
            cache.real_tokens = cache.real_tokens + T
        key_is_token = cache.key_is_token[:, :end]
        cache.length = end

    # Which keys each query may see: None (every key, or causal without padding) or a bool mask.
    mask, is_causal = None, T > 1
    if padded:
        mask = key_is_token[:, None, None, :]  # (B, 1, 1, keys)
        if T > 1:
            mask = mask & causal_mask(T, past, device=input_ids.device)
        is_causal = False
    elif T > 1 and past > 0:  # several new tokens after cached ones (not a step generate takes)
        mask = causal_mask(T, past, device=input_ids.device)
        is_causal = False

    kv = None if cache is None else cache.kv
    return (layers or run_layers)(model, input_ids, positions, mask, is_causal, padded, kv, past)


def run_layers(model: Decoder, input_ids, positions, mask, is_causal: bool, padded: bool, kv, past: int,
               linear=torch_linear):
    """Embeddings, blocks, final norm, LM head: tensors only, no Python decisions on their values
    (what ``torch.compile`` can capture in one graph). ``kv``: the static cache's buffer, or None.
    ``linear(module, x)`` runs each linear layer: ``module(x)`` or ``onednn_linear``."""
    B, T = input_ids.shape
    heads, head_dim = model.config.n_heads, model.config.head_dim
    end = past + T
    x = model.token_embedding(input_ids) + model.position_embedding(positions)
    for layer, block in enumerate(model.blocks):
        attn = block.attn
        # (B, T, 3 * d_model) -> (3, B, heads, T, head_dim) in one view and one permute: q, k, v
        qkv = linear(attn.qkv, block.norm1(x)).view(B, T, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv
        if kv is not None:
            kv[layer, :, :, :, past:end] = qkv[1:]  # keys and values in one copy
            k, v = kv[layer, :, :, :, :end]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
        if padded:
            out = out.nan_to_num(0.0)  # a pad slot that sees no key gets 0, as in Decoder.run
        x = x + linear(attn.proj, out.transpose(1, 2).reshape(B, T, -1))
        x = x + mlp(block.mlp, block.norm2(x), linear)
    return linear(model.lm_head, model.final_norm(x))


def mlp(module, x, linear):
    """``MLP.forward`` with each linear layer run by ``linear``."""
    if module.kind == "swiglu":
        hidden = F.silu(linear(module.gate, x)) * linear(module.up, x)
    else:
        hidden = F.gelu(linear(module.up, x), approximate="tanh")
    return linear(module.down, hidden)
