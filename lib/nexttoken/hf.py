"""Interop with Hugging Face transformers: copy a GPT-2 into a ``Decoder``, or load real GPT-2 weights."""

import torch

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
    return DecoderConfig(
        vocab_size=hf_config.vocab_size,
        context_length=hf_config.max_position_embeddings,
        d_model=hf_config.hidden_size,
        n_layers=hf_config.num_hidden_layers,
        n_heads=hf_config.num_attention_heads,
        n_kv_heads=hf_config.num_key_value_heads or hf_config.num_attention_heads,
        d_ff=hf_config.intermediate_size,
        norm="rmsnorm",
        mlp="swiglu",
        bias=False,
        tie_embeddings=bool(getattr(hf_config, "tie_word_embeddings", False)),
        dropout=0.0,
        norm_eps=hf_config.rms_norm_eps,
        positions="rope",
        rope_theta=float(theta),
    )


@torch.no_grad()
def from_hf_llama(hf_model) -> Decoder:
    """A ``Decoder`` holding a copy of a transformers ``LlamaForCausalLM``'s weights, in eval mode.

    Llama keeps q, k and v in three ``nn.Linear``; the ``Decoder`` stacks them into one ``qkv``
    (queries, then keys, then values), in transformers' rotary layout, which ``rotate`` uses too.
    """
    if not hasattr(hf_model, "model") or not hasattr(hf_model.model, "layers") or not hasattr(hf_model, "lm_head"):
        raise TypeError(f"hf_model must be a transformers LlamaForCausalLM, got {type(hf_model).__name__}")
    model = Decoder(config_from_hf_llama(hf_model.config))
    hf = hf_model.model
    model.token_embedding.weight.copy_(hf.embed_tokens.weight)
    for block, layer in zip(model.blocks, hf.layers):
        attn, mlp = layer.self_attn, layer.mlp
        block.norm1.weight.copy_(layer.input_layernorm.weight)
        block.attn.qkv.weight.copy_(torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight]))
        block.attn.proj.weight.copy_(attn.o_proj.weight)
        block.norm2.weight.copy_(layer.post_attention_layernorm.weight)
        block.mlp.gate.weight.copy_(mlp.gate_proj.weight)
        block.mlp.up.weight.copy_(mlp.up_proj.weight)
        block.mlp.down.weight.copy_(mlp.down_proj.weight)
    model.final_norm.weight.copy_(hf.norm.weight)
    if not model.config.tie_embeddings:
        model.lm_head.weight.copy_(hf_model.lm_head.weight)
    return model.to(hf.embed_tokens.weight.device).eval()
