"""The grader's recorder: runs inside a submission's sandbox, calls the learner's functions, reports outputs.

    python -m nexttoken.grading.recorder NOTEBOOK CHAPTER [--skip-cells 3,5] --out-fd 3
    python -m nexttoken.grading.recorder NOTEBOOK auto --out-fd 3

It reads the notebook itself (the grader parses a submission only for the explanation's answer, as
text: ``explanations``): nbformat 4 as JSON, older formats upgraded with nbformat's converter; with CHAPTER "auto" it finds the chapter in the notebook (its metadata,
else the exercise module its code imports).

It only computes; the grader judges. Its standard input brings, from the grader, first a one-line nonce,
then, once the recorder has said which chapter the notebook is, the *work order* (``wire.pack_order``): a
line with its length in bytes, then the order itself. The order names each task's function and carries its
test inputs as data (the held-out ones among them, unnamed), its rules and its check of how by name
(``exercises.calling``, ``exercises.watches``). Nothing in this process can judge an output: the tasks'
references, known mistakes, held-out names and solutions are not in the sandbox (``sandbox.hidden_files``),
and this file imports only the lesson's library, ``calling``, ``watches`` and ``wire``. No order (the grader
closed the input: another chapter than the assignment's) and it ends.

Then stdin is closed, and it runs only the learner's *definitions* (imports, ``def``, ``class`` and
assignments to plain names; no calls for effect such as ``qN.check(...)``, ``display``, loops, or patches),
then calls each task's function on its inputs, and writes one JSON message per line, each starting with
the nonce, to the descriptor the grader passed:

    {"notebook": "read", "chapter": "ch02", "nbformat": 4}   (or "refused", with "status" and "reason")
    {"cell": N}                      about to run code cell N (the learner's numbering, from 1)
    {"cell_error": N, "error": "..."}
    {"task": "q1"}                   about to call the function of task q1
    {"record": "q1", "outcomes": [[kind, value], ...], "library": [...], "tampered": [...]}
    {"done": true}

Outcome values are plain data: numbers, bools, None, strings, lists, and tensors as
``{"dtype", "shape", "data" (base64 of the contiguous bytes)}``. The grader trusts none of it: it checks
every message before judging (``nexttoken.grading.wire``, ``judge``). "library" names the library functions
the task re-implements (the order names them) that ran while the learner's function did (reported to the
instructor, not penalised). "tampered" names the parts of this process that decide what is recorded
(``run_on``, the rules, the checks of how, this module, builtins, torch.Tensor methods, the profile hook
that watches for library calls) that the learner's code replaced: that task is then not graded.

This process is the learner's, so none of this is a wall: code that digs through memory can make its
*own* outputs anything it can compute, and so lose or keep its own marks, nothing more. The sandbox keeps
everyone else safe, and the judging outside keeps the answers out of reach.
"""

import argparse
import ast
import json
import os
import re
import sys

from .wire import MAX_STRING, encode


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
    from ..exercises import CHAPTERS

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


def library_codes(names: list[str]) -> set:
    """The code objects of the library functions the order names ("module:qualname"), as the learner's code
    can reach them (unwrapped from decorators such as torch.no_grad). A name that does not resolve is
    skipped: the report of library calls is for the instructor, it costs no marks."""
    import importlib
    import inspect

    found = set()
    for name in names:
        module_name, _, qualname = str(name).partition(":")
        try:
            value = importlib.import_module(module_name)
            for part in qualname.split("."):
                value = getattr(value, part)
            found.add(inspect.unwrap(value).__code__)
        except Exception:
            continue
    return found


def watched(fn, library: set, called: set):
    """``fn``, noting the ``library`` functions called while it runs; "<profile hook removed>" joins
    ``called``'s names when the learner's code replaced the hook (sys.setprofile) to hide a call."""
    def profile(frame, event, arg):
        if event == "call" and frame.f_code in library:
            called.add(f"{frame.f_globals.get('__name__', '?')}.{frame.f_code.co_name}")

    def call(*args, **kwargs):
        sys.setprofile(profile)
        try:
            return fn(*args, **kwargs)
        finally:
            if sys.getprofile() is not profile:
                called.add(PROFILE_REMOVED)
            sys.setprofile(None)

    return call


PROFILE_REMOVED = "<profile hook removed>"
_MISSING = object()


def recorder_parts():
    """A function listing (label, object) for every part of the recorder a learner's code could replace
    to change what gets recorded: compared by identity before and after their code runs."""
    import builtins
    import types

    import torch

    from ..exercises import calling, watches
    from . import recorder, wire

    spaces = [("builtins", vars(builtins)), ("nexttoken.exercises.calling", vars(calling)),
              ("nexttoken.exercises.watches", vars(watches)), ("nexttoken.exercises.watches.WATCHES", watches.WATCHES),
              ("nexttoken.grading.recorder", vars(recorder)), ("nexttoken.grading.wire", vars(wire)),
              ("torch.Tensor", vars(torch.Tensor)), ("torch", vars(torch)), ("the recorder", globals())]

    def parts():
        found = [(f"{label}.{name}", value) for label, space in spaces for name, value in list(space.items())
                 if not (label == "builtins" and name.startswith("_"))]  # the REPL's "_" and friends
        # A function's code and defaults can be swapped in place (f.__code__ = ...): watched too.
        return found + [(f"{label}.{attribute}", getattr(value, attribute, None)) for label, value in found
                        if isinstance(value, types.FunctionType)
                        for attribute in ("__code__", "__defaults__", "__kwdefaults__")]

    return parts


def refuse_threads(fd: int) -> None:
    """Load the grader's no-new-threads filter (seccomp, for good: nothing can unload it) from ``fd``. From
    here on, starting a thread fails ("can't start new thread"): the rules and the library-call watch see
    the thread that calls a task's function, and a thread of the learner's would run outside them."""
    import ctypes

    data = os.pread(fd, 1 << 20, 0)
    os.close(fd)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    program = ctypes.create_string_buffer(data, len(data))
    fprog = SockFprog(len(data) // 8, ctypes.addressof(program))
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "could not load the no-new-threads filter")


def read_order(stdin) -> dict | None:
    """The grader's work order from ``stdin`` (a length line, then that many bytes), or None when the
    grader sent none."""
    from .wire import unpack_order

    line = stdin.readline().strip()
    if not line.isdigit():
        return None
    data = stdin.read(int(line))
    return unpack_order(data)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m nexttoken.grading.recorder")
    parser.add_argument("notebook")
    parser.add_argument("chapter")
    parser.add_argument("--skip-cells", default="")
    parser.add_argument("--out-fd", type=int, required=True)
    parser.add_argument("--no-threads-fd", type=int, help="a seccomp filter (BPF) refusing new threads, "
                        "loaded before the learner's code runs")
    args = parser.parse_args(argv)

    out_fd, write, dumps = args.out_fd, os.write, json.dumps  # held before any learner code runs
    stdin = sys.stdin.buffer
    nonce = stdin.readline().decode("ascii", "replace").strip()  # known to this process only
    devnull = os.open(os.devnull, os.O_RDWR)

    def send(message: dict) -> None:  # the nonce first: the grader drops any line not starting with it
        data = (dumps({"nonce": nonce, **message}) + "\n").encode()
        while data:
            data = data[write(out_fd, data):]

    # Printed and displayed output is not graded and may be huge: it goes nowhere.
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)

    try:
        nb = read_notebook(args.notebook)
        name = detect_chapter(nb) if args.chapter == "auto" else args.chapter
        if name is None:
            raise Refused("unknown_chapter", "no chapter in the notebook's metadata or imports")
    except Refused as exc:
        send({"notebook": "refused", "status": exc.args[0], "reason": exc.args[1]})
        os._exit(0)
    send({"notebook": "read", "chapter": name, "nbformat": nb.get("nbformat")})

    import torch

    torch.set_num_threads(1)
    order = read_order(stdin)
    os.dup2(devnull, 0)  # the learner's code cannot read what the grader sent
    if order is None:
        os._exit(0)
    from ..exercises import calling
    from ..exercises.calling import run_on
    from ..exercises.watches import WATCHES

    tasks = order["tasks"]
    library = {task["name"]: library_codes(task["library"]) for task in tasks}
    skip = {int(n) for n in args.skip_cells.split(",") if n}
    parts = recorder_parts()
    before = {label: value for label, value in parts()}

    if args.no_threads_fd is not None:
        refuse_threads(args.no_threads_fd)
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    for number, source in enumerate(code_cells(nb), start=1):
        if number in skip:
            continue
        send({"cell": number})
        try:
            code = compile(definitions(to_python(source)), f"<code cell {number}>", "exec")
            exec(code, namespace)
        except BaseException as exc:  # the learner's error, reported with their cell number
            error = f"{type(exc).__name__}: {exc}"
            if str(exc) == calling.NO_THREAD:
                error += f" ({calling.THREADS_REFUSED})"
            send({"cell_error": number, "error": error[:MAX_STRING]})

    for task in tasks:
        send({"task": task["name"]})
        fn = namespace.get(task["function"])
        called: set = set()
        if not callable(fn):
            outcomes = [("missing", missing_reason(task["function"], code_cells(nb)))]
        else:
            outcomes = run_on(watched(fn, library[task["name"]], called), task["cases"], task["forbid"],
                              WATCHES.get(task["watch"]), task["arg_names"])
        now = dict(parts())
        tampered = sorted(label for label, value in before.items() if now.get(label, _MISSING) is not value)
        if PROFILE_REMOVED in called:  # the learner's code switched off the watch for library calls
            called.discard(PROFILE_REMOVED)
            tampered.insert(0, "sys.setprofile (the library-call watch)")
        try:
            sent = [[str(kind)[:40], encode(value)] for kind, value in outcomes]
            json.dumps(sent)
        except Exception as exc:  # e.g. a sparse tensor, an int of 5,000 digits: that task's error, not a crash
            sent = [["error", f"the output could not be sent to the grader ({type(exc).__name__})"]]
        send({"record": task["name"], "outcomes": sent, "library": sorted(called), "tampered": tampered[:5]})
    send({"done": True})
    sys.stdout.flush()
    os._exit(0)  # no atexit hooks or threads of the learner's run after the report


if __name__ == "__main__":
    main()
