"""bubblewrap's command line: a fresh sandbox with the system and given folders read-only, private tmpfs
for the program's files, no network, its own PID namespace (it cannot see the grader or other sandboxes,
and when its first process exits the kernel kills everything else in it), dying with its parent, and an
unprivileged user (the given id when the caller is root; else a user namespace)."""

import os
import shutil
from pathlib import Path

from .limits import Limits, prlimit_args
from .users import drop_to

# Inside the sandbox: where the submission lives, and its HOME.
# Inside the sandbox: where the submission lives, and its HOME.
SCRATCH = "/submission"
HOME = "/home/learner"


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    # Only what programs need from /etc to start (no shadow, no instructor's configuration).
    for name in ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group",
                 "nsswitch.conf", "alternatives"):
        if os.path.exists(f"/etc/{name}"):
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    return args


def _mkdirs(path: str, made: set) -> list[str]:
    """bwrap creates a bind's missing parents as 0700 root folders: make them 0755 so the
    unprivileged user can reach what is bound below them."""
    args = []
    parts = Path(path).parts
    for i in range(2, len(parts)):
        parent = str(Path(*parts[:i]))
        if parent not in made and not parent.startswith(("/usr", "/etc")):
            made.add(parent)
            args += ["--perms", "0755", "--dir", parent]
    return args


def command(argv: list[str], limits: Limits, notebook_fd: int, uid: int | None, seccomp_fd: int | None,
            roots: list[str], within: list[str], env: dict[str, str]) -> list[str]:
    """The command that runs ``argv`` in a fresh sandbox. ``notebook_fd`` is read into
    /submission/submission.ipynb (a copy on the sandbox's tmpfs; nothing of it lands on the host's disk).
    ``uid`` is the sandbox's user id when the caller is root; ``seccomp_fd`` holds the filter that bwrap
    loads for everything the command runs. ``roots`` are shown read-only, then ``within`` (bwrap's
    arguments) applies inside them; ``env`` is the whole environment."""
    size = str(limits.tmp_mb * 1024 * 1024)
    cmd = [bwrap_path() or "bwrap"]
    cmd += _system_binds()
    # /dev read-only (a writable /dev would be an unsized tmpfs) with a sized /dev/shm for multiprocessing.
    cmd += ["--dev", "/dev", "--perms", "01777", "--size", size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
            "--proc", "/proc",
            "--perms", "01777", "--size", size, "--tmpfs", "/tmp",
            "--perms", "0755", "--dir", "/home",
            "--perms", "0777", "--size", size, "--tmpfs", HOME,
            "--perms", "0777", "--size", size, "--tmpfs", SCRATCH,
            "--perms", "0644", "--file", str(notebook_fd), f"{SCRATCH}/submission.ipynb"]
    # After the tmpfs mounts, which would otherwise hide a virtual environment or a checkout that lives
    # under /tmp (bwrap applies its mounts in order): the roots, read-only.
    made: set = {"/tmp", "/home"}
    for root in roots:
        cmd += _mkdirs(root, made) + ["--ro-bind", root, root]
    cmd += within
    cmd += ["--chdir", SCRATCH, "--hostname", "sandbox",
            "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--clearenv"]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    if os.geteuid() == 0:
        if uid is None:
            raise ValueError("uid: a sandbox user id is needed when the grader is root (allocate_uids)")
        # bwrap as root (no user namespace), then drop to an unprivileged uid with no capabilities.
        cmd += ["--cap-add", "CAP_SETUID,CAP_SETGID", "--", *drop_to(uid)]
        cmd += prlimit_args(limits)
    else:
        cmd += ["--unshare-user", "--disable-userns", "--"] + prlimit_args(limits)
    return cmd + argv
