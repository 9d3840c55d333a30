"""Draw one step of the generation loop with SmolLM2's real numbers: _static/generation_loop.svg.

    .venv/bin/python scripts/draw_loop.py            # (re)write the figure
    .venv/bin/python scripts/draw_loop.py --check    # exit 1 if the figure's numbers are out of date

The introduction and chapter 5 show the figure; tests/book/test_loop_figure.py checks that its numbers are
what SmolLM2-135M-Instruct (the model the set-up installs) computes now.
"""

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

import nexttoken  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIGURE = ROOT / "_static" / "generation_loop.svg"
PROMPT = "AI enhances our"
NEW_TOKENS = 8


def facts() -> dict:
    """Everything the figure shows, computed by SmolLM2-135M-Instruct, the lesson's real model (greedy, so the
    same on every machine)."""
    enc, model = nexttoken.smollm2_tokenizer(), nexttoken.load_smollm2()
    ids = torch.tensor([enc.encode(PROMPT)])
    with torch.no_grad():
        logits = model(ids)
    probs = torch.softmax(logits[:, -1, :].float(), dim=-1)
    top = torch.topk(probs[0], 3)
    chosen = int(probs.argmax(dim=-1))
    out = nexttoken.generate(model, ids, NEW_TOKENS)
    return dict(ids=ids[0].tolist(), logits_shape=tuple(logits.shape), vocab=logits.shape[-1],
                top=[(enc.decode([i]), p) for p, i in zip(top.values.tolist(), top.indices.tolist())],
                chosen=chosen, chosen_text=enc.decode([chosen]),
                continuation=enc.decode(out[0, ids.shape[1]:].tolist()))


def labels(f: dict) -> list[tuple[str, str]]:
    # probability (two significant digits: the third differs between CPU kernels), token
    top = "\n".join(f"{p:.2g} {t!r}" for t, p in f["top"])
    return [
        ("prompt ids", f"{PROMPT!r}\n{f['ids']}"),
        ("1. forward", f"model(ids)\nlogits {f['logits_shape']}"),
        ("2. slice", f"logits[:, -1, :]\n(1, {f['vocab']})"),
        ("3. softmax", top + "\n..."),
        ("4. select", f"greedy: argmax\n-> {f['chosen']} ({f['chosen_text']!r})"),
        ("5. append", "{}\n{}".format(*(lambda ids: (str(ids[:2])[:-1] + ",", " " + str(ids[2:])[1:]))(
            f["ids"] + [f["chosen"]]))),
    ]


def draw(f: dict, path: Path) -> None:
    """Six boxes in two rows (the prompt, 1, 2; then 5 4 3 back under them), 7 inches wide: on the website's
    688-pixel column the figure is shown at its own size, so its 8-point text is 10.7 px high."""
    plt.rcParams["svg.fonttype"] = "none"  # text stays text: searchable, and the same on every machine
    plt.rcParams["svg.hashsalt"] = "nexttoken"
    fig, ax = plt.subplots(figsize=(7, 4.6))
    w, h, step, low, high = 2.0, 1.5, 2.45, 0.0, 2.3  # box size, column step, the rows' bottom edges
    ax.set_xlim(0, 3 * step)
    ax.set_ylim(-1.0, high + h + 0.05)
    ax.axis("off")
    corners = [(0.1 + step * c, high) for c in range(3)] + [(0.1 + step * c, low) for c in (2, 1, 0)]
    for k, ((title, body), (x, y)) in enumerate(zip(labels(f), corners)):
        ax.add_patch(plt.Rectangle((x, y), w, h, fc="#eef3fb", ec="#3b6cb7", lw=1.2))
        ax.text(x + w / 2, y + h - 0.22, title, ha="center", va="center", fontsize=10, weight="bold")
        ax.text(x + w / 2, y + 0.6, body, ha="center", va="center", fontsize=8, family="monospace")
    arrow = dict(arrowstyle="->")
    for k in (0, 1):  # 1 -> 2 -> 3, left to right
        x, y = corners[k]
        ax.annotate("", xy=(x + step, y + h / 2), xytext=(x + w, y + h / 2), arrowprops=arrow)
    x, _ = corners[2]  # 3 -> 4, down
    ax.annotate("", xy=(x + w / 2, low + h), xytext=(x + w / 2, high), arrowprops=arrow)
    for k in (3, 4):  # 4 -> 5 -> 6, right to left
        x, y = corners[k]
        ax.annotate("", xy=(x - step + w, y + h / 2), xytext=(x, y + h / 2), arrowprops=arrow)
    (x6, _), (x2, _) = corners[5], corners[1]  # 6 -> 2: the loop
    ax.annotate("", xy=(x2 + 0.35, high), xytext=(x6 + w - 0.35, low + h),
                arrowprops=dict(arrowstyle="->", color="#b7503b"))
    ax.text(x2 + 0.8, (low + h + high) / 2, "repeat with the longer\nsequence, until EOS\nor max_new_tokens",
            ha="left", va="center", fontsize=9, color="#b7503b")
    ax.text(0.1, -0.55, f"{NEW_TOKENS} greedy steps of SmolLM2-135M-Instruct continue {PROMPT!r} with\n"
            f"{f['continuation']!r}", fontsize=9, family="monospace", va="center")
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def up_to_date(f: dict, svg: str) -> bool:
    """Every label of the figure (as SVG text escapes it) appears in the file."""
    from xml.sax.saxutils import escape
    return all(escape(line) in svg for _, body in labels(f) for line in body.splitlines())


def main():
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    f = facts()
    if args.check:
        ok = FIGURE.exists() and up_to_date(f, FIGURE.read_text())
        print("up to date" if ok else f"{FIGURE.relative_to(ROOT)} is out of date: run scripts/draw_loop.py")
        sys.exit(0 if ok else 1)
    draw(f, FIGURE)
    print(f"wrote {FIGURE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
