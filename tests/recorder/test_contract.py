"""The contract between the sandbox and the grader is one module that both sides read: the recorder builds its
messages from its table of keys, the grader checks them against the same table, and the chapters, the
rules' words and the limits each side uses are that module's."""

import ast
from pathlib import Path

import pytest

import nexttoken.exercises
from nexttoken.grading import orders, protocol
from nexttoken.grading import run as graded
from nexttoken.recorder import calling, contract, kernel, main, notebook, stand_in, wire

MAIN = Path(main.__file__)


def test_every_message_kind_is_built_with_the_keys_the_grader_checks():
    sent = [contract.message("cell", 1), contract.message("cell_error", 1, error="NameError: x"),
            contract.message("task", "q1"),
            contract.message("record", "q1", outcomes=[["ok", 1]], library=[], tampered=[], notes={}),
            contract.message("done", True)]
    assert [set(m) for m in sent] == list(contract.KEYS.values())
    sequence = protocol.Sequence(["q1"])
    assert [sequence.check({"nonce": "n", **m}, ("cell", 1)) for m in sent] == [None] * 5


@pytest.mark.parametrize("kind,value,keys", [("cell", 1, {"error": "x"}), ("record", "q1", {"outcomes": []}),
                                              ("notebook", "read", {})])
def test_a_message_with_other_keys_than_its_kind_has_is_never_built(kind, value, keys):
    with pytest.raises(ValueError, match=f"a '{kind}' message has the keys"):
        contract.message(kind, value, **keys)


def test_the_recorder_sends_its_messages_built_by_the_contract():
    """Every ``send(...)`` in recorder/main.py but the notebook's (which the grader reads before the others,
    by its own keys) sends ``message(...)``, and ``record`` returns one."""
    tree = ast.parse(MAIN.read_text())
    sent = [call.args[0] for call in ast.walk(tree) if isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name) and call.func.id == "send"]
    literal = [arg for arg in sent if isinstance(arg, ast.Dict)]
    assert {ast.literal_eval(d.values[0]) for d in literal} == {"read", "refused"}
    assert all(isinstance(a.func, ast.Name) and a.func.id in ("message", "record") for a in sent if a not in literal)
    record = next(f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "record")
    assert isinstance(record.body[-1].value, ast.Call) and record.body[-1].value.func.id == "message"


def test_both_sides_read_the_one_contract():
    assert protocol.KEYS is contract.KEYS and protocol.MAX_TOKENS == contract.MAX_TOKENS
    assert nexttoken.exercises.CHAPTERS is notebook.CHAPTERS is stand_in.CHAPTERS is contract.CHAPTERS
    assert graded.CHAPTERS is contract.CHAPTERS and graded.NOTEBOOK_STATUSES is contract.NOTEBOOK_STATUSES
    assert orders.RULE is calling.RULE is contract.RULE and calling.NO_THREAD is kernel.NO_THREAD
    assert (wire.MAX_LIST, wire.MAX_STRING, wire.MAX_NUMEL) == (contract.MAX_LIST, contract.MAX_STRING,
                                                                contract.MAX_NUMEL)


def test_the_contract_imports_nothing():
    """Either side reads it without pulling in the other (or torch)."""
    tree = ast.parse(Path(contract.__file__).read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
