"""Chapter 7, making the loop fast (the KV cache): tasks for the exercise notebook."""

import math

import torch

from ..generate import generate
from ..recorder import watches
from .common import (NO_GENERATE, count_new_tokens, loop_case, loop_params, random_ids, seeded, small_model,
                     with_gpt2_eos)
from .generated import Generated
from .task import Known, Mistake, Question, Task

CHAPTER = "ch07"
TASKS = ["q1", "q2", "q3", "q4"]
# The core tasks: what the lesson asks of every learner and what an LMS grade counts by default (the notebook's
# "[core" headings say the same: tests/exercises/test_core_only.py); the rest is practice.
CORE = []


def _append(cache, new, window):
    both = new if cache is None else torch.cat([cache, new], dim=2)
    return both[:, :, -window:]


def _q1_diagnose(args, expected, got):
    cache, new, window = args
    if cache is not None and got.dim() == 4 and got.shape[2] == cache.shape[2] and got.shape != expected.shape:
        raise Mistake("concatenate along the time dimension, dim=2 of (batch, heads, time, head_dim)")
    total = new.shape[2] + (0 if cache is None else cache.shape[2])
    if got.dim() == 4 and got.shape[2] == total and total > window:
        raise Mistake(f"the cache holds {total} positions but window = {window}: keep only the newest "
                      f"{window} (the last ones along dim 2)")


def _q1_cases():
    x = lambda seed, *shape: torch.randn(*shape, generator=seeded(seed))  # noqa: E731
    return [(None, x(1, 1, 2, 3, 4), 8),  # the first step: the prompt is the cache
            (x(2, 1, 2, 3, 4), x(3, 1, 2, 1, 4), 8),  # room left: nothing slides out
            (x(6, 1, 1, 1, 2), x(7, 1, 1, 4, 2), 5),  # exactly full
            (x(4, 2, 4, 5, 8), x(5, 2, 4, 1, 8), 5),  # full: the oldest position slides out
            (x(8, 1, 3, 6, 4), x(9, 1, 3, 2, 4), 3),  # two new positions, three kept: one of them old
            (None, x(10, 2, 2, 7, 4), 4),  # a prompt longer than the window
            (x(11, 1, 2, 1, 3), x(12, 1, 2, 1, 3), 1)]  # a window of one position


q1 = Question(Task(
    name="q1", function="append_to_cache", title="a cache that keeps a sliding window", chapter=CHAPTER,
    cases=_q1_cases, reference=_append, diagnose=_q1_diagnose,
    known=[
        Known("the new keys went in front: append them after the cached ones (time order, old positions first)",
              lambda c, n, w: (n if c is None else torch.cat([n, c], dim=2))[:, :, -w:]),
        Known("you returned only the new keys: the cache must keep the positions before them too, up to window",
              lambda c, n, w: n[:, :, -w:]),
        Known("you returned the old cache: the new positions must be added to it",
              lambda c, n, w: n[:, :, -w:] if c is None else c),
        Known("you kept the *oldest* window positions (cache[:, :, :window]): the newest token would then never "
              "be seen. Keep the last ones, [:, :, -window:]",
              lambda c, n, w: (n if c is None else torch.cat([c, n], dim=2))[:, :, :w]),
        Known("you cropped the old cache to window before appending, so the cache grows past window: append "
              "first, then keep the last window positions",
              lambda c, n, w: n if c is None else torch.cat([c[:, :, -w:], n], dim=2)),
        Known("with no cache yet (None) the new keys are the cache, but they too can be longer than the window: "
              "crop them as well", lambda c, n, w: n if c is None else _append(c, n, w)),
    ],
    hints=("The cache is a growing record along one axis; a window caps how much of it is kept.",
           "The shape is (batch, heads, time, head_dim): positions are dim 2. Append in time order, then keep "
           "the newest positions. With no cache yet (None), the new keys are the whole cache.",
           "torch.cat([cache, new], dim=2) (or new alone when cache is None), then [:, :, -window:]."),
))


def _expand(q, kv, tiled=False):
    """Keys or values with one head per query head: each key/value head serves a group of query heads in a row
    (0, 0, 1, 1, 2, 2); ``tiled``, the mistake, pairs them in turn instead (.repeat: 0, 1, 2, 0, 1, 2)."""
    group = q.shape[1] // kv.shape[1]
    return kv.repeat(1, group, 1, 1) if tiled else kv.repeat_interleave(group, dim=1)


def _grouped(attend):
    """``attend`` (heads matched one to one) on grouped key/value heads, expanded first."""
    return lambda q, k, v: attend(q, _expand(q, k), _expand(q, v))


def _one_to_one(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


_attend = _grouped(_one_to_one)  # one query per head against every cached key


def _first_key_only(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    first = torch.tril(torch.ones(1, k.shape[2], dtype=torch.bool))
    return torch.softmax(scores.masked_fill(~first, float("-inf")), -1) @ v


def _q2_diagnose(args, expected, got):
    q, k, v = args
    if tuple(got.shape) == (*q.shape[:3], k.shape[2]):
        raise Mistake("these are the attention weights (B, heads, 1, T): multiply them by v to average the values")


def _q2_error(args, error):
    q, k, v = args
    if q.shape[1] != k.shape[1] and "must match the size" in error:
        group = q.shape[1] // k.shape[1]
        return (f"q has {q.shape[1]} heads but k and v have {k.shape[1]}: each key/value head serves "
                f"{group} query heads in a row, so expand k and v to {q.shape[1]} heads first, "
                f"k.repeat_interleave({group}, dim=1)")
    return None


def _qkv(seed, heads, kv_heads, T, d, batch=1, scale=1.0):
    """q (batch, heads, 1, d) and k, v (batch, kv_heads, T, d)."""
    return tuple(torch.randn(batch, h, t, d, generator=seeded(seed + i)) * scale
                 for i, (h, t) in enumerate(((heads, 1), (kv_heads, T), (kv_heads, T))))


q2 = Question(Task(
    name="q2", function="attend_to_cache", title="one new query against grouped cached keys", chapter=CHAPTER,
    cases=lambda: [_qkv(10, 6, 3, 6, 8),  # three key/value heads, two query heads each
                   _qkv(30, 2, 2, 1, 4),  # one head of keys per query head (no grouping), one cached position
                   _qkv(20, 4, 1, 9, 16, batch=2),  # one key/value head for all four (multi-query attention)
                   _qkv(50, 9, 3, 5, 4),  # SmolLM2's grouping: nine query heads share three
                   # large scores (hundreds): a softmax by hand without the max shift overflows
                   _qkv(40, 4, 2, 7, 8, scale=12)],
    reference=_attend, diagnose=_q2_diagnose, errors=_q2_error,
    known=[
        Known("you tiled the key/value heads (k.repeat(1, group, 1, 1) gives heads 0, 1, 2, 0, 1, 2): query heads "
              "come in groups, so query heads 0 and 1 share key head 0, heads 2 and 3 key head 1, ... Use "
              "k.repeat_interleave(group, dim=1), which gives 0, 0, 1, 1, 2, 2",
              lambda q, k, v: _one_to_one(q, _expand(q, k, tiled=True), _expand(q, v, tiled=True))),
        Known("you applied a causal mask whose first row hides all but the first key: the new token is the last "
              "position, so it may see every cached key, no mask needed", _grouped(_first_key_only)),
        Known("you forgot to divide the scores by sqrt(head_dim)",
              _grouped(lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1), -1) @ v)),
        Known("you divided the scores by head_dim; the scale is sqrt(head_dim)",
              _grouped(lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1], -1) @ v)),
        Known("the softmax went over the single query (dim=-2), so every weight is 1: normalise over the keys, "
              "dim=-1", _grouped(lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1), -2) @ v)),
    ],
    hints=("The newest token is the last position: every cached key is in its past. The new part: there are "
           "fewer key/value heads than query heads.",
           "Query heads come in groups of heads // kv_heads that share one key/value head (heads 0 and 1 share "
           "key head 0 when the group is 2). Expand k and v to one head per query head, then attend without "
           "a mask: scores, scale, softmax over the keys, a weighted average of the values.",
           "group = q.shape[1] // k.shape[1]; k.repeat_interleave(group, dim=1) (and v); then "
           "softmax(q @ k.transpose(-2, -1) / sqrt(d), dim=-1) @ v."),
))


def _fresh_cache_each_step(m, ids, n):
    new = ids
    for _ in range(n):
        new_token = m(new, cache=m.new_cache())[:, -1].argmax(-1, keepdim=True)
        ids, new = torch.cat([ids, new_token], 1), new_token
    return ids


def _q3_diagnose(args, expected, got):
    model, ids, n = args
    count_new_tokens(ids, n, got)
    if got.shape == expected.shape and got.dtype == torch.int64 and torch.equal(got[:, :ids.shape[1]], ids):
        raise Mistake("the tokens differ from the uncached loop: feed the whole prompt at the first step, then "
                      "only the newest token, shape (B, 1), with the *same* cache object every step")


def _q3_cases():
    same = small_model(134)  # one model object for two calls in a row, with two prompts of the same shape:
    # a cache kept between calls (keyed by the model, or by nothing) reads the first call's positions
    return [(small_model(120), random_ids(120, 1, 4), 6), (small_model(14), random_ids(14, 2, 3), 0),
            (small_model(15), random_ids(15, 1, 5), 1), (small_model(130), random_ids(130, 2, 3), 9),
            (same, random_ids(134, 2, 4), 5), (same, random_ids(135, 2, 4), 5),
            # GPT-2's vocabulary, with its EOS id 50256 at new token 3: the task asks for exactly max_new_tokens
            (*with_gpt2_eos(141, step=2), 6)]


q3 = Question(Task(
    rebuilds=("nexttoken.generate:generate",),
    name="q3", function="generate_cached", title="the cached greedy loop", chapter=CHAPTER,
    # then 0 to 15 new tokens from prompts of 1 to 16, 1 to 3 rows
    cases=_q3_cases, generated=Generated(loop_params, loop_case),
    reference=lambda model, input_ids, max_new_tokens: generate(model, input_ids, max_new_tokens, use_cache=False),
    diagnose=_q3_diagnose,
    watch=watches.reads_each_token_once,
    forbid=NO_GENERATE,
    known=[
        Known("each step started from a fresh cache, so the model saw only the newest token: make one cache "
              "before the loop and pass it every step", torch.no_grad()(_fresh_cache_each_step)),
    ],
    hints=("A cache remembers what the model has already read, so each step feeds only what is new.",
           "One cache = model.new_cache() before the loop; the first call reads the prompt, later calls one "
           "token, shape (B, 1).",
           "new = input_ids; each step: logits = model(new, cache=cache); new = the greedy token as a column; "
           "append it to ids."),
))


def _positions_processed(prompt_length, max_new_tokens, use_cache):
    """The library's own count: run generate and add up how many positions each forward pass processes."""
    model = small_model(0, context_length=64)
    seen = []
    # Every forward pass embeds the tokens it reads: count them there.
    hook = model.token_embedding.register_forward_pre_hook(lambda module, inputs: seen.append(inputs[0].shape[-1]))
    try:
        generate(model, torch.zeros(1, prompt_length, dtype=torch.long), max_new_tokens, use_cache=use_cache)
    finally:
        hook.remove()
    return sum(seen)


q4 = Question(Task(
    name="q4", function="positions_processed", title="predict the work with and without a cache", chapter=CHAPTER,
    kind="predict",
    cases=lambda: [(4, 1, False), (4, 5, False), (4, 5, True), (3, 0, True), (5, 0, False), (1, 1, True),
                   (10, 6, True), (7, 8, False), (1, 30, False), (2, 40, True)],
    reference=_positions_processed,  # measuring it (a hook around nexttoken.generate) is a right answer too
    known=[
        Known("the cached loop also fed its last token: the token chosen at the last step is appended but "
              "never run through the model", lambda P, n, c: (P + n) if c and n else (n * P + n * (n - 1) // 2)),
        Known("the uncached loop re-reads everything generated so far: its passes read P, P + 1, ..., "
              "P + n - 1 positions, not P each time", lambda P, n, c: (P + n - 1 if c and n else 0) if c else n * P),
        Known("with a cache the prompt is still read once, at the first step: P positions, then one per step",
              lambda P, n, c: n if c else n * P + n * (n - 1) // 2),
        Known("off by one: the last generated token is never fed back, so the passes read P, ..., P + n - 1",
              lambda P, n, c: (P + n - 1 if n else 0) if c else n * P + n * (n + 1) // 2),
    ],
    hints=("Count one forward pass per new token, and how many positions each pass reads.",
           "Without a cache, pass i (from 0) reads the prompt and the i tokens generated so far. With one, the "
           "first pass reads the prompt and every later pass one token.",
           "List the passes for P = 2 and n = 3 by hand, then write each count as a sum and close it."),
))
