"""The diagnosis's families of bool layouts (a mask, the positions that change, the padded slots): the right
layout inverted, shifted, reversed, cut or lengthened, with its rows reordered or all alike, transposed or
with an axis too many; and, where the task says what the layout is read from (``Source.mask`` and
``column``, or each row's ``bounds``), the wrong column of the mask or the wrong width of a batch. Every
finding says how the whole layout was made (``leading``) and none of the words shows the answer (``safe``)."""

import torch

from .diagnosis_base import ROWS_ALIKE, ROWS_SWAPPED, Finding


def told(family, words) -> Finding:
    return Finding(family, words, safe=words, leading=True)


def layout(e, g, source=None):
    """The families of a bool layout ``g`` against the right one ``e``."""
    if g.dtype != torch.bool:
        return
    if tuple(g.shape) != tuple(e.shape):
        yield from _reshaped(e, g)
        if source is not None and source.bounds is not None:
            yield from _width(e, g, source)
        return
    if source is not None and source.mask is not None:
        yield from _mask_column(e, g, source)
    if source is not None and source.bounds is not None:
        yield from _unended_rows(e, g, source)
    yield from _same_shape(e, g)
    yield from _rows(e, g)


def _reshaped(e, g):
    """A layout of another shape: transposed, row 0 alone, an axis of size 1 too many, one entry too many or
    too few along the last dimension, or an empty answer that lost its shape."""
    if g.dim() == 2 and tuple(g.shape) == tuple(e.shape)[::-1] and e.shape[0] != e.shape[1] \
            and torch.equal(e.T, g):
        yield told("transposed", "your layout is transposed: rows and columns swapped (one row per row of the "
                                 "input, one column per position or slot)")
    if e.dim() == 2 and tuple(g.shape) == tuple(e.shape[1:]) and torch.equal(e[0], g):
        words = "you gave row 0 alone: the answer has one row per row of the input"
        # an empty row 0 is any empty output: consistent with the slip elsewhere, no evidence of it here
        yield told("row0", words) if e[0].numel() else Finding("row0", words, safe=words, leading=True, weak=True)
    if any(g.shape[d] == 1 and tuple(g.shape[:d] + g.shape[d + 1:]) == tuple(e.shape) for d in range(g.dim())) \
            and torch.equal(e.reshape(g.shape), g):
        yield told("extra_axis", "your output has an extra dimension of size 1 (a [None], an unsqueeze, or a row "
                                 "vector where a plain vector is asked): the entries are right, drop that dimension")
    if g.dim() == e.dim() >= 1 and g.shape[:-1] == e.shape[:-1]:
        if g.shape[-1] == e.shape[-1] + 1 and torch.equal(g[..., :-1], e):
            yield told("one_more", "your output is one column too wide: one entry too many along its last "
                                   "dimension (too many slots or positions: a width, range or arange one too long); "
                                   "the entries before it are right")
        if g.shape[-1] + 1 == e.shape[-1] and torch.equal(g, e[..., :-1]):
            yield told("one_fewer", "your output has one entry too few along its last dimension (a width, range or "
                                    "arange one too short); the entries it has are right")
    if e.numel() == 0 and e.dim() == 2 and g.numel() == 0:
        yield told("empty", "there is nothing to mark here (no slots), but the answer keeps its shape: one row per "
                            "row of the input, each of width 0 (max_new_tokens = 0, or a loop that never runs)")


def _same_shape(e, g):
    """A layout of the right shape made another way along its last dimension."""
    if torch.equal(~e, g):
        yield told("inverted", "True and False are swapped: every entry is the opposite of the right one (a "
                               "condition inverted: > where <= is meant, before a boundary where after it is "
                               "meant, or a ~ too many)")
    if e.any() and not g.any():
        yield told("all_false", "every entry of your output is False: it marks nothing, where some entries must be "
                                "True (a condition that never holds, or a range that is empty)")
    if not e.all() and g.all():
        words = "every entry of your output is True: it marks everything, where some entries must be False"
        yield Finding("all_true", words, safe=words)  # a fact, after a task's rules (which can say why)
    if e.shape[-1] == 1 and _last_dropped(e, g):  # one entry: the last is the only one
        yield told("last_dropped", LAST_DROPPED)
    if e.shape[-1] == 1 and not torch.equal(e, g):  # a shift moves every entry out of sight: not contradicted
        yield Finding("shifted", "", safe="", weak=True)
    if e.shape[-1] > 1 and not torch.equal(e, g):
        yield from _moved(e, g)


BOUNDARY = ("an off-by-one at the boundary (is the boundary itself, such as position j or a row's EOS step, on the "
            "right side? places counted from 0 or from 1?)")


def _moved(e, g):
    """Shifted by one place, reversed, the last entry dropped, or True on the other side of each boundary."""
    if torch.equal(g[..., :-1], e[..., 1:]):
        yield told("shifted", "each row's True entries are shifted one place earlier (towards index 0) than the "
                              f"right ones: {BOUNDARY}")
    if torch.equal(g[..., 1:], e[..., :-1]):
        yield told("shifted", "each row's True entries are shifted one place later (away from index 0) than the "
                              f"right ones: {BOUNDARY}")
    if torch.equal(e.flip(-1), g):
        yield told("reversed", "your entries are in reverse order along the last dimension, as if the places "
                               "were counted from the end: index 0 is the first position")
    if _last_dropped(e, g):
        yield told("last_dropped", LAST_DROPPED)
    if _steps(e, up=True) and _steps(g, up=False) and not torch.equal(~e, g) and g.any():
        yield told("other_side", "your True entries lie before each boundary, where the right ones lie after it: a "
                                 "comparison the wrong way round (< where > is meant: before where after is meant)")


LAST_DROPPED = ("the last entry along the last dimension is never True in yours, and the others are right: a range "
                "or slice that stops one short (range(T - 1), [j:T - 1], [:-1]) where it runs to the end")


def _last_dropped(e, g) -> bool:
    return torch.equal(g[..., :-1], e[..., :-1]) and bool(e[..., -1].any()) and not g[..., -1].any()


def _steps(t, up) -> bool:
    """Each row is False then True along the last dimension (``up``), or True then False."""
    d = t.int().diff(dim=-1)
    return bool((d >= 0).all() if up else (d <= 0).all())


def _rows(e, g):
    """Rows in another order: reversed, permuted (sorted), or all alike."""
    if not (e.dim() >= 2 and e.shape[0] > 1 and not torch.equal(e, e[:1].expand_as(e))):
        return
    if torch.equal(e.flip(0), g):
        yield told("rows_swapped", ROWS_SWAPPED)
    mine, right = sorted(map(_key, g)), sorted(map(_key, e))
    if mine == right and not torch.equal(e, g):  # reversed too: a sort that happens to reverse them
        yield told("rows_permuted", "your rows are the right ones in another order (sorted?): row i of the output "
                                    "belongs to row i of the input, in the input's order")
    if torch.equal(g, g[:1].expand_as(g)):  # a fact, not how the output was made: after a task's rules
        yield Finding("rows_alike", ROWS_ALIKE, safe=ROWS_ALIKE)


def _key(row):
    return tuple(row.flatten().tolist())


def _mask_column(e, g, source):
    """The answer is column ``j`` of a mask: the output is its row j (what position j reads, not who reads j),
    or the column of j counted from the end."""
    mask, j = source.mask, source.column
    T = mask.shape[-1]
    if torch.equal(mask[j], g) and not torch.equal(mask[j], e):
        yield told("mask_row", "you read row j of the mask where column j is meant: row t lists the tokens position "
                               "t reads; the positions that read token j are column j, mask[:, j] (a row where a "
                               "column is meant, or the mask transposed: triu for tril)")
    if T - 1 - j != j and torch.equal(mask[:, T - 1 - j], g):
        yield told("from_end", "you counted j from the end (T - 1 - j): positions count from 0 at the first token")


def _unended_rows(e, g, source):
    """Rows whose boundary never comes (None, or beyond the limit) marked anyway, the others right."""
    unended = [b is None or b > source.limit for b in source.bounds]
    if e.dim() != 2 or len(unended) != e.shape[0] or not any(unended) or e[torch.tensor(unended)].any():
        return
    ended = ~torch.tensor(unended)
    if torch.equal(g[ended], e[ended]) and g[~ended].any():
        yield told("unended_rows", "a row that never finishes (its EOS step None, or later than max_new_tokens) "
                                   "holds no padding at all, but yours marks some of its slots; the rows that finish "
                                   "are right")


def _width(e, g, source):
    """A batch's layout of the wrong width, as wide as some other rule of the rows' boundaries says."""
    if g.dim() != 2 or e.dim() != 2 or g.shape[0] != e.shape[0] or g.shape[1] == e.shape[1]:
        return
    ended = [b for b in source.bounds if b is not None and b <= source.limit]
    every = [b for b in source.bounds if b is not None]
    width = g.shape[1]
    if ended and width == min(ended) < e.shape[1]:
        yield told("width_first", "too few slots: your layout is as wide as the first row to finish (the smallest "
                                  "EOS step): the loop runs until the last row has finished (the largest), or "
                                  "max_new_tokens")
    if every and len(every) == len(source.bounds) and width == max(every) > source.limit:
        yield told("width_unlimited", "too many slots: your layout is as wide as the largest EOS step, beyond "
                                      "max_new_tokens: a row whose EOS would come later never gets there, the loop "
                                      "stops at the limit")
