"""The command line: ``python -m nexttoken.grade`` (or ``python -m nexttoken.grading``)."""

import argparse
import importlib.util
import json
import os
import queue
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from . import assignment, explanations, exports, rosters, sandbox
from .csvs import (FIELDS, about_notebook, clean, clean_rows, counted, error_row, gradebook, name_text,
                   notebook_row, read_previous, shown, write_csv)
from .notebook import grade_notebook
from .runner import Settings
from .submissions import Snapshots, read_submission

def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def progress(done: int, total: int, name: str, rows: list[dict], seconds: float, same_as: str | None = None) -> None:
    """One line on stderr per graded submission: [12/200] s12_ch05.ipynb 4/4 in 2.1 s (or its status);
    a file of the same bytes as one graded already: "... 4/4, the same bytes as s07_ch05.ipynb"."""
    points, most = sum(int(r["points"]) for r in rows), sum(int(r["max_points"]) for r in rows)
    if not about_notebook(rows[0]):
        score = f"{points}/{most}"
    else:  # the notebook as a whole: its status, and "0/5" where --chapter gives the assignment's points
        score = rows[0]["status"] + (f" {points}/{most}" if most else "")
    how = f"in {seconds:.1f} s" if same_as is None else f"the same bytes as {shown(Path(same_as).name)}: graded once"
    print(f"[{done}/{total}] {shown(Path(name).name)} {score} {how}", file=sys.stderr, flush=True)


def copies_of(todo: list[str], first: dict[str, str]) -> dict[str, list[str]]:
    """Each name to grade -> the later names of the same bytes, whose rows are its rows (graded once)."""
    found: dict[str, list[str]] = {}
    for name in todo:
        found.setdefault(first.get(name, name), []).append(name)
    return {name: same[1:] for name, same in found.items()}


def most_points(args, rows: list[dict]) -> int:
    """The assignment's points: its chapter's with --chapter, else the most a graded submission can get."""
    return exports.assignment_max(rows, assignment.chapter_points(args.chapter) if args.chapter else None)


def write_grades(args, rows: list[dict], roster: rosters.Roster | None) -> list[dict]:
    """grades.csv and the gradebook; returns the rows in the order written: by submission (a stable sort,
    each submission's tasks in order), so that merged shards give exactly what one run writes."""
    rows = sorted(assignment.for_assignment(rows, args.chapter), key=lambda r: r["submission"])
    most = most_points(args, rows)
    if roster is None:
        write_csv(args.out, FIELDS, rows)
    else:
        write_csv(args.out, FIELDS + rosters.IDENTITY, exports.with_identity(rows, roster, most))
    if args.gradebook is not None:
        write_csv(args.gradebook, *(gradebook(rows) if roster is None else
                                    exports.student_gradebook(rows, roster, most)))
    return rows


def problems_path(out: Path) -> Path:
    """Where a run with --roster lists the roster's problems: next to --out (grades.csv: grades-problems.csv)."""
    return out.with_name(f"{out.stem}-problems.csv")


def report_roster(args, rows: list[dict], roster: rosters.Roster) -> None:
    """Every roster problem in the problems file, and on stderr their counts and the first few, named."""
    found = exports.problems(rows, roster)
    write_csv(problems_path(args.out), exports.PROBLEM_FIELDS, found)
    counts = Counter(p["problem"] for p in found)
    said = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "none"
    files = counted(len(exports.per_submission(rows)), "file")
    print(f"roster: {counted(len(roster.students), 'student')}, {files}; problems: {said}"
          f" (all in {shown(problems_path(args.out))})", file=sys.stderr)
    for p in found[:20]:  # e.g. "duplicate_submission: a1 Alice: alice_v2.ipynb: not counted"
        who = f"{p['student_id']} {p['name']}".strip()
        parts = (p["problem"], who, Path(p["submission"]).name if p["submission"] else "", p["detail"])
        print("  " + shown(": ".join(part for part in parts if part)), file=sys.stderr)
    if len(found) > 20:
        print(f"  ... and {len(found) - 20} more", file=sys.stderr)


def merge(argv) -> int:
    """``python -m nexttoken.grade merge PART.csv [...] --out grades.csv [exports]``."""
    p = argparse.ArgumentParser(prog="python -m nexttoken.grade merge",
                                description="Join the grades CSVs of --shard runs into what one run writes.")
    p.add_argument("parts", nargs="+", type=Path, help="the grades CSVs of the shards (--out of each)")
    p.add_argument("--out", required=True, type=Path, help="the merged grades CSV")
    p.add_argument("--gradebook", type=Path, help="also write the gradebook, as one run would")
    add_export_arguments(p)
    args = p.parse_args(argv)
    check_export_arguments(p, args)
    if args.github_classroom:
        p.error("--github-classroom reports one runner's submissions: use it on a grading run, not a merge")
    # A shard's answers file, next to its grades CSV, is no part of its own: `merge grades-*.csv` lists both.
    companions = {explanations.explanations_path(part) for part in args.parts}
    args.parts = [part for part in args.parts if part not in companions]
    rows, owner, answers = [], {}, {}
    try:
        roster = rosters.read_roster(args.roster, args.ignore_case) if args.roster is not None else None
        for number, part in enumerate(args.parts):
            if not part.is_file():
                raise ValueError(f"{part} does not exist")
            for r in read_previous(part):
                first = owner.setdefault(r["submission"], number)
                if first != number:  # two shards graded it (or one CSV was given twice)
                    raise ValueError(f"{r['submission']} is graded in both {args.parts[first]} and {part}")
                rows.append(r)
            answers.update(explanations.read(explanations.explanations_path(part)))
    except (ValueError, rosters.RosterError) as exc:
        print(f"python -m nexttoken.grade merge: {shown(exc)}", file=sys.stderr)
        return 2
    rows = write_grades(args, rows, roster)
    write_explanations(args, rows, answers, roster)
    write_exports(args, rows, roster, answers)
    if roster is not None:
        report_roster(args, rows, roster)
    print(f"merged {counted(len(args.parts), 'CSV')}: {counted(len(owner), 'submission')}, "
          f"{counted(len(rows), 'row')}, into {shown(args.out)}")
    return 0


def write_explanations(args, rows: list[dict], answers: dict[str, dict], roster: rosters.Roster | None) -> None:
    """The explanations' answers next to --out, for the instructor to mark (no points counted here)."""
    explanations.write(explanations.explanations_path(args.out), rows, answers, roster, args.chapter)


def read_answer(data: bytes) -> dict:
    """The explanation's answer in a submission's bytes (JSON text, read here: nothing of it runs); a bug
    in reading it costs the answer, never the submission's grades."""
    try:
        return explanations.read_answer(data)
    except Exception as exc:
        return {"status": "not_read", "answer": f"not read: the grader could not read it ({type(exc).__name__})"}


def earlier_answers(args, done: set[str], paths: dict[str, Path], max_bytes: int) -> dict[str, dict]:
    """--resume: the answers of the submissions graded already, as the earlier run wrote them, or, where it
    did not (a run killed before it wrote them), read again from the file: JSON text only, never run."""
    answers = explanations.read(explanations.explanations_path(args.out))
    for name in done - set(answers):
        if name in paths:
            data, problem = read_submission(paths[name], max_bytes)
            if problem is None:
                answers[name] = read_answer(data)
    return answers


def write_exports(args, rows: list[dict], roster: rosters.Roster | None, answers: dict[str, dict]) -> None:
    """Canvas, Gradescope and the feedback files, from the same rows as grades.csv: with a roster, one
    of each per roster student, named by the roster; without, one per submission. Each results.json also
    holds the explanation's answer, question and rubric as a test of 0 points hidden from the student,
    for the instructor to mark (on Gradescope the grader's CSVs are not kept)."""
    if args.canvas is not None:
        write_csv(args.canvas, *exports.canvas(rows, roster, args.assignment))
    for folder in (args.gradescope, args.feedback):
        if folder is not None:
            folder.mkdir(exist_ok=True)
    explained = {r["submission"]: r for r in explanations.export_rows(rows, answers, args.chapter)}
    for stem, results, feedback in exports.per_file(rows, roster, most_points(args, rows), explained):
        if args.gradescope is not None:
            (args.gradescope / stem).mkdir(exist_ok=True)
            exports.write_text(args.gradescope / stem / "results.json", json.dumps(results, indent=2) + "\n")
        if args.feedback is not None:
            exports.write_text(args.feedback / f"{stem}.md", feedback)


def shard(text: str) -> tuple[int, int]:
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise argparse.ArgumentTypeError(f"expected K/N with 1 <= K <= N (e.g. 2/8), got {text!r}")
    return int(k), int(n)


def add_export_arguments(p) -> None:
    p.add_argument("--roster", type=Path, help="CSV of the class: file (a file name or pattern such as s12_*.ipynb), "
                   "student_id, name, optional email, section, canvas_id, sis_user_id, sis_login_id; every row "
                   "then carries its student, the gradebook and every export have one row or file per "
                   "student, and the roster's problems are listed next to --out (grades.csv: grades-problems.csv)")
    p.add_argument("--ignore-case", action="store_true",
                   help="match file names to the roster's file patterns without regard to case (Unicode case "
                        "folding); they are always compared in Unicode NFC form")
    p.add_argument("--chapter", type=assignment.chapter_arg,
                   help="the assignment's chapter (5 or ch05): a notebook of another chapter gets 0 for it")
    p.add_argument("--canvas", type=Path,
                   help="also write Canvas's gradebook import CSV (needs --roster, --assignment)")
    p.add_argument("--assignment", help='the Canvas column, as Canvas names it: "NAME (ID)"')
    p.add_argument("--gradescope", type=Path, help="also write DIR/<student_id, or file>/results.json (Gradescope)")
    p.add_argument("--github-classroom", action="store_true",
                   help="print only the GitHub Classroom runner result (base64 JSON) on stdout, nothing on stderr")
    p.add_argument("--feedback", type=Path, help="also write DIR/<student_id, or file>.md, one per student "
                   "(with --roster) or submission")


def check_export_arguments(p, args) -> None:
    if args.canvas is not None and (args.roster is None or not args.assignment):
        p.error("--canvas needs --roster (Canvas's student ids) and --assignment \"NAME (ID)\"")


def parse_args(argv):
    limits, defaults = sandbox.Limits(), Settings()  # the defaults live there, once
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    summary = sys.modules[__package__].__doc__.splitlines()[0]  # the package's docstring says it once
    p = argparse.ArgumentParser(prog="python -m nexttoken.grade", description=summary,
                                epilog="Use -- before the submissions when a file name may start with '-'.")
    p.add_argument("submissions", nargs="+", type=Path)
    p.add_argument("--out", required=True, type=Path, help="grades CSV, one row per submission and task")
    p.add_argument("--gradebook", type=Path, help="also write one row per submission: task points and total")
    p.add_argument("--resume", action="store_true", help="keep the rows already in --out; grade only the rest")
    p.add_argument("--timeout", type=positive_int, default=defaults.timeout,
                   help=f"seconds per cell and per task's function calls (default {defaults.timeout})")
    p.add_argument("--notebook-timeout", type=positive_int, default=defaults.notebook_timeout,
                   help=f"seconds in all per submission, re-runs included (default {defaults.notebook_timeout})")
    p.add_argument("--jobs", type=positive_int, default=cores,
                   help=f"submissions graded at once, each in its own sandbox (default: the cores, {cores})")
    p.add_argument("--memory", type=positive_int, default=limits.memory_mb,
                   help=f"MB of address space per process (default {limits.memory_mb})")
    p.add_argument("--total-memory", type=positive_int, default=limits.total_memory_mb,
                   help="MB of memory of every kind per sandbox, tmpfs and kernel memory included (its "
                        f"cgroup; default {limits.total_memory_mb})")
    p.add_argument("--processes", type=positive_int, default=limits.processes,
                   help=f"processes and threads per submission (default {limits.processes})")
    p.add_argument("--file-size", type=positive_int, default=limits.file_size_mb,
                   help=f"MB, the largest file a submission may write (default {limits.file_size_mb})")
    p.add_argument("--cpu-time", type=positive_int, default=None,
                   help="CPU seconds per process (default: --notebook-timeout)")
    p.add_argument("--max-size", type=positive_int, default=defaults.max_bytes >> 20,
                   help=f"MB, the largest submission file read (default {defaults.max_bytes >> 20})")
    p.add_argument("--held-out", action="store_true",
                   help="also judge each task on its held-out inputs, which no learner's check runs (named in "
                        "feedback, never shown); give it to every shard and --resume run of one class alike")
    add_export_arguments(p)
    p.add_argument("--shard", type=shard, help="K/N: grade only the K-th of N slices of the submissions (sorted "
                   "by name, every N-th from the K-th); 'python -m nexttoken.grade merge' joins the CSVs")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run submissions without bubblewrap: ONLY for trusted submissions, or a container that "
                        "holds one submission (as root, its code still runs as a user id of its own, and every "
                        "process of that id is killed after each run; where that id cannot start this Python, "
                        "the grader refuses)")
    p.add_argument("--trusted-as-root", action="store_true",
                   help="with --no-sandbox as root, where no other user id can start this Python: run the "
                        "submissions as root. ONLY for notebooks you wrote (your solutions, the course's tests); "
                        "never for a class")
    p.add_argument("--allow-no-cgroup", action="store_true",
                   help="grade even where no cgroup can be had (per-process limits only; see the warning)")
    args = p.parse_args(argv)
    check_export_arguments(p, args)
    return args


# --no-sandbox as root runs each submission as a user id of its own; where that id cannot start the grader's
# Python, the grader stops rather than run the submission as root (which could rewrite the grader itself).
NOT_AS_ROOT = ("--no-sandbox as root: user id {uid} cannot start {python} (is it under a folder only root can "
               "open, such as a pyenv or conda in /root?), and a submission never runs as root. The image must "
               "provide a Python that every user can run (the system's /usr/bin/python3 with the package "
               "installed system-wide, as scripts/gradescope/setup.sh does), or bubblewrap and user namespaces "
               "for the sandbox. (--trusted-as-root runs them as root: for notebooks you wrote, never a class)")


def setup(args, limits: sandbox.Limits) -> tuple[sandbox.Cgroups | None, list] | str:
    """The cgroups and sandbox user ids to grade with, or the message refusing to grade."""
    if not args.no_sandbox and sandbox.bwrap_path() is None:
        return sandbox.INSTALL_MESSAGE
    cgroups, why = sandbox.find_cgroups()
    if cgroups is None and not (args.allow_no_cgroup or args.no_sandbox):
        return why
    if cgroups is None:
        print(f"WARNING: {why.splitlines()[0].rstrip('.')}; --allow-no-cgroup: grading with per-process limits only",
              file=sys.stderr)
    else:
        print(f"limits per sandbox: {cgroups.describe()}, {limits.total_memory_mb} MB, "
              f"{limits.processes} processes", file=sys.stderr)
        cgroups.sweep()  # groups a killed grader left behind
    try:  # as root, even --no-sandbox runs each job's code as a user id of its own (None each if not root)
        uids = sandbox.allocate_uids(args.jobs)
    except sandbox.SandboxError as exc:
        return str(exc)
    if args.no_sandbox:
        if uids[0] is not None and not sandbox.can_run_as(uids[0], limits):
            if not args.trusted_as_root:
                return NOT_AS_ROOT.format(uid=uids[0], python=shown(sys.executable))
            print(f"WARNING: --trusted-as-root: user id {uids[0]} cannot start {shown(sys.executable)}, so these "
                  "submissions run as root", file=sys.stderr)
            return cgroups, [None] * args.jobs
        return cgroups, uids
    problem = sandbox.check_bwrap(limits, cgroups, uids[0])
    return problem if problem is not None else (cgroups, uids)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["merge"]:  # a submission named "merge" is graded with "-- merge"
        return merge(argv[1:])
    args = parse_args(argv)
    for stream in (sys.stdout, sys.stderr):  # a terminal that is not UTF-8 must not stop the batch
        stream.reconfigure(errors="backslashreplace")
    limits = sandbox.Limits(memory_mb=args.memory, total_memory_mb=args.total_memory, processes=args.processes,
                            file_size_mb=args.file_size, cpu_s=args.cpu_time or args.notebook_timeout)
    for target in (args.out, args.gradebook, args.canvas, args.gradescope, args.feedback):
        if target is not None and not target.parent.is_dir():
            print(f"python -m nexttoken.grade: the folder of {shown(target)} does not exist", file=sys.stderr)
            return 2
    try:
        roster = rosters.read_roster(args.roster, args.ignore_case) if args.roster is not None else None
    except rosters.RosterError as exc:
        print(f"python -m nexttoken.grade: {shown(exc)}", file=sys.stderr)
        return 2
    if args.github_classroom:  # the reporter's payload alone on stdout, and nothing on stderr
        sys.stderr = open(os.devnull, "w")
    if args.held_out and importlib.util.find_spec("nexttoken.exercises.held_out") is None:
        print("python -m nexttoken.grade: --held-out: this nexttoken is a student build, without the held-out "
              "test cases; grade with the full package (the one the README installs, not the student wheel)",
              file=sys.stderr)
        return 2
    ready = setup(args, limits)
    if isinstance(ready, str):
        print(f"python -m nexttoken.grade: {ready}", file=sys.stderr)
        return 2
    if args.no_sandbox:
        print("WARNING: --no-sandbox: submissions run without isolation; use it for trusted ones only",
              file=sys.stderr)
    cgroups, uids = ready
    settings = Settings(timeout=args.timeout, notebook_timeout=args.notebook_timeout, limits=limits,
                        use_sandbox=not args.no_sandbox, max_bytes=args.max_size * 1024 * 1024,
                        cgroups=cgroups, uids=uids, held_out=args.held_out, chapter=args.chapter)

    previous = read_previous(args.out) if args.resume else []
    done = {r["submission"] for r in previous}
    paths = {name_text(p): p for p in args.submissions}  # in order, once each
    answers = earlier_answers(args, done, paths, settings.max_bytes) if args.resume else {}
    if args.shard is not None:  # every N-th of the sorted names, from the K-th: the same slices on any machine
        k, n = args.shard
        paths = {name: paths[name] for i, name in enumerate(sorted(paths)) if i % n == k - 1}
    todo = [name for name in paths if name not in done]
    snapshots = Snapshots([paths[name] for name in todo], settings.max_bytes)
    copies = copies_of(todo, snapshots.first)  # identical files (same bytes): graded once, a row set each
    graded: dict[str, list[dict]] = {}
    slots: queue.Queue = queue.Queue()
    for slot in range(args.jobs):
        slots.put(slot)

    started: dict[str, float] = {}

    def grade_one(name: str) -> list[dict]:
        slot = slots.get()
        started[name] = time.monotonic()  # from its start in a slot, not from the batch's
        try:
            data, problem = snapshots.read(name)
            if problem is not None:
                rows = [notebook_row(name, problem[0], clean(problem[1]))]
            else:
                answers[name] = read_answer(data)
                rows = clean_rows(grade_notebook(name, data, settings, slot))
            return assignment.for_assignment(rows, args.chapter)
        except Exception as exc:  # a grader bug must not cost the other submissions their grades
            return [error_row(name, exc)]
        finally:
            slots.put(slot)

    def save() -> tuple[list[dict], bool]:
        rows = previous + [r for name in todo if name in graded for r in graded[name]]
        try:
            rows = write_grades(args, rows, roster)
        except Exception as exc:  # e.g. a full disk: keep grading, try again after the next submission
            print(f"WARNING: could not write {shown(args.out)}: {shown(exc)}", file=sys.stderr)
            return rows, False
        try:
            write_explanations(args, rows, answers, roster)
        except Exception as exc:  # the grades are saved; the answers are tried again after the next one
            print(f"WARNING: could not write {shown(explanations.explanations_path(args.out))}: {shown(exc)}",
                  file=sys.stderr)
        return rows, True

    start = time.monotonic()
    rows, saved = save()
    try:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {pool.submit(grade_one, name): name for name in copies}
            count = 0
            for future in as_completed(futures):
                name = futures[future]
                try:
                    graded[name] = future.result()
                except BaseException as exc:  # grade_one returns rows; this is a last guard
                    graded[name] = [error_row(name, exc)]
                for same in copies[name]:  # its rows, under the other file's name
                    graded[same] = [dict(r, submission=same) for r in graded[name]]
                    if name in answers:
                        answers[same] = answers[name]
                rows, saved = save()
                count += 1
                progress(count, len(todo), name, graded[name], time.monotonic() - started.get(name, start))
                for same in copies[name]:
                    count += 1
                    progress(count, len(todo), same, graded[same], 0.0, same_as=name)
    finally:
        snapshots.close()
        if cgroups is not None:
            cgroups.sweep()
    elapsed = time.monotonic() - start
    if not saved:
        print(f"python -m nexttoken.grade: the grades could not be written to {shown(args.out)}", file=sys.stderr)
        return 1

    try:
        write_exports(args, rows, roster, answers)
        if roster is not None:
            report_roster(args, rows, roster)
    except Exception as exc:  # the grades themselves are saved: say what failed, exit 1
        print(f"python -m nexttoken.grade: the exports could not be written: {shown(exc)}", file=sys.stderr)
        return 1
    if args.github_classroom:
        print(exports.github_classroom(rows))
        return 0
    print(f"{'submission':40s} {'task':10s} {'points':>6s}  status")
    for r in rows:
        print(f"{shown(Path(r['submission']).name)[:40]:40s} {shown(r['task']):10s} "
              f"{r['points']:>3}/{r['max_points']:<2}  {shown(r['status'])}")
    if todo:
        repeated = len(todo) - len(copies)
        print(f"graded {counted(len(todo), 'submission')} in {elapsed:.1f} s ({elapsed / len(todo):.1f} s each, "
              f"{args.jobs} at once{', NO sandbox' if args.no_sandbox else ''}"
              + (f"; {repeated} of the same bytes as another, graded once)" if repeated else ")"))
    print(f"wrote {counted(len(rows), 'row')} to {shown(args.out)}"
          + (f" and {shown(args.gradebook)}" if args.gradebook else "")
          + f"; the explanations' answers, to mark, to {shown(explanations.explanations_path(args.out))}")
    return 0
