"""Run one submission's code in a bubblewrap sandbox with resource limits.

Isolation comes from bubblewrap (``bwrap``, Debian/Ubuntu package ``bubblewrap``), never from the grader's
good behaviour: the sandboxed process sees the system and the Python installation read-only, and of the
``nexttoken`` package only the allow-list (``SHOWN``: the lesson's library and the recorder; never the
exercises' tasks, references, held-out inputs or solutions, nor the grader); its own notebook copy in a
private ``/submission``; a private ``/tmp`` and ``HOME`` (small tmpfs that vanish with it); no network;
its own PID namespace (it cannot see the grader, other submissions or their processes), and it dies with
the grader. When the sandbox's first process exits, the
kernel kills everything else in its PID namespace, so nothing it started outlives it.

Limits (util-linux ``prlimit``) apply per process: address space, processes+threads, file size, CPU time.
Limits per sandbox come from a cgroup of its own (``Cgroups``, v2 or v1): memory of every kind (pages of
tmpfs files and memfds, kernel memory such as inodes, which belong to no process), the number of
processes, and an equal CPU share; the grader ends a sandbox by killing everything in its cgroup.
A seccomp filter (``seccomp_filter``, built with libseccomp) denies the learner's processes ptrace,
process_vm_*, the kernel keyrings, mounts, new namespaces, io_uring and vsock sockets; each sandbox starts
in a fresh anonymous session keyring. When the grader runs as root, the code runs as an unprivileged user
id of its own (one per concurrent job, checked unused on the host and locked against other graders), so no
root-owned file is readable by owner rights.
"""

import fcntl
import grp
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

INSTALL_MESSAGE = (
    "the grader runs every submission inside bubblewrap, which is not installed here.\n"
    "Install it (Debian/Ubuntu: 'sudo apt-get install bubblewrap', or 'sudo bash scripts/setup_sandbox.sh'),\n"
    "or pass --no-sandbox to grade TRUSTED submissions without isolation (their code can then read and\n"
    "change anything your user can, other submissions and the grades included)."
)

# Inside the sandbox: where the submission lives, and its HOME.
SCRATCH = "/submission"
HOME = "/home/learner"
# Unprivileged user ids for sandboxes when the grader is root: one per concurrent job, so a fork bomb in
# one sandbox cannot use up the process limit of another (RLIMIT_NPROC counts per user id). Each is checked
# free on the host (no account, no process) and held with a lock file, so two graders never share one.
FIRST_UID = 61000
UID_RANGE = 1000
UID_LOCKS = Path("/run/nexttoken-grade")
_held_uid_locks: list[int] = []  # open lock files, held until the grader exits


class SandboxError(Exception):
    """The sandbox cannot be set up here; the message says why and what to do."""


@dataclass(frozen=True)
class Limits:
    """Per-submission limits. Defaults suit the course's small tensors; flags of the grader change them."""
    memory_mb: int = 2048  # address space per process (importing torch alone reserves about 600 MB)
    total_memory_mb: int = 2048  # memory of the whole sandbox, of every kind (its cgroup)
    processes: int = 64  # processes and threads of the sandbox (its cgroup; RLIMIT_NPROC too)
    file_size_mb: int = 16  # largest file it may write
    cpu_s: int = 600  # CPU seconds per process (the grader sets it to its --notebook-timeout)
    tmp_mb: int = 64  # size of each private tmpfs (/tmp, HOME, /submission)

    def __post_init__(self):
        for name in ("memory_mb", "total_memory_mb", "processes", "file_size_mb", "cpu_s", "tmp_mb"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")


# ---------------------------------------------------------------------------------------------------------
# The seccomp filter: built once per batch with libseccomp, handed to bwrap (--seccomp FD) for every sandbox.

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


# ---------------------------------------------------------------------------------------------------------
# Cgroups: one per sandbox, so memory of every kind, processes and CPU are limited per submission.

CGROUP_MESSAGE = (
    "no cgroup can limit each sandbox's memory and processes here: {why}.\n"
    "Run the grader as root, or in a cgroup delegated to you (cgroup v2: 'systemd-run --user --scope "
    "-p Delegate=yes python -m nexttoken.grade ...'; v1: a memory and a pids cgroup you own), or pass\n"
    "--allow-no-cgroup to grade with per-process limits only: memory that belongs to no process (tmpfs files,\n"
    "memfds, kernel memory) is then unbounded, and a hostile submission can make the kernel kill the grader."
)
_names = itertools.count()


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under "" its v2 path."""
    found = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            found[name] = path
    return found


def _v2_mount() -> Path | None:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def _write(path: Path, value) -> None:
    path.write_text(f"{value}\n")


@dataclass
class Group:
    """One sandbox's cgroup (a folder per v1 controller, or one v2 folder)."""
    version: int
    dirs: list[Path]

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def pids(self) -> set[int]:
        found = set()
        for d in self.dirs:
            try:
                found |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return found

    def kill(self) -> None:
        """Kill every process in the group, from outside (v2: cgroup.kill; else until none is left)."""
        if self.version == 2 and (self.dirs[0] / "cgroup.kill").exists():
            try:
                _write(self.dirs[0] / "cgroup.kill", 1)
            except OSError:
                pass
        kill_all(self.pids)  # a fork bomb is bounded by pids.max: a few rounds at most

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer ended a process of this group (it ran out of its memory)."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        for d in self.dirs:
            try:
                for line in (d / name).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and int(value) > 0:
                        return True
            except (OSError, ValueError):
                pass
        return False

    def remove(self, wait_s: float = 5.0) -> bool:
        """Remove the group's folders; False if one is still busy after ``wait_s`` (``Cgroups.sweep``
        removes it later)."""
        removed = True
        for d in self.dirs:
            deadline = time.monotonic() + wait_s
            while True:  # the kernel lets go of a group a moment after its last process has exited
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        removed = False
                        break
                    time.sleep(0.05)
        return removed


@dataclass
class Cgroups:
    """Where sandbox cgroups are made: v2 (one folder) or v1 (memory, pids and, if there, cpu)."""
    version: int
    bases: dict[str, Path]

    def describe(self) -> str:
        where = ", ".join(str(p) for p in self.bases.values())
        return f"cgroup v{self.version} ({where})"

    def new_group(self, limits: Limits) -> Group:
        name = f"nexttoken-{os.getpid()}-{next(_names)}"
        memory = limits.total_memory_mb * 1024 * 1024
        dirs = [base / name for base in self.bases.values()]
        try:
            for d in dirs:
                d.mkdir()
            if self.version == 2:
                d = dirs[0]
                settings = {"memory.max": memory, "memory.swap.max": 0, "pids.max": limits.processes,
                            "memory.oom.group": 1, "cpu.weight": 100}
                for key, value in settings.items():
                    if (d / key).exists():  # swap and cpu may be absent
                        _write(d / key, value)
            else:
                _write(self.bases["memory"] / name / "memory.limit_in_bytes", memory)
                swap = self.bases["memory"] / name / "memory.memsw.limit_in_bytes"
                if swap.exists():
                    _write(swap, memory)
                _write(self.bases["pids"] / name / "pids.max", limits.processes)
                if "cpu" in self.bases:
                    _write(self.bases["cpu"] / name / "cpu.shares", 1024)  # equal, whatever its processes
        except OSError as exc:
            Group(self.version, dirs).remove()
            raise SandboxError(f"could not set up a sandbox cgroup under {self.describe()}: {exc}") from None
        return Group(self.version, dirs)

    def sweep(self) -> None:
        """End and remove the sandbox groups of graders that are gone (killed before they could), and this
        grader's own that were still busy when their sandbox ended."""
        names = {d.name for base in self.bases.values() for d in base.glob("nexttoken-*-*")}
        for name in sorted(names):
            pid = name.split("-")[1]
            if pid.isdigit() and (int(pid) == os.getpid() or not Path(f"/proc/{pid}").exists()):
                group = Group(self.version, [b / name for b in self.bases.values() if (b / name).is_dir()])
                group.kill()
                group.remove(wait_s=1.0)


def _v2_cgroups() -> tuple[Cgroups | None, str]:
    mount = _v2_mount()
    if mount is None:
        return None, "no cgroup v2 is mounted"
    base = mount / _own_cgroups().get("", "/").lstrip("/")
    try:
        available = set((base / "cgroup.controllers").read_text().split())
    except OSError:
        return None, f"cgroup v2 at {mount} is not readable"
    if not {"memory", "pids"} <= available:
        return None, f"cgroup v2 at {base} has no memory and pids controllers"
    wanted = {"memory", "pids"} | ({"cpu"} & available)
    try:
        enabled = set((base / "cgroup.subtree_control").read_text().split())
    except OSError:
        return None, f"cgroup v2 at {base} is not readable"
    if not wanted <= enabled:
        try:
            # A v2 cgroup with processes cannot enable controllers for children: move the grader into a
            # leaf of its own first (its delegated scope then holds only groups).
            if (base / "cgroup.procs").read_text().split():
                leaf = base / f"nexttoken-grader-{os.getpid()}"
                leaf.mkdir(exist_ok=True)
                _write(leaf / "cgroup.procs", os.getpid())
            _write(base / "cgroup.subtree_control", " ".join(f"+{c}" for c in sorted(wanted - enabled)))
        except OSError as exc:
            return None, f"cgroup v2 at {base} cannot enable memory and pids for sandboxes ({exc.strerror})"
    return Cgroups(2, {"": base}), ""


def _v1_cgroups() -> tuple[Cgroups | None, str]:
    own, bases = _own_cgroups(), {}
    for controller in ("memory", "pids", "cpu"):
        base = Path("/sys/fs/cgroup") / controller / own.get(controller, "/").lstrip("/")
        if controller in own and base.is_dir() and os.access(base, os.W_OK):
            bases[controller] = base
    if {"memory", "pids"} <= set(bases):
        return Cgroups(1, bases), ""
    return None, "cgroup v1's memory and pids controllers are not mounted or not writable by this user"


def find_cgroups() -> tuple[Cgroups | None, str]:
    """(Cgroups, "") where sandbox cgroups can be made, v2 first (the default on current distributions);
    else (None, why not)."""
    v2, why2 = _v2_cgroups()
    if v2 is not None:
        return v2, ""
    v1, why1 = _v1_cgroups()
    if v1 is not None:
        return v1, ""
    return None, CGROUP_MESSAGE.format(why=f"{why2}; {why1}")


# ---------------------------------------------------------------------------------------------------------
# User ids for sandboxes (root only) and the launcher that puts a sandbox in its cgroup and keyring.

def _uids_running() -> set[int]:
    uids = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("Uid:"):
                    uids |= {int(u) for u in line.split()[1:]}
        except (OSError, ValueError):
            pass
    return uids


def _has_account(uid: int) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False


def processes_of(uid: int) -> set[int]:
    """The processes whose real or effective user id is ``uid``."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("Uid:"):
                    if uid in {int(u) for u in line.split()[1:3]}:
                        found.add(int(pid))
                    break
        except (OSError, ValueError):
            pass
    return found


def kill_user(uid: int) -> None:
    """Kill every process of a sandbox user id, until none is left (a fork bomb is bounded by its
    RLIMIT_NPROC): how a run without bubblewrap's PID namespace, or a cgroup, ends all it started."""
    if not isinstance(uid, int) or uid < FIRST_UID:
        raise ValueError(f"not a sandbox user id: {uid!r}")
    kill_all(lambda: processes_of(uid))


def kill_all(list_pids) -> None:
    """SIGKILL every process ``list_pids()`` names, again and again until it names none (processes can
    fork while being killed; a fork bomb's limit bounds the rounds)."""
    for _ in range(500):
        pids = list_pids()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)


def drop_to(uid: int) -> list[str]:
    """The argv prefix (setpriv) that runs a command as the unprivileged ``uid``, with no groups and no
    capabilities; the grader is root."""
    return [shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


def can_run_as(uid: int, limits: Limits) -> bool:
    """Whether the unprivileged ``uid`` can start this Python and import the recorder (without bubblewrap,
    which binds them in: the interpreter may live where only root can reach it, e.g. under /root), started
    exactly as a run without bubblewrap starts it."""
    try:
        done = subprocess.run(drop_to(uid) + prlimit_args(limits)
                              + [sys.executable, "-c", "import nexttoken.recorder.main"],
                              env=minimal_env("/tmp", "/tmp"), cwd="/", capture_output=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def allocate_uids(n: int) -> list[int | None]:
    """n user ids for sandboxes, as root: free on the host (no account or group, no process) and locked
    for this grader's lifetime. Not root: None each (bwrap maps the caller into a user namespace)."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int (the jobs), got {n!r}")
    if os.geteuid() != 0:
        return [None] * n
    UID_LOCKS.mkdir(mode=0o700, parents=True, exist_ok=True)
    running, found = _uids_running(), []
    for uid in range(FIRST_UID, FIRST_UID + UID_RANGE):
        if len(found) == n:
            break
        if uid in running or _has_account(uid):
            continue
        fd = os.open(UID_LOCKS / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another grader holds it
            os.close(fd)
            continue
        _held_uid_locks.append(fd)
        found.append(uid)
    if len(found) < n:
        raise SandboxError(f"fewer than {n} free user ids in {FIRST_UID}-{FIRST_UID + UID_RANGE - 1} "
                           "for sandboxes (other graders or host accounts hold them): lower --jobs")
    return found


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


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def minimal_env(home: str, tmp: str) -> dict[str, str]:
    """The only environment the submission's code gets: nothing of the instructor's shows up."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "USER": "learner", "LOGNAME": "learner",
        "LANG": "C.UTF-8", "TMPDIR": tmp, "IPYTHONDIR": f"{home}/.ipython",
        "JUPYTER_CONFIG_DIR": f"{home}/.jupyter", "JUPYTER_DATA_DIR": f"{home}/.local/share/jupyter",
        "JUPYTER_RUNTIME_DIR": f"{home}/.local/share/jupyter/runtime", "MPLCONFIGDIR": f"{tmp}/mpl",
        "NEXTTOKEN_GRADING": "1",  # the exercises' qN.check() do nothing while grading
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",  # one core per job: --jobs decides parallelism
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "TQDM_DISABLE": "1",
    }


def _python_roots() -> list[str]:
    """Folders the sandbox needs read-only: the Python installation, the virtual environment, and the
    folder the nexttoken package is imported from (the repository's lib/ for an editable install).
    Never the current folder: it may hold the submissions."""
    import nexttoken

    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    roots.add(os.path.realpath(Path(nexttoken.__file__).parent.parent))
    roots.add(os.path.dirname(os.path.realpath(sys.executable)))
    roots = sorted(r for r in roots if not r.startswith("/usr/"))
    return [r for r in roots if not any(r != o and r.startswith(o + os.sep) for o in roots)]


# The allow-list: what a sandbox shows of the nexttoken package, defined here once (the bwrap command,
# scripts/gradescope/setup.sh and tests/grading/test_boundary.py read it). The lesson's library, which a
# notebook imports, and the recorder, which runs beside it; nothing else of the package is there, whatever
# files it holds: not exercises/ (tasks, references, held-out inputs, solutions) nor grading/, training/ or
# the command-line wrappers. Of the compiled copies (__pycache__), only those of the files shown.
# ``nexttoken.exercises`` is there as the recorder's stand-in (STAND_IN), a package with no task in it.
# (A student's wheel is another list: it keeps the exercises and lacks the solutions and held-out inputs,
# scripts/build_student_package.py's WITHHELD.)
LIBRARY = ("__init__.py", "cache.py", "chain_rule.py", "checks.py", "fast.py", "generate.py", "hf.py", "model.py",
           "plots.py", "pretrained.py", "smollm2.py", "timing.py", "tokenizer.py", "assets", "pretrained")
INSIDE = "recorder"  # the package nexttoken.recorder
SHOWN = LIBRARY + (INSIDE,)
STAND_IN = ("recorder/stand_in.py", "exercises/__init__.py")  # (the file, where the sandbox shows it)


def package_folder() -> Path:
    import nexttoken

    return Path(nexttoken.__file__).resolve().parent


def shown(package: Path, generate: bool = True) -> list[tuple[str, str]]:
    """What a sandbox shows of ``package`` (the allow-list): (file or folder, where it appears) pairs.
    Without ``generate`` neither ``generate.py`` nor its compiled copies are there (``without_generate``
    stands in for them)."""
    names = [name for name in SHOWN if (package / name).exists() and (generate or name != "generate.py")]
    pairs = [(str(package / name), str(package / name)) for name in names]
    for name in (n for n in names if n.endswith(".py")):
        pairs += [(str(p), str(p)) for p in sorted((package / "__pycache__").glob(f"{name[:-3]}.*.pyc"))]
    source, place = STAND_IN
    return pairs + [(str(package / source), str(package / place))]


def hidden(package: Path) -> list[Path]:
    """What of ``package`` is not on the allow-list (its compiled copies aside), for a container that runs
    the submission without a sandbox to make root's alone (scripts/gradescope/setup.sh)."""
    return sorted(p for p in package.iterdir() if p.name not in SHOWN and p.name != "__pycache__")


def _package_binds(package: Path, generate_fd: int | None) -> list[str]:
    """bwrap's arguments that show only the allow-list of ``package``: an empty read-only folder in its place,
    with what is shown bound into it (``generate_fd``, where given, holds the ``generate.py`` shown
    instead of the library's)."""
    args = ["--perms", "0755", "--size", "65536", "--tmpfs", str(package)]
    for folder in sorted({str(Path(place).parent) for _, place in shown(package)} - {str(package)}):
        args += ["--perms", "0755", "--dir", folder]
    for source, place in shown(package, generate=generate_fd is None):
        args += ["--ro-bind", source, place]
    if generate_fd is not None:
        args += ["--perms", "0644", "--ro-bind-data", str(generate_fd), str(package / "generate.py")]
    return args + ["--remount-ro", str(package)]


def without_generate(message: str) -> bytes:
    """``nexttoken/generate.py`` as a sandbox shows it to the tasks that forbid ``nexttoken.generate``
    (``bwrap_command(generate_fd=...)``): the same module (greedy, sample, temperature, ...), with the body
    of ``generate`` replaced by raising ``message``. The loop the learner is to write is then nowhere in the
    process to call, save beforehand, reload or read: neither the file nor its compiled copy has it."""
    import ast

    tree = ast.parse((package_folder() / "generate.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "generate":
            node.body = [ast.Raise(exc=ast.Call(func=ast.Name("RuntimeError", ast.Load()),
                                                args=[ast.Constant(message)], keywords=[]), cause=None)]
    return ast.unparse(ast.fix_missing_locations(tree)).encode()


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


def prlimit_args(limits: Limits, processes: bool = True) -> list[str]:
    mb = 1024 * 1024
    args = [shutil.which("prlimit") or "/usr/bin/prlimit", f"--as={limits.memory_mb * mb}",
            f"--fsize={limits.file_size_mb * mb}", f"--cpu={limits.cpu_s}", "--core=0", "--nofile=512"]
    if processes:
        args.append(f"--nproc={limits.processes}")
    return args + ["--"]


def bwrap_command(argv: list[str], limits: Limits, notebook_fd: int, uid: int | None,
                  seccomp_fd: int | None = None, generate_fd: int | None = None) -> list[str]:
    """The command that runs ``argv`` in a fresh sandbox. ``notebook_fd`` is read into
    /submission/submission.ipynb (a copy on the sandbox's tmpfs; nothing of it lands on the host's disk).
    ``uid`` is the sandbox's user id when the grader is root (``allocate_uids``); ``seccomp_fd`` holds the
    filter (``seccomp_filter``) that bwrap loads for everything the command runs; ``generate_fd``, where
    given, holds the ``generate.py`` the sandbox sees in place of the library's (``without_generate``)."""
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
    # under /tmp (bwrap applies its mounts in order): the Python installation and the package, read-only.
    made: set = {"/tmp", "/home"}
    roots = _python_roots()
    for root in roots:
        cmd += _mkdirs(root, made) + ["--ro-bind", root, root]
    package = package_folder()
    if any(str(package).startswith(root + os.sep) for root in roots):  # of the package, the allow-list only
        cmd += _package_binds(package, generate_fd)
    cmd += ["--chdir", SCRATCH, "--hostname", "sandbox",
            "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--clearenv"]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    for key, value in minimal_env(HOME, "/tmp").items():
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


def memfd_with(data: bytes, name: str) -> int:
    """A memfd holding ``data``, at offset 0: how a notebook or the filter reaches bwrap, never on disk."""
    fd = os.memfd_create(name)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def check_bwrap(limits: Limits, cgroups: Cgroups | None, uid: int | None) -> str | None:
    """None when a sandbox with these limits can start here and import the tasks (torch), else why not:
    bubblewrap or libseccomp missing, user namespaces disabled, or limits too small."""
    if bwrap_path() is None:
        return INSTALL_MESSAGE
    try:
        fds = [memfd_with(b"{}", "probe.ipynb"), memfd_with(seccomp_filter(), "seccomp.bpf")]
        group = cgroups.new_group(limits) if cgroups is not None else None
    except SandboxError as exc:
        return str(exc)
    try:
        probe = [sys.executable, "-c", "import nexttoken.recorder.main"]
        cmd = launcher(group) + bwrap_command(probe, limits, fds[0], uid, fds[1])
        result = subprocess.run(cmd, pass_fds=fds, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return "a sandbox did not start Python and torch within 300 s: is the machine overloaded?"
    finally:
        for fd in fds:
            os.close(fd)
        if group is not None:
            group.kill()
            group.remove()
    if result.returncode != 0:
        why = result.stderr.strip()[-800:]
        if "namespace" in why or "Operation not permitted" in why:  # e.g. an unprivileged container
            return (f"bubblewrap cannot create its namespaces here (an unprivileged container?):\n{why}\n"
                    "Where the container itself holds one submission only (Gradescope, GitHub Classroom),\n"
                    "--no-sandbox grades it without bubblewrap: the container is then the only wall, so it\n"
                    "must hold nothing but that one submission (the course's page 'Gradescope and other\n"
                    "containers', guide/instructors/gradescope.md).")
        return (f"bubblewrap is installed but a sandbox with these limits could not start Python and torch "
                f"(see --memory, --total-memory, --processes):\n{why}")
    return None
