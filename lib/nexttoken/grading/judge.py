"""Judging one task's record: the recorded outputs decoded (``wire``), then compared with the reference
by the task itself (``Task.evaluate``, the same comparison a learner's ``check()`` makes)."""

import contextlib
import resource
import threading

from ..recorder.wire import Rejected, decode_outcomes
from .orders import judged_cases

# With --jobs, one judgement at a time: its memory cap (RLIMIT_AS) and torch's thread count are the
# process's. (The inputs it builds draw from generators of their own, common.small_model: no judgement
# depends on what another thread draws.)
JUDGING = threading.Lock()
_counts: dict[tuple[str, str, bool], int] = {}  # (chapter, task, held_out) -> how many inputs judged_cases gives
_counting = threading.Lock()
# What judging one task may add to the grader's address space. Judging builds small models and compares
# outputs the wire has bounded (wire.MAX_NUMEL, MAX_ITEMS): far below this. Past it an allocation fails
# (MemoryError), and that task gets a grader_error row instead of the kernel killing the whole batch.
JUDGE_MEMORY_MB = 2048


def _address_space() -> int:
    """This process's virtual memory now, in bytes (VmSize)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


@contextlib.contextmanager
def memory_cap(extra_mb: int = JUDGE_MEMORY_MB):
    """While inside, this process can map at most ``extra_mb`` more (RLIMIT_AS, the soft limit only, put
    back on the way out). Other threads of the grader share the cap: the margin is far above what they
    use while a task is judged (reading a sandbox's messages)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _address_space() + extra_mb * 1024 * 1024
    for limit in (soft, hard):
        if limit != resource.RLIM_INFINITY:
            cap = min(cap, limit)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def case_count(task, held_out: bool) -> int:
    """How many inputs ``judged_cases`` gives the task: built once per grader, under a lock, to be counted."""
    key = (task.chapter, task.name, held_out)
    with _counting:
        if key not in _counts:
            _counts[key] = len(judged_cases(task, held_out)[0])
        return _counts[key]


def judge(task, record: dict, held_out: bool = False) -> tuple[str, str]:
    """(status, reason) for one task's record, of a run on its visible inputs or (``held_out``) on its
    held-out inputs alone. Never raises: a failure of judging is a grader_error."""
    tampered = record.get("tampered")
    if tampered:
        names = ", ".join(str(n)[:60] for n in tampered[:3]) if isinstance(tampered, list) else "?"
        return "error", f"your code replaced part of the grader's recorder ({names}), so this task was not graded"
    with JUDGING, memory_cap():
        try:
            inputs, hidden = judged_cases(task, held_out)
            outcomes = decode_outcomes(record.get("outcomes"), len(inputs))
        except Rejected as exc:
            return "error", f"the recorded outputs were rejected: {exc}"
        try:
            status, reason = task.evaluate(outcomes, inputs, hidden)
            if not (isinstance(status, str) and isinstance(reason, str)):
                raise TypeError("evaluate did not return (str, str)")
        except MemoryError:
            return "grader_error", (f"judging {task.name} needed more than {JUDGE_MEMORY_MB} MB, so it was "
                                    "stopped; the other tasks and submissions were graded")
        except Exception as exc:
            return "grader_error", f"judging {task.name} failed: {type(exc).__name__}: {str(exc)[:300]}"
    return status, reason


def library_calls(record: dict) -> str:
    """The library functions the answer called that the exercise has it write (the recorder watched for
    them), for the CSV's library_calls column: reported to the instructor, not penalised."""
    library = record.get("library")
    return ", ".join(str(n)[:60] for n in library[:3]) if isinstance(library, list) else ""


# A held-out run that stopped, by the stop's status: the grader's words, never the stop's detail.
HELD_OUT_STOPS = {"timeout": "it ran past the time limit (--timeout, or the notebook's budget)",
                  "crashed": "the process running it stopped", "too_much_output": "it sent too much output",
                  "grader_error": "the grader could not judge it"}


def held_out_verdict(task, status: str, reason: str) -> tuple[str, str]:
    """(status, reason) of a task that passed on its visible inputs, after its held-out run (``status`` and
    ``reason``, as judged): a pass counted, a failure by its place (the check's verdict, whose words are
    ``task.HELD_OUT``'s), anything else by its status alone."""
    visible, held = case_count(task, False), case_count(task, True)
    if status == "passed":
        return status, f"all {visible + held} tests passed ({held} of them held out)"
    if reason.startswith(f"{task.function}(...) on held-out test"):
        return status, f"all {visible} visible tests passed, but {reason}"
    stopped = HELD_OUT_STOPS.get(status, status)
    return status, f"all {visible} visible tests passed, but on the held-out tests: {stopped}"
