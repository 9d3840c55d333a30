"""nexttoken.plots.show_batch: each slot of a small batch gets the colour and label of its kind."""

import matplotlib

matplotlib.use("Agg")  # no display: draw off screen
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from nexttoken.plots import KINDS, batch_slots, show_batch  # noqa: E402

EOS, PAD = 9, 0
# chapter 6's picture: grey prompt, blue generated tokens, an orange EOS, white padding
COLORS = ["lightgrey", "lightskyblue", "orange", "white"]
NAMES = {EOS: "EOS"}


def decode(ids: list[int]) -> str:
    """A toy tokenizer: token i is the letter 'a' + i; 5 is a line break."""
    return "".join("\n" if i == 5 else chr(ord("a") + i) for i in ids)


# Two prompt columns, then: row 0 ends at its first new slot and is padded after it (its pad id is the
# EOS id itself, and a later EOS id is padding too); row 1 writes a line break and ends at the last
# column; row 2 never ends (the length limit).
OUT = torch.tensor(
    [
        [1, 2, EOS, EOS, PAD, EOS],
        [3, 4, 5, 1, 2, EOS],
        [1, 1, 2, 3, 4, 6],
    ]
)
P = 2
WANT_KINDS = [
    [0, 0, 2, 3, 3, 3],
    [0, 0, 1, 1, 1, 2],
    [0, 0, 1, 1, 1, 1],
]
WANT_LABELS = [
    ["b", "c", "EOS", "pad", "pad", "pad"],
    ["d", "e", "\\n", "b", "c", "EOS"],
    ["b", "b", "c", "d", "e", "g"],
]


def test_batch_slots_kinds_and_labels():
    kinds, labels = batch_slots(OUT, P, [EOS], decode, NAMES)
    assert kinds == WANT_KINDS
    assert labels == WANT_LABELS


def test_an_eos_in_the_prompt_ends_nothing_and_labels_are_cut():
    out = torch.tensor([[EOS, 1, EOS, 2]])
    kinds, labels = batch_slots(out, 2, [EOS], lambda ids: "token" + decode(ids) * 3)
    assert kinds == [[0, 0, 2, 3]]
    assert labels == [["tokenj", "tokenb", "tokenj", "pad"]]


def test_several_eos_ids():
    kinds, _ = batch_slots(OUT, P, [EOS, 5], decode)
    assert kinds[1] == [0, 0, 2, 3, 3, 3]


@pytest.fixture
def drawn():
    fig, ax = plt.subplots()
    show_batch(OUT, P, [EOS], decode, title="a batch", names=NAMES, ax=ax)
    fig.canvas.draw()
    yield ax
    plt.close(fig)


def test_each_slot_is_drawn_in_the_colour_of_its_kind(drawn):
    (image,) = drawn.images
    rgba = image.to_rgba(image.get_array())  # the colour each slot is painted in
    for r, row in enumerate(WANT_KINDS):
        for c, kind in enumerate(row):
            assert tuple(rgba[r, c]) == pytest.approx(to_rgba(COLORS[kind])), (r, c, KINDS[kind])


def test_each_slot_is_labelled_at_its_place(drawn):
    at = {tuple(round(v) for v in t.get_position()): t.get_text() for t in drawn.texts}
    assert at == {(c, r): WANT_LABELS[r][c] for r in range(3) for c in range(6)}


def test_the_legend_names_the_four_kinds_in_their_colours(drawn):
    legend = drawn.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["prompt", "generated", "EOS", "pad"]
    for patch, color in zip(legend.get_patches(), COLORS):
        assert patch.get_facecolor() == pytest.approx(to_rgba(color))
    assert drawn.get_title() == "a batch"


def test_without_an_axes_it_draws_a_figure_of_its_own_sized_to_the_batch():
    plt.close("all")
    show_batch(OUT, P, [EOS], decode)  # plt.show() does nothing with Agg
    fig = plt.gcf()
    assert tuple(fig.get_size_inches()) == pytest.approx((0.55 * 6 + 1, 0.6 * 3 + 2))
    assert len(fig.axes[0].texts) == OUT.numel()
    plt.close(fig)
