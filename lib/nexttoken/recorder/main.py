"""The grader's recorder: runs inside a submission's sandbox, calls the learner's functions, reports outputs.

    python -m nexttoken.recorder NOTEBOOK CHAPTER [--skip-cells 3,5] --out-fd 3
    python -m nexttoken.recorder NOTEBOOK auto --out-fd 3

It reads the notebook itself (the grader parses a submission only for the explanation's answer, as
text) with ``notebook``: nbformat 4 as JSON, older formats upgraded with nbformat's converter; with
CHAPTER "auto" it finds the chapter in the notebook (its metadata, else the exercise module its code
imports).

It only computes; the grader judges. Its command line, its stdin's framing, its lines and every message's
keys are the contract's (``contract``), which the grader imports too. Its standard input brings, from the
grader, first a one-line nonce, then, once the recorder has said which chapter the notebook is, the *work
order* (``wire.pack_order``): a line with its length in bytes, then the order itself. The order names each
task's function and carries its test inputs as data (the held-out ones among them, unnamed), its rules and
its check of how by name (``calling``, ``watches``). Nothing in this process can judge an output: the
tasks' references, known mistakes, held-out names and solutions are not in the sandbox, which shows only
the lesson's library and this package (``nexttoken.grading.sandbox.policy``), and this package imports only
the lesson's library. No order (the grader closed the input: another chapter than the assignment's) and it
ends.

Then stdin is closed, and it runs only the learner's *definitions* (imports, ``def``, ``class``,
assignments to plain names, and to items or attributes of names the notebook bound itself, such as
``SETTINGS["k"] = v``; no calls for effect such as ``qN.check(...)``, ``display``, loops, or patches of
modules), with the names a Jupyter kernel gives every notebook (``display``, ``get_ipython``, ``In``, ``Out``),
as the learner's kernel ran them where it can tell (``kernel.Kernel``: of a function defined twice, the
definition run last, by the times or execution counts saved; an import this machine lacks costs its line
alone; ``x = %time ...``, ``%%writefile``),
then calls each task's function on its inputs, and writes one JSON message per line, each starting with
the nonce, to the descriptor the grader passed (their kinds and keys: ``contract.KEYS``, which the grader
checks them against):

    {"notebook": "read", "chapter": "ch02", "nbformat": 4}   (or "refused", with "status" and "reason")
    {"cell": N}                      about to run code cell N (the learner's numbering, from 1)
    {"cell_error": N, "error": "..."}
    {"task": "q1"}                   about to call the function of task q1
    {"record": "q1", "outcomes": [[kind, value], ...], "library": [...], "tampered": [...], "notes": {...}}
    {"done": true}

Outcome values are plain data: numbers, bools, None, strings, lists, and tensors as
``{"dtype", "shape", "data" (base64 of the contiguous bytes)}``. The grader trusts none of it: it checks
every message before judging (``wire``, ``nexttoken.grading.judge``). "library" names the library functions
the task re-implements (the order names them) that ran while the learner's function did (reported to the
instructor, not penalised), known by what their code runs, so that a copy of their code is seen too.
"tampered" names the parts of this process that decide what is recorded (``run_on``, the rules, the
checks of how, this module, builtins, torch.Tensor methods, the profile hook that watches for library
calls) that the learner's code replaced, or switched off and back on inside the task's call where Python's
audit hook sees it (``call_audit``): that task is then not graded. "notes"
says, in numbers and one name, what the task's row should say of how its function was defined (which of
several cells' definitions was used; a top-level loop that did not run but sets a name it reads): the
grader checks their form and writes the words.

This process is the learner's, so none of this is a wall: code that digs through memory can make its
*own* outputs anything it can compute, and so lose or keep its own marks, nothing more. The sandbox keeps
everyone else safe, and the judging outside keeps the answers out of reach.
"""

import builtins
import json
import os
import sys
import types

from . import calling, cells, contract, jupyter, kernel, notebook, watches, wire
from .cells import missing_reason
from .kernel import Kernel
from .contract import message, notebook_read, notebook_refused
from .notebook import Refused


def library_codes(names: list[str]) -> dict:
    """The library functions the order names ("module:qualname"), as the learner's code can reach them
    (unwrapped from decorators such as torch.no_grad): {``code_key`` of its code: "module.qualname"}. A name
    that does not resolve is skipped: the report of library calls is for the instructor, it costs no marks."""
    import importlib
    import inspect

    found = {}
    for name in names:
        module_name, _, qualname = str(name).partition(":")
        try:
            value = importlib.import_module(module_name)
            for part in qualname.split("."):
                value = getattr(value, part)
            found[code_key(inspect.unwrap(value).__code__)] = f"{module_name}.{qualname}"
        except Exception:
            continue
    return found


def code_key(code) -> tuple:
    """A code object by what it runs: its bytecode, constants (nested code by its own key) and names, not its
    name, file or line numbers. A function made from a copy of a library function's code
    (``types.FunctionType(f.__code__, globals())``, ``f.__code__.replace(co_name="mine")``) runs the library's
    code, and is seen as the library's function."""
    consts = tuple(code_key(c) if hasattr(c, "co_code") else (type(c).__name__, c) for c in code.co_consts)
    return code.co_code, consts, code.co_names


def watched(fn, library: dict, called: set, during: dict | None = None):
    """``fn``, noting the ``library`` functions (``library_codes``) run while it runs, by their code;
    "<profile hook removed>" joins ``called``'s names when the learner's code replaced the hook
    (sys.setprofile) to hide a call. ``during`` (``call_audit``) is told when ``fn`` runs."""
    seen: dict = {}  # id(code) -> (code, its library name or None): each code object's key is made once

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            known = seen.get(id(code))
            if known is None or known[0] is not code:
                known = seen[id(code)] = (code, library.get(code_key(code)))
            if known[1] is not None:
                called.add(known[1])

    def call(*args, **kwargs):
        sys.setprofile(profile)
        if during is not None:
            during["inside"] = True
        try:
            return fn(*args, **kwargs)
        finally:
            if during is not None:
                during["inside"] = False
            if sys.getprofile() is not profile:
                called.add(PROFILE_REMOVED)
            sys.setprofile(None)

    return call


PROFILE_REMOVED = "<profile hook removed>"
_MISSING = object()
AUDITED = ("__code__", "__defaults__", "__kwdefaults__")  # a function's parts whose setting Python audits


def call_audit() -> dict:
    """What the learner's code does while a task's function runs that only switches a watch off and back on,
    which comparing the watched parts before and after the call cannot see, where Python audits it: a call
    of sys.setprofile or sys.settrace (the library-call watch off, then back), a function's ``__code__``,
    ``__defaults__`` or ``__kwdefaults__`` set (a forbidden function's code put back, then its rule's again).
    The hook (``sys.addaudithook``) cannot be removed; ``watched`` says when the function runs; each event
    then joins "seen", and the task's record names it as tampering. Python audits no setting of a class's
    or a module's attribute: those are compared by identity only (``recorder_parts``)."""
    state = {"inside": False, "seen": []}
    # what the hook reads, held now: a global or builtin replaced inside the call cannot change it
    audited, function, length, is_a, text, read = AUDITED, types.FunctionType, len, isinstance, str, getattr
    seen = state["seen"]

    def hook(event, args):
        if not state["inside"] or length(seen) >= 5:
            return
        label = None
        if event in ("sys.setprofile", "sys.settrace"):
            label = f"{event} (called inside the task's function)"
        elif event == "object.__setattr__" and length(args) == 3 and args[1] in audited and is_a(args[0], function):
            label = f"{text(read(args[0], '__qualname__', 'a function'))[:30]}.{args[1]} (set inside the call)"
        if label is not None and label not in seen:
            seen.append(label)

    sys.addaudithook(hook)
    return state


def recorder_parts():
    """A function listing (label, object) for every part of the recorder a learner's code could replace
    to change what gets recorded: compared by identity before and after their code runs."""
    import types

    import torch
    import torch.nn.functional
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    spaces = [("builtins", vars(builtins)), ("torch.Tensor", vars(torch.Tensor)), ("torch", vars(torch)),
              ("nexttoken.recorder.watches.WATCHES", watches.WATCHES)]
    spaces += [(module.__name__, vars(module))
               for module in (calling, contract, watches, wire, notebook, cells, kernel, jupyter,
                               sys.modules[__name__])]
    # What the rules and the checks of how stand on, outside the recorder's own modules: the modes that see
    # torch's calls (a no-op __enter__ switched a rule off), nn.Module's hooks (a no-op
    # register_forward_pre_hook blinded the cache check), torch's other softmax homes, and sys's hooks
    # (a replaced setprofile blinded the library-call watch and hid its own "removed" note).
    spaces += [("torch.overrides", vars(torch.overrides)), ("TorchFunctionMode", vars(TorchFunctionMode)),
               ("TorchDispatchMode", vars(TorchDispatchMode)), ("torch.nn.Module", vars(torch.nn.Module)),
               ("torch.nn.functional", vars(torch.nn.functional)), ("torch.special", vars(torch.special))]
    hooks = ("setprofile", "getprofile", "settrace", "gettrace", "_getframe")

    def parts():
        found = [(f"{label}.{name}", value) for label, space in spaces for name, value in list(space.items())
                 if not (label == "builtins" and name.startswith("_"))]  # the REPL's "_" and friends
        found += [(f"sys.{name}", getattr(sys, name, None)) for name in hooks]
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
    """The grader's work order from ``stdin`` (``contract.read_order_bytes``), or None when it sent none."""
    data = contract.read_order_bytes(stdin)
    return None if data is None else wire.unpack_order(data)


def sender(out_fd: int, nonce: str):
    """The function that writes one message to the grader, as the contract's line (the grader drops any
    line not starting with the nonce). What it calls is held here, before any learner code runs."""
    write, encode = os.write, contract.encode_line

    def send(message: dict) -> None:
        data = encode(nonce, message)
        while data:
            data = data[write(out_fd, data):]

    return send


def read_submission(path: str, chapter: str, send) -> dict:
    """The notebook, once the grader has been told which chapter it is; a refused notebook ends here."""
    try:
        nb = notebook.read_notebook(path)
        name = notebook.detect_chapter(nb) if chapter == contract.AUTO else chapter
        if name is None:
            raise Refused("unknown_chapter", "no chapter in the notebook's metadata or imports")
    except Refused as exc:
        send(notebook_refused(exc.args[0], exc.args[1]))
        os._exit(0)
    send(notebook_read(name, nb.get("nbformat")))
    return nb


def run_definitions(cells: list[str], skip: set[int], send, counts: list, times: list | None = None) -> Kernel:
    """The learner's cells run as the grader runs them (``kernel.Kernel``), each announced first and its
    first error reported with the learner's cell number; then, of a function several cells define, the
    definition the learner's kernel ran last (by the ``times`` or ``counts`` the notebook saved)."""
    kernel = Kernel(counts, times)
    for number, source in enumerate(cells, start=1):
        if number in skip:
            continue
        send(message("cell", number))
        error = kernel.run_cell(number, source)
        if error is not None:
            send(message("cell_error", number, error=error[:contract.MAX_STRING]))
    kernel.rerun_last_executed()
    return kernel


def record(task: dict, kernel: Kernel, library: set, cells: list[str], parts, before: dict,
           during: dict | None = None) -> dict:
    """The record of one task: its function's outcomes on the order's inputs, the library functions it
    called, the parts of the recorder found replaced since before the learner's code ran, and what its row
    should say of how the function was defined (``Kernel.notes``)."""
    fn = kernel.namespace.get(task["function"])
    called: set = set()
    if not callable(fn):
        outcomes = [("missing", missing_reason(task["function"], cells))]
    else:
        outcomes = calling.run_on(watched(fn, library, called, during), task["cases"], task["forbid"],
                                  watches.WATCHES.get(task["watch"]), task["arg_names"])
    now = dict(parts())
    tampered = sorted(label for label, value in before.items() if now.get(label, _MISSING) is not value)
    if PROFILE_REMOVED in called:  # the learner's code switched off the watch for library calls
        called.discard(PROFILE_REMOVED)
        tampered.insert(0, "sys.setprofile (the library-call watch)")
    if during is not None:  # switched off and back on inside the call: the same parts before and after
        tampered[:0] = during["seen"]
        during["seen"].clear()
    try:
        sent = [[str(kind)[:contract.MAX_KIND], wire.encode(value)] for kind, value in outcomes]
        json.dumps(sent)
    except Exception as exc:  # e.g. a sparse tensor, an int of 5,000 digits: that task's error, not a crash
        sent = [["error", f"the output could not be sent to the grader ({type(exc).__name__})"]]
    try:
        notes = kernel.notes(task["function"], fn)
    except Exception:  # what the learner's code made of the namespace: no notes, the outcomes stand
        notes = {}
    return message("record", task["name"], outcomes=sent, library=sorted(called), tampered=tampered[:5],
                   notes=notes)


def main(argv=None):
    args = contract.parse_recorder_argv(argv)
    stdin = sys.stdin.buffer
    send = sender(args.out_fd, contract.read_nonce(stdin))  # the nonce: ours alone
    devnull = os.open(os.devnull, os.O_RDWR)
    # Printed and displayed output is not graded and may be huge: it goes nowhere.
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    nb = read_submission(args.notebook, args.chapter, send)

    import torch

    torch.set_num_threads(1)
    order = read_order(stdin)
    os.dup2(devnull, 0)  # the learner's code cannot read what the grader sent
    if order is None:
        os._exit(0)
    library = {task["name"]: library_codes(task["library"]) for task in order["tasks"]}
    parts = recorder_parts()
    before = dict(parts())
    during = call_audit()
    if args.no_threads_fd is not None:
        refuse_threads(args.no_threads_fd)
    cells = notebook.code_cells(nb)
    kernel = run_definitions(cells, args.skip_cells, send,
                             notebook.execution_counts(nb), notebook.execution_times(nb))
    for task in order["tasks"]:
        send(message("task", task["name"]))
        send(record(task, kernel, library[task["name"]], cells, parts, before, during))
    send(message("done", True))
    sys.stdout.flush()
    os._exit(0)  # no atexit hooks or threads of the learner's run after the report
