"""Figures of the lesson whose drawing code is plumbing, not lesson: a chapter calls them in one line.

Needs matplotlib, which the course's environment and Colab have (the package itself does not depend on
it, so ``import nexttoken`` does not import this module).

- ``show_underflow``: running products of probabilities in float32 and float64 against the sum of their
  logs, each product stopping where it underflows to 0 (chapter 1).
- ``show_shapes``: the forward pass as boxes and arrows, each box a step with its tensor's shape
  (chapter 3).
- ``show_batch``: a generated batch as a grid of tokens, each slot coloured as prompt, generated token,
  end-of-sequence (EOS) token or padding (chapter 6).
- ``show_attention``: one head's attention weights as a heat map, queries down, keys across (chapter 2).
"""

import math
from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch


def smallest_positive(dtype: torch.dtype) -> float:
    """The smallest positive number of a float type: the smallest normal one times the precision (the last
    subnormal), ``2**-149`` in float32, ``2**-1074`` in float64. A product below it rounds to 0."""
    info = torch.finfo(dtype)
    return info.tiny * info.eps


def show_underflow(
    n_tokens: torch.Tensor,
    product32: torch.Tensor,
    product64: torch.Tensor,
    log_sum: torch.Tensor,
    ax=None,
) -> None:
    """Draw on a log10 scale the running products ``product32`` (float32) and ``product64`` (float64) of
    probabilities and ``log_sum``, the running sum of their natural logs (the true value), against
    ``n_tokens``, the number of factors. Each product's curve stops where it is 0; a dotted line marks its
    type's smallest positive number and a cross the first token where it is 0 (none if it never is).

    Draws on ``ax`` if given; otherwise on a new figure, which it shows.
    """
    own_figure = ax is None
    if own_figure:
        _, ax = plt.subplots(figsize=(8, 4))
    # log10(0) = -inf: plot only the non-zero part
    ok32, ok64 = product32 > 0, product64 > 0
    # float64 wide and pale under float32, so both show where they agree
    ax.plot(
        n_tokens[ok64], torch.log10(product64[ok64]).float(), color="C1", lw=6, alpha=0.5,
        label="float64 product",
    )
    ax.plot(n_tokens[ok32], torch.log10(product32[ok32]), color="C0", lw=3, label="float32 product")
    ax.plot(n_tokens, log_sum / math.log(10), "k--", lw=1, label="sum of logs / ln 10 (the true value)")
    # the labels of the crosses sit on opposite sides, so that they do not overlap
    for ok, dtype, color, name, offset, align in [
        (ok32, torch.float32, "C0", "float32", (8, 8), "left"),
        (ok64, torch.float64, "C1", "float64", (-10, -16), "right"),
    ]:
        y = math.log10(smallest_positive(dtype))
        ax.axhline(y, color=color, lw=0.8, ls=":")
        if ok.all():  # never 0: no cross
            continue
        zero_at = int(n_tokens[~ok][0])
        ax.plot(zero_at, y, "x", color=color, ms=10, mew=2)
        ax.annotate(
            f"{name} product = 0 from here", (zero_at, y), xytext=offset, textcoords="offset points",
            color=color, ha=align,
        )
    ax.set_xlabel("number of tokens $n$")
    ax.set_ylabel(r"$\log_{10}\, p(x_1, \dots, x_n)$")
    ax.set_title("A product of probabilities underflows; a sum of logs does not")
    ax.legend(loc="center right")
    if own_figure:
        plt.show()


def show_shapes(
    trace: Sequence[tuple[str, tuple[int, ...]]],
    vocab_size: int,
    title: str = "",
    ax=None,
) -> None:
    """Draw the forward pass as boxes joined by arrows, each box a step's name and its tensor's shape.

    ``trace``: (name, shape) pairs in the order of the walk; the first five are the token ids, the
    positions, the token embedding, the position embedding and their sum, the rest follow the residual
    stream from the sum (blocks, final norm, logits). Token ids and token embedding make the left column,
    positions and position embedding the right; the stream runs down the middle. A box whose last
    dimension is ``vocab_size`` (the logits) is drawn pink. Draws on ``ax`` if given; otherwise on a new
    figure, which it shows.
    """
    # (x, row) of each box, top row 0: two columns of inputs, then the stream down the middle
    where = [(0.3, 0), (0.75, 0), (0.3, 1), (0.75, 1)] + [(0.5, 2 + k) for k in range(len(trace) - 4)]
    # ids -> token embedding, positions -> position embedding, both -> sum, then step by step
    arrows = [(0, 2), (1, 3), (2, 4), (3, 4)] + [(k, k + 1) for k in range(4, len(trace) - 1)]
    own_figure = ax is None
    if own_figure:
        _, ax = plt.subplots(figsize=(7, 9))
    for (name, shape), (x, row) in zip(trace, where):
        big = shape[-1] == vocab_size  # the logits stand out
        ax.text(
            x, -row, f"{name}\n{shape}", ha="center", va="center", fontsize=10,
            bbox=dict(boxstyle="round,pad=0.4", fc="mistyrose" if big else "aliceblue", ec="gray"),
        )
    for src, dst in arrows:
        (x1, r1), (x2, r2) = where[src], where[dst]
        # from the bottom of one box to the top of the next (0.3 rows off each centre)
        ax.annotate("", xy=(x2, -r2 + 0.3), xytext=(x1, -r1 - 0.3), arrowprops=dict(arrowstyle="->"))
    ax.set_xlim(0, 1)
    ax.set_ylim(-(len(trace) - 4) - 1.6, 0.6)
    ax.axis("off")
    ax.set_title(title)
    if own_figure:
        plt.show()


# The four kinds of slot, in the order of their codes 0-3, and their colours.
KINDS = ("prompt", "generated", "EOS", "pad")
COLORS = ("lightgrey", "lightskyblue", "orange", "white")


def batch_slots(
    out: torch.Tensor,
    prompt_len: int,
    eos_ids: Sequence[int],
    decode: Callable[[list[int]], str],
    names: dict[int, str] | None = None,
) -> tuple[list[list[int]], list[list[str]]]:
    """What ``show_batch`` draws: a kind code (0 prompt, 1 generated, 2 EOS, 3 pad; see ``KINDS``) and a
    short label for every slot of ``out``, an int tensor (B, T) whose first ``prompt_len`` columns are the
    prompt.

    A generated slot is EOS if its token is in ``eos_ids`` and it is the row's first; every slot after
    it is padding, whatever token it holds. A label is the token's text (``decode([id])``, a line break
    shown as ``\\n``), or ``names[id]`` where given, cut to 6 characters; a pad slot reads ``pad``.
    """
    names = names or {}
    kinds, labels = [], []
    for row in out.tolist():
        kinds.append([])
        labels.append([])
        done = False  # has this row produced its EOS yet?
        for c, tok in enumerate(row):
            text = names.get(tok, decode([tok]).replace("\n", "\\n"))
            if c < prompt_len:
                kind = 0
            elif done:
                kind, text = 3, "pad"
            else:
                kind = 2 if tok in eos_ids else 1
                done = kind == 2
            kinds[-1].append(kind)
            labels[-1].append(text[:6])
    return kinds, labels


def show_batch(
    out: torch.Tensor,
    prompt_len: int,
    eos_ids: Sequence[int],
    decode: Callable[[list[int]], str],
    title: str = "",
    names: dict[int, str] | None = None,
    ax=None,
) -> None:
    """Draw a generated batch as a grid: one row per sequence, one column per position, each slot
    coloured and labelled as prompt, generated token, EOS or pad (``batch_slots`` says which).

    ``out``: the int tensor (B, T) that generation returned; ``prompt_len``: the prompt's width;
    ``eos_ids``: the ids that end a row; ``decode``: the tokenizer's decode (a list of ids to text);
    ``names``: short labels for some ids, e.g. ``{50256: "EOS"}``. Draws on ``ax`` if given; otherwise
    on a new figure, which it shows.
    """
    kinds, labels = batch_slots(out, prompt_len, eos_ids, decode, names)
    rows, cols = out.shape
    own_figure = ax is None
    if own_figure:
        _, ax = plt.subplots(figsize=(0.55 * cols + 1, 0.6 * rows + 2))
    # the colours: one per kind code, fixed to 0-3 whichever kinds occur
    ax.imshow(kinds, cmap=ListedColormap(COLORS), vmin=0, vmax=3, aspect="auto")
    for r in range(rows):
        for c in range(cols):
            ax.text(c, r, labels[r][c], ha="center", va="center", fontsize=9)
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    # thin lines between the slots
    ax.set_xticks([c - 0.5 for c in range(cols + 1)], minor=True)
    ax.set_yticks([r - 0.5 for r in range(rows + 1)], minor=True)
    ax.grid(which="minor", color="grey", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("position in the output")
    ax.set_ylabel("batch row")
    ax.set_title(title)
    # the legend, below the grid
    ax.legend(
        handles=[Patch(facecolor=c, edgecolor="grey", label=k) for c, k in zip(COLORS, KINDS)],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.3),
        ncols=4,
    )
    if own_figure:
        plt.tight_layout()
        plt.show()


def show_attention(weights: torch.Tensor, labels: Sequence[str], title: str = "", ax=None) -> None:
    """Draw one head's attention weights ``weights`` (T, T), row i the query at position i and column j
    the key at position j, as a heat map with a colour bar; ``labels``: the T tokens, for both axes (a newline
    shown as \\n).
    Draws on ``ax`` if given; otherwise on a new figure, which it shows."""
    own_figure = ax is None
    if own_figure:
        _, ax = plt.subplots(figsize=(5.6, 5.0))
    labels = [t.replace("\n", "\\n") for t in labels]  # a newline token, shown as \n
    T = len(labels)
    im = ax.imshow(weights, cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(T), labels, rotation=90)
    ax.set_yticks(range(T), labels)
    ax.set_xlabel("key $j$ (looked at)")
    ax.set_ylabel("query $i$ (looking)")
    ax.set_title(title)
    ax.figure.colorbar(im, ax=ax, shrink=0.8, label="attention weight")
    if own_figure:
        plt.tight_layout()
        plt.show()
