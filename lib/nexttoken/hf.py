"""Interop with Hugging Face transformers: copy a GPT-2 or a Llama into a ``Decoder``, or load real GPT-2 weights;
and the one Llama conversion that both ``from_hf_llama`` and SmolLM2's GGUF reader (``smollm2.py``) use."""

import torch
from torch import nn

from .model import Decoder, DecoderConfig


def config_from_hf_gpt2(hf_config) -> DecoderConfig:
    """The ``DecoderConfig`` of a transformers ``GPT2Config`` (refusing options we do not model)."""
    if hf_config.activation_function not in ("gelu_new", "gelu_pytorch_tanh"):
        raise ValueError(
            f"hf_model uses activation_function={hf_config.activation_function!r}; "
            "nexttoken's GPT-2 block uses tanh-GELU ('gelu_new')"
        )
    unsupported = {
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
    }
    for name, expected in unsupported.items():
        if getattr(hf_config, name, expected) != expected:
            raise ValueError(f"hf_model has {name}={getattr(hf_config, name)!r}; only {expected} is supported")
    return DecoderConfig(
        vocab_size=hf_config.vocab_size,
        context_length=hf_config.n_positions,
        d_model=hf_config.n_embd,
        n_layers=hf_config.n_layer,
        n_heads=hf_config.n_head,
        norm="layernorm",
        mlp="gelu",
        bias=True,
        tie_embeddings=bool(getattr(hf_config, "tie_word_embeddings", True)),
        dropout=0.0,
        norm_eps=hf_config.layer_norm_epsilon,
    )


@torch.no_grad()
def from_hf_gpt2(hf_model) -> Decoder:
    """A ``Decoder`` holding a copy of a transformers ``GPT2LMHeadModel``'s weights, in eval mode.

    GPT-2 stores its linear layers as ``Conv1D`` with weights of shape (in, out); ``nn.Linear``
    wants (out, in), hence the transposes.
    """
    if not hasattr(hf_model, "transformer") or not hasattr(hf_model, "lm_head"):
        raise TypeError(f"hf_model must be a transformers GPT2LMHeadModel, got {type(hf_model).__name__}")
    model = Decoder(config_from_hf_gpt2(hf_model.config))
    hf = hf_model.transformer
    model.token_embedding.weight.copy_(hf.wte.weight)
    model.position_embedding.weight.copy_(hf.wpe.weight)
    for block, hf_block in zip(model.blocks, hf.h):
        pairs = [
            (block.norm1, hf_block.ln_1, False),
            (block.attn.qkv, hf_block.attn.c_attn, True),
            (block.attn.proj, hf_block.attn.c_proj, True),
            (block.norm2, hf_block.ln_2, False),
            (block.mlp.up, hf_block.mlp.c_fc, True),
            (block.mlp.down, hf_block.mlp.c_proj, True),
        ]
        for ours, theirs, is_conv1d in pairs:
            ours.weight.copy_(theirs.weight.T if is_conv1d else theirs.weight)
            ours.bias.copy_(theirs.bias)
    model.final_norm.weight.copy_(hf.ln_f.weight)
    model.final_norm.bias.copy_(hf.ln_f.bias)
    if not model.config.tie_embeddings:
        model.lm_head.weight.copy_(hf_model.lm_head.weight)
    return model.to(hf.wte.weight.device).eval()


def load_gpt2(name: str = "gpt2") -> Decoder:
    """Real GPT-2 weights as a ``Decoder``, through transformers (``name``: a hub id such as "gpt2",
    "gpt2-medium", or a local folder written by ``save_pretrained``). Downloads once, when online."""
    try:
        from transformers import GPT2LMHeadModel
    except ImportError as exc:  # pragma: no cover - transformers is in requirements.txt
        raise ImportError("load_gpt2 needs the transformers package: pip install transformers") from exc
    try:
        hf_model = GPT2LMHeadModel.from_pretrained(name)
    except (OSError, ValueError) as exc:
        raise RuntimeError(
            f"load_gpt2({name!r}) could not load GPT-2 weights from the Hugging Face hub or a local "
            f"folder ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else exc!r}). "
            "It needs internet access the first time (or HF_HUB_OFFLINE unset). Offline, use "
            "nexttoken.load_pretrained(), the small model that ships with the package."
        ) from exc
    return from_hf_gpt2(hf_model)


def config_from_hf_llama(hf_config) -> DecoderConfig:
    """The ``DecoderConfig`` of a transformers ``LlamaConfig`` (refusing options we do not model)."""
    rope = dict(getattr(hf_config, "rope_parameters", None) or {})  # transformers 5
    theta = rope.get("rope_theta", getattr(hf_config, "rope_theta", None))
    rope_type = rope.get("rope_type", (getattr(hf_config, "rope_scaling", None) or {}).get("rope_type", "default"))
    head_dim = getattr(hf_config, "head_dim", None) or hf_config.hidden_size // hf_config.num_attention_heads
    refusals = [
        (hf_config.hidden_act != "silu", f"hidden_act={hf_config.hidden_act!r} (nexttoken's SwiGLU uses 'silu')"),
        (rope_type != "default", f"rope scaling {rope_type!r} (nexttoken's rotary positions are unscaled)"),
        (getattr(hf_config, "attention_bias", False), "attention_bias=True (nexttoken's Llama block has no biases)"),
        (getattr(hf_config, "mlp_bias", False), "mlp_bias=True (nexttoken's Llama block has no biases)"),
        (head_dim * hf_config.num_attention_heads != hf_config.hidden_size,
         f"head_dim={head_dim} with {hf_config.num_attention_heads} heads != hidden_size={hf_config.hidden_size}"),
        (theta is None, "no rope_theta"),
    ]
    for refused, what in refusals:
        if refused:
            raise ValueError(f"hf_model has {what}: from_hf_llama does not model it")
    return llama_config(
        vocab_size=hf_config.vocab_size,
        context_length=hf_config.max_position_embeddings,
        d_model=hf_config.hidden_size,
        n_layers=hf_config.num_hidden_layers,
        n_heads=hf_config.num_attention_heads,
        n_kv_heads=hf_config.num_key_value_heads or hf_config.num_attention_heads,
        d_ff=hf_config.intermediate_size,
        norm_eps=hf_config.rms_norm_eps,
        rope_theta=theta,
        tie_embeddings=bool(getattr(hf_config, "tie_word_embeddings", False)),
    )


@torch.no_grad()
def from_hf_llama(hf_model) -> Decoder:
    """A ``Decoder`` holding a copy of a transformers ``LlamaForCausalLM``'s weights, in eval mode."""
    if not hasattr(hf_model, "model") or not hasattr(hf_model.model, "layers") or not hasattr(hf_model, "lm_head"):
        raise TypeError(f"hf_model must be a transformers LlamaForCausalLM, got {type(hf_model).__name__}")
    config = config_from_hf_llama(hf_model.config)
    hf = hf_model.model
    layers = [{"input_layernorm": layer.input_layernorm.weight,
               "post_attention_layernorm": layer.post_attention_layernorm.weight,
               **{name: getattr(layer.self_attn, name).weight for name in ("q_proj", "k_proj", "v_proj", "o_proj")},
               **{name: getattr(layer.mlp, name).weight for name in ("gate_proj", "up_proj", "down_proj")}}
              for layer in hf.layers]
    model = llama_decoder(config, hf.embed_tokens.weight, layers, hf.norm.weight,
                          None if config.tie_embeddings else hf_model.lm_head.weight)
    return model.to(hf.embed_tokens.weight.device)


# ---------------------------------------------------------------------------------------------------
# One Llama conversion for both bridges: transformers' LlamaForCausalLM (above) and SmolLM2's GGUF file
# (smollm2.py) name their tensors differently and lay out the rotary rows differently (smollm2.py undoes
# llama.cpp's order first); from there on, the config and the copies are these.

# The nine weights of a Llama layer, by transformers' names, each (out, in) (the norms: (d_model,)).
LLAMA_LAYER = ("input_layernorm", "q_proj", "k_proj", "v_proj", "o_proj", "post_attention_layernorm",
               "gate_proj", "up_proj", "down_proj")


def llama_config(*, vocab_size: int, context_length: int, d_model: int, n_layers: int, n_heads: int,
                 n_kv_heads: int, d_ff: int, norm_eps: float, rope_theta: float,
                 tie_embeddings: bool) -> DecoderConfig:
    """The ``DecoderConfig`` of a Llama-family model: RMSNorm, a SwiGLU MLP, no biases, rotary positions."""
    return DecoderConfig(
        vocab_size=int(vocab_size), context_length=int(context_length), d_model=int(d_model),
        n_layers=int(n_layers), n_heads=int(n_heads), n_kv_heads=int(n_kv_heads), d_ff=int(d_ff),
        norm="rmsnorm", mlp="swiglu", bias=False, tie_embeddings=bool(tie_embeddings), dropout=0.0,
        norm_eps=float(norm_eps), positions="rope", rope_theta=float(rope_theta),
    )


@torch.no_grad()
def llama_decoder(config: DecoderConfig, embedding: torch.Tensor, layers: list[dict], final_norm: torch.Tensor,
                  lm_head: torch.Tensor | None = None) -> Decoder:
    """A ``Decoder`` (float32, eval mode) holding a copy of a Llama model's weights.

    ``layers``: one mapping per block from the names of ``LLAMA_LAYER`` to its weights, the queries and
    keys in transformers' rotary layout (the one ``rotate`` uses). The ``Decoder`` stacks q, k and v into
    one ``qkv`` (queries, then keys, then values). ``lm_head``: the untied head, or None when the config
    ties it to the embedding.
    """
    if len(layers) != config.n_layers:
        raise ValueError(f"layers holds {len(layers)} blocks; the config has n_layers={config.n_layers}")
    if config.tie_embeddings != (lm_head is None):
        raise ValueError("lm_head must be None exactly when config.tie_embeddings is True")
    model = uninitialized_decoder(config)
    model.token_embedding.weight.copy_(embedding)
    for block, w in zip(model.blocks, layers):
        block.norm1.weight.copy_(w["input_layernorm"])
        block.attn.qkv.weight.copy_(torch.cat([w["q_proj"], w["k_proj"], w["v_proj"]]))
        block.attn.proj.weight.copy_(w["o_proj"])
        block.norm2.weight.copy_(w["post_attention_layernorm"])
        block.mlp.gate.weight.copy_(w["gate_proj"])
        block.mlp.up.weight.copy_(w["up_proj"])
        block.mlp.down.weight.copy_(w["down_proj"])
    model.final_norm.weight.copy_(final_norm)
    if lm_head is not None:
        model.lm_head.weight.copy_(lm_head)
    return model.eval()


# nn.init's in-place fills, which the modules of a Decoder call while it is built
_FILLS = ("normal_", "uniform_", "kaiming_uniform_", "trunc_normal_", "zeros_", "ones_")


def uninitialized_decoder(config: DecoderConfig) -> Decoder:
    """A ``Decoder`` whose weights are allocated but not initialized, for a loader that overwrites all of them.

    ``Decoder(config)`` draws a random number for every weight (134 million for SmolLM2, seconds on 2 cores)
    that a loader throws away. While this one is built, nn.init's fills do nothing (transformers' loaders
    skip them the same way), so the global random generator is left as it was. Not thread-safe: another
    thread building a module meanwhile would get uninitialized weights too.
    """
    saved = {name: getattr(nn.init, name) for name in _FILLS}
    try:
        for name in _FILLS:
            setattr(nn.init, name, _keep)
        return Decoder(config)
    finally:
        for name, fill in saved.items():
            setattr(nn.init, name, fill)


def _keep(tensor, *args, **kwargs):
    return tensor
