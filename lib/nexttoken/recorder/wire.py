"""The one data format between the sandbox and the grader, both ways, within the limits of ``contract``.

In: the grader's *work order* (``pack_order``), what the sandbox is to call: each task's function name,
its rules and checks of how by name, and its test inputs as data (tensors, numbers, and models as their
configuration and weights), the held-out ones among them unnamed. Never a reference, an expected output or
a task's code: the sandbox rebuilds the inputs with ``unpack_order`` and calls the learner's functions on
them (``main``).

Out: inside the sandbox the recorder turns each output of a learner's function into plain JSON data with
``encode``, cut down to the limits (``contract.MAX_*``); outside, the grader trusts none of it and rebuilds
it with ``decode_outcomes``, which refuses anything beyond the same limits. ``calling.run_on`` keeps lists
within ``MAX_LIST`` too, so ``check()`` in a notebook sees what the grader sees.

Tensors travel out as ``{"dtype", "shape", "data"}``, data being base64 of the contiguous bytes.
"""

import base64
import binascii
import dataclasses
import io

import torch

from ..checks import is_int
from ..model import Decoder, DecoderConfig
from .contract import MAX_DEPTH, MAX_ITEMS, MAX_KIND, MAX_LIST, MAX_NUMEL, MAX_STRING
DTYPES = {name: getattr(torch, name) for name in
          ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")}


class Rejected(Exception):
    """A recorded output that is not plain data within the limits."""


def encode(value, depth: int = 0):
    """A learner's output as JSON-able plain data, cut down to the limits (the grader checks it again)."""
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        return {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                "data": base64.b64encode(raw).decode("ascii")}
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value[:MAX_STRING]
    if isinstance(value, (list, tuple)) and depth < MAX_DEPTH:
        return [encode(v, depth + 1) for v in value[:MAX_LIST]]
    return f"<an object of type {type(value).__name__}>"


def decode_outcomes(outcomes, n_cases: int) -> list[tuple[str, object]]:
    """A task's recorded (kind, value) pairs, values rebuilt as Python and torch data, or Rejected."""
    if not isinstance(outcomes, list) or not 1 <= len(outcomes) <= n_cases:
        raise Rejected(f"expected a list of 1 to {n_cases} outcomes")
    budget, decoded = [MAX_ITEMS], []
    for item in outcomes:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                and 0 < len(item[0]) <= MAX_KIND):
            raise Rejected("an outcome that is not a (kind, value) pair")
        decoded.append((item[0], decode_value(item[1], 0, budget)))
    return decoded


def decode_value(value, depth: int, budget: list):
    """A recorded value as plain Python/torch data, or Rejected. ``budget[0]`` counts values left."""
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
        return [decode_value(v, depth + 1, budget) for v in value]
    if isinstance(value, dict) and set(value) == {"dtype", "shape", "data"}:
        return decode_tensor(value)
    raise Rejected(f"a value of type {type(value).__name__}")


def decode_tensor(value: dict) -> torch.Tensor:
    """A dense, contiguous CPU tensor of an allowed dtype, rebuilt from exactly numel * itemsize bytes."""
    dtype, shape, data = DTYPES.get(value["dtype"]), value["shape"], value["data"]
    if dtype is None:
        raise Rejected(f"a tensor of dtype {str(value['dtype'])[:20]!r}")
    if not (isinstance(shape, list) and len(shape) <= 8
            and all(is_int(s) and 0 <= s <= MAX_NUMEL for s in shape)):
        raise Rejected("a tensor with an invalid shape")
    numel = footprint = 1
    for s in shape:
        numel *= s
        footprint *= max(s, 1)
    if numel > MAX_NUMEL:
        raise Rejected(f"a tensor of more than {MAX_NUMEL} elements")
    if footprint > MAX_NUMEL:  # printing it (tolist) would build a list per index of its other dimensions
        raise Rejected(f"a tensor with no elements but dimensions {shape[:4]} whose product (zero dimensions "
                       f"left out) is over {MAX_NUMEL}")
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


# --- the work order, into the sandbox ---

def pack_order(order: dict) -> bytes:
    """The grader's work order as bytes: ``order["tasks"][i]["cases"]`` hold the tasks' test inputs as
    Python objects (tensors, numbers, lists, tuples, None, Decoders, DecoderConfigs, torch.Generators);
    everything else in it is plain data. A Decoder used by two inputs stays one model on the other side
    (a task may call one model twice on purpose)."""
    models: dict[int, int] = {}
    table: list[dict] = []

    def pack(value):
        if isinstance(value, torch.Tensor):
            return value.detach().clone()
        if isinstance(value, Decoder):
            if id(value) not in models:
                models[id(value)] = len(table)
                table.append({"config": dataclasses.asdict(value.config), "training": value.training,
                              "state": {k: v.detach().clone() for k, v in value.state_dict().items()}})
            return {"model": models[id(value)]}
        if isinstance(value, DecoderConfig):
            return {"config": dataclasses.asdict(value)}
        if isinstance(value, torch.Generator):
            return {"generator": value.get_state()}
        if isinstance(value, tuple):
            return {"tuple": [pack(v) for v in value]}
        if isinstance(value, list):
            return [pack(v) for v in value]
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        raise TypeError(f"a test input of type {type(value).__name__} has no form in the work order")

    tasks = [{**task, "cases": [pack(tuple(args)) for args in task["cases"]]} for task in order["tasks"]]
    buffer = io.BytesIO()
    torch.save({**order, "tasks": tasks, "models": table}, buffer)
    return buffer.getvalue()


def unpack_order(data: bytes) -> dict:
    """The work order with its inputs rebuilt as Python objects (``pack_order``'s inverse). Inside the
    sandbox, before any learner code runs."""
    order = torch.load(io.BytesIO(data), weights_only=True)
    models = []
    for entry in order.pop("models"):
        with torch.random.fork_rng():  # building a model draws weights: keep the global random state as it was
            model = Decoder(DecoderConfig(**entry["config"]))
        model.load_state_dict(entry["state"])
        models.append(model.train(entry["training"]))

    def unpack(value):
        if isinstance(value, list):
            return [unpack(v) for v in value]
        if not isinstance(value, dict):
            return value
        if "model" in value:
            return models[value["model"]]
        if "config" in value:
            return DecoderConfig(**value["config"])
        if "generator" in value:
            generator = torch.Generator()
            generator.set_state(value["generator"])
            return generator
        return tuple(unpack(v) for v in value["tuple"])

    for task in order["tasks"]:
        task["cases"] = [unpack(case) for case in task["cases"]]
    return order
