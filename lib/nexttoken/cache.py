"""The key/value cache of chapter 7: what a cached step keeps of the positions it has already read."""

import torch


class KVCache:
    """The keys and values of every position the model has processed, one pair per block.

    Keys and values of past tokens never change (a token attends only to its past), so with a cache
    the model runs only the new tokens, whose queries attend to the cached keys and values.

    Each layer keeps its keys (and values) in a buffer with room to spare: a step writes its new keys
    into the next free slots. Appending with ``torch.cat`` would copy the whole cache at every step;
    here a buffer is copied only when it is full, into one twice as long (as a dynamic array, C++'s
    std::vector, grows).

    With grouped-query attention the cache holds the model's ``n_kv_heads`` key/value heads, not one
    per query head: ``n_heads / n_kv_heads`` times less memory (3x for SmolLM2-135M: 3 heads, not 9).
    """

    def __init__(self, n_layers: int):
        self.lengths = [0] * n_layers  # positions cached, per layer
        self.key_buffers: list[torch.Tensor | None] = [None] * n_layers  # (B, kv heads, capacity, head_dim)
        self.value_buffers: list[torch.Tensor | None] = [None] * n_layers

    def __len__(self) -> int:  # how many positions are cached
        return self.lengths[0]

    @property
    def keys(self) -> list[torch.Tensor | None]:
        """Each layer's cached keys (B, kv heads, T, head_dim): the filled part of its buffer."""
        return [None if b is None else b[:, :, :n] for b, n in zip(self.key_buffers, self.lengths)]

    @property
    def values(self) -> list[torch.Tensor | None]:
        return [None if b is None else b[:, :, :n] for b, n in zip(self.value_buffers, self.lengths)]

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Append the new positions' keys and values (B, kv heads, T_new, head_dim); return all of them."""
        start = self.lengths[layer]
        end = start + k.shape[2]
        for buffers, new in ((self.key_buffers, k), (self.value_buffers, v)):
            buffer = buffers[layer]
            if buffer is None or end > buffer.shape[2]:  # full: move to a buffer twice as long
                bigger = new.new_empty(new.shape[0], new.shape[1], 2 * end, new.shape[3])
                if buffer is not None:
                    bigger[:, :, :start] = buffer[:, :, :start]
                buffers[layer] = buffer = bigger
            buffer[:, :, start:end] = new
        self.lengths[layer] = end
        return self.key_buffers[layer][:, :, :end], self.value_buffers[layer][:, :, :end]
