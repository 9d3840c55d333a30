"""Judging one task's record: the recorded outputs decoded (``wire``), then compared with the reference
by the task itself (``Task.evaluate``, the same comparison a learner's ``check()`` makes)."""

import threading

from .wire import Rejected, decode_outcomes

# Judging builds the tasks' seeded inputs and reference models under torch's global RNG (fork_rng and
# manual_seed), which is not thread-safe: with --jobs, one judgement at a time.
JUDGING = threading.Lock()


def judge(task, record: dict, held_out: bool = False) -> tuple[str, str]:
    """(status, reason) for one task's record (of a run with or without the held-out inputs). Never
    raises: a failure of judging is a grader_error."""
    tampered = record.get("tampered")
    if tampered:
        names = ", ".join(str(n)[:60] for n in tampered[:3]) if isinstance(tampered, list) else "?"
        return "error", f"your code replaced part of the grader's recorder ({names}), so this task was not graded"
    with JUDGING:
        try:
            inputs = task.graded_cases(True)[0] if held_out else task.cases()
            outcomes = decode_outcomes(record.get("outcomes"), len(inputs))
        except Rejected as exc:
            return "error", f"the recorded outputs were rejected: {exc}"
        try:
            status, reason = task.evaluate(outcomes, held_out)
            if not (isinstance(status, str) and isinstance(reason, str)):
                raise TypeError("evaluate did not return (str, str)")
        except Exception as exc:
            return "grader_error", f"judging {task.name} failed: {type(exc).__name__}: {exc}"
    return status, reason


def library_calls(record: dict) -> str:
    """The library functions the answer called that the exercise has it write (the recorder watched for
    them), for the CSV's library_calls column: reported to the instructor, not penalised."""
    library = record.get("library")
    return ", ".join(str(n)[:60] for n in library[:3]) if isinstance(library, list) else ""
