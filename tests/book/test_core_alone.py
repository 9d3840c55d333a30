"""The core of chapters 1-6 runs on its own: a learner who skips every "Going deeper" section gets no error.

A "Going deeper" section is found as /work/shared/tools/core_path.py (the lesson's word count) finds it: a
Markdown heading that begins "Going deeper" opens it, and it runs to the next heading of the same or a
higher level. Two checks:

- static (fast): no core cell reads a name that an earlier Going deeper cell assigned, so a core cell
  sees the same values whether or not the learner ran the Going deeper sections before it;
- executed (slow): each chapter without its Going deeper sections runs in a fresh kernel, and no cell
  raises (cells tagged ``raises-exception`` excepted) or writes to stderr.
"""

import ast
from pathlib import Path

import nbformat
import pytest
from helpers import load_script

ROOT = Path(__file__).resolve().parents[2]
CORE_CHAPTERS = sorted((ROOT / "chapters").glob("0[1-6]_*.ipynb"))


split_core = load_script("scripts/core_clock.py").split_core  # the clock's rule, and core_path.py's


def core_notebook(path: Path):
    nb = nbformat.read(path, as_version=4)
    nb.cells = [cell for cell, deeper in split_core(nb.cells) if not deeper]
    return nb


def _locals(node) -> set[str]:
    """The names local to a function, lambda or comprehension: its parameters and what it assigns."""
    found = set()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = node.args
        found |= {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x}
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        body = [g.target for g in node.generators]
    else:
        body = node.body if isinstance(node.body, list) else [node.body]
    for stmt in body:
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                found.add(sub.id)
            elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(sub.name)
    return found


def _reads(node, local=frozenset()) -> list[str]:
    """Names a statement reads from the notebook's namespace (a function's own locals left out)."""
    if isinstance(node, ast.Name):
        return [node.id] if isinstance(node.ctx, ast.Load) and node.id not in local else []
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp,
                         ast.GeneratorExp, ast.DictComp)):
        local = local | _locals(node)
    return [name for child in ast.iter_child_nodes(node) for name in _reads(child, local)]


def _stores(node) -> set[str]:
    """Names a node assigns in the notebook's namespace (function bodies and comprehensions left out)."""
    found, todo = set(), [node]
    for sub in todo:
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            found.add(sub.id)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            found |= {(alias.asname or alias.name).split(".")[0] for alias in sub.names}
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(sub.name)
        if not isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp,
                                ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            todo += list(ast.iter_child_nodes(sub))
    return found


def names(source: str) -> tuple[set[str], set[str]]:
    """(names the cell assigns in the notebook's namespace, names it reads there before assigning them),
    statement by statement, a loop's target assigned before its body runs."""
    stored, free = set(), set()

    def run(stmts):
        for stmt in stmts:
            if isinstance(stmt, (ast.For, ast.With)):
                header = [stmt.iter] if isinstance(stmt, ast.For) else [i.context_expr for i in stmt.items]
                for h in header:
                    free.update(n for n in _reads(h) if n not in stored)
                targets = [stmt.target] if isinstance(stmt, ast.For) else [i.optional_vars for i in stmt.items]
                stored.update(n for t in targets if t is not None for n in _stores(t))
                run(stmt.body)
                run(getattr(stmt, "orelse", []))
            elif isinstance(stmt, (ast.If, ast.While)):
                free.update(n for n in _reads(stmt.test) if n not in stored)
                run(stmt.body)
                run(stmt.orelse)
            elif isinstance(stmt, ast.Try):
                run(stmt.body)
                for handler in stmt.handlers:
                    if handler.name:
                        stored.add(handler.name)
                    if handler.type is not None:
                        free.update(n for n in _reads(handler.type) if n not in stored)
                    run(handler.body)
                run(stmt.orelse)
                run(stmt.finalbody)
            else:
                free.update(n for n in _reads(stmt) if n not in stored)
                stored.update(_stores(stmt))

    run(ast.parse(source).body)
    return stored, free


def test_the_sections_are_found():
    """Every chapter 1-6 has a core and at least one Going deeper section, and the core ends with
    "The piece of `nexttoken` you built" (a level-2 heading after the Going deeper sections)."""
    for path in CORE_CHAPTERS:
        split = list(split_core(nbformat.read(path, as_version=4).cells))
        assert any(deeper for _, deeper in split), path.name
        core_md = [c.source for c, deeper in split if not deeper and c.cell_type == "markdown"]
        assert any("The piece of `nexttoken` you built" in s for s in core_md), path.name


@pytest.mark.parametrize("path", CORE_CHAPTERS, ids=lambda p: p.stem)
def test_core_reads_nothing_going_deeper_assigned(path):
    assigned_deeper: dict[str, int] = {}
    problems = []
    for i, (cell, deeper) in enumerate(split_core(nbformat.read(path, as_version=4).cells)):
        if cell.cell_type != "code":
            continue
        stored, free = names(cell.source)
        if deeper:
            assigned_deeper.update({name: i for name in stored})
        else:
            problems += [f"core cell {i} reads {name!r}, assigned by Going deeper cell {assigned_deeper[name]}"
                         for name in sorted(free) if name in assigned_deeper]
    assert not problems, f"{path.name}:\n  " + "\n  ".join(problems)


@pytest.mark.slow  # about 1 to 3 minutes a chapter: SmolLM2 loads in each
@pytest.mark.parametrize("path", CORE_CHAPTERS, ids=lambda p: p.stem)
def test_core_runs_without_going_deeper(path):
    from nbclient import NotebookClient

    nb = core_notebook(path)
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            if out.output_type == "error" and "raises-exception" not in cell.metadata.get("tags", []):
                problems.append(f"core cell {i} raised {out.ename}: {out.evalue[:300]}\n{cell.source[:200]}")
            if out.output_type == "stream" and out.name == "stderr":
                problems.append(f"core cell {i} wrote to stderr: {out.text[:300]!r}")
    assert not problems, f"{path.name}, Going deeper sections removed:\n  " + "\n  ".join(problems)
