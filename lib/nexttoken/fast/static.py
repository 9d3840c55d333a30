"""The fast path's static cache and its forward pass: buffers allocated once, a mask only where one is needed.

``run_layers`` is the one job every way of running the fast path does (eagerly, compiled, autotuned, from a
package): the model's own embeddings, blocks, final norm and LM head, given the positions, mask and cache that
``StaticCache.take`` prepared for this pass.
"""

import torch

from ..model import Decoder, causal_mask, positions_from_mask


class StaticCache:
    """Keys and values of every layer in buffers allocated once, as long as the context window.

    The model's blocks write into it as into a ``KVCache``, through ``extend`` (the cache owns its update,
    as gpt-fast's ``KVCache.update`` does), but it never reallocates: a step only writes its new keys and
    values in place. It also remembers which cached positions are padding, and each row's count of real
    tokens, so that a one-token step needs neither the whole attention mask nor a cumulative sum over it.
    Its memory is the full window's from the start: n_layers * 2 * B * n_kv_heads * context_length *
    head_dim floats (75 MB per row for GPT-2 small).

    ``fixed_shapes=True``: a one-token step attends over the whole buffer, its unwritten slots masked, so
    that every step has the same shapes (what a CUDA graph replays; see ``prepare``). ``kept``: buffers to
    reuse from one generation to the next, by (batch, dtype, device), since a CUDA graph replays the
    addresses it recorded.

    Its state is set in two methods: ``take`` (a pass of the loop: the buffers and the rows' padding and
    counts at the prompt) and ``advance`` (which positions a pass writes, how many are then cached), which
    ``take`` and the packaged step call.
    """

    def __init__(self, fixed_shapes: bool = False, kept: dict | None = None, buffers: tuple | None = None):
        self.fixed_shapes = fixed_shapes
        self.kept = kept
        self.keys, self.values = buffers or (None, None)  # per layer: (B, kv heads, context_length, head_dim)
        self.length = 0  # positions cached once this pass has written its own
        self.write_at = None  # int64 (T,): the positions this pass writes
        self.whole_window = False  # whether this pass's attention reads every slot (fixed shapes, a step)
        self.key_is_token = None  # bool (B, context_length): False at a padding slot
        self.padded = False  # whether any row has padding (then attention needs a mask at every step)
        self.real_tokens = None  # int64 (B,): real tokens cached per row = the next token's position

    def __len__(self) -> int:  # how many positions are cached (what generate asks)
        return self.length

    def take(self, model: Decoder, input_ids, attention_mask):
        """Make room for this pass's tokens (the prompt, then one a step): returns their positions (B, T) and
        which keys each may see (None: every key; else bool, broadcast over heads)."""
        B, T = input_ids.shape
        past, device = self.length, input_ids.device
        if past == 0:  # the prompt: the buffers, and each row's padding
            weight = model.token_embedding.weight
            self.allocate(model.config, B, weight)
            self.padded = attention_mask is not None and not bool(attention_mask.all())
            self.key_is_token = torch.ones(B, model.config.context_length, dtype=torch.bool, device=device)
            if self.padded:
                self.key_is_token[:, :T] = attention_mask.bool()
                positions, self.real_tokens = positions_from_mask(attention_mask), attention_mask.sum(-1)
            else:
                positions = torch.arange(T, device=device).expand(B, T)
                self.real_tokens = positions[:, -1] + 1
        else:  # a step of the loop: every new token is real (generate appends ones to the mask)
            positions = self.real_tokens[:, None] + torch.arange(T, device=device)
            self.real_tokens = self.real_tokens + T
        self.advance(torch.arange(past, past + T, device=device), past + T,
                     whole_window=self.fixed_shapes and past > 0 and T == 1)
        if self.whole_window:  # every slot of the window, those written so far seen
            written = torch.arange(model.config.context_length, device=device) < self.length
            return positions, (self.key_is_token & written)[:, None, None, :]  # (B, 1, 1, context_length)
        return positions, keys_seen(self.key_is_token[:, :self.length] if self.padded else None, T, past, device)

    def advance(self, write_at: torch.Tensor, length, whole_window: bool = False) -> None:
        """This pass writes at ``write_at``; then ``length`` positions are cached."""
        self.write_at, self.length, self.whole_window = write_at, length, whole_window

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
                from .torch_private import keep_address

                for buffer in self.keys + self.values:
                    keep_address(buffer)
            self.kept[where] = (self.keys, self.values)

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Write the new positions' keys and values (B, kv heads, T_new, head_dim) in place; return all of
        this layer's (views of the buffer, no copy).

        Written with ``index_copy_`` at the new positions, not by assigning to a slice: under
        ``torch.compile`` a slice assignment into a cache buffer became a copy of the whole buffer (every
        layer's, at every layer of every step), which made the compiled fast path slower than the eager one;
        ``index_copy_`` stays in place. The positions are a tensor (``write_at``), not a Python int, so that
        with fixed shapes a compiled step does not depend on how long the cache is (one graph for every step)."""
        keys, values = self.keys[layer], self.values[layer]
        keys.index_copy_(2, self.write_at, k)
        values.index_copy_(2, self.write_at, v)
        if self.whole_window:  # every slot: those not written yet are masked out (take's mask)
            return keys, values
        return keys[:, :, :self.length], values[:, :, :self.length]


def keys_seen(key_is_token, T: int, past: int, device):
    """Which keys each of T new queries may see after ``past`` cached ones: None (all of them: one new token,
    no padding) or bool (B or 1, 1, T or 1, keys): the padding's columns masked, and the causal mask's rows."""
    mask = None if key_is_token is None else key_is_token[:, None, None, :]
    if T > 1:  # the prompt (or several new tokens: not a step generate takes)
        causal = causal_mask(T, past, device=device)
        mask = causal if mask is None else mask & causal
    return mask


def uncached_inputs(input_ids, attention_mask):
    """Positions (B, T) and ``keys_seen`` for a pass without a cache (past the window, generate recomputes
    the cropped window at every step)."""
    B, T = input_ids.shape
    if attention_mask is None or bool(attention_mask.all()):
        return torch.arange(T, device=input_ids.device).expand(B, T), keys_seen(None, T, 0, input_ids.device)
    return positions_from_mask(attention_mask), keys_seen(attention_mask.bool(), T, 0, input_ids.device)


def run_layers(model: Decoder, input_ids, positions, mask, cache: StaticCache | None):
    """The model's own embeddings, blocks, final norm and LM head, on the fast path's mask and cache.

    The final norm and the LM head see the last position only, the one whose logits the loop keeps
    (transformers' ``logits_to_keep=1``): for a prompt of T tokens that is T - 1 rows of the largest
    product left out (GPT-2 small: 38.6 M multiply-adds a row). A one-token step is unchanged."""
    x, rotary = model.embed(input_ids, positions)
    for block in model.blocks:
        x, _ = block(x, mask, cache, rotary=rotary)
    return model.lm_head(model.final_norm(x[:, -1:]))
