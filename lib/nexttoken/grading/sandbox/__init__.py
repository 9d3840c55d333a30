"""Run one submission's code in a bubblewrap sandbox with resource limits: what the grader imports.

Isolation comes from bubblewrap (``bwrap``, Debian/Ubuntu package ``bubblewrap``), never from the grader's
good behaviour: the sandboxed process sees the system and the Python installation read-only, and of the
``nexttoken`` package only the allow-list (``policy.SHOWN``: the lesson's library and the recorder; never
the exercises' tasks, references, held-out inputs or solutions, nor the grader); its own notebook copy in a
private ``/submission``; a private ``/tmp`` and ``HOME`` (small tmpfs that vanish with it); no network;
its own PID namespace, and it dies with the grader.

Limits (util-linux ``prlimit``) apply per process: address space, processes+threads, file size, CPU time.
Limits per sandbox come from a cgroup of its own (``Cgroups``, v2 or v1): memory of every kind, the number
of processes, and an equal CPU share; the grader ends a sandbox by killing everything in its cgroup. A
seccomp filter (``seccomp_filter``, built with libseccomp) denies the learner's processes ptrace,
process_vm_*, the kernel keyrings, mounts, new namespaces, io_uring and vsock sockets; each sandbox starts
in a fresh anonymous session keyring. When the grader runs as root, the code runs as an unprivileged user
id of its own (one per concurrent job, checked unused on the host and locked against other graders), so no
root-owned file is readable by owner rights.

The mechanism knows nothing of the course; the course's policy is one module:

    limits.py    Limits, prlimit's arguments, SandboxError    seccomp.py   the two seccomp filters
    cgroups.py   a cgroup per sandbox (v2 or v1)                users.py     sandbox user ids, killing
    launcher.py  into its cgroup and keyring; memfds           bwrap.py     bubblewrap's command line
    policy.py    the course's: the allow-list (bound, or copied for --no-sandbox), the generate-less copy,
                 the environment, the probes
"""

from .bwrap import HOME, SCRATCH, bwrap_path
from .cgroups import CGROUP_MESSAGE, Cgroups, Group, find_cgroups
from .launcher import launcher, memfd_with
from .limits import Limits, SandboxError, prlimit_args
from .policy import (INSIDE, INSTALL_MESSAGE, LIBRARY, SHOWN, STAND_IN, allow_list_problem, bwrap_command, can_run_as,
                     check_bwrap, close_view, hidden, minimal_env, package_folder, package_reachable_by, shown,
                     view_env, without_generate)
from .seccomp import seccomp_filter
from .users import FIRST_UID, allocate_uids, drop_to, kill_user, processes_of

__all__ = ["CGROUP_MESSAGE", "FIRST_UID", "HOME", "INSIDE", "INSTALL_MESSAGE", "LIBRARY", "SCRATCH", "SHOWN",
           "STAND_IN", "Cgroups", "Group", "Limits", "SandboxError", "allocate_uids", "allow_list_problem",
           "bwrap_command", "bwrap_path", "can_run_as", "check_bwrap", "drop_to", "find_cgroups", "hidden",
           "kill_user", "launcher", "memfd_with", "minimal_env", "package_folder", "package_reachable_by",
           "prlimit_args", "processes_of", "seccomp_filter", "shown", "view_env", "close_view",
           "without_generate"]
