import math

import torch

from . import answers, bank

MUTANTS, mutant = bank()
CORRECT, correct = answers()


# q1: causal_mask
@mutant("q1", expect="transposed (torch.triu, not torch.tril)")
def upper_triangle(T):
    return torch.ones(T, T, dtype=torch.bool).triu()


@mutant("q1", expect="diagonal")
def diagonal_hidden(T):
    return torch.ones(T, T, dtype=torch.bool).tril(diagonal=-1)


@mutant("q1", expect="bool tensor")
def float_mask(T):
    return torch.ones(T, T).tril()


@mutant("q1", expect="bool tensor")
def int_mask(T):
    return torch.tril(torch.ones(T, T, dtype=torch.long))


@mutant("q1", expect="future positions are visible")
def all_visible(T):
    return torch.ones(T, T, dtype=torch.bool)


@mutant("q1", expect="diagonal")
def strictly_less(T):
    i = torch.arange(T)
    return i[None, :] < i[:, None]


@mutant("q1", expect="your mask is inverted")  # [[False]] at T = 1: not a hidden diagonal, an inverted mask
def future_only(T):
    return torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)


@mutant("q1", expect="do not call nexttoken.causal_mask here: it is what you are rebuilding")
def library_mask(T):
    import nexttoken
    return nexttoken.causal_mask(T)


@mutant("q1", expect="do not call nexttoken.causal_mask here: it is what you are rebuilding")
def library_mask_imported(T):
    from nexttoken.model import causal_mask
    return causal_mask(T).clone()


# q2: mask_scores
def _mask(T):
    return torch.ones(T, T, dtype=torch.bool).tril()


@mutant("q2", expect="in place")
def in_place(scores):
    return scores.masked_fill_(~_mask(scores.shape[-1]), float("-inf"))


@mutant("q2", expect="holds 0")
def zero_fill(scores):
    return scores.masked_fill(~_mask(scores.shape[-1]), 0.0)


@mutant("q2", expect="holds 0")
def multiply_by_mask(scores):
    return scores * _mask(scores.shape[-1])


@mutant("q2", expect="happens to underflow to exactly 0 in float32")
def large_negative(scores):
    return scores.masked_fill(~_mask(scores.shape[-1]), -1e9)


@mutant("q2", expect="you returned the softmax weights, not the masked scores")
def softmax_weights(scores):
    return torch.softmax(scores.masked_fill(~_mask(scores.shape[-1]), float("-inf")), dim=-1)


@mutant("q2", expect="some future scores (j > i) are not -inf")
def only_first_row_masked(scores):
    T = scores.shape[-1]
    future = ~_mask(T)
    future[1:] = False
    return scores.masked_fill(future, float("-inf"))


@mutant("q2", expect="the mask is inverted: you masked the past")
def masked_the_past(scores):
    return scores.masked_fill(_mask(scores.shape[-1]), float("-inf"))


@mutant("q2", expect="masked the past or the diagonal")
def diagonal_masked(scores):
    T = scores.shape[-1]
    return scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(-1), float("-inf"))


@mutant("q2", expect=None)
def mask_from_first_dim(scores):
    return scores.masked_fill(~_mask(scores.shape[0]), float("-inf"))


# q3: attention_weights
def _masked(scores):
    return scores.masked_fill(~_mask(scores.shape[-1]), float("-inf"))


@mutant("q3", expect="sqrt(d)")
def unscaled(q, k):
    return torch.softmax(_masked(q @ k.transpose(-2, -1)), dim=-1)


@mutant("q3", expect="divided the scores by d")
def divided_by_d(q, k):
    return torch.softmax(_masked(q @ k.transpose(-2, -1) / q.shape[-1]), dim=-1)


@mutant("q3", expect="over the queries")
def softmax_over_queries(q, k):
    return torch.softmax(_masked(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])), dim=-2)


@mutant("q3", expect="masked after the softmax")
def masked_after_softmax(q, k):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights * _mask(q.shape[-2])


@mutant("q3", expect="future positions get weight")
def no_mask(q, k):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)


@mutant("q3", expect="exp(0) = 1")
def zero_masked(q, k):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(s.masked_fill(~_mask(q.shape[-2]), 0.0), dim=-1)


@mutant("q3", expect="bug is in causal_mask")
def mask_without_diagonal(q, k):  # what a correct q3 returns when q1's causal_mask hides the diagonal
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    T = q.shape[-2]
    return torch.softmax(s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(-1), float("-inf")), dim=-1)


@mutant("q3", expect="arithmetic with -inf")
def multiplied_by_inf_mask(q, k):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(s * torch.where(_mask(q.shape[-2]), 1.0, float("-inf")), dim=-1)


@mutant("q3", expect="transposed")
def keys_times_queries(q, k):
    return torch.softmax(_masked(k @ q.transpose(-2, -1) / math.sqrt(q.shape[-1])), dim=-1)


# q4: padded_causal_mask
@mutant("q4", expect="padding is visible")
def causal_only(attention_mask):
    T = attention_mask.shape[-1]
    return _mask(T).expand(attention_mask.shape[0], T, T)


@mutant("q4", expect="future is visible")
def padding_only(attention_mask):
    T = attention_mask.shape[-1]
    return attention_mask.bool()[:, None, :].expand(-1, T, T)


@mutant("q4", expect="pad *queries*")
def hides_query_rows(attention_mask):
    return _mask(attention_mask.shape[-1]) & attention_mask.bool()[:, :, None]


@mutant("q4", expect="hid the real tokens")
def inverted_padding(attention_mask):
    return _mask(attention_mask.shape[-1]) & (attention_mask == 0)[:, None, :]


@mutant("q4", expect="one (T, T) table")
def first_row_only(attention_mask):
    return _mask(attention_mask.shape[-1]) & attention_mask[0].bool()[None, :]


@mutant("q4", expect="bool tensor")
def as_ints(attention_mask):
    return (_mask(attention_mask.shape[-1]) & attention_mask.bool()[:, None, :]).long()


@mutant("q4", expect="diagonal is hidden")
def no_diagonal(attention_mask):
    T = attention_mask.shape[-1]
    return torch.ones(T, T, dtype=torch.bool).tril(-1) & attention_mask.bool()[:, None, :]


# --- a fixed table, sliced (it passes while T is small) ---
_TABLE = torch.ones(8, 8, dtype=torch.bool).tril()


@mutant("q1", expect=None)
def sliced_fixed_table(T):
    return _TABLE[:T, :T]


@mutant("q2", expect=None)
def masked_with_fixed_table(scores):
    T = scores.shape[-1]
    return scores.masked_fill(~_TABLE[:T, :T], float("-inf"))


@mutant("q4", expect=None)
def padded_with_fixed_table(attention_mask):
    T = attention_mask.shape[-1]
    return _TABLE[:T, :T] & attention_mask.bool()[:, None, :]


@mutant("q3", expect=None)
def weights_with_fixed_table(q, k):
    T = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores.masked_fill(~_TABLE[:T, :T], float("-inf")), dim=-1)


# --- right answers written another way ---
@correct("q1")
def mask_by_comparing_positions(T):
    i = torch.arange(T)
    return i[:, None] >= i[None, :]


@correct("q2")
def mask_with_triu(scores):
    T = scores.shape[-1]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return torch.where(future, torch.tensor(float("-inf")), scores)


@correct("q4")
def padded_by_broadcast_multiplication(attention_mask):
    T = attention_mask.shape[-1]
    return (torch.ones(T, T).tril() * attention_mask[:, None, :]).bool()


# q5: changed_positions (predict)
@mutant("q5", expect="position j changes too")
def strictly_after(T, j):
    return torch.arange(T) > j


@mutant("q5", expect="that is the past")
def the_past(T, j):
    return torch.arange(T) <= j


@mutant("q5", expect="without a mask every position")
def every_position(T, j):
    return torch.ones(T, dtype=torch.bool)


@mutant("q5", expect="not only position j")
def only_j(T, j):
    return torch.arange(T) == j


@mutant("q5", expect="should be a bool tensor")
def ones_and_zeros(T, j):
    return (torch.arange(T) >= j).long()


@mutant("q5", expect=None)
def counted_from_one(T, j):
    return torch.arange(1, T + 1) >= j


@mutant("q5", expect="should be a torch.Tensor")
def a_list(T, j):
    return [t >= j for t in range(T)]


@correct("q5")
def from_the_mask_column(T, j):
    return torch.ones(T, T, dtype=torch.bool).tril()[:, j]


# --- a mask found by value, a softmax without the max shift ---
@mutant("q2", expect="future score of exactly 0 was not masked")
def future_found_by_value(scores):
    return scores.masked_fill(scores.triu(diagonal=1) != 0, float("-inf"))


@mutant("q2", expect="past score of exactly 0 became -inf")
def zeros_of_tril_masked(scores):
    lower = scores.tril()
    return torch.where(lower == 0, float("-inf"), lower)


@mutant("q3", expect="scores of exactly 0 were masked")
def weights_masked_by_value(q, k):
    s = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).tril()
    return torch.softmax(s.masked_fill(s == 0, float("-inf")), dim=-1)


@mutant("q3", expect="overflows float32")
def softmax_without_the_shift(q, k):
    s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    e = torch.exp(s).masked_fill(~torch.ones_like(s, dtype=torch.bool).tril(), 0.0)
    return e / e.sum(-1, keepdim=True)


# --- messages that name the mistake made (an inverted mask is not a hidden diagonal) ---
@mutant("q1", expect="your mask is inverted")
def not_of_the_lower_triangle(T):
    return ~torch.ones(T, T, dtype=torch.bool).tril()


@mutant("q3", expect="the mask is inverted")
def weights_under_an_inverted_mask(q, k):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(s.masked_fill(_mask(q.shape[-2]), float("-inf")), dim=-1)  # ~ forgotten


# the slips a learner made blind
@mutant("q2", expect="T is the number of keys, the last dimension, scores.shape[-1]")
def T_from_the_first_dimension(scores):
    T = scores.shape[0]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    return scores.masked_fill(~mask, float("-inf"))


@mutant("q2", expect="out[i, j] indexes the first two dimensions")
def two_dimensional_loop(scores):
    out = scores.clone()
    T = scores.shape[-1]
    for i in range(T):
        for j in range(T):
            if j > i:
                out[i, j] = float("-inf")
    return out


@correct("q2")
def loop_over_the_last_two_dimensions(scores):
    out = scores.clone()
    T = scores.shape[-1]
    for i in range(T):
        for j in range(i + 1, T):
            out[..., i, j] = float("-inf")
    return out
