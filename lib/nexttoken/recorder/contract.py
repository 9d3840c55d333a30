"""The contract between the sandbox and the grader, in one place that both sides import: the chapters, the
messages the recorder sends and their keys, how a broken rule reads, and the limits of what travels.

It lives in ``nexttoken.recorder`` because the sandbox shows that package (and nothing of the grader:
``nexttoken.grading.sandbox.policy``); the grader imports it from here. It imports nothing, so either side
can read it without pulling in the other.
"""

# The course's chapters, as nexttoken.exercises names them (the exercises, the stand-in for that package in
# the sandbox, the recorder's chapter detection and the grader all read them from here).
CHAPTERS = ("ch01", "ch02", "ch03", "ch04", "ch05", "ch06", "ch07")

# --- the messages, out of the sandbox ---
# One JSON object per line, each starting with the run's nonce (recorder/main.py says when each is sent).
# First the notebook's: {"notebook": "read", "chapter", "nbformat"} or {"notebook": "refused", "status",
# "reason"}, a status among NOTEBOOK_STATUSES. Then the others, each named by the one key of KEYS it has,
# with exactly the keys KEYS gives it (besides the nonce): the grader refuses any other (protocol.Sequence).
NOTEBOOK_STATUSES = ("invalid_notebook", "unknown_chapter", "old_notebook")
KEYS = {"cell": {"cell"}, "cell_error": {"cell_error", "error"}, "task": {"task"},
        "record": {"record", "outcomes", "library", "tampered", "notes"}, "done": {"done"}}


def message(kind: str, value, **keys) -> dict:
    """The recorder's message of ``kind`` (a key of KEYS) naming ``value``, with its other keys: exactly
    those KEYS gives that kind, or ValueError (a message the grader would refuse is never sent)."""
    built = {kind: value, **keys}
    if set(built) != KEYS.get(kind):
        raise ValueError(f"a {kind!r} message has the keys {sorted(KEYS.get(kind, ()))}, not {sorted(built)}")
    return built


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
