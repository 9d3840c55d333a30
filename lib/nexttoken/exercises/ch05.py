"""Chapter 5, the generation loop: tasks for the exercise notebook."""

import torch

from ..chain_rule import token_log_probs
from ..generate import generate, sample
from ..tokenizer import END_OF_TEXT_ID
from ..recorder import watches
from .common import (NO_GENERATE, advanced_generator, bigram_table, count_new_tokens, flat_model, loop_case,
                     loop_params, loud, overflowed, random_ids, small_model, with_gpt2_eos)
from . import diagnosis
from .diagnosis import Source
from .feedback import describe, matches, show
from .generated import Generated
from .task import Known, Mistake, Question, Task

CHAPTER = "ch05"
TASKS = ["q1", "q2", "q3", "q4", "q5"]
# The core tasks: what the lesson asks of every learner and what an LMS grade counts by default (the notebook's
# "[core" headings say the same: tests/exercises/test_core_only.py); the rest is practice.
CORE = ["q2"]


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
    B, T = ids.shape
    if T > 1 and tuple(got.shape) == (B, 2 * T) and torch.equal(got[:, :T].long(), ids):
        raise Mistake(f"you appended {T} tokens per row, one per position: the argmax was taken over the logits "
                      f"of every position, (B, T, V) -> (B, T). Take the last position's first, logits[:, -1, :] "
                      f"(B, V), then argmax(dim=-1): one new token per row")
    if tuple(got.shape) == (2 * B, T) and torch.equal(got[:B].long(), ids):
        raise Mistake("you joined along dim=0, the rows: the new tokens came out as extra rows under the "
                      "sequences. Append each row's token at its end: torch.cat([input_ids, next_token[:, None]], "
                      "dim=1)")
    if got.shape == expected.shape and not torch.equal(got[:, :-1].long(), ids):
        raise Mistake("the context changed: keep input_ids as they are and add one token at the end")
    if got.shape == expected.shape and not torch.equal(got, expected):
        rows = (got[:, -1] != expected[:, -1]).nonzero().flatten().tolist()
        raise Mistake(f"the new token of row {rows[0]} is {int(got[rows[0], -1])}, not the most probable one, "
                      f"{int(expected[rows[0], -1])}: this step is greedy, the argmax (dim=-1) of the last "
                      "position's scores; a draw (torch.multinomial) picks other tokens")


def _q1_error(args, error):
    model, ids = args
    if "except in dimension 0" in error:
        return ("you joined along dim=0, the rows: that stacks the new tokens under the sequences as extra rows. "
                "Each row gets its token at its end, along the time axis: torch.cat([input_ids, "
                "next_token[:, None]], dim=1)")
    if "except in dimension 1" in error and f"got size {model.config.vocab_size}" in error:
        return ("the argmax went over the rows (dim=0): that gives one index per vocabulary entry, "
                f"{model.config.vocab_size} of them, not one token per row. Take the argmax over the vocabulary, "
                "argmax(dim=-1), (B,)")
    if "same number of dimensions" in error:
        return ("the new tokens are (B,), one per row, and input_ids is (B, T): torch.cat joins tensors with the "
                "same number of dimensions. Make the new tokens a column, next_token[:, None] (B, 1), then "
                "torch.cat([input_ids, next_token[:, None]], dim=1)")


q1 = Question(Task(
    rebuilds=("nexttoken.generate:generate",),
    name="q1", function="generation_step", title="one greedy step", chapter=CHAPTER, errors=_q1_error,
    # case 0: the greedy tokens at positions 0, 1, 2 and 3 all differ, so that reading the wrong position shows
    # before the T = 1 case, where logits[:, -2] raises
    cases=lambda: [(small_model(8), random_ids(8, 1, 4)), (small_model(10), random_ids(10, 1, 1)),
                   (small_model(6), random_ids(6, 3, 7))],
    reference=_step, diagnose=_q1_diagnose, forbid=NO_GENERATE,
    known=[
        Known("every row got the same token: logits[0, -1] (row 0's prediction) or an argmax without dim= "
              "gives one token for the whole batch; keep the batch dimension and take argmax(dim=-1)",
              torch.no_grad()(lambda m, ids: _append(ids, m(ids)[0, -1].argmax().expand(ids.shape[0])))),
        Known("the argmax went over all rows' scores at once (no dim=), which gives one index into B * V "
              "numbers: one token for the whole batch, and not even a token id. Take argmax(dim=-1)",
              torch.no_grad()(lambda m, ids: _append(ids, m(ids)[:, -1].argmax().expand(ids.shape[0])))),
        Known("you used the first position's prediction; the last position predicts the next token",
              torch.no_grad()(lambda m, ids: _append(ids, m(ids)[:, 0].argmax(-1)))),
        Known("you used the second-to-last position's prediction (logits[:, -2]): it predicts the token the "
              "sequence already has at its end; the last position, logits[:, -1], predicts the next one",
              torch.no_grad()(lambda m, ids: _append(ids, m(ids)[:, -2].argmax(-1)))),
        Known("the model read only the last token: run it on the whole context, model(input_ids)",
              torch.no_grad()(lambda m, ids: _append(ids, m(ids[:, -1:])[:, -1].argmax(-1)))),
        Known("you picked the least likely token (argmin); greedy takes the most likely, argmax",
              torch.no_grad()(lambda m, ids: _append(ids, m(ids)[:, -1].argmin(-1)))),
    ],
    hints=("Five operations: forward, slice, softmax, select, append.",
           "The selected ids have one entry per row, shape (B,); the sequence is (B, T).",
           "Make the new ids a column (next_token[:, None]) and torch.cat it after input_ids along the time axis."),
))


def _new_token_log_prob(model, ids, P):
    """log p(ids[:, P:] | ids[:, :P]) per row by the chain rule, from one pass over the whole sequence
    (chapter 1's teacher forcing): float (B,), 0 for no new tokens."""
    if ids.shape[1] == P:
        return torch.zeros(ids.shape[0])
    return token_log_probs(model, ids)[:, P - 1:].sum(dim=-1)


@torch.no_grad()
def _generate_scored(model, input_ids, max_new_tokens):
    ids = generate(model, input_ids, max_new_tokens)
    return ids, _new_token_log_prob(model, ids, input_ids.shape[1])


@torch.no_grad()
def _q2_source(model, input_ids, max_new_tokens):
    """The reference loop's steps, for the diagnosis: each step's log-probabilities (from one pass over the
    output, as the reference scores it), their raw logits, the tokens chosen and the last token each step read."""
    ids, P = generate(model, input_ids, max_new_tokens), input_ids.shape[1]
    logits = model(ids)[:, P - 1:-1].float()
    return Source(prompt_length=P, steps=torch.log_softmax(logits, -1), chosen=ids[:, P:], fed=ids[:, P - 1:-1],
                  step_logits=logits)


def _q2_diagnose(args, expected, got):
    model, ids, n = args
    if not isinstance(got, (tuple, list)):
        if isinstance(got, torch.Tensor) and got.dim() == 2:
            raise Mistake("you returned only the sequence: return a pair (ids, log_prob), the log-probability "
                          "of the new tokens beside them")
        return
    if len(got) != 2 or not isinstance(got[0], torch.Tensor):
        return
    count_new_tokens(ids, n, got[0])
    B = ids.shape[0]
    if n > 0 and isinstance(got[1], torch.Tensor) and tuple(got[1].shape) == (B, B) \
            and matches(expected[1][:, None].expand(B, B), got[1]):
        raise Mistake(f"log_prob is ({B}, {B}), not ({B},), each column the right sums: a step's score kept as a "
                      f"column (B, 1), added to a total of shape (B,), broadcasts to a (B, B) table. Keep each "
                      f"step's score as (B,): gather(...)[:, 0], or squeeze(-1)")
    if n > 0 and isinstance(got[1], torch.Tensor) and tuple(got[1].shape) == (B, B):
        raise Mistake(f"log_prob is ({B}, {B}), not ({B},): log_probs[:, next_id] takes every row's entries at "
                      f"every row's token, a (B, B) table (the entries you want are its diagonal). Take each row's "
                      f"own token's entry: log_probs.gather(-1, next_id[:, None])[:, 0], or "
                      f"log_probs[torch.arange(B), next_id]")
    if not (isinstance(got[1], torch.Tensor) and got[1].is_floating_point() and tuple(got[1].shape) == (B,)):
        raise Mistake(f"log_prob should be a float tensor of shape (B,) = ({B},), one sum per row of input_ids"
                      f"{' (zeros: with max_new_tokens = 0 there is nothing to score)' if n == 0 else ''}; yours "
                      f"is {describe(got[1])}")
    if n == 0 and torch.equal(got[0], expected[0]) and (got[1] != 0).any():
        raise Mistake("with max_new_tokens = 0 there are no new tokens to score, so log_prob should be zeros (a sum "
                      "of no terms): score the new tokens only, not the prompt's, on a total that starts from "
                      "torch.zeros(B)")
    if torch.equal(got[0], expected[0]) and (got[1] > 0).any() and diagnosis.name(expected, got) is None:
        raise Mistake("log_prob is above 0, so it is not a log-probability: a probability is at most 1 and its "
                      "log at most 0. Take each chosen token's log-softmax (not its logit, nor a probability "
                      "summed), and sum those")


def _flat_gpt2_model(seed):
    model = small_model(seed, vocab_size=END_OF_TEXT_ID + 1)
    with torch.no_grad():
        model.lm_head.weight.mul_(0.01)
    return model


def _scored_loop(score, combine=sum, read=lambda ids, prompt: ids, pick=lambda logits: logits[:, -1], empty=0.0):
    """A greedy loop that also scores its tokens, as a learner might: ``read(ids, prompt)`` is what the model
    reads, ``pick`` the logits it selects from (B, V), ``score(those logits, token)`` each step's score,
    ``combine`` the steps' scores (B,), ``empty`` the score of no step."""
    @torch.no_grad()
    def loop(m, prompt, n):
        ids, scores = prompt, []
        for _ in range(n):
            logits = pick(m(read(ids, prompt))).float()
            token = logits.argmax(-1)
            scores.append(score(logits, token))
            ids = torch.cat([ids, token[:, None]], dim=1)
        return ids, combine(scores) if scores else torch.full((prompt.shape[0],), empty)
    return loop


def _chosen(values, token):
    return values.gather(-1, token[:, None])[:, 0]


def _log_p(logits, token):
    return _chosen(torch.log_softmax(logits, -1), token)


def _product(scores):
    return torch.stack(scores).prod(dim=0)


q2 = Question(Task(
    name="q2", function="generate_greedy", title="the generation loop, scored by the chain rule", chapter=CHAPTER,
    cases=lambda: [(small_model(9), random_ids(9, 1, 4), 0), (small_model(11), random_ids(11, 2, 3), 1),
                   (small_model(70), random_ids(70, 1, 3), 5), (small_model(83), random_ids(83, 3, 2), 8),
                   (small_model(120), random_ids(120, 1, 1), 15),  # 1 + 15 = context_length 16, the longest
                   # GPT-2's vocabulary, whose greedy tokens hold its EOS id 50256 at step 2: a loop that stops
                   # there is not the task's (exactly max_new_tokens; EOS comes in chapter 6)
                   (*with_gpt2_eos(140), 6),
                   # GPT-2's vocabulary and a flat head: the chosen tokens' probabilities, near 1 / 50257, multiply
                   # to below float32's smallest number within 15 steps, so a product of them underflows to 0
                   (_flat_gpt2_model(150), random_ids(150, 1, 1), 15)],
    generated=Generated(loop_params, loop_case),  # then 0 to 15 new tokens from prompts of 1 to 16, 1 to 3 rows
    reference=_generate_scored, diagnose=_q2_diagnose, forbid=NO_GENERATE, source=_q2_source,
    known=[
        Known("every new token is the same one: each step must run the model on the sequence so far, "
              "including the tokens it just generated (feed the loop's output back in, and read its last "
              "position)", _scored_loop(_log_p, read=lambda ids, prompt: prompt)),
        Known("the model read only the newest token at each step: without a cache it must read the whole "
              "sequence so far", _scored_loop(_log_p, read=lambda ids, prompt: ids[:, -1:])),
        Known("after the first step the model read only the newest token: a model without a cache (chapter 7) "
              "keeps nothing between calls, so each step must read the whole sequence so far, model(ids), "
              "not the token just chosen",
              _scored_loop(_log_p, read=lambda ids, prompt: ids if ids.shape[1] == prompt.shape[1] else ids[:, -1:])),
        Known("every row got row 0's tokens: logits[0, -1] serves a batch of one only; use logits[:, -1, :]",
              _scored_loop(_log_p, pick=lambda logits: logits[0, -1].expand(logits.shape[0], -1))),
        Known("you used the first position's prediction at each step; the last position predicts the next token",
              _scored_loop(_log_p, pick=lambda logits: logits[:, 0])),
        Known("log_prob is the product of the chosen tokens' probabilities, p(new tokens | prompt) itself: the "
              "task asks for its log, the sum of their log-probabilities (a product of many factors below 1 "
              "underflows, chapter 1)",
              _scored_loop(lambda lg, t: _chosen(torch.softmax(lg, -1), t), _product, empty=1.0)),
        Known("log_prob adds up probabilities: the chain rule multiplies them, so in log space it adds their "
              "logs. Sum torch.log_softmax(...) of each chosen token",
              _scored_loop(lambda lg, t: _chosen(torch.softmax(lg, -1), t))),
        Known("log_prob averages the log-probabilities: the chain rule's log is their sum (a mean is the "
              "per-token score, not the sequence's)", _scored_loop(_log_p, lambda s: sum(s) / len(s))),
        Known("log_prob sums the chosen tokens' logits, which are not log-probabilities until normalised: take "
              "torch.log_softmax of the last position's logits, then each chosen token's entry",
              _scored_loop(_chosen)),
        Known("log_prob holds only the last step's log-probability: add every step's (start from 0 and accumulate)",
              _scored_loop(_log_p, lambda s: s[-1])),
    ],
    hints=("The loop already computes, at each step, the distribution it selects the token from: the "
           "chain rule's factor for that token.",
           "At each step, beside the argmax, take the chosen token's log-probability, log_softmax(logits)[row, "
           "token], and add it to a running total per row, shape (B,), starting from zeros. For every row at "
           "once that is log_probs[torch.arange(B), token] (log_probs[:, token] would be (B, B)).",
           "log_probs = torch.log_softmax(model(ids)[:, -1, :], dim=-1); token = log_probs.argmax(-1); "
           "total += log_probs.gather(-1, token[:, None])[:, 0]; then append the token."),
))


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
    return bigram_table(seed, V), random_ids(seed, rows, length, vocab=V), n


def _q3_cases():
    return [(bigram_table(35, 5), torch.tensor([[1], [4]]), 0), (bigram_table(36, 5), torch.tensor([[3, 0]]), 1),
            (bigram_table(33, 6), torch.tensor([[2]]), 6),
            (bigram_table(34, 8), torch.tensor([[0, 5], [3, 1]]), 6)]


q3 = Question(Task(
    name="q3", function="generate_from_bigram", title="the loop on chapter 1's bigram model", chapter=CHAPTER,
    cases=_q3_cases, generated=Generated(_bigram_params, _bigram_case), reference=_bigram_greedy,
    diagnose=lambda args, expected, got: count_new_tokens(args[1], args[2], got),
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
))


@torch.no_grad()
def _sample_step(model, input_ids, generator):
    probs = torch.softmax(model(input_ids)[:, -1, :], dim=-1)
    return _append(input_ids, sample(probs, generator=generator))


def _q4_cases():
    # 256 draws, one per row: enough to tell the right distribution from a near miss. Measured on these
    # inputs, a silent top-k of 50 changes 41 of the 256 tokens, a top-p of 0.9 changes 22 and a
    # temperature of 0.9 changes 19 (with 14 draws, as before, each would often change none).
    # And a batch of one, where .squeeze() breaks.
    wide = flat_model(44)
    return [(small_model(42), random_ids(42, 1, 3), advanced_generator(1)),
            (small_model(43), random_ids(43, 8, 5), advanced_generator(2)),
            (wide, random_ids(44, 256, 4, vocab=200), advanced_generator(3)),
            # logits in the hundreds: a softmax by hand without the max shift gives NaN probabilities
            (loud(small_model(45)), random_ids(45, 3, 4), advanced_generator(4))]


def _q4_error(args, error):
    model, ids, _ = args
    if "probability tensor contains" in error:
        with torch.no_grad():
            largest = float(model(ids)[:, -1].max())
        return f"torch.multinomial was given probabilities holding inf or NaN: {overflowed('logits', largest)}"
    return None


def _q4_diagnose(args, expected, got):
    model, ids, _ = args
    if got.shape == expected.shape and got.dtype == torch.int64 and torch.equal(got[:, :-1], ids):
        raise Mistake("your tokens differ from the seeded draw: draw once per row, with torch.multinomial("
                      "probs, num_samples=1, generator=generator), from the softmax of the last position's "
                      "logits as they are (no top-k, top-p or temperature here)")


q4 = Question(Task(
    name="q4", function="sample_step", title="one sampled step, seeded", chapter=CHAPTER,
    cases=_q4_cases, reference=_sample_step, diagnose=_q4_diagnose, errors=_q4_error, forbid=NO_GENERATE,
    watch=watches.draws_from_generator,
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
))


# q5 (open): greedy is not a search. Find, for a given model, a prompt and a 4-token continuation whose first
# token is not the greedy one and which is more probable, as a whole, than greedy's 4 tokens. Many answers
# are right: the check verifies the property with the chain rule.

TRAP_TOKENS = 4  # the length of the continuations compared
TRAP_PROMPT = 8  # the longest prompt allowed


@torch.no_grad()
def continuation_log_prob(model, prompt, continuation):
    """log p(continuation | prompt) by the chain rule: one forward pass over both, each token's log-probability
    read at the position before it. ``prompt`` is (1, P), ``continuation`` (n,)."""
    ids = torch.cat([prompt, continuation[None]], dim=1)
    log_probs = torch.log_softmax(model(ids)[0, :-1].double(), dim=-1)
    P = prompt.shape[1]
    return float(log_probs[P - 1:].gather(-1, continuation[:, None]).sum())


@torch.no_grad()
def _find_trap(model):
    """A search that finds one: each one-token prompt in turn; for each, every other first token, continued
    greedily, against greedy's own continuation."""
    V = model.config.vocab_size
    for token in range(V):
        prompt = torch.tensor([[token]])
        greedy = generate(model, prompt, TRAP_TOKENS)[0, 1:]
        best = continuation_log_prob(model, prompt, greedy)
        firsts = torch.tensor([t for t in range(V) if t != int(greedy[0])])
        branches = generate(model, torch.cat([prompt.expand(len(firsts), 1), firsts[:, None]], 1), TRAP_TOKENS - 1)
        for row in branches[:, 1:]:
            if continuation_log_prob(model, prompt, row) > best + 1e-6:
                return prompt, row
    raise RuntimeError("no trap found")


def _q5_verify(args, got):
    (model,) = args
    V = model.config.vocab_size
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return f"return two tensors, (prompt, continuation); you returned {describe(got)}", ""
    prompt, continuation = got
    for name, t, dims in (("prompt", prompt, 2), ("continuation", continuation, 1)):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.int64 or t.dim() != dims:
            shape = "(1, P)" if dims == 2 else f"({TRAP_TOKENS},)"
            return f"the {name} should be an int64 tensor of shape {shape}, but it is {describe(t)}", ""
        if t.numel() and (t.min() < 0 or t.max() >= V):
            return f"the {name} holds ids outside the vocabulary (0 to {V - 1})", f"{name}: {describe(t)}"
    if prompt.shape[0] != 1 or not 1 <= prompt.shape[1] <= TRAP_PROMPT:
        return f"the prompt should be (1, P) with 1 <= P <= {TRAP_PROMPT}, but its shape is {tuple(prompt.shape)}", ""
    if continuation.shape[0] != TRAP_TOKENS:
        return (f"the continuation should hold {TRAP_TOKENS} tokens, but it holds {continuation.shape[0]}", "")
    greedy = generate(model, prompt, TRAP_TOKENS)[0, prompt.shape[1]:]
    if continuation[0] == greedy[0]:
        return ("your continuation starts with the greedy token: the task asks for one that does not (a "
                "different first choice that pays off later)", f"greedy 4 tokens: {show(greedy)}")
    yours, greedys = continuation_log_prob(model, prompt, continuation), continuation_log_prob(model, prompt, greedy)
    if yours <= greedys:
        return ("your continuation is not more probable than greedy's: compare log p(continuation | prompt) by "
                "the chain rule, over all 4 tokens",
                f"log p(yours) = {yours:.4f}, log p(greedy's {show(greedy)}) = {greedys:.4f}")
    return None


q5 = Question(Task(
    name="q5", function="greedy_trap", title="find where greedy is not the most probable", chapter=CHAPTER,
    kind="open", cases=lambda: [(small_model(55),), (small_model(56),), (small_model(57, vocab_size=20),)],
    reference=_find_trap, verify=_q5_verify,
    hints=("Greedy picks the best next token, one step at a time. A path that starts with a worse token can "
           "still be better over 4 tokens if its later tokens are much more probable.",
           "For a prompt, compute greedy's 4 tokens and their log-probability (the chain rule: a sum). Then "
           "try each other first token, continue it greedily for 3 more, and compare sums. Try several prompts.",
           "Score a continuation with one forward pass over prompt + continuation: log_softmax, then pick "
           "each continuation token's entry at the position before it, and sum. Loop over one-token prompts."),
))
