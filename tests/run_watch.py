"""A pytest plugin for long runs: tests/conftest.py loads it, and scripts/test.sh passes it to the nbval runs
(``-p tests.run_watch``), which do not read tests/conftest.py.

- Progress that shows through a pipe (a CI log, ``| tee``): a line as each slow test starts and one as it
  ends (its outcome, its seconds, and the CPU seconds it used, its finished child processes included: more
  than its seconds where it used both cores), the same for each notebook nbval runs, each line flushed at
  once and stamped with the minutes since the test command started (``NEXTTOKEN_TEST_START``, set by
  scripts/test.sh; else since this session started).
- Nothing left behind, checked as the session ends: no process the session started is still alive (a
  kernel a test did not shut down, a server, a daemon), no file of the repository that git would show as
  new or changed, nor one it ignores outside the build folders and caches (``MADE_ON_PURPOSE``: a grades
  CSV or JupyterLab's checkpoints are named), nothing in the session's own temporary folder (``TMPDIR``
  points there for the session and every process it starts; pytest's own ``tmp_path`` folders stay where
  pytest keeps them, and torch's compiler cache where torch keeps it). What is found is named (a temporary
  file with the test after which it appeared), the processes are killed, the folder is removed, and the run
  fails.
"""

import os
import resource
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "NEXTTOKEN_TEST_SESSION"  # in the environment of every process the session starts
# Folders git ignores that tests make on purpose: the site and the lowest versions (_build), setuptools' build
# of the wheel (build, dist, *.egg-info), Python's bytecode and the tools' caches. Any other new path that git
# ignores (a grades CSV, feedback/, .ipynb_checkpoints/) is a test's leftover.
MADE_ON_PURPOSE = ("_build/", "build/", "dist/", ".egg-info/", "__pycache__/", ".hypothesis/", ".ruff_cache/")
_STARTED = time.time()


def clock() -> str:
    """[minutes:seconds] since the test command started (or this session, run alone)."""
    seconds = int(time.time() - float(os.environ.get("NEXTTOKEN_TEST_START") or _STARTED))
    return f"[{seconds // 60:3d}:{seconds % 60:02d}]"


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have ended (user and system)."""
    return sum(r.ru_utime + r.ru_stime for r in map(resource.getrusage, (resource.RUSAGE_SELF,
                                                                         resource.RUSAGE_CHILDREN)))


def write(config, text: str, **markup):
    """A line on pytest's terminal, flushed: through a pipe, pytest's own output waits in a buffer."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        writer = getattr(reporter, "_tw", None)
        if writer is not None and writer.width_of_current_line:  # after a row of dots
            reporter.write("\n")
        reporter.ensure_newline()
        reporter.write_line(text, **markup)
        reporter.flush()


class Progress:
    """A start and an end line for each slow test and for each notebook (nbval's cells grouped by file)."""

    def __init__(self, config):
        self.config = config
        self.names: dict[str, str] = {}  # nodeid of a watched item -> what its lines call it
        self.last: set[str] = set()  # the nodeid that ends each name (a notebook's last cell)
        self.started: dict[str, tuple[float, float]] = {}  # name -> (time, CPU seconds) at its start
        self.outcomes: dict[str, set[str]] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        self.watch(i.nodeid for i in items if i.path.suffix == ".ipynb" or i.get_closest_marker("slow"))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        """pytest-xdist's controller collects nothing itself, and markers do not reach it: a worker's list says
        which items are notebooks' cells, and NEXTTOKEN_TEST_WATCH=all (scripts/test.sh's slow tiers) says
        to watch every test."""
        if not self.names:
            watch_all = os.environ.get("NEXTTOKEN_TEST_WATCH") == "all"
            self.watch(i for i in ids if watch_all or i.split("::")[0].endswith(".ipynb"))

    def watch(self, nodeids):
        """Watch these items (in run order): a notebook's cells under its file's name, a test under its own
        (without the "@group" pytest-xdist's loadgroup adds to it)."""
        for nodeid in nodeids:
            path = nodeid.split("::")[0]
            self.names[nodeid] = path if path.endswith(".ipynb") else nodeid.rsplit("@", 1)[0]
        self.last = set({name: nodeid for nodeid, name in self.names.items()}.values())

    def pytest_runtest_logstart(self, nodeid, location):
        name = self.names.get(nodeid)
        if name is not None and name not in self.started:
            self.started[name] = (time.time(), cpu_seconds())
            self.outcomes[name] = set()
            write(self.config, f"{clock()} start   {name}")

    def pytest_runtest_logreport(self, report):
        name = self.names.get(report.nodeid)
        if name is None or name not in self.started:
            return
        self.outcomes[name].add(report.outcome)
        if report.when == "teardown" and report.nodeid in self.last:
            seen = self.outcomes.pop(name)
            outcome = "failed" if "failed" in seen else "skipped" if "skipped" in seen else "passed"
            began, cpu = self.started.pop(name)
            spent = f"{time.time() - began:.0f} s"
            if getattr(self.config.option, "dist", "no") == "no":  # with workers, the CPU is theirs
                spent += f", {cpu_seconds() - cpu:.0f} s of CPU"
            write(self.config, f"{clock()} {outcome:7} {name} ({spent})", red=outcome == "failed")


class Leftovers:
    """What the session leaves behind: processes, files in the repository, files in its temporary folder."""

    def __init__(self, config):
        self.config = config
        self.token = uuid.uuid4().hex
        os.environ[TOKEN] = self.token
        temp = tempfile.gettempdir()
        os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", temp)  # pytest's tmp_path folders: where they always are
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(temp, f"torchinductor_{_user()}"))
        self.temp = Path(tempfile.mkdtemp(prefix="nexttoken-test-session-"))
        os.environ["TMPDIR"] = str(self.temp)
        tempfile.tempdir = None  # computed again from TMPDIR
        self.repository = git_status()
        self.ignored = ignored_by_git()
        self.seen: dict[str, str] = {}  # an entry of the temporary folder -> the test after which it appeared

    def pytest_runtest_logfinish(self, nodeid, location):
        """Which test left each new entry of the temporary folder (one listing a test: cheap)."""
        for entry in os.listdir(self.temp):
            self.seen.setdefault(entry, nodeid)

    @pytest.hookimpl(trylast=True)  # after pytest-xdist has stopped its workers (they carry the token)
    def pytest_sessionfinish(self, session):
        processes = left_processes(self.token)
        named = [f"process {p.pid} still running: {describe(p)}" for p in processes]
        # torch's compiler writes to its default cache folder in the temporary folder from code that does not read
        # TORCHINDUCTOR_CACHE_DIR (torch/_inductor/codecache.py's _HEADER_DIR, among others): a cache, not a leftover
        files = sorted(p.name for p in self.temp.iterdir() if p.name != f"torchinductor_{_user()}")
        changed = sorted(set(git_status()) - set(self.repository))
        ignored = sorted(path for path in set(ignored_by_git()) - set(self.ignored)
                         if not path.endswith(MADE_ON_PURPOSE))
        for process in processes:
            try:
                process.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(processes, timeout=10)
        shutil.rmtree(self.temp, ignore_errors=True)
        problems = named + [f"left in the repository (git status): {line}" for line in changed]
        problems += [f"left in the repository (ignored by git): {path}" for path in ignored]
        problems += [f"left in the session's temporary folder: {name} (after {self.seen.get(name, 'the last test')})"
                     for name in files]
        if problems:
            write(self.config, "the tests left these behind (processes killed, folder removed):", red=True, bold=True)
            for line in problems:
                write(self.config, "  " + line, red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_unconfigure(self):
        shutil.rmtree(self.temp, ignore_errors=True)  # also where no session ran (--help, a usage error)


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def git_status() -> list[str]:
    """`git status --porcelain` of the repository (new files that are not ignored, changed files)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return []
    done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                          capture_output=True, text=True)
    return done.stdout.splitlines() if done.returncode == 0 else []


def ignored_by_git() -> list[str]:
    """The paths of the repository that git ignores, a folder as one entry (``git status --ignored``)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return []
    done = subprocess.run(["git", "status", "--porcelain", "--ignored=traditional", "--untracked-files=normal"],
                          cwd=ROOT, capture_output=True, text=True)
    return [line[3:] for line in done.stdout.splitlines() if line.startswith("!! ")] if done.returncode == 0 else []


def left_processes(token: str) -> list[psutil.Process]:
    """Every live process, this one aside, that descends from this one or carries the session's token in
    its environment (one a test started that outlived its parent, re-parented elsewhere)."""
    me = psutil.Process()
    found = {p.pid: p for p in me.children(recursive=True)}
    for process in psutil.process_iter():
        if process.pid in found or process.pid == me.pid:
            continue
        try:
            if process.environ().get(TOKEN) == token:
                found[process.pid] = process
        except psutil.Error:
            continue
    alive = []
    for process in found.values():
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.Error:
            continue
    return alive


def describe(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())[:300] or process.name()
    except psutil.Error:
        return "(gone)"


def pytest_configure(config):
    if not config.pluginmanager.has_plugin("run_watch-progress"):
        config.pluginmanager.register(Progress(config), "run_watch-progress")
    # pytest-xdist's workers inherit the controller's session; the controller checks once they are stopped
    if not hasattr(config, "workerinput") and not config.pluginmanager.has_plugin("run_watch-leftovers"):
        config.pluginmanager.register(Leftovers(config), "run_watch-leftovers")
