"""The batch: every submission of one grading run, each in a sandbox of its own, --jobs at a time.

The submissions are read once, at the start (``Snapshots``), and files of the same bytes are graded once.
After each submission grades.csv and the explanations' answers are written again, whole: a run that is
killed loses nothing it graded, and --resume goes on from there. The exports follow at the end.
"""

import argparse
import hashlib
import queue
import shutil
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from . import assignment, exports, outputs, read, report, rows, sandbox
from ..recorder.words import counted
from .read import Snapshots
from .rosters import Roster
from .rows import Row, about_notebook, error_row
from .text import name_text, shown
from .judge import judge_held_out, judge_recording
from .run import Settings, held_out_pass, run_submission
from .launch import Sandboxes


@dataclass
class Batch:
    """One grading run's state, shared by the threads that grade (each writes only its own submission's
    entries) and the loop that saves after each submission."""
    args: argparse.Namespace  # the batch's own options: the submissions, --jobs, --resume, --shard
    settings: Settings
    to: outputs.Outputs  # what it writes, and for which assignment
    roster: Roster | None
    previous: list[Row]  # the rows of the submissions graded already (--resume)
    todo: list[str]  # the names to grade, in the order given
    snapshots: Snapshots
    copies: dict[str, list[str]]  # each name graded -> the later names of the same bytes (its rows too)
    answers: dict[str, dict]  # submission -> its explanation's answer
    graded: dict[str, list[Row]] = field(default_factory=dict)
    started: dict[str, float] = field(default_factory=dict)  # when each began in a slot (its time)
    slots: queue.Queue = field(default_factory=queue.Queue)  # the job slots free now (a sandbox user id each)
    rows: list[Row] = field(default_factory=list)  # every row, as last saved
    saved: bool = False  # whether the last save wrote grades.csv


def prepare(args, settings: Settings, roster: Roster | None, to: outputs.Outputs) -> Batch:
    """The batch to grade: the submissions given (one --shard's slice), less those --resume finds graded."""
    previous = outputs.read_previous(to.out) if args.resume else []
    done = {r["submission"] for r in previous}
    paths = {name_text(p): p for p in args.submissions}  # in order, once each
    answers = earlier_answers(to.out, done, paths, settings.max_bytes) if args.resume else {}
    if args.shard is not None:  # every N-th of the sorted names, from the K-th: the same slices on any machine
        k, n = args.shard
        paths = {name: paths[name] for i, name in enumerate(sorted(paths)) if i % n == k - 1}
    todo = [name for name in paths if name not in done]
    snapshots = Snapshots([paths[name] for name in todo], settings.max_bytes)
    batch = Batch(args, settings, to, roster, previous, todo, snapshots, copies_of(todo, snapshots.first), answers)
    for slot in range(args.jobs):
        batch.slots.put(slot)
    return batch


def grade_one(batch: Batch, name: str) -> list[Row]:
    """One submission's rows, graded in a free job slot; never raises. Its way through grading runs forward, a stage
    a module, each returning here: its snapshot and answer read (``read``), its runs in its sandbox, which
    starts Python and torch once and forks each run (``launch``, ``run``; the first run's first message
    decides its chapter and whether it is graded task by task, ``decide``), their records judged (``judge``),
    and with --held-out the tasks that passed run and judged again on their held-out inputs, then its rows, as
    the decision says (``rows``); ``save`` writes them (``outputs``)."""
    slot = batch.slots.get()
    batch.started[name] = time.monotonic()  # from its start in a slot, not from the batch's
    settings, recording = batch.settings, None
    try:
        data, problem = batch.snapshots.read(name)
        if problem is None:
            batch.answers[name] = answer_of(data)
            with Sandboxes(settings, settings.uids[slot], data) as boxes:  # ended before its rows are made
                recording = run_submission(data, settings, slot, boxes=boxes)
                judge_recording(recording)
                if settings.held_out and recording.tasks:
                    hidden = held_out_pass(recording, settings)
                    judge_held_out(recording, hidden)
        return rows.submission_rows(name, problem, recording, settings)
    except Exception as exc:  # a grader bug must not cost the other submissions their grades
        return [error_row(name, exc)]
    finally:
        batch.slots.put(slot)


def save(batch: Batch) -> None:
    """grades.csv (and the gradebook) and the explanations, with every row graded so far."""
    to = batch.to
    rows = batch.previous + [r for name in batch.todo if name in batch.graded for r in batch.graded[name]]
    try:
        batch.rows, batch.saved = outputs.write_grades(to, rows, batch.roster, batch.answers), True
    except Exception as exc:  # e.g. a full disk: keep grading, try again after the next submission
        print(f"WARNING: could not write {shown(to.out)}: {shown(exc)}", file=sys.stderr)
        batch.rows, batch.saved = rows, False
        return
    try:
        outputs.write_explanations(to, batch.rows, batch.answers, batch.roster)
    except Exception as exc:  # the grades are saved; the answers are tried again after the next one
        print(f"WARNING: could not write {shown(outputs.explanations_path(to.out))}: {shown(exc)}",
              file=sys.stderr)


def take(batch: Batch, name: str, rows: list[Row]) -> None:
    """A graded submission's rows, and the same rows (and answer) for each file of the same bytes."""
    batch.graded[name] = rows
    for same in batch.copies[name]:  # its rows, under the other file's name
        batch.graded[same] = [dict(r, submission=same) for r in rows]
        if name in batch.answers:
            batch.answers[same] = batch.answers[name]


def grade_all(batch: Batch) -> None:
    """Every submission to grade, --jobs at a time, saving after each and saying so on stderr."""
    start, count, scheme = time.monotonic(), 0, batch.to.assignment.scheme
    with ThreadPoolExecutor(max_workers=batch.args.jobs) as pool:
        futures = {pool.submit(grade_one, batch, name): name for name in batch.copies}
        for future in as_completed(futures):
            name = futures[future]
            try:
                rows = future.result()
            except BaseException as exc:  # grade_one returns rows; this is a last guard
                rows = [error_row(name, exc)]
            take(batch, name, rows)
            save(batch)
            count += 1
            progress(count, len(batch.todo), name, scheme.counted(rows),
                     time.monotonic() - batch.started.get(name, start))
            for same in batch.copies[name]:
                count += 1
                progress(count, len(batch.todo), same, scheme.counted(batch.graded[same]), 0.0,
                         same_as=name)


def run(args, settings: Settings, roster: Roster | None, to: outputs.Outputs) -> int:
    """Grade the batch, write the exports and print the grades; the exit code (1: something not written)."""
    batch = prepare(args, settings, roster, to)
    refused = mixed_batch(batch)
    if refused is not None:  # before anything is graded or written
        batch.snapshots.close()
        print(f"python -m nexttoken.grade: {refused}; nothing was graded or written", file=sys.stderr)
        return 2
    start = time.monotonic()
    save(batch)
    try:
        grade_all(batch)
    finally:
        batch.snapshots.close()
        sandbox.close_view()  # a run without bubblewrap made it: the batch owns it
        if settings.cgroups is not None:
            settings.cgroups.sweep()
    elapsed = time.monotonic() - start
    if not batch.saved:
        print(f"python -m nexttoken.grade: the grades could not be written to {shown(to.out)}", file=sys.stderr)
        return 1
    refused = assignment.mixed_chapters(settings.chapter, to.lms_exports(roster is not None),
                                        assignment.chapters_of(batch.rows))
    if refused is not None:  # chapters the first look did not find (mixed_batch): the grades, no export
        print(f"python -m nexttoken.grade: {refused}; the grades are in {shown(to.out)}, no export was written",
              file=sys.stderr)
        return 1
    try:
        outputs.write_exports(to, batch.rows, roster, batch.answers)
        problems = outputs.report_roster(to, batch.rows, roster, batch.answers) if roster is not None else None
        page = outputs.write_report(to, batch.rows, batch.answers, roster)
    except Exception as exc:  # the grades themselves are saved: say what failed, exit 1
        print(f"python -m nexttoken.grade: the exports could not be written: {shown(exc)}", file=sys.stderr)
        return 1
    if args.github_classroom:
        print(exports.github_classroom(batch.rows))
    else:
        summary(batch, elapsed, page, problems)
    return 0


def mixed_batch(batch: Batch) -> str | None:
    """The refusal of an LMS export of several chapters' notebooks without --chapter, from the chapters
    of the rows --resume keeps and of each snapshot (read as JSON text: nothing of it runs), or None."""
    asked = batch.to.lms_exports(batch.roster is not None)
    if batch.settings.chapter is not None or not asked:
        return None
    chapters = assignment.chapters_of(batch.previous)
    for name in batch.todo:
        data, problem = batch.snapshots.read(name)
        found = read.read_chapter(data) if problem is None else None
        if found is not None:
            chapters[found] += 1
    return assignment.mixed_chapters(batch.settings.chapter, asked, chapters)


def summary(batch: Batch, elapsed: float, page: Path, roster_problems: int | None) -> None:
    """A few lines on stdout: what was graded and how fast, the points, the problems, and what was written
    (each row is in grades.csv, each task's pass rate and mistakes in the class report)."""
    args, to, rows, todo = batch.args, batch.to, batch.rows, batch.todo
    if todo:
        repeated = len(todo) - len(batch.copies)
        print(f"graded {counted(len(todo), 'submission')} in {elapsed:.1f} s ({elapsed / len(todo):.1f} s each, "
              f"{args.jobs} at once{', NO sandbox' if args.no_sandbox else ''}"
              + (f"; {repeated} of the same bytes as another, graded once)" if repeated else ")"))
    print(f"{counted(len(report.totals(rows)), 'submission')} in all; "
          f"{report.points_summary(rows, outputs.most_points(to, rows))}")
    scheme = to.assignment.scheme
    print(f"{scheme.describe()[0].upper()}{scheme.describe()[1:]}"
          + ("" if scheme.practice or scheme.weights else " (--count-practice counts them too)"))
    print(problems_line(rows, roster_problems, to.out))
    print(f"wrote {counted(len(rows), 'row')} to {shown(to.out)}"
          + (f" and {shown(to.gradebook)}" if to.gradebook else "")
          + f"; the explanations' answers, to mark, to {shown(outputs.explanations_path(to.out))}")
    print(f"the class report (pass rates, mistakes, points): {shown(page)}")


def problems_line(rows: list[Row], roster_problems: int | None, out: Path) -> str:
    """The problems to look at: submissions not graded task by task, by status, and the roster's."""
    statuses = Counter(r["status"] for r in rows if about_notebook(r))
    said = ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()))
    line = f"problems: {counted(sum(statuses.values()), 'submission')} not graded task by task" + \
        (f" ({said})" if said else "")
    if roster_problems is not None:
        line += f"; {roster_problems} of the roster (in {shown(outputs.problems_path(out))})"
    return line


BAR = 30  # characters of the progress bar on a terminal


def progress(done: int, total: int, name: str, rows: list[Row], seconds: float, same_as: str | None = None) -> None:
    """Each graded submission on stderr: [12/200] s12_ch05.ipynb 4/4 in 2.1 s (or its status); a file of the
    same bytes as one graded already: "... 4/4, the same bytes as s07_ch05.ipynb". Through a pipe, a line
    each; on a terminal, a progress bar redrawn in place (carriage return), with the last one graded."""
    points, most = sum(int(r["points"]) for r in rows), sum(int(r["max_points"]) for r in rows)
    if not about_notebook(rows[0]):
        score = f"{points}/{most}"
    else:  # the notebook as a whole: its status, and "0/5" where --chapter gives the assignment's points
        score = rows[0]["status"] + (f" {points}/{most}" if most else "")
    how = f"in {seconds:.1f} s" if same_as is None else f"the same bytes as {shown(Path(same_as).name)}: graded once"
    line = f"[{done}/{total}] {shown(Path(name).name)} {score} {how}"
    if not sys.stderr.isatty():  # a pipe or a log: one line each, no animation
        print(line, file=sys.stderr, flush=True)
        return
    filled = BAR * done // max(total, 1)
    bar = f"\r\x1b[K|{'#' * filled}{'.' * (BAR - filled)}| {line}"[:shutil.get_terminal_size().columns + 4]
    print(bar, end="\n" if done >= total else "", file=sys.stderr, flush=True)  # the bar redrawn in place


def copies_of(todo: list[str], first: dict[str, str]) -> dict[str, list[str]]:
    """Each name to grade -> the later names of the same bytes, whose rows are its rows (graded once)."""
    found: dict[str, list[str]] = {}
    for name in todo:
        found.setdefault(first.get(name, name), []).append(name)
    return {name: same[1:] for name, same in found.items()}


def earlier_answers(out: Path, done: set[str], paths: dict[str, Path], max_bytes: int) -> dict[str, dict]:
    """--resume: the answers of the submissions graded already, as the earlier run (writing ``out``) wrote
    them, or, where it did not (a run killed before it wrote them), read again from the file: JSON text
    only, never run."""
    answers = outputs.read_answers(outputs.explanations_path(out))
    for name in done - set(answers):
        if name in paths:
            data, problem = read.read_submission(paths[name], max_bytes)
            if problem is None:
                answers[name] = answer_of(data)
    return answers


def answer_of(data: bytes) -> dict:
    """A submission's explanation answer (``read.answer``) and its bytes' digest, which the explanations CSV
    and the class report show, so that notebooks of the same bytes are seen, in one run or in shards merged."""
    return {**read.answer(data), "notebook_sha256": hashlib.sha256(data).hexdigest()}
