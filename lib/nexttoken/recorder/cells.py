"""One code cell's source as the grader runs it: IPython's syntax as Python, the statements that define
names or set items of the notebook's own (the only ones the recorder runs), syntax of a newer Python named as
such, the names a loop that does not run would have set, and why a task's function is missing."""

import ast
import re
import sys


# Cell magics whose body is the cell's Python, run in the notebook's namespace: a defining cell that starts
# with one of them defines its functions as it would without it.
PYTHON_CELL_MAGICS = ("time", "capture", "timeit", "prun")


def without_cell_magic(source: str) -> str:
    """The body of a cell that starts with one of PYTHON_CELL_MAGICS (``%%time``), else the cell."""
    lines = source.lstrip("\n").split("\n")
    words = lines[0].strip().split()
    if words and words[0].startswith("%%") and words[0][2:] in PYTHON_CELL_MAGICS:
        return "\n".join(lines[1:])
    return source


def to_python(source: str) -> str:
    """IPython syntax (%magics, !shell) as plain Python, as Jupyter would run it; a cell magic that runs
    its body as Python (``%%time``, ``%%capture``) stands aside for its body."""
    source = without_cell_magic(source)
    try:
        ast.parse(source)
        return source  # plain Python already (most cells): no need to import IPython
    except SyntaxError:
        pass
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return source
    return TransformerManager().transform_cell(source)


def _is_definition(node) -> bool:
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [t for target in targets for t in ast.walk(target)
                 if not isinstance(t, (ast.Name, ast.Tuple, ast.List, ast.Store, ast.Starred))]
        return not names and (not isinstance(node, ast.AnnAssign) or node.value is not None)
    return False


def root_names(node) -> set[str] | None:
    """The names whose items or attributes an assignment sets (``SETTINGS["k"] = v``: {"SETTINGS"}), or None
    where it is not such an assignment (or also assigns plain names, or sets something not rooted at a
    name)."""
    if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) or (
            isinstance(node, ast.AnnAssign) and node.value is None):
        return None
    roots = set()
    for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
        if not isinstance(target, (ast.Subscript, ast.Attribute)):
            return None
        while isinstance(target, (ast.Subscript, ast.Attribute)):
            target = target.value
        if not isinstance(target, ast.Name):
            return None
        roots.add(target.id)
    return roots


def bound_names(node) -> set[str]:
    """The plain names a kept statement binds (an assignment's, a def's or class's), imports aside."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)}
    return set()


def imported_names(node) -> set[str]:
    return {alias.asname or alias.name.partition(".")[0] for alias in node.names}


def definitions(source: str, own: set[str] = frozenset()) -> ast.Module:
    """The statements of a cell that define names, and those that set an item or attribute of a name the
    notebook itself defined (``own``, or bound earlier in the cell): ``SETTINGS["k"] = v`` runs as in the
    kernel. The rest (calls for effect, loops, item or attribute assignments to what an import bound, such
    as ``torch.x = ...``) is what a notebook does for show or to patch things, and does not run while
    grading."""
    tree = ast.parse(source)
    own = set(own)

    def keep(body):
        kept = []
        for node in body:
            roots = root_names(node)
            if _is_definition(node):
                kept.append(node)
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    own.difference_update(imported_names(node))
                own.update(bound_names(node))
            elif roots is not None and roots <= own:
                kept.append(node)
            elif isinstance(node, (ast.With, ast.AsyncWith)):  # e.g. a def inside "with torch.no_grad():"
                node.body = keep(node.body) or [ast.Pass()]
                kept.append(node)
            elif isinstance(node, ast.If):  # e.g. "if 'google.colab' in sys.modules:" around imports
                node.body, node.orelse = keep(node.body) or [ast.Pass()], keep(node.orelse)
                kept.append(node)
            elif isinstance(node, ast.Try):  # e.g. try: import x / except ImportError: ...
                node.body = keep(node.body) or [ast.Pass()]
                for handler in node.handlers:
                    handler.body = keep(handler.body) or [ast.Pass()]
                node.orelse, node.finalbody = keep(node.orelse), keep(node.finalbody)
                kept.append(node)
        return kept

    tree.body = keep(tree.body)
    return ast.fix_missing_locations(tree)  # the Pass put in an emptied body has no line of its own


def missing_reason(function: str, cells: list[str]) -> str:
    """Why the task's function is not there after the cells ran, as true as the notebook lets us say: not
    written at all, or written where the grader does not run it (in a loop, a call, another cell magic),
    or in a cell that raised (the row's note names that cell's error)."""
    pattern = re.compile(rf"^\s*(async\s+)?def\s+{re.escape(function)}\s*\(", re.M)
    written = [n for n, source in enumerate(cells, start=1) if pattern.search(source)]
    if not written:
        return f"the notebook does not define a function named {function}"
    top = re.compile(rf"^(async\s+)?def\s+{re.escape(function)}\s*\(", re.M)
    where = f"code cell {written[-1]}"
    if any(top.search(without_cell_magic(cells[n - 1])) for n in written):
        return (f"{function} is defined in {where}, but it did not exist once the cells had run: did that "
                "cell raise before reaching it, or did a later cell delete or rename it?")
    return (f"{function} is written in {where}, but nested inside a statement the grader does not run (a "
            "loop, a function call or a cell magic other than %%time and %%capture): the grader runs only a "
            "cell's definitions (imports, def, class, assignments, and those inside if, try and with). "
            f"Define {function} at the top level of its cell")


TYPE_STATEMENT = re.compile(r"^\s*type\s+[A-Za-z_]\w*\s*(\[[^\]]*\])?\s*=")
TYPE_PARAMETERS = re.compile(r"^\s*((async\s+)?def|class)\s+[A-Za-z_]\w*\s*\[")
F_STRING = re.compile(r"(?i)(?<![\w'\"])(?:rf|fr|f)(\"\"\"|'''|\"|')")


def newer_syntax(source: str, error: SyntaxError) -> str | None:
    """Where a cell does not compile because a line is syntax of a newer Python than the grader's (Python
    3.12's f-strings, ``type`` statements, type parameters): "line 3 needs Python 3.12 (...); the grader runs
    Python 3.11", else None."""
    lines = source.split("\n")
    if sys.version_info >= (3, 12) or not error.lineno or error.lineno > len(lines):
        return None
    line = lines[error.lineno - 1]
    feature = _f_string_of_312(line)
    if feature is None and TYPE_STATEMENT.match(line):
        feature = "a type statement, type X = ..."
    if feature is None and TYPE_PARAMETERS.match(line):
        feature = "type parameters in brackets, def f[T](...)"
    if feature is None:
        return None
    return (f"line {error.lineno} needs Python 3.12 ({feature}); the grader runs Python "
            f"{sys.version_info.major}.{sys.version_info.minor}, so this cell did not run")


def _f_string_of_312(line: str) -> str | None:
    """What an f-string on ``line`` holds inside its braces that only Python 3.12 reads: its own quotes, a
    backslash, a comment."""
    for found in F_STRING.finditer(line):
        quote, i, depth = found.group(1), found.end(), 0
        while i < len(line) and not (depth == 0 and line.startswith(quote, i)):
            if line.startswith("{{", i) and depth == 0:
                i += 2
                continue
            c = line[i]
            depth += (c == "{") - (c == "}" and depth > 0)
            if depth and line.startswith(quote, i):
                return "an f-string that uses its own quotes inside its braces"
            if depth and c in "\\#":
                return "a backslash inside an f-string's braces" if c == "\\" else "a comment inside an f-string"
            i += 1
    return None


def loop_names(node: ast.AST, imported: set[str]) -> set[str]:
    """The names a loop that does not run would have set or changed: every name it assigns, and every name
    whose items or attributes it sets or whose method it calls (``table[i] = ...``, ``rows.append(...)``),
    modules aside (``imported``)."""
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            names.add(sub.id)
        elif isinstance(sub, (ast.Subscript, ast.Attribute)) and isinstance(sub.ctx, ast.Store):
            while isinstance(sub, (ast.Subscript, ast.Attribute)):
                sub = sub.value
            if isinstance(sub, ast.Name):
                names.add(sub.id)
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and isinstance(sub.func.value, ast.Name):
            names.add(sub.func.value.id)
    return names - imported


def global_names(fn) -> set[str]:
    """The global names a function's code (and the code nested in it) reads."""
    code = getattr(fn, "__code__", None)
    found, todo = set(), [code] if code is not None else []
    while todo:
        code = todo.pop()
        found.update(code.co_names)
        todo += [c for c in code.co_consts if hasattr(c, "co_names")]
    return found


def one_import_each(body: list) -> list:
    """The statements, an ``import a, b`` split into one import a name, so that a lacking module costs
    only its own import."""
    out = []
    for node in body:
        if isinstance(node, ast.Import) and len(node.names) > 1:
            out += [ast.copy_location(ast.Import(names=[alias]), node) for alias in node.names]
        else:
            out.append(node)
    return out
