"""The runs of one submission, the stage after reading it: the recorder (``nexttoken.recorder``) run in a
sandbox, again until every task has a record or a result (a cell that hangs or crashes is skipped in the
next run, a task that does is charged alone; a cell that forges a message or floods the grader is charged
to the submission, and buys no run again; the tasks that forbid the library's generate get a run of their
own, without it; with --held-out, the tasks that passed run again on their held-out inputs alone), each
record judged as it comes (``judge``). ``Job`` is what every run of the submission carries; each run
(``run_once``) is followed message by message from the grader's side (``follow.Follower``).
"""

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import sandbox
from ..exercises import chapter
from ..recorder.contract import CHAPTERS, NOTEBOOK_STATUSES
from .follow import MAX_REPORT, Follower, RunResult, Stop
from .judge import held_out_verdict, judge, library_calls
from .orders import next_group, plan
from .protocol import cells_at_most
from .rows import NO_OUTPUTS

__all__ = ["MAX_REPORT", "Job", "Recording", "RunResult", "Settings", "Stop", "charge", "run_once",
           "run_submission"]


@dataclass
class Settings:
    timeout: int = 60
    notebook_timeout: int = 600
    limits: sandbox.Limits = field(default_factory=sandbox.Limits)
    use_sandbox: bool = True
    max_bytes: int = 20 * 1024 * 1024
    cgroups: sandbox.Cgroups | None = None  # where each run gets its cgroup; None: per-process limits only
    uids: list = field(default_factory=lambda: [None])  # the sandbox user id of each job slot (root only)
    held_out: bool = False  # also the held-out inputs (exercises/held_out.py), judged without showing them
    chapter: str | None = None  # the assignment's chapter (--chapter): a notebook of another one is not graded
    chapter_points: int = 0  # --chapter's points: the most of a notebook's one row (not graded task by task)


@dataclass(frozen=True)
class Job:
    """What every run of one submission carries: its snapshot's bytes, its chapter (None until the first
    run has read it), the settings (visible inputs, or held-out ones), its job slot and its budget's end."""
    data: bytes
    chapter: str | None
    settings: Settings
    slot: int
    budget_end: float


@dataclass
class Recording:
    """What the runs of one submission recorded, task by task, and what its cells did. ``problem``: (status,
    reason) where the first run read no chapter we grade; a chapter other than --chapter's: no task run."""
    chapter: str | None = None  # the notebook's, as the first run read it
    problem: tuple[str, str] | None = None
    tasks: dict = field(default_factory=dict)  # task name -> Task
    results: dict = field(default_factory=dict)  # task name -> (status, reason)
    calls: dict = field(default_factory=dict)  # task name -> the library_calls column
    cell_errors: dict = field(default_factory=dict)  # learner's code cell number -> error text
    notes: dict = field(default_factory=dict)  # task name -> the visible run's notes (the recorder's form)
    skip: dict = field(default_factory=dict)  # code cells that hung or crashed: skipped in later runs


def run_submission(data: bytes, settings: Settings, slot: int = 0) -> Recording:
    """What the runs of one submission (``data``, its snapshot) record; never raises for a bad submission.
    With --held-out, the tasks that pass on their visible inputs are run again, in a sandbox of their own,
    on their held-out inputs alone (``held_out_pass``)."""
    job = Job(data, None, replace(settings, held_out=False), slot, time.monotonic() + settings.notebook_timeout)
    first = run_once(job, plan(None, job.settings), set())  # it finds the chapter
    problem = notebook_problem(first)
    if problem is not None:
        return Recording(problem=problem)
    chapter_name = first.notebook["chapter"]
    if settings.chapter not in (None, chapter_name):  # --chapter: another chapter's work is not run
        return Recording(chapter_name)
    recording = Recording(chapter_name, tasks={t.name: t for t in tasks_of(chapter_name)})
    job = replace(job, chapter=chapter_name)
    record(recording, job, list(recording.tasks), first)
    if settings.held_out:
        held_out_pass(recording, replace(job, settings=settings))
    return recording


def tasks_of(chapter_name: str) -> list:
    module = chapter(chapter_name)
    return [getattr(module, name) for name in module.TASKS]


def notebook_problem(run: RunResult) -> tuple[str, str] | None:
    """(status, reason) when the first run did not read the notebook into a chapter we grade."""
    message = run.notebook
    if message is None:
        stop = run.stopped or Stop(None, "error", "it sent nothing")
        return "invalid_notebook", f"the sandbox stopped before the notebook was read ({stop.status}: {stop.detail})"
    if message.get("notebook") != "read":
        status = message.get("status")
        return (status if status in NOTEBOOK_STATUSES else "invalid_notebook",
                str(message.get("reason", "not a readable notebook")))
    if message.get("chapter") not in CHAPTERS:
        return "unknown_chapter", "no chapter in the notebook's metadata or imports"
    return None


def held_out_pass(recording: Recording, job: Job) -> None:
    """The tasks that passed on their visible inputs, run again on their held-out inputs alone, in runs of
    their own: the runs that showed the learner's text never held a held-out input. What these runs say
    is the grader's alone (``judge.held_out_verdict``); their cells' errors, stops and library calls are
    not repeated (the visible runs reported the same cells)."""
    passed = [n for n, (status, _) in recording.results.items() if status == "passed"]
    if not passed:
        return
    hidden = Recording(recording.chapter, tasks=recording.tasks, skip=dict(recording.skip))
    record(hidden, job, passed, None)
    for task_name in passed:
        status, reason = hidden.results.get(task_name, ("error", NO_OUTPUTS))
        recording.results[task_name] = held_out_verdict(recording.tasks[task_name], status, reason)
        # its library_calls: the visible run's (the held-out run's names come from a process that held the
        # held-out inputs, so they are not used)


def record(recording: Recording, job: Job, pending: list[str], first: RunResult | None) -> None:
    """Run the recorder until every task in ``pending`` has a result in ``recording``, one group of tasks
    at a time (``orders.next_group``), and again after a cell or task stopped a run: a cell that hangs or
    crashes is skipped in the next run, a task that does is charged alone. ``first``: a run already made
    of the first group."""
    run = first
    while pending:
        if run is None:
            group, rule = next_group(recording.tasks, pending)
            run = run_once(job, plan(group, job.settings), set(recording.skip), rule)
        recorded = [task_name for task_name in pending if task_name in run.records]
        left = [task_name for task_name in pending if task_name not in run.records]
        pending = charge(recording, run, left, job.settings) if left else []
        take_records(recording, run, recorded, job.settings.held_out)
        run = None


def take_records(recording: Recording, run: RunResult, recorded: list[str], held_out: bool) -> None:
    """The run's cell errors, and the record of each task of ``recorded`` judged."""
    for number, error in run.cell_errors.items():
        recording.cell_errors.setdefault(number, error)
    for task_name in recorded:
        record = run.records[task_name]
        recording.calls[task_name] = library_calls(record)
        if not held_out:  # what a held-out run says is the grader's alone
            recording.notes[task_name] = record.get("notes") or {}
        recording.results[task_name] = judge(recording.tasks[task_name], record, held_out)


def charge(recording: Recording, run: RunResult, pending: list[str], settings: Settings) -> list[str]:
    """What a run that left tasks of ``pending`` without a record costs, and the tasks left for the next
    run: a run that ended as it should, its tasks without a record; a stop, the cell or task running then
    (or, where running again cannot help, every task left)."""
    if run.stopped is None:  # the run ended as it should: its tasks without a record get an error
        results = {task_name: ("error", NO_OUTPUTS) for task_name in run.tasks if task_name in pending}
        recording.results.update(results)
        return [task_name for task_name in pending if task_name not in results]
    stop = run.stopped
    detail = stop.detail
    if stop.status == "crashed" and run.out_of_memory:
        detail += f" (the sandbox used up its {settings.limits.total_memory_mb} MB of memory, --total-memory)"
    if stop.budget:
        result = ("timeout", f"the notebook's time budget of {settings.notebook_timeout} s (--notebook-timeout) "
                             "ran out before this task was recorded")
    elif stop.where is None:  # it stopped before any of the learner's code ran: the grader's side
        result = ("grader_error", f"the sandbox stopped while starting ({stop.status}: {detail}); are --memory, "
                                  "--total-memory or --processes too small?")
    elif stop.where[0] == "cell" and (stop.forged or stop.status == "too_much_output"):
        # no honest cell does either (a cell sends the grader a few short messages), and each such stop would
        # buy another run: the submission pays, not the grader, and its rows say which cell did it
        result = ("error", f"your {cell_note(stop, detail)}: a notebook that does this is not run again, so "
                           "this task was not graded")
    elif stop.where[0] == "cell" and stop.where[1] not in recording.skip:  # charge the cell: skip it, run again
        recording.skip[stop.where[1]] = cell_note(stop, detail)
        return pending
    elif stop.where[0] == "task" and stop.where[1] in pending:  # charge the task alone
        task_name = stop.where[1]
        recording.results[task_name] = (stop.status, f"{recording.tasks[task_name].function}: {detail}")
        return [n for n in pending if n != task_name]
    else:  # no progress to make by running again (it stopped somewhere already charged)
        result = (stop.status, f"your notebook stopped: {detail}")
    recording.results.update(dict.fromkeys(pending, result))
    return []


def cell_note(stop: Stop, detail: str) -> str:
    """What a code cell that stopped a run did, as the rows of the tasks it cost say it."""
    number = stop.where[1]
    if stop.status == "timeout":
        return f"code cell {number} {detail}"
    if stop.forged:
        return f"code cell {number}: {detail}"
    return f"code cell {number} stopped the process ({stop.status}: {detail})"


def _kill(proc: subprocess.Popen, group: sandbox.Group | None, uid: int | None = None) -> None:
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


def _start(job: Job, argv, group, keep: list[int], without_generate: str | None = None):
    """Start the recorder; returns (process, scratch folder or None). ``keep`` are the descriptors the
    child gets (the caller closes them). ``without_generate``: the message the library's generate raises
    in this sandbox, which then has no working ``nexttoken.generate`` (``sandbox.without_generate``)."""
    settings, launch = job.settings, sandbox.launcher(group)
    threads_fd = _no_threads_fd(settings)
    if threads_fd is not None:
        keep.append(threads_fd)
        argv = _with_threads_fd(argv, threads_fd)
    if settings.use_sandbox:  # the notebook enters the sandbox through a memfd: no copy on disk
        keep += [sandbox.memfd_with(job.data, "submission.ipynb"),
                 sandbox.memfd_with(sandbox.seccomp_filter(), "seccomp.bpf")]
        notebook_fd, seccomp_fd, generate_fd = keep[-2], keep[-1], None
        if without_generate is not None:
            keep.append(sandbox.memfd_with(sandbox.without_generate(without_generate), "generate.py"))
            generate_fd = keep[-1]
        cmd = launch + sandbox.bwrap_command(argv(f"{sandbox.SCRATCH}/submission.ipynb"), settings.limits,
                                             notebook_fd, settings.uids[job.slot], seccomp_fd, generate_fd)
        env, cwd, scratch = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, None, None
    else:  # no bubblewrap: a plain process with limits, in a scratch folder, importing the package view
        scratch = tempfile.TemporaryDirectory(prefix="nexttoken-grade-")
        path = Path(scratch.name) / "submission.ipynb"
        path.write_bytes(job.data)
        for sub in ("home", "tmp"):
            (Path(scratch.name) / sub).mkdir()
        uid = settings.uids[job.slot]
        if uid is None:  # trusted submissions only: it runs as the grader's user
            cmd = launch + sandbox.prlimit_args(settings.limits, processes=False) + argv(str(path))
        else:  # the grader is root (a container of one submission): the code runs as a user id of its own
            for made in (Path(scratch.name), path, Path(scratch.name) / "home", Path(scratch.name) / "tmp"):
                os.chown(made, uid, uid)
            cmd = launch + sandbox.drop_to(uid) + sandbox.prlimit_args(settings.limits) + argv(str(path))
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


def _no_threads_fd(settings: Settings) -> int | None:
    """A memfd with the recorder's no-new-threads filter (``sandbox.seccomp_filter("no_threads")``). In the
    sandbox it is required (its filter is built by the same libseccomp); without bubblewrap, where
    libseccomp may be missing, the run goes on without it (--no-sandbox is for trusted work)."""
    try:
        return sandbox.memfd_with(sandbox.seccomp_filter("no_threads"), "no-threads.bpf")
    except sandbox.SandboxError:
        if settings.use_sandbox:
            raise
        return None


def _with_threads_fd(argv, fd: int):
    return lambda notebook_path: argv(notebook_path) + ["--no-threads-fd", str(fd)]


def run_once(job: Job, plan, skip: set[int], without_generate: str | None = None) -> RunResult:
    """Run the recorder once; stop it at the first cell or task that runs past --timeout, at the end of the
    notebook's budget, or when it sends more than MAX_REPORT bytes. Without a chapter (the first run), the
    recorder finds it in the notebook. ``plan`` (``orders.plan``) is handed the recorder's first message
    and gives the tasks to record and their work order; ``without_generate``: the message the library's
    generate raises in this sandbox, which then has no working ``nexttoken.generate``."""
    read_end, write_end = os.pipe()
    keep = [write_end]

    def argv(notebook_path: str) -> list[str]:
        return [sys.executable, "-m", "nexttoken.recorder", notebook_path, job.chapter or "auto",
                "--skip-cells", ",".join(map(str, sorted(skip))), "--out-fd", str(write_end)]

    group, settings = None, job.settings
    try:
        group = settings.cgroups.new_group(settings.limits) if settings.cgroups is not None else None
        proc, scratch = _start(job, argv, group, keep, without_generate)
    except BaseException:
        os.close(read_end)
        if group is not None:
            group.remove()
        raise
    finally:
        for fd in keep:  # the child holds its copies; ours must go, or the pipe never reports its end
            os.close(fd)
    result = RunResult()
    try:
        Follower(proc, result, settings.timeout, job.budget_end, plan, cells_at_most(job.data)).follow(read_end)
    finally:
        _kill(proc, group, None if settings.use_sandbox else settings.uids[job.slot])
        os.close(read_end)
        if group is not None:
            result.out_of_memory = group.oom_killed()
            group.remove()
        if scratch is not None:
            scratch.cleanup()
    return result
