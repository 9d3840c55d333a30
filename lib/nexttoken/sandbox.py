"""Run one submission's code in a bubblewrap sandbox with resource limits.

Isolation comes from bubblewrap (``bwrap``, Debian/Ubuntu package ``bubblewrap``), never from the grader's
good behaviour: the sandboxed process sees the system, the Python installation and the ``nexttoken``
package read-only; its own notebook copy in a private ``/submission``; a private ``/tmp`` and ``HOME``
(small tmpfs that vanish with it); no network; its own PID namespace (it cannot see the grader, other
submissions or their processes), and it dies with the grader. When the sandbox's first process exits, the
kernel kills everything else in its PID namespace, so nothing it started outlives it.

Limits (util-linux ``prlimit``) apply per process: address space, processes+threads, file size, CPU time.
When the grader runs as root, the code runs as an unprivileged user id of its own (one per concurrent
job), so the process limit is enforced and no root-owned file is readable by owner rights.
"""

import os
import shutil
import subprocess
import sys
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
# one sandbox cannot use up the process limit of another (RLIMIT_NPROC counts per user id).
FIRST_UID = 61000


@dataclass(frozen=True)
class Limits:
    """Per-submission limits. Defaults suit the course's small tensors; flags of the grader change them."""
    memory_mb: int = 2048  # address space per process (importing torch alone reserves about 600 MB)
    processes: int = 64  # processes and threads of the sandbox's user
    file_size_mb: int = 16  # largest file it may write
    cpu_s: int = 600  # CPU seconds per process (the grader sets it to its --notebook-timeout)
    tmp_mb: int = 64  # size of each private tmpfs (/tmp, HOME, /submission)

    def __post_init__(self):
        for name in ("memory_mb", "processes", "file_size_mb", "cpu_s", "tmp_mb"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")


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


def bwrap_command(argv: list[str], limits: Limits, notebook_fd: int, slot: int) -> list[str]:
    """The command that runs ``argv`` in a fresh sandbox. ``notebook_fd`` is read into
    /submission/submission.ipynb (a copy on the sandbox's tmpfs; nothing of it lands on the host's disk).
    ``slot`` is the concurrent job's index (its user id when the grader is root)."""
    size = str(limits.tmp_mb * 1024 * 1024)
    cmd = [bwrap_path() or "bwrap"]
    cmd += _system_binds()
    cmd += ["--dev", "/dev", "--proc", "/proc",
            "--perms", "01777", "--size", size, "--tmpfs", "/tmp",
            "--perms", "0755", "--dir", "/home",
            "--perms", "0777", "--size", size, "--tmpfs", HOME,
            "--perms", "0777", "--size", size, "--tmpfs", SCRATCH,
            "--perms", "0644", "--file", str(notebook_fd), f"{SCRATCH}/submission.ipynb"]
    # After the tmpfs mounts, which would otherwise hide a virtual environment or a checkout that lives
    # under /tmp (bwrap applies its mounts in order): the Python installation and the package, read-only.
    made: set = {"/tmp", "/home"}
    for root in _python_roots():
        cmd += _mkdirs(root, made) + ["--ro-bind", root, root]
    cmd += ["--chdir", SCRATCH, "--hostname", "sandbox",
            "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--clearenv"]
    for key, value in minimal_env(HOME, "/tmp").items():
        cmd += ["--setenv", key, value]
    if os.geteuid() == 0:
        # bwrap as root (no user namespace), then drop to an unprivileged uid with no capabilities.
        uid = str(FIRST_UID + slot)
        cmd += ["--cap-add", "CAP_SETUID,CAP_SETGID", "--",
                shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}",
                "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
        cmd += prlimit_args(limits)
    else:
        cmd += ["--unshare-user", "--"] + prlimit_args(limits)
    return cmd + argv


def check_bwrap(limits: Limits) -> str | None:
    """None when a sandbox with these limits can start here and import the tasks (torch), else why not:
    bubblewrap missing, user namespaces disabled, or limits too small."""
    if bwrap_path() is None:
        return INSTALL_MESSAGE
    r, w = os.pipe()
    os.write(w, b"{}")
    os.close(w)
    try:
        probe = [sys.executable, "-c", "import nexttoken.exercises.task"]
        result = subprocess.run(bwrap_command(probe, limits, r, 0),
                                pass_fds=(r,), capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return "a sandbox did not start Python and torch within 300 s: is the machine overloaded?"
    finally:
        os.close(r)
    if result.returncode != 0:
        return (f"bubblewrap is installed but a sandbox with these limits could not start Python and torch "
                f"(see --memory, --processes):\n{result.stderr.strip()[-800:]}")
    return None
