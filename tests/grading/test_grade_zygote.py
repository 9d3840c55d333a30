"""One start a sandbox: the runs of a submission forked from one zygote (nexttoken.recorder.zygote, run by
nexttoken.grading.launch), attacked from the runs' side. Each run must find the sandbox as a fresh one
would be (no process, file or descriptor of an earlier run), and no run can reach the zygote (its memory,
its descriptors, its control socket); a run that signals it costs only its own submission a fresh sandbox."""

import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from nexttoken.grading import launch, sandbox
from nexttoken.grading.follow import Follower, RunResult
from nexttoken.grading.orders import work_order
from nexttoken.grading.protocol import cells_at_most
from nexttoken.grading.run import Settings

pytestmark = [pytest.mark.slow,  # each sandbox starts Python and torch once: seconds
              pytest.mark.skipif(sandbox.bwrap_path() is None and os.environ.get("CI", "").lower() != "true",
                                 reason="bubblewrap is not installed: run 'sudo bash scripts/setup_sandbox.sh'")]

ROOT = Path(__file__).resolve().parents[2]
TASKS = ["q1", "q2"]


def with_cells(*cells: str) -> bytes:
    """Chapter 2's solution notebook with ``cells`` after its imports (definitions run when graded)."""
    nb = nbformat.read(ROOT / "solutions" / "ch02.ipynb", as_version=4)
    nb.cells = nb.cells[:3] + [nbformat.v4.new_code_cell(c) for c in cells] + nb.cells[3:]
    return nbformat.writes(nb).encode()


def settings() -> Settings:
    cgroups, _ = sandbox.find_cgroups()
    return Settings(cgroups=cgroups, uids=sandbox.allocate_uids(1))


def one_run(boxes: launch.Sandboxes, data: bytes) -> RunResult:
    """One run of chapter 2's first two tasks, followed as the grader follows it."""
    result = RunResult()

    def plan(message):
        return None, TASKS, work_order("ch02", TASKS, False)

    with boxes.recorder("ch02", set()) as started:
        Follower(started.proc, result, 60, time.monotonic() + 300, plan, cells_at_most(data)).follow(started.read_end)
    return result


def test_the_runs_of_a_submission_share_one_start():
    data = with_cells()
    with launch.Sandboxes(settings(), sandbox.allocate_uids(1)[0], data) as boxes:
        first = one_run(boxes, data)
        zygote = boxes.zygotes[None]
        runs = [one_run(boxes, data) for _ in range(2)]
        assert boxes.zygotes[None] is zygote and zygote.alive  # the same sandbox, started once
        for result in [first, *runs]:
            assert sorted(result.records) == TASKS and result.stopped is None and not result.cell_errors


# A cell that finds anything an earlier run left raises, naming it; then it leaves all of that behind:
# files in every folder a run can write, a process in a session of its own, a changed notebook.
LEAVES = r"""import os, time
places = ["/tmp/left", os.path.expanduser("~/left"), "/dev/shm/left", "/submission/left"]
found = [p for p in places if os.path.exists(p)]
mark = ("EDI" + "TED").encode()  # not in the notebook's own text
edited = mark in open("/submission/submission.ipynb", "rb").read()
others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getppid(), os.getpid())]
boom = {}[f"left: {found}, edited: {edited}, processes: {others}"] if found or edited or others else None
written = [open(p, "w").write("x") for p in places]
def edit():
    try:  # the sandbox's first notebook is root's where the grader is root; the zygote's later copy is not
        return open("/submission/submission.ipynb", "ab").write(mark)
    except PermissionError:
        return None
touched = edit()
sleeper = os.fork() or os.setsid() or time.sleep(600) or os._exit(0)
"""


def test_a_run_finds_nothing_an_earlier_run_left():
    data = with_cells(LEAVES)
    with launch.Sandboxes(settings(), sandbox.allocate_uids(1)[0], data) as boxes:
        one_run(boxes, data)
        zygote = boxes.zygotes[None]
        for _ in range(2):
            result = one_run(boxes, data)
            assert sorted(result.records) == TASKS and result.cell_errors == {}, result.cell_errors
            assert boxes.zygotes[None] is zygote and zygote.alive  # cleaned by the zygote, not a fresh start
            group = zygote.group
            if group is not None:  # the sandbox's processes now: bwrap's two (outside, and its init) and the zygote
                alive = [p for p in group.pids() if "State:\tZ" not in Path(f"/proc/{p}/status").read_text()]
                assert sorted(Path(f"/proc/{p}/comm").read_text().strip() for p in alive) == ["bwrap", "bwrap",
                                                                                              "python"], alive


# What a run tries against the zygote (its parent): each probe's result is a name.
PROBES = r"""import os, stat
def probe(fn):
    try:
        fn()
        return "reached"
    except PermissionError:
        return "denied"
def is_socket(fd):
    try:
        return stat.S_ISSOCK(os.fstat(fd).st_mode)
    except OSError:
        return False
zygote = os.getppid()
sockets = [fd for fd in range(1024) if is_socket(fd)]
memory = probe(lambda: open(f"/proc/{zygote}/mem", "rb").read(1))
descriptors = probe(lambda: os.listdir(f"/proc/{zygote}/fd"))
boom = {}[f"{sockets} {memory} {descriptors}"] if sockets or memory != "denied" or descriptors != "denied" else None
"""


def test_a_run_cannot_reach_the_zygote():
    """Not its control socket, not its memory, not its descriptors (not dumpable: /proc refuses them)."""
    data = with_cells(PROBES)
    with launch.Sandboxes(settings(), sandbox.allocate_uids(1)[0], data) as boxes:
        for _ in range(2):
            result = one_run(boxes, data)
            assert sorted(result.records) == TASKS and result.cell_errors == {}, result.cell_errors
        assert len(boxes.zygotes) == 1 and boxes.zygotes[None].alive


@pytest.mark.parametrize("signal_name", ["SIGSTOP", "SIGKILL"])
def test_a_run_that_stops_or_kills_its_zygote_costs_only_its_own_submission(signal_name):
    """The zygote is the runs' parent and the same user: a run can signal it. Stopped, it does not answer
    at the run's end; killed, its sandbox ends. Either way the next run starts in a fresh sandbox, and the
    signal buys nothing: the run that sent it is the submission's own."""
    data = with_cells(f"import os, signal\nsent = os.kill(os.getppid(), signal.{signal_name})")
    with launch.Sandboxes(settings(), sandbox.allocate_uids(1)[0], data) as boxes:
        first = one_run(boxes, data)
        zygote = boxes.zygotes[None]
        assert not zygote.alive  # ended whole: it did not say its run's processes were gone
        second = one_run(boxes, data)
        assert boxes.zygotes[None] is not zygote
    if signal_name == "SIGSTOP":  # the runs themselves went on: their records are whole
        assert all(sorted(r.records) == TASKS and r.stopped is None for r in (first, second))
    else:  # the run went down with its sandbox, in its own cell or soon after: a crash, charged to it
        assert all(r.stopped is not None and r.stopped.status == "crashed" for r in (first, second))


def test_a_sandbox_ended_from_outside_is_replaced_by_a_fresh_one():
    data = with_cells()
    with launch.Sandboxes(settings(), sandbox.allocate_uids(1)[0], data) as boxes:
        one_run(boxes, data)
        first = boxes.zygotes[None]
        first.close()  # as when it did not answer at a run's end
        result = one_run(boxes, data)
        assert boxes.zygotes[None] is not first and sorted(result.records) == TASKS


def test_the_zygote_runs_only_in_a_sandbox():
    """Elsewhere its kill(-1), which ends a run's processes, would reach every process of the user's."""
    done = subprocess.run([sys.executable, "-m", "nexttoken.recorder.zygote", "x.ipynb", "--control-fd", "0"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "only in a sandbox's own PID namespace" in done.stderr


def test_emptying_leaves_what_bwrap_mounted_in_a_writable_folder(tmp_path):
    """A checkout under /tmp (a clone in a temporary folder) is shown read-only inside the sandbox's /tmp:
    emptying /tmp after a run must leave it, and the folders on the way to it, or the next run could not
    import the library (the zygote would fail, and every run start afresh)."""
    from nexttoken.recorder.zygote import empty, mounts_within

    folder = tmp_path / "tmp"
    (folder / "clone" / ".venv" / "lib").mkdir(parents=True)
    (folder / "clone" / ".venv" / "lib" / "torch.py").write_text("x")
    (folder / "clone" / "left.txt").write_text("a run's")
    (folder / "run" / "deep").mkdir(parents=True)
    (folder / "file").write_text("a run's")
    info = (f"36 35 0:34 / {folder} rw - tmpfs tmpfs rw\n"
            f"37 36 8:1 /x {folder}/clone/.venv ro - ext4 /dev/sda1 ro\n"
            f"38 35 8:1 /y /elsewhere ro - ext4 /dev/sda1 ro\n")
    kept = mounts_within([str(folder)], info)
    assert kept == ({f"{folder}/clone/.venv"}, {f"{folder}/clone"})
    empty(str(folder), kept)
    left = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    assert left == ["clone", "clone/.venv", "clone/.venv/lib", "clone/.venv/lib/torch.py"]
