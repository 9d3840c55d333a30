"""The held-out cases import the shared inputs (common.py), never a chapter: the chapters are what they
test. That the whole package has no import circle is tests/library/test_house.py's."""

import ast
from pathlib import Path

import nexttoken.exercises

EXERCISES = Path(nexttoken.exercises.__file__).parent


def imports_of(path: Path) -> set[str]:
    """The modules of nexttoken/exercises that a file imports (``from .x import`` or ``from . import x``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module.split(".")[0]} if node.module else {alias.name for alias in node.names}
    return found


def test_the_held_out_cases_import_no_chapter():
    assert not imports_of(EXERCISES / "held_out.py") & set(nexttoken.exercises.CHAPTERS)
