"""How many submissions a minute does the batch grader get through, and what does the sandbox cost?

    .venv/bin/python bench/grade_throughput.py            # 8 copies of solutions/ch05.ipynb (each its own bytes)
    .venv/bin/python bench/grade_throughput.py --n 2      # a short smoke run of the same code
    .venv/bin/python bench/grade_throughput.py --class 200  # a synthetic class, at class scale
    .venv/bin/python bench/grade_throughput.py --class 100 --held-out --jobs 2  # as a class is graded

Grades N copies of one solution notebook with ``--jobs 1`` and ``--jobs 2``, each in a bubblewrap sandbox
and again with ``--no-sandbox``, and prints wall seconds per submission (the grader's own start-up
included, as an instructor sees it) and the sandbox's overhead per submission. Every copy must score
full marks, or the figures would time a failure. Runs are interleaved (sandboxed, then not, per round)
and each figure is the median of the rounds.

With ``--class N`` it grades a synthetic class instead, sandboxed, with ``--jobs 1`` and then ``--jobs 2``
(or the ``--jobs`` given), with ``--held-out`` where asked:
N notebooks cycling through every chapter's solution (most), its exercise as handed out (stubs), and
one in ten hostile (a task that never returns, a cell that hangs, a process that kills itself). It
prints submissions per minute, the seconds the hanging ones cost (from the grader's progress lines),
the largest memory any process of the run held (max RSS), and what a class of 1,000 would take.
"""

import argparse
import csv
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def grade_once(folder: Path, names: list[str], jobs: int, sandbox: bool) -> float:
    out = folder / f"grades-{jobs}-{sandbox}.csv"
    cmd = [sys.executable, "-m", "nexttoken.grade", "--out", str(out), "--jobs", str(jobs), "--timeout", "120"]
    cmd += [] if sandbox else ["--no-sandbox", "--trusted-as-root"]  # the course's own solutions
    start = time.perf_counter()
    result = subprocess.run(cmd + ["--", *names], cwd=folder, capture_output=True, text=True, timeout=3600)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"the grader failed: {result.stderr[-2000:]}")
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    if len({r["submission"] for r in rows}) != len(names) or any(r["status"] != "passed" for r in rows):
        sys.exit(f"not every copy scored full marks: {[(r['submission'], r['status']) for r in rows][:6]}")
    return elapsed


def unique_copy(source: Path, target: Path, number: int) -> None:
    """A copy of a notebook whose bytes are its own (a number in its metadata): the grader grades files
    of the same bytes once, which would time one grading instead of N."""
    import json

    nb = json.loads(source.read_text(encoding="utf-8"))
    nb.setdefault("metadata", {})["bench_copy"] = number
    target.write_text(json.dumps(nb, indent=1), encoding="utf-8")


HOSTILE = {  # cells appended to a copy of an exercise: each costs the grader time, never a crash
    "hangs_in_a_task": "def causal_mask(T):\n    while True:\n        pass\n",
    "hangs_in_a_cell": "while True:\n    pass\n",
    "kills_itself": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
}


def synthetic_class(folder: Path, n: int) -> tuple[list[str], set[str]]:
    """N notebooks: every tenth hostile (on chapter 2's exercise), the rest cycling through solutions (3 in
    4) and exercises as handed out (1 in 4), over the seven chapters. Returns the names and the hostile ones."""
    import nbformat

    names, hostile = [], set()
    for i in range(n):
        chapter = f"ch0{i % 7 + 1}"
        if i % 10 == 9:
            kind = list(HOSTILE)[(i // 10) % len(HOSTILE)]
            nb = nbformat.read(ROOT / "exercises" / "ch02.ipynb", as_version=4)
            nb.cells.append(nbformat.v4.new_code_cell(HOSTILE[kind]))
            name = f"s{i:04d}_{kind}.ipynb"
            hostile.add(name)
            nb.metadata["bench_copy"] = i  # its own bytes, as every copy here (unique_copy)
            nbformat.write(nb, folder / name)
        else:
            source = "exercises" if i % 4 == 3 else "solutions"
            name = f"s{i:04d}_{source}_{chapter}.ipynb"
            unique_copy(ROOT / source / f"{chapter}.ipynb", folder / name, i)
        names.append(name)
    return names, hostile


def grade_class(folder: Path, names: list[str], hostile: set[str], jobs: int, timeout: int,
                held_out: bool = False) -> dict:
    cmd = [sys.executable, "-m", "nexttoken.grade", "--out", f"class-{jobs}.csv", "--jobs", str(jobs),
           "--timeout", str(timeout), *(["--held-out"] if held_out else []), "--", *names]
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=24 * 3600)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"the grader failed: {result.stderr[-2000:]}")
    seconds = {}  # submission -> its seconds, from the grader's progress lines
    for line in result.stderr.splitlines():
        found = re.match(r"^\[\d+/\d+\] (\S+) .* in ([\d.]+) s$", line)
        if found:
            seconds[found[1]] = float(found[2])
    normal = statistics.median(t for name, t in seconds.items() if name not in hostile)
    lost = sum(t - normal for name, t in seconds.items() if name in hostile)
    with open(folder / f"class-{jobs}.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len({r["submission"] for r in rows}) == len(names), "a submission has no row"
    return dict(elapsed=elapsed, per_minute=60 * len(names) / elapsed, lost=lost, normal=normal)


def class_main(n: int, timeout: int, jobs_list: list[int], held_out: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="grade-class-") as tmp:
        folder = Path(tmp)
        names, hostile = synthetic_class(folder, n)
        runs = {jobs: grade_class(folder, names, hostile, jobs, timeout, held_out) for jobs in jobs_list}
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # kB on Linux
    print(f"a synthetic class of {n} ({len(hostile)} hostile), sandboxed, --timeout {timeout}"
          + (", --held-out" if held_out else ""))
    print(f"{'jobs':>4}  {'wall s':>8}  {'per minute':>10}  {'s each (median)':>15}  {'s lost to hangs':>15}")
    for jobs, r in runs.items():
        print(f"{jobs:>4}  {r['elapsed']:8.1f}  {r['per_minute']:10.1f}  {r['normal']:15.2f}  {r['lost']:15.1f}")
    print(f"largest memory of one process in these runs (max RSS): {peak_mb:.0f} MB")
    best = max(runs.values(), key=lambda r: r["per_minute"])
    print(f"a class of 1,000 at this rate: about {1000 / best['per_minute']:.0f} minutes "
          f"(--jobs {max(runs, key=lambda j: runs[j]['per_minute'])}, this machine)")


def main():
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--n", type=int, default=8, help="copies of the solution to grade (default 8)")
    parser.add_argument("--rounds", type=int, default=1, help="repeats of each configuration (default 1)")
    parser.add_argument("--notebook", type=Path, default=ROOT / "solutions" / "ch05.ipynb")
    parser.add_argument("--class", dest="class_size", type=int, help="grade a synthetic class of this size instead")
    parser.add_argument("--timeout", type=int, default=10, help="--class: the grader's --timeout (default 10 s)")
    parser.add_argument("--held-out", action="store_true", help="--class: grade with --held-out, as a class is")
    parser.add_argument("--jobs", type=int, action="append",
                        help="--class: the --jobs to time, repeatable (default: 1, then 2)")
    args = parser.parse_args()
    if args.class_size is not None:
        if args.class_size < 10:
            parser.error("--class needs at least 10 submissions (one in ten is hostile)")
        if shutil.which("bwrap") is None:
            sys.exit("bubblewrap is not installed: run 'sudo bash scripts/setup_sandbox.sh'")
        return class_main(args.class_size, args.timeout, args.jobs or [1, 2], args.held_out)
    if args.n < 1 or args.rounds < 1:
        parser.error("--n and --rounds must be at least 1")
    if shutil.which("bwrap") is None:
        sys.exit("bubblewrap is not installed: run 'sudo bash scripts/setup_sandbox.sh'")

    with tempfile.TemporaryDirectory(prefix="grade-throughput-") as tmp:
        folder = Path(tmp)
        names = []
        for i in range(args.n):
            name = f"copy-{i:03d}.ipynb"
            unique_copy(args.notebook, folder / name, i)
            names.append(name)
        times: dict[tuple[int, bool], list[float]] = {}
        for _ in range(args.rounds):
            for jobs in (1, 2):
                for sandbox in (True, False):
                    times.setdefault((jobs, sandbox), []).append(grade_once(folder, names, jobs, sandbox))

    print(f"{args.n} copies of {args.notebook.name}, median of {args.rounds} round(s), wall time incl. start-up")
    print(f"{'jobs':>4}  {'sandbox':>10}  {'total s':>8}  {'s/submission':>12}")
    per = {}
    for (jobs, sandbox), values in sorted(times.items(), key=lambda kv: (kv[0][0], not kv[0][1])):
        total = statistics.median(values)
        per[jobs, sandbox] = total / args.n
        print(f"{jobs:>4}  {'bwrap' if sandbox else 'none':>10}  {total:8.1f}  {total / args.n:12.2f}")
    for jobs in (1, 2):
        overhead = per[jobs, True] - per[jobs, False]
        print(f"sandbox overhead with --jobs {jobs}: {overhead:+.2f} s per submission "
              f"({overhead / per[jobs, False]:+.0%})")
    print(f"--jobs 2 vs --jobs 1 (sandboxed): {per[1, True] / per[2, True]:.2f}x the throughput")


if __name__ == "__main__":
    main()
