"""One run of the recorder followed from the grader's side, message by message (``Follower``): its stream
read line by line, only the lines that start with this run's nonce counted, and only in the recorder's
order and form (``protocol.Sequence``: the learner's code can find the nonce, so a message that breaks either
stops the run, charged to the cell or task then running). The run stops at the first cell or task that runs
past its timeout, at the end of the notebook's budget, or when it sends more than MAX_REPORT bytes;
``RunResult.stopped`` says where and why. ``run.run_once`` starts the process and hands it here."""

import os
import select
import subprocess
import threading
import time
from dataclasses import dataclass, field

from ..recorder.contract import decode_line, nonce_line, order_header
from .decide import Decision
from .protocol import FORGED, Lines, Sequence, new_nonce

MAX_REPORT = 32 * 1024 * 1024  # bytes a sandbox may send back per run; more and it is stopped
STARTUP_S = 120  # seconds a sandbox may take to start Python, torch and the tasks (no learner code yet)


@dataclass
class Stop:
    """Why a run ended before the recorder said it was done."""
    where: tuple | None  # what was running: ("cell", n) or ("task", name); None: none of the learner's code yet
    status: str  # "timeout", "crashed" or "too_much_output"
    detail: str  # in words, for the reason column
    budget: bool = False  # the notebook's whole time budget ran out (not one cell's or task's --timeout)
    forged: bool = False  # a message the recorder did not send (Sequence): ``detail`` says it all


@dataclass
class RunResult:
    records: dict = field(default_factory=dict)  # task name -> record message
    cell_errors: dict = field(default_factory=dict)  # learner's code cell number -> error text
    stopped: Stop | None = None  # None: the recorder finished
    notebook: dict | None = None  # the recorder's message on reading the notebook (chapter or refusal)
    decision: Decision | None = None  # what the submission is graded as (``decide``): the first run's makes it
    out_of_memory: bool = False  # the kernel's OOM killer acted in this run's cgroup
    tasks: list = field(default_factory=list)  # the tasks this run was to record, in order


def _send_order(stdin, order: bytes | None) -> None:
    """The work order on the recorder's stdin (the contract's framing), then stdin closed; without an
    order, stdin closed: the recorder then ends. In a thread of its own: an order is megabytes, more than
    a pipe holds, and the recorder reads it while the grader goes on following the run."""
    try:
        if order is not None:
            stdin.write(order_header(order))
            stdin.write(order)
    except (OSError, ValueError):  # the recorder is gone: its end is reported by Follower.next_chunk
        pass
    finally:
        try:
            stdin.close()
        except (OSError, ValueError):
            pass


class Follower:
    """One run's stream followed message by message: what of the learner's is running and since when,
    and what the recorder sent (into ``result``). Messages count only with this run's nonce, which the
    recorder reads from stdin before any learner code runs, so a thread or a leftover process of the
    learner's cannot forge a record by writing lines; the work order follows on stdin once the recorder
    has said which chapter it read."""

    def __init__(self, proc, result: RunResult, timeout: int, budget_end: float, plan, cells: int | None = None):
        self.proc, self.result, self.timeout, self.budget_end, self.plan = proc, result, timeout, budget_end, plan
        self.cells = cells  # at least the notebook's code cells: no run announces more (``Sequence``)
        self.nonce = new_nonce()
        self.current = None  # ("cell", n) or ("task", name): what is running; None: no learner code yet
        self.started = time.monotonic()
        self.sequence: Sequence | None = None  # made once the tasks are known

    def follow(self, read_end: int) -> None:
        """Until the recorder says it is done, or the run is stopped (``result.stopped``)."""
        try:
            self.proc.stdin.write(nonce_line(self.nonce))
            self.proc.stdin.flush()
        except OSError:
            pass
        lines, total = Lines(self.nonce), 0
        while True:
            chunk = self.next_chunk(read_end)
            if chunk is None:
                return
            total += len(chunk)
            if total > MAX_REPORT:
                self.stop("too_much_output", f"sent more than {MAX_REPORT} bytes of outputs")
                return
            for line in lines.feed(chunk):
                too_long = self.sequence.fits(line, len(lines.prefix)) if self.sequence is not None else None
                if too_long is not None:
                    self.stop("error", FORGED.format(why=too_long), forged=True)
                    return
                message = decode_line(line)
                if message is not None and message.get("nonce") == self.nonce and not self.take(message):
                    return

    def stop(self, status: str, detail: str, **how) -> None:
        self.result.stopped = Stop(self.current, status, detail, **how)

    def next_chunk(self, read_end: int) -> bytes | None:
        """The stream's next bytes, or None once the run is stopped: past a timeout, or ended."""
        limit = self.started + (self.timeout if self.current is not None else STARTUP_S)
        wait = min(limit, self.budget_end) - time.monotonic()
        if wait <= 0 or not select.select([read_end], [], [], wait)[0]:
            if self.budget_end <= limit:
                self.stop("timeout", "budget", budget=True)
            elif self.current is None:
                self.stop("timeout", f"the sandbox did not start within {STARTUP_S} s")
            else:
                self.stop("timeout", f"ran past {self.timeout} s")
            return None
        chunk = os.read(read_end, 1 << 16)
        if not chunk:  # every writer is gone: the process ended without saying it was done
            try:
                code = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = None
            how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
            self.stop("crashed", f"the process running your code {how}")
            return None
        return chunk

    def take(self, message: dict) -> bool:
        """Act on one message; False where the run ends with it."""
        if self.sequence is None:  # the recorder's first message, sent before any learner code runs
            return self.begin(message)
        wrong = self.sequence.check(message, self.current)
        if wrong is not None:
            if self.current is not None and self.current[0] == "task":  # a forged record of it is not judged
                self.result.records.pop(self.current[1], None)
            self.stop("error", FORGED.format(why=wrong), forged=True)
            return False
        if "cell" in message:
            self.current, self.started = ("cell", message["cell"]), time.monotonic()
        elif "cell_error" in message:
            self.result.cell_errors.setdefault(message["cell_error"], message["error"][:200])
        elif "task" in message:
            self.current, self.started = ("task", message["task"]), time.monotonic()
        elif "record" in message:
            self.result.records[message["record"]] = message
        return "done" not in message

    def begin(self, message: dict) -> bool:
        """The notebook message: the plan's decision kept (made by the first run's), its tasks and work order
        sent (in a thread: an order is more than a pipe holds), or no order, and the run ends."""
        if message.get("notebook") is None:
            self.stop("error", "the recorder did not first say what it read")
            return False
        self.result.notebook = message
        self.result.decision, self.result.tasks, order = self.plan(message)
        self.sequence = Sequence(self.result.tasks, self.cells)
        threading.Thread(target=_send_order, args=(self.proc.stdin, order), daemon=True).start()
        return order is not None
