"""The seccomp filters, built with libseccomp: one for every process of a sandbox (bwrap's ``--seccomp``),
and one refusing new threads, which the sandboxed program loads itself."""

import os
import subprocess
import sys

from .limits import SandboxError

# Denied (EPERM) to every process of the learner: reading or steering another process (ptrace,
# process_vm_*: the sandbox's own init included), the kernel keyrings, mounts (a tmpfs in a nested user
# namespace is memory outside every limit), namespaces, io_uring (its operations bypass this filter: an
# openat or a socket done by the ring is never a system call seccomp sees), and kernel interfaces a
# submission never needs.
DENIED_SYSCALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "keyctl", "add_key", "request_key",
    "mount", "umount2", "pivot_root", "chroot", "setns", "unshare", "mount_setattr", "move_mount",
    "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "bpf", "perf_event_open", "userfaultfd",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "swapon", "swapoff",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
)
# Socket families denied to socket() and socketpair(): AF_VSOCK (40), which no network namespace holds
# (--unshare-net leaves it reaching the host or hypervisor). Compared on the low 32 bits (the kernel reads
# the family as an int), so a raw system call with high bits set is denied too.
DENIED_SOCKET_FAMILIES = (40,)
# clone() with any CLONE_NEW* flag (NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET) is denied;
# clone3 (whose flags seccomp cannot read) answers ENOSYS, so the C library falls back to clone.
CLONE_NAMESPACES = 0x7E020000
_EXPORT = r"""
import errno, sys, seccomp
denied, namespaces = sys.argv[1].split(","), int(sys.argv[2])
families = [int(n) for n in sys.argv[3].split(",") if n]
f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
for name in denied:
    f.add_rule(seccomp.ERRNO(errno.EPERM), name)
for family in families:
    for call in ("socket", "socketpair"):
        f.add_rule(seccomp.ERRNO(errno.EPERM), call, seccomp.Arg(0, seccomp.MASKED_EQ, 0xFFFFFFFF, family))
for bit in (1 << b for b in range(32) if namespaces >> b & 1):
    f.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, bit, bit))
f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
f.export_bpf(sys.stdout.buffer)
"""
# The second filter, which the recorder loads itself once it has read its work order and before any of the
# learner's code runs: no new thread (clone with CLONE_THREAD answers EAGAIN, so Python raises "can't start
# new thread"). The rules and the library-call watch apply to the thread that calls a task's function; a
# thread of the learner's would run outside them (a softmax in a thread passed a task that forbids it).
CLONE_THREAD = 0x00010000
_EXPORT_NO_THREADS = r"""
import errno, sys, seccomp
f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
f.add_rule(seccomp.ERRNO(errno.EAGAIN), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, int(sys.argv[1]), int(sys.argv[1])))
f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
f.export_bpf(sys.stdout.buffer)
"""
SECCOMP_MESSAGE = ("the grader builds its seccomp filter with libseccomp's Python binding, which is not "
                   "installed here: run 'sudo bash scripts/setup_sandbox.sh' (Debian's python3-seccomp)")
_filters: dict[str, bytes] = {}


def seccomp_filter(kind: str = "sandbox") -> bytes:
    """A filter as BPF: "sandbox", for bwrap's --seccomp; "no_threads", which the recorder loads before the
    learner's code runs. Built by libseccomp's binding: imported here if this Python has it (pyseccomp
    offers the same API), else by the system's Python 3 with Debian's python3-seccomp (a C extension for
    that interpreter, not for this virtual environment)."""
    if kind not in _filters:
        if kind == "sandbox":
            script = _EXPORT
            args = [",".join(DENIED_SYSCALLS), str(CLONE_NAMESPACES), ",".join(map(str, DENIED_SOCKET_FAMILIES))]
        else:
            script, args = _EXPORT_NO_THREADS, [str(CLONE_THREAD)]
        for python in (sys.executable, "/usr/bin/python3"):
            if not os.path.exists(python):
                continue
            done = subprocess.run([python, "-I", "-c", script, *args], capture_output=True, timeout=60)
            if done.returncode == 0 and done.stdout:
                _filters[kind] = done.stdout
                break
        else:
            raise SandboxError(SECCOMP_MESSAGE)
    return _filters[kind]
