"""The modules of nexttoken/exercises import one another without a circle (issue 55): the chapters import
the shared inputs (common.py), the held-out cases import those and never a chapter, and no module imports
another inside a function to get round a circle (imports in functions count too)."""

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


def test_the_exercises_import_graph_has_no_circle():
    modules = {path.stem: path for path in EXERCISES.glob("*.py")}
    graph = {name: imports_of(path) & set(modules) for name, path in modules.items()}
    done, path = set(), []

    def visit(name):
        assert name not in path, f"a circle of imports: {' -> '.join(path[path.index(name):] + [name])}"
        if name in done:
            return
        path.append(name)
        for imported in sorted(graph[name]):
            visit(imported)
        path.pop()
        done.add(name)

    for name in sorted(graph):
        visit(name)


def test_the_held_out_cases_import_no_chapter():
    assert not imports_of(EXERCISES / "held_out.py") & set(nexttoken.exercises.CHAPTERS)
