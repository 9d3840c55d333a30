"""The contract between the sandbox and the grader, whole, in one module that both sides import: how the
grader starts the recorder (``recorder_argv``), what it sends in on stdin and how it is framed (a nonce
line, then a work order after its length), how each message comes out (one JSON object a line, after the
run's nonce, ``encode_line``, and how the grader cuts and parses those lines, ``line_prefix`` and
``decode_line``), every message's kind and keys (``KEYS``, the notebook's message, a record's notes), the
outcome kinds a record holds, how a broken rule reads, and the limits of what travels.

It lives in ``nexttoken.recorder`` because the sandbox shows that package (and nothing of the grader:
``nexttoken.grading.sandbox.policy``); the grader imports it from here. It imports only the standard
library, so either side can read it without pulling in the other (or torch). The data inside a message
(outputs, the work order's inputs) is ``wire``'s.
"""

import argparse
import json

# The course's chapters, as nexttoken.exercises names them (the exercises, the stand-in for that package in
# the sandbox, the recorder's chapter detection and the grader all read them from here).
CHAPTERS = ("ch01", "ch02", "ch03", "ch04", "ch05", "ch06", "ch07")

# --- the recorder's command line ---
AUTO = "auto"  # the chapter argument of the first run: the recorder finds the chapter in the notebook


def recorder_argv(python: str, notebook: str, out_fd: int, no_threads_fd: int | None = None, *,
                  chapter: str | None, skip: set[int]) -> list[str]:
    """How the grader starts the recorder: ``chapter`` None for the first run (it finds it, ``AUTO``), the
    code cells to ``skip``, the descriptor it writes its messages to and, where the grader gives one, the
    descriptor of its no-new-threads filter (seccomp, loaded before the learner's code runs)."""
    argv = [python, "-m", "nexttoken.recorder", notebook, chapter or AUTO,
            "--skip-cells", ",".join(map(str, sorted(skip))), "--out-fd", str(out_fd)]
    return argv + (["--no-threads-fd", str(no_threads_fd)] if no_threads_fd is not None else [])


def parse_recorder_argv(argv) -> argparse.Namespace:
    """The recorder's reading of ``recorder_argv``'s arguments (``skip_cells`` as a set of cell numbers)."""
    parser = argparse.ArgumentParser(prog="python -m nexttoken.recorder")
    parser.add_argument("notebook")
    parser.add_argument("chapter")
    parser.add_argument("--skip-cells", default="")
    parser.add_argument("--out-fd", type=int, required=True)
    parser.add_argument("--no-threads-fd", type=int, help="a seccomp filter (BPF) refusing new threads, "
                        "loaded before the learner's code runs")
    args = parser.parse_args(argv)
    args.skip_cells = {int(n) for n in args.skip_cells.split(",") if n}
    return args


# --- one start, many runs: the zygote's command line and its control socket ---
# A sandbox starts Python and torch once (``zygote``), then forks each run of the submission from it. The
# grader asks for a run on a SOCK_SEQPACKET socket, one JSON message a packet, handing over with it the run's
# two pipe ends (its messages' write end, its stdin's read end); the run's child never holds that socket.


def zygote_argv(python: str, notebook: str, control_fd: int, no_threads_fd: int | None, clean: list[str]) -> list[str]:
    """How the grader starts a sandbox's zygote: the notebook's path, the control socket's descriptor, the
    no-new-threads filter's (each run loads it) and the folders it empties between runs (``clean``)."""
    argv = [python, "-m", "nexttoken.recorder.zygote", notebook, "--control-fd", str(control_fd)]
    argv += ["--no-threads-fd", str(no_threads_fd)] if no_threads_fd is not None else []
    return argv + [arg for folder in clean for arg in ("--clean", folder)]


def parse_zygote_argv(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m nexttoken.recorder.zygote")
    parser.add_argument("notebook")
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--no-threads-fd", type=int)
    parser.add_argument("--clean", action="append", default=[])
    return parser.parse_args(argv)


CONTROL_BYTES = 1 << 16  # the largest control message


def run_request(chapter: str | None, skip: set[int]) -> bytes:
    """grader -> zygote, with the run's two descriptors: fork a run of the recorder (``recorder_argv``'s)."""
    return json.dumps({"run": {"chapter": chapter or AUTO, "skip": sorted(skip)}}).encode()


END = json.dumps({"end": True}).encode()  # grader -> zygote: the run is over, end every process of it
ENDED = json.dumps({"ended": True}).encode()  # zygote -> grader: they are gone and the folders emptied


def run_exit(code: int) -> bytes:
    """zygote -> grader: the run's first process ended, with this code (negative: killed by that signal)."""
    return json.dumps({"exit": int(code)}).encode()


def control_message(data: bytes) -> dict | None:
    """One control packet read back, or None where it is not one of the above."""
    try:
        message = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    return message if isinstance(message, dict) and len(message) == 1 else None


# --- into the sandbox: its stdin ---
# First a line with the run's nonce, before any learner code runs; then, once the recorder has said which
# chapter it read, the work order framed as its length in ASCII digits and a line break, then its bytes
# (``wire.pack_order``); or stdin closed without an order, and the recorder ends.

def nonce_line(nonce: str) -> bytes:
    return f"{nonce}\n".encode("ascii")


def read_nonce(stdin) -> str:
    return stdin.readline().decode("ascii", "replace").strip()


def order_header(order: bytes) -> bytes:
    """What comes before the work order's bytes on stdin: its length."""
    return b"%d\n" % len(order)


def read_order_bytes(stdin) -> bytes | None:
    """The work order's bytes from ``stdin`` (its length line, then that many bytes), or None when the
    grader sent none."""
    line = stdin.readline().strip()
    if not line.isdigit():
        return None
    return stdin.read(int(line))


# --- out of the sandbox: the lines ---
# One JSON object per line, ASCII only, its first key the run's nonce, written with these separators: the
# grader finds its lines by that exact start (``line_prefix``) and the kind's key after it (``starts_with``).
SEPARATORS = (", ", ": ")


def encode_line(nonce: str, message: dict, dumps=json.dumps) -> bytes:
    """One message as the line the recorder writes (``dumps`` is bound here, before any learner code runs)."""
    return (dumps({"nonce": nonce, **message}, separators=SEPARATORS, ensure_ascii=True) + "\n").encode("ascii")


def line_prefix(nonce: str) -> bytes:
    """How every line of this run's begins: ``encode_line``'s output up to the nonce's closing quote."""
    return json.dumps({"nonce": nonce}, separators=SEPARATORS, ensure_ascii=True)[:-1].encode("ascii")


def starts_with(line: bytes, prefix: int, kind: str) -> bool:
    """Whether a line whose nonce prefix is ``prefix`` bytes long goes on with the key of ``kind``."""
    return line.startswith(f'{SEPARATORS[0]}"{kind}"{SEPARATORS[1]}'.encode("ascii"), prefix)


def decode_line(line: bytes) -> dict | None:
    """A line as a message (a JSON object), or None for one that is not, or too big to parse safely (the
    learner's process can forge one with the nonce: a few MB of "[]" would be millions of objects)."""
    if line.count(b"{") + line.count(b"[") + line.count(b",") > MAX_TOKENS:
        return None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


# --- the messages ---
# First the notebook's (``notebook_read`` or ``notebook_refused``), before any learner code runs. Then the
# others, each named by the one key of KEYS it has, with exactly the keys KEYS gives it (besides the nonce):
# the grader refuses any other (``kind_of``, ``grading.protocol.Sequence``).
NOTEBOOK_STATUSES = ("invalid_notebook", "unknown_chapter", "old_notebook")
KEYS = {"cell": {"cell"}, "cell_error": {"cell_error", "error"}, "task": {"task"},
        "record": {"record", "outcomes", "library", "tampered", "notes"}, "done": {"done"}}


def notebook_read(chapter: str, nbformat) -> dict:
    return {"notebook": "read", "chapter": chapter, "nbformat": nbformat}


def notebook_refused(status: str, reason: str) -> dict:
    """A notebook the recorder could not read: ``status`` among NOTEBOOK_STATUSES, ``reason`` in words."""
    return {"notebook": "refused", "status": status, "reason": reason}


def notebook_problem(message: dict) -> tuple[str, str] | None:
    """The grader's reading of the notebook message: (status, reason) where it names no chapter we grade."""
    if message.get("notebook") != "read":
        status = message.get("status")
        return (status if status in NOTEBOOK_STATUSES else "invalid_notebook",
                str(message.get("reason", "not a readable notebook")))
    if message.get("chapter") not in CHAPTERS:
        return "unknown_chapter", "no chapter in the notebook's metadata or imports"
    return None


def message(kind: str, value, **keys) -> dict:
    """The recorder's message of ``kind`` (a key of KEYS) naming ``value``, with its other keys: exactly
    those KEYS gives that kind, or ValueError (a message the grader would refuse is never sent)."""
    built = {kind: value, **keys}
    if set(built) != KEYS.get(kind):
        raise ValueError(f"a {kind!r} message has the keys {sorted(KEYS.get(kind, ()))}, not {sorted(built)}")
    return built


def kind_of(message: dict) -> str | None:
    """The kind of a message with exactly its kind's keys (and the nonce), else None."""
    kinds = [k for k in KEYS if k in message]
    return kinds[0] if len(kinds) == 1 and set(message) - {"nonce"} == KEYS[kinds[0]] else None


def record_in_form(message: dict) -> bool:
    """Whether a record's parts have their form: a list of outcomes (``wire`` reads them), the library
    functions and the tampered parts as short lists of names, the notes as ``notes_in_form``."""
    return (isinstance(message["outcomes"], list) and _names(message["library"])
            and _names(message["tampered"]) and notes_in_form(message["notes"]))


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _names(value) -> bool:
    return isinstance(value, list) and len(value) <= 64 and all(isinstance(v, str) for v in value)


def notes_in_form(value) -> bool:
    """A record's notes (``recorder.kernel.Kernel.notes``): numbers and one short name, from which the grader
    writes its own words. {"defined": {"cells": [2 to 16 cell numbers], "counts": [their execution counts
    or None], "used": the cell whose definition was graded}, "loop": {"cell", "line", "name": an identifier
    of at most 60 characters}}, either left out."""
    if not isinstance(value, dict) or set(value) - {"defined", "loop"}:
        return False
    defined, loop = value.get("defined"), value.get("loop")
    if defined is not None:
        if not (isinstance(defined, dict) and set(defined) == {"cells", "counts", "used"}):
            return False
        cells, counts = defined["cells"], defined["counts"]
        if not (isinstance(cells, list) and isinstance(counts, list) and 2 <= len(cells) == len(counts) <= 16
                and all(map(_is_int, cells)) and all(c is None or _is_int(c) for c in counts)
                and _is_int(defined["used"])):
            return False
    if loop is not None:
        if not (isinstance(loop, dict) and set(loop) == {"cell", "line", "name"} and _is_int(loop["cell"])
                and _is_int(loop["line"]) and isinstance(loop["name"], str) and loop["name"].isidentifier()
                and len(loop["name"]) <= 60):
            return False
    return True


# --- a record's outcomes: one [kind, value] pair per test input, in order, the first that is not "ok"
# ending them (``calling.run_on``); the value is plain data (``wire.encode``), a message where it is not "ok".
OUTCOMES = {
    "ok": "the function's output",
    "error": "the exception it raised (its type and message), or why its output could not be sent",
    "missing": "the function was not defined: why, in words",
    "not_implemented": "it still raises the stub's own NotImplementedError (the value is empty)",
    "changed_input": "it changed an input in place: which",
    "broke_rule": "a forbidden call, a thread, or a check of how it works that failed: which",
}

# --- how an outcome says a rule was broken ---
RULE = "forbidden call: "  # how a forbidden call's error begins (calling.run_on recognises it by this)
NO_THREAD = "can't start new thread"  # Python's error where the grader's sandbox refuses a new thread
THREADS_REFUSED = ("threads are refused while grading: the grader calls each function in one thread and its "
                   "rules apply there; compute in the function itself")

# --- the limits: the recorder cuts what it sends down to them, the grader refuses anything beyond ---
MAX_LIST = 64  # items of one list or tuple that an output keeps
MAX_STRING = 1000  # characters of a string output or an error message
MAX_DEPTH = 4  # levels of nested lists
MAX_ITEMS = 10_000  # values in one task's outputs, counted over nested lists
MAX_NUMEL = 1 << 22  # elements of one tensor
MAX_KIND = 40  # characters of an outcome's kind ("ok", "error", ...)
MAX_TOKENS = 200_000  # "{", "[" and "," in one recorder message: far above any real one (MAX_ITEMS values)
# The longest line of any message but a record: a cell's error of MAX_STRING characters, each at most 12
# bytes in JSON (a character beyond the BMP is two escapes, "\ud83d\ude00"), with the nonce and the keys. The
# grader refuses a longer one before parsing it: a flood costs it no parsing.
MAX_SMALL_LINE = 12 * MAX_STRING + 256
