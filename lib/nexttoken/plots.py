"""Figures of the lesson whose drawing code is plumbing, not lesson: a chapter calls them in one line.

Needs matplotlib, which the course's environment and Colab have (the package itself does not depend on
it, so ``import nexttoken`` does not import this module).

- ``show_batch``: a generated batch as a grid of tokens, each slot coloured as prompt, generated token,
  end-of-sequence (EOS) token or padding (chapter 6).
"""

from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

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
