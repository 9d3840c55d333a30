"""Opt-in speed-ups that change how a model is stored, never what it computes.

Nothing in the lesson needs them: ``Decoder(config)`` builds plain ``nn.Linear`` weights. The
benchmarks in ``bench/`` apply them, and so can you (see the appendix on CPU weight layout).
"""

from torch import nn


def lay_out_for_cpu(model: nn.Module) -> nn.Module:
    """Store each widening linear layer's weight in memory as (in, out), GPT-2's own layout. Returns model.

    Generating one token multiplies a single vector by every weight matrix, so a step's time is mostly
    spent reading weights from memory, and how fast a matrix is read depends on how it is laid out.
    On CPU (MKL), a one-row matmul reads a matrix that widens (out >= in: qkv, the MLP's up projection,
    the LM head) faster stored (in, out), as GPT-2's Conv1D keeps it, and one that narrows (the MLP's
    down projection) faster as nn.Linear keeps it, (out, in): by 1.2x to 1.7x on the 2-core machine
    this was written on. ``bench/weight_layout.py`` measures both on yours.

    Values, shapes and results are unchanged: only the memory order (the strides). The new storage is
    assigned through ``.data``, so every parameter stays the same object: an optimizer holding it, and
    a tied LM head / token embedding, are not disturbed. ``load_state_dict`` copies values into this
    layout; building a new ``Decoder`` (``load_decoder``, ``load_pretrained``) gives plain weights again.
    """
    for module in model.modules():
        if isinstance(module, nn.Linear) and module.out_features >= module.in_features:
            weight = module.weight
            if not weight.t().is_contiguous():  # not laid out yet (a second call changes nothing)
                weight.data = weight.data.t().contiguous().t()
    return model
