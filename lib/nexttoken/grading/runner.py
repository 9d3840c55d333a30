"""One run of the recorder (``nexttoken.recorder``) in a sandbox, followed message by message.

The recorder's stream is read line by line; only lines that start with this run's nonce count, and only
in the recorder's order and form (``Sequence``: the learner's code can find the nonce, so a message that
breaks either stops the run, charged to the cell or task then running). The run stops at the first cell
or task that runs past its timeout, at the end of the notebook's budget, or when it sends more than
MAX_REPORT bytes; ``RunResult.stopped`` says where and why.
"""

import json
import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..exercises import CHAPTERS, chapter
from . import sandbox
from .orders import work_order

MAX_REPORT = 32 * 1024 * 1024  # bytes a sandbox may send back per run; more and it is stopped
MAX_TOKENS = 200_000  # "{", "[" and "," in one recorder message: far above any real one (MAX_ITEMS values)
STARTUP_S = 120  # seconds a sandbox may take to start Python, torch and the tasks (no learner code yet)


@dataclass
class Settings:
    timeout: int = 60
    notebook_timeout: int = 600
    limits: sandbox.Limits = field(default_factory=sandbox.Limits)
    use_sandbox: bool = True
    max_bytes: int = 20 * 1024 * 1024
    cgroups: sandbox.Cgroups | None = None  # where each run gets its cgroup; None: per-process limits only
    uids: list = field(default_factory=lambda: [None])  # the sandbox user id of each job slot (root only)
    held_out: bool = False  # also the held-out inputs (exercises/held_out.py), judged without showing them
    chapter: str | None = None  # the assignment's chapter (--chapter): a notebook of another one is not graded


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
    out_of_memory: bool = False  # the kernel's OOM killer acted in this run's cgroup
    tasks: list = field(default_factory=list)  # the tasks this run was to record, in order


def _kill(proc: subprocess.Popen, group: sandbox.Group | None, uid: int | None = None) -> None:
    """End the sandbox from outside: every process in its cgroup (a learner cannot opt out of that), else
    its first process, and with it (PID namespace) everything it started; and every process of its user
    id, which is all a run without bubblewrap (--no-sandbox as root) leaves to find them by."""
    if group is not None:
        group.kill()
    if uid is not None:
        sandbox.kill_user(uid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def _start(notebook: bytes, argv, settings: Settings, slot: int, group, keep: list[int],
           without_generate: str | None = None):
    """Start the recorder; returns (process, scratch folder or None). ``keep`` are the descriptors the
    child gets (the caller closes them). ``without_generate``: the message the library's generate raises
    in this sandbox, which then has no working ``nexttoken.generate`` (``sandbox.without_generate``)."""
    launch = sandbox.launcher(group)
    threads_fd = _no_threads_fd(settings)
    if threads_fd is not None:
        keep.append(threads_fd)
        argv = _with_threads_fd(argv, threads_fd)
    if settings.use_sandbox:  # the notebook enters the sandbox through a memfd: no copy on disk
        keep += [sandbox.memfd_with(notebook, "submission.ipynb"),
                 sandbox.memfd_with(sandbox.seccomp_filter(), "seccomp.bpf")]
        notebook_fd, seccomp_fd, generate_fd = keep[-2], keep[-1], None
        if without_generate is not None:
            keep.append(sandbox.memfd_with(sandbox.without_generate(without_generate), "generate.py"))
            generate_fd = keep[-1]
        cmd = launch + sandbox.bwrap_command(argv(f"{sandbox.SCRATCH}/submission.ipynb"), settings.limits,
                                             notebook_fd, settings.uids[slot], seccomp_fd, generate_fd)
        env, cwd, scratch = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, None, None
    else:  # no bubblewrap: a plain process with limits, in a scratch folder
        scratch = tempfile.TemporaryDirectory(prefix="nexttoken-grade-")
        path = Path(scratch.name) / "submission.ipynb"
        path.write_bytes(notebook)
        for sub in ("home", "tmp"):
            (Path(scratch.name) / sub).mkdir()
        uid = settings.uids[slot]
        if uid is None:  # trusted submissions only: it runs as the grader's user
            cmd = launch + sandbox.prlimit_args(settings.limits, processes=False) + argv(str(path))
        else:  # the grader is root (a container of one submission): the code runs as a user id of its own
            for made in (Path(scratch.name), path, Path(scratch.name) / "home", Path(scratch.name) / "tmp"):
                os.chown(made, uid, uid)
            cmd = launch + sandbox.drop_to(uid) + sandbox.prlimit_args(settings.limits) + argv(str(path))
        env, cwd = sandbox.minimal_env(f"{scratch.name}/home", f"{scratch.name}/tmp"), scratch.name
    try:
        proc = subprocess.Popen(cmd, pass_fds=keep, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True, env=env, cwd=cwd)
    except BaseException:
        if scratch is not None:
            scratch.cleanup()
        raise
    return proc, scratch


def _no_threads_fd(settings: Settings) -> int | None:
    """A memfd with the recorder's no-new-threads filter (``sandbox.seccomp_filter("no_threads")``). In the
    sandbox it is required (its filter is built by the same libseccomp); without bubblewrap, where
    libseccomp may be missing, the run goes on without it (--no-sandbox is for trusted work)."""
    try:
        return sandbox.memfd_with(sandbox.seccomp_filter("no_threads"), "no-threads.bpf")
    except sandbox.SandboxError:
        if settings.use_sandbox:
            raise
        return None


def _with_threads_fd(argv, fd: int):
    return lambda notebook_path: argv(notebook_path) + ["--no-threads-fd", str(fd)]


def run_once(notebook: bytes, chapter_name: str | None, tasks: list[str], skip: set[int], settings: Settings,
             slot: int, budget_end: float, without_generate: str | None = None) -> RunResult:
    """Run the recorder once on ``tasks``; stop it at the first cell or task that runs past --timeout, at
    the end of the notebook's budget, or when it sends more than MAX_REPORT bytes. Without a chapter (the
    first run), the recorder finds it in the notebook and records every task of it that does not forbid
    ``nexttoken.generate`` (``first_tasks``); those run in a sandbox without it (``without_generate``,
    the message its generate raises there)."""
    result = RunResult()
    read_end, write_end = os.pipe()
    keep = [write_end]

    def argv(notebook_path: str) -> list[str]:
        return [sys.executable, "-m", "nexttoken.recorder", notebook_path, chapter_name or "auto",
                "--skip-cells", ",".join(map(str, sorted(skip))), "--out-fd", str(write_end)]

    group = scratch = proc = None
    try:
        group = settings.cgroups.new_group(settings.limits) if settings.cgroups is not None else None
        proc, scratch = _start(notebook, argv, settings, slot, group, keep, without_generate)
    except BaseException:
        os.close(read_end)
        if group is not None:
            group.remove()
        raise
    finally:
        for fd in keep:  # the child holds its copies; ours must go, or the pipe never reports its end
            os.close(fd)
    # Messages count only with this run's nonce, which the recorder reads from stdin before any learner
    # code runs: a thread or a leftover process of the learner's cannot forge a record by writing lines.
    # The work order follows on stdin once the recorder has said which chapter it read (_follow).
    nonce = secrets.token_hex(16)
    try:
        proc.stdin.write(f"{nonce}\n".encode())
        proc.stdin.flush()
    except OSError:
        pass
    result.tasks = list(tasks)
    try:
        _follow(proc, read_end, result, result.tasks, settings, budget_end, nonce)
    finally:
        _kill(proc, group, None if settings.use_sandbox else settings.uids[slot])
        os.close(read_end)
        if group is not None:
            result.out_of_memory = group.oom_killed()
            group.remove()
        if scratch is not None:
            scratch.cleanup()
    return result


GENERATE = "nexttoken.generate"


def generate_rule(task) -> str | None:
    """The message the library's generate raises in the sandbox of a task that forbids it, or None."""
    from ..recorder.calling import RULE

    rule = task.forbid.get(GENERATE)
    return None if rule is None else f"{RULE}{GENERATE} was called, but the task says: {rule}"


def first_tasks(chapter_name: str) -> list[str]:
    """The tasks of a chapter that the first run records: those that do not forbid nexttoken.generate.
    The others are recorded by a run of their own, in a sandbox without it."""
    module = chapter(chapter_name)
    return [name for name in module.TASKS if generate_rule(getattr(module, name)) is None]


class Lines:
    """The recorder's stream cut into lines that start with this run's nonce. Any other line is dropped as
    soon as its first bytes show it, so a junk line costs no memory however long it is."""

    def __init__(self, nonce: str):
        self.prefix = b'{"nonce": "' + nonce.encode() + b'"'
        self.buffer = bytearray()
        self.junk = False

    def feed(self, chunk: bytes) -> list[bytes]:
        """The complete lines with the nonce that ``chunk`` ends. Split once, in C: a chunk of 64 KB of
        newlines is 65,536 lines, and nothing is copied per line."""
        *complete, rest = chunk.split(b"\n")
        lines = []
        for part in complete:
            if self.buffer or self.junk:  # the end of a line an earlier chunk began
                if not self.junk:
                    self.buffer += part
                    if self.buffer.startswith(self.prefix):
                        lines.append(bytes(self.buffer))
                self.buffer.clear()
                self.junk = False
            elif part.startswith(self.prefix):
                lines.append(part)
        # The line still open: kept only while its first bytes may still be the nonce's prefix.
        if not self.junk and rest:
            self.buffer += rest
            n = min(len(self.buffer), len(self.prefix))
            if self.buffer[:n] != self.prefix[:n]:
                self.junk = True
                self.buffer.clear()
        return lines


def parse_message(line: bytes) -> dict | None:
    """A recorder message, or None for one too big to parse safely (the learner's process can forge one
    with the nonce: a few MB of "[]" would be millions of objects here)."""
    if line.count(b"{") + line.count(b"[") + line.count(b",") > MAX_TOKENS:
        return None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


FORGED = ("the grader received a message from your process that its recorder did not send in that form or at "
          "that point (a malformed or forged record: {why}), so this was not graded")
# The keys of each message the recorder sends, by its kind (the key that names it).
KEYS = {"cell": {"cell"}, "cell_error": {"cell_error", "error"}, "task": {"task"},
        "record": {"record", "outcomes", "library", "tampered"}, "done": {"done"}}


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _names(value) -> bool:
    return isinstance(value, list) and len(value) <= 64 and all(isinstance(v, str) for v in value)


class Sequence:
    """The recorder's messages in the only order it sends them: the notebook, its code cells in rising
    order (each perhaps with its error), then each task in the order asked, its "task" then its "record",
    then "done" once every task is recorded. A message the learner's code forged with the nonce (it can
    find it in the recorder's frames) that breaks this order or the message's form is refused, and the run
    stops there, charged to the cell or task running then: it costs that one cell or task, never the
    submitter's other rows nor the grader (issue 43)."""

    def __init__(self, tasks: list[str]):
        self.tasks = tasks  # the first run fills it in from the notebook message
        self.cell = 0  # the last code cell announced
        self.index = -1  # the task announced last, as an index into tasks
        self.recorded = False  # whether that task's record came

    def check(self, message: dict, current) -> str | None:
        """None for a message in order and in form, else what is wrong with it."""
        kinds = [k for k in KEYS if k in message]
        if len(kinds) != 1 or set(message) - {"nonce"} != KEYS[kinds[0]]:
            return "not a message of the recorder's"
        kind, value = kinds[0], message[kinds[0]]
        if kind == "cell":
            if not (_is_int(value) and value > self.cell and self.index < 0):
                return f"code cell {str(value)[:20]} out of order"
            self.cell = value
        elif kind == "cell_error":
            if not (current == ("cell", value) and isinstance(message["error"], str)):
                return "an error of a cell not running"
        elif kind == "task":
            following = self.index + 1
            if not ((self.index < 0 or self.recorded) and following < len(self.tasks)
                    and value == self.tasks[following]):
                return f"task {str(value)[:20]} out of order"
            self.index, self.recorded = following, False
        elif kind == "record":
            if not (self.index >= 0 and not self.recorded and value == self.tasks[self.index]):
                return f"a record of {str(value)[:20]} out of order"
            if not (isinstance(message["outcomes"], list) and _names(message["library"])
                    and _names(message["tampered"])):
                return "a record of the wrong form"
            self.recorded = True
        elif kind == "done":
            if not (value is True and self.index == len(self.tasks) - 1 and (self.recorded or not self.tasks)):
                return "done before every task was recorded"
        return None


def _send_order(stdin, order: bytes | None) -> None:
    """The work order on the recorder's stdin (its length, then its bytes), then stdin closed; without an
    order, stdin closed: the recorder then ends. In a thread of its own: an order is megabytes, more than
    a pipe holds, and the recorder reads it while the grader goes on following the run."""
    try:
        if order is not None:
            stdin.write(b"%d\n" % len(order))
            stdin.write(order)
    except (OSError, ValueError):  # the recorder is gone: its end is reported by _follow
        pass
    finally:
        try:
            stdin.close()
        except (OSError, ValueError):
            pass


def _follow(proc, read_end: int, result: RunResult, tasks: list[str], settings: Settings, budget_end: float,
            nonce: str) -> None:
    timeout = settings.timeout
    current, started, lines, total = None, time.monotonic(), Lines(nonce), 0
    sequence = Sequence(tasks)
    while True:
        limit = started + (timeout if current is not None else STARTUP_S)
        wait = min(limit, budget_end) - time.monotonic()
        ready = select.select([read_end], [], [], max(0.0, wait))[0] if wait > 0 else []
        if not ready:
            if budget_end <= limit:
                result.stopped = Stop(current, "timeout", "budget", budget=True)
            elif current is None:
                result.stopped = Stop(None, "timeout", f"the sandbox did not start within {STARTUP_S} s")
            else:
                result.stopped = Stop(current, "timeout", f"ran past {timeout} s")
            return
        chunk = os.read(read_end, 1 << 16)
        if not chunk:  # every writer is gone: the process ended without saying it was done
            try:
                code = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = None
            how = (f"was killed by signal {-code}" if code is not None and code < 0
                   else f"exited with code {code}")
            result.stopped = Stop(current, "crashed", f"the process running your code {how}")
            return
        total += len(chunk)
        if total > MAX_REPORT:
            result.stopped = Stop(current, "too_much_output", f"sent more than {MAX_REPORT} bytes of outputs")
            return
        for line in lines.feed(chunk):
            message = parse_message(line)
            if message is None or message.get("nonce") != nonce:
                continue
            if result.notebook is None:  # the recorder's first message, sent before any learner code runs
                if message.get("notebook") is None:
                    result.stopped = Stop(None, "error", "the recorder did not first say what it read")
                    return
                result.notebook = message
                name = message.get("chapter")
                order = None
                if message.get("notebook") == "read" and name in CHAPTERS \
                        and settings.chapter in (None, name):  # another chapter than the assignment's: no order
                    if not tasks:  # the first run: every task of it that may use the library's generate
                        tasks.extend(first_tasks(name) if settings.use_sandbox else chapter(name).TASKS)
                    order = work_order(name, tasks, settings.held_out)
                threading.Thread(target=_send_order, args=(proc.stdin, order), daemon=True).start()
                if order is None:
                    return
                continue
            wrong = sequence.check(message, current)
            if wrong is not None:
                if current is not None and current[0] == "task":  # a forged record of it is not judged
                    result.records.pop(current[1], None)
                result.stopped = Stop(current, "error", FORGED.format(why=wrong), forged=True)
                return
            if "cell" in message:
                current, started = ("cell", message["cell"]), time.monotonic()
            elif "cell_error" in message:
                result.cell_errors.setdefault(message["cell_error"], message["error"][:200])
            elif "task" in message:
                current, started = ("task", message["task"]), time.monotonic()
            elif "record" in message:
                result.records[message["record"]] = message
            else:  # done
                return
