"""Chapter 6's practice tasks on a batch (the chapter's Going deeper): a flag per row (q3), padding (q4), the
batch loop (q5), left padding (q6) and the context window (q7). ``nexttoken.exercises.ch06`` holds them with
its other tasks: a notebook asks for ``ch06.q3``, never for this module."""

import torch

from ..generate import generate
from .common import (NO_GENERATE, count_new_tokens, eos_case, random_ids, right_padded, small_model,
                     stopping_at_every_step, with_gpt2_eos)
from ..recorder.words import tokens
from .generated import Generated
from .task import Known, Mistake, Question, Task

CHAPTER = "ch06"


PYTHON_OR = ("Python's or, and, not and if need one True or False, and a tensor of several rows is neither "
             "(\"Boolean value of Tensor ... is ambiguous\"): combine the flags row by row with the tensor "
             "operators |, & and ~")


def _update(finished, next_tokens, eos_token_id):
    return finished | (next_tokens == eos_token_id)


q3 = Question(Task(
    name="q3", function="update_finished", title="which rows have finished", chapter=CHAPTER,
    cases=lambda: [(torch.tensor([False, False, True]), torch.tensor([7, 3, 5]), 3),
                   (torch.tensor([False]), torch.tensor([0]), 0), (torch.tensor([True]), torch.tensor([4]), 0),
                   (torch.tensor([False, True, True, False]), torch.tensor([3, 1, 3, 2]), 3)],
    reference=_update, errors=lambda args, error: PYTHON_OR if "Boolean value of Tensor" in error else None,
    known=[
        Known("a row that had finished is unfinished again: once a row produced EOS it stays finished "
              "(combine the old flags with the new ones, do not overwrite them)",
              lambda f, t, e: t == e),
        Known("every row was marked finished as soon as one row produced EOS: .any() turns the batch's flags into "
              "one; keep a flag per row, finished | (next_tokens == eos_token_id)",
              lambda f, t, e: f | (t == e).any()),
        Known("!= marks the rows whose token is *not* the EOS: a row finishes when its new token equals "
              "eos_token_id (==)", lambda f, t, e: f | (t != e)),
        Known("that is the rule of the opposite flag, unfinished (still running: unfinished & ~(next_tokens == "
              "eos_token_id)); a finished flag turns True when the row produces EOS and stays True: "
              "finished | (next_tokens == eos_token_id)", lambda f, t, e: f & ~(t == e)),
        Known("you combined with 'and': a row is finished if it was finished *or* it just produced EOS",
              lambda f, t, e: f & (t == e)),
        Known("you combined with 'xor' (^): a finished row that produces EOS again must stay finished; use |",
              lambda f, t, e: f ^ (t == e)),
        Known("the flags are inverted: True means finished (had EOS), not still running",
              lambda f, t, e: ~(f | (t == e))),
    ],
    hints=("A row is finished after this step for one of two reasons.",
           "It was already finished, or its new token is the EOS id; a comparison of a tensor with an int "
           "gives a bool tensor.",
           "Combine the old flags and (next_tokens == eos_token_id) with |, returning a new tensor."),
))


def _pad(next_tokens, finished, pad_token_id):
    return torch.where(finished, pad_token_id, next_tokens)


q4 = Question(Task(
    name="q4", function="pad_finished", title="padding finished rows", chapter=CHAPTER,
    cases=lambda: [(torch.tensor([4, 9, 2]), torch.tensor([False, True, False]), 0),
                   (torch.tensor([5]), torch.tensor([True]), 7),
                   (torch.tensor([3, 3, 8, 1]), torch.tensor([True, False, False, True]), 9),
                   (torch.tensor([9, 0, 9]), torch.tensor([False, True, False]), 9)],  # the pad id is a real token too
    reference=_pad,
    known=[
        Known("the rows are swapped: the rows that had finished get the pad id, the others keep their token",
              lambda t, f, p: torch.where(f, t, p)),
        Known("every row got the pad id: only the rows that had finished before this step are padded",
              lambda t, f, p: torch.full_like(t, p)),
        Known("the finished rows got 0, not pad_token_id: multiplying by the flags only works when the pad id "
              "is 0; use torch.where", lambda t, f, p: t * ~f),
    ],
    hints=("Each row either keeps its token or gets padding, depending on its flag.",
           "The flags are the ones from *before* this step: a row that writes EOS now keeps it.",
           "torch.where(condition, value_if_true, value_if_false) picks per row, and an int broadcasts."),
))


def _q5_cases():
    model = small_model(94)
    prompt = random_ids(94, 3, 3)
    free = generate(model, prompt, 6)[:, 3:]  # tokens greedy decoding really produces, so rows stop at
    stops_all = min(set.intersection(*(set(row[:5].tolist()) for row in free)))  # different steps
    never = max(set(range(50)) - set(free.flatten().tolist()))
    in_prompt = int(prompt[0, -1])  # an EOS id that the prompt already holds: that row has not finished
    produced = int(free[1, 1])  # a pad id that row 1 produces at step 2, before any EOS, then moves on
    return [(model, prompt, 0, stops_all, 0), (model, prompt[:1], 1, int(free[0, 0]), 49),
            (model, prompt[1:], 6, int(free[1, 0]), 49), (model, prompt, 6, stops_all, 0),
            (model, prompt, 6, int(free[0, 1]), 0), (model, prompt, 4, never, 0),
            (model, prompt, 6, in_prompt, produced), (model, prompt, 6, int(free[0, 2]), produced),
            # pad == EOS (the library's default) and the prompt ends with it, in a batch and alone: a row
            # that counts the prompt's EOS ("any EOS in the row") or reads "last token == pad" as finished
            # is padded from step 1; with pad != EOS the same rule is caught by the case above
            (model, prompt, 6, in_prompt, in_prompt), (model, prompt[:1], 6, in_prompt, in_prompt),
            # row 1 alone produces the pad id before any EOS, then other tokens: producing the pad id is not
            # finishing ("finished when the last token is the pad id" pads it from step 3)
            (model, prompt[1:2], 6, never, produced),
            # rows finishing at steps 1, 2, 3 and 4, once with pad != EOS and once with pad == EOS (there a
            # flag that is not kept, finished = next == EOS, stays True only because the pads are EOS)
            stopping_at_every_step(91, 4, pad=0), stopping_at_every_step(91, 4)]


def _eos_params():
    """(seed, rows 1 to 3, prompt 1 to 8, then 0 to 16 - prompt new tokens, which EOS, which pad). The EOS
    is a token the model produces (kind 0), one the prompt holds (1) or any id (2); the pad id is a token
    the model produces (0) or any id (1). A pick chooses among them."""
    from hypothesis import strategies as st

    return st.tuples(st.integers(0, 999), st.integers(1, 3), st.integers(1, 8)).flatmap(
        lambda p: st.tuples(*map(st.just, p), st.integers(0, 16 - p[2]), st.integers(0, 2), st.integers(0, 99),
                            st.integers(0, 1), st.integers(0, 99)))


def _q5_diagnose(args, expected, got):
    """Names the mistake from the first new slot where the answer leaves the right output (or from where
    it stopped, when all the slots it has are right)."""
    model, ids, n, eos, pad = args
    P = ids.shape[1]
    if got.dim() != 2 or got.shape[0] != expected.shape[0]:
        return
    new, want = got[:, P:], expected[:, P:]
    width = min(new.shape[1], want.shape[1])
    wrong = (new[:, :width] != want[:, :width]).nonzero()
    if len(wrong):
        row, s = (int(i) for i in min(wrong.tolist(), key=lambda rs: (rs[1], rs[0])))
        here = f"row {row} of input_ids, new token {s + 1}"
        if (want[row, :s] == eos).any():
            raise Mistake(f"{here}: that row finished (it produced eos_token_id = {eos}) but was not padded "
                          "after its EOS: later slots of a finished row hold pad_token_id")
        if new[row, s] == pad and want[row, s] == eos:
            raise Mistake(f"{here}: its EOS token was replaced by padding; the EOS is kept, only the slots after "
                          "it are padding (pad with the flags from before the step)")
        if new[row, s] == pad and s == 0 and (ids[row] == eos).any():
            raise Mistake(f"{here}: padded from the start because its prompt holds eos_token_id = {eos}; only "
                          "generated tokens finish a row (start with every row unfinished)")
        if new[row, s] == pad and s > 0 and new[row, s - 1] == pad != eos:
            raise Mistake(f"{here}: the row was treated as finished after it produced pad_token_id = {pad} as "
                          f"a real token; only eos_token_id = {eos} finishes a row: keep a flag per row, set "
                          "by EOS, rather than reading the last token")
        if new[row, s] == pad:
            raise Mistake(f"{here}: padded, but that row had not produced eos_token_id = {eos} yet")
        raise Mistake(f"{here}: got {int(new[row, s])}, but the greedy token is {int(want[row, s])} (the "
                      "argmax over the vocabulary of the logits at the last position): was it sampled, or "
                      "read from another position or another row?")
    if new.shape[1] > want.shape[1]:
        if not (want == eos).any(-1).all() or new.shape[1] > n:
            raise Mistake(f"you generated {tokens(new.shape[1])}, more than max_new_tokens = {n}")
        raise Mistake("the loop went on after every row had finished: stop as soon as all rows are done")
    if new.shape[1] < want.shape[1]:
        if new.shape[1] == want.shape[1] - 1 and (want[:, -1] == eos).any() and (want == eos).any(-1).all():
            row = int((want[:, -1] == eos).nonzero()[0])
            eos_lost = (f"the last step produced row {row}'s EOS (eos_token_id = {eos}), which finished every "
                        "row, but that EOS was not appended. Append the step's tokens first, EOS included, then "
                        "update the flags, then break")
            if want.shape[1] < n:  # the right loop broke early: a loop of max_new_tokens - 1 steps would too
                raise Mistake(f"the loop stopped one token early: {eos_lost}")
            raise Mistake(f"you generated {tokens(new.shape[1])}, one fewer than max_new_tokens = {n}: either "
                          f"{eos_lost}; or the loop ran max_new_tokens - 1 steps, where it runs "
                          "range(max_new_tokens)")
        done = (new == eos).any(-1)
        early = [r for r in range(len(ids)) if (ids[r] == eos).any() and not done[r]]
        if early and new.shape[1] == 0:
            raise Mistake(f"no new token at all: row {early[0]}'s prompt holds eos_token_id = {eos}, but only "
                          "generated tokens finish a row (start with every row unfinished)")
        if done.any():
            raise Mistake(f"the loop stopped after {tokens(new.shape[1])}, when only row {int(done.nonzero()[0])} "
                          "had finished: stop when *all* rows are done (or after max_new_tokens), not when one is")
        short = "one fewer than" if new.shape[1] == n - 1 else "but"
        raise Mistake(f"you generated {tokens(new.shape[1])}, {short} max_new_tokens = {n}, and no row had "
                      "finished: run max_new_tokens steps (range(max_new_tokens)) unless every row produced EOS")


@torch.no_grad()
def _batch_loop(model, input_ids, max_new_tokens, eos_token_id, pad_token_id, swapped=False, kept=True):
    """The batch loop as a learner might write it: torch.where's branches swapped, or the flags overwritten
    at each step instead of kept."""
    ids, finished = input_ids, torch.zeros(input_ids.shape[0], dtype=torch.bool)
    for _ in range(max_new_tokens):
        next_tokens = model(ids)[:, -1, :].argmax(dim=-1)
        next_tokens = (torch.where(finished, next_tokens, pad_token_id) if swapped
                       else torch.where(finished, pad_token_id, next_tokens))
        ids = torch.cat([ids, next_tokens[:, None]], dim=1)
        finished = finished | (next_tokens == eos_token_id) if kept else next_tokens == eos_token_id
        if finished.all():
            break
    return ids


def _q5_error(args, error):
    if "cannot be converted to Scalar" in error:
        return ("`.item()` reads one number, and a batch has a token per row: the core's one-row test, "
                "next_id.item() == eos_token_id, cannot say which rows have finished. Keep a flag per row, "
                "finished = finished | (next_tokens == eos_token_id), and stop when finished.all()")
    if "Boolean value of Tensor" in error:
        return PYTHON_OR.replace("the flags row by row", "the flags row by row (and test finished.all())")


q5 = Question(Task(
    rebuilds=("nexttoken.generate:generate",),
    name="q5", function="generate_with_eos", title="a batch loop that stops", chapter=CHAPTER,
    cases=_q5_cases, generated=Generated(_eos_params, eos_case),
    reference=lambda model, input_ids, max_new_tokens, eos_token_id, pad_token_id: generate(
        model, input_ids, max_new_tokens, eos_token_id=eos_token_id, pad_token_id=pad_token_id),
    diagnose=_q5_diagnose, errors=_q5_error, forbid=NO_GENERATE,
    known=[
        Known("torch.where's branches are swapped: torch.where(condition, a, b) takes a where the condition is "
              "True, so torch.where(finished, next_tokens, pad_token_id) pads the rows still running and lets the "
              "finished ones go on. The finished rows get the pad: torch.where(finished, pad_token_id, next_tokens)",
              lambda *args: _batch_loop(*args, swapped=True)),
        Known("the flags are overwritten at each step (finished = next_tokens == eos_token_id), so a row that "
              "finished counts as running again at the next step, gets the model's token instead of the pad, and "
              "the loop may not stop. Keep them: finished = finished | (next_tokens == eos_token_id)",
              lambda *args: _batch_loop(*args, kept=False)),
    ],
    hints=("Keep one flag per row, and decide after each step whether to go on.",
           "Each step: pick the greedy token, pad it where the row had already finished, append it, then "
           "update the flags.",
           "Pad with torch.where(finished, pad_token_id, next_tokens) (question 4's pad_finished), append, "
           "then update the flags with your update_finished, and break when finished.all()."),
))


def _left(input_ids, attention_mask):
    order = torch.argsort(attention_mask, dim=1, stable=True)  # pads (0) first, real tokens (1) after, in order
    return input_ids.gather(1, order), attention_mask.gather(1, order)


def _q6_cases():
    # Rows 40 wide: an argsort that is not stable reorders equal keys (the real tokens) from about 17 on.
    return [(torch.tensor([[5, 6, 0]]), torch.tensor([[1, 1, 0]])), (torch.tensor([[8]]), torch.tensor([[1]])),
            (torch.tensor([[11, 12, 13, 0, 0], [21, 22, 23, 24, 25], [0, 0, 31, 32, 33], [41, 0, 0, 0, 0]]),
             torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 1, 1, 1], [1, 0, 0, 0, 0]])),
            right_padded([3, 7], 8, seed=1), right_padded([25, 40, 2], 40, seed=2)]


def _padding_params():
    """(width 1 to 40, the real tokens of 1 to 4 rows, a seed). Half the widths are drawn from 30 to 40:
    rows that wide expose a sort that is not stable (hypothesis favours small numbers)."""
    from hypothesis import strategies as st

    return st.one_of(st.integers(1, 40), st.integers(30, 40)).flatmap(lambda T: st.tuples(
        st.just(T), st.lists(st.integers(1, T), min_size=1, max_size=4), st.integers(0, 999)))


def _padding_case(params):
    T, lengths, seed = params
    return right_padded(lengths, T, seed)


def _q6_diagnose(args, expected, got):
    if isinstance(got, torch.Tensor):
        raise Mistake("return two tensors, (input_ids, attention_mask), both left-padded")


q6 = Question(Task(
    name="q6", function="to_left_padding", title="right padding to left padding", chapter=CHAPTER,
    cases=_q6_cases, generated=Generated(_padding_params, _padding_case), reference=_left, diagnose=_q6_diagnose,
    known=[
        Known("you reversed the rows: the real tokens must stay in their order, only moved to the end",
              lambda ids, m: (ids.flip(1), m.flip(1))),
        Known("the tokens did not move: move each row's real tokens to the end, and its pad slots to the front",
              lambda ids, m: (ids, _left(ids, m)[1])),
        Known("the mask did not move: attention_mask must follow the tokens (0s first, then 1s)",
              lambda ids, m: (_left(ids, m)[0], m)),
        Known("the real tokens changed order: a sort that is not stable may reorder equal keys (every real "
              "token has key 1); use torch.argsort(attention_mask, dim=1, stable=True)",
              lambda ids, m: (ids.gather(1, torch.argsort(m, dim=1)), m.gather(1, torch.argsort(m, dim=1)))),
        Known("every row was shifted by the same amount; each row has its own number of pad slots (and a row "
              "that is already left-padded must stay as it is)",
              lambda ids, m: (lambda k: (ids.roll(k, 1), m.roll(k, 1)))(int((m == 0).sum(1).max()))),
    ],
    hints=("In a right-padded row the pad slots come after the real tokens; a left-padded model wants them "
           "before. Rows differ in how many pads they have.",
           "Think of it as a per-row reordering of positions: pad slots first, then the real tokens in their "
           "original order. The same reordering applies to the ids and the mask.",
           "A *stable* sort of each row of attention_mask (torch.argsort(..., stable=True)) gives that order; "
           "apply it to both tensors with .gather(1, order)."),
))


def _q7_cases():
    return [(small_model(7, context_length=6), random_ids(7, 1, 4), 0),
            (small_model(9, context_length=4), random_ids(9, 2, 3), 1),  # one step, no crop yet
            (small_model(7, context_length=6), random_ids(7, 1, 4), 5),
            (small_model(8, context_length=5), random_ids(8, 2, 5), 6),
            # GPT-2's vocabulary, its EOS id 50256 at new token 2: still exactly max_new_tokens here
            (*with_gpt2_eos(142, length=2, context_length=4), 6)]


def _crop_params():
    """(seed, rows 1 to 2, context_length 2 to 6, a prompt that fits it, 0 to 8 new tokens): most runs
    go past the window."""
    from hypothesis import strategies as st

    return st.tuples(st.integers(0, 999), st.integers(1, 2), st.integers(2, 6)).flatmap(
        lambda p: st.tuples(*map(st.just, p), st.integers(1, p[2]), st.integers(0, 8)))


def _crop_case(params):
    seed, rows, L, length, n = params
    return small_model(seed, context_length=L), random_ids(seed, rows, length), n


@torch.no_grad()
def _crop_loop(m, ids, n, window):
    for _ in range(n):
        ids = torch.cat([ids, m(window(ids))[:, -1].argmax(-1)[:, None]], dim=1)
    return ids


q7 = Question(Task(
    rebuilds=("nexttoken.generate:generate",),
    name="q7", function="generate_cropped", title="generating past the context window", chapter=CHAPTER,
    cases=_q7_cases, generated=Generated(_crop_params, _crop_case),
    reference=lambda model, input_ids, max_new_tokens: generate(model, input_ids, max_new_tokens), forbid=NO_GENERATE,
    diagnose=lambda args, expected, got: count_new_tokens(args[1], args[2], got),
    known=[
        Known("you kept the *first* context_length tokens; the model must read the most recent ones, "
              "ids[:, -L:]", lambda m, ids, n: _crop_loop(m, ids, n, lambda x: x[:, :m.config.context_length])),
        Known("off by one: the window holds context_length tokens, ids[:, -L:], not L - 1",
              lambda m, ids, n: _crop_loop(m, ids, n, lambda x: x[:, -(m.config.context_length - 1):])),
        Known("you returned only the cropped window: the output keeps everything, the full prompt included; only "
              "what the model reads is cropped",
              lambda m, ids, n: generate(m, ids, n)[:, -m.config.context_length:]),
    ],
    hints=("The model has no position embedding past context_length - 1, so it cannot read a longer sequence. "
           "Which tokens matter most for the next one?",
           "Before each forward pass, keep only the last L = model.config.context_length tokens; the sequence "
           "you give back still grows by one token a step.",
           "logits = model(ids[:, -L:]) inside chapter 5's loop; append to ids, not to the window."),
))
