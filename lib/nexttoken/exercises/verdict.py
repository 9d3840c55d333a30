"""What judging one answer says (``Verdict``), and the grader's own words for a held-out input's failure
(``HELD_OUT``). ``task.Task.verdict`` makes verdicts; ``question.Question`` prints them."""

from dataclasses import dataclass

PREDICT_TRIES = 3  # failed checks of a predict task that say how the guess is off without showing the answer


@dataclass(frozen=True)
class Verdict:
    """What judging one answer found: its status ("passed", "failed", "error", "missing",
    "not_implemented"), the summary a learner reads first, the evidence under it (the input, expected
    against got, how to reproduce it) and the index of the test input it failed on, if one."""
    status: str
    summary: str
    evidence: tuple[str, ...] = ()
    index: int | None = None

    def text(self) -> str:
        """The verdict as the notebook's check prints it and the grader's CSV holds it."""
        return "\n   ".join((self.summary, *self.evidence))


# What a held-out failure says, by what was recorded: the grader's words alone, the same for every
# submission (guide/instructors/held_out.md). "missing" and "not_implemented" cannot follow a visible pass,
# but a record may say so.
HELD_OUT = {
    "wrong": ("failed", "its output is wrong"),
    "wrong type": ("failed", "its output has the wrong type"),
    "wrong shape": ("failed", "its output has the wrong shape"),
    "error": ("error", "it raised an exception"),
    "broke_rule": ("failed", "it broke one of the task's rules (a forbidden call, or a check of how it works)"),
    "changed_input": ("failed", "it changed an input in place"),
    "not_implemented": ("not_implemented", "it still raises NotImplementedError"),
    "missing": ("missing", "the function was not defined"),
    "unknown": ("error", "an unknown outcome was recorded"),
}


def tried_pairs(cases, outcomes) -> list:
    """(input, output) of every outcome that is an output."""
    return [(args, outcome[1]) for args, outcome in zip(cases, outcomes)
            if isinstance(outcome, (tuple, list)) and len(outcome) == 2 and outcome[0] == "ok"]
