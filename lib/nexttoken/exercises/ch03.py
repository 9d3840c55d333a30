"""Chapter 3, the forward pass: tasks for the exercise notebook.

The core's two tasks are on SmolLM2's kind of model, the chapter's: rotary positions (no position table),
RMSNorm, a SwiGLU MLP, grouped-query attention. q1 is where order enters (the token vectors and the rotary
angles, what ``model.embed`` returns), q2 the walk (embed, blocks, final norm, LM head). The practice
tasks are on GPT-2's kind, the chapter's Going deeper: q3 predicts its parameter count, q4 adds its
learned position table.
"""

import math

import torch

from ..checks import is_int
from ..model import Decoder, DecoderConfig, causal_mask, rotary_angles
from .diagnosis import Source, Term
from .common import embed_with_positions, random_ids, rotary_model, small_model
from .task import Known, Mistake, Question, Task, shortcut_rule

CHAPTER = "ch03"
TASKS = ["q1", "q2", "q3", "q4"]
# The core tasks: what the lesson asks of every learner and what an LMS grade counts by default (the notebook's
# "[core" headings say the same: tests/exercises/test_core_only.py); the rest is practice.
CORE = ["q3"]

NO_EMBED = shortcut_rule("model.embed")


def _rotary_cases():
    # T = 1, a batch of one, several rows, the longest input (context_length 16), a tied model (SmolLM2's),
    # heads of 12 dimensions, and three rotary bases (SmolLM2's 100,000 among them): nothing can be typed in
    return [(rotary_model(31), random_ids(31, 1, 5)), (rotary_model(33, rope_theta=100000.0), random_ids(33, 1, 1)),
            (rotary_model(32, rope_theta=100000.0), random_ids(32, 3, 9)),
            (rotary_model(34, rope_theta=500.0), random_ids(34, 2, 16)),
            (rotary_model(35, tie_embeddings=True, rope_theta=100000.0), random_ids(35, 2, 7)),
            (rotary_model(36, d_model=48, n_heads=4, n_kv_heads=4), random_ids(36, 2, 4))]


def _positions(input_ids, first=0):
    B, T = input_ids.shape
    return torch.arange(first, first + T).expand(B, T)


@torch.no_grad()
def _embed(model, input_ids):
    return model.embed(input_ids, _positions(input_ids))


def _with_angles(model, input_ids, positions=None, theta=None, scale=1.0):
    """(token vectors, their angles) as a learner might compute them: other positions, another base."""
    c = model.config
    positions = _positions(input_ids) if positions is None else positions
    return (model.token_embedding(input_ids) * scale,
            rotary_angles(positions, c.head_dim, c.rope_theta if theta is None else theta))


def _q1_diagnose(args, expected, got):
    model, ids = args
    B, T = ids.shape
    if isinstance(got, torch.Tensor):
        raise Mistake("return a pair, (h, rotary): the token vectors and the rotary angles (cos, sin), as "
                      "model.embed does; the angles are how this model sees order")
    h, rotary = got
    if rotary is None:
        raise Mistake("rotary is None: this model has no position table, so without the angles nothing says "
                      "where a token is. Return the angles of positions 0 to T - 1, rotary_angles(positions, "
                      "model.config.head_dim, model.config.rope_theta)")
    cos = torch.as_tensor(rotary[0])
    if cos.dim() == 4 and cos.shape[0] == 1 < B:
        raise Mistake(f"the angles have a batch dimension of 1: give rotary_angles positions of shape (B, T) = "
                      f"({B}, {T}), one row per row of input_ids, torch.arange(T).expand(B, T)")
    if cos.dim() == 4 and cos.shape[-1] == model.config.d_model != model.config.head_dim:
        raise Mistake("the angles are as wide as d_model: each head turns its own queries and keys, so they "
                      "are as wide as one head, model.config.head_dim")


POSITIONS_ARE_TOKEN_IDS = ("you used the token ids as positions: token t's position is t (0 to T - 1), whatever its "
                           "id; the positions are torch.arange(T) in every row")
BATCH_SIZE_AS_T = ("len(input_ids) is the batch size B (the number of rows), not the number of tokens T: the "
                   "positions are torch.arange(input_ids.shape[1]), 0 to T - 1")
SCALED = ("you scaled the token vectors by sqrt(d_model), as the original Transformer did; this model (like "
          "GPT-2 and SmolLM2) reads its table as it is: h is model.token_embedding(input_ids)")


def _q1_error(args, error):
    model, ids = args
    if "'NoneType' object is not callable" in error:
        return ("this model has no position table (model.position_embedding is None): a model with rotary "
                "positions adds nothing to the token vectors; order enters through the angles, "
                "rotary_angles(positions, model.config.head_dim, model.config.rope_theta)")
    if "too many indices for tensor of dimension 1" in error:
        return ("rotary_angles takes positions of shape (B, T), one row per row of input_ids: "
                "torch.arange(T).expand(B, T), not torch.arange(T)")
    if "expanded size" in error and ids.shape[0] != ids.shape[1]:
        return BATCH_SIZE_AS_T


q1 = Question(Task(
    rebuilds=("nexttoken.model:Decoder.embed",),
    name="q1", function="embed", title="where order enters: token vectors and rotary angles", chapter=CHAPTER,
    cases=_rotary_cases, reference=_embed, diagnose=_q1_diagnose, errors=_q1_error, forbid=NO_EMBED,
    known=[
        Known(SCALED, lambda m, ids: _with_angles(m, ids, scale=math.sqrt(m.config.d_model))),
        Known(POSITIONS_ARE_TOKEN_IDS, lambda m, ids: _with_angles(m, ids, positions=ids)),
        Known(BATCH_SIZE_AS_T, lambda m, ids: _with_angles(m, ids, positions=torch.arange(len(ids)).expand(ids.shape))),
        Known("positions start at 0, not 1: the first token is not turned at all (cos 1, sin 0)",
              lambda m, ids: _with_angles(m, ids, positions=_positions(ids, first=1))),
        Known("the positions run backwards: position t is t tokens after the start, torch.arange(T)",
              lambda m, ids: _with_angles(m, ids, positions=_positions(ids).flip(-1))),
        Known("the rotary base is typed in (10,000): read it from the model, model.config.rope_theta",
              lambda m, ids: _with_angles(m, ids, theta=10000.0)),
        Known("the rotary base is typed in (SmolLM2's 100,000): read it from the model, model.config.rope_theta",
              lambda m, ids: _with_angles(m, ids, theta=100000.0)),
    ],
    hints=("A model with rotary positions adds nothing to a token's vector for its position: what does it "
           "give the blocks instead?",
           "The token vectors are a table lookup; the angles come from each row's positions 0 to T - 1, the size "
           "of one head and the model's rotary base, all of them in model.config.",
           "rotary_angles (from nexttoken.model) takes positions of shape (B, T): the chapter built them with "
           "torch.arange(T).expand(B, T)."),
))


@torch.no_grad()
def _walk(m, ids, mask=None, rotary=True, reverse=False, chained=True, residual=False, norm_each=False,
          blocks=None):
    """The residual stream after the blocks, walked as a learner might: another mask, no angles, the
    blocks reversed, each reading the embeddings (not chained), the residual added again, a norm after each."""
    h, angles = _embed(m, ids)
    mask = causal_mask(ids.shape[1]) if mask is None else mask
    x = h
    chosen = list(m.blocks if blocks is None else blocks)
    for block in reversed(chosen) if reverse else chosen:
        out, _ = block(x if chained else h, mask, rotary=angles if rotary else None)
        x = x + out if residual else out
        x = m.final_norm(x) if norm_each else x
    return x


def _logits(m, x, norm=True):
    return m.lm_head(m.final_norm(x) if norm else x)


@torch.no_grad()
def _forward(model, input_ids):
    return _logits(model, _walk(model, input_ids))


def _q2_diagnose(args, expected, got):
    model, ids = args
    if got.dim() == 3 and got.shape[-1] == model.config.d_model != model.config.vocab_size:
        raise Mistake("these are hidden states (last dimension d_model); apply model.lm_head to get logits")


def _q2_error(args, error):
    if "must be Tensor, not tuple" in error or "'tuple' object has no attribute 'pow'" in error:
        return ("a block returns a pair, (its output, its attention weights), and the pair itself went on into the "
                "next block (or the final norm): unpack it, x, _ = block(x, mask, rotary=rotary)")
    if "object has no attribute 'extend'" in error:
        return ("a block's third parameter is a KV cache, and the angles went there: pass them by name, "
                "block(x, mask, rotary=rotary)")
    if "'NoneType' object is not callable" in error:
        return ("this model has no position table (model.position_embedding is None): start the walk with "
                "model.embed(input_ids, positions) (or your embed), which gives the token vectors and the angles")


def _float_mask(T):
    return torch.ones(T, T).tril()


q2 = Question(Task(
    name="q2", function="forward", title="the whole forward pass", chapter=CHAPTER,
    cases=_rotary_cases, reference=_forward, diagnose=_q2_diagnose, errors=_q2_error,
    forbid=shortcut_rule("model(...)", "model(...) or model.forward", "the forward pass"),
    known=[
        Known("you skipped the final norm (model.final_norm) before the LM head",
              lambda m, ids: _logits(m, _walk(m, ids), norm=False)),
        Known("the blocks got no rotary angles: pass rotary=rotary (from model.embed) to every block; without "
              "them this model's attention does not see where a token is",
              lambda m, ids: _logits(m, _walk(m, ids, rotary=False))),
        Known("you multiplied by the token embedding matrix (h @ E.T): that is the LM head only in a model with "
              "tied weights (tie_embeddings=True, like SmolLM2); this model's head is a matrix of its own. "
              "Use model.lm_head, which is right for both",
              torch.no_grad()(lambda m, ids: m.final_norm(_walk(m, ids)) @ m.token_embedding.weight.T)),
        Known("future positions are visible: pass causal_mask(T) to every block",
              lambda m, ids: _logits(m, _walk(m, ids, mask=torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool)))),
        Known("your mask is inverted (~causal_mask(T)): True marks the keys a query may see, j <= i, so pass "
              "causal_mask(T) as it is", lambda m, ids: _logits(m, _walk(m, ids, mask=~causal_mask(ids.shape[1])))),
        Known("your mask is a float tensor of 1s and 0s: attention adds a float mask to the scores (0 hides "
              "nothing, 1 only shifts the past), where a bool mask hides each key marked False. Pass a bool mask, "
              "causal_mask(T)", lambda m, ids: _logits(m, _walk(m, ids, mask=_float_mask(ids.shape[1])))),
        Known("only the first block ran: loop over every block of model.blocks, each one's output feeding "
              "the next", lambda m, ids: _logits(m, _walk(m, ids, blocks=m.blocks[:1]))),
        Known("each block read the embeddings, not the block before it: only the last block's work reached the "
              "head. Feed each block's output to the next, x, _ = block(x, mask, rotary=rotary)",
              lambda m, ids: _logits(m, _walk(m, ids, chained=False))),
        Known("the blocks ran in reverse order: block 0 reads the embeddings, and each later block the output of "
              "the one before it (for block in model.blocks)", lambda m, ids: _logits(m, _walk(m, ids, reverse=True))),
        Known("you added the residual again around each block: a block already returns x + attention + MLP (its "
              "own residual connections), so x, _ = block(x, ...), not x = x + block(x, ...)[0]",
              lambda m, ids: _logits(m, _walk(m, ids, residual=True))),
        Known("the blocks were skipped: the embeddings went straight to the final norm and the LM head",
              lambda m, ids: _logits(m, _embed(m, ids)[0])),
        Known("the final norm goes once, after the last block, not after every block",
              lambda m, ids: m.lm_head(_walk(m, ids, norm_each=True))),
        Known("you applied a softmax: forward returns the logits, the raw scores model(input_ids) returns "
              "(chapter 4 turns the last position's into probabilities)",
              lambda m, ids: torch.softmax(_forward(m, ids), dim=-1)),
    ],
    hints=("The walk of the chapter: embed, every block in turn, a final norm, the LM head.",
           "model.embed(input_ids, positions) gives the token vectors and the angles; each block needs the "
           "causal mask for T = input_ids.shape[1] and the angles, and returns a pair: keep the first.",
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
    ("MLP up projection of each block", "a d_model x d_ff weight and a bias of d_ff",
     lambda c: c.d_model * c.d_ff + c.d_ff, lambda c: c.n_layers),
    ("MLP down projection of each block", "a d_ff x d_model weight and a bias of d_model",
     lambda c: c.d_ff * c.d_model + c.d_model, lambda c: c.n_layers),
    ("bias of every LayerNorm", "a LayerNorm has a weight and a bias of d_model each; two per block, one final",
     lambda c: c.d_model, lambda c: 2 * c.n_layers + 1),
]


def _off_by(size, have, sign):
    return lambda c: _count(c) + sign * have(c) * size(c)


def _known_counts():
    """A count that leaves out, or counts twice, every tensor of one kind (on every configuration tried:
    the LM head only where it is untied, a block's tensors once per block). Kinds of the same total on every
    configuration (a block's two LayerNorms and its attention biases, 4 d_model each) are named together:
    the count cannot say which one it missed."""
    configs = [c for (c,) in _config_cases()]
    groups = {}
    for kind in _KINDS:
        _, _, size, have = kind
        groups.setdefault(tuple(size(c) * have(c) for c in configs), []).append(kind)
    known = []
    for kinds in groups.values():
        what = ", or ".join(f"the {what} ({shape})" for what, shape, _, _ in kinds)
        _, _, size, have = kinds[0]
        known.append(Known(f"your count leaves out {what}: add it", _off_by(size, have, -1)))
        known.append(Known(f"your count has {what} twice: count it once", _off_by(size, have, +1)))
    return known


def _q3_source(config):
    """The count's parts, for the diagnosis's family of sums (a part left out, counted twice, at another size, a
    block counted n_heads times, every bias left out): each tensor of GPT-2's kind, and the groups a learner
    counts as one (qkv, the MLP, a whole block)."""
    V, C, d, f, L = config.vocab_size, config.context_length, config.d_model, config.d_ff, config.n_layers
    block = 4 * d + 3 * d * d + 3 * d + d * d + d + 2 * d * f + f + d
    return Source(numbers={"n_heads": config.n_heads}, terms=(
        Term("token embedding", "vocab_size x d_model", V * d, 1),
        Term("LM head", "vocab_size x d_model, a matrix of its own when tie_embeddings=False", V * d,
             0 if config.tie_embeddings else 1),
        Term("position table", "context_length x d_model", C * d, 1),
        Term("final LayerNorm", "a weight and a bias of d_model each", 2 * d, 1, "norm"),
        Term("LayerNorms of each block", "two per block, a weight and a bias of d_model each", 4 * d, L, "norm"),
        Term("qkv projection of each block", "a d_model x 3 d_model weight and a bias of 3 d_model: queries, keys "
             "and values", 3 * d * d + 3 * d, L, "group"),
        Term("qkv weight of each block", "d_model x 3 d_model", 3 * d * d, L),
        Term("qkv bias of each block", "3 d_model", 3 * d, L, "bias"),
        Term("attention output projection weight of each block", "d_model x d_model", d * d, L),
        Term("attention output projection bias of each block", "d_model", d, L, "bias"),
        Term("MLP of each block", "up, d_model x d_ff with a bias of d_ff, and down, d_ff x d_model with a bias of "
             "d_model", 2 * d * f + f + d, L, "group"),
        Term("MLP up projection weight of each block", "d_model x d_ff", d * f, L),
        Term("MLP up projection bias of each block", "d_ff", f, L, "bias"),
        Term("MLP down projection weight of each block", "d_ff x d_model", f * d, L),
        Term("MLP down projection bias of each block", "d_model", d, L, "bias"),
        Term("block", "n_layers of them, each two LayerNorms, qkv, the output projection and the MLP", block, L,
             "block")))


def _q3_diagnose(args, expected, got):
    """A wrong count that no known mistake explains on every configuration: which way it is off, and the
    tensors it is off by on this configuration, if one kind of them accounts for it (the expected count
    itself is not shown: this is a predict task)."""
    (config,) = args
    if not is_int(got) or got == expected:
        return
    diff = got - expected
    way = "too high" if diff > 0 else "too low"
    found = []
    for what, shape, size, have in _KINDS:
        k, rest = divmod(abs(diff), size(config))
        # every tensor of the kind: a part of them matching is likelier a coincidence of this configuration
        if not rest and k == max(have(config), 1):
            found.append(f"{'' if k == 1 else f'{k} x '}the size of the {what} ({shape})")
    why = ("something is counted twice, or is not in the model" if diff > 0
           else "a tensor the model has is missing from your sum")
    if found:
        alternative = f", or by {found[1]}" if len(found) > 1 else ""
        raise Mistake(f"your count is {way} by exactly {found[0]}{alternative}: {why}")
    raise Mistake(f"your count is {way}, and not by every tensor of one kind: {why}; check each term "
                  f"of your sum against the shapes of the model's tensors")


q3 = Question(Task(
    rebuilds=("nexttoken.model:Decoder.num_parameters",),
    name="q3", function="count_parameters", title="predict the parameter count", chapter=CHAPTER, kind="predict",
    cases=_config_cases, reference=_num_parameters, diagnose=_q3_diagnose, source=_q3_source,
    forbid=shortcut_rule("Decoder(...)", "nexttoken.Decoder(config)", "the count", "predicting"),
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
        Known("the LM head has no bias (a Linear(d_model, vocab_size, bias=False)): your count has vocab_size more "
              "where the head is a matrix of its own", lambda c: _count(c) + (0 if c.tie_embeddings else c.vocab_size)),
        Known("the position table has context_length rows, one per position, not vocab_size",
              lambda c: _count(c) + (c.vocab_size - c.context_length) * c.d_model),
        *_known_counts(),
    ],
    hints=("List the model's weight matrices and vectors from chapter 3's diagram, then multiply out "
           "their shapes.",
           "A Linear from n to m has n * m weights and m biases; a LayerNorm over d has 2 * d parameters; an "
           "embedding table has rows x d_model.",
           "Per block: two LayerNorms, qkv (d -> 3d), proj (d -> d), MLP up (d -> d_ff) and down (d_ff -> d). "
           "Outside the blocks: two tables, a final LayerNorm, and the head (no bias), unless it is tied."),
))


# q4: GPT-2's kind of model, the chapter's Going deeper "A small model, rebuilt by hand": a learned table of
# positions, added to the token vectors (no angles). The test models are chapter 4's and common.py's.

def _learned_cases():
    # T = 1, a batch of one, several rows, the longest input the model allows (context_length 16), and a
    # tied model beside the untied ones
    return [(small_model(1), random_ids(1, 1, 5)), (small_model(3), random_ids(3, 1, 1)),
            (small_model(2), random_ids(2, 3, 9)), (small_model(4), random_ids(4, 2, 16)),
            (small_model(5, tie_embeddings=True), random_ids(5, 2, 7))]


def _q4_diagnose(args, expected, got):
    model, ids = args
    if tuple(got.shape) == (ids.shape[1], model.config.d_model):
        raise Mistake("the batch dimension is gone: the result is (B, T, d_model)")


POSITIONS_BY_ID = ("you looked up the position embeddings by token id (position_embedding(input_ids)): that table "
                   "has one row per position, 0 to context_length - 1, and token t's position is t, whatever its "
                   "id. Use position_embedding(torch.arange(T))")


def _q4_error(args, error):
    model, ids = args
    if "index out of range" in error and int(ids.max()) >= model.config.context_length:
        return POSITIONS_BY_ID
    if "must match the size of tensor" in error and ids.shape[0] != ids.shape[1]:
        return BATCH_SIZE_AS_T


def _batch_size_positions(m, ids):
    return m.token_embedding(ids) + m.position_embedding(torch.arange(len(ids)))  # broadcasts where B = 1 or T


q4 = Question(Task(
    name="q4", function="embed_with_table", title="GPT-2's kind: token + position embeddings", chapter=CHAPTER,
    cases=_learned_cases, reference=torch.no_grad()(embed_with_positions), diagnose=_q4_diagnose, errors=_q4_error,
    forbid=NO_EMBED,
    known=[
        Known(POSITIONS_BY_ID, lambda m, ids: m.token_embedding(ids) + m.position_embedding(ids)),
        Known(BATCH_SIZE_AS_T, _batch_size_positions),
        Known("you scaled the token vectors by sqrt(d_model), as the original Transformer did; GPT-2 adds the two "
              "tables' vectors as they are",
              lambda m, ids: m.token_embedding(ids) * math.sqrt(m.config.d_model)
              + m.position_embedding(torch.arange(ids.shape[1]))),
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
           "Look up both tables (token ids in one, the positions 0 to T - 1 in the other) and add: a (T, d_model) "
           "table broadcasts over the batch."),
))
