import math

import torch

import nexttoken
from nexttoken.model import rotary_angles

from . import answers, bank

MUTANTS, mutant = bank()
CORRECT, correct = answers()


# q1: embed, SmolLM2's kind (rotary angles, no position table)
def _angles(model, positions, theta=None, head_dim=None):
    c = model.config
    return rotary_angles(positions, head_dim or c.head_dim, c.rope_theta if theta is None else theta)


def _rows(input_ids):
    B, T = input_ids.shape
    return torch.arange(T).expand(B, T)


@mutant("q1", expect="return a pair, (h, rotary)")
def vectors_only(model, input_ids):
    return model.token_embedding(input_ids)


@mutant("q1", expect="rotary is None")
def no_angles(model, input_ids):
    return model.token_embedding(input_ids), None


@mutant("q1", expect="this model has no position table")
def adds_a_position_table(model, input_ids):
    T = input_ids.shape[1]
    return model.token_embedding(input_ids) + model.position_embedding(torch.arange(T)), None


@mutant("q1", expect="positions of shape (B, T)")
def one_row_of_positions(model, input_ids):
    return model.token_embedding(input_ids), _angles(model, torch.arange(input_ids.shape[1]))


@mutant("q1", expect="a batch dimension of 1")
def positions_without_their_rows(model, input_ids):
    return model.token_embedding(input_ids), _angles(model, torch.arange(input_ids.shape[1])[None])


@mutant("q1", expect="as wide as one head, model.config.head_dim")
def angles_as_wide_as_d_model(model, input_ids):
    return model.token_embedding(input_ids), _angles(model, _rows(input_ids), head_dim=model.config.d_model)


@mutant("q1", expect="you used the token ids as positions")
def token_ids_as_positions(model, input_ids):
    return model.token_embedding(input_ids), _angles(model, input_ids)


@mutant("q1", expect="positions start at 0, not 1")
def positions_from_one(model, input_ids):
    return model.token_embedding(input_ids), _angles(model, _rows(input_ids) + 1)


@mutant("q1", expect="the positions run backwards")
def positions_backwards(model, input_ids):
    return model.token_embedding(input_ids), _angles(model, _rows(input_ids).flip(-1))


@mutant("q1", expect="read it from the model, model.config.rope_theta")
def base_typed_in(model, input_ids):
    return model.token_embedding(input_ids), _angles(model, _rows(input_ids), theta=10000.0)


@mutant("q1", expect="SmolLM2's 100,000")
def smollm2s_base_typed_in(model, input_ids):
    return model.token_embedding(input_ids), _angles(model, _rows(input_ids), theta=100000.0)


@mutant("q1", expect="do not call model.embed here: it is what you are rebuilding")
def the_librarys_embed(model, input_ids):
    return model.embed(input_ids, _rows(input_ids))


@mutant("q1", expect="do not call model.embed here: it is what you are rebuilding")
def the_librarys_embed_through_the_class(model, input_ids):
    return nexttoken.Decoder.embed(model, input_ids, _rows(input_ids))


# q2: forward, SmolLM2's kind
def _walk(model, input_ids, mask=None, rotary=True, blocks=None):
    T = input_ids.shape[1]
    x, angles = model.embed(input_ids, _rows(input_ids))
    mask = nexttoken.causal_mask(T) if mask is None else mask
    for block in model.blocks if blocks is None else blocks:
        x, _ = block(x, mask, rotary=angles if rotary else None)
    return x


@mutant("q2", expect="skipped the final norm")
def no_final_norm(model, input_ids):
    return model.lm_head(_walk(model, input_ids))


@mutant("q2", expect="the blocks got no rotary angles")
def no_rotary(model, input_ids):
    return model.lm_head(model.final_norm(_walk(model, input_ids, rotary=False)))


@mutant("q2", expect="pass them by name, block(x, mask, rotary=rotary)")
def rotary_as_third_argument(model, input_ids):
    T = input_ids.shape[1]
    x, angles = model.embed(input_ids, _rows(input_ids))
    for block in model.blocks:
        x, _ = block(x, nexttoken.causal_mask(T), angles)
    return model.lm_head(model.final_norm(x))


@mutant("q2", expect="future positions are visible")
def no_causal_mask(model, input_ids):
    T = input_ids.shape[1]
    return model.lm_head(model.final_norm(_walk(model, input_ids, mask=torch.ones(T, T, dtype=torch.bool))))


@mutant("q2", expect="only the first block")
def one_block(model, input_ids):
    return model.lm_head(model.final_norm(_walk(model, input_ids, blocks=model.blocks[:1])))


@mutant("q2", expect="blocks were skipped")
def no_blocks(model, input_ids):
    return model.lm_head(model.final_norm(_walk(model, input_ids, blocks=[])))


@mutant("q2", expect="hidden states")
def no_lm_head(model, input_ids):
    return model.final_norm(_walk(model, input_ids))


@mutant("q2", expect="has no position table")
def table_of_gpt2s_kind(model, input_ids):
    T = input_ids.shape[1]
    x = model.token_embedding(input_ids) + model.position_embedding(torch.arange(T))
    for block in model.blocks:
        x, _ = block(x, nexttoken.causal_mask(T))
    return model.lm_head(model.final_norm(x))


@mutant("q2", expect="after every block")
def norm_in_loop(model, input_ids):
    T = input_ids.shape[1]
    x, angles = model.embed(input_ids, _rows(input_ids))
    for block in model.blocks:
        x, _ = block(x, nexttoken.causal_mask(T), rotary=angles)
        x = model.final_norm(x)
    return model.lm_head(x)


@mutant("q2", expect="do not call model(...) or model.forward here")
def forward_by_calling_the_model(model, input_ids):
    return model(input_ids)


# through the class, and through the function saved before the rule is set
_saved_forward = nexttoken.Decoder.forward_unchecked


@mutant("q2", expect="do not call model(...) or model.forward here")
def forward_through_the_class(model, input_ids):
    return nexttoken.Decoder.forward(model, input_ids)


@mutant("q2", expect="do not call model(...) or model.forward here")
def forward_saved_beforehand(model, input_ids):
    return _saved_forward(model, input_ids)


@mutant("q2", expect=None)
def rms_norm_without_its_weight(model, input_ids):
    x = _walk(model, input_ids)
    return model.lm_head(torch.nn.functional.rms_norm(x, (x.shape[-1],), eps=model.config.norm_eps))


@mutant("q2", expect=None)
def final_norm_twice(model, input_ids):
    return model.lm_head(model.final_norm(model.final_norm(_walk(model, input_ids))))


@mutant("q2", expect=None)
def last_blocks_norm_as_final(model, input_ids):
    return model.lm_head(model.blocks[-1].norm2(_walk(model, input_ids)))  # the wrong norm module


@mutant("q2", expect="unpack it, x, _ = block(x, mask, rotary=rotary)")
def block_pair_not_unpacked(model, input_ids):
    T = input_ids.shape[1]
    x, angles = model.embed(input_ids, _rows(input_ids))
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for block in model.blocks:
        x = block(x, mask, rotary=angles)
    return model.lm_head(model.final_norm(x))


@mutant("q2", expect="that is the LM head only in a model with tied weights")
def embedding_matrix_as_head(model, input_ids):
    return model.final_norm(_walk(model, input_ids)) @ model.token_embedding.weight.T


# the slips a learner made blind on chapter 3's walk
@mutant("q2", expect="your mask is inverted (~causal_mask(T))")
def inverted_mask(model, input_ids):
    return model.lm_head(model.final_norm(_walk(model, input_ids, mask=~nexttoken.causal_mask(input_ids.shape[1]))))


@mutant("q2", expect="your mask is a float tensor of 1s and 0s")
def float_mask_added_to_the_scores(model, input_ids):
    T = input_ids.shape[1]
    return model.lm_head(model.final_norm(_walk(model, input_ids, mask=torch.ones(T, T).tril())))


@mutant("q2", expect="each block read the embeddings, not the block before it")
def blocks_not_chained(model, input_ids):
    T = input_ids.shape[1]
    h, angles = model.embed(input_ids, _rows(input_ids))
    for block in model.blocks:
        x, _ = block(h, nexttoken.causal_mask(T), rotary=angles)
    return model.lm_head(model.final_norm(x))


@mutant("q2", expect="you added the residual again around each block")
def residual_added_again(model, input_ids):
    T = input_ids.shape[1]
    x, angles = model.embed(input_ids, _rows(input_ids))
    for block in model.blocks:
        out, _ = block(x, nexttoken.causal_mask(T), rotary=angles)
        x = x + out
    return model.lm_head(model.final_norm(x))


@mutant("q2", expect="you applied a softmax: forward returns the logits")
def softmax_on_the_logits(model, input_ids):
    return torch.softmax(model.lm_head(model.final_norm(_walk(model, input_ids))), dim=-1)


@mutant("q2", expect="the blocks ran in reverse order")
def blocks_in_reverse(model, input_ids):
    T = input_ids.shape[1]
    x, angles = model.embed(input_ids, _rows(input_ids))
    for block in reversed(model.blocks):
        x, _ = block(x, nexttoken.causal_mask(T), rotary=angles)
    return model.lm_head(model.final_norm(x))


# q3: count_parameters
def _count(config, tied_twice=False, positions=True, biases=True, norms=True, d_ff=None, blocks=None):
    V, C, d = config.vocab_size, config.context_length, config.d_model
    f = config.d_ff if d_ff is None else d_ff
    b = 1 if biases else 0
    block = (4 * d if norms else 0) + 3 * d * d + b * 3 * d + d * d + b * d + d * f + b * f + f * d + b * d
    n = (V * d + (C * d if positions else 0) + (config.n_layers if blocks is None else blocks) * block
         + (2 * d if norms else 0))
    return n + (V * d if tied_twice or not config.tie_embeddings else 0)


@mutant("q3", expect="count it once")
def tied_head_counted_twice(config):
    return _count(config, tied_twice=True)


@mutant("q3", expect="position table is missing")
def no_position_table(config):
    return _count(config, positions=False)


@mutant("q3", expect="biases are missing")
def no_biases(config):
    return _count(config, biases=False)


@mutant("q3", expect="LayerNorms are missing")
def no_norms(config):
    return _count(config, norms=False)


@mutant("q3", expect="config.d_ff")
def four_d_mlp(config):
    return _count(config, d_ff=4 * config.d_model)


@mutant("q3", expect="you counted one block")
def one_block_counted(config):
    return _count(config, blocks=1)


@mutant("q3", expect="leaves out the qkv bias of each block")
def attention_without_qkv_bias(config):
    return _count(config) - 3 * config.d_model * config.n_layers


@mutant("q3", expect="the count is what you are predicting")
def returns_a_model(config):
    return nexttoken.Decoder(config)


@mutant("q3", expect="the count is what you are predicting")
def count_by_building(config):
    return nexttoken.Decoder(config).num_parameters()


@mutant("q3", expect="should be an integer")
def count_as_float(config):
    d, V, f = config.d_model, config.vocab_size, config.d_ff
    block = 4 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * f + f) + (f * d + d)
    head = 0 if config.tie_embeddings else V * d
    return float(V * d + config.context_length * d + config.n_layers * block + 2 * d + head)


@mutant("q3", expect="leaves out the MLP biases of each block")
def mlp_without_biases(config):
    d, V, f = config.d_model, config.vocab_size, config.d_ff
    block = 4 * d + (d * 3 * d + 3 * d) + (d * d + d) + d * f + f * d
    head = 0 if config.tie_embeddings else V * d
    return V * d + config.context_length * d + config.n_layers * block + 2 * d + head


# q4: embed_with_table, GPT-2's kind (a learned position table)
@mutant("q4", expect="forgot the position embeddings")
def tokens_only(model, input_ids):
    return model.token_embedding(input_ids)


@mutant("q4", expect="only the position embeddings")
def positions_only(model, input_ids):
    return model.position_embedding(torch.arange(input_ids.shape[1])).expand(input_ids.shape[0], -1, -1)


@mutant("q4", expect="start at 0")
def table_positions_from_one(model, input_ids):
    return model.token_embedding(input_ids) + model.position_embedding(torch.arange(1, input_ids.shape[1] + 1))


@mutant("q4", expect="multiplied")
def multiplied(model, input_ids):
    return model.token_embedding(input_ids) * model.position_embedding(torch.arange(input_ids.shape[1]))


@mutant("q4", expect="backwards")
def reversed_positions(model, input_ids):
    T = input_ids.shape[1]
    return model.token_embedding(input_ids) + model.position_embedding(torch.arange(T - 1, -1, -1))


@mutant("q4", expect="batch dimension is gone")
def first_row_only(model, input_ids):
    return model.token_embedding(input_ids[0]) + model.position_embedding(torch.arange(input_ids.shape[1]))


# the slips a learner made blind
@mutant("q4", expect="by token id (position_embedding(input_ids))")
def positions_by_token_id(model, input_ids):
    return model.token_embedding(input_ids) + model.position_embedding(input_ids)


# the slips a learner made blind (on the task that was q1)
@mutant("q4", expect="len(input_ids) is the batch size B")
def positions_from_the_batch_size(model, input_ids):
    return model.token_embedding(input_ids) + model.position_embedding(torch.arange(len(input_ids)))


@mutant("q4", expect="you scaled the token vectors by sqrt(d_model)")
def scaled_by_sqrt_d(model, input_ids):
    d = model.config.d_model
    return model.token_embedding(input_ids) * math.sqrt(d) + model.position_embedding(torch.arange(input_ids.shape[1]))


@mutant("q4", expect="do not call model.embed here: it is what you are rebuilding")
def the_librarys_embed_for_a_table(model, input_ids):
    B, T = input_ids.shape
    return model.embed(input_ids, torch.arange(T).expand(B, T))[0]


# and the same slips on the rotary embed (q1)
@mutant("q1", expect="len(input_ids) is the batch size B")
def rotary_positions_from_the_batch_size(model, input_ids):
    B, T = input_ids.shape
    return model.token_embedding(input_ids), _angles(model, torch.arange(len(input_ids)).expand(B, T))


@mutant("q1", expect="you scaled the token vectors by sqrt(d_model)")
def rotary_scaled_by_sqrt_d(model, input_ids):
    return model.token_embedding(input_ids) * math.sqrt(model.config.d_model), _angles(model, _rows(input_ids))


# --- right answers written another way ---
@correct("q1")
def angles_by_hand(model, input_ids):
    """The angles from their formula: pair i of a head turns by position / rope_theta^(2i / head_dim)."""
    c = model.config
    B, T = input_ids.shape
    inv_freq = c.rope_theta ** (-torch.arange(0, c.head_dim, 2).float() / c.head_dim)
    angles = torch.arange(T).float()[:, None] * inv_freq  # (T, head_dim / 2)
    angles = torch.cat([angles, angles], dim=-1).expand(B, 1, T, c.head_dim)
    return model.token_embedding.weight[input_ids], (angles.cos(), angles.sin())


@correct("q2")
def forward_with_its_own_embed(model, input_ids):
    B, T = input_ids.shape
    positions = torch.arange(T).expand(B, T)
    c = model.config
    x, angles = model.token_embedding(input_ids), rotary_angles(positions, c.head_dim, c.rope_theta)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for block in model.blocks:
        x = block(x, mask, rotary=angles)[0]
    return model.lm_head(model.final_norm(x))


@correct("q4")
def embed_with_explicit_broadcast(model, input_ids):
    B, T = input_ids.shape
    positions = torch.arange(T).expand(B, T)
    return model.token_embedding(input_ids) + model.position_embedding(positions)


@correct("q3")
def count_as_numpy_int(config):
    import numpy

    d, V, f = config.d_model, config.vocab_size, config.d_ff
    block = 4 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * f + f) + (f * d + d)
    head = 0 if config.tie_embeddings else V * d
    return numpy.int64(V * d + config.context_length * d + config.n_layers * block + 2 * d + head)


# --- a wrong count names the tensors it is off by ---
@mutant("q3", expect="leaves out the LM head")
def untied_head_forgotten(config):
    return _count(config) - (0 if config.tie_embeddings else config.vocab_size * config.d_model)


@mutant("q3", expect="has the position table (context_length x d_model) twice")
def position_table_counted_twice(config):
    return _count(config) + config.context_length * config.d_model


@mutant("q3", expect="your count is too low")  # two kinds at once: no single one names it; the way it is off does
def position_table_and_final_norm_missing(config):
    return _count(config) - config.context_length * config.d_model - 2 * config.d_model


@mutant("q3", expect="leaves out the d_model-sized bias of each block")
def output_projection_without_bias(config):
    return _count(config) - config.n_layers * config.d_model
