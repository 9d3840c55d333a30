"""One run of the recorder (``nexttoken.recorder``) in a sandbox, followed message by message.

The recorder's stream is read line by line; only lines that start with this run's nonce count, and only
in the recorder's order and form (``Sequence``: the learner's code can find the nonce, so a message that
breaks either stops the run, charged to the cell or task then running). The run stops at the first cell
or task that runs past its timeout, at the end of the notebook's budget, or when it sends more than
MAX_REPORT bytes; ``RunResult.stopped`` says where and why.
"""

import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import sandbox
from .protocol import FORGED, Lines, Sequence, new_nonce, parse_message

MAX_REPORT = 32 * 1024 * 1024  # bytes a sandbox may send back per run; more and it is stopped
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
    else:  # no bubblewrap: a plain process with limits, in a scratch folder, importing the package view
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
        env = sandbox.view_env(sandbox.minimal_env(f"{scratch.name}/home", f"{scratch.name}/tmp"), without_generate)
        cwd = scratch.name
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


def run_once(notebook: bytes, chapter_name: str | None, plan, skip: set[int], settings: Settings, slot: int,
             budget_end: float, without_generate: str | None = None) -> RunResult:
    """Run the recorder once; stop it at the first cell or task that runs past --timeout, at the end of the
    notebook's budget, or when it sends more than MAX_REPORT bytes. Without a chapter (the first run), the
    recorder finds it in the notebook. ``plan`` (``orders.plan``) is handed the recorder's first message
    and gives the tasks to record and their work order; ``without_generate``: the message the library's
    generate raises in this sandbox, which then has no working ``nexttoken.generate``."""
    read_end, write_end = os.pipe()
    keep = [write_end]

    def argv(notebook_path: str) -> list[str]:
        return [sys.executable, "-m", "nexttoken.recorder", notebook_path, chapter_name or "auto",
                "--skip-cells", ",".join(map(str, sorted(skip))), "--out-fd", str(write_end)]

    group = None
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
    result = RunResult()
    try:
        Follower(proc, result, settings.timeout, budget_end, plan).follow(read_end)
    finally:
        _kill(proc, group, None if settings.use_sandbox else settings.uids[slot])
        os.close(read_end)
        if group is not None:
            result.out_of_memory = group.oom_killed()
            group.remove()
        if scratch is not None:
            scratch.cleanup()
    return result


def _send_order(stdin, order: bytes | None) -> None:
    """The work order on the recorder's stdin (its length, then its bytes), then stdin closed; without an
    order, stdin closed: the recorder then ends. In a thread of its own: an order is megabytes, more than
    a pipe holds, and the recorder reads it while the grader goes on following the run."""
    try:
        if order is not None:
            stdin.write(b"%d\n" % len(order))
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

    def __init__(self, proc, result: RunResult, timeout: int, budget_end: float, plan):
        self.proc, self.result, self.timeout, self.budget_end, self.plan = proc, result, timeout, budget_end, plan
        self.nonce = new_nonce()
        self.current = None  # ("cell", n) or ("task", name): what is running; None: no learner code yet
        self.started = time.monotonic()
        self.sequence: Sequence | None = None  # made once the tasks are known

    def follow(self, read_end: int) -> None:
        """Until the recorder says it is done, or the run is stopped (``result.stopped``)."""
        try:
            self.proc.stdin.write(f"{self.nonce}\n".encode())
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
                message = parse_message(line)
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
        """The notebook message: the plan's tasks and work order sent (in a thread: an order is more than
        a pipe holds), or no order, and the run ends."""
        if message.get("notebook") is None:
            self.stop("error", "the recorder did not first say what it read")
            return False
        self.result.notebook = message
        self.result.tasks, order = self.plan(message)
        self.sequence = Sequence(self.result.tasks)
        threading.Thread(target=_send_order, args=(self.proc.stdin, order), daemon=True).start()
        return order is not None
