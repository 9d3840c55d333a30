"""Static checks of the lesson's text: figures have alt text, chapter mentions are links, every chapter
points to its sources."""

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
MENTION = re.compile(r"\b[Cc]hapter [1-7]\b")
# links ({doc} roles, or Markdown links, which Colab and JupyterLab render too), code and maths
SKIP = re.compile(r"(\{doc\}`[^`]*`|\[[^\]]*\]\([^)]*\)|`[^`]*`|\$\$.*?\$\$|\$[^$]*\$)")


def markdown_lines(text: str):
    """Lines of prose: not in code blocks, not directive options, not headings."""
    block = None
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("```"):
            block = (("directive" if s.startswith("```{") else "code") if block is None
                     else (None if s == "```" else block))
            continue
        if block != "code" and not s.startswith(("#", ":")):
            yield line


def unlinked_mentions(path: Path, text: str, own: int | None) -> list[str]:
    found = []
    for line in markdown_lines(text):
        prose = "".join(SKIP.split(line)[::2])
        found += [f"{path.name}: {m.group(0)!r} in {line.strip()[:80]!r}" for m in MENTION.finditer(prose)
                  if int(m.group(0)[-1]) != own]
    return found


def test_there_are_seven_chapters():
    assert len(CHAPTERS) == 7


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_figures_have_alt_text(path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and any("image/png" in o.get("data", {}) for o in cell.get("outputs", [])):
            alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt", "")
            assert len(alt) > 40, f"{path.name} cell {i}: a figure without alt text (metadata mystnb.image.alt)"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_mentions_are_links_and_sources_are_named(path):
    nb = nbformat.read(path, as_version=4)
    own = int(path.name[:2])
    problems = [m for c in nb.cells if c.cell_type == "markdown" for m in unlinked_mentions(path, c.source, own)]
    assert not problems, problems
    assert nb.cells[-1].source.startswith("## Further reading")
    assert "{doc}`references <../references>`" in nb.cells[-1].source


def test_intro_and_conclusion_link_their_chapter_mentions():
    for name in ("intro.md", "conclusion.md"):
        assert not unlinked_mentions(ROOT / name, (ROOT / name).read_text(), None)


def test_code_fits_the_page():
    """At 1280 px the site shows about 80 characters of code: almost every line fits, none is far over."""
    lines = [line for path in CHAPTERS for c in nbformat.read(path, as_version=4).cells
             if c.cell_type == "code" and not c.source.startswith("# On Colab, install")
             for line in c.source.split("\n")]
    long = [line for line in lines if len(line) > 80]
    assert len(long) <= 0.03 * len(lines), f"{len(long)} of {len(lines)} code lines are over 80 characters"
    assert max(map(len, lines)) <= 120, max(lines, key=len)
