"""No command reads its own docstring as text it needs: ``python -OO`` strips docstrings (``__doc__`` is then
None), so ``__doc__.splitlines()[0]`` fails there. Read from the code (AST); the training commands also run
under ``-OO`` in test_pretrained.py."""

import ast

import pytest
from helpers import ROOT

FILES = sorted(p for folder in ("lib", "scripts", "bench", "_ext") for p in (ROOT / folder).rglob("*.py"))


def docstring_reads(path) -> list[str]:
    """Each ``__doc__.something`` and ``__doc__[...]`` of a file: a method or an index on what may be None."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            inner = node.value
            if (isinstance(inner, ast.Name) and inner.id == "__doc__") or \
                    (isinstance(inner, ast.Attribute) and inner.attr == "__doc__"):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_reader_finds_a_docstring_read(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('"""Doc."""\nprint(__doc__.splitlines()[0], f.__doc__[0], (__doc__ or "").strip())\n')
    assert sorted(docstring_reads(sample)) == ["line 2: __doc__.splitlines", "line 2: f.__doc__[0]"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_code_needs_its_docstring(path):
    assert docstring_reads(path) == []
