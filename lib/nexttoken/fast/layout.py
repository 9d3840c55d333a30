"""CPU weight layout: widening weights stored (in, out) in memory, the order MKL reads fastest for one row.

The appendix "CPU weight layout" explains it; ``bench/weight_layout.py`` measures both orders on your CPU.
"""

from torch import nn


def lay_out_for_cpu(model: nn.Module) -> nn.Module:
    """Store each widening linear layer's weight in memory as (in, out), GPT-2's own layout. Returns model.

    Generating one token multiplies a single vector by every weight matrix, so a step's time is mostly
    spent reading weights from memory, and how fast a matrix is read depends on how it is laid out.
    On CPU (MKL), a one-row matmul reads a matrix that widens (out >= in: qkv, the MLP's up projection,
    the LM head) faster stored (in, out), as GPT-2's Conv1D keeps it, and one that narrows (the MLP's
    down projection) faster as nn.Linear keeps it, (out, in). How much depends on the CPU:
    ``bench/weight_layout.py`` measures both layouts on yours (bench/README.md has dated figures).

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
