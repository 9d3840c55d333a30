"""The runs of one submission, the stage after reading it: the recorder (``nexttoken.recorder``) run in a sandbox
(``launch``: each run forked in the submission's sandbox, which starts Python and torch once), again until
every task has a record or a result (a cell that hangs or crashes is skipped in the next run, a task that does
is charged alone; a cell that forges a message or floods the grader is charged to the submission, and buys no
run again; the tasks that forbid the library's generate get a run of their own, without it). Each run
(``run_once``) is followed message by message from the grader's side (``follow.Follower``). The first run's
first message, the notebook's, decides the submission once (``decide``: its chapter, and whether it is graded
task by task; if not, no task runs). Its records are judged by the next stage (``judge``); with --held-out,
the tasks that passed then run again on their held-out inputs alone (``held_out_pass``), and are judged again.
``Job`` is what every run of the submission carries, its decision among them.
"""

import contextlib
import time
from dataclasses import dataclass, field, replace

from . import launch, sandbox
from ..exercises import chapter
from .decide import Decision, decide
from .follow import MAX_REPORT, Follower, RunResult, Stop
from .orders import next_run
from .protocol import cells_at_most
from .stops import charge

__all__ = ["MAX_REPORT", "Job", "Recording", "RunResult", "Settings", "Stop", "held_out_pass", "run_once",
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
    """What every run of one submission carries: its snapshot's bytes, its decision (``decide``: its chapter;
    None until the first run has made it), the settings (visible inputs, or held-out ones), its job slot,
    its budget's end and its sandboxes (``launch.Sandboxes``; None: each run in a sandbox of its own)."""
    data: bytes
    decision: Decision | None
    settings: Settings
    slot: int
    budget_end: float
    boxes: launch.Sandboxes | None = None

    @property
    def chapter(self) -> str | None:
        """The chapter decided, which a later run's recorder is told; None: the first run, which finds it."""
        return None if self.decision is None else self.decision.chapter


@dataclass
class Recording:
    """What the runs of one submission recorded, task by task, and what its cells did. ``decision``: what
    the first run's first message decided (``decide``); one not graded task by task runs no task."""
    chapter: str | None = None  # the notebook's, as the first run read it
    decision: Decision = field(default_factory=Decision)  # by default, graded task by task
    tasks: dict = field(default_factory=dict)  # task name -> Task
    records: dict = field(default_factory=dict)  # task name -> its record message, for ``judge``
    results: dict = field(default_factory=dict)  # task name -> (status, reason): a stop's, or (``judge``) a verdict
    calls: dict = field(default_factory=dict)  # task name -> the library_calls column (``judge``)
    cell_errors: dict = field(default_factory=dict)  # learner's code cell number -> error text
    notes: dict = field(default_factory=dict)  # task name -> the visible run's notes (the recorder's form)
    skip: dict = field(default_factory=dict)  # code cells that hung or crashed: skipped in later runs
    job: Job | None = None  # what its runs carried: a held-out pass carries it on


def run_submission(data: bytes, settings: Settings, slot: int = 0, boxes: launch.Sandboxes | None = None) -> Recording:
    """What the runs of one submission (``data``, its snapshot) record on the tasks' visible inputs, forked in
    its ``boxes``; never raises for a bad submission. The first run's first message decides it (``decide``):
    where it is not graded task by task, no task is run."""
    job = Job(data, None, replace(settings, held_out=False), slot, time.monotonic() + settings.notebook_timeout,
              boxes)
    first = run_once(job, set())
    decision = first.decision or decide(first.notebook, settings, first.stopped)
    if not decision.graded:
        return Recording(decision.chapter, decision=decision)
    job = replace(job, decision=decision)
    recording = Recording(decision.chapter, decision=decision, job=job,
                          tasks={t.name: t for t in tasks_of(decision)})
    record(recording, job, list(recording.tasks), first)
    return recording


def tasks_of(decision: Decision) -> list:
    module = chapter(decision.chapter)
    return [getattr(module, name) for name in decision.tasks]


def held_out_pass(recording: Recording, settings: Settings) -> Recording:
    """The tasks that passed on their visible inputs (as ``judge`` found), run again on their held-out inputs
    alone, in runs of their own: the runs that showed the learner's text never held a held-out input. What
    these runs record is the grader's alone (``judge.judge_held_out``); their cells' errors, stops and
    library calls are not repeated (the visible runs reported the same cells)."""
    passed = [n for n, (status, _) in recording.results.items() if status == "passed"]
    hidden = Recording(recording.chapter, recording.decision, tasks={n: recording.tasks[n] for n in passed},
                       skip=dict(recording.skip))
    if passed:
        record(hidden, replace(recording.job, settings=settings), passed, None)
    return hidden


def record(recording: Recording, job: Job, pending: list[str], first: RunResult | None) -> None:
    """Run the recorder until every task in ``pending`` has a record or a result in ``recording``, one group
    of tasks at a time (``orders.next_run``), and again after a cell or task stopped a run: a cell that
    hangs or crashes is skipped in the next run, a task that does is charged alone. ``first``: a run
    already made of the first group."""
    run = first
    while pending:
        if run is None:
            run = run_once(job, set(recording.skip), recording.tasks, pending)
        left = [task_name for task_name in pending if task_name not in run.records]
        for number, error in run.cell_errors.items():
            recording.cell_errors.setdefault(number, error)
        recording.records.update({n: run.records[n] for n in pending if n in run.records})
        pending = charge(recording, run, left, job.settings) if left else []
        run = None


def run_once(job: Job, skip: set[int], tasks: dict | None = None, pending: list[str] | None = None) -> RunResult:
    """Run the recorder once, on the next group of ``pending``'s tasks (``orders.next_run``; None: the first run, in
    which the recorder finds the chapter), skipping the code cells ``skip``, forked in the submission's
    sandbox (``launch.Sandboxes.recorder``; without ``job.boxes``, one of its own), followed
    (``follow.Follower``); stop it at the first cell or task that runs past --timeout, at the end of the
    notebook's budget, or when it sends more than MAX_REPORT bytes. Its plan is handed the recorder's first
    message and gives the decision (the first run makes it, a later one carries ``job``'s), the tasks to
    record and their work order; a group that forbids the library's generate runs in a sandbox without a
    working ``nexttoken.generate``."""
    settings, result = job.settings, RunResult()
    plan, without_generate = next_run(tasks, pending, settings, job.decision)
    with contextlib.ExitStack() as own:
        boxes = job.boxes or own.enter_context(launch.Sandboxes(settings, settings.uids[job.slot], job.data))
        with boxes.recorder(job.chapter, skip, without_generate) as started:
            Follower(started.proc, result, settings.timeout, job.budget_end, plan,
                     cells_at_most(job.data)).follow(started.read_end)
    result.out_of_memory = started.out_of_memory
    return result
