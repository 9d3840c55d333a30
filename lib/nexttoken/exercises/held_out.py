"""Held-out test inputs: the grader's own cases, which no learner's ``qN.check`` runs.

``python -m nexttoken.grade --held-out`` judges every task on its visible cases (the ones ``check`` runs)
and then on these: other seeds, other sizes and edge cases of the same task, each with a name. Feedback
names a held-out case that fails but never shows its input or its expected output, so that an answer
tuned to the visible cases (or to the feedback) cannot be tuned to these. tests/exercises/ checks that
every wrong answer of the mutant banks fails on these cases alone, and every right answer passes.

A student build of the package (scripts/build_student_package.py) leaves this file out.
"""

import torch

from ..generate import generate
from ..model import DecoderConfig
from .common import (advanced_generator, bigram_table, chain_tables, dropout_model, eos_case, flat_model,
                     left_padded_mask, loud, random_ids, right_padded, rotary_model, rows_far_apart, seeded,
                     small_model, stopping_at_every_step, with_gpt2_eos, with_zeros)

CASES = {}  # "ch05.q2" -> a function returning [(name, arguments), ...], rebuilt identically on each call


def held_out(key: str):
    def register(build):
        CASES[key] = build
        return build
    return register


def cases_of(task) -> list[tuple[str, tuple]]:
    """The named held-out inputs of one task."""
    key = f"{task.chapter}.{task.name}"
    if key not in CASES:
        raise KeyError(f"no held-out cases for {key}")
    return CASES[key]()


def judged(task) -> tuple[list[tuple], dict[int, str]]:
    """What a held-out grading run sends in and judges: the task's held-out inputs, and {index: name} of
    them all (the grader runs them in a sandbox of their own)."""
    named = cases_of(task)
    return [args for _, args in named], {i: name for i, (name, _) in enumerate(named)}


def held_out_only(task, fn) -> tuple[str, str]:
    """(status, reason) of ``fn`` on the task's held-out inputs alone: how much they catch by themselves
    (tests/exercises/ and scripts/mutate_checks.py --held-out-only measure it)."""
    cases, hidden = judged(task)
    return task.evaluate(task.run(fn, cases), cases, hidden)


def rand(seed: int, *shape) -> torch.Tensor:
    return torch.rand(*shape, generator=seeded(seed))


def randn(seed: int, *shape) -> torch.Tensor:
    return torch.randn(*shape, generator=seeded(seed))


# --- chapter 1: the chain rule ---

@held_out("ch01.q1")
def _ch01_q1():
    return [("four rows of nine factors", (rand(101, 4, 9) * 0.9 + 0.05,)),
            ("one factor per row", (torch.tensor([[0.7], [0.2]]),)),
            ("600 small factors (their product underflows)", (rand(102, 2, 600) * 0.02 + 0.001,)),
            ("tiny factors next to factors of exactly 1", (torch.tensor([[1e-20, 1.0, 1.0, 0.25],
                                                                          [1.0, 1e-6, 1.0, 1.0]]),))]


@held_out("ch01.q2")
def _ch01_q2():
    return [("three rows of five tokens", (randn(111, 3, 5, 9) * 2, random_ids(112, 3, 5, vocab=9))),
            ("two tokens: one prediction", (randn(113, 2, 2, 6), random_ids(114, 2, 2, vocab=6))),
            ("extreme negative logits", (randn(115, 1, 7, 17) * 150 - 400, random_ids(116, 1, 7, vocab=17)))]


@held_out("ch01.q3")
def _ch01_q3():
    return [("one row of four", (torch.tensor([[-0.1, -2.0, -0.7, -1.2]]),)),
            ("one token per row", (torch.tensor([[-3.0], [-0.5]]),)),
            ("four rows of 25", (torch.log(rand(121, 4, 25) * 0.8 + 0.1),)),
            ("500 tokens (their product underflows)", (torch.log(rand(122, 3, 500) * 0.01 + 0.002),)),
            ("log-probabilities of 0", (torch.tensor([[-0.4, 0.0, 0.0], [0.0, -1.5, -0.2]]),))]


@held_out("ch01.q4")
def _ch01_q4():
    return [("five tokens, 10,000 draws", (*chain_tables(131, 5), 10_000, seeded(31))),
            ("a flat table, 30,000 draws", (*chain_tables(132, 4, spread=0.5), 30_000, seeded(32))),
            ("two draws", (*chain_tables(133, 3), 2, seeded(33))),
            ("a peaked table of 6, 5,000 draws", (*chain_tables(134, 6, spread=5.0), 5_000, seeded(34)))]


# --- chapter 2: the causal mask ---

@held_out("ch02.q1")
def _ch02_q1():
    return [(f"T = {T}", (T,)) for T in (2, 9, 33, 64)]


@held_out("ch02.q2")
def _ch02_q2():
    return [("2 x 2", (randn(201, 2, 2),)), ("a batch of 5 of 7 x 7", (randn(202, 5, 7, 7),)),
            ("five dimensions", (randn(203, 1, 3, 2, 12, 12),)), ("30 x 30", (randn(204, 30, 30),)),
            ("scores of exactly 0", (with_zeros(randn(205, 2, 5, 5)),))]


@held_out("ch02.q3")
def _ch02_q3():
    return [("five positions, d = 4", (randn(211, 5, 4), randn(212, 5, 4))),
            ("one position, batched", (randn(213, 2, 1, 1, 8), randn(214, 2, 1, 1, 8))),
            ("3 x 2 heads, 11 positions, d = 32", (randn(215, 3, 2, 11, 32), randn(216, 3, 2, 11, 32))),
            ("25 positions, large scores", (randn(217, 1, 4, 25, 6) * 3, randn(218, 1, 4, 25, 6) * 3)),
            ("a key of zeros", (randn(219, 4, 6), randn(220, 4, 6).index_fill(0, torch.tensor([0]), 0.0))),
            ("scores in the hundreds", (randn(221, 2, 7, 8) * 15, randn(222, 2, 7, 8) * 15))]


@held_out("ch02.q4")
def _ch02_q4():
    return [("one row, no padding", (torch.tensor([[1, 1]]),)),
            ("three rows of three", (torch.tensor([[0, 0, 1], [0, 1, 1], [1, 1, 1]]),)),
            ("four rows of 30", (left_padded_mask([1, 30, 17, 5], 30),)),
            ("one real token after four pads", (torch.tensor([[0, 0, 0, 0, 1]]),))]


@held_out("ch02.q5")
def _ch02_q5():
    return [("T = 2, j = 1", (2, 1)), ("T = 9, j = 3", (9, 3)), ("the last of 16", (16, 15)),
            ("T = 12, j = 0", (12, 0))]


# --- chapter 3: the forward pass ---

@held_out("ch03.q1")
@held_out("ch03.q2")
def _ch03_rotary():
    return [("a batch of one, 7 tokens", (rotary_model(311), random_ids(311, 1, 7))),
            ("four rows of one token", (rotary_model(312, rope_theta=100000.0), random_ids(312, 4, 1))),
            ("the longest input (16 tokens), a tied head", (rotary_model(313, tie_embeddings=True, rope_theta=2000.0),
                                                            random_ids(313, 2, 16))),
            ("three blocks, one key/value head", (rotary_model(314, n_layers=3, n_kv_heads=1), random_ids(314, 3, 11))),
            ("a wider model (d_model 48, 6 heads, vocabulary 60)",
             (rotary_model(315, d_model=48, n_heads=6, n_kv_heads=3, vocab_size=60, rope_theta=100000.0),
              random_ids(315, 2, 6, vocab=60)))]


@held_out("ch03.q4")
def _ch03_models():
    return [("a batch of one, 7 tokens", (small_model(301), random_ids(301, 1, 7))),
            ("four rows of one token", (small_model(302), random_ids(302, 4, 1))),
            ("the longest input (16 tokens)", (small_model(303), random_ids(303, 2, 16))),
            ("three blocks", (small_model(304, n_layers=3), random_ids(304, 3, 11))),
            ("a wider model (d_model 48, 6 heads, vocabulary 60)",
             (small_model(305, d_model=48, n_heads=6, vocab_size=60), random_ids(305, 2, 6, vocab=60)))]


@held_out("ch03.q3")
def _ch03_q3():
    return [("four blocks, an untied head, d_ff 70",
             (DecoderConfig(vocab_size=300, context_length=32, d_model=24, n_layers=4, n_heads=3, d_ff=70,
                            tie_embeddings=False),)),
            ("the smallest model", (DecoderConfig(vocab_size=2, context_length=1, d_model=4, n_layers=1,
                                                  n_heads=1),)),
            ("GPT-2 medium", (DecoderConfig(vocab_size=50257, context_length=1024, d_model=1024, n_layers=24,
                                            n_heads=16),)),
            ("a wide MLP", (DecoderConfig(vocab_size=128, context_length=128, d_model=64, n_layers=2, n_heads=8,
                                          d_ff=512),))]


# --- chapter 4: logit slicing ---

@held_out("ch04.q1")
def _ch04_q1():
    return [("two rows of four", (randn(401, 2, 4, 6),)), ("one position", (randn(402, 1, 1, 9),)),
            ("three rows of eight", (randn(403, 3, 8, 5),)), ("five rows of two", (randn(404, 5, 2, 13),))]


@held_out("ch04.q2")
def _ch04_q2():
    return [("two rows of nine tokens", (small_model(411), random_ids(411, 2, 9))),
            ("the longest input, one row", (small_model(412), random_ids(412, 1, 16))),
            ("four rows of one token, vocabulary 80",
             (small_model(413, vocab_size=80), random_ids(413, 4, 1, vocab=80))),
            ("logits in the hundreds", (loud(small_model(414)), random_ids(414, 3, 3))),
            ("two rows whose logits lie over 100 apart", rows_far_apart(140))]


@held_out("ch04.q3")
def _ch04_q3():
    return [("equal scores", (torch.tensor([[0.0, 0.0]]),)), ("one score", (torch.tensor([3.0]),)),
            ("+-2000", (torch.tensor([[2000.0, 1999.0], [-2000.0, -1990.0]]),)),
            ("only very negative scores", (torch.tensor([[-500.0, -501.0, -502.5]]),)),
            ("spread scores (probabilities down to 1e-30)", (randn(431, 3, 2, 7) * 25,)),
            ("a ramp of 30", (torch.linspace(-66.0, 0.0, 30).reshape(3, 10),))]


@held_out("ch04.q4")
def _ch04_q4():
    return [("a batch of one, 9 tokens", (small_model(441), random_ids(441, 1, 9))),
            ("four rows of one token", (small_model(442), random_ids(442, 4, 1))),
            ("three blocks, the longest input", (small_model(443, n_layers=3), random_ids(443, 2, 16))),
            ("three rows of five", (small_model(444), random_ids(444, 3, 5)))]


@held_out("ch04.q5")
def _ch04_q5():
    return [("two rows of seven", (dropout_model(451), random_ids(451, 2, 7))),
            ("four rows of one token", (dropout_model(452), random_ids(452, 4, 1))),
            ("a batch of one, 12 tokens", (dropout_model(453), random_ids(453, 1, 12))),
            ("logits in the hundreds", (loud(dropout_model(454)), random_ids(454, 2, 3)))]


# --- chapter 5: the loop ---

@held_out("ch05.q1")
def _ch05_q1():
    return [("two rows of five", (small_model(501), random_ids(501, 2, 5))),
            ("15 tokens", (small_model(502), random_ids(502, 1, 15))),
            ("four rows of one token", (small_model(503), random_ids(503, 4, 1)))]


def _loops(first_seed: int):
    """Loop inputs (model, input_ids, max_new_tokens): from one token to the window, 0 to 15 new tokens."""
    shapes = [("two rows, 1 token, 15 new", 2, 1, 15), ("16 tokens, 0 new", 1, 16, 0),
              ("four rows of six, 10 new", 4, 6, 10), ("2 tokens, 1 new", 1, 2, 1),
              ("three rows of 4, 12 new", 3, 4, 12)]
    return [(name, (small_model(first_seed + i), random_ids(first_seed + i, rows, length), n))
            for i, (name, rows, length, n) in enumerate(shapes)]


def _gpt2_eos(seed: int):
    """GPT-2's vocabulary and its EOS id among the greedy tokens (common.with_gpt2_eos), at new token 2 of a
    batch of one: a loop that stops on that id stops there."""
    model, ids = with_gpt2_eos(seed, step=1)
    return [("GPT-2's vocabulary, its EOS id at new token 2", (model, ids, 7))]


held_out("ch05.q2")(lambda: _loops(511) + _gpt2_eos(512))


@held_out("ch05.q3")
def _ch05_q3():
    return [("vocabulary 7, three rows, 9 new", (bigram_table(531, 7), torch.tensor([[6], [0], [3]]), 9)),
            ("vocabulary 3, 1 new", (bigram_table(532, 3), torch.tensor([[2, 1, 0, 1]]), 1)),
            ("vocabulary 10, 0 new", (bigram_table(533, 10), random_ids(533, 2, 3, vocab=10), 0)),
            ("vocabulary 2, 5 new", (bigram_table(534, 2), torch.tensor([[1]]), 5)),
            ("vocabulary 12, two rows, 8 new", (bigram_table(535, 12), random_ids(535, 2, 2, vocab=12), 8))]


@held_out("ch05.q4")
def _ch05_q4():
    return [("a batch of one", (small_model(541), random_ids(541, 1, 6), advanced_generator(11))),
            ("five rows of two", (small_model(542), random_ids(542, 5, 2), advanced_generator(12))),
            ("300 rows, a flat distribution over 200 tokens",
             (flat_model(543), random_ids(543, 300, 3, vocab=200), advanced_generator(13))),
            ("logits in the hundreds", (loud(small_model(544)), random_ids(544, 2, 5), advanced_generator(14)))]


@held_out("ch05.q5")
def _ch05_q5():
    return [("a model of 50 tokens", (small_model(551),)), ("a model of 30 tokens", (small_model(552, vocab_size=30),)),
            ("three blocks", (small_model(553, n_layers=3),))]


# --- chapter 6: termination ---

@held_out("ch06.q1")
def _ch06_q1():
    model, prompt = small_model(631), random_ids(631, 1, 4)
    free = generate(model, prompt, 10)[0, 4:].tolist()
    at, first_new = next((i + 1, t) for i, t in enumerate(free)  # a token first written at step 3 or later
                         if i >= 2 and t not in free[:i] and t not in prompt[0].tolist())
    never = max(set(range(50)) - set(free) - set(prompt[0].tolist()))
    return [("an EOS the model writes, with room to spare", (model, prompt, 10, first_new)),
            ("the EOS at the very last step", (model, prompt, at, first_new)),
            ("an EOS it never writes", (model, prompt, 7, never)),
            ("the prompt's first token as the EOS", (model, prompt, 6, int(prompt[0, 0]))),
            ("no new tokens", (model, prompt, 0, never)),
            ("a one-token prompt", (small_model(632), random_ids(632, 1, 1), 9, 5))]


@held_out("ch06.q2")
def _ch06_q2():
    model, prompt = small_model(641), random_ids(641, 1, 5)
    free = generate(model, prompt, 6)[0, 5:].tolist()
    never = max(set(range(50)) - set(free) - set(prompt[0].tolist()))
    ended = generate(model, prompt, 6, eos_token_id=free[1])
    cut = generate(model, prompt, 3, eos_token_id=never)
    return [("ended at step 2 of 6", (ended, 5, free[1])),
            ("cut off after 3", (cut, 5, never)),
            ("cut off, an EOS id inside the prompt", (cut, 5, int(prompt[0, 2]))),
            ("no new tokens, the last prompt token the EOS id", (prompt, 5, int(prompt[0, -1]))),
            ("the first new token the EOS", (generate(model, prompt, 4, eos_token_id=free[0]), 5, free[0]))]


@held_out("ch06.q3")
def _ch06_q3():
    return [("finished rows producing EOS again", (torch.tensor([True, True]), torch.tensor([2, 5]), 5)),
            ("five running rows", (torch.tensor([False] * 5), torch.tensor([1, 1, 2, 1, 3]), 1)),
            ("EOS id 0", (torch.tensor([True, False, False]), torch.tensor([0, 0, 6]), 0)),
            ("all rows produce EOS", (torch.tensor([False, True]), torch.tensor([9, 9]), 9))]


@held_out("ch06.q4")
def _ch06_q4():
    return [("five rows, pad id 50", (torch.tensor([1, 2, 3, 4, 5]), torch.tensor([False, False, True, False, True]),
                                      50)),
            ("one running row whose token is the pad id", (torch.tensor([7]), torch.tensor([False]), 7)),
            ("every row finished", (torch.tensor([0, 0]), torch.tensor([True, True]), 3)),
            ("the pad id is a real token", (torch.tensor([6, 2, 6]), torch.tensor([True, False, False]), 6))]


@held_out("ch06.q5")
def _ch06_q5():
    # (seed, rows, prompt length, max_new_tokens, EOS kind, pick, pad kind, pick), as chapter 6's generated
    # inputs: EOS a token the model produces (0), one the prompt holds (1) or any id (2); the pad id a
    # token the model produces (0) or any id (1).
    params = [("four rows, EOS the model produces", (601, 4, 2, 10, 0, 3, 0, 5)),
              ("EOS held by the prompt", (602, 1, 8, 8, 1, 0, 1, 49)),
              ("one token, 15 new, a produced EOS", (603, 3, 1, 15, 0, 7, 1, 0)),
              ("no new tokens", (604, 2, 5, 0, 0, 1, 0, 2)),
              ("an EOS id it may never produce", (605, 3, 4, 12, 2, 17, 0, 9)),
              ("two rows, the pad id produced too", (606, 2, 3, 13, 0, 2, 0, 4))]
    return ([(name, eos_case(p)) for name, p in params] + _every_row_stops(607) + _pad_is_eos(608)
            + [("the pad id produced, then other tokens", _pad_then_other_tokens(609)),
               ("rows stopping at steps 1 to 5, pad id = EOS id", stopping_at_every_step(92, 5))])


def _pad_is_eos(seed: int):
    """pad == EOS, an id the prompt holds (in the middle of row 1, at the end of a batch of one)."""
    model, prompt = small_model(seed), random_ids(seed, 3, 4)
    inside, last = int(prompt[1, 1]), int(prompt[2, -1])
    return [("pad id = EOS id, inside a prompt", (model, prompt, 9, inside, inside)),
            ("a batch of one ending with the EOS id, pad id = EOS id", (model, prompt[2:], 9, last, last))]


def _pad_then_other_tokens(seed: int):
    """A row that greedily produces the pad id (the first token that some row produces and then leaves)
    before any EOS; the EOS id is one the model never produces, so every row runs all 8 steps."""
    model, prompt = small_model(seed), random_ids(seed, 2, 3)
    free = generate(model, prompt, 8)[:, 3:]
    pad = next(int(row[s]) for s in range(7) for row in free if row[s] != row[s + 1])
    eos = max(set(range(50)) - set(free.flatten().tolist()))
    return model, prompt, 8, eos, pad


def _every_row_stops(seed: int):
    """Inputs where every row of a batch, and a batch of one, produce EOS well before max_new_tokens: the
    first seed from ``seed`` on whose two rows greedily produce a common token in their first 6 steps."""
    while True:
        model, prompt = small_model(seed), random_ids(seed, 2, 3)
        free = generate(model, prompt, 6)[:, 3:]
        common = set(free[0].tolist()) & set(free[1].tolist())
        if common:
            eos = min(common)
            return [("every row stops early", (model, prompt, 12, eos, 0)),
                    ("a batch of one that stops", (model, prompt[:1], 12, int(free[0, 1]), 49))]
        seed += 1


@held_out("ch06.q6")
def _ch06_q6():
    return [("three rows of one real token", right_padded([1, 1, 1], 6, seed=611)),
            ("four rows of 40", right_padded([40, 1, 33, 20], 40, seed=612)),
            ("one real token, pad id 0", (torch.tensor([[3, 0, 0, 0]]), torch.tensor([[1, 0, 0, 0]]))),
            ("no padding at all", right_padded([5, 5], 5, seed=613)),
            ("a row already left-padded", (torch.tensor([[0, 0, 7, 8], [5, 6, 0, 0]]),
                                           torch.tensor([[0, 0, 1, 1], [1, 1, 0, 0]]))),
            ("three rows of nine", right_padded([2, 9, 4], 9, seed=614))]


@held_out("ch06.q7")
def _ch06_q7():
    return [("a window of 3, three rows, 7 new", (small_model(621, context_length=3), random_ids(621, 3, 3), 7)),
            ("a window of 2, 6 new", (small_model(622, context_length=2), random_ids(622, 1, 1), 6)),
            ("a window of 8, 9 new", (small_model(623, context_length=8), random_ids(623, 2, 6), 9)),
            ("0 new", (small_model(624, context_length=5), random_ids(624, 1, 2), 0)),
            ("GPT-2's vocabulary, a window of 3", (*with_gpt2_eos(625, length=3, context_length=3), 5))]


@held_out("ch06.q8")
def _ch06_q8():
    return [("four rows", ([4, 2, 8, 3], 10)), ("one row that never finishes", ([None], 4)),
            ("EOS after max_new_tokens", ([3, 9], 6)), ("every row at step 1", ([1, 1, 1], 1)),
            ("no new tokens", ([1], 0)), ("all but one finish early", ([2, 2, None, 1], 7))]


# --- chapter 7: the KV cache ---

@held_out("ch07.q1")
def _ch07_q1():
    return [("an empty cache, three rows, a window of two", (None, randn(701, 3, 1, 1, 5), 2)),
            ("seven cached positions, three heads, a window of eight",
             (randn(702, 2, 3, 7, 4), randn(703, 2, 3, 1, 4), 8)),
            ("a full window of seven", (randn(708, 2, 3, 7, 4), randn(709, 2, 3, 1, 4), 7)),
            ("three new positions at once into a window of four", (randn(704, 1, 2, 2, 6), randn(705, 1, 2, 3, 6), 4)),
            ("one head, ten cached, a window of ten", (randn(706, 1, 1, 10, 3), randn(707, 1, 1, 1, 3), 10)),
            ("a prompt of six into a window of four", (None, randn(710, 2, 2, 6, 3), 4)),
            ("two new positions into a full window of three", (randn(712, 1, 2, 3, 4), randn(713, 1, 2, 2, 4), 3))]


def _qkv(seed, batch, heads, kv_heads, T, d, scale=1.0):
    shapes = ((heads, 1), (kv_heads, T), (kv_heads, T))
    return tuple(randn(seed + i, batch, h, t, d) * scale for i, (h, t) in enumerate(shapes))


@held_out("ch07.q2")
def _ch07_q2():
    return [("five cached, six heads in three groups", _qkv(711, 1, 6, 3, 5, 4)),
            ("one cached, three rows, one head", _qkv(714, 3, 1, 1, 1, 8)),
            ("twelve cached, two rows, eight heads sharing two", _qkv(717, 2, 8, 2, 12, 6)),
            ("one key/value head for six", _qkv(723, 1, 6, 1, 4, 4)),
            ("large scores, four heads in pairs", _qkv(720, 1, 4, 2, 10, 8, 15.0))]


def _same_model_twice(seed: int):
    """Two calls in a row with one model object: a cache kept between calls shows on the second."""
    model = small_model(seed)
    return [("a model called twice, first", (model, random_ids(seed, 3, 2), 4)),
            ("a model called twice, second", (model, random_ids(seed + 1, 3, 2), 4))]


held_out("ch07.q3")(lambda: _loops(731) + _same_model_twice(737) + _gpt2_eos(739))


@held_out("ch07.q4")
def _ch07_q4():
    return [(f"prompt {P}, {n} new, {'with' if cache else 'without'} a cache", (P, n, cache))
            for P, n, cache in [(6, 3, False), (6, 3, True), (2, 0, False), (5, 0, True), (12, 1, True),
                                (9, 20, False), (3, 50, True), (20, 2, False)]]
