"""The names a Jupyter kernel gives every notebook, as the grader gives them: ``display`` (which shows
nothing), ``get_ipython()`` (a ``Shell``: ``x = %time f(y)`` runs as in a notebook), the input and output
history (empty), and a ``%%writefile`` cell, which writes its file."""

import importlib
import os


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
