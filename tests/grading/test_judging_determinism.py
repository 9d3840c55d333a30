"""Judging is the same whatever else the grader's threads do: every test model and input is
drawn from a generator of its own, never from torch's global one, so a judgement, a work order and a
held-out pass give the same inputs in any thread, beside any other (--jobs), and the global random state
(a learner's, in a notebook) is neither read nor changed. The grading runs themselves, many times over and
as shards, are in test_grade_end_to_end.py."""

import hashlib
import json
import threading

import torch

from nexttoken.exercises import chapter, solutions
from nexttoken.exercises.common import small_model
from nexttoken.grading import orders
from nexttoken.grading.judge import judge
from nexttoken.grading.cases import judged_cases
from nexttoken.model import Decoder, DecoderConfig
from nexttoken.recorder import wire


def fingerprint(value) -> str:
    """A digest of test inputs: every tensor's bytes, every model's configuration, mode and weights."""
    digest = hashlib.sha256()

    def feed(v):
        if isinstance(v, torch.Tensor):
            digest.update(f"{v.dtype}{tuple(v.shape)}".encode())
            digest.update(v.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if v.numel() else b"")
        elif isinstance(v, Decoder):
            digest.update(f"{v.config}{v.training}".encode())
            for name, t in v.state_dict().items():
                digest.update(name.encode())
                feed(t)
        elif isinstance(v, torch.Generator):
            feed(v.get_state())
        elif isinstance(v, (list, tuple)):
            for x in v:
                feed(x)
        else:
            digest.update(repr(v).encode())

    feed(value)
    return digest.hexdigest()


def old_small_model(seed: int, **overrides) -> Decoder:
    """small_model seeded the wrong way: torch.manual_seed on the global generator, inside fork_rng."""
    config = DecoderConfig(**{**dict(vocab_size=50, context_length=16, d_model=32, n_layers=2, n_heads=4,
                                     tie_embeddings=False), **overrides})
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Decoder(config)
        for name, p in model.named_parameters():
            if "norm" in name:
                torch.nn.init.normal_(p, mean=1.0 if name.endswith("weight") else 0.0, std=0.3)
            else:
                torch.nn.init.normal_(p, std=0.5)
    return model.eval()


class Noise:
    """A thread that seeds and draws from torch's global generator without pause, as a judgement that
    seeded it (or a learner's code, in a notebook) would, until the block ends."""

    def __init__(self):
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        seed = 0
        while not self.stop.is_set():
            seed += 1
            torch.manual_seed(seed)
            torch.rand(64)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def test_a_test_model_is_the_same_as_before_and_leaves_the_global_generator_alone():
    for seed, overrides in [(0, {}), (7, {"vocab_size": 200}), (305, {"d_model": 48, "n_heads": 6}),
                            (451, {"dropout": 0.3}), (625, {"vocab_size": 50257, "context_length": 3})]:
        torch.manual_seed(1234)
        state = torch.get_rng_state()
        model = small_model(seed, **overrides)
        assert torch.equal(torch.get_rng_state(), state)  # neither read nor changed
        assert fingerprint(model) == fingerprint(old_small_model(seed, **overrides)), seed


def test_test_models_built_beside_a_thread_that_seeds_are_the_same():
    expected = [fingerprint(small_model(seed)) for seed in range(12)]
    with Noise():
        got = [fingerprint(small_model(seed)) for seed in range(12) for _ in range(3)]
    assert got == [e for e in expected for _ in range(3)]


def held_out_record(task) -> dict:
    """The record a right answer's held-out run sends, as the grader receives it."""
    function = solutions(task.chapter)[task.function]
    cases, _ = judged_cases(task, True)
    outcomes = [[kind, wire.encode(value)] for kind, value in task.run(function, cases)]
    return json.loads(json.dumps({"outcomes": outcomes}))


def test_a_right_answer_is_judged_right_while_another_thread_builds_held_out_inputs():
    """A held-out pass building cases beside a judgement: were the test models seeded on torch's global
    generator, outside the judging lock, the judgement would compare with other inputs (49 of 60 right
    answers failed so)."""
    task = chapter("ch04").q4.task
    record = held_out_record(task)
    assert judge(task, record, held_out=True)[0] == "passed"

    def build():
        while not stop.is_set():
            task.cases()
            judged_cases(task, True)

    stop = threading.Event()
    builder = threading.Thread(target=build, daemon=True)
    builder.start()
    try:
        verdicts = [judge(task, record, held_out=True) for _ in range(6)]
    finally:
        stop.set()
        builder.join()
    assert all(status == "passed" for status, _ in verdicts), verdicts


def test_a_work_order_built_beside_a_thread_that_seeds_holds_the_inputs_the_judge_builds():
    task = chapter("ch05").q2.task
    expected = fingerprint(judged_cases(task, True)[0])
    with Noise():
        built = [fingerprint(orders.order_of(task, True)["cases"]) for _ in range(3)]
    assert built == [expected] * 3
