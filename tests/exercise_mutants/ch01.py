import torch

from . import answers, bank

MUTANTS, mutant = bank()
CORRECT, correct = answers()


# q1: log_prob_from_step_probs
@mutant("q1", expect="underflows")
def product_then_log(step_probs):
    return torch.log(step_probs.prod(dim=-1))


@mutant("q1", expect="below even float64's smallest")  # float64 underflows too: the message must not blame float32
def product_in_float64(step_probs):
    return torch.log(step_probs.double().prod(dim=-1)).float()


@mutant("q1", expect="log10")
def log10(step_probs):
    return torch.log10(step_probs).sum(dim=-1)


@mutant("q1", expect="averaged")
def mean_of_logs(step_probs):
    return torch.log(step_probs).mean(dim=-1)


@mutant("q1", expect="one value per step")
def no_sum(step_probs):
    return torch.log(step_probs)


@mutant("q1", expect="summed over the batch")
def sum_over_batch(step_probs):
    return torch.log(step_probs).sum(dim=0)


@mutant("q1", expect="sign is flipped")
def negative_log_likelihood(step_probs):
    return -torch.log(step_probs).sum(dim=-1)


@mutant("q1", expect="not log-probabilities")
def product_only(step_probs):
    return step_probs.prod(dim=-1)


@mutant("q1", expect="float tensor (torch.float64)")
def in_float64(step_probs):
    return torch.log(step_probs.double()).sum(dim=-1)


@mutant("q1", expect="in place")
def log_in_place(step_probs):
    return step_probs.log_().sum(dim=-1)


# q2: token_log_probs_from_logits
@mutant("q2", expect="T values per row")
def no_shift(logits, input_ids):
    return torch.log_softmax(logits, -1).gather(-1, input_ids[..., None]).squeeze(-1)


@mutant("q2", expect="off by one")
def logits_shifted_wrong_way(logits, input_ids):
    return torch.log_softmax(logits[:, 1:], -1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)


@mutant("q2", expect="off by one")
def targets_not_shifted(logits, input_ids):
    return torch.log_softmax(logits[:, :-1], -1).gather(-1, input_ids[:, :-1, None]).squeeze(-1)


@mutant("q2", expect="probabilities; take their log")
def probabilities(logits, input_ids):
    return torch.softmax(logits[:, :-1], -1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)


@mutant("q2", expect="raw logits")
def raw_logits(logits, input_ids):
    return logits[:, :-1].gather(-1, input_ids[:, 1:, None]).squeeze(-1)


@mutant("q2", expect="wrong dimension")
def softmax_over_time(logits, input_ids):
    return torch.log_softmax(logits[:, :-1], dim=1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)


@mutant("q2", expect="normalised over the positions (dim=1)")  # log of softmax: -inf on the extreme case
def log_of_softmax_over_time(logits, input_ids):
    return torch.log(torch.softmax(logits[:, :-1], dim=1)).gather(-1, input_ids[:, 1:, None]).squeeze(-1)


@mutant("q2", expect="normalised over the batch (dim=0)")
def log_softmax_over_batch(logits, input_ids):
    return torch.log_softmax(logits[:, :-1], dim=0).gather(-1, input_ids[:, 1:, None]).squeeze(-1)


@mutant("q2", expect="an extra dimension of size 1")  # the shared diagnosis names it
def kept_trailing_dim(logits, input_ids):
    return torch.log_softmax(logits[:, :-1], -1).gather(-1, input_ids[:, 1:, None])


# q3: perplexity
@mutant("q3", expect="the sign")
def exp_of_mean(token_log_probs):
    return torch.exp(token_log_probs.mean(-1))


@mutant("q3", expect="used the sum")
def exp_of_sum(token_log_probs):
    return torch.exp(-token_log_probs.sum(-1))


@mutant("q3", expect="cross-entropy")
def cross_entropy(token_log_probs):
    return -token_log_probs.mean(-1)


@mutant("q3", expect="arithmetic")
def mean_inverse_probability(token_log_probs):
    return torch.exp(-token_log_probs).mean(-1)


@mutant("q3", expect="base 2")
def base_two(token_log_probs):
    return 2 ** (-token_log_probs.mean(-1))


@mutant("q3", expect="over the batch")
def mean_over_batch(token_log_probs):
    return torch.exp(-token_log_probs.mean(0))


@mutant("q3", expect=None)
def mean_over_all(token_log_probs):
    return torch.exp(-token_log_probs.mean()).expand(token_log_probs.shape[0])


# --- mistakes a fresh bank got past the checks (tiny and extreme values, T = 1) ---
@mutant("q1", expect=None)
def clamped_log(step_probs):
    return torch.log(step_probs.clamp(min=1e-3)).sum(dim=-1)  # "avoid log(0)"


@mutant("q1", expect="raised the tiny probabilities")  # the shared diagnosis names it
def log_with_epsilon(step_probs):
    return torch.log(step_probs + 1e-6).sum(dim=-1)


@mutant("q2", expect=None)
def log_of_softmax(logits, input_ids):
    probs = torch.softmax(logits[:, :-1], dim=-1)
    return torch.log(probs).gather(-1, input_ids[:, 1:, None]).squeeze(-1)  # log(0) = -inf far out


@mutant("q2", expect=None)
def logsumexp_without_shift(logits, input_ids):
    x = logits[:, :-1]
    log_probs = x - torch.log(torch.exp(x).sum(dim=-1, keepdim=True))  # exp(500) = inf
    return log_probs.gather(-1, input_ids[:, 1:, None]).squeeze(-1)


@mutant("q3", expect=None)
def product_of_probabilities(token_log_probs):
    n = token_log_probs.shape[-1]
    return torch.exp(token_log_probs).prod(dim=-1) ** (-1 / n)  # the product underflows to 0


@mutant("q3", expect=None)
def clamped_perplexity(token_log_probs):
    return torch.exp(-token_log_probs.clamp(min=-4.0).mean(dim=-1))


# --- right answers written another way: they must pass ---
@correct("q1")
def log_by_cumulative_sum(step_probs):
    return torch.log(step_probs).cumsum(-1)[:, -1]


@correct("q2")
def shifted_logsumexp(logits, input_ids):
    x = logits[:, :-1]
    x = x - x.amax(-1, keepdim=True)
    return (x - x.exp().sum(-1, keepdim=True).log()).gather(-1, input_ids[:, 1:].unsqueeze(-1))[..., 0]


@correct("q3")
def perplexity_via_cross_entropy(token_log_probs):
    return (-token_log_probs).mean(-1).exp()


# q4: joint_frequencies (empirical)
def _pairs(first_probs, next_probs, n_draws, generator, second_from=None):
    x1 = torch.multinomial(first_probs, n_draws, replacement=True, generator=generator)
    rows = next_probs[x1] if second_from is None else second_from(first_probs, next_probs, x1)
    x2 = torch.multinomial(rows, 1, generator=generator).squeeze(-1)
    return x1, x2


def _table(x1, x2, V, n):
    return torch.bincount(x1 * V + x2, minlength=V * V).reshape(V, V).float() / n


@mutant("q4", expect=None)
def second_token_ignores_the_first(first_probs, next_probs, n_draws, generator):
    V = first_probs.shape[0]
    x1, x2 = _pairs(first_probs, next_probs, n_draws, generator,
                    second_from=lambda f, t, x1: f.expand(len(x1), -1))  # "every token from the same distribution"
    return _table(x1, x2, V, n_draws)


@mutant("q4", expect="not divided by n_draws")
def counts_not_frequencies(first_probs, next_probs, n_draws, generator):
    x1, x2 = _pairs(first_probs, next_probs, n_draws, generator)
    return _table(x1, x2, first_probs.shape[0], 1)


@mutant("q4", expect="transposed")
def transposed_table(first_probs, next_probs, n_draws, generator):
    x1, x2 = _pairs(first_probs, next_probs, n_draws, generator)
    return _table(x2, x1, first_probs.shape[0], n_draws)


@mutant("q4", expect="counted apart")
def product_of_each_tokens_frequencies(first_probs, next_probs, n_draws, generator):
    x1, x2 = _pairs(first_probs, next_probs, n_draws, generator)
    V = first_probs.shape[0]
    return (torch.bincount(x1, minlength=V)[:, None] * torch.bincount(x2, minlength=V)[None, :]).float() / n_draws ** 2


@mutant("q4", expect="columns of next_probs")
def second_token_from_a_column(first_probs, next_probs, n_draws, generator):
    x1, x2 = _pairs(first_probs, next_probs, n_draws, generator,
                    second_from=lambda f, t, x1: t.T[x1] / t.T[x1].sum(-1, keepdim=True))
    return _table(x1, x2, first_probs.shape[0], n_draws)


@mutant("q4", expect="did not draw from `generator`")
def global_random_state(first_probs, next_probs, n_draws, generator):
    x1 = torch.multinomial(first_probs, n_draws, replacement=True)
    x2 = torch.multinomial(next_probs[x1], 1).squeeze(-1)
    return _table(x1, x2, first_probs.shape[0], n_draws)


@mutant("q4", expect="drew 1 random value with `generator`")
def the_probabilities_themselves(first_probs, next_probs, n_draws, generator):
    torch.rand(1, generator=generator)  # draws, but reports the exact products: not a measurement
    return first_probs[:, None] * next_probs


@mutant("q4", expect=None)
def most_likely_second_token(first_probs, next_probs, n_draws, generator):
    x1 = torch.multinomial(first_probs, n_draws, replacement=True, generator=generator)
    return _table(x1, next_probs[x1].argmax(-1), first_probs.shape[0], n_draws)


@mutant("q4", expect=None)
def fixed_number_of_draws(first_probs, next_probs, n_draws, generator):
    x1, x2 = _pairs(first_probs, next_probs, 10_000, generator)
    return _table(x1, x2, first_probs.shape[0], 10_000)


@correct("q4")
def inverse_cdf_sampling(first_probs, next_probs, n_draws, generator):
    V = first_probs.shape[0]
    u = torch.rand(n_draws, 2, generator=generator)
    x1 = torch.searchsorted(first_probs.cumsum(0), u[:, 0].contiguous()).clamp(max=V - 1)
    x2 = torch.searchsorted(next_probs[x1].cumsum(-1), u[:, 1:].contiguous()).squeeze(-1).clamp(max=V - 1)
    table = torch.zeros(V, V)
    for a, b in zip(x1.tolist(), x2.tolist()):
        table[a, b] += 1
    return table / n_draws


@correct("q4")
def one_text_at_a_time(first_probs, next_probs, n_draws, generator):
    V = first_probs.shape[0]
    table = torch.zeros(V, V)
    for _ in range(n_draws):
        a = int(torch.multinomial(first_probs, 1, generator=generator))
        b = int(torch.multinomial(next_probs[a], 1, generator=generator))
        table[a, b] += 1
    return table / n_draws


@mutant("q4", expect="global random state")
def first_tokens_from_the_global_state(first_probs, next_probs, n_draws, generator):
    x1 = torch.multinomial(first_probs, n_draws, replacement=True)  # the generator is only used for x2
    x2 = torch.multinomial(next_probs[x1], 1, generator=generator).squeeze(-1)
    return _table(x1, x2, first_probs.shape[0], n_draws)


def _rounded_expectations(first_probs, next_probs, n_draws):
    """p(a) p(b | a) * n_draws rounded to whole counts that add up to n_draws (the largest remainders
    rounded up): a table of frequencies that looks counted, computed without drawing."""
    expected = (first_probs[:, None] * next_probs).double().flatten() * n_draws
    counts = expected.floor()
    short = n_draws - int(counts.sum())
    counts[(expected - counts).argsort(descending=True)[:short]] += 1
    return (counts / n_draws).float().reshape(first_probs.shape[0], -1)


@mutant("q4", expect="drew 1 random value with `generator` for n_draws = 10000")
def rounded_expectations_and_one_draw(first_probs, next_probs, n_draws, generator):
    torch.rand(1, generator=generator)  # the generator moves, but nothing is drawn for the texts
    return _rounded_expectations(first_probs, next_probs, n_draws)


@mutant("q4", expect="closer to p(x1) p(x2 | x1) than random draws come")
def rounded_expectations_and_idle_draws(first_probs, next_probs, n_draws, generator):
    torch.rand(n_draws, 2, generator=generator)  # as many draws as the texts need, then thrown away
    return _rounded_expectations(first_probs, next_probs, n_draws)


@correct("q4")
def joint_from_one_uniform_each(first_probs, next_probs, n_draws, generator):
    V = first_probs.shape[0]  # one uniform a text: the inverse CDF of (x1, x2) in the order a, then b
    u = torch.empty(n_draws, dtype=torch.float64).uniform_(generator=generator)
    joint = (first_probs[:, None] * next_probs).double().flatten().cumsum(0)
    texts = torch.searchsorted(joint, u * joint[-1]).clamp(max=V * V - 1)
    return torch.bincount(texts, minlength=V * V).reshape(V, V).float() / n_draws


@correct("q4")
def second_tokens_by_first(first_probs, next_probs, n_draws, generator):
    V = first_probs.shape[0]  # the first tokens, then each first token's second tokens in one draw
    x1 = torch.multinomial(first_probs, n_draws, replacement=True, generator=generator)
    table = torch.zeros(V, V)
    for a, count in enumerate(torch.bincount(x1, minlength=V).tolist()):
        if count:
            b = torch.multinomial(next_probs[a], count, replacement=True, generator=generator)
            table[a] += torch.bincount(b, minlength=V).float()
    return table / n_draws


# --- an average that skips zeros "as padding" ---
@mutant("q3", expect="exactly 0")
def mean_without_zeros(token_log_probs):
    kept = token_log_probs != 0  # "0 is padding": but log 1 = 0 is a real token
    return torch.exp(-(token_log_probs * kept).sum(-1) / kept.sum(-1))


# --- messages that name the mistake made ---
@mutant("q1", expect="that is not underflow")
def log_of_the_complement(step_probs):
    return torch.log1p(-step_probs).sum(dim=-1)  # log(1 - p): -inf for a factor of 1


@mutant("q1", expect="that is not underflow")
def tiny_factors_dropped(step_probs):
    return torch.log(step_probs * (step_probs > 1e-6)).sum(dim=-1)  # "noise": but 1e-8 is a real factor


@mutant("q1", expect="underflows to 0")
def running_product_then_log(step_probs):
    return torch.log(step_probs.cumprod(dim=-1)[:, -1])


@mutant("q4", expect="NaN")
def nan_filled_table(first_probs, next_probs, n_draws, generator):
    x1, x2 = _pairs(first_probs, next_probs, n_draws, generator)
    return torch.full((first_probs.shape[0],) * 2, float("nan"))  # draws, then reports nothing


@mutant("q4", expect="NaN")
def joint_as_conditional_times_first(first_probs, next_probs, n_draws, generator):
    x1, x2 = _pairs(first_probs, next_probs, n_draws, generator)
    V = first_probs.shape[0]
    first = torch.bincount(x1, minlength=V).float() / n_draws
    conditional = _table(x1, x2, V, n_draws) / first[:, None]  # 0 / 0 = NaN for a first token never drawn
    return conditional * first[:, None]  # right wherever every first token was drawn: NaN slipped through


@mutant("q4", expect="counts 9999 texts, but n_draws = 10000: an off-by-one")
def one_draw_too_few(first_probs, next_probs, n_draws, generator):
    x1, x2 = _pairs(first_probs, next_probs, n_draws - 1, generator) if n_draws > 1 else (None, None)
    if x1 is None:
        return torch.zeros(first_probs.shape[0], first_probs.shape[0])
    return _table(x1, x2, first_probs.shape[0], n_draws)


@mutant("q4", expect="counts 9999 texts, but n_draws = 10000: an off-by-one")
def loop_from_one(first_probs, next_probs, n_draws, generator):
    V = first_probs.shape[0]
    table = torch.zeros(V, V)
    for _ in range(1, n_draws):
        a = int(torch.multinomial(first_probs, 1, generator=generator))
        b = int(torch.multinomial(next_probs[a], 1, generator=generator))
        table[a, b] += 1
    return table / (n_draws - 1) if n_draws > 1 else table


@mutant("q4", expect="counts 10001 texts, but n_draws = 10000: an off-by-one")
def one_draw_too_many(first_probs, next_probs, n_draws, generator):
    x1, x2 = _pairs(first_probs, next_probs, n_draws + 1, generator)
    return _table(x1, x2, first_probs.shape[0], n_draws)


@mutant("q4", expect="drew nothing at all for n_draws = 10000")
def the_limit_without_drawing(first_probs, next_probs, n_draws, generator):
    return first_probs[:, None] * next_probs  # what the frequencies approach, not a measurement of them


@mutant("q4", expect="divided each row by its own count")
def conditional_frequencies(first_probs, next_probs, n_draws, generator):
    x1, x2 = _pairs(first_probs, next_probs, n_draws, generator)
    counts = _table(x1, x2, first_probs.shape[0], 1)
    return counts / counts.sum(dim=-1, keepdim=True)


# the slips a learner made blind
@mutant("q2", expect="the shift is reversed")
def shift_reversed(logits, input_ids):
    log_probs = torch.log_softmax(logits[:, 1:], dim=-1)
    return log_probs.gather(-1, input_ids[:, :-1, None]).squeeze(-1)


@mutant("q2", expect="you took the log of the softmax")
def softmax_then_log(logits, input_ids):
    log_probs = torch.log(torch.softmax(logits[:, :-1], dim=-1))
    return log_probs.gather(-1, input_ids[:, 1:, None]).squeeze(-1)


@mutant("q2", expect="your log-sum-exp has no max shift")
def log_sum_exp_without_the_max(logits, input_ids):
    x = logits[:, :-1]
    log_probs = x - torch.log(torch.exp(x).sum(dim=-1, keepdim=True))
    return log_probs.gather(-1, input_ids[:, 1:, None]).squeeze(-1)


@correct("q2")
def log_sum_exp_with_the_max(logits, input_ids):
    x = logits[:, :-1]
    top = x.amax(dim=-1, keepdim=True)
    log_probs = x - top - torch.log(torch.exp(x - top).sum(dim=-1, keepdim=True))
    return log_probs.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
