"""Citations that read right on the website, in JupyterLab and on Colab, checked by the build.

The references page (``references.md``) is made by sphinxcontrib-bibtex from ``references.bib``: its
``{bibliography}`` directive lists every entry, and ``bibtex_cite_id = "{key}"`` (``_config.yml``) gives
each entry its key as its HTML id. A notebook cannot use a ``{cite}`` role: Colab and JupyterLab render
plain Markdown and would show it raw (``tests/book/test_lesson_text.py``). So a notebook cites with a
plain Markdown link to the entry's anchor::

    [Welleck et al. (2020)](../references.md#welleck2020)

It reads as a citation everywhere and, on the website, leads to the entry. MyST resolves the ``#...``
of such a link against the target page's headings only, and an entry is not a heading; this
post-transform runs first (before MyST's resolver) and, for each link to the references page with a
fragment, either points it at the entry whose id the fragment is, or warns, naming the fragment and the
``.bib`` file, so that the ``-W`` build fails: a key that ``references.bib`` does not have, or an anchor
that is not the one sphinxcontrib-bibtex generated for a key, cannot reach the site.

It also registers the pybtex style ``annotated`` (``bibtex_default_style``): pybtex's ``unsrt`` (entries
in the order of the ``.bib`` file, numbered), followed by the entry's ``annote`` field, which says what
to read the source for and where the lesson uses it.
"""

from docutils import nodes
from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting import toplevel
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.formatting.unsrt import date, pages
from pybtex.style.template import field, join, optional, optional_field, sentence, tag
from sphinx import addnodes
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.nodes import make_refnode

logger = logging.getLogger(__name__)


class AnnotatedStyle(UnsrtStyle):
    """unsrt, then the entry's ``annote`` (what to read it for); an article's volume(number) is shown
    without pages too (unsrt drops both when the entry has no pages); first names as initials."""

    def __init__(self, **kwargs):
        super().__init__(**{"abbreviate_names": True, **kwargs})

    def get_article_template(self, e):
        volume = optional[join[field("volume"), optional["(", field("number"), ")"], optional[":", pages]]]
        return toplevel[
            self.format_names("author"),
            self.format_title(e, "title"),
            sentence[tag("em")[field("journal")], volume, date],
            sentence[optional_field("note")],
            self.format_web_refs(e),
        ]

    def format_entry(self, label, entry, bib_data=None):
        formatted = super().format_entry(label, entry, bib_data=bib_data)
        annote = entry.fields.get("annote")
        if annote:
            formatted.text = Text(formatted.text, " ", Text.from_latex(" ".join(annote.split())))
        return formatted


def entry_ids(env, page: str) -> dict[str, str]:
    """id -> key of every entry that the bibliography of ``page`` shows."""
    domain = env.get_domain("cite")
    return {c.citation_id: c.key for c in domain.citations if c.bibliography_key.docname == page}


class CitationLinks(SphinxPostTransform):
    """A Markdown link to ``references.md#id`` becomes a link to the entry ``id``, or a warning."""

    default_priority = 8  # before MyST's resolver (9), which knows only headings

    def run(self, **kwargs):
        page = self.config.citations_page
        ids = None
        for node in list(self.document.findall(addnodes.pending_xref)):
            if node.get("refdomain") != "doc" or node.get("reftarget") != page or not node.get("reftargetid"):
                continue
            if ids is None:
                ids = entry_ids(self.env, page)
            fragment = node["reftargetid"]
            if fragment in ids:
                inner = nodes.inline("", "", *node.children, classes=["std", "std-ref"])
                node.replace_self(make_refnode(self.app.builder, self.env.docname, page, fragment, inner))
            else:
                logger.warning(
                    f"citation link to {page}#{fragment}: no entry of {', '.join(self.config.bibtex_bibfiles)} "
                    f"has that anchor (an entry's anchor is its key: {len(ids)} entries, e.g. "
                    f"{', '.join(sorted(ids)[:3])})", location=node, type="citations", subtype="missing_key")
                node.replace_self(node.children)


def setup(app):
    register_plugin("pybtex.style.formatting", "annotated", AnnotatedStyle)
    app.add_config_value("citations_page", "references", "env")
    app.add_post_transform(CitationLinks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
