"""A decoder-only transformer, written to be read.

token ids -> token embedding + position embedding -> n_layers pre-norm blocks -> final norm -> LM head -> logits

One config expresses GPT-2's block (LayerNorm, tanh-GELU MLP, biases, a learned position table, tied head)
and the block of the previous module as Llama-family models use it (RMSNorm, SwiGLU MLP, no biases,
rotary positions, grouped-query attention), with a tied or an untied head.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .cache import KVCache
from .checks import check_attention_mask, check_positive_int, check_token_ids, is_int


@dataclass
class DecoderConfig:
    vocab_size: int = 50257
    context_length: int = 1024  # the longest sequence the position table covers
    d_model: int = 768
    n_layers: int = 12
    n_heads: int = 12
    norm: str = "layernorm"  # "layernorm" (GPT-2) or "rmsnorm"
    mlp: str = "gelu"  # "gelu" (GPT-2: Linear, tanh-GELU, Linear) or "swiglu"
    d_ff: int | None = None  # MLP hidden width; None: 4 * d_model for gelu, 8/3 * d_model for swiglu
    bias: bool = True  # biases in the linear layers and LayerNorm, as in GPT-2
    tie_embeddings: bool = True  # the LM head reuses the token embedding matrix
    dropout: float = 0.0
    norm_eps: float = 1e-5
    positions: str = "learned"  # "learned" (GPT-2: a table of context_length vectors) or "rope" (rotary)
    rope_theta: float = 10000.0  # rotary base: pair i of a head turns by position / rope_theta^(2i/head_dim)
    n_kv_heads: int | None = None  # heads of keys and values; None: n_heads. Fewer: grouped-query attention

    def __post_init__(self):
        for name in ("vocab_size", "context_length", "d_model", "n_layers", "n_heads"):
            check_positive_int(getattr(self, name), f"DecoderConfig.{name}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"DecoderConfig.d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        if self.norm not in ("layernorm", "rmsnorm"):
            raise ValueError(f"DecoderConfig.norm must be 'layernorm' or 'rmsnorm', got {self.norm!r}")
        if self.mlp not in ("gelu", "swiglu"):
            raise ValueError(f"DecoderConfig.mlp must be 'gelu' or 'swiglu', got {self.mlp!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"DecoderConfig.dropout must be in [0, 1), got {self.dropout!r}")
        if self.positions not in ("learned", "rope"):
            raise ValueError(f"DecoderConfig.positions must be 'learned' or 'rope', got {self.positions!r}")
        if isinstance(self.rope_theta, bool) or not isinstance(self.rope_theta, (int, float)) \
                or not self.rope_theta > 0:
            raise ValueError(f"DecoderConfig.rope_theta must be a number > 0, got {self.rope_theta!r}")
        if self.positions == "rope" and self.head_dim % 2:
            raise ValueError(
                f"DecoderConfig.positions='rope' turns pairs of a head's dimensions: head_dim "
                f"(d_model / n_heads = {self.head_dim}) must be even"
            )
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        if not is_int(self.n_kv_heads) or self.n_kv_heads <= 0 or self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"DecoderConfig.n_kv_heads must be a positive int that divides n_heads ({self.n_heads}), "
                f"got {self.n_kv_heads!r}"
            )
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model if self.mlp == "gelu" else 8 * self.d_model // 3

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


def causal_mask(T: int, past: int = 0, device=None) -> torch.Tensor:
    """Bool (T, past + T), True where query i may attend to key j: the last T rows of the full mask.

    With ``past=0`` (the default) this is chapter 2's (T, T) table, True where j <= i. With ``past``
    tokens already in a KV cache, the T new tokens sit at positions past..past + T - 1, so new token i
    may see keys 0..past + i: the rows of ``causal_mask(past + T)`` that a cached step needs, built
    without the others. The model calls this at every forward pass.
    """
    for name, value in (("T", T), ("past", past)):
        if not is_int(value) or value < 0:
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    return torch.ones(T, past + T, dtype=torch.bool, device=device).tril(diagonal=past)


def positions_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position of each token counted over real tokens only, so left padding does not shift a row.

    [0, 0, 1, 1, 1] -> [0, 0, 0, 1, 2]  (pad slots get 0; nothing attends to them)
    """
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def rotary_angles(positions: torch.Tensor, head_dim: int, theta: float):
    """cos and sin (B, 1, T, head_dim) of the angles rotary positions turn each query and key by.

    Dimension pair i of a head (i and i + head_dim/2, transformers' layout) turns by
    position * theta^(-2i/head_dim): fast turns in the first pairs, slow ones in the last. The
    angles come from ``positions`` (B, T), so a left-padded row turns by its real tokens' positions.
    """
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, device=positions.device).float() / head_dim)
    angles = positions[:, None, :, None].float() * inv_freq  # (B, 1, T, head_dim / 2)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Turn each pair (x_i, x_{i + head_dim/2}) of x (B, heads, T, head_dim) by its angle.

    A query turned by angle(m) and a key turned by angle(n) have a dot product that depends on the two
    vectors and on m - n: attention sees how far apart two tokens are, not where they are.
    """
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-second, first], dim=-1) * sin


class RMSNorm(nn.Module):
    """Scale each vector to unit root-mean-square, then by a learned gain (no centring, no bias)."""

    def __init__(self, d: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def make_norm(config: DecoderConfig) -> nn.Module:
    if config.norm == "rmsnorm":
        return RMSNorm(config.d_model, config.norm_eps)
    return nn.LayerNorm(config.d_model, eps=config.norm_eps, bias=config.bias)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: DecoderConfig, layer: int = 0):
        super().__init__()
        self.layer = layer  # which slot of a KVCache is ours
        self.n_heads, self.n_kv_heads, self.head_dim = config.n_heads, config.n_kv_heads, config.head_dim
        # One product gives the queries (n_heads heads), then the keys and values (n_kv_heads each).
        self.qkv = nn.Linear(config.d_model, (config.n_heads + 2 * config.n_kv_heads) * config.head_dim,
                             bias=config.bias)
        self.proj = nn.Linear(config.d_model, config.d_model, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def split_heads(self, x):  # (B, T, heads * head_dim) -> (B, heads, T, head_dim)
        B, T, _ = x.shape
        return x.view(B, T, -1, self.head_dim).transpose(1, 2)

    def forward(self, x, mask, cache: KVCache | None = None, return_attention: bool = False, rotary=None):
        """x: (B, T, d_model); mask: bool (B or 1, 1, T, T_keys), True where a query may look at a key,
        or None where every query may look at every key (a one-token step without padding: the fast path).

        Without a cache, T_keys = T. With one, the keys are the cached ones followed by the T new ones:
        ``cache.extend`` stores the new ones and returns them all (a ``KVCache``, or the fast path's own).
        Returns the output (B, T, d_model) and the attention weights (B, heads, T, T_keys), or None.
        With ``return_attention=True`` it runs the explicit steps of chapter 2 (``attend``) and returns
        the weights; otherwise it runs the same computation fused in ``F.scaled_dot_product_attention``,
        which does not return the weights, and returns None for them (same output up to rounding).
        ``rotary``: the (cos, sin) of ``rotary_angles`` for rotary positions, or None (learned positions).
        """
        # One product for all heads, (B, all heads, T, head_dim) by one view, then split by head: the
        # n_heads query heads, the n_kv_heads key heads, the n_kv_heads value heads.
        q, k, v = self.split_heads(self.qkv(x)).split([self.n_heads, self.n_kv_heads, self.n_kv_heads], dim=1)
        if rotary is not None:  # keys are cached already turned: a past key never turns again
            q, k = rotate(q, *rotary), rotate(k, *rotary)
        if cache is not None:
            k, v = cache.extend(self.layer, k, v)
        if return_attention:
            if self.n_kv_heads != self.n_heads:
                # Grouped-query attention: each key/value head serves n_heads / n_kv_heads query heads.
                group = self.n_heads // self.n_kv_heads
                k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            out, weights = self.attend(q, k, v, mask)
        else:
            out, weights = self.fused_attention(q, k, v, mask), None
        B, _, T, _ = out.shape
        return self.proj(out.transpose(1, 2).reshape(B, T, -1)), weights

    def fused_attention(self, q, k, v, mask):
        """``attend``'s output in one fused call (as nanoGPT does): fewer, faster steps, no weights.
        With enable_gqa it pairs each group of query heads with its key/value head without copying them."""
        dropout = self.dropout.p if self.training else 0.0
        grouped = self.n_kv_heads != self.n_heads
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, enable_gqa=grouped)
        if mask is not None:
            out = out.nan_to_num(0.0)  # as in attend: a pad slot that sees no key gets 0
        return out

    def attend(self, q, k, v, mask):
        """Scaled dot-product attention, step by step: returns the output and the weights."""
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, heads, T, T_keys)
        if mask is not None:
            # -inf, not 0: softmax turns exp(-inf) into an exact 0 weight for the future.
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        # A pad slot in a left-padded row may see no key at all (a row of -inf gives NaN): zero it.
        # Real tokens never attend to pad slots, so this changes nothing they compute.
        weights = weights.nan_to_num(0.0)
        return self.dropout(weights) @ v, weights  # (B, heads, T, head_dim)


class MLP(nn.Module):
    """GPT-2's Linear -> tanh-GELU -> Linear, or SwiGLU: (SiLU(x W_gate) * x W_up) W_down."""

    def __init__(self, config: DecoderConfig):
        super().__init__()
        self.kind = config.mlp
        self.up = nn.Linear(config.d_model, config.d_ff, bias=config.bias)
        if self.kind == "swiglu":
            self.gate = nn.Linear(config.d_model, config.d_ff, bias=config.bias)
        self.down = nn.Linear(config.d_ff, config.d_model, bias=config.bias)

    def forward(self, x):
        if self.kind == "swiglu":
            hidden = F.silu(self.gate(x)) * self.up(x)
        else:
            hidden = F.gelu(self.up(x), approximate="tanh")  # GPT-2's "gelu_new"
        return self.down(hidden)


class Block(nn.Module):
    """Pre-norm residual block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, config: DecoderConfig, layer: int = 0):
        super().__init__()
        self.norm1 = make_norm(config)
        self.attn = CausalSelfAttention(config, layer)
        self.norm2 = make_norm(config)
        self.mlp = MLP(config)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x, mask, cache: KVCache | None = None, return_attention: bool = False, rotary=None):
        """Returns the new residual stream and this block's attention weights (B, heads, T, T_keys),
        or None for them without ``return_attention`` (see ``CausalSelfAttention.forward``)."""
        attn_out, weights = self.attn(self.norm1(x), mask, cache, return_attention, rotary)
        x = x + self.dropout(attn_out)
        return x + self.dropout(self.mlp(self.norm2(x))), weights


class Decoder(nn.Module):
    """A decoder-only language model: ``model(input_ids) -> logits`` of shape (B, T, vocab_size).

    Position t's logits score every candidate for token t + 1, given tokens 0..t only.
    """

    def __init__(self, config: DecoderConfig):
        super().__init__()
        if not isinstance(config, DecoderConfig):
            raise TypeError(f"config must be a DecoderConfig, got {type(config).__name__}")
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        # Learned positions: one vector per position, added to the token's. Rotary positions have no
        # table: each block turns its queries and keys instead (rotary_angles, rotate).
        self.position_embedding = (nn.Embedding(config.context_length, config.d_model)
                                   if config.positions == "learned" else None)
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config, layer) for layer in range(config.n_layers))
        self.final_norm = make_norm(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.token_embedding.weight  # one matrix reads and writes tokens
        self.apply(self._init_weights)
        # GPT-2: shrink the layers that write into the residual stream, one pair per block.
        for name, param in self.named_parameters():
            if name.endswith(("attn.proj.weight", "mlp.down.weight")):
                nn.init.normal_(param, std=0.02 / math.sqrt(2 * config.n_layers))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())  # a tied matrix is counted once

    def new_cache(self) -> KVCache:
        return KVCache(self.config.n_layers)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
                cache: KVCache | None = None, causal: bool = True, return_attention: bool = False):
        """input_ids: int (B, T) (or (T,) for one sequence); attention_mask: 0/1 (B, T), 0 = padding.

        With a mask, positions count real tokens only, so a left-padded row gives the logits of the
        row alone. Returns float logits (B, T, vocab_size); with ``return_attention=True``, also the
        list of each block's attention weights (B, heads, T, T_keys), computed by the explicit steps
        of chapter 2 (without it, the fused attention call computes the same logits).
        ``causal=False`` drops the causal mask so every position sees the whole sequence: only for
        experiments that show why the mask is there (the model was never trained that way).
        With ``cache`` (from ``new_cache()``), ``input_ids`` are only the tokens the cache has not seen
        yet; they are appended to it, and ``attention_mask`` covers the cached tokens and the new ones.
        """
        input_ids = check_token_ids(input_ids, self.config.vocab_size, "input_ids")
        B, T = input_ids.shape
        past = len(cache) if cache is not None else 0  # tokens already processed
        if past + T > self.config.context_length:
            L = self.config.context_length
            if past:  # the usual cause: the whole sequence fed again to a cache that holds its start
                raise ValueError(
                    f"input_ids has {T} tokens and the cache already holds {past}: together more than the "
                    f"model's context_length {L}. With a cache, pass only the tokens it has not seen "
                    f"(in a generation step, the newest one: input_ids[:, -1:])"
                )
            raise ValueError(
                f"input_ids has {T} tokens but the model's context_length is {L}: crop it, "
                f"e.g. input_ids[:, -{L}:]"
            )
        if attention_mask is not None:
            attention_mask = check_attention_mask(attention_mask, (B, past + T))
        return self.forward_unchecked(input_ids, attention_mask, cache=cache, causal=causal,
                                      return_attention=return_attention)

    def forward_unchecked(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
                          cache: KVCache | None = None, causal: bool = True, return_attention: bool = False):
        """The forward pass itself, on arguments already checked: input_ids int64 (B, T) that fit the
        window, attention_mask None or 0/1 (B, past + T). ``generate`` checks its arguments once, then
        calls this at every step; call ``model(...)`` (``forward``) yourself, which checks them."""
        B, T = input_ids.shape
        past = len(cache) if cache is not None else 0
        # The new tokens' rows of the causal mask (all of it without a cache): chapter 2's table.
        mask = causal_mask(T, past, device=input_ids.device)
        if not causal:
            mask = torch.ones_like(mask)
        if attention_mask is None:
            positions = torch.arange(past, past + T, device=input_ids.device).expand(B, T)
        else:
            positions = positions_from_mask(attention_mask)[:, past:]
            # A query may look at a key if the key is in its past (causal) and is not padding.
            mask = mask & attention_mask.bool()[:, None, None, :]
        mask = mask.expand(B, 1, T, past + T)
        x, rotary = self.embed(input_ids, positions)
        attention = []
        for block in self.blocks:
            x, weights = block(x, mask, cache, return_attention=return_attention, rotary=rotary)
            attention.append(weights)
        logits = self.lm_head(self.final_norm(x))
        return (logits, attention) if return_attention else logits

    def embed(self, input_ids: torch.Tensor, positions: torch.Tensor):
        """The residual stream's start (B, T, d_model) and the rotary angles (or None): token embeddings,
        plus the learned table's vector at each position, or, for rotary positions, the (cos, sin) that
        each block turns its queries and keys by (``rotary_angles``)."""
        x = self.token_embedding(input_ids)
        rotary = None
        if self.position_embedding is not None:
            x = x + self.position_embedding(positions)
        else:
            # angles in float32 (positions up to thousands), then in the model's dtype, as transformers
            # does: a float32 cos would turn bfloat16 queries and keys into float32 ones
            cos, sin = rotary_angles(positions, self.config.head_dim, self.config.rope_theta)
            rotary = cos.to(x.dtype), sin.to(x.dtype)
        return self.dropout(x), rotary
