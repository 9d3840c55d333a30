"""Chapter 7, making the loop fast (the KV cache): tasks for the exercise notebook."""

import math

import torch

from ..generate import generate
from .common import random_ids, seeded, small_model
from .task import Mistake, Task

TASKS = ["q1", "q2", "q3"]


def _append(cache, new):
    return new if cache is None else torch.cat([cache, new], dim=2)


def _q1_diagnose(args, expected, got):
    cache, new = args
    if isinstance(got, torch.Tensor) and cache is not None and got.shape[2] == cache.shape[2] + new.shape[2]:
        if torch.equal(got[:, :, :new.shape[2]], new):
            raise Mistake("the new keys went in front: append them after the cached ones (time order)")
    if isinstance(got, torch.Tensor) and cache is not None and got.shape[2] != cache.shape[2] + new.shape[2]:
        raise Mistake("concatenate along the time dimension, dim=2 of (batch, heads, time, head_dim)")


q1 = Task(
    name="q1", function="append_to_cache", title="growing the cache",
    cases=lambda: [(None, torch.randn(1, 2, 3, 4, generator=seeded(1))),
                   (torch.randn(1, 2, 3, 4, generator=seeded(2)), torch.randn(1, 2, 1, 4, generator=seeded(3))),
                   (torch.randn(2, 4, 5, 8, generator=seeded(4)), torch.randn(2, 4, 1, 8, generator=seeded(5)))],
    reference=_append, diagnose=_q1_diagnose,
    hint_text="With no cache yet (None), the new keys are the cache. Otherwise torch.cat([cache, new], dim=2).",
    solution_text=("def append_to_cache(cache, new):\n    if cache is None:\n        return new\n"
                   "    return torch.cat([cache, new], dim=2)"),
)


def _attend(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


def _q2_diagnose(args, expected, got):
    q, k, v = args
    if isinstance(got, torch.Tensor) and got.shape == expected.shape:
        masked = torch.tril(torch.ones(1, k.shape[2], dtype=torch.bool))
        wrong = torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~masked, float("-inf")),
                              -1) @ v
        if torch.allclose(got, wrong, atol=1e-5):
            raise Mistake("you applied a (1 x T) causal mask that hides all but the first key: the new token is "
                          "the last position, so it may see every cached key, no mask needed")
        if torch.allclose(got, torch.softmax(q @ k.transpose(-2, -1), -1) @ v, atol=1e-5):
            raise Mistake("you forgot to divide the scores by sqrt(head_dim)")


q2 = Task(
    name="q2", function="attend_to_cache", title="one new query against the cached keys",
    cases=lambda: [tuple(torch.randn(1, 2, t, 8, generator=seeded(10 + i)) for i, t in enumerate((1, 6, 6))),
                   tuple(torch.randn(2, 4, t, 16, generator=seeded(20 + i)) for i, t in enumerate((1, 9, 9)))],
    reference=_attend, diagnose=_q2_diagnose,
    hint_text="q is (B, heads, 1, d); k and v are (B, heads, T, d). softmax(q k^T / sqrt(d)) @ v, "
              "with no mask: every cached key is in the new token's past.",
    solution_text=("def attend_to_cache(q, k, v):\n    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
                   "    return torch.softmax(scores, dim=-1) @ v"),
)


def _q3_diagnose(args, expected, got):
    model, ids, n = args
    if isinstance(got, torch.Tensor) and got.shape == expected.shape:
        raise Mistake("the tokens differ from the uncached loop: after the prompt, feed only the newest token "
                      "(ids[:, -1:]) with the same cache object each step")


q3 = Task(
    name="q3", function="generate_cached", title="the cached greedy loop",
    cases=lambda: [(small_model(12), random_ids(12, 1, 4), 6), (small_model(13), random_ids(13, 2, 3), 9)],
    reference=lambda model, ids, n: generate(model, ids, n, use_cache=False), diagnose=_q3_diagnose,
    hint_text="cache = model.new_cache(); logits = model(ids, cache=cache) for the prompt; then each step "
              "append the greedy token and call model(ids[:, -1:], cache=cache).",
    solution_text=("def generate_cached(model, input_ids, max_new_tokens):\n    cache = model.new_cache()\n"
                   "    ids, new = input_ids, input_ids\n    for _ in range(max_new_tokens):\n"
                   "        logits = model(new, cache=cache)\n"
                   "        new = logits[:, -1, :].argmax(dim=-1, keepdim=True)\n"
                   "        ids = torch.cat([ids, new], dim=1)\n    return ids"),
)
