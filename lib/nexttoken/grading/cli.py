"""The command line: ``python -m nexttoken.grade`` (or ``python -m nexttoken.grading``)."""

import argparse
import importlib.util
import os
import sys
from pathlib import Path

from . import assignment, batch, outputs, rosters, sandbox
from ..recorder.words import counted
from .text import shown
from .run import Settings


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def merge(argv) -> int:
    """``python -m nexttoken.grade merge PART.csv [...] --out grades.csv [exports]``."""
    p = argparse.ArgumentParser(prog="python -m nexttoken.grade merge",
                                description="Join the grades CSVs of --shard runs into what one run writes.")
    p.add_argument("parts", nargs="+", type=Path, help="the grades CSVs of the shards (--out of each)")
    p.add_argument("--out", required=True, type=Path, help="the merged grades CSV")
    p.add_argument("--gradebook", type=Path, help="also write the gradebook, as one run would")
    add_export_arguments(p)
    args = p.parse_args(argv)
    to = outputs.outputs_of(args, check_export_arguments(p, args))
    if args.github_classroom:
        p.error("--github-classroom reports one runner's submissions: use it on a grading run, not a merge")
    # A shard's answers file, next to its grades CSV, is no part of its own: `merge grades-*.csv` lists both.
    companions = {outputs.explanations_path(part) for part in args.parts}
    args.parts = [part for part in args.parts if part not in companions]
    rows, owner, answers = [], {}, {}
    try:
        roster = rosters.read_roster(args.roster, args.ignore_case) if args.roster is not None else None
        for number, part in enumerate(args.parts):
            if not part.is_file():
                raise ValueError(f"{part} does not exist")
            for r in outputs.read_previous(part):
                first = owner.setdefault(r["submission"], number)
                if first != number:  # two shards graded it (or one CSV was given twice)
                    raise ValueError(f"{r['submission']} is graded in both {args.parts[first]} and {part}")
                rows.append(r)
            answers.update(outputs.read_answers(outputs.explanations_path(part)))
    except (ValueError, rosters.RosterError) as exc:  # outputs.UnreadableCSV among them: it names the shard
        print(f"python -m nexttoken.grade merge: {shown(exc)}", file=sys.stderr)
        return 2
    refused = assignment.mixed_chapters(to.assignment.chapter, to.lms_exports(roster is not None),
                                        assignment.chapters_of(rows))
    if refused is not None:
        print(f"python -m nexttoken.grade merge: {refused}; nothing was written", file=sys.stderr)
        return 2
    rows = outputs.write_grades(to, rows, roster, answers)
    outputs.write_explanations(to, rows, answers, roster)
    outputs.write_exports(to, rows, roster, answers)
    if roster is not None:
        outputs.report_roster(to, rows, roster, answers)
    page = outputs.write_report(to, rows, answers, roster)
    print(f"merged {counted(len(args.parts), 'CSV')}: {counted(len(owner), 'submission')}, "
          f"{counted(len(rows), 'row')}, into {shown(args.out)}; the class report: {shown(page)}")
    return 0


def shard(text: str) -> tuple[int, int]:
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise argparse.ArgumentTypeError(f"expected K/N with 1 <= K <= N (e.g. 2/8), got {text!r}")
    return int(k), int(n)


def add_export_arguments(p) -> None:
    p.add_argument("--roster", type=Path, help="CSV of the class: file (a file name or pattern such as s12_*.ipynb), "
                   "student_id, name, optional email, section, canvas_id, sis_user_id, sis_login_id; or Canvas's "
                   "gradebook export as it comes (its Download Submissions files are then placed by the Canvas "
                   "user id in their names); every row then carries its student, the gradebook and every export "
                   "have one row or file per student, and the roster's problems are listed next to --out "
                   "(grades.csv: grades-problems.csv)")
    p.add_argument("--ignore-case", action="store_true",
                   help="match file names to the roster's file patterns without regard to case (Unicode case "
                        "folding); they are always compared in Unicode NFC form")
    p.add_argument("--chapter", type=assignment.chapter_arg,
                   help="the assignment's chapter (5 or ch05): a notebook of another chapter gets 0 for it")
    p.add_argument("--count-practice", action="store_true",
                   help="count the practice tasks in the grade too (by default it counts the core tasks, what the "
                        "lesson asks of every learner; practice is reported beside it)")
    p.add_argument("--weight", type=assignment.weight_arg, action="append", metavar="TASK=POINTS",
                   help="a task's points in the grade, e.g. --weight ch05.q2=3 (q2=3 with --chapter); 0 leaves "
                        "it out; repeat for each task (the others keep their points)")
    p.add_argument("--canvas", type=Path,
                   help="also write Canvas's gradebook import CSV (needs --roster, --assignment)")
    p.add_argument("--assignment", help='the Canvas column, as Canvas names it: "NAME (ID)"')
    p.add_argument("--gradescope", type=Path, help="also write DIR/<student_id, or file>/results.json (Gradescope)")
    p.add_argument("--github-classroom", action="store_true",
                   help="print only the GitHub Classroom runner result (base64 JSON) on stdout, nothing on stderr")
    p.add_argument("--feedback", type=Path, help="also write DIR/<student_id, or file>.md, one per student "
                   "(with --roster) or submission")


def check_export_arguments(p, args) -> assignment.Assignment:
    """The checks every run and merge makes of the export arguments; the assignment they describe
    (``assignment.Assignment``: its chapter and points, what the grade counts)."""
    if args.canvas is not None and (args.roster is None or not args.assignment):
        p.error("--canvas needs --roster (Canvas's student ids) and --assignment \"NAME (ID)\"")
    try:
        return assignment.assignment_of(args)
    except ValueError as exc:
        p.error(str(exc))


def parse_args(argv):
    limits, defaults = sandbox.Limits(), Settings()  # the defaults live there, once
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    summary = (sys.modules[__package__].__doc__ or "").partition("\n")[0]  # the package docstring says it once
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
        return without_bubblewrap(args, limits, cgroups, uids)
    problem = sandbox.check_bwrap(limits, cgroups, uids[0])
    return problem if problem is not None else (cgroups, uids)


# --no-sandbox as root: the submission must find the package view alone (the allow-list and the stand-in, copied
# for it: sandbox.view_env), never the installed package, which holds the held-out inputs and the solutions.
PACKAGE_IN_REACH = ("--no-sandbox as root: user id {uid} can read the installed package ({package}), its exercises' "
                    "held-out inputs and references and the grader included, so the grader refuses. Make that "
                    "folder root's alone (chmod 0700 {package}, as scripts/gradescope/setup.sh does): a "
                    "submission then imports only the copy of what a sandbox shows of the package")


def without_bubblewrap(args, limits: sandbox.Limits, cgroups, uids: list) -> tuple[sandbox.Cgroups | None, list] | str:
    """--no-sandbox: as root, the slots' user ids, where one can start this Python from the package view and
    cannot reach the installed package; else the message refusing to grade (or, --trusted-as-root, root)."""
    problem = sandbox.allow_list_problem(sandbox.package_folder())
    if problem is not None:  # never a run with the whole package in reach, however trusted
        return problem
    if uids[0] is None:
        return cgroups, uids
    if not sandbox.can_run_as(uids[0], limits):
        if not args.trusted_as_root:
            return NOT_AS_ROOT.format(uid=uids[0], python=shown(sys.executable))
        print(f"WARNING: --trusted-as-root: user id {uids[0]} cannot start {shown(sys.executable)}, so these "
              "submissions run as root", file=sys.stderr)
        return cgroups, [None] * args.jobs
    if sandbox.package_reachable_by(uids[0]):
        return PACKAGE_IN_REACH.format(uid=uids[0], package=shown(sandbox.package_folder()))
    return cgroups, uids


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
    expected = assignment.assignment_of(args)  # parse_args checked it: the values built once, here
    settings = Settings(timeout=args.timeout, notebook_timeout=args.notebook_timeout, limits=limits,
                        use_sandbox=not args.no_sandbox, max_bytes=args.max_size * 1024 * 1024,
                        cgroups=cgroups, uids=uids, held_out=args.held_out, chapter=expected.chapter,
                        chapter_points=expected.points)
    try:
        return batch.run(args, settings, roster, outputs.outputs_of(args, expected))
    except outputs.UnreadableCSV as exc:  # --resume's --out, or its explanations next to it
        print(f"python -m nexttoken.grade: --resume: {shown(exc)}", file=sys.stderr)
        return 2
