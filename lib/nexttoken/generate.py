"""The generation loop: forward, keep the last position's logits, softmax, select, append, repeat."""

from collections.abc import Callable

import torch

from .model import Decoder, check_attention_mask, check_token_ids


def greedy(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """The most probable token of each row: (B, vocab) -> (B,). Ties go to the lowest id."""
    return probs.argmax(dim=-1)


def sample(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row drawn with its probability: (B, vocab) -> (B,).

    Pass a seeded ``torch.Generator`` to repeat a run exactly.
    """
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)


def normalize_eos(eos_token_id, vocab_size: int) -> list[int]:
    """``eos_token_id`` as a list of ids: an int, a non-empty list/tuple of ints, or None (-> [])."""
    if eos_token_id is None:
        return []
    ids = [eos_token_id] if isinstance(eos_token_id, int) else eos_token_id
    if not isinstance(ids, (list, tuple)) or len(ids) == 0:
        raise ValueError(f"eos_token_id must be an int, a non-empty list of ints, or None; got {eos_token_id!r}")
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < vocab_size:
            raise ValueError(f"eos_token_id holds {i!r}, expected token ids in [0, {vocab_size})")
    return list(ids)


@torch.no_grad()
def generate(
    model: Decoder,
    input_ids: torch.Tensor,
    max_new_tokens: int,
    *,
    eos_token_id: int | list[int] | None = None,
    pad_token_id: int | None = None,
    attention_mask: torch.Tensor | None = None,
    select: Callable[..., torch.Tensor] | None = None,
    generator: torch.Generator | None = None,
    on_token: Callable[[torch.Tensor], None] | None = None,
    use_cache: bool = True,
) -> torch.LongTensor:
    """Extend each prompt by up to ``max_new_tokens`` tokens, one forward pass per token.

    Returns int64 (B, P + n): the prompt exactly as given, then the n new tokens, with
    n <= max_new_tokens. A 1-D prompt is a batch of one (the result is still (1, P + n)).

    - ``eos_token_id`` (int, list of ints, or None): a row that produces one of these has finished;
      the EOS token is kept. Later slots of a finished row hold ``pad_token_id`` (default: the first
      EOS id). The loop ends when every row has finished, or after ``max_new_tokens`` steps.
      With None, it never stops early.
    - ``attention_mask`` (B, P) of 0/1 marks left padding (0). Each row then gets the tokens it
      would get alone.
    - ``select(probs, generator=generator)`` maps the last position's probabilities (B, vocab) to
      token ids (B,): ``greedy`` (the default) or ``sample``, or a strategy of your own.
    - ``on_token(tokens)`` is called after every step with that step's new tokens (B,): streaming.
    - ``use_cache``: keep every position's keys and values (a ``KVCache``), so that after the prompt
      each step runs the model on one new token instead of the whole sequence. Same tokens either way.

    It matches transformers' greedy ``generate`` (``do_sample=False``) token for token, with one
    deliberate difference: a sequence longer than the model's ``context_length`` is cropped to its
    last ``context_length`` tokens before each forward pass (as nanoGPT does), where transformers
    fails with an IndexError. Past that point every token's position shifts at each step, so the
    cache no longer applies and each step recomputes the cropped window. The model's mode is left
    as it is (call ``model.eval()`` for dropout off).
    """
    config = model.config
    input_ids = check_token_ids(input_ids, config, "input_ids")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
        raise TypeError(f"max_new_tokens must be an int, got {type(max_new_tokens).__name__}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    eos_ids = normalize_eos(eos_token_id, config.vocab_size)
    if pad_token_id is None and eos_ids:
        pad_token_id = eos_ids[0]
    if pad_token_id is not None and (isinstance(pad_token_id, bool) or not isinstance(pad_token_id, int)):
        raise TypeError(f"pad_token_id must be an int or None, got {pad_token_id!r}")
    if pad_token_id is not None and not 0 <= pad_token_id < config.vocab_size:
        raise ValueError(f"pad_token_id is {pad_token_id}, expected a token id in [0, {config.vocab_size})")
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    attention_mask = check_attention_mask(attention_mask, input_ids.shape)
    if select is None:
        select = greedy
    if not callable(select):
        raise TypeError(f"select must be a function of (probs, generator=...), got {select!r}")
    if on_token is not None and not callable(on_token):
        raise TypeError(f"on_token must be a function of the new tokens, got {on_token!r}")

    ids, mask = input_ids, attention_mask  # new tensors each step: the caller's are never changed
    eos = torch.tensor(eos_ids, dtype=torch.long, device=ids.device)
    unfinished = torch.ones(ids.shape[0], dtype=torch.bool, device=ids.device)
    L = config.context_length
    cache = model.new_cache() if use_cache else None
    for _ in range(max_new_tokens):
        if ids.shape[1] > L:
            cache = None  # past the window, positions shift at every step: cached keys are stale
        if cache is not None:
            # Run only what the cache has not seen: the whole prompt at first, then one token a step.
            logits = model(ids[:, len(cache):], attention_mask=mask, cache=cache)
        else:
            # Crop to the context window: the model has no position past L - 1.
            logits = model(ids[:, -L:], attention_mask=mask[:, -L:])
        last = logits[:, -1, :].float()  # only the last position predicts the token that comes next
        probs = torch.softmax(last, dim=-1)
        next_tokens = select(probs, generator=generator)
        if eos_ids:
            # A finished row keeps running through the model, but what it writes is padding.
            next_tokens = torch.where(unfinished, next_tokens, pad_token_id)
        ids = torch.cat([ids, next_tokens[:, None]], dim=1)
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        if on_token is not None:
            on_token(next_tokens)
        if eos_ids:
            unfinished = unfinished & ~torch.isin(next_tokens, eos)
            if not unfinished.any():
                break
    return ids
