"""Chapter 5, the generation loop: tasks for the exercise notebook."""

import contextlib

import torch

from ..generate import generate, sample
from .common import NO_GENERATE, loop_case, loop_params, random_ids, seeded, small_model
from .task import Generated, Known, Mistake, Task

CHAPTER = "ch05"
TASKS = ["q1", "q2", "q3", "q4"]
TRANSFER = ["q3"]  # tasks the chapter does not show line by line


@torch.no_grad()
def _append(ids, next_tokens):
    return torch.cat([ids, next_tokens[:, None]], dim=1)


@torch.no_grad()
def _step(model, input_ids):
    return generate(model, input_ids, 1)


def _q1_diagnose(args, expected, got):
    model, ids = args
    if tuple(got.shape) == (ids.shape[0],):
        raise Mistake("you returned only the new tokens; append them to the sequence with torch.cat")
    if tuple(got.shape) == tuple(ids.shape):
        raise Mistake("the sequence did not grow: append the new token (torch.cat along dim=1)")
    if got.shape == expected.shape and not torch.equal(got[:, :-1].long(), ids):
        raise Mistake("the context changed: keep input_ids as they are and add one token at the end")


q1 = Task(
    name="q1", function="generation_step", title="one greedy step", chapter=CHAPTER,
    cases=lambda: [(small_model(5), random_ids(5, 1, 4)), (small_model(10), random_ids(10, 1, 1)),
                   (small_model(6), random_ids(6, 3, 7))],
    reference=_step, diagnose=_q1_diagnose,  # calling the library here is reported by the grader, not penalised
    known=[
        Known("every row got the same token: logits[0, -1] (row 0's prediction) or an argmax without dim= "
              "gives one token for the whole batch; keep the batch dimension and take argmax(dim=-1)",
              torch.no_grad()(lambda m, ids: _append(ids, m(ids)[0, -1].argmax().expand(ids.shape[0])))),
        Known("the argmax went over all rows' scores at once (no dim=), which gives one index into B * V "
              "numbers: one token for the whole batch, and not even a token id. Take argmax(dim=-1)",
              torch.no_grad()(lambda m, ids: _append(ids, m(ids)[:, -1].argmax().expand(ids.shape[0])))),
        Known("you used the first position's prediction; the last position predicts the next token",
              torch.no_grad()(lambda m, ids: _append(ids, m(ids)[:, 0].argmax(-1)))),
        Known("the model read only the last token: run it on the whole context, model(input_ids)",
              torch.no_grad()(lambda m, ids: _append(ids, m(ids[:, -1:])[:, -1].argmax(-1)))),
        Known("you picked the least likely token (argmin); greedy takes the most likely, argmax",
              torch.no_grad()(lambda m, ids: _append(ids, m(ids)[:, -1].argmin(-1)))),
    ],
    hints=("Five operations: forward, slice, softmax, select, append.",
           "The selected ids have one entry per row, shape (B,); the sequence is (B, T).",
           "Make the new ids a column (next_token[:, None]) and torch.cat it after input_ids along the time axis."),
)


def _q2_diagnose(args, expected, got):
    model, ids, n = args
    if got.dim() == 2 and got.shape[0] == ids.shape[0] and got.shape[1] != expected.shape[1]:
        raise Mistake(f"expected {n} new tokens after the prompt of {ids.shape[1]}, "
                      f"got {got.shape[1] - ids.shape[1]}: one step per new token, range(max_new_tokens)")


@torch.no_grad()
def _repeat_first(m, ids, n):
    first = m(ids)[:, -1].argmax(-1)
    return torch.cat([ids] + [first[:, None]] * n, dim=1)


@torch.no_grad()
def _loop(m, ids, n, step):
    for _ in range(n):
        ids = _append(ids, step(m, ids))
    return ids


q2 = Task(
    name="q2", function="generate_greedy", title="the generation loop", chapter=CHAPTER,
    cases=lambda: [(small_model(9), random_ids(9, 1, 4), 0), (small_model(11), random_ids(11, 2, 3), 1),
                   (small_model(70), random_ids(70, 1, 3), 5), (small_model(83), random_ids(83, 3, 2), 8),
                   (small_model(120), random_ids(120, 1, 1), 15)],  # 1 + 15 = context_length 16, the longest
    generated=Generated(loop_params, loop_case),  # then 0 to 15 new tokens from prompts of 1 to 16, 1 to 3 rows
    reference=lambda model, ids, n: generate(model, ids, n), diagnose=_q2_diagnose, forbid=NO_GENERATE,
    known=[
        Known("every new token is the same one: each step must run the model on the sequence so far, "
              "including the tokens it just generated (feed the loop's output back in, and read its last "
              "position)", _repeat_first),
        Known("the model read only the newest token at each step: without a cache it must read the whole "
              "sequence so far", lambda m, ids, n: _loop(m, ids, n, lambda m, x: m(x[:, -1:])[:, -1].argmax(-1))),
        Known("every row got row 0's tokens: logits[0, -1] serves a batch of one only; use logits[:, -1, :]",
              lambda m, ids, n: _loop(m, ids, n, lambda m, x: m(x)[0, -1].argmax().expand(x.shape[0]))),
        Known("you used the first position's prediction at each step; the last position predicts the next token",
              lambda m, ids, n: _loop(m, ids, n, lambda m, x: m(x)[:, 0].argmax(-1))),
    ],
    hints=("A loop whose every step feeds on the previous step's output.",
           "Call your generation_step max_new_tokens times; what it returns is the next step's input.",
           "Start from the prompt and replace it by generation_step's output, max_new_tokens times; with zero "
           "steps the prompt comes back unchanged."),
)


def _bigram_table(seed, V):
    """A (V, V) table of p(next | current), rows summing to 1, peaked so greedy choices are clear."""
    return torch.softmax(torch.randn(V, V, generator=seeded(seed)) * 3, dim=-1)


def _bigram_greedy(probs, input_ids, max_new_tokens, pick=lambda p, ids: p[ids[:, -1]].argmax(-1)):
    ids = input_ids
    for _ in range(max_new_tokens):
        ids = torch.cat([ids, pick(probs, ids)[:, None]], dim=1)
    return ids


def _bigram_params():
    """(seed, vocabulary 2 to 8, rows 1 to 3, prompt 1 to 3 tokens, 0 to 8 new tokens)."""
    from hypothesis import strategies as st

    return st.tuples(st.integers(0, 999), st.integers(2, 8), st.integers(1, 3), st.integers(1, 3), st.integers(0, 8))


def _bigram_case(params):
    seed, V, rows, length, n = params
    return _bigram_table(seed, V), random_ids(seed, rows, length, vocab=V), n


def _q3_cases():
    return [(_bigram_table(35, 5), torch.tensor([[1], [4]]), 0), (_bigram_table(36, 5), torch.tensor([[3, 0]]), 1),
            (_bigram_table(33, 6), torch.tensor([[2]]), 6),
            (_bigram_table(34, 8), torch.tensor([[0, 5], [3, 1]]), 6)]


q3 = Task(
    name="q3", function="generate_from_bigram", title="the loop on chapter 1's bigram model", chapter=CHAPTER,
    cases=_q3_cases, generated=Generated(_bigram_params, _bigram_case), reference=_bigram_greedy,
    diagnose=_q2_diagnose,
    known=[
        Known("you read the column probs[:, last]: row a of the table is p(next | a), so the next token's "
              "distribution is probs[last] (a row)",
              lambda p, ids, n: _bigram_greedy(p, ids, n, lambda p, x: p[:, x[:, -1]].T.argmax(-1))),
        Known("every new token is the same: condition each step on the *last* token of the sequence so far "
              "(the one generated at the step before), not on a fixed one such as the prompt's first",
              lambda p, ids, n: torch.cat([ids] + [p[ids[:, -1]].argmax(-1)[:, None]] * n, dim=1)),
        Known("you conditioned on the first token of each row; a bigram model reads the *last* one, "
              "so every new token is the same for a one-token prompt",
              lambda p, ids, n: _bigram_greedy(p, ids, n, lambda p, x: p[x[:, 0]].argmax(-1))),
    ],
    hints=("The loop is chapter 5's; only the 'model' changed. What does a bigram model read from the context?",
           "probs[a] is the distribution of the token after a; the context's last token is ids[:, -1].",
           "Each step: probs[ids[:, -1]] gives (B, V); argmax(dim=-1); append as a column."),
)


@torch.no_grad()
def _sample_step(model, input_ids, generator):
    probs = torch.softmax(model(input_ids)[:, -1, :], dim=-1)
    return _append(input_ids, sample(probs, generator=generator))


def _advanced(seed):
    """A generator that has already drawn: its state is not what manual_seed(seed) gives, so reseeding the
    global random state from it (torch.manual_seed(generator.initial_seed())) draws other tokens."""
    generator = seeded(seed)
    torch.rand(10, generator=generator)
    return generator


def _flat_model(seed):
    """A model over 200 tokens whose next-token distributions have a fat tail (its LM head halved), so
    that a sampler which drops the tail or reshapes it draws other tokens often enough to be seen."""
    model = small_model(seed, vocab_size=200)
    with torch.no_grad():
        model.lm_head.weight.mul_(0.5)
    return model


def _q4_cases():
    # 256 draws, one per row: enough to tell the right distribution from a near miss. Measured on these
    # inputs, a silent top-k of 50 changes 41 of the 256 tokens, a top-p of 0.9 changes 22 and a
    # temperature of 0.9 changes 19 (with 14 draws, as before, each would often change none).
    # And a batch of one, where .squeeze() breaks.
    wide = _flat_model(44)
    return [(small_model(42), random_ids(42, 1, 3), _advanced(1)),
            (small_model(43), random_ids(43, 8, 5), _advanced(2)),
            (wide, random_ids(44, 256, 4, vocab=200), _advanced(3))]


@contextlib.contextmanager
def _draws_from_generator(args):
    """The check of how: the draw moves `generator` (one that was not used keeps its state)."""
    generator = args[2]
    before = generator.get_state()
    complaints = []
    yield complaints
    if torch.equal(generator.get_state(), before):
        complaints.append("your function did not draw from `generator` (its state did not move): sampling "
                          "draws each row's token with torch.multinomial(probs, num_samples=1, "
                          "generator=generator), so that a seed makes the draw repeatable (an argmax draws nothing)")


def _q4_diagnose(args, expected, got):
    model, ids, _ = args
    if got.shape == expected.shape and got.dtype == torch.int64 and torch.equal(got[:, :-1], ids):
        raise Mistake("your tokens differ from the seeded draw: draw once per row, with torch.multinomial("
                      "probs, num_samples=1, generator=generator), from the softmax of the last position's "
                      "logits as they are (no top-k, top-p or temperature here)")


q4 = Task(
    name="q4", function="sample_step", title="one sampled step, seeded", chapter=CHAPTER,
    cases=_q4_cases, reference=_sample_step, diagnose=_q4_diagnose, watch=_draws_from_generator,
    known=[
        Known("you took the argmax: this step samples, drawing each row's token with its probability",
              torch.no_grad()(lambda m, ids, g: _append(ids, m(ids)[:, -1].argmax(-1)))),
        Known("you sampled from the first position's distribution; the last position predicts the next token",
              torch.no_grad()(lambda m, ids, g: _append(ids, sample(torch.softmax(m(ids)[:, 0], -1), g)))),
    ],
    hints=("Greedy picks the top token; sampling draws one at random with its probability, and a seeded "
           "generator makes the draw repeatable.",
           "torch.multinomial(probs, num_samples=1, generator=generator) draws one id per row of probs (B, V).",
           "Same five operations as generation_step, with multinomial instead of argmax; its result is "
           "(B, 1), already a column."),
)
