"""The run stage (nexttoken.grading.run, with follow and stops) against a fake process: a scripted recorder
in a thread, behind the seam the sandboxes give (``launch.Sandboxes.recorder``: a context that yields the
process and the read end of its messages). No sandbox, no torch start: what runs next, and what each stop
costs, decided from the messages alone."""

import contextlib
import os
import threading

from nexttoken.grading import launch
from nexttoken.grading.run import Settings, run_submission
from nexttoken.recorder import contract, wire

CELLS = 3  # the fake notebook's code cells (a run may announce no more than the file holds)
DATA = b'{"cells": [' + b",".join([b'{"cell_type": "code", "source": ""}'] * CELLS) + b"]}"
RECORD = {"outcomes": [], "library": [], "tampered": [], "notes": {}}
NOTEBOOK = contract.notebook_read("ch02", 4)
ALL = ["q1", "q2", "q3", "q4", "q5"]  # chapter 2's tasks, none of which forbids generate


class FakeProcess:
    """A recorder's process as ``follow.Follower`` uses one. It reads the nonce from its stdin, says
    ``first`` (the notebook's message), reads the work order's task names, then says ``rest(tasks)``, each
    message after the nonce; "hang" stops saying anything, "crash" ends it as a signal would."""

    def __init__(self, write_end: int, first: dict, rest):
        self.write_end, self.first, self.rest = write_end, first, rest
        self.nonce, self.code, self.received, self.tasks = None, None, b"", []
        self.ordered, self.over = threading.Event(), threading.Event()
        self.stdin = self  # the Follower writes the nonce, then the order, here

    def write(self, data: bytes) -> None:
        if self.nonce is None:
            self.nonce = data.decode().strip()
            threading.Thread(target=self.speak, daemon=True).start()
            return
        self.received += data
        header, _, order = self.received.partition(b"\n")
        if header.isdigit() and len(order) == int(header):
            self.tasks = [task["name"] for task in wire.unpack_order(order)["tasks"]]
            self.ordered.set()

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.ordered.set()  # no order: the recorder ends

    def speak(self) -> None:
        try:
            self.say(self.first)
            self.ordered.wait(60)
            for step in self.rest(self.tasks):
                if step == "hang":
                    self.over.wait(60)
                    break
                if step == "crash":
                    self.code = -9
                    break
                self.say(step)
            else:
                self.code = 0
        except BrokenPipeError:  # the grader stopped following the run: as a killed process, say no more
            self.code = -9
        finally:
            os.close(self.write_end)

    def say(self, message: dict) -> None:
        os.write(self.write_end, contract.encode_line(self.nonce, message))

    def wait(self, timeout: float) -> int:
        return -9 if self.code is None else self.code


class FakeBoxes:
    """``launch.Sandboxes``, scripted: each run says ``script(run_number, skip)``'s (first message, rest);
    each run's (skipped cells, generate's message in its sandbox) is kept in ``runs``."""

    def __init__(self, script):
        self.script, self.runs = script, []

    @contextlib.contextmanager
    def recorder(self, chapter, skip, without_generate=None):
        first, rest = self.script(len(self.runs), skip)
        self.runs.append((sorted(skip), without_generate))
        read_end, write_end = os.pipe()
        process = FakeProcess(write_end, first, rest)
        try:
            yield launch.Started(process, read_end)
        finally:
            process.over.set()
            process.ordered.set()
            os.close(read_end)


def cells(skip) -> list:
    return [{"cell": n} for n in range(1, CELLS + 1) if n not in skip]


def recorded(tasks, crash_in=None) -> list:
    out = []
    for name in tasks:
        out.append({"task": name})
        if name == crash_in:
            return out + ["crash"]
        out.append({"record": name, **RECORD})
    return out + [{"done": True}]


def graded(script, **settings):
    boxes = FakeBoxes(script)
    recording = run_submission(DATA, Settings(timeout=2, use_sandbox=False, **settings), 0, boxes=boxes)
    return recording, boxes.runs


def honest(run, skip):
    return NOTEBOOK, lambda tasks: [*cells(skip), *recorded(tasks)]


def test_one_run_records_every_task():
    recording, runs = graded(honest)
    assert sorted(recording.records) == ALL and recording.results == {} and runs == [([], None)]


def test_a_cell_that_hangs_is_skipped_in_the_next_run():
    def script(run, skip):
        if run == 0:
            return NOTEBOOK, lambda tasks: [{"cell": 1}, {"cell": 2}, "hang"]
        return honest(run, skip)
    recording, runs = graded(script)
    assert runs == [([], None), ([2], None)]
    assert sorted(recording.records) == ALL and recording.skip[2].startswith("code cell 2 ran past 2 s")


def test_a_task_that_crashes_is_charged_alone_and_the_next_run_records_the_rest():
    def script(run, skip):
        return NOTEBOOK, lambda tasks: [*cells(skip), *recorded(tasks, crash_in="q2" if run == 0 else None)]
    recording, runs = graded(script)
    assert len(runs) == 2 and recording.results["q2"][0] == "crashed" and "signal 9" in recording.results["q2"][1]
    assert sorted(recording.records) == ["q1", "q3", "q4", "q5"]


def test_a_forged_message_costs_the_submission_and_buys_no_second_run():
    forged = {"record": "q1", **RECORD}  # a record while cell 1 runs: out of order
    recording, runs = graded(lambda run, skip: (NOTEBOOK, lambda tasks: [{"cell": 1}, forged, "hang"]))
    assert runs == [([], None)]
    assert all(recording.results[t][0] == "error" and "not run again" in recording.results[t][1] for t in ALL)


def test_a_refused_notebook_runs_no_task():
    refused = contract.notebook_refused("invalid_notebook", "not JSON")
    recording, runs = graded(lambda run, skip: (refused, lambda tasks: ["hang"]))
    assert runs == [([], None)] and recording.tasks == {} and not recording.decision.graded
    assert recording.decision.problem == ("invalid_notebook", "not JSON")


def test_another_chapter_than_the_assignments_runs_no_task():
    recording, runs = graded(honest, chapter="ch05")
    assert runs == [([], None)] and recording.tasks == {} and recording.decision.expected == "ch05"
