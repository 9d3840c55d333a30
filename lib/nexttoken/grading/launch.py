"""The processes of a submission's runs. In a sandbox (bubblewrap, its cgroup, seccomp, its user id) the
runs of one submission share a start of Python and torch: ``Sandboxes.recorder`` forks each run from the
sandbox's zygote (``nexttoken.recorder.zygote``), which the grader starts once (``Zygote``, with ``start``),
hands each run's two pipes (its messages, its stdin: the nonce, then the work order) with the request, and
asks at the run's end to end every process of it and empty the folders it could write. A submission gets one
sandbox for the runs that may call the library's generate and one for those that may not (its generate.py
is another file, a mount, which a fork cannot change). The zygote never reads a run's stdin, so the held-out
inputs reach only the child that records them. A zygote that does not say its run is over within END_S
(stopped, killed, or its sandbox out of memory) has its sandbox ended whole from outside (``end``), and the
next run starts a fresh one. Without bubblewrap (--no-sandbox) there is no PID namespace to end a run's
processes in: each run is a plain process with limits in a scratch folder, started and ended alone
(``recorder``). What a run says is ``follow``'s; what it is started with (the command lines, the control
messages, the stdin) is the contract's (``recorder.contract``)."""

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from . import sandbox
from ..recorder import contract


@dataclass
class Started:
    """A recorder's process, the read end of the pipe it writes its messages to, and (once it is over)
    whether the kernel's OOM killer acted in its cgroup."""
    proc: subprocess.Popen
    read_end: int
    out_of_memory: bool = False


@contextlib.contextmanager
def recorder(settings, uid: int | None, data: bytes, command, without_generate: str | None = None):
    """The recorder started on the notebook's bytes ``data`` as the job slot's user ``uid``, under
    ``settings`` (``run.Settings``: its limits, its sandbox, its cgroups), by ``command(python, notebook's
    path, descriptor it writes to, no-threads filter's descriptor or None)`` (the contract's command line);
    yields ``Started``. On the way out every process of the run is killed, its cgroup and scratch folder
    removed. ``without_generate``: the message the library's generate raises in this sandbox, which then
    has no working ``nexttoken.generate``."""
    read_end, write_end = os.pipe()
    keep = [write_end]

    def argv(notebook_path: str, no_threads_fd: int | None) -> list[str]:
        return command(sys.executable, notebook_path, write_end, no_threads_fd)

    group = None
    try:
        group = settings.cgroups.new_group(settings.limits) if settings.cgroups is not None else None
        proc, scratch = start(settings, uid, data, argv, group, keep, without_generate)
    except BaseException:
        os.close(read_end)
        if group is not None:
            group.remove()
        raise
    finally:
        for fd in keep:  # the child holds its copies; ours must go, or the pipe never reports its end
            os.close(fd)
    started = Started(proc, read_end)
    try:
        yield started
    finally:
        end(proc, group, None if settings.use_sandbox else uid)
        os.close(read_end)
        if group is not None:
            started.out_of_memory = group.oom_killed()
            group.remove()
        if scratch is not None:
            scratch.cleanup()


def end(proc: subprocess.Popen, group: sandbox.Group | None, uid: int | None = None) -> None:
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


def start(settings, uid, data: bytes, argv, group, keep: list[int], without_generate: str | None):
    """Start the recorder, or a sandbox's zygote (``Zygote``); returns (process, scratch folder or None).
    ``keep`` are the descriptors the child gets (the caller closes them)."""
    launch = sandbox.launcher(group)
    threads_fd = no_threads_fd(settings)
    if threads_fd is not None:
        keep.append(threads_fd)
    if settings.use_sandbox:  # the notebook enters the sandbox through a memfd: no copy on disk
        keep += [sandbox.memfd_with(data, "submission.ipynb"), sandbox.memfd_with(sandbox.seccomp_filter(),
                                                                                  "seccomp.bpf")]
        notebook_fd, seccomp_fd, generate_fd = keep[-2], keep[-1], None
        if without_generate is not None:
            keep.append(sandbox.memfd_with(sandbox.without_generate(without_generate), "generate.py"))
            generate_fd = keep[-1]
        cmd = launch + sandbox.bwrap_command(argv(f"{sandbox.SCRATCH}/submission.ipynb", threads_fd),
                                             settings.limits, notebook_fd, uid, seccomp_fd, generate_fd)
        env, cwd, scratch = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, None, None
    else:  # no bubblewrap: a plain process with limits, in a scratch folder, importing the package view
        scratch = tempfile.TemporaryDirectory(prefix="nexttoken-grade-")
        cmd = launch + _unwrapped(settings, uid, data, Path(scratch.name), argv, threads_fd)
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


def _unwrapped(settings, uid: int | None, data: bytes, scratch: Path, argv, threads_fd: int | None) -> list[str]:
    """Without bubblewrap: the notebook and a home and tmp folder in ``scratch``, and the command that runs
    the recorder there with the limits, as ``uid`` where the grader is root."""
    path = scratch / "submission.ipynb"
    path.write_bytes(data)
    for sub in ("home", "tmp"):
        (scratch / sub).mkdir()
    if uid is None:  # trusted submissions only: it runs as the grader's user
        return sandbox.prlimit_args(settings.limits, processes=False) + argv(str(path), threads_fd)
    for made in (scratch, path, scratch / "home", scratch / "tmp"):  # a container of one submission, as root
        os.chown(made, uid, uid)
    return sandbox.drop_to(uid) + sandbox.prlimit_args(settings.limits) + argv(str(path), threads_fd)


def no_threads_fd(settings) -> int | None:
    """A memfd with the recorder's no-new-threads filter (``sandbox.seccomp_filter("no_threads")``). In the
    sandbox it is required (its filter is built by the same libseccomp); without bubblewrap, where
    libseccomp may be missing, the run goes on without it (--no-sandbox is for trusted work)."""
    try:
        return sandbox.memfd_with(sandbox.seccomp_filter("no_threads"), "no-threads.bpf")
    except sandbox.SandboxError:
        if settings.use_sandbox:
            raise
        return None


# ---------------------------------------------------------------------------------------------------
# one start a sandbox: the zygote and the runs forked from it

CLEAN = ["/tmp", "/dev/shm", sandbox.HOME, sandbox.SCRATCH]  # what a run can write, emptied after it
END_S = 5.0  # how long the zygote has to end a run's processes and say so


class Forked:
    """A forked run, as ``follow.Follower`` uses a process: its stdin, and ``wait`` for its exit code."""

    def __init__(self, zygote: "Zygote", stdin):
        self.zygote, self.stdin, self.code = zygote, stdin, None

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.code is None:
            message = self.zygote.receive(deadline)
            if message is None:
                if self.zygote.broken:  # the zygote is gone, and its sandbox with it: the run was killed
                    return -signal.SIGKILL
                raise subprocess.TimeoutExpired("the run", timeout)
            self.take(message)
        return self.code

    def take(self, message: dict) -> None:
        if isinstance(message.get("exit"), int):
            self.code = message["exit"]


class Zygote:
    """One sandbox of a submission (``start``, with the zygote's command line), whose runs it forks."""

    def __init__(self, settings, uid: int | None, data: bytes, without_generate: str | None):
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        keep = [theirs.detach()]
        self.broken, self.group, self.proc, self.scratch = False, None, None, None

        def argv(notebook_path: str, no_threads_fd: int | None) -> list[str]:
            return contract.zygote_argv(sys.executable, notebook_path, keep[0], no_threads_fd, CLEAN)

        try:
            self.group = settings.cgroups.new_group(settings.limits) if settings.cgroups is not None else None
            self.proc, self.scratch = start(settings, uid, data, argv, self.group, keep, without_generate)
        except BaseException:
            self.close()
            raise
        finally:
            for fd in keep:
                os.close(fd)

    @property
    def alive(self) -> bool:
        return not self.broken and self.proc is not None and self.proc.poll() is None

    def receive(self, deadline: float) -> dict | None:
        """The zygote's next message, or None: none before ``deadline``, or the zygote is gone (``broken``)."""
        wait = deadline - time.monotonic()
        if wait <= 0 or not select.select([self.control], [], [], wait)[0]:
            return None
        try:
            data = self.control.recv(contract.CONTROL_BYTES)
        except OSError:
            data = b""
        if not data:
            self.broken = True
            return None
        return contract.control_message(data) or {}

    @contextlib.contextmanager
    def run(self, chapter: str | None, skip: set[int]):
        """One run forked in this sandbox; yields ``launch.Started``; ends its processes on the way out."""
        read_end, write_end = os.pipe()
        stdin_read, stdin_write = os.pipe()
        try:
            socket.send_fds(self.control, [contract.run_request(chapter, skip)], [write_end, stdin_read])
        except OSError:
            self.broken = True  # the run's pipes close below: it is seen to end at once
        finally:
            os.close(write_end)
            os.close(stdin_read)
        forked = Forked(self, open(stdin_write, "wb"))
        started = Started(forked, read_end)
        try:
            yield started
        finally:
            # read before the end: a sandbox out of memory is ended whole (its count of OOM kills stays)
            started.out_of_memory = self.group is not None and self.group.oom_killed()
            self.end_run(forked)
            if started.out_of_memory:
                self.close()
            os.close(read_end)
            with contextlib.suppress(OSError):
                forked.stdin.close()

    def end_run(self, forked: Forked) -> None:
        """Ask the zygote to end every process of the run; a zygote that does not is ended with its sandbox."""
        if not self.broken:
            try:
                self.control.send(contract.END)
            except OSError:
                self.broken = True
        deadline = time.monotonic() + END_S
        while not self.broken:
            message = self.receive(deadline)
            if message is None:
                self.broken = True
            elif message.get("ended"):
                return
            else:
                forked.take(message)
        self.close()

    def close(self) -> None:
        """The sandbox ended from outside, every process of it, its cgroup removed."""
        self.broken = True
        self.control.close()
        if self.proc is not None:
            end(self.proc, self.group)
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            self.proc = None
        if self.group is not None:
            self.group.remove()
            self.group = None
        if self.scratch is not None:
            self.scratch.cleanup()
            self.scratch = None


class Sandboxes:
    """The sandboxes of one submission (one job slot's user ``uid``), made as its runs need them; ``close``
    ends them. ``recorder`` is one run."""

    def __init__(self, settings, uid: int | None, data: bytes):
        self.settings, self.uid, self.data = settings, uid, data
        self.zygotes: dict[str | None, Zygote] = {}  # without_generate's message (None: with it) -> its sandbox

    @contextlib.contextmanager
    def recorder(self, chapter: str | None, skip: set[int], without_generate: str | None = None):
        if not self.settings.use_sandbox:
            command = partial(contract.recorder_argv, chapter=chapter, skip=skip)
            with recorder(self.settings, self.uid, self.data, command, without_generate) as started:
                yield started
            return
        zygote = self.zygotes.get(without_generate)
        if zygote is None or not zygote.alive:
            if zygote is not None:
                zygote.close()
            zygote = self.zygotes[without_generate] = Zygote(self.settings, self.uid, self.data, without_generate)
        with zygote.run(chapter, skip) as started:
            yield started

    def close(self) -> None:
        for zygote in self.zygotes.values():
            zygote.close()
        self.zygotes.clear()

    def __enter__(self) -> "Sandboxes":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
