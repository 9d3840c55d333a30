"""Draw one step of the generation loop with the default model's real numbers: _static/generation_loop.svg.

    .venv/bin/python scripts/draw_loop.py            # (re)write the figure
    .venv/bin/python scripts/draw_loop.py --check    # exit 1 if the figure's numbers are out of date

The introduction and chapter 5 show the figure; tests/test_loop_figure.py checks that its numbers are
what the shipped model computes now.
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
    """Everything the figure shows, computed by the shipped model (greedy, so the same on every machine)."""
    enc, model = nexttoken.gpt2_tokenizer(), nexttoken.load_pretrained()
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
    top = "\n".join(f"p({t!r}) = {p:.3f}" for t, p in f["top"])
    return [
        ("1. prompt ids", f"{PROMPT!r}\n{f['ids']}"),
        ("2. forward", f"model(ids)\nlogits {f['logits_shape']}"),
        ("3. last row", f"logits[:, -1, :]\n(1, {f['vocab']})"),
        ("4. softmax", top + "\n..."),
        ("5. select", f"greedy: argmax\n-> {f['chosen']} ({f['chosen_text']!r})"),
        ("6. append", "{}\n{}".format(*(lambda ids: (str(ids[:2])[:-1] + ",", " " + str(ids[2:])[1:]))(
            f["ids"] + [f["chosen"]]))),
    ]


def draw(f: dict, path: Path) -> None:
    plt.rcParams["svg.fonttype"] = "none"  # text stays text: searchable, and the same on every machine
    plt.rcParams["svg.hashsalt"] = "nexttoken"
    fig, ax = plt.subplots(figsize=(13, 3.6))
    ax.set_xlim(0, 6 * 2.2)
    ax.set_ylim(-1.5, 1.7)
    ax.axis("off")
    for k, (title, body) in enumerate(labels(f)):
        x = 0.1 + 2.2 * k
        ax.add_patch(plt.Rectangle((x, 0), 1.9, 1.6, fc="#eef3fb", ec="#3b6cb7", lw=1.2))
        ax.text(x + 0.95, 1.4, title, ha="center", va="center", fontsize=10, weight="bold")
        ax.text(x + 0.95, 0.65, body, ha="center", va="center", fontsize=8, family="monospace")
        if k < 5:
            ax.annotate("", xy=(x + 2.2, 0.8), xytext=(x + 1.9, 0.8), arrowprops=dict(arrowstyle="->"))
    ax.annotate("", xy=(2.2 + 0.1 + 0.95, 0.0), xytext=(5 * 2.2 + 0.1 + 0.95, 0.0),
                arrowprops=dict(arrowstyle="->", connectionstyle="arc3,rad=-0.12", color="#b7503b"))
    ax.text(6.6, -0.75, "repeat with the longer sequence, until EOS or max_new_tokens", ha="center",
            fontsize=9, color="#b7503b")
    ax.text(0.1, -1.35, f"{NEW_TOKENS} greedy steps of the default model continue {PROMPT!r} with "
            f"{f['continuation']!r}", fontsize=9, family="monospace")
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def up_to_date(f: dict, svg: str) -> bool:
    """Every label of the figure (as SVG text escapes it) appears in the file."""
    from xml.sax.saxutils import escape
    return all(escape(line) in svg for _, body in labels(f) for line in body.splitlines())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
