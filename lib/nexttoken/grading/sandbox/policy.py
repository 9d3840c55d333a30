"""The course's sandbox: what it shows of the nexttoken package (the allow-list), the copy of generate.py
for the tasks that forbid ``nexttoken.generate``, the submission's environment, and the probes that say
whether a sandbox can run the recorder here. The mechanism (bwrap, limits, seccomp, cgroups, users) is in
the modules beside this one, which know nothing of the course."""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from . import bwrap
from .cgroups import Cgroups
from .launcher import launcher, memfd_with
from .limits import Limits, SandboxError, prlimit_args
from .seccomp import seccomp_filter
from .users import drop_to

INSTALL_MESSAGE = (
    "the grader runs every submission inside bubblewrap, which is not installed here.\n"
    "Install it (Debian/Ubuntu: 'sudo apt-get install bubblewrap', or 'sudo bash scripts/setup_sandbox.sh'),\n"
    "or pass --no-sandbox to grade TRUSTED submissions without isolation (their code can then read and\n"
    "change anything your user can, other submissions and the grades included)."
)

# The allow-list: what a sandbox shows of the nexttoken package, defined here once (the bwrap command,
# scripts/gradescope/setup.sh and tests/grading/test_boundary.py read it). The lesson's library, which a
# notebook imports, and the recorder, which runs beside it; nothing else of the package is there, whatever
# files it holds: not exercises/ (tasks, references, held-out inputs, solutions) nor grading/, training/ or
# the command-line wrappers. Of the compiled copies (__pycache__), only those of the files shown.
# ``nexttoken.exercises`` is there as the recorder's stand-in (STAND_IN), a package with no task in it.
# (A student's wheel is another list: it keeps the exercises and lacks the solutions and held-out inputs,
# scripts/build_student_package.py's WITHHELD.)
LIBRARY = ("__init__.py", "cache.py", "chain_rule.py", "checks.py", "fast", "generate.py", "hf.py", "model.py",
           "plots.py", "pretrained.py", "smollm2.py", "timing.py", "tokenizer.py", "assets", "pretrained")
INSIDE = "recorder"  # the package nexttoken.recorder
SHOWN = LIBRARY + (INSIDE,)
# The rest of the package, never shown (``hidden``): what a sandbox must not hold (the tasks and the grader),
# and what no submission needs (training, the command-line wrappers). Every top-level entry of the package is
# in SHOWN or here, and every file shown imports only what is shown (tests/grading/test_allow_list.py).
OUTSIDE = ("exercises", "grading", "training", "evaluate.py", "grade.py", "train.py")
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
    """What of ``package`` is not on the allow-list (its compiled copies aside): never in a sandbox, nor in
    the package view a run without bubblewrap imports (``PackageView``)."""
    return sorted(p for p in package.iterdir() if p.name not in SHOWN and p.name != "__pycache__")


def package_binds(package: Path, generate_fd: int | None) -> list[str]:
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


def python_roots() -> list[str]:
    """Folders the sandbox needs read-only: the Python installation, the virtual environment, and the
    folder the nexttoken package is imported from (the repository's lib/ for an editable install).
    Never the current folder: it may hold the submissions."""
    import nexttoken

    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    roots.add(os.path.realpath(Path(nexttoken.__file__).parent.parent))
    roots.add(os.path.dirname(os.path.realpath(sys.executable)))
    roots = sorted(r for r in roots if not r.startswith("/usr/"))
    return [r for r in roots if not any(r != o and r.startswith(o + os.sep) for o in roots)]


def bwrap_command(argv: list[str], limits: Limits, notebook_fd: int, uid: int | None,
                  seccomp_fd: int | None = None, generate_fd: int | None = None) -> list[str]:
    """The command that runs ``argv`` in a fresh sandbox (``bwrap.command``) showing the Python installation
    and, of the package, the allow-list, bound from the package's own files wherever it is installed (a
    virtual environment, the repository's lib/, or /usr and /usr/local, which the sandbox shows whole);
    ``generate_fd``, where given, holds the ``generate.py`` the sandbox sees in place of the library's
    (``without_generate``). ``uid``: ``users.allocate_uids``'s, when the grader is root; ``seccomp_fd``: the
    filter (``seccomp_filter``). Raises SandboxError where the allow-list cannot be shown
    (``allow_list_problem``): never a sandbox with the whole package in it."""
    package = package_folder()
    problem = allow_list_problem(package)
    if problem is not None:
        raise SandboxError(problem)
    within = package_binds(package, generate_fd)
    return bwrap.command(argv, limits, notebook_fd, uid, seccomp_fd, python_roots(), within,
                         minimal_env(bwrap.HOME, "/tmp"))


def allow_list_problem(package: Path) -> str | None:
    """None where the sandbox can show ``package``'s allow-list from its own files, else what the machine
    must provide: the package as a folder of files (not a zip, not a namespace), holding the stand-in."""
    needed = ["__init__.py", "generate.py", INSIDE, STAND_IN[0]]
    missing = [name for name in needed if not (package / name).exists()]
    if package.is_dir() and not missing:
        return None
    what = f"lacks {', '.join(missing)}" if package.is_dir() else "is not a folder"
    return (f"the grader shows a submission only the allow-list of the nexttoken package, bound from the package's "
            f"own files, and cannot here: {package} {what}. "
            "The machine must provide nexttoken installed as a folder of files (pip install of the course's "
            "wheel or repository, into a virtual environment, site-packages, /usr or /usr/local), with its "
            "recorder; the grader never runs a submission beside the whole package")


# Run inside a sandbox (or, without bubblewrap, as the submission's user): the recorder imports, and the
# nexttoken.exercises it finds is the stand-in, with no task, held-out input or grader beside it. Exit 73: not.
PROBE = ("import importlib.util, sys\nimport nexttoken.recorder.main\nfrom nexttoken import exercises\n"
         "stand_in = hasattr(exercises, 'NotWhileGrading')\n"
         "more = [n for n in ('nexttoken.exercises.task', 'nexttoken.exercises.held_out', 'nexttoken.grading')\n"
         "        if importlib.util.find_spec(n) is not None]\n"
         "sys.exit(0 if stand_in and not more else 73)\n")
NOT_THE_STAND_IN = 73


def can_run_as(uid: int, limits: Limits) -> bool:
    """Whether the unprivileged ``uid`` can start this Python and import the recorder from the package view
    (``package_view``), finding the stand-in there (without bubblewrap, which binds them in: the interpreter
    may live where only root can reach it, e.g. under /root), started exactly as a run without bubblewrap
    starts it."""
    try:
        done = subprocess.run(drop_to(uid) + prlimit_args(limits) + [sys.executable, "-c", PROBE],
                              env=view_env(minimal_env("/tmp", "/tmp"), None), cwd="/", capture_output=True,
                              timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def package_reachable_by(uid: int) -> bool:
    """Whether ``uid`` can open the installed package's folder (the exercises, held-out inputs and the grader
    in it), which a run without bubblewrap must not let it: there the view is all it may read."""
    try:
        done = subprocess.run(drop_to(uid) + ["/bin/sh", "-c", 'test -x "$0" && test -r "$0"', str(package_folder())],
                              env={"PATH": "/usr/bin:/bin"}, cwd="/", capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return True
    return done.returncode == 0


class PackageView:
    """For a run without bubblewrap (--no-sandbox): a folder, put first on the recorder's PYTHONPATH, that
    holds what a sandbox shows of the package, copied from its own files: the allow-list, the stand-in as
    ``exercises/__init__.py`` and, for the tasks that forbid ``nexttoken.generate``, ``generate.py`` without
    it (``without_generate``). Made once per message, under a lock, read-only for everyone, and removed when
    the batch that made it ends (``close_view``; when the grader exits at the latest). The installed package
    itself must then be out of the submission's reach (``package_reachable_by``; scripts/gradescope/setup.sh
    makes it root's alone)."""

    def __init__(self):
        self.folder: Path | None = None
        self.made: dict[str | None, str] = {}  # the message generate raises (None: the library's) -> the folder
        self.lock = threading.Lock()

    def path(self, message: str | None) -> str:
        with self.lock:
            if message not in self.made:
                if self.folder is None:
                    self.folder = Path(tempfile.mkdtemp(prefix="nexttoken-view-"))
                    self.folder.chmod(0o755)
                    atexit.register(shutil.rmtree, self.folder, True)
                self.made[message] = str(self.make(self.folder / f"view{len(self.made)}", message))
            return self.made[message]

    def close(self) -> None:
        """Remove the folder: the batch that made it is done (the next run makes it again)."""
        with self.lock:
            if self.folder is not None:
                shutil.rmtree(self.folder, ignore_errors=True)
            self.folder, self.made = None, {}

    @staticmethod
    def make(where: Path, message: str | None) -> Path:
        package = package_folder()
        problem = allow_list_problem(package)
        if problem is not None:
            raise SandboxError(problem)
        for source, place in shown(package, generate=message is None):
            target = where / "nexttoken" / Path(place).relative_to(package)
            target.parent.mkdir(parents=True, exist_ok=True)
            if Path(source).is_dir():
                shutil.copytree(source, target)
            else:
                shutil.copy2(source, target)  # its time kept: the compiled copies beside it stay valid
        if message is not None:
            (where / "nexttoken" / "generate.py").write_bytes(without_generate(message))
        for path in [where, *where.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        return where


_VIEW = PackageView()


def view_env(env: dict[str, str], message: str | None) -> dict[str, str]:
    """``env`` with the package view first on PYTHONPATH: a run without bubblewrap imports nexttoken from there."""
    return {**env, "PYTHONPATH": _VIEW.path(message)}


def close_view() -> None:
    """Remove the package view, if a run made one: what a batch made, the batch removes as it ends."""
    _VIEW.close()


def check_bwrap(limits: Limits, cgroups: Cgroups | None, uid: int | None) -> str | None:
    """None when a sandbox with these limits can start here and import the tasks (torch), else why not:
    bubblewrap or libseccomp missing, user namespaces disabled, or limits too small."""
    if bwrap.bwrap_path() is None:
        return INSTALL_MESSAGE
    try:
        fds = [memfd_with(b"{}", "probe.ipynb"), memfd_with(seccomp_filter(), "seccomp.bpf")]
        group = cgroups.new_group(limits) if cgroups is not None else None
    except SandboxError as exc:
        return str(exc)
    try:
        probe = [sys.executable, "-c", PROBE]
        cmd = launcher(group) + bwrap_command(probe, limits, fds[0], uid, fds[1])
        result = subprocess.run(cmd, pass_fds=fds, capture_output=True, text=True, timeout=300)
    except SandboxError as exc:
        return str(exc)
    except subprocess.TimeoutExpired:
        return "a sandbox did not start Python and torch within 300 s: is the machine overloaded?"
    finally:
        for fd in fds:
            os.close(fd)
        if group is not None:
            group.kill()
            group.remove()
    if result.returncode == NOT_THE_STAND_IN:
        return (f"a sandbox here shows more of the nexttoken package than its allow-list ({package_folder()}): "
                "its exercises or its grader are importable inside, so the grader refuses. The machine must "
                "provide the package as one folder of files that the sandbox binds from (not a second copy on "
                "the interpreter's path)")
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
