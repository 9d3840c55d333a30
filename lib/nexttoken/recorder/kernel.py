"""The learner's cells run as the grader runs them, in one namespace, as the learner's kernel ran them
where the notebook lets the grader tell (``Kernel``); and what a task's row should say of how its function
was defined (``Kernel.notes``)."""

import ast
import builtins
import types

from .cells import (bound_names, definitions, global_names, imported_names, loop_names, newer_syntax,
                    one_import_each, root_names, to_python)
from .contract import NO_THREAD, THREADS_REFUSED
from .jupyter import jupyter_names, write_file
from .notebook import several_sessions


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
        for node in one_import_each(tree.body):
            roots = root_names(node)
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
            self.imported.update(imported_names(node))
            self.own.difference_update(imported_names(node))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.defined.setdefault(node.name, {})[number] = node
        self.own.update(bound_names(node))

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


def _error_text(exc: BaseException) -> str:
    error = f"{type(exc).__name__}: {exc}"
    return error + (f" ({THREADS_REFUSED})" if str(exc) == NO_THREAD else "")
