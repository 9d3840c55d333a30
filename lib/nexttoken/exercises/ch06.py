"""Chapter 6, termination: tasks for the exercise notebook.

q1 the loop that stops on its EOS or its length limit and q2 which of the two stopped it, on the chapter's one
sequence (practice); q3 to q7 on the batch of its Going deeper (practice, in ``ch06_batch.py``); q8, the core
task: predict the layout of a finished batch.
"""

import torch

from ..generate import generate
# q3 to q7, the batch of the Going deeper, live in a module of their own; a notebook finds them here
from .ch06_batch import q3, q4, q5, q6, q7  # noqa: F401
from .common import (NO_GENERATE, eos_case, random_ids, small_model)
from ..recorder.words import tokens
from .diagnosis import Source
from .feedback import describe
from .generated import Generated
from .task import Known, Mistake, Question, Task

CHAPTER = "ch06"
TASKS = ["q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8"]
# The core tasks: what the lesson asks of every learner and what an LMS grade counts by default (the notebook's
# "[core" headings say the same: tests/exercises/test_core_only.py); the rest is practice.
CORE = ["q8"]


# q1: the core's loop, for one sequence: stop after the step whose new token is the EOS (kept), or after
# max_new_tokens steps.

def _first_written(model, prompt, n):
    """(step, token) of each token the greedy loop first writes at that step (steps count from 1), leaving
    out the prompt's tokens: an EOS id chosen from them stops the loop exactly there."""
    free = generate(model, prompt, n)[0, prompt.shape[1]:].tolist()
    seen = set(prompt[0].tolist())
    return [(i + 1, t) for i, t in enumerate(free) if t not in seen and t not in free[:i]], free


def _one_row_cases():
    model, prompt = small_model(94), random_ids(94, 1, 3)
    firsts, free = _first_written(model, prompt, 8)
    first_step, first = firsts[0]  # usually step 1
    later_step, later = next((s, t) for s, t in firsts if s >= 3)
    never = max(set(range(50)) - set(free) - set(prompt[0].tolist()))
    short_model, short = small_model(95), random_ids(95, 1, 1)
    short_never = max(set(range(50)) - set(generate(short_model, short, 15)[0].tolist()))
    return [(model, prompt, 0, first),  # no step at all
            (model, prompt, first_step + 5, first),  # an early EOS
            (model, prompt, later_step + 3, later),  # an EOS at step 3 or later, with room to spare
            (model, prompt, later_step, later),  # at the last step the limit allows: both limits at once
            (model, prompt, 5, never),  # never: the length limit stops it
            (model, prompt, 5, int(prompt[0, -1])),  # an EOS id the prompt ends with: only new tokens count
            (short_model, short, 15, short_never)]  # T = 1, and 1 + 15 = the model's context_length


def _one_row_params():
    """(seed, one row, prompt 1 to 8, 0 to 16 - prompt new tokens, which EOS, its pick, a pad that is not used)."""
    from hypothesis import strategies as st

    return st.tuples(st.integers(0, 999), st.just(1), st.integers(1, 8)).flatmap(
        lambda p: st.tuples(*map(st.just, p), st.integers(0, 16 - p[2]), st.integers(0, 2), st.integers(0, 99),
                            st.just(1), st.just(0)))


def _one_row_case(params):
    model, prompt, n, eos, _ = eos_case(params)
    return model, prompt, n, eos


@torch.no_grad()
def _until_eos(model, input_ids, max_new_tokens, eos_token_id, keep=True, steps=0, prompt_counts=False):
    """The one-row loop as a learner might write it: the EOS tested before it is appended (``keep=False``),
    ``steps`` more or fewer steps, the whole sequence tested (``prompt_counts``), or no EOS test (eos None)."""
    ids = input_ids
    for _ in range(max(max_new_tokens + steps, 0)):
        next_id = model(ids)[:, -1, :].argmax(dim=-1, keepdim=True)
        if not keep and int(next_id) == eos_token_id:
            break
        ids = torch.cat([ids, next_id], dim=1)
        if eos_token_id is not None and (int(next_id) == eos_token_id or prompt_counts and (ids == eos_token_id).any()):
            break
    return ids


def _q1_diagnose(args, expected, got):
    """Names the slip from where the answer leaves the right output: a wrong token, or where it stopped."""
    model, ids, n, eos = args
    P = ids.shape[1]
    if got.dim() != 2 or got.shape[0] != 1 or got.shape[1] < P or not torch.equal(got[:, :P], ids):
        return
    new, want = got[0, P:], expected[0, P:]
    width = min(len(new), len(want))
    wrong = (new[:width] != want[:width]).nonzero()
    if len(wrong):
        s = int(wrong[0])
        raise Mistake(f"new token {s + 1}: got {int(new[s])}, but the greedy token is {int(want[s])} (the argmax, "
                      "over the vocabulary, of the logits at the last position of the sequence so far)")
    stopped = f"the model wrote eos_token_id = {eos} at step {len(want)}"
    if len(new) > len(want):
        if len(want) and int(want[-1]) == eos:
            raise Mistake(f"the loop went on after the EOS: {stopped}; stop right after the step that appends it")
        raise Mistake(f"you generated {tokens(len(new))}, more than max_new_tokens = {n}")
    if len(new) < len(want):
        if (ids == eos).any() and eos not in new.tolist():
            raise Mistake(f"the loop stopped after {tokens(len(new))}, and none of them is the EOS: the prompt holds "
                          f"eos_token_id = {eos}, but only a generated token ends the text. Test the new token, not "
                          "the whole sequence")
        if len(new) == len(want) - 1 and int(want[-1]) == eos:
            kept = (f"the EOS was not kept: {stopped}, and your output stops just before it. Append the new token "
                    "first, then test it: the EOS is kept, so a text that ended differs from one cut off")
            if len(want) < n:
                raise Mistake(kept)
            raise Mistake(f"one token short: either {kept}; or the loop ran max_new_tokens - 1 steps, where it runs "
                          "range(max_new_tokens)")
        raise Mistake(f"you generated {tokens(len(new))}, but max_new_tokens = {n} and the model wrote no EOS: run "
                      "max_new_tokens steps (range(max_new_tokens)) unless the new token is the EOS")


q1 = Question(Task(
    rebuilds=("nexttoken.generate:generate",),
    name="q1", function="generate_until_eos", title="a loop that stops on its EOS", chapter=CHAPTER,
    cases=_one_row_cases, generated=Generated(_one_row_params, _one_row_case),
    reference=lambda model, input_ids, max_new_tokens, eos_token_id: generate(
        model, input_ids, max_new_tokens, eos_token_id=eos_token_id),
    diagnose=_q1_diagnose, forbid=NO_GENERATE,
    known=[
        Known("the EOS was not kept: you broke out of the loop before appending it. Append the new token, then "
              "test it: the EOS is kept, so a text that ended differs from one cut off",
              lambda m, ids, n, eos: _until_eos(m, ids, n, eos, keep=False)),
        Known("the loop never stops at the EOS: after appending each new token, break when it is eos_token_id",
              lambda m, ids, n, eos: _until_eos(m, ids, n, None)),
        Known("the loop stopped on an EOS id the prompt holds: only a generated token ends the text, so test the "
              "new token (next_id), not the whole sequence",
              lambda m, ids, n, eos: _until_eos(m, ids, n, eos, prompt_counts=True)),
        Known("the loop ran max_new_tokens - 1 steps: range(max_new_tokens) runs max_new_tokens of them",
              lambda m, ids, n, eos: _until_eos(m, ids, n, eos, steps=-1)),
    ],
    hints=("Two things end the loop: the limit on new tokens, and the model's own end-of-sequence token.",
           "The for loop is the length limit; the EOS test comes after the new token is appended, so that the "
           "EOS stays in the output.",
           "The chapter's generate_until_eos is this loop: one sequence, a break after the step whose new token "
           "is the EOS id."),
))


# q2: which limit stopped the loop, read from its output alone (the EOS is kept, so the output says).

def _stop_reason(output_ids, prompt_length, eos_token_id):
    new = output_ids[0, prompt_length:]
    return "eos" if len(new) > 0 and int(new[-1]) == eos_token_id else "length"


def _q2_cases():
    model, prompt = small_model(94), random_ids(94, 1, 3)
    firsts, free = _first_written(model, prompt, 8)
    (step, eos), (at_last, eos_last) = firsts[0], next((s, t) for s, t in firsts if s >= 3)

    def run(ids, n, eos):
        return generate(model, ids, n, eos_token_id=eos), ids.shape[1], eos

    never = max(set(range(50)) - set(free) - set(prompt[0].tolist()))
    ends_with_eos = torch.cat([prompt, torch.tensor([[eos]])], dim=1)  # a prompt that ends with an EOS id
    holds_eos = torch.cat([prompt[:, :1], torch.tensor([[never]]), prompt[:, 1:]], dim=1)
    return [run(prompt, at_last + 4, eos_last),  # an EOS at step 3 or later, with room to spare
            run(prompt, 5, never),  # the length limit
            run(prompt, at_last, eos_last),  # the EOS at the last step the limit allows; the text ended
            run(ends_with_eos, 0, eos),  # no new token, the prompt ends with the EOS id
            run(holds_eos, 4, never),  # an EOS id in the prompt, cut off by the limit
            run(prompt, step + 3, eos),  # an early EOS
            run(prompt[:, :1], 3, never)]  # T = 1


def _q2_diagnose(args, expected, got):
    output_ids, P, eos = args
    if isinstance(got, str) and got.lower() in ("eos", "length") and got != got.lower():
        raise Mistake(f"return 'eos' or 'length', in lower case (you returned {got!r})")
    if isinstance(got, str) and got not in ("eos", "length"):
        raise Mistake(f"return one of two words, 'eos' or 'length'; you returned {got!r}")
    if not isinstance(got, str):
        raise Mistake(f"return the word 'eos' or 'length' (a str); you returned {describe(got)}")


def _q2_error(args, error):
    output_ids, P, _ = args
    if "index -1 is out of bounds" in error and output_ids.shape[1] == P:
        return ("no new token at all (max_new_tokens was 0): there is no last new token to read, and nothing "
                "ended the text, so the length limit stopped it. Check that there are new tokens before reading "
                "the last one")


q2 = Question(Task(
    name="q2", function="stop_reason", title="which limit stopped the loop", chapter=CHAPTER,
    cases=_q2_cases, reference=_stop_reason, diagnose=_q2_diagnose, errors=_q2_error,
    known=[
        Known("you read the last token of the whole output: with no new token it is the prompt's, and a prompt "
              "that ends with the EOS id did not stop anything. Read the new tokens only, "
              "output_ids[0, prompt_length:]",
              lambda out, P, eos: "eos" if int(out[0, -1]) == eos else "length"),
        Known("an EOS id anywhere in the output does not mean the text ended: the prompt may hold one. Only the "
              "last new token says it",
              lambda out, P, eos: "eos" if (out == eos).any() else "length"),
        Known("you read the first new token: the loop stops right after writing its EOS, so the EOS, when there is "
              "one, is the last new token, output_ids[0, -1] when there are new tokens",
              lambda out, P, eos: "eos" if out.shape[1] > P and int(out[0, P]) == eos else "length"),
    ],
    hints=("The loop keeps its EOS: what does the output of a text that ended look like, and of one cut off?",
           "Only the new tokens, after prompt_length, can end the text; with no new token at all, nothing did.",
           "Look at the last of the new tokens, if there is one."),
))

# q8 (predict): the layout of a finished batch. Given the step at which each row first produces EOS, which of
# the new slots hold padding, and how many new slots are there? tests/exercises/ checks this rule against
# nexttoken.generate on real models.

def _pad_layout(eos_steps, max_new_tokens, pad_after=0):
    """``pad_after`` shifts where padding starts (0: right after the EOS step), for the known mistakes."""
    finished_at = [s if s is not None and s <= max_new_tokens else None for s in eos_steps]
    every_row_finishes = all(s is not None for s in finished_at)
    width = max(finished_at) if every_row_finishes else max_new_tokens
    step = torch.arange(1, width + 1)  # the first new token is step 1
    rows = [step > (s + pad_after if s is not None else width) for s in finished_at]
    return torch.stack(rows)


def _q8_diagnose(args, expected, got):
    eos_steps, n = args
    if got.dtype == torch.bool and got.dim() == 2 and got.shape[0] == expected.shape[0]:
        if got.shape[1] > expected.shape[1]:
            raise Mistake("too many slots: the loop stops as soon as every row has produced EOS, so the "
                          "output is as wide as the last row's EOS step (or max_new_tokens)")
        if got.shape[1] < expected.shape[1]:
            raise Mistake("too few slots: the loop goes on while any row is unfinished (up to max_new_tokens); "
                          "a row that never produces EOS, or produces it after max_new_tokens, keeps it going")


q8 = Question(Task(
    name="q8", function="pad_layout", title="predict the padding of a finished batch", chapter=CHAPTER,
    kind="predict",
    cases=lambda: [([5, 9, 12], 15), ([3], 3), ([None, 2], 4), ([1, 1], 6), ([7, None, 2], 5), ([2, 4], 0),
                   ([2, 6, 4], 5)],
    reference=_pad_layout, diagnose=_q8_diagnose,
    source=lambda steps, n: Source(bounds=tuple(steps), limit=n),  # each row's EOS step: where its padding starts
    known=[
        Known("the EOS token itself is not padding: padding starts at the step after a row's EOS",
              lambda steps, n: _pad_layout(steps, n, pad_after=-1)),
        Known("one slot late: a row whose EOS is at step s (counting from 1) is padding from step s + 1, "
              "which is slot index s (0-based)", lambda steps, n: _pad_layout(steps, n, pad_after=1)),
    ],
    hints=("Two questions: how many steps does the loop run, and in each row which of those slots come after "
           "its EOS?",
           "The loop stops when all rows have finished or after max_new_tokens steps. A row whose EOS comes at "
           "step s (counting from 1) holds real tokens up to and including step s, padding after it.",
           "width = max(eos_steps) if every row has an EOS step <= max_new_tokens, else max_new_tokens; row r "
           "is True at slot index i (step i + 1) when i + 1 > its EOS step."),
))
