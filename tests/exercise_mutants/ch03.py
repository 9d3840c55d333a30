import torch

import nexttoken

from . import answers, bank

MUTANTS, mutant = bank()
CORRECT, correct = answers()


# q1: embed
@mutant("q1", expect="forgot the position embeddings")
def tokens_only(model, input_ids):
    return model.token_embedding(input_ids)


@mutant("q1", expect="only the position embeddings")
def positions_only(model, input_ids):
    return model.position_embedding(torch.arange(input_ids.shape[1])).expand(input_ids.shape[0], -1, -1)


@mutant("q1", expect="start at 0")
def positions_from_one(model, input_ids):
    return model.token_embedding(input_ids) + model.position_embedding(torch.arange(1, input_ids.shape[1] + 1))


@mutant("q1", expect="multiplied")
def multiplied(model, input_ids):
    return model.token_embedding(input_ids) * model.position_embedding(torch.arange(input_ids.shape[1]))


@mutant("q1", expect="backwards")
def reversed_positions(model, input_ids):
    T = input_ids.shape[1]
    return model.token_embedding(input_ids) + model.position_embedding(torch.arange(T - 1, -1, -1))


@mutant("q1", expect=None)
def positions_are_token_ids(model, input_ids):  # ids beyond the position table: an IndexError
    return model.token_embedding(input_ids) + model.position_embedding(input_ids)


@mutant("q1", expect="batch dimension is gone")
def first_row_only(model, input_ids):
    return model.token_embedding(input_ids[0]) + model.position_embedding(torch.arange(input_ids.shape[1]))


# q2: forward
def _embed(model, ids):
    return model.token_embedding(ids) + model.position_embedding(torch.arange(ids.shape[1]))


@mutant("q2", expect="skipped the final norm")
def no_final_norm(model, input_ids):
    x = _embed(model, input_ids)
    for block in model.blocks:
        x, _ = block(x, nexttoken.causal_mask(input_ids.shape[1]))
    return model.lm_head(x)


@mutant("q2", expect="future positions are visible")
def no_causal_mask(model, input_ids):
    T = input_ids.shape[1]
    x = _embed(model, input_ids)
    for block in model.blocks:
        x, _ = block(x, torch.ones(T, T, dtype=torch.bool))
    return model.lm_head(model.final_norm(x))


@mutant("q2", expect="only the first block")
def one_block(model, input_ids):
    x, _ = model.blocks[0](_embed(model, input_ids), nexttoken.causal_mask(input_ids.shape[1]))
    return model.lm_head(model.final_norm(x))


@mutant("q2", expect="blocks were skipped")
def no_blocks(model, input_ids):
    return model.lm_head(model.final_norm(_embed(model, input_ids)))


@mutant("q2", expect="hidden states")
def no_lm_head(model, input_ids):
    x = _embed(model, input_ids)
    for block in model.blocks:
        x, _ = block(x, nexttoken.causal_mask(input_ids.shape[1]))
    return model.final_norm(x)


@mutant("q2", expect="position embeddings are missing")
def no_positions(model, input_ids):
    x = model.token_embedding(input_ids)
    for block in model.blocks:
        x, _ = block(x, nexttoken.causal_mask(input_ids.shape[1]))
    return model.lm_head(model.final_norm(x))


@mutant("q2", expect="after every block")
def norm_in_loop(model, input_ids):
    x = _embed(model, input_ids)
    for block in model.blocks:
        x, _ = block(x, nexttoken.causal_mask(input_ids.shape[1]))
        x = model.final_norm(x)
    return model.lm_head(x)


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


@mutant("q3", expect="without building the model")
def returns_a_model(config):
    return nexttoken.Decoder(config)


# --- issue 19: norms the identity let pass; rules that were not enforced ---
def _embed(model, input_ids):
    return model.token_embedding(input_ids) + model.position_embedding(torch.arange(input_ids.shape[1]))


@mutant("q2", expect="without calling model(...)")
def forward_by_calling_the_model(model, input_ids):
    return model(input_ids)


# issue 43: through the class, and through the function saved before the rule is set
_saved_forward = nexttoken.Decoder.forward_unchecked


@mutant("q2", expect="without calling model(...)")
def forward_through_the_class(model, input_ids):
    return nexttoken.Decoder.forward(model, input_ids)


@mutant("q2", expect="without calling model(...)")
def forward_saved_beforehand(model, input_ids):
    return _saved_forward(model, input_ids)


@mutant("q2", expect=None)
def layer_norm_without_parameters(model, input_ids):
    x = _embed(model, input_ids)
    for block in model.blocks:
        x, _ = block(x, nexttoken.causal_mask(input_ids.shape[1]))
    return model.lm_head(torch.nn.functional.layer_norm(x, (x.shape[-1],)))


@mutant("q2", expect=None)
def final_norm_twice(model, input_ids):
    x = _embed(model, input_ids)
    for block in model.blocks:
        x, _ = block(x, nexttoken.causal_mask(input_ids.shape[1]))
    return model.lm_head(model.final_norm(model.final_norm(x)))


@mutant("q2", expect=None)
def last_blocks_norm_as_final(model, input_ids):
    x = _embed(model, input_ids)
    for block in model.blocks:
        x, _ = block(x, nexttoken.causal_mask(input_ids.shape[1]))
    return model.lm_head(model.blocks[-1].norm2(x))  # the wrong norm module


@mutant("q3", expect="without building the model")
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


# --- right answers written another way ---
@correct("q1")
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


# --- issue 42: a wrong count names the tensors it is off by ---
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


# issue 53: the slips a learner made blind
@mutant("q1", expect="by token id (position_embedding(input_ids))")
def positions_by_token_id(model, input_ids):
    return model.token_embedding(input_ids) + model.position_embedding(input_ids)


@mutant("q2", expect="unpack it, x, _ = block(x, mask)")
def block_pair_not_unpacked(model, input_ids):
    x = model.token_embedding(input_ids) + model.position_embedding(torch.arange(input_ids.shape[1]))
    mask = torch.ones(input_ids.shape[1], input_ids.shape[1], dtype=torch.bool).tril()
    for block in model.blocks:
        x = block(x, mask)
    return model.lm_head(model.final_norm(x))


@mutant("q2", expect="that is the LM head only in a model with tied weights")
def embedding_matrix_as_head(model, input_ids):
    x = model.token_embedding(input_ids) + model.position_embedding(torch.arange(input_ids.shape[1]))
    mask = torch.ones(input_ids.shape[1], input_ids.shape[1], dtype=torch.bool).tril()
    for block in model.blocks:
        x, _ = block(x, mask)
    return model.final_norm(x) @ model.token_embedding.weight.T
