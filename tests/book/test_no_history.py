"""The pages a learner or an instructor reads describe the course as it is: no issue of this project, no
"round" of its work (figures and their history belong in bench/README.md, which no part of the book is).
Another project's issue, named with its repository ("ggml-org/llama.cpp issue 20824"), is a citation."""

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / name for name in ("README.md", "intro.md", "conclusion.md", "notation.md", "references.md",
                                  "live_loop.md")] + sorted((ROOT / "guide").rglob("*.md"))
NOTEBOOKS = sorted(p for folder in ("chapters", "exercises", "solutions", "appendix") for p in
                   (ROOT / folder).glob("*.ipynb")) + sorted(ROOT.glob("model_card*.ipynb"))
HISTORY = re.compile(r"\b(issues? \d+|rounds? \d+|round (four|five|six|seven)\b|round \d+'s)",
                     re.IGNORECASE)
CITED = re.compile(r"[\w.-]+/[\w.-]+ issue \d+", re.IGNORECASE)  # another repository's issue


def text_of(path: Path) -> str:
    if path.suffix == ".ipynb":
        return "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", PAGES + NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_names_an_issue_or_a_round_of_this_project(path):
    text = CITED.sub("", text_of(path))
    found = [m.group(0) for m in HISTORY.finditer(text)]
    assert not found, f"{path.relative_to(ROOT)} names the project's history: {found}"


def test_the_check_finds_history_and_lets_a_citation_be():
    assert HISTORY.search("before issue 63 it came first") and HISTORY.search("after round 5's changes")
    assert not HISTORY.search(CITED.sub("", "as in ggml-org/llama.cpp issue 20824"))
