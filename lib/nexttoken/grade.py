"""Grade exercise notebooks in batch, each submission in its own sandbox.

    python -m nexttoken.grade [options] [--] SUBMISSION.ipynb [...] --out grades.csv

Each submission is read once, at the start (regular files only, never through a symbolic link), and runs
in a fresh bubblewrap sandbox (``nexttoken.sandbox``) with a cgroup and a seccomp filter of its own: a
fresh Python process reads the notebook (this process never parses a submission), loads the learner's
definitions, calls each task's function on its test inputs, and reports only the outputs, as plain data.
This process checks that data and judges it against the reference; printed output is never read. One CSV
row per submission and task: submission,task,points,max_points,status,reason. A broken or hostile
submission costs only its own tasks (a hang or crash, the task it happens in; a cell that hangs or
crashes is skipped), and the CSV is rewritten (atomically) after each submission, so a killed grader keeps
the grades already given and ``--resume`` goes on from there.
"""

import argparse
import base64
import binascii
import csv
import errno
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

import torch

from . import sandbox
from .exercises import CHAPTERS, chapter

FIELDS = ["submission", "task", "points", "max_points", "status", "reason"]
MAX_REASON = 500  # characters of a reason in the CSV (the checks explain a mistake in a few lines)
MAX_REPORT = 32 * 1024 * 1024  # bytes a sandbox may send back per run; more and it is stopped
MAX_TOKENS = 200_000  # "{", "[" and "," in one recorder message: far above any real one (MAX_ITEMS values)
MAX_STRUCTURES = 1_000_000  # JSON objects and lists in a submission: more is refused before any parsing
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
# Statuses the recorder may give a notebook it refuses to read (anything else it sends is invalid_notebook).
NOTEBOOK_STATUSES = ("invalid_notebook", "unknown_chapter", "old_notebook")


class Rejected(Exception):
    """A recorded output that is not plain data within the limits."""


@dataclass
class Settings:
    timeout: int = 60
    notebook_timeout: int = 600
    limits: sandbox.Limits = field(default_factory=sandbox.Limits)
    use_sandbox: bool = True
    max_bytes: int = 20 * 1024 * 1024
    cgroups: sandbox.Cgroups | None = None  # where each run gets its cgroup; None: per-process limits only
    uids: list = field(default_factory=lambda: [None])  # the sandbox user id of each job slot (root only)


def tasks_of(chapter_name: str) -> list:
    module = chapter(chapter_name)
    return [getattr(module, name) for name in module.TASKS]


# ---------------------------------------------------------------------------------------------------------
# Text that reaches a CSV: whatever a submission or its file name holds, it can be written and read back.

def clean(value) -> str:
    """``value`` as text that encodes as UTF-8 and that csv reads back: a lone surrogate (from JSON's
    "\\ud800" or a file name's undecodable byte) becomes a visible escape, a NUL its escape."""
    text = str(value).encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\0", "\\x00")


def name_text(path) -> str:
    """A submission's name as written in the CSVs: its bytes as UTF-8, a byte that is not UTF-8 as \\xNN
    and a backslash doubled, so two different names never give the same text (--resume keys on it)."""
    raw = os.fsencode(path).replace(b"\\", b"\\\\")
    return raw.decode("utf-8", "backslashreplace").replace("\0", "\\x00")


# ---------------------------------------------------------------------------------------------------------
# Reading submissions: regular files only, never through a symbolic link, up to a size cap, never
# blocking on a FIFO or a device; each read once, at the start, into a private folder.

class IsALink(Exception):
    """A component of a submission's path is a symbolic link."""


def open_no_symlinks(path: Path) -> int:
    """A descriptor of ``path``, opened one component at a time with O_NOFOLLOW (what openat2's
    RESOLVE_NO_SYMLINKS does, which Python does not offer): raises IsALink, naming the component, where
    any component of the path as given is a symbolic link."""
    parts = [p for p in os.fsencode(path).split(b"/") if p not in (b"", b".")]
    if not parts:
        raise IsADirectoryError(str(path))
    folder = os.open("/" if os.fsencode(path).startswith(b"/") else ".", os.O_PATH | os.O_DIRECTORY)
    try:
        for i, part in enumerate(parts):
            if stat.S_ISLNK(os.lstat(part, dir_fd=folder).st_mode):
                raise IsALink(os.fsdecode(b"/".join(parts[:i + 1])))
            last = i == len(parts) - 1
            flags = (os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY) if last else (os.O_PATH | os.O_DIRECTORY)
            try:  # O_NOFOLLOW: a link swapped in after the lstat is refused here (ELOOP, ENOTDIR)
                fd = os.open(part, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
            except OSError as exc:
                swapped = exc.errno in (errno.ELOOP, errno.ENOTDIR)
                if swapped and stat.S_ISLNK(os.lstat(part, dir_fd=folder).st_mode):
                    raise IsALink(os.fsdecode(b"/".join(parts[:i + 1]))) from None
                raise
            os.close(folder)
            folder = fd
        return folder
    except BaseException:
        os.close(folder)
        raise


def read_submission(path: Path, max_bytes: int) -> tuple[bytes | None, tuple[str, str] | None]:
    """(data, None), or (None, (status, reason)) for what is not a regular file within the size cap."""
    try:
        fd = open_no_symlinks(path)  # O_NONBLOCK: a FIFO opens at once
    except IsALink as exc:
        return None, ("symlink", f"a symbolic link ({clean(name_text(exc.args[0]))}), not graded: "
                                 "submit the notebook file itself")
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
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if data.count(b"{") + data.count(b"[") > MAX_STRUCTURES:  # before anything parses it
        return None, ("too_complex", f"more than {MAX_STRUCTURES} JSON objects and lists; clear its outputs "
                                     "and metadata (Jupyter: Edit > Clear Outputs of All Cells) and save again")
    return data, None


class Snapshots:
    """Every submission read once, at the start, into a private folder (mode 0700): what is graded is what
    was there then, whatever is renamed, swapped for a link or rewritten during the batch."""

    def __init__(self, paths: list[Path], max_bytes: int):
        self.folder = tempfile.TemporaryDirectory(prefix="nexttoken-snapshots-")
        self.taken: dict[str, Path | tuple[str, str]] = {}
        for number, path in enumerate(paths):
            data, problem = read_submission(path, max_bytes)
            if problem is not None:
                self.taken[name_text(path)] = problem
                continue
            copy = Path(self.folder.name) / f"{number}.ipynb"
            copy.write_bytes(data)
            self.taken[name_text(path)] = copy

    def read(self, name: str) -> tuple[bytes | None, tuple[str, str] | None]:
        taken = self.taken[name]
        return (None, taken) if isinstance(taken, tuple) else (taken.read_bytes(), None)

    def close(self) -> None:
        self.folder.cleanup()


# ---------------------------------------------------------------------------------------------------------
# One run of the recorder in a sandbox.

@dataclass
class RunResult:
    records: dict = field(default_factory=dict)  # task name -> record message
    cell_errors: dict = field(default_factory=dict)  # learner's code cell number -> error text
    stopped: tuple | None = None  # (("cell", n) | ("task", name) | None, status, detail); None: finished
    notebook: dict | None = None  # the recorder's message on reading the notebook (chapter or refusal)
    out_of_memory: bool = False  # the kernel's OOM killer acted in this run's cgroup


def _kill(proc: subprocess.Popen, group: sandbox.Group | None) -> None:
    """End the sandbox from outside: every process in its cgroup (a learner cannot opt out of that), else
    its first process, and with it (PID namespace) everything it started."""
    if group is not None:
        group.kill()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def _start(notebook: bytes, argv, settings: Settings, slot: int, group, keep: list[int]):
    """Start the recorder; returns (process, scratch folder or None). ``keep`` are the descriptors the
    child gets (the caller closes them)."""
    launch = sandbox.launcher(group)
    if settings.use_sandbox:  # the notebook enters the sandbox through a memfd: no copy on disk
        keep += [sandbox.memfd_with(notebook, "submission.ipynb"),
                 sandbox.memfd_with(sandbox.seccomp_filter(), "seccomp.bpf")]
        cmd = launch + sandbox.bwrap_command(argv(f"{sandbox.SCRATCH}/submission.ipynb"), settings.limits,
                                             keep[-2], settings.uids[slot], keep[-1])
        env, cwd, scratch = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, None, None
    else:  # trusted submissions only: a plain process with limits, in a scratch folder
        scratch = tempfile.TemporaryDirectory(prefix="nexttoken-grade-")
        path = Path(scratch.name) / "submission.ipynb"
        path.write_bytes(notebook)
        for sub in ("home", "tmp"):
            (Path(scratch.name) / sub).mkdir()
        cmd = launch + sandbox.prlimit_args(settings.limits, processes=False) + argv(str(path))
        env, cwd = sandbox.minimal_env(f"{scratch.name}/home", f"{scratch.name}/tmp"), scratch.name
    try:
        proc = subprocess.Popen(cmd, pass_fds=keep, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True, env=env, cwd=cwd)
    except BaseException:
        if scratch is not None:
            scratch.cleanup()
        raise
    return proc, scratch


def run_once(notebook: bytes, chapter_name: str | None, tasks: list[str], skip: set[int], settings: Settings,
             slot: int, budget_end: float) -> RunResult:
    """Run the recorder once; stop it at the first cell or task that runs past --timeout, at the end of the
    notebook's budget, or when it sends more than MAX_REPORT bytes. Without a chapter (the first run),
    the recorder finds it in the notebook and records every task of it."""
    result = RunResult()
    read_end, write_end = os.pipe()
    keep = [write_end]

    def argv(notebook_path: str) -> list[str]:
        return [sys.executable, "-m", "nexttoken.exercises.harness", notebook_path, chapter_name or "auto",
                "--tasks", ",".join(tasks) if chapter_name else "all",
                "--skip-cells", ",".join(map(str, sorted(skip))), "--out-fd", str(write_end)]

    group = scratch = proc = None
    try:
        group = settings.cgroups.new_group(settings.limits) if settings.cgroups is not None else None
        proc, scratch = _start(notebook, argv, settings, slot, group, keep)
    except BaseException:
        os.close(read_end)
        if group is not None:
            group.remove()
        raise
    finally:
        for fd in keep:  # the child holds its copies; ours must go, or the pipe never reports its end
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
        _follow(proc, read_end, result, list(tasks), settings.timeout, budget_end, nonce)
    finally:
        _kill(proc, group)
        os.close(read_end)
        if group is not None:
            result.out_of_memory = group.oom_killed()
            group.remove()
        if scratch is not None:
            scratch.cleanup()
    return result


class Lines:
    """The recorder's stream cut into lines that start with this run's nonce. Any other line is dropped as
    soon as its first bytes show it, so a junk line costs no memory however long it is."""

    def __init__(self, nonce: str):
        self.prefix = b'{"nonce": "' + nonce.encode() + b'"'
        self.buffer = bytearray()
        self.junk = False

    def feed(self, chunk: bytes) -> list[bytes]:
        lines = []
        while chunk:
            end = chunk.find(b"\n")
            part, chunk = (chunk, b"") if end < 0 else (chunk[:end], chunk[end + 1:])
            if not self.junk:
                self.buffer += part
                n = min(len(self.buffer), len(self.prefix))
                if self.buffer[:n] != self.prefix[:n]:
                    self.junk = True
                    self.buffer.clear()
            if end >= 0:
                if not self.junk:
                    lines.append(bytes(self.buffer))
                self.buffer.clear()
                self.junk = False
        return lines


def parse_message(line: bytes) -> dict | None:
    """A recorder message, or None for one too big to parse safely (the learner's process can forge one
    with the nonce: a few MB of "[]" would be millions of objects here)."""
    if line.count(b"{") + line.count(b"[") + line.count(b",") > MAX_TOKENS:
        return None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


def _follow(proc, read_end: int, result: RunResult, tasks: list[str], timeout: int, budget_end: float,
            nonce: str) -> None:
    current, started, lines, total = None, time.monotonic(), Lines(nonce), 0
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
        for line in lines.feed(chunk):
            message = parse_message(line)
            if message is None or message.get("nonce") != nonce:
                continue
            if message.get("notebook") is not None and result.notebook is None:
                result.notebook = message
                if not tasks and message.get("chapter") in CHAPTERS:  # the first run: every task of it
                    tasks.extend(chapter(message["chapter"]).TASKS)
            elif isinstance(message.get("cell"), int):
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

def notebook_problem(run: RunResult) -> tuple[str, str] | None:
    """(status, reason) when the first run did not read the notebook into a chapter we grade."""
    message = run.notebook
    if message is None:
        where, status, detail = run.stopped or (None, "error", "it sent nothing")
        return "invalid_notebook", f"the sandbox stopped before the notebook was read ({status}: {detail})"
    if message.get("notebook") != "read":
        status = message.get("status")
        return (status if status in NOTEBOOK_STATUSES else "invalid_notebook",
                str(message.get("reason", "not a readable notebook")))
    if message.get("chapter") not in CHAPTERS:
        return "unknown_chapter", "no chapter in the notebook's metadata or imports"
    return None


def grade_notebook(name: str, data: bytes, settings: Settings, slot: int = 0) -> list[dict]:
    """Rows for one submission (``name`` as in the CSV, ``data`` its snapshot); never raises for a bad
    submission."""
    def row(task, points, max_points, status, reason):
        return dict(submission=name, task=task, points=points, max_points=max_points, status=status,
                    reason=clean(reason)[:MAX_REASON])

    chapter_name, tasks = None, {}
    results: dict[str, tuple[str, str]] = {}
    cell_errors: dict[int, str] = {}
    skip: dict[int, str] = {}  # code cells that hung or crashed: skipped in later runs
    pending: list[str] = []
    budget_end = time.monotonic() + settings.notebook_timeout
    while True:
        run = run_once(data, chapter_name, pending, set(skip), settings, slot, budget_end)
        if chapter_name is None:  # the first run read the notebook and found its chapter, or refused it
            problem = notebook_problem(run)
            if problem is not None:
                return [row("-", 0, 0, *problem)]
            chapter_name = run.notebook["chapter"]
            tasks = {t.name: t for t in tasks_of(chapter_name)}
            pending = list(tasks)
        for number, error in run.cell_errors.items():
            cell_errors.setdefault(number, error)
        for task_name in pending:
            if task_name in run.records:
                results[task_name] = judge(tasks[task_name], run.records[task_name])
        pending = [task_name for task_name in pending if task_name not in results]
        if not pending:
            break
        if run.stopped is None:
            for task_name in pending:
                results[task_name] = ("error", "no outputs were recorded for this task")
            break
        where, status, detail = run.stopped
        if status == "crashed" and run.out_of_memory:
            detail += (f" (the sandbox used up its {settings.limits.total_memory_mb} MB of memory, "
                       "--total-memory)")
        if detail == "budget":
            for task_name in pending:
                results[task_name] = ("timeout", f"the notebook's time budget of {settings.notebook_timeout} "
                                                 "s (--notebook-timeout) ran out before this task was recorded")
            break
        if where is None:  # it stopped before any of the learner's code ran: the grader's side
            for task_name in pending:
                results[task_name] = ("grader_error", f"the sandbox stopped while starting ({status}: {detail});"
                                                      " are --memory, --total-memory or --processes too small?")
            break
        if where[0] == "cell" and where[1] not in skip:  # charge the cell, not the tasks: skip it, run again
            skip[where[1]] = f"code cell {where[1]} {detail}" if status == "timeout" else \
                f"code cell {where[1]} stopped the process ({status}: {detail})"
        elif where[0] == "task" and where[1] in pending:
            results[where[1]] = (status, f"{tasks[where[1]].function}: {detail}")
            pending.remove(where[1])
            if not pending:
                break
        else:  # no progress to make by running again (it stopped somewhere already charged)
            for task_name in pending:
                results[task_name] = (status, f"your notebook stopped: {detail}")
            break

    notes = [f"your {text}" for text in skip.values()]
    notes += [f"your code cell {n} raised {e}" for n, e in sorted(cell_errors.items()) if n not in skip]
    rows = []
    for task_name, task in tasks.items():
        status, reason = results.get(task_name, ("error", "no outputs were recorded for this task"))
        if status in ("missing", "error") and notes:
            reason += f" ({notes[0]})"
        rows.append(row(f"{chapter_name}.{task_name}", task.points if status == "passed" else 0, task.points,
                        status, reason))
    return rows


# ---------------------------------------------------------------------------------------------------------
# The CSVs: rewritten after each submission, through a temporary file and an atomic rename.

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def escape(value) -> str:
    """A spreadsheet must not read a cell as a formula: such a cell gets a leading "'". A cell that starts
    with "'" gets one too, so the escape escapes its own marker and ``unescape`` is exact (two file names
    never read back as one)."""
    text = str(value)
    return "'" + text if text[:1] in (*FORMULA_STARTS, "'") and text != "-" else text


def unescape(text: str) -> str:
    return text[1:] if text[:1] == "'" else text


def write_csv(path: Path, header: list[str], rows: list[dict]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8", errors="backslashreplace") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            for r in rows:
                writer.writerow([escape(clean(r.get(h, ""))) for h in header])
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
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames != FIELDS:
                raise SystemExit(f"--resume: {path} is not a grades CSV (columns {reader.fieldnames})")
            rows = [{k: unescape(v or "") for k, v in r.items()} for r in reader]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise SystemExit(f"--resume: {path} is not a readable grades CSV ({type(exc).__name__}: {exc})") from None
    for number, r in enumerate(rows, start=2):
        if not (r["points"].isdigit() and r["max_points"].isdigit()):
            raise SystemExit(f"--resume: {path} line {number}: points are not whole numbers")
    return rows


def clean_rows(rows: list[dict]) -> list[dict]:
    """Every field of every row as encodable text (the CSV and the summary can always be written)."""
    return [{k: clean(v) if isinstance(v, str) else v for k, v in r.items()} for r in rows]


def error_row(name: str, exc: BaseException) -> dict:
    return dict(submission=name, task="-", points=0, max_points=0, status="grader_error",
                reason=clean(f"{type(exc).__name__}: {exc}")[:MAX_REASON])


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
    p.add_argument("--total-memory", type=positive_int, default=limits.total_memory_mb,
                   help="MB of memory of every kind per sandbox, tmpfs and kernel memory included (its "
                        f"cgroup; default {limits.total_memory_mb})")
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
    p.add_argument("--allow-no-cgroup", action="store_true",
                   help="grade even where no cgroup can be had (per-process limits only; see the warning)")
    return p.parse_args(argv)


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
    if args.no_sandbox:
        return cgroups, [None] * args.jobs
    try:
        uids = sandbox.allocate_uids(args.jobs)
    except sandbox.SandboxError as exc:
        return str(exc)
    problem = sandbox.check_bwrap(limits, cgroups, uids[0])
    return problem if problem is not None else (cgroups, uids)


def main(argv=None):
    args = parse_args(argv)
    for stream in (sys.stdout, sys.stderr):  # a terminal that is not UTF-8 must not stop the batch
        stream.reconfigure(errors="backslashreplace")
    limits = sandbox.Limits(memory_mb=args.memory, total_memory_mb=args.total_memory, processes=args.processes,
                            file_size_mb=args.file_size, cpu_s=args.cpu_time or args.notebook_timeout)
    for target in (args.out, args.gradebook):
        if target is not None and not target.parent.is_dir():
            print(f"python -m nexttoken.grade: the folder of {target} does not exist", file=sys.stderr)
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
                        cgroups=cgroups, uids=uids)

    previous = read_previous(args.out) if args.resume else []
    done = {r["submission"] for r in previous}
    paths = {name_text(p): p for p in args.submissions}  # in order, once each
    todo = [name for name in paths if name not in done]
    snapshots = Snapshots([paths[name] for name in todo], settings.max_bytes)
    graded: dict[str, list[dict]] = {}
    slots: queue.Queue = queue.Queue()
    for slot in range(args.jobs):
        slots.put(slot)

    def grade_one(name: str) -> list[dict]:
        slot = slots.get()
        try:
            data, problem = snapshots.read(name)
            if problem is not None:
                return [dict(submission=name, task="-", points=0, max_points=0, status=problem[0],
                             reason=clean(problem[1]))]
            return clean_rows(grade_notebook(name, data, settings, slot))
        except Exception as exc:  # a grader bug must not cost the other submissions their grades
            return [error_row(name, exc)]
        finally:
            slots.put(slot)

    def save() -> tuple[list[dict], bool]:
        rows = previous + [r for name in todo if name in graded for r in graded[name]]
        try:
            write_csv(args.out, FIELDS, rows)
            if args.gradebook is not None:
                write_csv(args.gradebook, *gradebook(rows))
        except Exception as exc:  # e.g. a full disk: keep grading, try again after the next submission
            print(f"WARNING: could not write {args.out}: {clean(exc)}", file=sys.stderr)
            return rows, False
        return rows, True

    start = time.monotonic()
    rows, saved = save()
    try:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {pool.submit(grade_one, name): name for name in todo}
            for future in as_completed(futures):
                try:
                    graded[futures[future]] = future.result()
                except BaseException as exc:  # grade_one returns rows; this is a last guard
                    graded[futures[future]] = [error_row(futures[future], exc)]
                rows, saved = save()
    finally:
        snapshots.close()
        if cgroups is not None:
            cgroups.sweep()
    elapsed = time.monotonic() - start
    if not saved:
        print(f"python -m nexttoken.grade: the grades could not be written to {args.out}", file=sys.stderr)
        return 1

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
