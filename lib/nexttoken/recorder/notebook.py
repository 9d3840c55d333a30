"""Reading a submitted notebook inside the sandbox: its cells, its chapter, and the statements of each cell
that define names or set items of the notebook's own (the only ones the recorder runs)."""

import ast
import builtins
import importlib
import json
import os
import re
import sys
import types

from ..checks import is_int
from .contract import CHAPTERS, NO_THREAD, THREADS_REFUSED


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
    if not is_int(version):
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


def _root_names(node) -> set[str] | None:
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


def _bound_names(node) -> set[str]:
    """The plain names a kept statement binds (an assignment's, a def's or class's), imports aside."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)}
    return set()


def _imported_names(node) -> set[str]:
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
            roots = _root_names(node)
            if _is_definition(node):
                kept.append(node)
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    own.difference_update(_imported_names(node))
                own.update(_bound_names(node))
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


def execution_counts(nb: dict) -> list[int | None]:
    """Each code cell's execution count, as the notebook saved it (None: never run, or not saved)."""
    counts = []
    for cell in nb.get("cells", []):
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            n = cell.get("execution_count")
            counts.append(n if is_int(n) and n > 0 else None)
    return counts


def execution_times(nb: dict) -> list[float | None]:
    """When each code cell last ran, in seconds, where the notebook saved it (None elsewhere): Colab's
    ``executionInfo.timestamp`` (milliseconds), JupyterLab's ``execution["iopub.execute_input"]`` (with its
    timing recorded). Unlike execution counts, these order runs across kernel restarts."""
    from datetime import datetime

    times = []
    for cell in nb.get("cells", []):
        if not (isinstance(cell, dict) and cell.get("cell_type") == "code"):
            continue
        metadata = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
        colab, lab = metadata.get("executionInfo"), metadata.get("execution")
        when = None
        if isinstance(colab, dict) and is_int(colab.get("timestamp")) and colab["timestamp"] > 0:
            when = colab["timestamp"] / 1000
        elif isinstance(lab, dict) and isinstance(lab.get("iopub.execute_input"), str):
            try:
                when = datetime.fromisoformat(lab["iopub.execute_input"][:40].replace("Z", "+00:00")).timestamp()
            except (ValueError, OverflowError):
                when = None
        times.append(when)
    return times


def several_sessions(counts: list) -> bool:
    """Whether the saved execution counts certainly come from more than one kernel session: within one
    session each run takes the next count, so no two cells can show the same one; after a restart the
    counts begin again at 1, and a cell not run since keeps its count from before (which may be higher
    than any of the new session's)."""
    seen = [n for n in counts if n is not None]
    return len(seen) != len(set(seen))


class Shell:
    """What ``get_ipython()`` is while grading: enough of IPython's shell for the magics that a definition can
    hold once IPython has turned them into Python (``t = %time f(x)`` is ``t = get_ipython().run_line_magic(
    'time', 'f(x)')``), each done as a notebook does it; any other is named in the cell's error."""

    def __init__(self, namespace: dict):
        self.namespace = namespace

    def get(self):
        return self

    def run_line_magic(self, name: str, line: str):
        if name == "time":  # the expression's value, as %time returns it
            try:
                return eval(compile(line, "<%time>", "eval"), self.namespace)
            except SyntaxError:
                exec(compile(line, "<%time>", "exec"), self.namespace)
                return None
        if name == "timeit":  # %timeit returns None (its timings are printed); what it runs defines nothing
            return None
        raise RuntimeError(f"%{name} is an IPython magic the grader does not run (only definitions run while grading)")

    def run_cell_magic(self, name: str, line: str, cell: str):
        raise RuntimeError(f"%%{name} is an IPython cell magic the grader does not run")

    def getoutput(self, command: str):
        raise RuntimeError(f"!{command}: shell commands do not run while grading")

    system = getoutput


def write_file(source: str) -> bool:
    """A ``%%writefile [-a] PATH`` cell written as IPython writes it (its body into PATH, from the current
    folder, which the recorder's Python imports from), so that a later cell can import it; False for any
    other cell."""
    lines = source.lstrip("\n").split("\n")
    words = lines[0].strip().split()
    if not words or words[0] != "%%writefile":
        return False
    paths = [w for w in words[1:] if w not in ("-a", "--append")]
    if len(paths) != 1:
        raise ValueError("%%writefile needs one file name")
    mode = "a" if len(paths) < len(words) - 1 else "w"
    with open(os.path.expanduser(paths[0].strip("'\"")), mode, encoding="utf-8") as f:
        f.write("\n".join(lines[1:]))
    importlib.invalidate_caches()
    return True


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


class Kernel:
    """The learner's cells as the grader runs them, in one namespace (the notebook's module): each cell's
    definitions (``definitions``) statement by statement, where an import of a module this machine lacks
    costs only its own line (and a failed item assignment its own), a ``%%writefile`` cell writes its file,
    and the names a Jupyter kernel gives are there (``jupyter_names``: ``get_ipython()`` is a ``Shell``); then,
    for a function or class that several cells define, the definition the learner's kernel ran last (by the
    execution counts the notebook saved). It remembers what a task's row should say of how it was defined:
    ``notes``."""

    def __init__(self, counts: list, times: list | None = None):
        self.namespace = {"__name__": "__main__", "__builtins__": builtins}  # the module, as in a notebook
        self.namespace.update(jupyter_names(self.namespace))
        self.counts = counts
        self.times = times or []  # when each cell ran, where the notebook saved it (execution_times)
        self.defined: dict[str, dict[int, ast.AST]] = {}  # name -> {cell: its def or class there}
        self.loops: list[tuple[int, int, set]] = []  # (cell, line, names it would set) of top-level loops
        self.imported: set[str] = set()  # names bound by imports (modules: a loop calling them changes nothing)
        self.lacking: set[str] = set()  # names whose import was skipped: this machine lacks the module
        self.redefined: dict[str, dict] = {}  # name -> {"cells", "counts", "used"}
        self.own: set[str] = set()  # names the notebook bound itself (not by an import): their items may be set

    def run_cell(self, number: int, source: str) -> str | None:
        """Run one cell's definitions; what went wrong first, in words (an error, a skipped import), or None."""
        try:
            if write_file(source):
                return None
            python = to_python(source)
        except Exception as exc:
            return _error_text(exc)
        try:
            tree = definitions(python, self.own)
        except SyntaxError as exc:
            newer = newer_syntax(python, exc)
            return f"{newer} (SyntaxError: {exc})" if newer else f"SyntaxError: {exc}"
        self.loops += [(number, node.lineno, loop_names(node, set()))
                       for node in ast.parse(python).body if isinstance(node, (ast.For, ast.AsyncFor, ast.While))]
        first = None
        for node in _one_import_each(tree.body):
            roots = _root_names(node)
            if roots is not None and not all(_notebooks_own(self.namespace.get(name)) for name in roots):
                continue  # e.g. "F = torch.nn.functional; F.softmax = ...": a patch of a module, not run
            try:
                exec(compile(ast.Module([node], []), f"<code cell {number}>", "exec"), self.namespace)
            except BaseException as exc:  # the learner's error, reported with their cell number
                skipped = self._lacking(node, exc) if roots is None else _item_skipped(node, exc)
                if skipped is None:
                    return first or _error_text(exc)
                first = first or skipped
                continue
            self._note_definition(number, node)
        return first

    def _lacking(self, node, exc: BaseException) -> str | None:
        """What a statement that failed only for a module this machine lacks (or a name such an import would
        have bound) says; None where it failed otherwise (the cell stops there, as in a kernel)."""
        if isinstance(exc, ModuleNotFoundError) and isinstance(node, (ast.Import, ast.ImportFrom)) and exc.name:
            self.lacking.update(alias.asname or alias.name.partition(".")[0] for alias in node.names)
            return (f"ModuleNotFoundError: No module named {exc.name!r} (line {node.lineno}): the grading machine "
                    "lacks that module, so that line was skipped and the rest of the cell ran")
        if isinstance(exc, NameError) and getattr(exc, "name", None) in self.lacking:
            return (f"NameError: {exc} (line {getattr(node, 'lineno', '?')}): the grading machine lacks its module, "
                    "so that line was skipped")
        return None

    def _note_definition(self, number: int, node) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self.imported.update(_imported_names(node))
            self.own.difference_update(_imported_names(node))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.defined.setdefault(node.name, {})[number] = node
        self.own.update(_bound_names(node))

    def rerun_last_executed(self) -> None:
        """For each function or class that several cells define, the definition of the cell the learner's
        kernel ran last, run again where that is not the last in the notebook (which ran last here): the
        latest by the times the notebook saved (Colab's, JupyterLab's), else the highest execution count,
        else the notebook's last. Counts from more than one kernel session (``several_sessions``) are not
        compared: they are reported as missing, since they cannot say which ran last."""
        mixed = several_sessions(self.counts)
        for name, places in self.defined.items():
            if len(places) < 2:
                continue
            cells = sorted(places)
            saved = [self.counts[n - 1] if n - 1 < len(self.counts) else None for n in cells]
            times = [self.times[n - 1] if n - 1 < len(self.times) else None for n in cells]
            counts, used = [None] * len(cells) if mixed else saved, cells[-1]
            if None not in times and None not in saved:  # the row names the count of the one that ran last
                used, counts = cells[times.index(max(times))], saved
            elif None not in counts:
                used = cells[counts.index(max(counts))]
            self.redefined[name] = {"cells": cells[:16], "counts": counts[:16], "used": used}
            if used != cells[-1]:
                try:
                    exec(compile(ast.Module([places[used]], []), f"<code cell {used}>", "exec"), self.namespace)
                except BaseException:  # as it ran in its cell, before: the notebook's last stays
                    self.redefined[name]["used"] = cells[-1]

    def notes(self, function: str, fn) -> dict:
        """What the grader says in a task's row of how its function was defined: which of several cells'
        definitions was used ("defined"), and a top-level loop that did not run but sets a name the
        function (or a function it calls) reads ("loop")."""
        notes = {}
        if function in self.redefined:
            notes["defined"] = self.redefined[function]
        reads = global_names(fn)
        for name in list(reads):
            reads |= global_names(self.namespace.get(name))
        for cell, line, names in self.loops:
            hit = sorted((names - self.imported) & reads)
            if hit:
                notes["loop"] = {"cell": cell, "line": line, "name": hit[0][:60]}
                break
        return notes


def _notebooks_own(value) -> bool:
    """Whether a value the notebook bound may have its items or attributes set while grading: anything but
    a module, or a class or function of a module (``D = nexttoken.Decoder``), which would be a patch."""
    if isinstance(value, types.ModuleType):
        return False
    if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
        return getattr(value, "__module__", None) == "__main__"
    return True


def _item_skipped(node, exc: BaseException) -> str:
    """What a failed item or attribute assignment says. It failed for what the grader did not run (a loop
    or call that would have filled the dict): that line alone is skipped, and the rest of the cell runs."""
    return (f"{_error_text(exc)} (line {node.lineno}): an assignment to an item or attribute failed, so that "
            "line was skipped (did a loop or call the grader does not run fill what it uses?)")


def jupyter_names(namespace: dict) -> dict:
    """The names a Jupyter kernel gives every notebook: ``display`` (which shows nothing while grading,
    since no output is read), ``get_ipython`` (a ``Shell``), and IPython's input and output history, empty."""
    history: list = [""]
    outputs: dict = {}
    return {"display": display, "get_ipython": Shell(namespace).get, "In": history, "_ih": history,
            "Out": outputs, "_oh": outputs, "_": "", "__": "", "___": ""}


def display(*objs, **kwargs):
    """IPython's ``display``, while grading: it shows nothing (output is never read) and returns None, as
    IPython's does without ``display_id``; it never reads what it is given."""
    return None


def _one_import_each(body: list) -> list:
    """The statements, an ``import a, b`` split into one import a name, so that a lacking module costs
    only its own import."""
    out = []
    for node in body:
        if isinstance(node, ast.Import) and len(node.names) > 1:
            out += [ast.copy_location(ast.Import(names=[alias]), node) for alias in node.names]
        else:
            out.append(node)
    return out


def _error_text(exc: BaseException) -> str:
    error = f"{type(exc).__name__}: {exc}"
    return error + (f" ({THREADS_REFUSED})" if str(exc) == NO_THREAD else "")
