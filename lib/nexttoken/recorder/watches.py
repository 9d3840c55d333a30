"""The checks of *how* a learner's function works, which only watching it run can tell: each is a context
manager given a test input, that instruments it while the function runs and yields a list, to which it
adds what the function did wrong (read on exit). A task names one as ``Task(watch=...)``; the grader's work
order names it by its key in ``WATCHES``, since these run inside the sandbox, beside the learner's code
(``calling.run_on``). Like ``calling``, this file imports only torch and the lesson's library.
"""

import contextlib

import torch
from torch.overrides import TorchFunctionMode

from .words import counted, tokens

class Draws(TorchFunctionMode):
    """Counts the random numbers drawn with ``generator``, however the draw is written: the values of every
    torch call given that generator (torch.multinomial's samples, torch.rand's numbers, an in-place
    uniform_'s tensor), one call or one per draw."""

    def __init__(self, generator):
        super().__init__()
        self.generator, self.drawn = generator, 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if kwargs and kwargs.get("generator") is self.generator and isinstance(out, torch.Tensor):
            self.drawn += out.numel()  # torch takes a generator by keyword only
        return out


@contextlib.contextmanager
def draws_from(args):
    """The draws must come from ``generator`` only (so that the result is reproducible): its state moves,
    torch's global random state does not, and at least one value is drawn with it for each of the n_draws
    texts (one dummy draw beside frequencies computed from the probabilities is not a measurement)."""
    n, generator = args[2], args[3]
    before, global_before = generator.get_state(), torch.random.get_rng_state()
    complaints = []
    counter = Draws(generator)
    with counter:
        yield complaints
    if torch.equal(generator.get_state(), before) and torch.equal(torch.random.get_rng_state(), global_before):
        complaints.append(f"your function drew nothing at all for n_draws = {n} (neither `generator`'s state nor "
                          f"torch's global one moved): it must draw n_draws texts, with generator=generator"
                          + (" (a loop over range(1, n_draws), or n_draws - 1 draws, draws none here)"
                             if n == 1 else ""))
    elif torch.equal(generator.get_state(), before):
        complaints.append("your function did not draw from `generator` (its state did not move): pass "
                          "generator=generator to torch.multinomial (or torch.rand)")
    elif not torch.equal(torch.random.get_rng_state(), global_before):
        complaints.append("some of your draws came from torch's global random state, not from `generator`: "
                          "pass generator=generator to every torch.multinomial (or torch.rand) call")
    elif isinstance(n, int) and counter.drawn < n:
        complaints.append(f"your function drew {counted(counter.drawn, 'random value')} with `generator` for "
                          f"n_draws = {n}: each of the n_draws texts is drawn (its first token, then its second), "
                          "and the frequencies are counted from those draws, not computed from the probabilities")


class HeadRows(TorchFunctionMode):
    """Counts the rows (vectors of d_model) that the LM head's weight multiplies, however the product is
    written: model.lm_head(x), F.linear(x, W), x @ W.T, einsum, on any shape."""

    def __init__(self, weight):
        super().__init__()
        self.storage, self.d, self.rows = weight.untyped_storage().data_ptr(), weight.shape[-1], 0

    def _is_head(self, t):
        try:
            return t.untyped_storage().data_ptr() == self.storage  # the weight or a view of it (W.T)
        except Exception:
            return False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        tensors = [a for a in (*args, *(kwargs or {}).values()) for a in (a if isinstance(a, (list, tuple)) else [a])
                   if isinstance(a, torch.Tensor)]
        others = [t for t in tensors if not self._is_head(t)]
        if others and len(others) < len(tensors):
            self.rows += max(t.numel() for t in others) // self.d
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def head_on_last_position_only(args):
    """The check of how: the LM head multiplies one vector per row of the batch, not B * T."""
    model, input_ids = args
    complaints = []
    counter = HeadRows(model.lm_head.weight)
    with counter:
        yield complaints
    B, T = input_ids.shape
    if counter.rows > B:
        complaints.append(f"the LM head was applied to {counter.rows} vectors for a batch of {counted(B, 'row')} of "
                          f"{tokens(T)}: apply it to the last position only (x[:, -1, :] of each row, then "
                          "final_norm and lm_head), not to every position")


@contextlib.contextmanager
def draws_from_generator(args):
    """The check of how: the draw moves `generator` (one that was not used keeps its state)."""
    generator = args[2]
    before = generator.get_state()
    complaints = []
    yield complaints
    if torch.equal(generator.get_state(), before):
        complaints.append("your function did not draw from `generator` (its state did not move): sampling "
                          "draws each row's token with torch.multinomial(probs, num_samples=1, "
                          "generator=generator), so that a seed makes the draw repeatable (an argmax draws nothing)")


@contextlib.contextmanager
def reads_each_token_once(args):
    """The check of how: count the positions each forward pass reads (every pass embeds the tokens it
    reads, and their positions). With a cache every token is read once, the last new one never: P + n - 1
    positions in all, whether the prompt goes in one pass or as all but its last token and then that one.
    The uncached loop's P, P + 1, ... gives the same tokens, so only this tells the two apart. And the
    first pass starts at position 0: a cache kept from an earlier call would start it later."""
    model, input_ids, n = args
    seen, starts = [], []
    hooks = [model.token_embedding.register_forward_pre_hook(lambda module, inputs: seen.append(inputs[0].shape[-1])),
             model.position_embedding.register_forward_pre_hook(
                 lambda module, inputs: starts.append(int(inputs[0].flatten()[0])))]
    complaints = []
    try:
        yield complaints
    finally:
        for hook in hooks:
            hook.remove()
    P = input_ids.shape[1]
    want = [P] + [1] * (n - 1) if n else []
    if seen and not want:
        complaints.append(f"with max_new_tokens = 0 the model is not run at all (the prompt comes back as it "
                          f"is), but your loop made {counted(len(seen), 'forward pass', 'forward passes')}")
    elif starts and starts[0] != 0:
        complaints.append(f"your first forward pass began at position {starts[0]}: its cache already held "
                          f"{counted(starts[0], 'position')} from an earlier call (a cache kept between calls, "
                          "in a global, a module-level dict or a default argument). Make a fresh one, "
                          "model.new_cache(), in every call")
    elif len(seen) >= n and sum(seen) != sum(want):  # fewer passes: too few tokens, which the output shows
        complaints.append(f"the forward passes read {short(seen)} positions, {sum(seen)} in all; with a cache "
                          f"each token is read once: read the prompt once, then only the newest token, {short(want)}, "
                          f"P + max_new_tokens - 1 = {sum(want)} in all")


def short(counts):
    return str(counts) if len(counts) <= 8 else f"[{', '.join(map(str, counts[:8]))}, ...] ({len(counts)} passes)"


WATCHES = {watch.__name__: watch for watch in
           (draws_from, head_on_last_position_only, draws_from_generator, reads_each_token_once)}
