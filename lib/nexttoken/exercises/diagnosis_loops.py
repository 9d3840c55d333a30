"""The diagnosis's families of a loop that generates and scores, a pair (ids, score): the pair the wrong way
round, the ids by where the loop parted from the reference's (stopped early or late, appended twice, the new
tokens put before the prompt, a token chosen by another rule), the score by the steps it added up (the wrong
token's log-probability, every token's, a product that underflowed, a temperature)."""

import torch

from ..tokenizer import END_OF_TEXT_ID
from .diagnosis_base import TEMPERATURES, Finding, same, temperature_words, underflow_words
from .feedback import matches


def in_pair(e, g, source, leading, findings):
    """A pair (ids, score) of a loop, judged at its first wrong element: the ids by where the loop parted from
    the reference's, the score by the families of a number (``findings``, the diagnosis's own, and those of a
    loop's steps, from ``source``)."""
    if len(e) == 2 and not matches(e[0], g[0]) and matches(e[0], g[1]) and matches(e[1], g[0]):
        words = "your pair is the wrong way round: its two elements are swapped (return them in the asked order)"
        yield Finding("pair_swapped", words, leading=True)
        return
    for i, (right, mine) in enumerate(zip(e, g)):
        if matches(right, mine):
            continue
        if i == 0 and source is not None and source.prompt_length is not None:
            yield from _parting(right, mine, source.prompt_length)
            yield from _chosen_otherwise(right, mine, source)
            return
        for found in findings(right, mine, source if i == 1 else None, leading):
            yield Finding(found.family, f"element {i} of your output: {found.message}", leading=found.leading)
        if i == 1 and source is not None and source.steps is not None and not leading:
            yield from _from_steps(right, mine, source)
        return


def _parting(e, g, P):
    """The ids of a greedy loop against the reference's: how the new tokens part from the right ones."""
    if isinstance(g, torch.Tensor) and g.dim() == 2 and g.shape == e.shape and g.shape[1] > P \
            and torch.equal(g[:, -P:], e[:, :P]) and torch.equal(g[:, -P - 1], e[:, P]):
        yield Finding("prepended", "your new tokens come before the prompt: each step's token goes after the "
                                   "sequence so far, torch.cat([ids, next_token[:, None]], dim=1), not in front",
                      leading=True)
        return
    if not (isinstance(g, torch.Tensor) and g.dim() == 2 and g.shape[0] == e.shape[0] and g.shape[1] >= P
            and torch.equal(g[:, :P], e[:, :P])):
        return
    right, mine = e[:, P:], g[:, P:]
    n, m = right.shape[1], mine.shape[1]
    if n and m == 2 * n and torch.equal(mine[:, ::2], mine[:, 1::2]) and torch.equal(mine[:, 0], right[:, 0]):
        yield Finding("appended_twice", f"every new token is appended twice ({m} new tokens for max_new_tokens = "
                                        f"{n}, in pairs): append each step's token once", leading=True)
    elif m != n and torch.equal(mine[:, :min(n, m)], right[:, :min(n, m)]):
        how, end, k = ("too many", "late", m - n) if m > n else ("too few", "early", n - m)
        after = ""
        if m < n and m and bool((mine[:, -1] == END_OF_TEXT_ID).all()):
            after = f", right after GPT-2's EOS id {END_OF_TEXT_ID}, but this loop has no EOS rule"
        yield Finding("stopped_" + end, f"your loop stopped {end}{after}: {k} step{'s' * (k != 1)} {how} ({m} new "
                                        f"token{'s' * (m != 1)} where max_new_tokens = {n}; the ones it made are "
                                        f"right): one step per new token, range(max_new_tokens)", leading=True)
    elif m == n and n:
        step = int((mine != right).any(0).nonzero()[0])
        row = int((mine[:, step] != right[:, step]).nonzero()[0])
        yield Finding("parted", f"your loop parts from the greedy one at new token {step + 1} of row {row}: "
                                f"{int(mine[row, step])} where the argmax of that step's logits is "
                                f"{int(right[row, step])} (the steps before it are right)")


def _from_steps(e, g, source):
    """A loop's score against the steps it took: the wrong entry of each step's log-probabilities added, or
    their product taken (which underflows)."""
    lp, chosen, fed = source.steps.double(), source.chosen, source.fed
    if lp.shape[1] == 0:
        return
    if same(lp.sum(-1).sum(-1), g):
        yield Finding("whole_vocabulary", "log_prob adds the log-probabilities of the whole vocabulary at each "
                                          "step: take the chosen token's entry alone (gather with its id)")
    if lp.shape[0] > 1 and not torch.equal(chosen, chosen[:1].expand_as(chosen)) \
            and same(lp.gather(-1, chosen[:1].expand_as(chosen)[..., None])[..., 0].sum(-1), g):
        yield Finding("wrong_token", "log_prob scores row 0's chosen token in every row: each row adds the "
                                     "log-probability of its own chosen token (gather with each row's id)")
    if fed is not None and same(lp.gather(-1, fed[..., None])[..., 0].sum(-1), g):
        yield Finding("wrong_token", "log_prob scores the wrong token: at each step it takes the log-probability "
                                     "of the last token the model read, not of the token the step chose")
    for t in TEMPERATURES:  # each step's logits over t: log-probabilities are logits up to a shift, which it keeps
        if same(torch.log_softmax(lp / t, -1).gather(-1, chosen[..., None])[..., 0].sum(-1), g):
            yield Finding("temperature", temperature_words(t, "log-probabilities"))
    product = torch.exp(lp.gather(-1, chosen[..., None])[..., 0]).float().prod(-1)
    if bool((product == 0).any()) and same(torch.log(product), g):
        yield Finding("underflow", underflow_words("the chosen tokens' probabilities"))


def _chosen_otherwise(e, g, source):
    """The first new token where the loop parted, against the rules that pick another token from that step's
    logits (the steps before it are right, so the step read what the reference's read)."""
    P, logits = source.prompt_length, source.step_logits
    if logits is None or not (isinstance(g, torch.Tensor) and g.shape == e.shape and torch.equal(g[:, :P], e[:, :P])):
        return
    wrong = (g[:, P:] != e[:, P:]).any(0)
    if not wrong.any():
        return
    step = int(wrong.nonzero()[0])
    x, mine = logits[:, step].double(), g[:, P + step]
    rules = [("argmin", "the least likely token (an argmin, or the argmax of the negated scores)", x.argmin(-1)),
             ("over_batch", "the argmax of scores normalised over the batch (dim=0), not over the vocabulary: "
                            "softmax and log_softmax take dim=-1", torch.log_softmax(x, 0).argmax(-1)),
             ("second", "the second most likely token, not the most likely", x.topk(2, -1).indices[:, 1])]
    for family, words, tokens in rules:
        if torch.equal(tokens, mine):
            yield Finding(f"chose_{family}", f"your loop parts from the greedy one at new token {step + 1}: it chose "
                                             f"{words}", leading=True)
