"""Static checks of the lesson's text: figures have alt text, chapter mentions are links, every chapter
points to its sources, and every notebook's Markdown is plain Markdown that the website, JupyterLab and
Colab all render (no MyST roles or directives, which Colab and a plain JupyterLab show raw)."""

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
MENTION = re.compile(r"\b[Cc]hapter [1-7]\b")
# Markdown links, code and maths
SKIP = re.compile(r"(\[[^\]]*\]\([^)]*\)|`[^`]*`|\$\$.*?\$\$|\$[^$]*\$)")


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
    assert "[references](../references.md)" in nb.cells[-1].source


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


# ---------------------------------------------------------------------------------------------------
# One source for the website, JupyterLab and Colab: plain Markdown (CommonMark, tables, $maths$, HTML)

NOTEBOOKS = [p for folder in ("chapters", "exercises", "solutions", "appendix")
             for p in sorted((ROOT / folder).glob("*.ipynb"))] + sorted(ROOT.glob("*.ipynb"))
SITE_ONLY = "site-only"  # a Markdown cell with this tag may use MyST: it is meant for the website alone
FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$")
MYST = {
    "a role, {name}`...`": re.compile(r"(?<![\\\w])\{[A-Za-z][\w:+-]*\}`"),
    "a directive fence, ```{name}": re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*\{", re.M),
    "a colon fence, :::": re.compile(r"^[ \t]*:{3,}", re.M),
    "a directive option line, :name:": re.compile(r"^:[A-Za-z][\w-]*:( |$)", re.M),
    "a target, (label)=": re.compile(r"^\([\w.:-]+\)=[ \t]*$", re.M),
    "a block break, +++": re.compile(r"^\+\+\+", re.M),
    "a substitution, {{ name }}": re.compile(r"\{\{[^}]*\}\}"),
}
LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)")


def without_code(text: str) -> str:
    """Markdown without its fenced code blocks and inline code (a ```{...} fence is kept: MyST, not code;
    so is the `content` of a role)."""
    kept, fence = [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence is None and m and not m.group(2).strip().startswith("{"):
            fence = m.group(1)
            continue
        if fence is not None:
            if line.strip() == fence:
                fence = None
            continue
        kept.append(line)
    return re.sub(r"(?<!\})`[^`\n]+`", "", "\n".join(kept))  # a role's `content` is kept


def myst_syntax(text: str) -> list[str]:
    """What Colab (plain Markdown) would show raw: MyST roles, directives, colon fences, targets."""
    prose = without_code(text)
    return [f"{kind}: {m.group(0)!r}" for kind, pattern in MYST.items() for m in pattern.finditer(prose)]


def markdown_cells(path: Path):
    nb = nbformat.read(path, as_version=4)
    return [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"]


def test_the_myst_detector_finds_what_colab_shows_raw():
    """Each kind of MyST markup is caught; plain Markdown, code and maths are not."""
    samples = ["see {doc}`chapter 2 <02_causal_mask>`", "{ref}`sec`",
               "```{admonition} Answer\n:class: dropdown\nx\n```", "~~~{note}\nx\n~~~", ":::{tip}\nx\n:::",
               "(my-label)=\n# Title", "+++", "{{ version }}"]
    for sample in samples:
        assert myst_syntax(sample), sample
    plain = ("[chapter 2](02_causal_mask.ipynb) and $\\frac{a}{b} + \\text{x}_{1}$\n\n```python\n{'a': 1}\n```\n\n"
             "`{doc}` in inline code\n\n<details>\n<summary>Answer</summary>\n\nIt is $e^{-m}$.\n\n</details>")
    assert myst_syntax(plain) == []


def test_every_notebook_is_checked():
    names = {p.relative_to(ROOT).as_posix() for p in NOTEBOOKS}
    assert len([n for n in names if n.startswith("chapters/")]) == 7
    assert len([n for n in names if n.startswith("exercises/")]) == 7
    assert len([n for n in names if n.startswith("solutions/")]) == 7
    assert {"appendix/cpu_weight_layout.ipynb", "model_card.ipynb", "model_card_smollm2.ipynb"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_markdown_renders_everywhere(path):
    """No MyST-only markup outside cells tagged site-only; links and images point at files that exist."""
    problems = []
    for i, cell in markdown_cells(path):
        if SITE_ONLY in cell.metadata.get("tags", []):
            continue
        problems += [f"cell {i}: {p}" for p in myst_syntax(cell.source)]
        for m in LINK.finditer(without_code(cell.source)):
            image, text, target = m.group(1), m.group(2), m.group(3)
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            file = (path.parent / target.split("#")[0]).resolve()
            if not file.is_file():
                problems.append(f"cell {i}: {target} ({text[:30]!r}) is not a file of the repository")
            elif not image and file.suffix not in (".ipynb", ".md"):
                problems.append(f"cell {i}: {target} links to a {file.suffix} file, not a page")
            if image and len(text) < 40:
                problems.append(f"cell {i}: image {target} without alt text that describes it")
    assert not problems, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_answers_are_folded_details(path):
    """"Check your understanding" has three answers, each folded in <details> with a <summary>, and blank
    lines around its text so that Markdown and maths inside render (an HTML block ends at a blank line)."""
    cell = next(c for _, c in markdown_cells(path) if "## Check your understanding" in c.source)
    section = cell.source.split("## Check your understanding", 1)[1].split("\n## ", 1)[0]
    opened = re.findall(r"^<details>\n<summary>Answer</summary>\n\n", section, re.M)
    closed = re.findall(r"\n\n</details>$", section, re.M)
    assert len(opened) == len(closed) == 3 == section.count("<details>") == section.count("</details>"), section
