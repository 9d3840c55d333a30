"""One run's process: the recorder started in a sandbox of its own (bubblewrap, its cgroup, seccomp, its
user id), or without bubblewrap as a plain process with limits in a scratch folder, and ended from
outside when the run is over (``recorder``). What the process says is ``follow``'s; what it is started
with (its command line, its stdin) is the contract's (``recorder.contract``)."""

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import sandbox


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
    """Start the recorder, or a sandbox's zygote (``zygotes``); returns (process, scratch folder or None).
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
