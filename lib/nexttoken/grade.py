"""Grade exercise notebooks in batch, each submission in its own sandbox.

    python -m nexttoken.grade [options] [--] SUBMISSION.ipynb [...] --out grades.csv

Each submission runs in a fresh bubblewrap sandbox (``nexttoken.sandbox``): a fresh Python process loads
the learner's definitions, calls each task's function on its test inputs, and reports only the outputs,
as plain data. This process checks that data and judges it against the reference; printed output is never
read. One CSV row per submission and task: submission,task,points,max_points,status,reason. A broken or
hostile submission costs only its own tasks (a hang or crash, the task it happens in; a cell that hangs or
crashes is skipped), and the CSV is rewritten (atomically) after each submission, so a killed grader keeps
the grades already given and ``--resume`` goes on from there.
"""

import argparse
import base64
import binascii
import csv
import json
import os
import queue
import re
import secrets
import select
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import torch

from . import sandbox
from .exercises import CHAPTERS, chapter

FIELDS = ["submission", "task", "points", "max_points", "status", "reason"]
MAX_REASON = 500  # characters of a reason in the CSV (the checks explain a mistake in a few lines)
MAX_REPORT = 32 * 1024 * 1024  # bytes a sandbox may send back per run; more and it is stopped
STARTUP_S = 120  # seconds a sandbox may take to start Python, torch and the tasks (no learner code yet)
# What a recorded output may hold (everything else is that task's error).
DTYPES = {name: getattr(torch, name) for name in
          ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")}
MAX_NUMEL = 1 << 22  # elements per tensor
MAX_ITEMS = 10_000  # values in one task's outputs, counted over nested lists
MAX_DEPTH = 4
MAX_LIST = 64
MAX_STRING = 1000
MAX_KIND = 40


class Rejected(Exception):
    """A recorded output that is not plain data within the limits."""


@dataclass
class Settings:
    timeout: int = 60
    notebook_timeout: int = 600
    limits: sandbox.Limits = field(default_factory=sandbox.Limits)
    use_sandbox: bool = True
    max_bytes: int = 20 * 1024 * 1024


def detect_chapter(nb) -> str | None:
    """Which chapter a notebook is from, by its content, not its file name: the chapter named in the
    notebook's metadata, else the exercise module its code imports."""
    ours = nb.metadata.get("nexttoken")
    meta = ours.get("chapter") if isinstance(ours, dict) else None
    if meta in CHAPTERS:
        return meta
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code" and isinstance(c.source, str))
    found = set(re.findall(r"nexttoken\.exercises(?:\s+import\s+|\.)(ch0\d)", source)) & set(CHAPTERS)
    return found.pop() if len(found) == 1 else None


def tasks_of(chapter_name: str) -> list:
    module = chapter(chapter_name)
    return [getattr(module, name) for name in module.TASKS]


# ---------------------------------------------------------------------------------------------------------
# Reading submissions: regular files only, up to a size cap, never blocking on a FIFO or a device.

def read_submission(path: Path, max_bytes: int) -> tuple[bytes | None, tuple[str, str] | None]:
    """(data, None), or (None, (status, reason)) for what is not a regular file within the size cap."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)  # O_NONBLOCK: a FIFO opens at once
    except OSError as exc:
        return None, ("unreadable", f"could not open it: {exc.strerror}")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, ("not_a_file", "not a regular file (a folder, FIFO, device or socket); "
                                        "only regular files are graded")
        if info.st_size > max_bytes:
            return None, ("too_large", f"{info.st_size} bytes, over the limit of {max_bytes} (--max-size)")
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:  # it grew while being read
            return None, ("too_large", f"over the limit of {max_bytes} bytes (--max-size)")
        return b"".join(chunks), None
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------------------
# One run of the recorder in a sandbox.

@dataclass
class RunResult:
    records: dict = field(default_factory=dict)  # task name -> record message
    cell_errors: dict = field(default_factory=dict)  # learner's code cell number -> error text
    stopped: tuple | None = None  # (("cell", n) | ("task", name) | None, status, detail); None: finished


def _kill(proc: subprocess.Popen) -> None:
    """End the sandbox: its first process dies, and with it (PID namespace) everything it started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def run_once(notebook: bytes, chapter_name: str, tasks: list[str], skip: set[int], settings: Settings,
             slot: int, budget_end: float) -> RunResult:
    """Run the recorder once; stop it at the first cell or task that runs past --timeout, at the end of the
    notebook's budget, or when it sends more than MAX_REPORT bytes."""
    result = RunResult()
    read_end, write_end = os.pipe()
    fds, scratch = [write_end], None

    def runner(notebook_path: str) -> list[str]:
        return [sys.executable, "-m", "nexttoken.exercises.harness", notebook_path, chapter_name,
                "--tasks", ",".join(tasks), "--skip-cells", ",".join(map(str, sorted(skip))),
                "--out-fd", str(write_end)]

    try:
        if settings.use_sandbox:  # the notebook enters the sandbox through a memfd: no copy on disk
            memfd = os.memfd_create("submission.ipynb")
            fds.append(memfd)
            view = memoryview(notebook)
            while view:
                view = view[os.write(memfd, view):]
            os.lseek(memfd, 0, os.SEEK_SET)
            cmd = sandbox.bwrap_command(runner(f"{sandbox.SCRATCH}/submission.ipynb"), settings.limits,
                                        memfd, slot)
            env, cwd = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, None
        else:  # trusted submissions only: a plain process with limits, in a scratch folder
            scratch = tempfile.TemporaryDirectory(prefix="nexttoken-grade-")
            path = Path(scratch.name) / "submission.ipynb"
            path.write_bytes(notebook)
            for sub in ("home", "tmp"):
                (Path(scratch.name) / sub).mkdir()
            cmd = sandbox.prlimit_args(settings.limits, processes=False) + runner(str(path))
            env, cwd = sandbox.minimal_env(f"{scratch.name}/home", f"{scratch.name}/tmp"), scratch.name
        proc = subprocess.Popen(cmd, pass_fds=fds, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True, env=env, cwd=cwd)
    except BaseException:
        os.close(read_end)
        if scratch is not None:
            scratch.cleanup()
        raise
    finally:
        for fd in fds:  # the child holds its copies; ours must go, or the pipe never reports its end
            os.close(fd)
    # Messages count only with this run's nonce, which the recorder reads from stdin before any learner
    # code runs: a thread or a leftover process of the learner's cannot forge a record by writing lines.
    nonce = secrets.token_hex(16)
    try:
        proc.stdin.write(f"{nonce}\n".encode())
        proc.stdin.close()
    except OSError:
        pass
    try:
        _follow(proc, read_end, result, tasks, settings.timeout, budget_end, nonce)
    finally:
        _kill(proc)
        os.close(read_end)
        if scratch is not None:
            scratch.cleanup()
    return result


def _follow(proc, read_end: int, result: RunResult, tasks: list[str], timeout: int, budget_end: float,
            nonce: str) -> None:
    current, started, buffer, total = None, time.monotonic(), b"", 0
    while True:
        limit = started + (timeout if current is not None else STARTUP_S)
        wait = min(limit, budget_end) - time.monotonic()
        ready = select.select([read_end], [], [], max(0.0, wait))[0] if wait > 0 else []
        if not ready:
            if budget_end <= limit:
                result.stopped = (current, "timeout", "budget")
            elif current is None:
                result.stopped = (None, "timeout", f"the sandbox did not start within {STARTUP_S} s")
            else:
                result.stopped = (current, "timeout", f"ran past {timeout} s")
            return
        chunk = os.read(read_end, 1 << 16)
        if not chunk:  # every writer is gone: the process ended without saying it was done
            try:
                code = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = None
            how = (f"was killed by signal {-code}" if code is not None and code < 0
                   else f"exited with code {code}")
            result.stopped = (current, "crashed", f"the process running your code {how}")
            return
        total += len(chunk)
        if total > MAX_REPORT:
            result.stopped = (current, "too_much_output", f"sent more than {MAX_REPORT} bytes of outputs")
            return
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                continue  # not the recorder's: ignore
            if not isinstance(message, dict) or message.get("nonce") != nonce:
                continue
            if isinstance(message.get("cell"), int):
                current, started = ("cell", message["cell"]), time.monotonic()
            elif isinstance(message.get("cell_error"), int):
                result.cell_errors.setdefault(message["cell_error"], str(message.get("error"))[:200])
            elif message.get("task") in tasks:
                current, started = ("task", message["task"]), time.monotonic()
            elif message.get("record") in tasks:
                result.records.setdefault(message["record"], message)
            elif message.get("done") is True:
                return


# ---------------------------------------------------------------------------------------------------------
# Checking recorded outputs, then judging them.

def check_value(value, depth: int, budget: list):
    """A recorded value as plain Python/torch data, or Rejected."""
    budget[0] -= 1
    if budget[0] < 0:
        raise Rejected(f"more than {MAX_ITEMS} values")
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        if len(value) > MAX_STRING:
            raise Rejected(f"a string longer than {MAX_STRING} characters")
        return value
    if isinstance(value, list):
        if depth >= MAX_DEPTH or len(value) > MAX_LIST:
            raise Rejected(f"a list deeper than {MAX_DEPTH} levels or longer than {MAX_LIST} items")
        return [check_value(v, depth + 1, budget) for v in value]
    if isinstance(value, dict) and set(value) == {"dtype", "shape", "data"}:
        return check_tensor(value)
    raise Rejected(f"a value of type {type(value).__name__}")


def check_tensor(value: dict) -> torch.Tensor:
    """A dense, contiguous CPU tensor of an allowed dtype, rebuilt from exactly numel * itemsize bytes."""
    dtype, shape, data = DTYPES.get(value["dtype"]), value["shape"], value["data"]
    if dtype is None:
        raise Rejected(f"a tensor of dtype {str(value['dtype'])[:20]!r}")
    if not (isinstance(shape, list) and len(shape) <= 8
            and all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= MAX_NUMEL for s in shape)):
        raise Rejected("a tensor with an invalid shape")
    numel = 1
    for s in shape:
        numel *= s
    if numel > MAX_NUMEL:
        raise Rejected(f"a tensor of more than {MAX_NUMEL} elements")
    itemsize = torch.empty(0, dtype=dtype).element_size()
    if not isinstance(data, str) or len(data) > 4 * (numel * itemsize + 2) // 3 + 4:
        raise Rejected("a tensor whose data does not match its shape")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise Rejected("a tensor whose data is not base64") from None
    if len(raw) != numel * itemsize:
        raise Rejected("a tensor whose data does not match its shape")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)


def check_outcomes(outcomes, n_cases: int) -> list[tuple[str, object]]:
    if not isinstance(outcomes, list) or not 1 <= len(outcomes) <= n_cases:
        raise Rejected(f"expected a list of 1 to {n_cases} outcomes")
    budget, checked = [MAX_ITEMS], []
    for item in outcomes:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                and 0 < len(item[0]) <= MAX_KIND):
            raise Rejected("an outcome that is not a (kind, value) pair")
        checked.append((item[0], check_value(item[1], 0, budget)))
    return checked


# Judging builds the tasks' seeded inputs and reference models under torch's global RNG (fork_rng and
# manual_seed), which is not thread-safe: with --jobs, one judgement at a time.
JUDGING = threading.Lock()


def judge(task, record: dict) -> tuple[str, str]:
    """(status, reason) for one task's record. Never raises: a failure of judging is a grader_error."""
    with JUDGING:
        return _judge(task, record)


def _judge(task, record: dict) -> tuple[str, str]:
    tampered = record.get("tampered")
    if tampered:
        names = ", ".join(str(n)[:60] for n in tampered[:3]) if isinstance(tampered, list) else "?"
        return "error", f"your code replaced part of the grader's recorder ({names}), so this task was not graded"
    try:
        outcomes = check_outcomes(record.get("outcomes"), len(task.cases()))
    except Rejected as exc:
        return "error", f"the recorded outputs were rejected: {exc}"
    try:
        status, reason = task.evaluate(outcomes)
        if not (isinstance(status, str) and isinstance(reason, str)):
            raise TypeError("evaluate did not return (str, str)")
    except Exception as exc:
        return "grader_error", f"judging {task.name} failed: {type(exc).__name__}: {exc}"
    library = record.get("library")
    if status == "passed" and isinstance(library, list) and library:
        names = ", ".join(str(n)[:60] for n in library[:3])
        reason += f"; reported: it calls the library's {names}, which the exercise has you write"
    return status, reason


# ---------------------------------------------------------------------------------------------------------
# One submission.

def grade_notebook(path: Path, settings: Settings, slot: int = 0) -> list[dict]:
    """Rows for one submission; never raises for a bad submission."""
    def row(task, points, max_points, status, reason):
        return dict(submission=str(path), task=task, points=points, max_points=max_points,
                    status=status, reason=reason[:MAX_REASON])

    data, problem = read_submission(path, settings.max_bytes)
    if problem is not None:
        return [row("-", 0, 0, *problem)]
    try:
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    except Exception as exc:
        return [row("-", 0, 0, "invalid_notebook", f"not a readable notebook: {type(exc).__name__}: {exc}")]
    chapter_name = detect_chapter(nb)
    if chapter_name is None:
        return [row("-", 0, 0, "unknown_chapter", "no chapter in the notebook's metadata or imports")]
    tasks = {t.name: t for t in tasks_of(chapter_name)}

    results: dict[str, tuple[str, str]] = {}
    cell_errors: dict[int, str] = {}
    skip: dict[int, str] = {}  # code cells that hung or crashed: skipped in later runs
    pending = list(tasks)
    budget_end = time.monotonic() + settings.notebook_timeout
    while pending:
        run = run_once(data, chapter_name, pending, set(skip), settings, slot, budget_end)
        for number, error in run.cell_errors.items():
            cell_errors.setdefault(number, error)
        for name in pending:
            if name in run.records:
                results[name] = judge(tasks[name], run.records[name])
        pending = [name for name in pending if name not in results]
        if run.stopped is None:
            for name in pending:
                results[name] = ("error", "no outputs were recorded for this task")
            break
        where, status, detail = run.stopped
        if detail == "budget":
            for name in pending:
                results[name] = ("timeout", f"the notebook's time budget of {settings.notebook_timeout} s "
                                            "(--notebook-timeout) ran out before this task was recorded")
            break
        if where is None:  # it stopped before any of the learner's code ran: the grader's side
            for name in pending:
                results[name] = ("grader_error", f"the sandbox stopped while starting ({status}: {detail}); "
                                                 "are --memory or --processes too small for torch?")
            break
        if where[0] == "cell" and where[1] not in skip:  # charge the cell, not the tasks: skip it, run again
            skip[where[1]] = f"code cell {where[1]} {detail}" if status == "timeout" else \
                f"code cell {where[1]} stopped the process ({status}: {detail})"
        elif where[0] == "task" and where[1] in pending:
            results[where[1]] = (status, f"{tasks[where[1]].function}: {detail}")
            pending.remove(where[1])
        else:  # no progress to make by running again (it stopped somewhere already charged)
            for name in pending:
                results[name] = (status, f"your notebook stopped: {detail}")
            break

    notes = [f"your {text}" for text in skip.values()]
    notes += [f"your code cell {n} raised {e}" for n, e in sorted(cell_errors.items()) if n not in skip]
    rows = []
    for name, task in tasks.items():
        status, reason = results.get(name, ("error", "no outputs were recorded for this task"))
        if status in ("missing", "error") and notes:
            reason += f" ({notes[0]})"
        rows.append(row(f"{chapter_name}.{name}", task.points if status == "passed" else 0, task.points,
                        status, reason))
    return rows


# ---------------------------------------------------------------------------------------------------------
# The CSVs: rewritten after each submission, through a temporary file and an atomic rename.

def escape(value) -> str:
    """A spreadsheet must not read a cell as a formula."""
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") and text != "-" else text


def unescape(text: str) -> str:
    return text[1:] if text[:1] == "'" and text[1:2] in ("=", "+", "-", "@", "\t", "\r") else text


def write_csv(path: Path, header: list[str], rows: list[dict]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            for r in rows:
                writer.writerow([escape(r.get(h, "")) for h in header])
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def gradebook(rows: list[dict]) -> tuple[list[str], list[dict]]:
    """One row per submission: each task's points, the total and the maximum (what an LMS imports)."""
    task_names = sorted({r["task"] for r in rows if r["task"] != "-"})
    book: dict[str, dict] = {}
    for r in rows:
        entry = book.setdefault(r["submission"], {"submission": r["submission"], "total": 0, "max_points": 0})
        if r["task"] != "-":
            entry[r["task"]] = r["points"]
        entry["total"] += int(r["points"])
        entry["max_points"] += int(r["max_points"])
    return ["submission", *task_names, "total", "max_points"], list(book.values())


def read_previous(path: Path) -> list[dict]:
    """Rows of an earlier run (for --resume); a missing file is an empty start."""
    if not path.exists():
        return []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != FIELDS:
            raise SystemExit(f"--resume: {path} is not a grades CSV (columns {reader.fieldnames})")
        rows = [{k: unescape(v or "") for k, v in r.items()} for r in reader]
    for number, r in enumerate(rows, start=2):
        if not (r["points"].isdigit() and r["max_points"].isdigit()):
            raise SystemExit(f"--resume: {path} line {number}: points are not whole numbers")
    return rows


# ---------------------------------------------------------------------------------------------------------

def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def parse_args(argv):
    limits = sandbox.Limits()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    p = argparse.ArgumentParser(prog="python -m nexttoken.grade", description=__doc__.splitlines()[0],
                                epilog="Use -- before the submissions when a file name may start with '-'.")
    p.add_argument("submissions", nargs="+", type=Path)
    p.add_argument("--out", required=True, type=Path, help="grades CSV, one row per submission and task")
    p.add_argument("--gradebook", type=Path, help="also write one row per submission: task points and total")
    p.add_argument("--resume", action="store_true", help="keep the rows already in --out; grade only the rest")
    p.add_argument("--timeout", type=positive_int, default=60,
                   help="seconds per cell and per task's function calls (default 60)")
    p.add_argument("--notebook-timeout", type=positive_int, default=600,
                   help="seconds in all per submission, re-runs included (default 600)")
    p.add_argument("--jobs", type=positive_int, default=cores,
                   help=f"submissions graded at once, each in its own sandbox (default: the cores, {cores})")
    p.add_argument("--memory", type=positive_int, default=limits.memory_mb,
                   help=f"MB of address space per process (default {limits.memory_mb})")
    p.add_argument("--processes", type=positive_int, default=limits.processes,
                   help=f"processes and threads per submission (default {limits.processes})")
    p.add_argument("--file-size", type=positive_int, default=limits.file_size_mb,
                   help=f"MB, the largest file a submission may write (default {limits.file_size_mb})")
    p.add_argument("--cpu-time", type=positive_int, default=None,
                   help="CPU seconds per process (default: --notebook-timeout)")
    p.add_argument("--max-size", type=positive_int, default=20,
                   help="MB, the largest submission file read (default 20)")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run submissions without bubblewrap: ONLY for trusted submissions")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    limits = sandbox.Limits(memory_mb=args.memory, processes=args.processes, file_size_mb=args.file_size,
                            cpu_s=args.cpu_time or args.notebook_timeout)
    settings = Settings(timeout=args.timeout, notebook_timeout=args.notebook_timeout, limits=limits,
                        use_sandbox=not args.no_sandbox, max_bytes=args.max_size * 1024 * 1024)
    if settings.use_sandbox:
        problem = sandbox.check_bwrap(limits)
        if problem is not None:
            print(f"python -m nexttoken.grade: {problem}", file=sys.stderr)
            return 2
    else:
        print("WARNING: --no-sandbox: submissions run without isolation; use it for trusted ones only",
              file=sys.stderr)
    for target in (args.out, args.gradebook):
        if target is not None and not target.parent.is_dir():
            print(f"python -m nexttoken.grade: the folder of {target} does not exist", file=sys.stderr)
            return 2

    previous = read_previous(args.out) if args.resume else []
    done = {r["submission"] for r in previous}
    todo = list(dict.fromkeys(p for p in args.submissions if str(p) not in done))  # in order, once each
    graded: dict[str, list[dict]] = {}
    lock = threading.Lock()
    slots: queue.Queue = queue.Queue()
    for slot in range(args.jobs):
        slots.put(slot)

    def grade_one(path: Path) -> list[dict]:
        slot = slots.get()
        try:
            return grade_notebook(path, settings, slot)
        except Exception as exc:  # a grader bug must not cost the other submissions their grades
            return [dict(submission=str(path), task="-", points=0, max_points=0, status="grader_error",
                         reason=f"{type(exc).__name__}: {exc}"[:MAX_REASON])]
        finally:
            slots.put(slot)

    def save() -> list[dict]:
        rows = previous + [r for p in todo if str(p) in graded for r in graded[str(p)]]
        write_csv(args.out, FIELDS, rows)
        if args.gradebook is not None:
            write_csv(args.gradebook, *gradebook(rows))
        return rows

    start = time.monotonic()
    rows = save()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(grade_one, p): p for p in todo}
        for future in as_completed(futures):
            with lock:
                graded[str(futures[future])] = future.result()
                rows = save()
    elapsed = time.monotonic() - start

    print(f"{'submission':40s} {'task':10s} {'points':>6s}  status")
    for r in rows:
        print(f"{Path(r['submission']).name[:40]:40s} {r['task']:10s} {r['points']:>3}/{r['max_points']:<2}  "
              f"{r['status']}")
    if todo:
        print(f"graded {len(todo)} submissions in {elapsed:.1f} s ({elapsed / len(todo):.1f} s each, "
              f"{args.jobs} at once{', NO sandbox' if args.no_sandbox else ''})")
    print(f"wrote {len(rows)} rows to {args.out}" + (f" and {args.gradebook}" if args.gradebook else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
