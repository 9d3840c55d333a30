"""Chapter 3, the forward pass: tasks for the exercise notebook."""

import torch

from ..model import Decoder, DecoderConfig, causal_mask
from .common import embed_with_positions, random_ids, run_blocks, small_model
from .task import Known, Mistake, Question, Task

CHAPTER = "ch03"
TASKS = ["q1", "q2", "q3"]


@torch.no_grad()
def _forward(model, input_ids):
    x = run_blocks(model, embed_with_positions(model, input_ids), causal_mask(input_ids.shape[1]))
    return model.lm_head(model.final_norm(x))


def _cases():
    # T = 1, a batch of one, several rows, and the longest input the model allows (context_length 16)
    # and a tied model (the chapter's: its LM head is the token embedding, logits = h @ E.T) beside the
    # untied ones, whose head is a matrix of its own: an answer must hold for both
    return [(small_model(1), random_ids(1, 1, 5)), (small_model(3), random_ids(3, 1, 1)),
            (small_model(2), random_ids(2, 3, 9)), (small_model(4), random_ids(4, 2, 16)),
            (small_model(5, tie_embeddings=True), random_ids(5, 2, 7))]


def _q1_diagnose(args, expected, got):
    model, ids = args
    if tuple(got.shape) == (ids.shape[1], model.config.d_model):
        raise Mistake("the batch dimension is gone: the result is (B, T, d_model)")


POSITIONS_BY_ID = ("you looked up the position embeddings by token id (position_embedding(input_ids)): that table "
                   "has one row per position, 0 to context_length - 1, and token t's position is t, whatever its "
                   "id. Use position_embedding(torch.arange(T))")


def _q1_error(args, error):
    model, ids = args
    if "index out of range" in error and int(ids.max()) >= model.config.context_length:
        return POSITIONS_BY_ID


q1 = Question(Task(
    name="q1", function="embed", title="token + position embeddings", chapter=CHAPTER,
    cases=_cases, reference=torch.no_grad()(embed_with_positions), diagnose=_q1_diagnose, errors=_q1_error,
    known=[
        Known(POSITIONS_BY_ID, lambda m, ids: m.token_embedding(ids) + m.position_embedding(ids)),
        Known("you forgot the position embeddings: without them, attention (a weighted average) has no direct "
              "signal of where a token is", lambda m, ids: m.token_embedding(ids)),
        Known("only the position embeddings: add the token embeddings too",
              lambda m, ids: m.position_embedding(torch.arange(ids.shape[1])).expand(ids.shape[0], -1, -1)),
        Known("positions start at 0, not 1: use torch.arange(T)",
              lambda m, ids: embed_with_positions(m, ids, torch.arange(1, ids.shape[1] + 1))),
        Known("you multiplied the two embeddings; the residual stream starts as their sum",
              lambda m, ids: m.token_embedding(ids) * m.position_embedding(torch.arange(ids.shape[1]))),
        Known("the positions run backwards: position t is t tokens after the start, torch.arange(T)",
              lambda m, ids: embed_with_positions(m, ids, torch.arange(ids.shape[1]).flip(0))),
    ],
    hints=("Each token's vector says what it is; something else must say where it is.",
           "The position of token t is t, counting from 0; its vector comes from model.position_embedding.",
           "Look up both tables (token ids in one, torch.arange(T) in the other) and add: (T, d_model) "
           "broadcasts over the batch."),
))


def _q2_diagnose(args, expected, got):
    model, ids = args
    if got.dim() == 3 and got.shape[-1] == model.config.d_model != model.config.vocab_size:
        raise Mistake("these are hidden states (last dimension d_model); apply model.lm_head to get logits")


def _no_norm(m, ids):
    return m.lm_head(run_blocks(m, embed_with_positions(m, ids), causal_mask(ids.shape[1])))


def _no_mask(m, ids):
    T = ids.shape[1]
    return m.lm_head(m.final_norm(run_blocks(m, embed_with_positions(m, ids), torch.ones(T, T, dtype=torch.bool))))


def _first_block(m, ids):
    x = run_blocks(m, embed_with_positions(m, ids), causal_mask(ids.shape[1]), m.blocks[:1])
    return m.lm_head(m.final_norm(x))


def _no_positions(m, ids):
    x = run_blocks(m, m.token_embedding(ids), causal_mask(ids.shape[1]))
    return m.lm_head(m.final_norm(x))


def _norm_each_block(m, ids):
    x = embed_with_positions(m, ids)
    for block in m.blocks:
        x, _ = block(x, causal_mask(ids.shape[1]))
        x = m.final_norm(x)
    return m.lm_head(x)


def _q2_error(args, error):
    if "must be Tensor, not tuple" in error:
        return ("a block returns a pair, (its output, its attention weights), and the pair itself went on into the "
                "next block (or the final norm): unpack it, x, _ = block(x, mask)")


def _embedding_as_head(m, ids):
    x = run_blocks(m, embed_with_positions(m, ids), causal_mask(ids.shape[1]))
    return m.final_norm(x) @ m.token_embedding.weight.T


q2 = Question(Task(
    name="q2", function="forward", title="the whole forward pass", chapter=CHAPTER,
    cases=_cases, reference=_forward, diagnose=_q2_diagnose, errors=_q2_error,
    forbid={"model(...)": "forward builds the pass from the model's parts, without calling model(...) "
                          "(or model.forward) itself"},
    known=[
        Known("you skipped the final norm (model.final_norm) before the LM head", torch.no_grad()(_no_norm)),
        Known("you multiplied by the token embedding matrix (h @ E.T): that is the LM head only in a model with "
              "tied weights (tie_embeddings=True, like the chapter's); this model's head is a matrix of its own. "
              "Use model.lm_head, which is right for both", torch.no_grad()(_embedding_as_head)),
        Known("future positions are visible: pass causal_mask(T) to every block", torch.no_grad()(_no_mask)),
        Known("only the first block ran: loop over every block of model.blocks, each one's output feeding "
              "the next", torch.no_grad()(_first_block)),
        Known("the blocks were skipped: the embeddings went straight to the LM head",
              torch.no_grad()(lambda m, ids: m.lm_head(m.final_norm(embed_with_positions(m, ids))))),
        Known("the position embeddings are missing: start from your embed (tokens + positions)",
              torch.no_grad()(_no_positions)),
        Known("the final norm goes once, after the last block, not after every block",
              torch.no_grad()(_norm_each_block)),
    ],
    hints=("The residual stream starts as your embeddings and goes through every block in turn.",
           "Each block needs the causal mask for T = input_ids.shape[1], and returns a pair: keep the first.",
           "After the last block, the final norm, then the LM head turns d_model into vocab_size scores."),
))


def _config_cases():
    small = dict(vocab_size=50, context_length=16, d_model=32, n_layers=2, n_heads=4)
    return [(DecoderConfig(**small),),
            (DecoderConfig(**{**small, "tie_embeddings": False}),),
            (DecoderConfig(vocab_size=1000, context_length=64, d_model=48, n_layers=3, n_heads=6, d_ff=100),),
            (DecoderConfig(vocab_size=7, context_length=3, d_model=8, n_layers=1, n_heads=2, d_ff=5),),
            (DecoderConfig(vocab_size=50257, context_length=1024, d_model=768, n_layers=12, n_heads=12),)]  # GPT-2


def _num_parameters(config):
    with torch.device("meta"):  # shapes only, no memory and no random draws: GPT-2's size is instant
        return Decoder(config).num_parameters()  # the model's own count (a tied matrix counted once)


def _count(config, tied_twice=False, no_positions=False, no_bias=False, no_norms=False, d_ff=None, blocks=None):
    V, C, d = config.vocab_size, config.context_length, config.d_model
    f = config.d_ff if d_ff is None else d_ff
    b = 0 if no_bias else 1
    per_block = (0 if no_norms else 2 * 2 * d) + (d * 3 * d + b * 3 * d) + (d * d + b * d) \
        + (d * f + b * f) + (f * d + b * d)
    head = V * d if (tied_twice or not config.tie_embeddings) else 0
    return (V * d + (0 if no_positions else C * d) + (config.n_layers if blocks is None else blocks) * per_block
            + (0 if no_norms else 2 * d) + head)


# Every kind of parameter tensor: (what, its shape, its size, how many the model has), each a function of the
# configuration, so that a count off by some of them is named by what it missed, on every configuration tried.
_KINDS = [
    ("token embedding", "vocab_size x d_model", lambda c: c.vocab_size * c.d_model, lambda c: 1),
    ("LM head", "vocab_size x d_model, a matrix of its own when tie_embeddings=False",
     lambda c: c.vocab_size * c.d_model, lambda c: 0 if c.tie_embeddings else 1),
    ("position table", "context_length x d_model", lambda c: c.context_length * c.d_model, lambda c: 1),
    ("final LayerNorm", "a weight and a bias of d_model each", lambda c: 2 * c.d_model, lambda c: 1),
    ("LayerNorm of each block", "two per block, a weight and a bias of d_model each", lambda c: 2 * c.d_model,
     lambda c: 2 * c.n_layers),
    ("qkv weight of each block", "d_model x 3 d_model", lambda c: 3 * c.d_model ** 2, lambda c: c.n_layers),
    ("qkv bias of each block", "3 d_model", lambda c: 3 * c.d_model, lambda c: c.n_layers),
    ("attention output projection of each block", "a d_model x d_model weight and a bias of d_model",
     lambda c: c.d_model ** 2 + c.d_model, lambda c: c.n_layers),
    ("MLP up projection weight of each block", "d_model x d_ff", lambda c: c.d_model * c.d_ff, lambda c: c.n_layers),
    ("MLP down projection weight of each block", "d_ff x d_model", lambda c: c.d_ff * c.d_model, lambda c: c.n_layers),
    ("MLP biases of each block", "d_ff for the up projection, d_model for the down one",
     lambda c: c.d_ff + c.d_model, lambda c: c.n_layers),
    ("attention biases of each block", "3 d_model for qkv, d_model for the output projection",
     lambda c: 4 * c.d_model, lambda c: c.n_layers),
    ("d_model-sized bias of each block", "the attention output projection's or the MLP down projection's",
     lambda c: c.d_model, lambda c: c.n_layers),
]


def _off_by(size, have, sign):
    return lambda c: _count(c) + sign * have(c) * size(c)


def _known_counts():
    """A count that leaves out, or counts twice, every tensor of one kind (on every configuration tried:
    the LM head only where it is untied, a block's tensors once per block)."""
    known = []
    for what, shape, size, have in _KINDS:
        known.append(Known(f"your count leaves out the {what} ({shape}): add it", _off_by(size, have, -1)))
        known.append(Known(f"your count has the {what} ({shape}) twice: count it once", _off_by(size, have, +1)))
    return known


def _q3_diagnose(args, expected, got):
    """A wrong count that no known mistake explains on every configuration: which way it is off, and the
    tensors it is off by on this configuration, if one kind of them accounts for it (the expected count
    itself is not shown: this is a predict task)."""
    (config,) = args
    if isinstance(got, bool) or not isinstance(got, int) or got == expected:
        return
    diff = got - expected
    way = "too high" if diff > 0 else "too low"
    found = []
    for what, shape, size, have in _KINDS:
        k, rest = divmod(abs(diff), size(config))
        if not rest and 1 <= k <= max(have(config), 1):
            found.append(f"{'' if k == 1 else f'{k} x '}the size of the {what} ({shape})")
    why = ("something is counted twice, or is not in the model" if diff > 0
           else "a tensor the model has is missing from your sum")
    if found:
        alternative = f", or by {found[1]}" if len(found) > 1 else ""
        raise Mistake(f"your count is {way} by exactly {found[0]}{alternative}: {why}")
    raise Mistake(f"your count is {way}, and by no whole number of one kind of tensor: {why}; check each term "
                  f"of your sum against the shapes of the model's tensors")


q3 = Question(Task(
    rebuilds=("nexttoken.model:Decoder.num_parameters",),
    name="q3", function="count_parameters", title="predict the parameter count", chapter=CHAPTER, kind="predict",
    cases=_config_cases, reference=_num_parameters, diagnose=_q3_diagnose,
    forbid={"Decoder(...)": "predict the count from the configuration alone, without building the model"},
    known=[
        Known("with tie_embeddings the LM head *is* the token embedding matrix: count it once",
              lambda c: _count(c, tied_twice=True)),
        Known("the position table is missing: context_length x d_model more", lambda c: _count(c, no_positions=True)),
        Known("the biases are missing: every Linear except the LM head has one (of size out_features)",
              lambda c: _count(c, no_bias=True)),
        Known("the LayerNorms are missing: each has a weight and a bias of size d_model (two per block, one "
              "final)", lambda c: _count(c, no_norms=True)),
        Known("the MLP's hidden width is config.d_ff, not always 4 * d_model", lambda c: _count(c, d_ff=4 * c.d_model)),
        Known("you counted one block; there are config.n_layers", lambda c: _count(c, blocks=1)),
        *_known_counts(),
    ],
    hints=("List the model's weight matrices and vectors from chapter 3's diagram, then multiply out "
           "their shapes.",
           "A Linear from n to m has n * m weights and m biases; a LayerNorm over d has 2 * d parameters; an "
           "embedding table has rows x d_model.",
           "Per block: two LayerNorms, qkv (d -> 3d), proj (d -> d), MLP up (d -> d_ff) and down (d_ff -> d). "
           "Outside the blocks: two tables, a final LayerNorm, and the head (no bias), unless it is tied."),
))
