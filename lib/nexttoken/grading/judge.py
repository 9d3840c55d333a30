"""The judging stage, after the runs: each task's record of a submission's runs (``run.Recording``) judged
(``judge_recording``), and with --held-out, the held-out runs' records of the tasks that passed
(``judge_held_out``). One record's judging (``judge``): the recorded outputs decoded (``wire``), then
compared with the reference by the task itself (``Task.verdict``, the same comparison a learner's
``check()`` makes). The exercises' verdicts are taken as they come: no text of theirs is read back."""

import contextlib
import resource
import threading

from ..recorder.wire import Rejected, decode_outcomes
from .cases import judged_cases
from .rows import NO_OUTPUTS

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


def judge_recording(recording) -> None:
    """Each task's record of the visible runs judged into ``recording``: its (status, reason), its library
    calls, the notes its row writes out (the tasks without a record have their stop's result already)."""
    for task_name, record in recording.records.items():
        recording.calls[task_name] = library_calls(record)
        recording.notes[task_name] = record.get("notes") or {}
        recording.results[task_name] = judge(recording.tasks[task_name], record)


def judge_held_out(recording, hidden) -> None:
    """The result of each task that passed on its visible inputs, after its held-out runs (``hidden``, a
    ``run.Recording`` of those tasks): a pass counted, a failure by the check's verdict, a stop by its
    status alone (``held_out_verdict``)."""
    for task_name, task in hidden.tasks.items():
        if task_name in hidden.records:
            status, reason, checked = verdict(task, hidden.records[task_name], held_out=True)
        else:
            (status, reason), checked = hidden.results.get(task_name, ("error", NO_OUTPUTS)), False
        recording.results[task_name] = held_out_verdict(task, status, reason, checked)


def judge(task, record: dict, held_out: bool = False) -> tuple[str, str]:
    """(status, reason) for one task's record, of a run on its visible inputs or (``held_out``) on its
    held-out inputs alone. Never raises: a failure of judging is a grader_error."""
    return verdict(task, record, held_out)[:2]


def verdict(task, record: dict, held_out: bool = False) -> tuple[str, str, bool]:
    """``judge``'s (status, reason), and whether the check itself found an output wrong on a held-out input
    (its words then are ``task.HELD_OUT``'s, which the held-out verdict repeats)."""
    tampered = record.get("tampered")
    if tampered:
        names = ", ".join(str(n)[:60] for n in tampered[:3]) if isinstance(tampered, list) else "?"
        return "error", f"your code replaced part of the grader's recorder ({names}), so this task was not " \
                        "graded", False
    with JUDGING, memory_cap():
        try:
            inputs, hidden = judged_cases(task, held_out)
            outcomes = decode_outcomes(record.get("outcomes"), len(inputs))
        except Rejected as exc:
            return "error", f"the recorded outputs were rejected: {exc}", False
        try:
            status, reason, checked = _checked(task, outcomes, inputs, hidden)
        except MemoryError:
            return "grader_error", (f"judging {task.name} needed more than {JUDGE_MEMORY_MB} MB, so it was "
                                    "stopped; the other tasks and submissions were graded"), False
        except Exception as exc:
            return "grader_error", f"judging {task.name} failed: {type(exc).__name__}: {str(exc)[:300]}", False
    return status, reason, checked


def _checked(task, outcomes, inputs, hidden: dict) -> tuple[str, str, bool]:
    """The task's own verdict on the outcomes, and whether it fails them on a held-out input."""
    if not hidden:
        status, reason, index = *task.evaluate(outcomes, inputs, hidden), None
    else:
        found = task.verdict(outcomes, inputs, hidden=hidden)
        status, reason, index = found.status, found.text(), found.index
    if not (isinstance(status, str) and isinstance(reason, str)):
        raise TypeError("evaluate did not return (str, str)")
    return status, reason, index is not None and index in hidden


def library_calls(record: dict) -> str:
    """The library functions the answer called that the exercise has it write (the recorder watched for
    them), for the CSV's library_calls column: reported to the instructor, not penalised."""
    library = record.get("library")
    return ", ".join(str(n)[:60] for n in library[:3]) if isinstance(library, list) else ""


# A held-out run that stopped, by the stop's status: the grader's words, never the stop's detail.
HELD_OUT_STOPS = {"timeout": "it ran past the time limit (--timeout, or the notebook's budget)",
                  "crashed": "the process running it stopped", "too_much_output": "it sent too much output",
                  "grader_error": "the grader could not judge it"}


def held_out_verdict(task, status: str, reason: str, checked: bool) -> tuple[str, str]:
    """(status, reason) of a task that passed on its visible inputs, after its held-out run (``status`` and
    ``reason``, as judged): a pass counted, a failure the check found on a held-out input (``checked``) in
    the check's words (``task.HELD_OUT``'s), anything else by its status alone."""
    visible, held = case_count(task, False), case_count(task, True)
    if status == "passed":
        return status, f"all {visible + held} tests passed ({held} of them held out)"
    if checked:
        return status, f"all {visible} visible tests passed, but {reason}"
    stopped = HELD_OUT_STOPS.get(status, status)
    return status, f"all {visible} visible tests passed, but on the held-out tests: {stopped}"
