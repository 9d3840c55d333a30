"""Test inputs shared by the chapters' tasks: small, seeded, the same in every process, and chosen so
that a wrong answer gives a different result (tests/exercises/test_exercises.py asserts it)."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..tokenizer import END_OF_TEXT_ID
from ..generate import generate
from ..model import Decoder, DecoderConfig
from ..recorder.words import tokens
from .feedback import overflowed
from .task import Mistake, shortcut_rule

# The rule of every task that rebuilds the loop or a step of it (chapters 5, 6 and 7): Task(forbid=NO_GENERATE).
NO_GENERATE = shortcut_rule("nexttoken.generate")


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


class _Drawing(TorchDispatchMode):
    """While inside, every random draw of torch that names no generator (a module's own initialisation:
    nn.Linear's kaiming_uniform_, nn.Embedding's normal_) draws from ``generator`` instead of torch's
    global one. The mode is the calling thread's alone, so a test model built in one thread is the same
    whatever another thread draws or seeds meanwhile, and the global random state (the learner's, in a
    notebook) is neither read nor changed. From a fresh ``seeded(seed)`` the draws are those that
    ``torch.manual_seed(seed)`` gives: the same models as before, bit for bit."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ to keep torch.compile out of it, a wrapper that imports
        # torch._dynamo on its first call: 2 s of CPU in every process that builds a test model (a notebook's
        # first check, each grader). Nothing here is compiled: the plain method, and no such import.
        return False

    def __init__(self, generator: torch.Generator):
        super().__init__()
        self.generator = generator

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if kwargs.get("generator") is None and any(a.name == "generator" for a in func._schema.arguments):
            kwargs["generator"] = self.generator
        return func(*args, **kwargs)


def small_model(seed: int = 0, **overrides) -> Decoder:
    """A small random Decoder whose predictions depend on the context, drawn from a generator of its own
    (``_Drawing``): the same model in every process and thread, whatever else draws meanwhile.

    Weights are drawn larger than GPT-2's initialisation (std 0.5, an untied LM head), so that a greedy
    continuation changes from step to step and from prompt to prompt: a GPT-2-style random model
    predicts nearly the same token whatever it reads, and then a loop that ignores its own output would
    pass. The norms are not the identity either (weights around 1, biases around 0, std 0.3): with
    weight 1 and bias 0, a norm skipped, applied twice or called without its parameters would pass.
    """
    config = DecoderConfig(**{**dict(vocab_size=50, context_length=16, d_model=32, n_layers=2, n_heads=4,
                                     tie_embeddings=False), **overrides})
    generator = seeded(seed)
    with _Drawing(generator):
        model = Decoder(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(mean=1.0 if name.endswith("weight") else 0.0, std=0.3, generator=generator)
            else:
                p.normal_(std=0.5, generator=generator)
    return model.eval()


def rotary_model(seed: int = 0, **overrides) -> Decoder:
    """A small random decoder of SmolLM2's kind (chapter 3's core): rotary positions, RMSNorm, a SwiGLU MLP
    without biases, 4 query heads sharing 2 key/value heads; its head untied unless ``tie_embeddings=True``."""
    return small_model(seed, **{**dict(positions="rope", norm="rmsnorm", mlp="swiglu", bias=False, n_kv_heads=2),
                                **overrides})


def loud(model: Decoder, factor: float = 40.0) -> Decoder:
    """The model with its LM head scaled: logits in the hundreds, where exp without the max shift overflows
    float32 (exp(89) is inf) and a softmax by hand gives NaN; torch.softmax, which shifts, is fine."""
    with torch.no_grad():
        model.lm_head.weight.mul_(factor)
    return model


def rows_far_apart(seed: int, gap: float = 110.0):
    """(model, input_ids): a loud model and two prompts whose last-position logits peak more than ``gap`` apart
    and pick different tokens, the first seed from ``seed`` on that gives them. A softmax shifted by the whole
    batch's maximum then underflows every exp of the lower row to 0 (0 / 0 = NaN); each row's own max does not."""
    for s in range(seed, seed + 500):
        model, ids = loud(small_model(s)), random_ids(s, 2, 5)
        with torch.no_grad():
            last = model(ids)[:, -1]
        peaks = last.amax(-1)
        if peaks.max() - peaks.min() > gap and last[0].argmax() != last[1].argmax():
            return model, ids
    raise ValueError(f"no seed from {seed} gives two rows {gap} apart")


def overflow(logits) -> None:
    """Raises Mistake when NaN probabilities come from logits that exp overflows."""
    if logits.max() > 88:
        raise Mistake(f"NaN: {overflowed('logits', float(logits.max()))}")


def random_ids(seed: int, batch: int, length: int, vocab: int = 50) -> torch.Tensor:
    return torch.randint(vocab, (batch, length), generator=seeded(seed))


def embed_with_positions(model, input_ids, positions=None):
    """Chapter 3's embeddings: token vectors plus position vectors (positions 0 .. T - 1 unless given).
    Chapter 3's tasks check it, chapter 4's last-position head starts from it."""
    if positions is None:
        positions = torch.arange(input_ids.shape[1])
    return model.token_embedding(input_ids) + model.position_embedding(positions)


def run_blocks(model, x, mask, blocks=None):
    """The residual stream ``x`` through the model's blocks in turn (or only ``blocks``), under ``mask``."""
    for block in model.blocks if blocks is None else blocks:
        x, _ = block(x, mask)
    return x


# --- strategies for the generated inputs (Task(generated=...)); hypothesis is imported only when used ---

def loop_params(longest: int = 16, batch: int = 3):
    """(seed, rows, prompt length, max_new_tokens) with prompt + new tokens <= ``longest`` (the test
    model's context_length): 0 and 1 new tokens, one row and several, T = 1 and the longest."""
    from hypothesis import strategies as st

    return st.tuples(st.integers(0, 999), st.integers(1, batch), st.integers(1, longest)).flatmap(
        lambda p: st.tuples(*map(st.just, p), st.integers(0, longest - p[2])))


def loop_case(params):
    """The arguments (model, input_ids, max_new_tokens) of a loop task from ``loop_params``."""
    seed, rows, length, n = params
    return small_model(seed), random_ids(seed, rows, length), n


def with_gpt2_eos(seed: int, rows: int = 1, length: int = 3, step: int = 1, **overrides):
    """(model, input_ids): a small model with GPT-2's vocabulary size whose greedy continuation of the prompt
    produces END_OF_TEXT_ID at new token ``step + 1`` and then goes on. A loop asked for exactly max_new_tokens
    that stops on GPT-2's EOS id stops there; with the usual vocabulary of 50 that id never comes.
    Made by swapping the rows of the token the model would produce there with END_OF_TEXT_ID's, in the
    embedding and the LM head: the same model with two ids relabelled."""
    model, ids = small_model(seed, vocab_size=END_OF_TEXT_ID + 1, **overrides), random_ids(seed, rows, length)
    x = int(generate(model, ids, step + 1)[0, -1])  # the token row 0 produces at new token step + 1
    with torch.no_grad():
        for p in (model.token_embedding.weight, model.lm_head.weight):
            p[[x, END_OF_TEXT_ID]] = p[[END_OF_TEXT_ID, x]]
    return model, ids


def count_new_tokens(ids, n, got):
    """The loop tasks' rule of exactly ``n`` new tokens (no EOS rule before chapter 6): raises Mistake
    naming the count made, and GPT-2's EOS id when the loop stopped right after it."""
    P = ids.shape[1]
    if got.dim() != 2 or got.shape[0] != ids.shape[0] or got.shape[1] == P + n:
        return
    if got.shape[1] < P or not torch.equal(got[:, :P], ids):
        raise Mistake(f"your output does not start with the prompt (input_ids, {tokens(P)} a row): return the "
                      f"prompt followed by the new tokens, shape (B, {P} + max_new_tokens)")
    k = got.shape[1] - P
    why = "one step per new token, range(max_new_tokens)"
    if 0 < k < n and (got[:, -1] == END_OF_TEXT_ID).all():
        why = (f"your loop stopped right after GPT-2's EOS id {END_OF_TEXT_ID}; this task has no EOS rule (chapter 6 "
               "adds one): it generates exactly max_new_tokens tokens")
    raise Mistake(f"you generated {k} new {'token' if k == 1 else 'tokens'} after the prompt of {P}, but "
                  f"max_new_tokens = {n}: {why}")


# --- inputs that a chapter's tasks and the held-out cases (held_out.py) both build ---


def chain_tables(seed, V, spread=3.0):
    """(p(x1), p(x2 | x1)): a first-token distribution and a table whose rows differ (peaked by ``spread``),
    so that drawing x2 without looking at x1 gives frequencies far from the chain rule's."""
    g = seeded(seed)
    first = torch.softmax(torch.randn(V, generator=g), dim=-1)
    return first, torch.softmax(torch.randn(V, V, generator=g) * spread, dim=-1)


def with_zeros(scores):
    """Scores of exactly 0 in the past, on the diagonal and in the future (and a whole row of them): a mask
    that finds the past or the future by value (== 0, != 0) gets them wrong."""
    scores = scores.clone()
    scores[..., 2, 0] = scores[..., 3, 3] = scores[..., 0, 4] = scores[..., 1, 3] = 0.0
    scores[..., 4, :] = 0.0
    return scores


def left_padded_mask(lengths, T):
    """The attention mask of left-padded rows holding these numbers of real tokens."""
    return torch.tensor([[0] * (T - n) + [1] * n for n in lengths])


def dropout_model(seed):
    """A small model with dropout 0.3, left in training mode, as a model is after a training loop."""
    return small_model(seed, dropout=0.3).train()


def bigram_table(seed, V):
    """A (V, V) table of p(next | current), rows summing to 1, peaked so greedy choices are clear."""
    return torch.softmax(torch.randn(V, V, generator=seeded(seed)) * 3, dim=-1)


def advanced_generator(seed):
    """A generator that has already drawn: its state is not what manual_seed(seed) gives, so reseeding the
    global random state from it (torch.manual_seed(generator.initial_seed())) draws other tokens."""
    generator = seeded(seed)
    torch.rand(10, generator=generator)
    return generator


def flat_model(seed):
    """A model over 200 tokens whose next-token distributions have a fat tail (its LM head halved), so
    that a sampler which drops the tail or reshapes it draws other tokens often enough to be seen."""
    model = small_model(seed, vocab_size=200)
    with torch.no_grad():
        model.lm_head.weight.mul_(0.5)
    return model


def stopping_at_every_step(seed: int, rows: int, pad: int | None = None):
    """(model, input_ids, rows + 2, eos, pad): ``rows`` prompts of 3 tokens, chosen among 64 so that row i
    first produces the EOS id at step i + 1 and every row starts with another token; pad None: the EOS id."""
    model, pool = small_model(seed), random_ids(seed, 64, 3)
    free = generate(model, pool, rows + 2)[:, 3:]
    for eos in range(50):
        first = [int(row.tolist().index(eos)) if eos in row else None for row in free]
        chosen = []
        for step in range(rows):
            chosen += [i for i in range(len(pool)) if first[i] == step
                       and int(free[i, 0]) not in [int(free[c, 0]) for c in chosen]][:1]
        if len(chosen) == rows:
            return model, pool[chosen], rows + 2, eos, eos if pad is None else pad
    raise ValueError(f"no EOS id stops {rows} rows at every step for seed {seed}")


def eos_case(params):
    """(model, input_ids, max_new_tokens, eos, pad) from chapter 6's EOS parameters (seed, rows, prompt length,
    new tokens, which EOS, its pick, which pad, its pick): see ch06's ``_eos_params``."""
    seed, rows, length, n, eos_kind, eos_pick, pad_kind, pad_pick = params
    model, prompt = small_model(seed), random_ids(seed, rows, length)
    produced = generate(model, prompt, max(n, 1))[:, length:].flatten().tolist()
    in_prompt = int(prompt.flatten()[eos_pick % prompt.numel()])
    eos = [produced[eos_pick % len(produced)], in_prompt, eos_pick % 50][eos_kind]
    pad = [produced[pad_pick % len(produced)], pad_pick % 50][pad_kind]
    return model, prompt, n, eos, pad


def right_padded(lengths, T, seed):
    """Right-padded rows with these numbers of real tokens (ids 1 to 99); the pad slots hold any id, as
    a tokenizer's pad id may be anything: only the mask says which slots are padding."""
    ids = torch.randint(1, 100, (len(lengths), T), generator=seeded(seed))
    mask = torch.tensor([[1] * n + [0] * (T - n) for n in lengths])
    return ids, mask
