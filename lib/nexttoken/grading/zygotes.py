"""A submission's sandboxes, each started once, with every run of the submission forked inside one
(``nexttoken.recorder.zygote``): Python and torch are imported once a sandbox, not once a run.

``Sandboxes.recorder`` is what ``launch.recorder`` is for one run: it yields ``launch.Started`` (the run's
process, the read end of its messages' pipe), and on the way out every process of the run is ended. A
submission gets one sandbox for the runs that may call the library's generate and one for those that may
not (its generate.py is another file, a mount, which a fork cannot change). Each run's two pipes (its
messages, its stdin: the nonce, then the work order) are made here and handed to the zygote with the
request; the zygote never reads a run's stdin, so the held-out inputs reach only the child that records
them. At the end of a run the zygote ends every other process of the sandbox and empties its folders; a
zygote that does not say so within END_S (stopped, killed, or its sandbox out of memory) has its sandbox
ended whole, and the next run starts a fresh one. Without bubblewrap (--no-sandbox) there is no PID
namespace to end a run's processes in: every run starts a process of its own (``launch.recorder``).
"""

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import time
from functools import partial

from . import launch, sandbox
from ..recorder import contract

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
    """One sandbox of a submission (``launch.start``, with the zygote's command line), whose runs it forks."""

    def __init__(self, settings, uid: int | None, data: bytes, without_generate: str | None):
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        keep = [theirs.detach()]
        self.broken, self.group, self.proc, self.scratch = False, None, None, None

        def argv(notebook_path: str, no_threads_fd: int | None) -> list[str]:
            return contract.zygote_argv(sys.executable, notebook_path, keep[0], no_threads_fd, CLEAN)

        try:
            self.group = settings.cgroups.new_group(settings.limits) if settings.cgroups is not None else None
            self.proc, self.scratch = launch.start(settings, uid, data, argv, self.group, keep, without_generate)
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
        started = launch.Started(forked, read_end)
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
            launch.end(self.proc, self.group)
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
            with launch.recorder(self.settings, self.uid, self.data, command, without_generate) as started:
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
