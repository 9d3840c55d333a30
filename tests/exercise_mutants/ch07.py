import math

import torch

from . import answers, bank

MUTANTS, mutant = bank()
CORRECT, correct = answers()


# q1: append_to_cache(cache, new, window)
def _both(cache, new):
    return new if cache is None else torch.cat([cache, new], dim=2)


@mutant("q1", expect="went in front")
def new_in_front(cache, new, window):
    return (new if cache is None else torch.cat([new, cache], dim=2))[:, :, -window:]


@mutant("q1", expect=None)
def last_dim(cache, new, window):
    return (new if cache is None else torch.cat([cache, new], dim=-1))[:, :, -window:]


@mutant("q1", expect="only the new keys")
def forgets_the_cache(cache, new, window):
    return new[:, :, -window:]


@mutant("q1", expect="returned the old cache")
def ignores_new(cache, new, window):
    return new[:, :, -window:] if cache is None else cache


@mutant("q1", expect=None)
def batch_dim(cache, new, window):
    return (new if cache is None else torch.cat([cache, new], dim=0))[:, :, -window:]


@mutant("q1", expect=None)
def crashes_on_none(cache, new, window):
    return torch.cat([cache, new], dim=2)[:, :, -window:]


@mutant("q1", expect="keep only the newest")
def never_slides(cache, new, window):
    return _both(cache, new)


@mutant("q1", expect="the *oldest* window positions")
def keeps_the_oldest(cache, new, window):
    return _both(cache, new)[:, :, :window]


@mutant("q1", expect="cropped the old cache to window before appending")
def crops_before_appending(cache, new, window):
    return new if cache is None else torch.cat([cache[:, :, -window:], new], dim=2)


@mutant("q1", expect="they too can be longer than the window")
def no_crop_of_the_first_step(cache, new, window):
    return new if cache is None else _both(cache, new)[:, :, -window:]


@mutant("q1", expect=None)
def window_off_by_one(cache, new, window):
    return _both(cache, new)[:, :, -(window - 1):] if window > 1 else _both(cache, new)[:, :, -1:]


@mutant("q1", expect="the last ones along dim 2")
def crops_the_last_dim(cache, new, window):
    return _both(cache, new)[..., -window:]


@mutant("q1", expect=None)
def drops_exactly_one_when_full(cache, new, window):  # assumes one new position a step
    both = _both(cache, new)
    return both[:, :, 1:] if both.shape[2] > window else both


@correct("q1")
def narrow_the_newest(cache, new, window):
    both = new if cache is None else torch.cat((cache, new), 2)
    start = max(0, both.shape[2] - window)
    return both.narrow(2, start, both.shape[2] - start)


# q2: attend_to_cache, with grouped key/value heads
def _expand(q, k):
    return k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)


def _scores(q, k):
    return q @ _expand(q, k).transpose(-2, -1) / math.sqrt(q.shape[-1])


@mutant("q2", expect="tiled the key/value heads")
def tiles_the_heads(q, k, v):
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1)
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v


@mutant("q2", expect="expand k and v to")
def no_grouping(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v


@mutant("q2", expect=None)
def groups_by_modulo_via_expand(q, k, v):  # expand then reshape the wrong way round: tiles as well
    B, H, _, d = q.shape
    g = H // k.shape[1]
    k = k[:, None].expand(B, g, k.shape[1], k.shape[2], d).reshape(B, H, -1, d)
    v = v[:, None].expand(B, g, v.shape[1], v.shape[2], d).reshape(B, H, -1, d)
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), -1) @ v


@mutant("q2", expect="hides all but the first key")
def causal_mask_first_row(q, k, v):
    T = k.shape[2]
    mask = torch.ones(T, T, dtype=torch.bool).tril()[:1]
    return torch.softmax(_scores(q, k).masked_fill(~mask, float("-inf")), -1) @ _expand(q, v)


@mutant("q2", expect="sqrt(head_dim)")
def unscaled(q, k, v):
    return torch.softmax(q @ _expand(q, k).transpose(-2, -1), -1) @ _expand(q, v)


@mutant("q2", expect="divided the scores by head_dim")
def divided_by_d(q, k, v):
    return torch.softmax(q @ _expand(q, k).transpose(-2, -1) / q.shape[-1], -1) @ _expand(q, v)


@mutant("q2", expect="single query")
def softmax_over_query(q, k, v):
    return torch.softmax(_scores(q, k), -2) @ _expand(q, v)


@mutant("q2", expect="attention weights")
def weights_only(q, k, v):
    return torch.softmax(_scores(q, k), -1)


@mutant("q2", expect=None)
def values_not_weighted(q, k, v):
    return _expand(q, v).mean(dim=2, keepdim=True)


@mutant("q2", expect=None)
def keys_as_values(q, k, v):
    return torch.softmax(_scores(q, k), -1) @ _expand(q, k)


@mutant("q2", expect=None)
def softmax_by_hand_unshifted(q, k, v):
    e = _scores(q, k).exp()
    return e / e.sum(-1, keepdim=True) @ _expand(q, v)


@correct("q2")
def grouped_by_view(q, k, v):  # the query heads viewed as (kv_heads, group), no copy of k and v
    B, H, _, d = q.shape
    G = k.shape[1]
    qg = q.view(B, G, H // G, d)
    w = torch.softmax(qg @ k.transpose(-2, -1) / d ** 0.5, dim=-1)
    return (w @ v).view(B, H, 1, d)


@correct("q2")
def by_sdpa(q, k, v):
    g = q.shape[1] // k.shape[1]
    return torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1))


# q3: generate_cached
def _next(logits):
    return logits[:, -1, :].argmax(dim=-1, keepdim=True)


@mutant("q3", expect="fresh cache")
def fresh_cache_each_step(model, input_ids, max_new_tokens):
    ids, new = input_ids, input_ids
    for _ in range(max_new_tokens):
        new = _next(model(new, cache=model.new_cache()))
        ids = torch.cat([ids, new], dim=1)
    return ids


@mutant("q3", expect="pass only the tokens it has not seen")
def whole_sequence_with_cache(model, input_ids, max_new_tokens):  # counts old tokens twice
    cache, ids = model.new_cache(), input_ids
    for _ in range(max_new_tokens):
        ids = torch.cat([ids, _next(model(ids, cache=cache))], dim=1)
    return ids


@mutant("q3", expect="read the prompt once")
def last_token_without_cache(model, input_ids, max_new_tokens):
    ids = input_ids
    for _ in range(max_new_tokens):
        ids = torch.cat([ids, _next(model(ids[:, -1:]))], dim=1)
    return ids


@mutant("q3", expect="same* cache object")
def prompt_only_each_step(model, input_ids, max_new_tokens):
    cache, ids = model.new_cache(), input_ids
    first = _next(model(input_ids, cache=cache))
    ids = torch.cat([ids, first], dim=1) if max_new_tokens else ids
    for _ in range(max_new_tokens - 1):
        ids = torch.cat([ids, _next(model(ids[:, :1], cache=cache))], dim=1)
    return ids


@mutant("q3", expect="but max_new_tokens = 6")
def one_token_short(model, input_ids, max_new_tokens):
    cache, ids, new = model.new_cache(), input_ids, input_ids
    for _ in range(max_new_tokens - 1):
        new = _next(model(new, cache=cache))
        ids = torch.cat([ids, new], dim=1)
    return ids


@mutant("q3", expect="int64")
def float_tokens(model, input_ids, max_new_tokens):
    cache, ids, new = model.new_cache(), input_ids.float(), input_ids
    for _ in range(max_new_tokens):
        new = _next(model(new, cache=cache))
        ids = torch.cat([ids, new.float()], dim=1)
    return ids


# q4: positions_processed
@mutant("q4", expect="also fed its last token")
def cached_feeds_last_token(prompt_length, max_new_tokens, use_cache):
    P, n = prompt_length, max_new_tokens
    return (P + n if n else 0) if use_cache else sum(P + i for i in range(n))


@mutant("q4", expect="re-reads everything")
def uncached_reads_prompt_only(prompt_length, max_new_tokens, use_cache):
    P, n = prompt_length, max_new_tokens
    return (P + n - 1 if n else 0) if use_cache else n * P


@mutant("q4", expect="prompt is still read once")
def cached_one_per_step(prompt_length, max_new_tokens, use_cache):
    P, n = prompt_length, max_new_tokens
    return n if use_cache else sum(P + i for i in range(n))


@mutant("q4", expect="never fed back")
def uncached_off_by_one(prompt_length, max_new_tokens, use_cache):
    P, n = prompt_length, max_new_tokens
    return (P + n - 1 if n else 0) if use_cache else sum(P + i for i in range(1, n + 1))


@mutant("q4", expect=None)
def cached_forgets_zero_steps(prompt_length, max_new_tokens, use_cache):
    P, n = prompt_length, max_new_tokens
    return P + n - 1 if use_cache else sum(P + i for i in range(n))


@mutant("q4", expect="should be an integer")
def returns_a_list(prompt_length, max_new_tokens, use_cache):
    P, n = prompt_length, max_new_tokens
    return [P + i for i in range(n)]


@mutant("q4", expect=None)
def quadratic_everywhere(prompt_length, max_new_tokens, use_cache):
    P, n = prompt_length, max_new_tokens
    return sum(P + i for i in range(n)) // (2 if use_cache else 1)


# --- no cache at all, zero steps, the library's loop, float counts ---
@mutant("q3", expect="read the prompt once")
def no_cache_at_all(model, input_ids, max_new_tokens):
    ids = input_ids
    for _ in range(max_new_tokens):
        ids = torch.cat([ids, model(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)  # same tokens, no cache
    return ids


@mutant("q3", expect="do not call nexttoken.generate here: it is what you are rebuilding")
def cached_by_library(model, input_ids, max_new_tokens):
    import nexttoken

    return nexttoken.generate(model, input_ids, max_new_tokens, use_cache=True)


@mutant("q3", expect="not run at all")
def cached_prefill_then_range_minus_one(model, input_ids, max_new_tokens):
    cache = model.new_cache()
    new = model(input_ids, cache=cache)[:, -1].argmax(-1, keepdim=True)
    ids = torch.cat([input_ids, new], 1)
    for _ in range(max_new_tokens - 1):
        new = model(new, cache=cache)[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, new], 1)
    return ids


@mutant("q4", expect="should be an integer")
def count_as_float(prompt_length, max_new_tokens, use_cache):
    n, P = max_new_tokens, prompt_length
    return float(P + n - 1 if use_cache and n else n * P + n * (n - 1) / 2)


@mutant("q4", expect=None)
def uncached_without_zero_case(prompt_length, max_new_tokens, use_cache):
    if use_cache:
        return prompt_length + max_new_tokens - 1 if max_new_tokens else 0
    return prompt_length + sum(prompt_length + i for i in range(1, max_new_tokens))  # the first pass always


# --- right answers written another way ---
@correct("q3")
def cached_with_first_step_apart(model, input_ids, max_new_tokens):
    if max_new_tokens == 0:
        return input_ids
    cache = model.new_cache()
    new = model(input_ids, cache=cache)[:, -1:].argmax(-1)
    out = [input_ids, new]
    for _ in range(max_new_tokens - 1):
        new = model(new, cache=cache)[:, -1:].argmax(-1)
        out.append(new)
    return torch.cat(out, dim=1)


@correct("q4")
def count_in_closed_form_numpy(prompt_length, max_new_tokens, use_cache):
    import numpy

    P, n = numpy.int64(prompt_length), numpy.int64(max_new_tokens)
    if n == 0:
        return numpy.int64(0)
    return P + n - 1 if use_cache else n * P + n * (n - 1) // 2


# --- a cache kept between calls, a stop on GPT-2's EOS id; two right answers that must pass ---
_CACHES = {}


@mutant("q3", expect="a cache kept between calls")
def cache_in_a_module_dict(model, input_ids, max_new_tokens):
    cache = _CACHES.setdefault(id(model), model.new_cache())  # kept for the next call with this model
    ids, new = input_ids, input_ids
    for _ in range(max_new_tokens):
        new = model(new, cache=cache)[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, new], 1)
    return ids


@mutant("q3", expect="GPT-2's EOS id 50256")
def cached_stops_on_gpt2_eos(model, input_ids, max_new_tokens):
    cache, ids, new = model.new_cache(), input_ids, input_ids
    for _ in range(max_new_tokens):
        new = model(new, cache=cache)[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, new], 1)
        if (new == 50256).all():
            break
    return ids


@correct("q3")
def prefill_all_but_the_last_token(model, input_ids, max_new_tokens):
    """The prompt but its last token into the cache, then every step from one token (that one first)."""
    if max_new_tokens == 0:
        return input_ids
    cache, ids = model.new_cache(), input_ids
    if input_ids.shape[1] > 1:
        model(input_ids[:, :-1], cache=cache)
    new = input_ids[:, -1:]
    for _ in range(max_new_tokens):
        new = model(new, cache=cache)[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, new], 1)
    return ids


@correct("q4")
def measured_with_a_hook(prompt_length, max_new_tokens, use_cache):
    """Measured, not predicted: the positions each forward pass embeds, around nexttoken.generate."""
    import nexttoken
    from nexttoken.exercises.common import small_model

    model, seen = small_model(0, context_length=prompt_length + max_new_tokens + 1), []
    hook = model.token_embedding.register_forward_pre_hook(lambda module, args: seen.append(args[0].shape[-1]))
    try:
        nexttoken.generate(model, torch.zeros(1, prompt_length, dtype=torch.long), max_new_tokens, use_cache=use_cache)
    finally:
        hook.remove()
    return sum(seen)
