"""nexttoken.plots: show_batch gives each slot of a small batch the colour and label of its kind;
show_underflow draws each product up to where it is 0 and marks that token; show_shapes draws one box per
step of the forward pass, joined in the order of the walk."""

import math

import matplotlib

matplotlib.use("Agg")  # no display: draw off screen
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.text import Annotation  # noqa: E402

from nexttoken.plots import (  # noqa: E402
    KINDS,
    batch_slots,
    show_batch,
    show_shapes,
    show_underflow,
    smallest_positive,
)

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


# show_underflow: factors of 1e-20. In float32 the product is 1e-20, then 1e-40 (subnormal), then 0 from
# token 3; in float64 it is 0 from token 17 (1e-320 is still above 2**-1074 = 4.9e-324).
N = 20
FACTORS = torch.full((N,), 1e-20)
LOG32, LOG64 = math.log10(2.0**-149), math.log10(2.0**-1074)


def underflow_data(factors=FACTORS):
    return (
        torch.arange(1, len(factors) + 1),
        torch.cumprod(factors, dim=0),
        torch.cumprod(factors.double(), dim=0),
        torch.cumsum(torch.log(factors), dim=0),
    )


def test_smallest_positive_is_the_last_number_above_0():
    assert smallest_positive(torch.float32) == 2.0**-149
    assert smallest_positive(torch.float64) == 2.0**-1074
    for dtype in (torch.float32, torch.float64):
        tiny = smallest_positive(dtype)
        assert torch.tensor(tiny, dtype=dtype) > 0
        assert torch.tensor(tiny, dtype=dtype) / 2 == 0


@pytest.fixture
def underflow():
    fig, ax = plt.subplots()
    show_underflow(*underflow_data(), ax=ax)
    fig.canvas.draw()
    yield ax
    plt.close(fig)


def test_each_product_is_drawn_in_log10_up_to_where_it_is_0(underflow):
    by_label = {line.get_label(): line for line in underflow.lines}
    f64, f32 = by_label["float64 product"], by_label["float32 product"]
    assert list(f32.get_xdata()) == [1, 2]
    assert list(f32.get_ydata()) == pytest.approx([-20, -40], abs=0.01)
    assert list(f64.get_xdata()) == list(range(1, 17))
    assert list(f64.get_ydata()) == pytest.approx([-20 * k for k in range(1, 17)], abs=0.01)
    # float64 wide and pale under float32
    assert (f64.get_color(), f32.get_color()) == ("C1", "C0")
    assert f64.get_linewidth() > f32.get_linewidth()


def test_the_sum_of_logs_is_the_true_value_all_the_way(underflow):
    (true,) = [line for line in underflow.lines if line.get_label().startswith("sum of logs")]
    assert list(true.get_xdata()) == list(range(1, N + 1))
    assert list(true.get_ydata()) == pytest.approx([-20 * k for k in range(1, N + 1)], rel=1e-5)
    assert true.get_linestyle() == "--"
    assert to_rgba(true.get_color()) == to_rgba("black")


def test_dotted_lines_at_the_smallest_numbers_and_crosses_where_each_product_is_0(underflow):
    dotted = [line for line in underflow.lines if line.get_linestyle() == ":"]
    assert [(line.get_ydata()[0], line.get_color()) for line in dotted] == [(LOG32, "C0"), (LOG64, "C1")]
    crosses = [line for line in underflow.lines if line.get_marker() == "x"]
    xy = [(line.get_xdata()[0], line.get_ydata()[0], line.get_color()) for line in crosses]
    assert xy == [(3, LOG32, "C0"), (17, LOG64, "C1")]
    notes = [(t.get_text(), t.xy) for t in underflow.texts]
    assert notes == [
        ("float32 product = 0 from here", (3, LOG32)),
        ("float64 product = 0 from here", (17, LOG64)),
    ]
    # the y axis holds log10 values on a linear scale, down to below float64's limit
    assert underflow.get_yscale() == "linear"
    assert underflow.get_ylim()[0] < LOG64


def test_underflow_labels_and_legend(underflow):
    assert underflow.get_xlabel() == "number of tokens $n$"
    assert underflow.get_ylabel() == r"$\log_{10}\, p(x_1, \dots, x_n)$"
    assert underflow.get_title() == "A product of probabilities underflows; a sum of logs does not"
    assert [t.get_text() for t in underflow.get_legend().get_texts()] == [
        "float64 product",
        "float32 product",
        "sum of logs / ln 10 (the true value)",
    ]


def test_a_product_that_never_reaches_0_gets_no_cross():
    fig, ax = plt.subplots()
    show_underflow(*underflow_data(torch.full((5,), 0.5)), ax=ax)
    assert [line for line in ax.lines if line.get_marker() == "x"] == []
    assert len(ax.texts) == 0
    assert len([line for line in ax.lines if line.get_linestyle() == ":"]) == 2  # the limits still
    plt.close(fig)


def test_underflow_without_an_axes_draws_a_figure_of_its_own():
    plt.close("all")
    show_underflow(*underflow_data())
    fig = plt.gcf()
    assert tuple(fig.get_size_inches()) == pytest.approx((8, 4))
    assert len(fig.axes[0].lines) == 3 + 2 + 2  # curves, dotted lines, crosses
    plt.close(fig)


# show_shapes: chapter 3's walk, with two blocks and a vocabulary of 50
TRACE = [
    ("token ids", (1, 3)),
    ("positions", (3,)),
    ("token embedding", (1, 3, 8)),
    ("position embedding", (3, 8)),
    ("sum", (1, 3, 8)),
    ("block 0", (1, 3, 8)),
    ("block 1", (1, 3, 8)),
    ("final norm", (1, 3, 8)),
    ("LM head: logits", (1, 3, 50)),
]
# (x, -row) of each box: inputs in two columns, then the stream down the middle
WANT_AT = {
    "token ids": (0.3, 0),
    "positions": (0.75, 0),
    "token embedding": (0.3, -1),
    "position embedding": (0.75, -1),
    "sum": (0.5, -2),
    "block 0": (0.5, -3),
    "block 1": (0.5, -4),
    "final norm": (0.5, -5),
    "LM head: logits": (0.5, -6),
}


@pytest.fixture
def shapes():
    fig, ax = plt.subplots()
    show_shapes(TRACE, 50, title="shapes", ax=ax)
    fig.canvas.draw()
    yield ax
    plt.close(fig)


def boxes(ax):
    return [t for t in ax.texts if not isinstance(t, Annotation)]


def test_one_box_per_step_with_its_shape_at_its_place(shapes):
    at = {t.get_text(): t.get_position() for t in boxes(shapes)}
    assert at == {f"{name}\n{shape}": WANT_AT[name] for name, shape in TRACE}


def test_only_the_logits_box_stands_out(shapes):
    pink = [t.get_text() for t in boxes(shapes) if t.get_bbox_patch().get_facecolor() == to_rgba("mistyrose")]
    blue = [t for t in boxes(shapes) if t.get_bbox_patch().get_facecolor() == to_rgba("aliceblue")]
    assert pink == ["LM head: logits\n(1, 3, 50)"]
    assert len(blue) == len(TRACE) - 1


def test_arrows_join_the_steps_in_the_order_of_the_walk(shapes):
    name_at = {xy: name for name, xy in WANT_AT.items()}
    edges = []
    for a in shapes.texts:
        if isinstance(a, Annotation):
            (x1, y1), (x2, y2) = a.xyann, a.xy
            # from just below one box to just above the next
            edges.append((name_at[(x1, round(y1 + 0.3, 6))], name_at[(x2, round(y2 - 0.3, 6))]))
    assert edges == [
        ("token ids", "token embedding"),
        ("positions", "position embedding"),
        ("token embedding", "sum"),
        ("position embedding", "sum"),
        ("sum", "block 0"),
        ("block 0", "block 1"),
        ("block 1", "final norm"),
        ("final norm", "LM head: logits"),
    ]


def test_shapes_axes_frame_every_box_and_show_no_axis(shapes):
    assert shapes.get_xlim() == (0, 1)
    assert shapes.get_ylim() == pytest.approx((-6.6, 0.6))
    assert not shapes.axison
    assert shapes.get_title() == "shapes"


def test_shapes_without_an_axes_draws_a_figure_of_its_own():
    plt.close("all")
    show_shapes(TRACE, 50)
    fig = plt.gcf()
    assert tuple(fig.get_size_inches()) == pytest.approx((7, 9))
    assert len(boxes(fig.axes[0])) == len(TRACE)
    plt.close(fig)
