"""Grade exercise notebooks in batch.

    python -m nexttoken.grade SUBMISSION.ipynb [SUBMISSION.ipynb ...] --out grades.csv [--timeout SECONDS]

Each submission runs in a fresh Jupyter kernel with a per-cell timeout. After the learner's cells, the
grader calls each task's function there on its test inputs and saves only the outputs; it judges them
in this process against the reference, never from printed output. One CSV row per submission and task:
submission,task,points,max_points,status,reason. A broken submission (not a notebook, a syntax error,
an exception, an endless loop, a dying kernel, floods of output, patched checks) gets zero for what it
affects, with a status and a reason, and the batch goes on.
"""

import argparse
import csv
import json
import re
import sys
import tempfile
from pathlib import Path

import nbformat
import torch

from .exercises import CHAPTERS, chapter
from .exercises.harness import SILENCE_SOURCE, record_source

FIELDS = ["submission", "task", "points", "max_points", "status", "reason"]


def detect_chapter(nb) -> str | None:
    """Which chapter a notebook is from, by its content, not its file name: the chapter named in the
    notebook's metadata, else the exercise module its code imports."""
    meta = nb.metadata.get("nexttoken", {}).get("chapter")
    if meta in CHAPTERS:
        return meta
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    found = set(re.findall(r"nexttoken\.exercises(?:\s+import\s+|\.)(ch0\d)", source)) & set(CHAPTERS)
    return found.pop() if len(found) == 1 else None


def tasks_of(chapter_name: str) -> list:
    module = chapter(chapter_name)
    return [getattr(module, name) for name in module.TASKS]


def run_kernel(code_cells: list[str], record_cells: dict[str, str], timeout: int, workdir: str):
    """Execute the learner's cells, then one recording cell per task, in one fresh kernel.

    Returns (first_error, stopped): the first learner cell that raised (for reasons), and, if the
    run stopped early, (task name or None for a learner cell, "timeout" | "kernel_died", detail).
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    cells = [nbformat.v4.new_code_cell(SILENCE_SOURCE)] + [nbformat.v4.new_code_cell(s) for s in code_cells]
    owners = [None] * len(cells)
    for name, source in record_cells.items():
        cells.append(nbformat.v4.new_code_cell(source))
        owners.append(name)
    nb = nbformat.v4.new_notebook(cells=cells)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            shutdown_kernel="immediate", resources={"metadata": {"path": workdir}})
    first_error = None
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            try:
                client.execute_cell(cell, index)
            except CellTimeoutError:
                return first_error, (owners[index], "timeout", f"cell {index} ran past {timeout} s")
            except DeadKernelError:
                return first_error, (owners[index], "kernel_died", f"the kernel died in cell {index}")
            errors = [o for o in cell.outputs if o.output_type == "error"]
            if errors and first_error is None and owners[index] is None:
                first_error = f"cell {index} raised {errors[0].ename}: {errors[0].evalue[:200]}"
            cell.outputs = []  # keep no output in memory
    return first_error, None


def grade_notebook(path: Path, timeout: int) -> list[dict]:
    """Rows for one submission; never raises for a bad submission."""
    def row(task, points, max_points, status, reason):
        return dict(submission=str(path), task=task, points=points, max_points=max_points,
                    status=status, reason=reason)

    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:
        return [row("-", 0, 0, "invalid_notebook", f"not a readable notebook: {type(exc).__name__}: {exc}"[:300])]
    chapter_name = detect_chapter(nb)
    if chapter_name is None:
        return [row("-", 0, 0, "unknown_chapter", "no chapter in the notebook's metadata or imports")]
    tasks = {t.name: t for t in tasks_of(chapter_name)}
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    results: dict[str, tuple[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="nexttoken-grade-") as workdir:
        pending = list(tasks)
        while pending:  # a task that hangs or kills the kernel is charged alone; the rest re-run
            files = {name: str(Path(workdir) / f"{name}.pt") for name in pending}
            first_error, stopped = run_kernel(
                code, {name: record_source(chapter_name, name, files[name]) for name in pending}, timeout, workdir)
            if stopped is not None and stopped[0] is None:  # a learner cell: every remaining task is affected
                for name in pending:
                    results[name] = (stopped[1], f"your notebook stopped: {stopped[2]}")
                break
            for name in pending:
                if stopped is not None and name == stopped[0]:
                    results[name] = (stopped[1], f"{tasks[name].function}: {stopped[2]}")
                elif Path(files[name]).exists():
                    results[name] = judge(tasks[name], files[name], first_error)
            pending = [name for name in pending if name not in results]
            if stopped is None:
                for name in pending:
                    results[name] = ("error", "the grader could not record this task's outputs")
                break
    return [row(f"{chapter_name}.{name}", t.points if results[name][0] == "passed" else 0, t.points,
                *results[name]) for name, t in tasks.items()]


def judge(task, path: str, first_error: str | None) -> tuple[str, str]:
    try:
        outcomes = torch.load(path, weights_only=True)  # plain data only: no code from the notebook
        outcomes = [tuple(o) for o in outcomes]
    except Exception as exc:
        return "error", f"the recorded outputs could not be read ({type(exc).__name__})"
    status, reason = task.evaluate(outcomes)
    if status in ("missing", "error") and first_error:
        reason += f" (your {first_error})"
    return status, reason


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m nexttoken.grade", description=__doc__.splitlines()[0])
    parser.add_argument("submissions", nargs="+", type=Path)
    parser.add_argument("--out", required=True, type=Path, help="CSV file to write")
    parser.add_argument("--timeout", type=int, default=60, help="seconds per cell (default 60)")
    args = parser.parse_args(argv)
    rows = []
    for path in args.submissions:
        try:
            rows += grade_notebook(path, args.timeout)
        except Exception as exc:  # a grader bug must not cost the other submissions their grades
            rows.append(dict(submission=str(path), task="-", points=0, max_points=0, status="grader_error",
                             reason=f"{type(exc).__name__}: {exc}"[:300]))
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"{'submission':40s} {'task':10s} {'points':>6s}  status")
    for r in rows:
        print(f"{Path(r['submission']).name[:40]:40s} {r['task']:10s} {r['points']:>3}/{r['max_points']:<2}  "
              f"{r['status']}")
    print(f"wrote {len(rows)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
