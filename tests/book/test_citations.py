"""Citations: references.bib is the course's one list of sources, and every citation in the lesson is a
plain Markdown link to its entry's anchor on the references page.

The references page is made from the .bib by sphinxcontrib-bibtex (references.md, ``{bibliography}``),
and ``bibtex_cite_id = "{key}"`` makes each entry's HTML id its key. Notebooks cannot use a ``{cite}``
role (Colab and JupyterLab show MyST raw: test_lesson_text.py), so a chapter writes
``[Welleck et al. (2020)](../references.md#welleck2020)``. Here: every such link names a key of the .bib,
as the anchor sphinxcontrib-bibtex generates for it; no author-year citation is left unlinked; and a
small Sphinx build shows that _ext/citations.py turns a good link into a link to its entry and fails a
``-W`` build on a key the .bib does not have. tests/book/test_website.py checks the same links in the
built site.
"""

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from docutils.nodes import make_id
from pybtex.database import parse_file
from helpers import LINK, NOTEBOOKS, citation_links, markdown_sources, without_code

ROOT = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
BIB = ROOT / "references.bib"
ENTRIES = parse_file(str(BIB)).entries  # pybtex refuses a duplicate key
TEMPLATE = CONFIG["sphinx"]["config"]["bibtex_cite_id"]
# The anchor sphinxcontrib-bibtex writes for an entry: its id template, made an HTML id by docutils
# (sphinxcontrib.bibtex.bibfile._make_ids does exactly this).
ANCHORS = {make_id(TEMPLATE.format(key=key, bibliography_count=1)): key for key in ENTRIES}
MD_PAGES = [ROOT / name for name in ("intro.md", "conclusion.md", "notation.md", "live_loop.md")]
PAGES = NOTEBOOKS + MD_PAGES
# An author-year citation as prose writes it: "Shannon (1948)", "Holtzman et al., 2020", "Ben Allal et al."
CITATION = re.compile(r"\bet al\.|\b[A-Z][a-z]+ \((?:19|20)\d\d\)|\b[A-Z][a-z]+, (?:19|20)\d\d\b")





def test_the_references_page_is_made_from_the_bib():
    assert CONFIG["bibtex_bibfiles"] == ["references.bib"]
    assert CONFIG["sphinx"]["local_extensions"]["citations"] == "_ext"
    assert "```{bibliography}\n:all:\n```" in (ROOT / "references.md").read_text()
    assert {"references", "notation"} <= {entry.get("file") for part in yaml.safe_load(
        (ROOT / "_toc.yml").read_text())["parts"] for entry in part["chapters"]}


def test_every_key_is_its_own_anchor():
    """Keys are lower-case letters and digits, so the anchor a link writes is the key itself."""
    assert len(ENTRIES) >= 20
    assert sorted(ANCHORS) == sorted(ENTRIES), [k for k in ENTRIES if k not in ANCHORS]
    for key, entry in ENTRIES.items():
        assert re.fullmatch(r"[a-z][a-z0-9]*", key), key
        assert " ".join(entry.fields.get("annote", "").split()), f"{key}: no annote (what to read it for)"


def test_the_lesson_sources_readings_are_in_the_bib():
    titles = {" ".join(e.fields["title"].strip("{}").split()) for e in ENTRIES.values()}
    for title in ["Let's build GPT: from scratch, in code, spelled out.",
                  "Decoder-Only Transformers, ChatGPTs specific Transformer, Clearly Explained!!!",
                  "A Tutorial on LLM Reasoning: Relevant Methods behind ChatGPT o1",
                  "Consistency of a Recurrent Language Model With Respect to Incomplete Decoding",
                  "Learning to Break the Loop: Analyzing and Mitigating Repetitions for Neural Text Generation",
                  "Transformer Explainer: Interactive Learning of Text-Generative Models"]:
        assert title in titles, title
    assert ENTRIES["shannon1948"].fields["volume"] == "27" and ENTRIES["shannon1948"].fields["number"] == "3-4"


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_citation_links_name_an_entry(path):
    bad = [f"{where}: [{text}](...#{fragment})" for where, text, fragment in citation_links(path)
           if fragment not in ANCHORS]
    assert not bad, f"{path.name} links to anchors that references.bib does not have:\n  " + "\n  ".join(bad)


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_citation_is_left_unlinked(path):
    """An author-year citation in prose is the text of a link to its entry, never bare."""
    bare = []
    for where, text in markdown_sources(path):
        prose = LINK.sub("", without_code(text)).replace("\n", " ")
        bare += [f"{where}: ...{prose[max(0, m.start() - 40):m.end() + 20]}..." for m in CITATION.finditer(prose)]
    assert not bare, f"{path.name}: cite these with a link to references.md#key:\n  " + "\n  ".join(bare)


def test_the_chapters_cite_through_the_bib():
    cited = {ANCHORS[f] for path in PAGES for _, _, f in citation_links(path) if f in ANCHORS}
    chapters = sorted((ROOT / "chapters").glob("*.ipynb"))
    for path in chapters:
        assert list(citation_links(path)), f"{path.name} cites nothing through references.bib"
    uncited = sorted(set(ENTRIES) - cited)
    assert not uncited, f"entries of references.bib that no page of the lesson cites: {uncited}"


def test_the_citation_detector():
    for prose in ["Shannon (1948) builds", "(Holtzman et al., 2020)", "Ben Allal et al. trained", "Haviv, 2022"]:
        assert CITATION.search(prose), prose
    for prose in ["Chapter 5 (2 tokens)", "about 1.4e-45", "GPT-2 (2019 weights)", "In 2020, greedy"]:
        assert not CITATION.search(prose), prose


# ---------------------------------------------------------------------------------------------------
# the extension in a small Sphinx build: a link lands on its entry; an unknown key fails -W

CONF = """
import sys
sys.path.insert(0, {ext!r})
extensions = ["myst_nb", "sphinxcontrib.bibtex", "citations"]
bibtex_bibfiles = ["references.bib"]
bibtex_cite_id = {template!r}
bibtex_default_style = "annotated"
nb_execution_mode = "off"
root_doc = "index"
"""


def small_book(tmp_path: Path, links: str) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(CONF.format(ext=str(ROOT / "_ext"), template=TEMPLATE))
    (src / "references.bib").write_text(BIB.read_text())
    (src / "references.md").write_text((ROOT / "references.md").read_text())
    (src / "index.md").write_text("# Index\n\n```{toctree}\nreferences\nchapter\n```\n")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(f"# Chapter\n\n{links}\n")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, src / "chapter.ipynb")
    return src


def sphinx_build(src: Path) -> tuple[int, str]:
    out = src.parent / "html"
    result = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-n", "-W", "--keep-going", "-q",
                             str(src), str(out)], capture_output=True, text=True, timeout=300)
    return result.returncode, result.stdout + result.stderr


@pytest.mark.slow  # about 3 s each: a Sphinx build
def test_a_citation_link_lands_on_its_entry(tmp_path):
    src = small_book(tmp_path, "[Welleck et al. (2020)](references.md#welleck2020) and [the page](references.md).")
    code, log = sphinx_build(src)
    assert code == 0, log
    chapter = (src.parent / "html" / "chapter.html").read_text()
    assert re.search(r'<a class="reference internal" href="references.html#welleck2020">', chapter), chapter
    references = (src.parent / "html" / "references.html").read_text()
    entry = re.search(r'<div class="citation" id="welleck2020" role="doc-biblioentry">(.*?)</div>', references, re.S)
    assert entry and "Consistency of a Recurrent Language Model" in entry.group(1)
    assert len(re.findall(r'<div class="citation" id="', references)) == len(ENTRIES)  # :all: shows each


@pytest.mark.slow  # about 3 s each: a Sphinx build
@pytest.mark.parametrize("fragment", ["nobody1999", "Welleck2020", "id8"])
def test_a_link_to_a_key_not_in_the_bib_fails_the_build(tmp_path, fragment):
    """An unknown key, a key written as it is not anchored (upper case), an auto id: each fails -W."""
    src = small_book(tmp_path, f"[Shannon (1948)](references.md#shannon1948) and [X](references.md#{fragment}).")
    code, log = sphinx_build(src)
    assert code != 0, log
    assert f"citation link to references#{fragment}: no entry of references.bib has that anchor" in log, log
    assert "shannon1948:" not in log  # the good link is not reported
