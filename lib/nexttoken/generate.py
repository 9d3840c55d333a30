"""The generation loop: forward, keep the last position's logits, process them, softmax, select, append, repeat."""

from collections.abc import Callable

import torch

from .checks import (
    check_attention_mask,
    check_count,
    check_function,
    check_left_padded,
    check_logits_processors,
    check_pad_token_id,
    check_token_ids,
    normalize_eos,
)
from .model import Decoder


def greedy(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """The most probable token of each row: (B, vocab) -> (B,). Ties go to the lowest id."""
    return probs.argmax(dim=-1)


def sample(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row drawn with its probability: (B, vocab) -> (B,).

    Pass a seeded ``torch.Generator`` to repeat a run exactly.
    """
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)


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
    logits_processors: list[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] | None = None,
) -> torch.LongTensor:
    """Extend each prompt by up to ``max_new_tokens`` tokens, one forward pass per token.

    Returns int64 (B, P + n): the prompt exactly as given, then the n new tokens, with
    n <= max_new_tokens. A 1-D prompt is a batch of one (the result is still (1, P + n)).

    - ``eos_token_id`` (int, list of ints, or None): a row that produces one of these has finished;
      the EOS token is kept. Later slots of a finished row hold ``pad_token_id`` (default: the first
      EOS id). The loop ends when every row has finished, or after ``max_new_tokens`` steps.
      With None, it never stops early.
    - ``attention_mask`` (B, P) of 0/1 marks left padding (0). Each row then gets the tokens it
      would get alone. Padding after a real token (right padding) is refused: the new token would
      follow the pads.
    - ``logits_processors``: functions ``f(input_ids, scores) -> scores``, applied in order at every
      step to the last position's logits, float32 (B, vocab), before the softmax; ``input_ids`` is
      every token so far (B, P + steps), prompt and padding included. This is the signature of
      transformers' ``LogitsProcessor``, so its ``TemperatureLogitsWarper``, ``TopKLogitsWarper``,
      ``TopPLogitsWarper`` or ``RepetitionPenaltyLogitsProcessor`` plug in unchanged; so do your own
      functions, such as ``nexttoken.temperature(0.8)``.
    - ``select(probs, generator=generator)`` maps the probabilities (B, vocab) to token ids (B,):
      ``greedy`` (the default) or ``sample``, or a strategy of your own.
    - ``on_token(tokens)`` is called after every step with that step's new tokens (B,): streaming.
    - ``use_cache``: keep every position's keys and values (a ``KVCache``), so that after the prompt
      each step runs the model on one new token instead of the whole sequence. Same tokens either way.

    It matches transformers' greedy ``generate`` (``do_sample=False``) token for token, with one
    deliberate difference: a sequence longer than the model's ``context_length`` is cropped to its
    last ``context_length`` tokens before each forward pass (as nanoGPT does). transformers does not
    crop: a model with a learned position table, such as GPT-2, fails there with an IndexError (the
    table has no row for the position), and a rotary model, such as SmolLM2, goes on with positions
    it was never trained on. Past that point every token's position shifts at each step, so the
    cache no longer applies and each step recomputes the cropped window. The model's mode is left
    as it is (call ``model.eval()`` for dropout off).

    Sampling like transformers: with ``do_sample=True`` it draws one ``torch.multinomial`` per step
    from PyTorch's global generator. Here ``select=sample`` with ``generator=None`` draws from that
    same generator, so seeding it the same way before each call gives the same tokens::

        torch.manual_seed(0); ours = generate(model, ids, 20, select=sample, logits_processors=[
            TemperatureLogitsWarper(0.8), TopKLogitsWarper(50), TopPLogitsWarper(0.9)])
        torch.manual_seed(0); theirs = hf_model.generate(ids, attention_mask=..., max_new_tokens=20,
            do_sample=True, temperature=0.8, top_k=50, top_p=0.9)

    (transformers applies temperature, then top-k, then top-p, and ``top_k=50`` unless told
    ``top_k=0``: give the same processors in the same order. For ``repetition_penalty`` it builds
    ``RepetitionPenaltyLogitsProcessor(p, prompt_ignore_length=(mask != 0).int().argmax(1))`` so that
    left padding is not penalized.) A seeded ``torch.Generator`` of your own repeats a run without
    touching the global one, but its draws differ from transformers'.
    """
    config = model.config
    # Every argument is checked here, once: the loop then calls model.forward_unchecked, which checks nothing.
    input_ids = check_token_ids(input_ids, config.vocab_size, "input_ids")
    check_count(max_new_tokens, "max_new_tokens")
    eos_ids = normalize_eos(eos_token_id, config.vocab_size)
    check_pad_token_id(pad_token_id, config.vocab_size)
    if pad_token_id is None and eos_ids:
        pad_token_id = eos_ids[0]
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    attention_mask = check_attention_mask(attention_mask, input_ids.shape)
    check_left_padded(attention_mask)
    processors = check_logits_processors(logits_processors)
    if select is None:
        select = greedy
    check_function(select, "select", "(probs, generator=...)", None, generator=None)
    if on_token is not None:
        check_function(on_token, "on_token", "the new tokens", None)

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
            logits = model.forward_unchecked(ids[:, len(cache):], mask, cache=cache)
        else:
            # Crop to the context window: the model has no position past L - 1.
            logits = model.forward_unchecked(ids[:, -L:], mask[:, -L:])
        scores = logits[:, -1, :].float()  # only the last position predicts the token that comes next
        for process in processors:
            scores = process(ids, scores)
        probs = torch.softmax(scores, dim=-1)
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


def temperature(t: float) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """A logits processor that divides the scores by ``t``: softmax(logits / t) sharpens (t < 1) or
    flattens (t > 1) the distribution. Use it with ``select=sample``:
    ``generate(model, ids, n, logits_processors=[temperature(0.8)], select=sample)``."""
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not t > 0:
        raise ValueError(f"temperature must be a number > 0, got {t!r}")

    def divide(input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return scores / t

    return divide
