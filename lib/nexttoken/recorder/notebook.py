"""Reading a submitted notebook inside the sandbox: its cells, its chapter, and the statements of each cell
that define names (the only ones the recorder runs)."""

import ast
import json
import re

# The course's chapters, as nexttoken.exercises names them; the stand-in for that package inside the sandbox
# (``stand_in``) and the package itself read them from here.
CHAPTERS = ("ch01", "ch02", "ch03", "ch04", "ch05", "ch06", "ch07")


class Refused(Exception):
    """A notebook the recorder will not read: (status, reason). The reason never quotes the file."""


def read_notebook(notebook_path: str) -> dict:
    """The notebook as nbformat 4 (older formats upgraded), or Refused. Reasons name what is wrong and what
    to do, never the file's content (which could be anything a link pointed to)."""
    with open(notebook_path, "rb") as f:
        data = f.read()
    try:
        nb = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise Refused("invalid_notebook", f"not UTF-8 text (byte {exc.start}): not a notebook") from None
    except json.JSONDecodeError as exc:
        raise Refused("invalid_notebook", f"not a readable notebook: not JSON ({exc.msg}, line {exc.lineno} "
                                          f"column {exc.colno})") from None
    except RecursionError:
        raise Refused("invalid_notebook", "not a readable notebook: JSON nested too deeply") from None
    version = nb.get("nbformat") if isinstance(nb, dict) else None
    if not isinstance(version, int) or isinstance(version, bool):
        raise Refused("invalid_notebook", "not a readable notebook: no nbformat version number in it")
    if version in (1, 2, 3):  # Jupyter's older formats: upgraded as Jupyter itself would
        try:
            import nbformat

            nb = json.loads(nbformat.writes(nbformat.reads(data.decode("utf-8"), as_version=4)))
        except Exception as exc:
            raise Refused("old_notebook", f"an nbformat {version} notebook that could not be upgraded "
                                          f"({type(exc).__name__}): open it in Jupyter, save it (as nbformat 4) "
                                          "and submit it again") from None
    elif version != 4:
        raise Refused("old_notebook", f"nbformat {version}: only nbformat 4 (and 1 to 3, upgraded) is read; "
                                      "open it in Jupyter, save it and submit it again")
    if not isinstance(nb.get("cells"), list):
        raise Refused("invalid_notebook", "not a readable notebook: it has no list of cells")
    return nb


def code_cells(nb: dict) -> list[str]:
    """The source of each code cell, in order: the learner's "code cell N" is index N - 1."""
    cells = []
    for cell in nb.get("cells", []):
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            source = cell.get("source", "")
            cells.append("".join(map(str, source)) if isinstance(source, list) else str(source))
    return cells


def detect_chapter(nb: dict) -> str | None:
    """Which chapter a notebook is from, by its content, not its file name: the chapter named in the
    notebook's metadata, else the exercise module its code imports."""
    metadata = nb.get("metadata")
    ours = metadata.get("nexttoken") if isinstance(metadata, dict) else None
    meta = ours.get("chapter") if isinstance(ours, dict) else None
    if isinstance(meta, str) and meta in CHAPTERS:
        return meta
    found = set(re.findall(r"nexttoken\.exercises(?:\s+import\s+|\.)(ch0\d)", "\n".join(code_cells(nb))))
    found &= set(CHAPTERS)
    return found.pop() if len(found) == 1 else None


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


def definitions(source: str) -> ast.Module:
    """The statements of a cell that define names; the rest (calls for effect, loops, attribute or item
    assignments) is what a notebook does for show or to patch things, and does not run while grading."""
    tree = ast.parse(source)

    def keep(body):
        kept = []
        for node in body:
            if _is_definition(node):
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
    return tree


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
