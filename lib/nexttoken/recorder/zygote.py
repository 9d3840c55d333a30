"""One sandbox, one start of Python and torch, every run of a submission forked from it.

    python -m nexttoken.recorder.zygote NOTEBOOK --control-fd 3 [--no-threads-fd 4] --clean /tmp ...

Starting Python and importing torch is most of a run's cost, and a submission takes several runs (a cell
that hangs is skipped in the next; the tasks that forbid ``nexttoken.generate`` and the held-out inputs
get runs of their own). The zygote imports them once, in the submission's sandbox, runs no learner code
itself, and forks one child per run when the grader asks on the control socket (``contract.run_request``,
with the run's two pipe ends). The child is the recorder of that run (``main.main``), as a fresh start
would be: it drops the control socket first, so no learner code can ask for a run or answer for the zygote.

The zygote is not dumpable, so a run's process (the same user) cannot read or write its memory or its
descriptors through /proc (and ptrace is refused to the whole sandbox by its seccomp filter). Between runs
nothing of the last one is left: when the grader says the run is over (``contract.END``) the zygote kills
every other process of the sandbox's PID namespace (``kill(-1)``: bwrap's init, its parent, is spared and
reaps the orphans), empties the folders a run can write (``--clean``: /tmp, the home, /dev/shm, the
scratch folder) and puts the notebook back as it was. The held-out inputs reach only the child that records
them, through its own stdin: the zygote never reads a run's stdin. A run can still signal the zygote (the
same user): stopped or killed, it does not answer, and the grader ends that sandbox and starts a fresh one
for the next run; the learner's own submission pays the time, and nothing else is reached.
"""

import ctypes
import os
import re
import select
import signal
import socket
import sys
import time

from . import contract

PR_SET_DUMPABLE = 4


def set_dumpable(flag: int) -> None:
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, flag, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


def in_sandbox() -> bool:
    """Whether this process runs under bwrap's init, in a PID namespace of its own (--unshare-pid): only
    there does ``kill(-1)`` reach the sandbox's processes and nothing else of the user's."""
    try:
        with open("/proc/1/cmdline", "rb") as f:
            init = f.read().split(b"\0")[0]
    except OSError:
        return False
    return os.getppid() == 1 and os.path.basename(init) == b"bwrap"


def mounts_within(folders: list[str], mountinfo: str) -> tuple[set[str], set[str]]:
    """(the mount points inside ``folders``, the folders on the way to them), from ``mountinfo`` (the text of
    /proc/self/mountinfo): what bwrap put there before any run (a virtual environment under /tmp, shown
    read-only), which emptying must leave. No run can add a mount (the sandbox denies it)."""
    points, ways = set(), set()
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4])  # "\040" is a space
        for folder in folders:
            if point != folder and not os.path.relpath(point, folder).startswith(".."):
                points.add(point)
                way = os.path.dirname(point)
                while way != folder:
                    ways.add(way)
                    way = os.path.dirname(way)
    return points, ways - points


def empty(folder: str, kept: tuple[set[str], set[str]] = (set(), set())) -> None:
    """Everything in ``folder`` removed, the folder kept (a run may have made parts of it read-only), but
    ``kept`` (``mounts_within``): a mount point is left whole, a folder on the way to one is emptied."""
    points, ways = kept
    for entry in os.scandir(folder):
        if entry.path in points:
            continue
        if entry.path in ways:
            empty(entry.path, kept)
        elif entry.is_dir(follow_symlinks=False):
            os.chmod(entry.path, 0o700)
            empty(entry.path)
            os.rmdir(entry.path)
        else:
            os.unlink(entry.path)


def wait_alone(seconds: float = 2.0) -> list[int]:
    """Until no process but bwrap's init and this one is left in the namespace (SIGKILL acts at once, but a
    process another one parented is gone only once init has reaped it); those still there after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]
        if not others or time.monotonic() > deadline:
            return others
        time.sleep(0.005)


def reset(clean: list[str], kept: tuple, notebook: str, data: bytes) -> None:
    """The sandbox as a fresh one is: no other process, the writable folders empty, the notebook back."""
    try:
        os.kill(-1, signal.SIGKILL)  # every process of the namespace but this one and bwrap's init
    except ProcessLookupError:
        pass
    while True:  # our own children (the run's first process); bwrap's init reaps the orphans
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    others = wait_alone()
    if others:  # not gone (a process stuck in the kernel): the grader ends this sandbox instead
        raise RuntimeError(f"processes still there after the run: {others}")
    for folder in clean:
        empty(folder, kept)
    with open(notebook, "wb") as f:
        f.write(data)
    os.chmod(notebook, 0o644)


def child(control: socket.socket, out_fd: int, stdin_fd: int, request: dict, args) -> None:
    """The run's process: the recorder, as ``python -m nexttoken.recorder`` would start it. Never returns."""
    try:
        control.close()  # first: no learner code may ask for a run or answer for the zygote
        os.dup2(stdin_fd, 0)
        os.close(stdin_fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as a started Python has it
        set_dumpable(1)  # as a started process is (the zygote itself stays hidden)
        from .main import main

        chapter = request.get("chapter")
        skip = {int(n) for n in request.get("skip", [])}
        argv = contract.recorder_argv("python", args.notebook, out_fd, args.no_threads_fd,
                                      chapter=None if chapter == contract.AUTO else str(chapter), skip=skip)
        main(argv[3:])  # the arguments after "python -m nexttoken.recorder"
    finally:
        os._exit(1)


def follow_run(control: socket.socket, pid: int) -> bool:
    """Until the grader says the run is over: its exit code sent when the child ends. False where the
    grader is gone (the control socket closed)."""
    pidfd = os.pidfd_open(pid)
    try:
        while True:
            ready = select.select([control, pidfd] if pidfd is not None else [control], [], [])[0]
            if pidfd is not None and pidfd in ready:
                _, status = os.waitpid(pid, 0)
                control.send(contract.run_exit(os.waitstatus_to_exitcode(status)))
                os.close(pidfd)
                pidfd = None
            if control in ready:
                data = control.recv(contract.CONTROL_BYTES)
                if not data:
                    return False
                if (contract.control_message(data) or {}).get("end"):
                    return True
    finally:
        if pidfd is not None:
            os.close(pidfd)


def serve(args) -> None:
    control = socket.socket(fileno=args.control_fd)
    with open(args.notebook, "rb") as f:
        data = f.read()
    with open("/proc/self/mountinfo") as f:
        kept = mounts_within(args.clean, f.read())
    while True:
        packet, fds, _, _ = socket.recv_fds(control, contract.CONTROL_BYTES, 2)
        request = (contract.control_message(packet) or {}).get("run") if packet else None
        if not isinstance(request, dict) or len(fds) != 2:
            return  # the grader is gone, or spoke out of turn
        out_fd, stdin_fd = fds
        pid = os.fork()
        if pid == 0:
            child(control, out_fd, stdin_fd, request, args)
        os.close(out_fd)
        os.close(stdin_fd)
        going_on = follow_run(control, pid)
        reset(args.clean, kept, args.notebook, data)
        if not going_on:
            return
        control.send(contract.ENDED)


def main(argv=None) -> None:
    args = contract.parse_zygote_argv(argv)
    if not in_sandbox():
        sys.exit("the zygote runs only in a sandbox's own PID namespace, under bwrap's init (elsewhere its "
                 "kill(-1) would reach the user's other processes)")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a run's SIGINT is no KeyboardInterrupt here
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    import torch

    torch.set_num_threads(1)
    from . import main as _recorder  # noqa: F401  (every module a run imports, imported once here)

    set_dumpable(0)
    serve(args)
    os._exit(0)


if __name__ == "__main__":
    main()
