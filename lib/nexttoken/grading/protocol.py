"""The grader's side of the recorder's protocol, with no process in it: the lines of one run (those that
start with its nonce, ``Lines``) and the order of its messages (``Sequence``). What a line and a message
are (the line's encoding, each kind's keys, a record's form) is the contract's (``recorder.contract``).

The learner's code runs in the same process as the recorder and can find the nonce, so what this module
accepts is only what the recorder itself sends, in the order it sends it; anything else is named, and the
run stops there (``follow.Follower``).
"""

import secrets

from ..checks import is_int
from ..recorder.contract import MAX_SMALL_LINE, MAX_STRING, kind_of, line_prefix, record_in_form, starts_with


def new_nonce() -> str:
    """A run's nonce, sent to the recorder on stdin before any learner code runs."""
    return secrets.token_hex(16)


class Lines:
    """The recorder's stream cut into lines that start with this run's nonce. Any other line is dropped as
    soon as its first bytes show it, so a junk line costs no memory however long it is, and no Python step
    either: the lines with the nonce are found by searching each chunk for a line break followed by the
    nonce's prefix (``bytes.find``, in C), so a chunk of 65,536 newlines costs one search, not 65,536 steps."""

    def __init__(self, nonce: str):
        self.prefix = line_prefix(nonce)  # the contract's line encoding: every line of the run starts so
        self.marker = b"\n" + self.prefix  # where a line with the nonce starts, inside a chunk
        self.buffer = bytearray()  # the open line's first bytes, while they may still be the prefix's
        self.junk = False  # the open line is not one of ours: skip to its end

    def feed(self, chunk: bytes) -> list[bytes]:
        """The complete lines with the nonce that ``chunk`` ends."""
        lines: list[bytes] = []
        start = self._finish_open_line(chunk, lines)
        while start is not None:
            start = self._next_line(chunk, start, lines)
        return lines

    def _finish_open_line(self, chunk: bytes, lines: list) -> int | None:
        """The line left open by earlier chunks, carried on into ``chunk``: the index where the next line
        starts, or None if that line goes on past the chunk."""
        if not self.buffer and not self.junk:  # the chunk starts a line
            return 0
        end = chunk.find(b"\n")
        if not self.junk:
            self.buffer += chunk if end < 0 else chunk[:end]
            n = min(len(self.buffer), len(self.prefix))
            if self.buffer[:n] != self.prefix[:n]:
                self.junk, self.buffer = True, bytearray()
        if end < 0:
            return None
        if self.buffer.startswith(self.prefix):
            lines.append(bytes(self.buffer))
        self.buffer, self.junk = bytearray(), False
        return end + 1

    def _next_line(self, chunk: bytes, start: int, lines: list) -> int | None:
        """From a line's start: the next line with the prefix taken whole, or the chunk's last line opened
        (kept while it may be ours); the index to go on from, or None at the chunk's end."""
        if not chunk.startswith(self.prefix, start):
            found = chunk.find(self.marker, start)
            if found < 0:  # no line of ours starts in the rest: only its last line may begin to be one
                last = chunk.rfind(b"\n", start)
                self._open(chunk[last + 1:] if last >= 0 else chunk[start:])
                return None
            start = found + 1
        end = chunk.find(b"\n", start)
        if end < 0:
            self._open(chunk[start:])
            return None
        lines.append(chunk[start:end])
        return end + 1

    def _open(self, rest: bytes) -> None:
        """The chunk's last, unfinished line: kept while its bytes may still be the nonce's prefix."""
        n = min(len(rest), len(self.prefix))
        if rest[:n] == self.prefix[:n]:
            self.buffer = bytearray(rest)
        else:
            self.junk = True


FORGED = ("the grader received a message from your process that its recorder did not send in that form or at "
          "that point (a malformed or forged record: {why}), so this was not graded")


def cells_at_most(data: bytes) -> int:
    """At least the number of code cells of a notebook's bytes, read without parsing them: its cells of every
    kind ("cell_type" keys). With it the cells a run announces are bounded, and so are its messages: one
    per cell and one error at most, two per task, then "done"."""
    return data.count(b'"cell_type"')


class Sequence:
    """The recorder's messages in the only order it sends them: the notebook, its code cells in rising
    order (each perhaps with its error), then each task in the order asked, its "task" then its "record",
    then "done" once every task is recorded. A message the learner's code forged with the nonce (it can
    find it in the recorder's frames) that breaks this order or the message's form is refused, and the run
    stops there, charged to the cell or task running then: it costs that one cell or task, never the
    submitter's other rows nor the grader."""

    def __init__(self, tasks: list[str], cells: int | None = None):
        self.tasks = tasks  # the first run fills it in from the notebook message
        self.cells = cells  # at least the notebook's code cells (``cells_at_most``); None: not bounded
        self.cell = 0  # the last code cell announced
        self.errored = False  # whether that cell's error came (the recorder sends one at most)
        self.index = -1  # the task announced last, as an index into tasks
        self.recorded = False  # whether that task's record came

    def fits(self, line: bytes, prefix: int) -> str | None:
        """Before parsing: None for a line no longer than a message the recorder could send now (a record,
        while a task awaits its own; any other message, MAX_SMALL_LINE), else what is wrong with it.
        ``prefix``: the length of the line's start with the nonce (the kind's key follows it)."""
        if len(line) <= MAX_SMALL_LINE:
            return None
        if starts_with(line, prefix, "record") and self.index >= 0 and not self.recorded:
            return None
        return "a message longer than the recorder sends at that point"

    def check(self, message: dict, current) -> str | None:
        """None for a message in order and in form, else what is wrong with it."""
        kind = kind_of(message)
        if kind is None:
            return "not a message of the recorder's"
        value = message[kind]
        if kind == "cell":
            if not (is_int(value) and value > self.cell and self.index < 0):
                return f"code cell {str(value)[:20]} out of order"
            if self.cells is not None and value > self.cells:
                return f"code cell {value} of a notebook of fewer cells"
            self.cell, self.errored = value, False
        elif kind == "cell_error":
            if not (current == ("cell", value) and isinstance(message["error"], str)):
                return "an error of a cell not running"
            if self.errored or len(message["error"]) > MAX_STRING:
                return "a second error of one cell, or a longer one than the recorder sends"
            self.errored = True
        elif kind == "task":
            following = self.index + 1
            if not ((self.index < 0 or self.recorded) and following < len(self.tasks)
                    and value == self.tasks[following]):
                return f"task {str(value)[:20]} out of order"
            self.index, self.recorded = following, False
        elif kind == "record":
            if not (self.index >= 0 and not self.recorded and value == self.tasks[self.index]):
                return f"a record of {str(value)[:20]} out of order"
            if not record_in_form(message):
                return "a record of the wrong form"
            self.recorded = True
        elif kind == "done":
            if not (value is True and self.index == len(self.tasks) - 1 and (self.recorded or not self.tasks)):
                return "done before every task was recorded"
        return None
