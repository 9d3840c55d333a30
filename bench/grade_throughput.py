"""How many submissions a minute does the batch grader get through, and what does the sandbox cost?

    .venv/bin/python bench/grade_throughput.py            # 8 copies of solutions/ch05.ipynb
    .venv/bin/python bench/grade_throughput.py --n 2      # a short smoke run of the same code

Grades N copies of one solution notebook with ``--jobs 1`` and ``--jobs 2``, each in a bubblewrap sandbox
and again with ``--no-sandbox``, and prints wall seconds per submission (the grader's own start-up
included, as an instructor sees it) and the sandbox's overhead per submission. Every copy must score
full marks, or the figures would time a failure. Runs are interleaved (sandboxed, then not, per round)
and each figure is the median of the rounds.
"""

import argparse
import csv
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
    cmd += [] if sandbox else ["--no-sandbox"]
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8, help="copies of the solution to grade (default 8)")
    parser.add_argument("--rounds", type=int, default=1, help="repeats of each configuration (default 1)")
    parser.add_argument("--notebook", type=Path, default=ROOT / "solutions" / "ch05.ipynb")
    args = parser.parse_args()
    if args.n < 1 or args.rounds < 1:
        parser.error("--n and --rounds must be at least 1")
    if shutil.which("bwrap") is None:
        sys.exit("bubblewrap is not installed: run 'sudo bash scripts/setup_sandbox.sh'")

    with tempfile.TemporaryDirectory(prefix="grade-throughput-") as tmp:
        folder = Path(tmp)
        names = []
        for i in range(args.n):
            name = f"copy-{i:03d}.ipynb"
            (folder / name).write_bytes(args.notebook.read_bytes())
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
