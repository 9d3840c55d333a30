"""Starting a sandbox: the launcher that puts it in its cgroup and a fresh session keyring, and the memfds
that carry data (a notebook, a filter, a file to show) to bwrap without touching the disk."""

import os
import sys

from .cgroups import Group
from .limits import SandboxError

KEYCTL_SYSCALL = {"x86_64": 250, "aarch64": 219}
_LAUNCH = r"""
import ctypes, os, sys
end = sys.argv.index("--")
for procs in sys.argv[2:end]:  # join the sandbox's cgroup(s) before anything of the sandbox starts
    with open(procs, "w") as f:
        f.write(str(os.getpid()))
# KEYCTL_JOIN_SESSION_KEYRING with no name: a fresh anonymous session keyring, none of the caller's keys
if ctypes.CDLL(None, use_errno=True).syscall(int(sys.argv[1]), 1, None) < 0:
    sys.exit(f"could not join a fresh session keyring: {os.strerror(ctypes.get_errno())}")
os.execv(sys.argv[end + 1], sys.argv[end + 1:])
"""


def launcher(group: Group | None, python: str = sys.executable) -> list[str]:
    """The argv prefix that starts a sandbox in its cgroup and in a fresh session keyring."""
    number = KEYCTL_SYSCALL.get(os.uname().machine)
    if number is None:
        raise SandboxError(f"no keyctl system call number known for {os.uname().machine}")
    files = group.procs_files() if group is not None else []
    return [python, "-I", "-S", "-c", _LAUNCH, str(number), *files, "--"]


def memfd_with(data: bytes, name: str) -> int:
    """A memfd holding ``data``, at offset 0: how a notebook or the filter reaches bwrap, never on disk."""
    fd = os.memfd_create(name)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
