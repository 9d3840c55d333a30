"""Argument checks shared by the model and the generation loop.

They take plain values (a vocabulary size, a shape), not the model, so this module imports nothing of
the library and both ``model.py`` and ``generate.py`` can use it. Each error names the argument and
what was expected. ``generate`` runs them once per call; the model's own forward runs the tensor checks
only when called directly (``Decoder.forward``), not at every step of the loop (``Decoder.forward_unchecked``).
"""

import inspect
import numbers
from collections.abc import Callable

import torch


def check_token_ids(input_ids, vocab_size: int, name: str = "input_ids") -> torch.Tensor:
    """Validate a batch of token ids; a 1-D tensor is taken as a batch of one. Returns (B, T) int64."""
    if not isinstance(input_ids, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(input_ids).__name__}")
    if input_ids.dtype.is_floating_point or input_ids.dtype.is_complex or input_ids.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids, got dtype {input_ids.dtype}")
    if input_ids.dim() == 1:
        input_ids = input_ids.unsqueeze(0)
    if input_ids.dim() != 2:
        raise ValueError(f"{name} must have shape (batch, time) or (time,), got {tuple(input_ids.shape)}")
    if input_ids.numel() == 0:
        raise ValueError(f"{name} is empty (shape {tuple(input_ids.shape)}): give at least one token")
    low, high = int(input_ids.min()), int(input_ids.max())
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ValueError(f"{name} holds id {bad}, outside the vocabulary [0, {vocab_size})")
    return input_ids.long()


def check_attention_mask(attention_mask, shape) -> torch.Tensor:
    """Validate a 0/1 mask of the given (B, T) shape; a 1-D mask goes with a 1-D prompt. Returns it as long."""
    if not isinstance(attention_mask, torch.Tensor):
        raise TypeError(f"attention_mask must be a torch.Tensor, got {type(attention_mask).__name__}")
    if attention_mask.dim() == 1:
        attention_mask = attention_mask.unsqueeze(0)
    if tuple(attention_mask.shape) != tuple(shape):
        raise ValueError(
            f"attention_mask has shape {tuple(attention_mask.shape)}, expected {tuple(shape)} "
            "(one 0/1 entry per token of input_ids, cached tokens included)"
        )
    if not torch.all((attention_mask == 0) | (attention_mask == 1)):
        raise ValueError("attention_mask must hold only 0 (padding) and 1 (token)")
    if not attention_mask.bool().any(dim=-1).all():
        row = int((~attention_mask.bool().any(dim=-1)).nonzero()[0])
        raise ValueError(f"attention_mask row {row} is all zeros: every row needs at least one real token")
    return attention_mask.long()


def check_left_padded(attention_mask: torch.Tensor) -> None:
    """Refuse padding after a real token: generation appends after the last slot, so it must be a token.

    transformers only warns here and then continues the text after the pad tokens, which is a common
    source of nonsense output; an error that names the fix costs the user less.
    """
    # A 0 after a 1 in a row: the running maximum has reached 1, yet this slot is 0.
    late_pad = (attention_mask.cummax(dim=-1).values == 1) & (attention_mask == 0)
    if late_pad.any():
        row = int(late_pad.any(dim=-1).nonzero()[0])
        raise ValueError(
            f"attention_mask row {row} has padding (0) after a real token (1): for generation, pad on the "
            "left, so that every row ends with its last real token (with a Hugging Face tokenizer: "
            "padding_side='left')"
        )


def is_int(value) -> bool:
    """An int that is not a bool: True is an int to Python, but never a count, a size or a token id here."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_whole(value) -> bool:
    """An integer of any type (int, numpy.int64, ...) that is not a bool: a count a learner computed."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value) -> bool:
    """A real number of any type (int, float, numpy.float32, ...) that is not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_positive_int(value, name: str) -> int:
    """A size (of a layer, a vocabulary, a number of repeats): an int >= 1, bool refused (``is_int``).
    Anything else, a float or a bool among them, is a bad value for it: ValueError, as ``DecoderConfig``
    has always raised. Returns it."""
    if not is_int(value) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def check_count(value, name: str) -> int:
    """A non-negative int (bool refused: ``is_int``)."""
    if not is_int(value):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def normalize_eos(eos_token_id, vocab_size: int) -> list[int]:
    """``eos_token_id`` as a list of ids: an int, a non-empty list/tuple of ints, or None (-> [])."""
    if eos_token_id is None:
        return []
    ids = [eos_token_id] if isinstance(eos_token_id, int) else eos_token_id
    if not isinstance(ids, (list, tuple)) or len(ids) == 0:
        raise ValueError(f"eos_token_id must be an int, a non-empty list of ints, or None; got {eos_token_id!r}")
    for i in ids:
        if not is_int(i) or not 0 <= i < vocab_size:
            raise ValueError(f"eos_token_id holds {i!r}, expected token ids in [0, {vocab_size})")
    return list(ids)


def check_pad_token_id(pad_token_id, vocab_size: int) -> None:
    if pad_token_id is None:
        return
    if not is_int(pad_token_id):
        raise TypeError(f"pad_token_id must be an int or None, got {pad_token_id!r}")
    if not 0 <= pad_token_id < vocab_size:
        raise ValueError(f"pad_token_id is {pad_token_id}, expected a token id in [0, {vocab_size})")


def check_function(value, name: str, expected: str, *args, **kwargs) -> None:
    """``value`` must be callable (None is checked by the caller) as ``value(*args, **kwargs)`` will be
    called (placeholders): a function of the wrong shape fails here, before the first step, not inside
    the loop. ``expected`` says how it is called. Functions without a signature (some builtins) pass."""
    if not callable(value):
        raise TypeError(f"{name} must be a function of {expected}, got {value!r}")
    try:
        inspect.signature(value).bind(*args, **kwargs)
    except ValueError:  # no signature to read: it will tell at the first call
        return
    except TypeError as exc:
        raise TypeError(f"{name} must be a function of {expected}, but {value!r} cannot be called that way "
                        f"({exc})") from None


def check_logits_processors(processors) -> list[Callable]:
    """None or a list/tuple of functions f(input_ids, scores) -> scores. Returns a list."""
    if processors is None:
        return []
    if not isinstance(processors, (list, tuple)):
        raise TypeError(
            "logits_processors must be a list of functions f(input_ids, scores) -> scores, "
            f"got {type(processors).__name__}"
        )
    for i, f in enumerate(processors):
        check_function(f, f"logits_processors[{i}]", "(input_ids, scores) returning scores", None, None)
    return list(processors)
