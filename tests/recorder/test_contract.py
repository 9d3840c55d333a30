"""The contract between the sandbox and the grader is one module that both sides read: the recorder builds its
messages from its table of keys, the grader checks them against the same table, and the chapters, the
rules' words and the limits each side uses are that module's."""

import ast
from pathlib import Path

import pytest

import nexttoken.exercises
from nexttoken.grading import decide, orders, protocol
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
    """Every ``send(...)`` in recorder/main.py sends a message the contract built (the notebook's, which the
    grader reads before the others, by its own builders), and ``record`` returns one."""
    tree = ast.parse(MAIN.read_text())
    sent = [call.args[0] for call in ast.walk(tree) if isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name) and call.func.id == "send"]
    assert all(isinstance(a, ast.Call) and isinstance(a.func, ast.Name)
               and a.func.id in ("message", "record", "notebook_read", "notebook_refused") for a in sent)
    assert {"notebook_read", "notebook_refused"} <= {a.func.id for a in sent}
    record = next(f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "record")
    assert isinstance(record.body[-1].value, ast.Call) and record.body[-1].value.func.id == "message"


def test_both_sides_read_the_one_contract():
    assert protocol.MAX_SMALL_LINE == contract.MAX_SMALL_LINE and protocol.kind_of is contract.kind_of
    assert nexttoken.exercises.CHAPTERS is notebook.CHAPTERS is stand_in.CHAPTERS is contract.CHAPTERS
    assert decide.notebook_problem is contract.notebook_problem
    assert orders.RULE is calling.RULE is contract.RULE and calling.NO_THREAD is kernel.NO_THREAD
    assert (wire.MAX_LIST, wire.MAX_STRING, wire.MAX_NUMEL) == (contract.MAX_LIST, contract.MAX_STRING,
                                                                contract.MAX_NUMEL)


def test_the_contract_imports_the_standard_library_alone():
    """Either side reads it without pulling in the other (or torch)."""
    tree = ast.parse(Path(contract.__file__).read_text())
    imported = {alias.name for n in ast.walk(tree) if isinstance(n, ast.Import) for alias in n.names}
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)] and imported <= {"argparse", "json"}


def test_the_recorders_lines_are_the_contracts_encoding_which_the_grader_cuts_and_parses():
    """A line starts with the nonce's prefix and the kind's key exactly as the grader looks for them, whatever
    ``json.dumps``'s defaults are; the order's framing and the command line read back as written."""
    import io

    nonce = "ab" * 16
    line = contract.encode_line(nonce, contract.message("record", "q1", outcomes=[], library=[], tampered=[],
                                                        notes={}))
    prefix = contract.line_prefix(nonce)
    assert line.endswith(b"\n") and line.startswith(prefix) and contract.starts_with(line, len(prefix), "record")
    lines = protocol.Lines(nonce)
    assert lines.feed(b"junk\n" + line) == [line[:-1]]
    assert contract.decode_line(line[:-1])["record"] == "q1"
    stdin = io.BytesIO(contract.nonce_line(nonce) + contract.order_header(b"xyz") + b"xyz")
    assert contract.read_nonce(stdin) == nonce and contract.read_order_bytes(stdin) == b"xyz"
    assert contract.read_order_bytes(io.BytesIO(b"")) is None
    argv = contract.recorder_argv("python", "nb.ipynb", 7, 9, chapter=None, skip={5, 3})
    args = contract.parse_recorder_argv(argv[3:])
    assert (args.notebook, args.chapter, args.skip_cells, args.out_fd, args.no_threads_fd) == \
        ("nb.ipynb", contract.AUTO, {3, 5}, 7, 9)


def test_every_outcome_kind_the_recorder_sends_is_in_the_contract():
    """The kinds ``calling.run_on`` and the recorder's ``record`` write (each outcome a (kind, value) pair
    appended to, or listed as, ``outcomes``), read from their code, are the contract's, and the exercises'
    held-out words name each."""
    from nexttoken.exercises.verdict import HELD_OUT

    def pairs(node):
        return [e for e in getattr(node, "elts", []) if isinstance(e, (ast.Tuple, ast.List)) and len(e.elts) == 2]

    sent = set()
    for module in (calling, main):
        for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
            found = []
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append" \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "outcomes":
                found = [a for a in node.args if isinstance(a, ast.Tuple) and len(a.elts) == 2]
            elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) in ("outcomes", "sent")
                                                      for t in node.targets):
                found = pairs(node.value)
            sent |= {p.elts[0].value for p in found if isinstance(p.elts[0], ast.Constant)}
    assert sent == set(contract.OUTCOMES)
    assert set(contract.OUTCOMES) - {"ok"} <= set(HELD_OUT)
