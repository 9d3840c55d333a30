"""The package's structure, read from its code (AST): no import circle, short functions in the grading
wing, and no module longer than a reader can hold. What the sandbox may import is tests/grading/test_boundary.py's."""

import ast

from helpers import PACKAGE, imports, modules

LONGEST = 60  # lines a function of the grading wing may take, its docstring included
LARGEST = 450  # lines a module of the package may take
WING = ["exercises", "grading", "recorder"]


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def test_the_package_has_no_import_circle():
    found = modules()
    graph = {name: imports(name, path, set(found)) for name, path in found.items()}
    assert graph["nexttoken.exercises.held_out"], "the import reader found nothing: this test would test nothing"
    assert not circles(graph), circles(graph)


def test_the_circle_finder_finds_one():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_function_of_the_grading_wing_is_longer_than_60_lines():
    long = []
    for folder in WING:
        assert (PACKAGE / folder).is_dir(), f"{folder}/ is gone: name its successor in WING"
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > LONGEST:
                        long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}: {lines} lines")
    assert not long, "\n".join(long)


def test_no_module_of_the_package_is_longer_than_450_lines():
    sizes = {path: len(path.read_text().splitlines()) for path in sorted(PACKAGE.rglob("*.py"))}
    assert len(sizes) > 50, "the module reader found too few modules: this test would test nothing"
    large = [f"{path.relative_to(PACKAGE)}: {n} lines" for path, n in sizes.items() if n > LARGEST]
    assert not large, "\n".join(large)


def test_no_test_file_imports_another():
    """What test files share lives in a module of its own (tests/helpers.py; the grader's submissions in
    tests/grading/submissions.py): a test file that imports another runs that file's module-level code, and
    ties the two together."""
    tests = PACKAGE.parents[1] / "tests"
    names = {path.stem for path in tests.rglob("test_*.py")}
    found = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            imported = [module] if module else [a.name for a in getattr(node, "names", [])] if isinstance(
                node, ast.Import) else []
            found += [f"{path.relative_to(tests)} imports {m}" for m in imported if m and m.split(".")[-1] in names]
    assert len(names) > 50, "the test reader found too few test files: this test would test nothing"
    assert not found, "\n".join(found)
