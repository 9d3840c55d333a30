"""The grader's trust boundary (issue 43), without a sandbox: what crosses it and what the inside imports.

The submission's process only computes: it gets a work order (``grading.orders``: function names, rules,
inputs as data) and returns outputs. Judging stays outside. These tests hold the pieces of that design in
place; tests/grading/test_grade_boundary.py attacks it through real sandboxes.
"""

import ast
from pathlib import Path

import pytest
import torch

import nexttoken
from nexttoken.exercises import CHAPTERS, chapter, solutions
from nexttoken.grading import sandbox, sandboxed_exercises
from nexttoken.grading.orders import library_names, work_order
from nexttoken.grading.wire import pack_order, unpack_order
from nexttoken.model import Decoder

PACKAGE = Path(nexttoken.__file__).parent
# What runs inside the sandbox, and the modules of nexttoken it may import.
INSIDE = ["exercises/calling.py", "exercises/watches.py", "grading/recorder.py", "grading/wire.py"]
INSIDE_MAY_IMPORT = {"nexttoken.exercises", "nexttoken.exercises.calling", "nexttoken.exercises.watches",
                     "nexttoken.grading", "nexttoken.grading.wire", "nexttoken.grading.recorder",
                     "nexttoken.model"}


def nexttoken_imports(path: Path) -> set[str]:
    """The nexttoken modules a file imports (relative imports resolved)."""
    package = "nexttoken." + ".".join(path.relative_to(PACKAGE).parent.parts)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if module.startswith("nexttoken"):
                found.add(module)
                folder = PACKAGE.joinpath(*module.split(".")[1:])
                found.update(f"{module}.{a.name}" for a in node.names if (folder / f"{a.name}.py").exists())
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("nexttoken"))
    return found


@pytest.mark.parametrize("name", INSIDE)
def test_the_inside_imports_only_the_library_and_the_wire(name):
    imported = nexttoken_imports(PACKAGE / name)
    assert imported <= INSIDE_MAY_IMPORT, imported - INSIDE_MAY_IMPORT


def test_the_exercises_never_import_the_grader():
    for path in sorted((PACKAGE / "exercises").glob("*.py")):
        assert not any(m.startswith("nexttoken.grading") for m in nexttoken_imports(path)), path.name


def test_every_judging_file_of_the_exercises_is_hidden_in_the_sandbox():
    """A file added to nexttoken/exercises/ is hidden in the sandbox unless it is one of the calling half's."""
    calling_half = {"__init__.py", "calling.py", "watches.py"}
    present = {p.name for p in (PACKAGE / "exercises").iterdir() if p.is_file()}
    assert present - calling_half <= set(sandbox.JUDGING_FILES), present - calling_half - set(sandbox.JUDGING_FILES)
    files, folders, init = sandbox.hidden_files()
    assert {Path(f).name for f in files} == present - calling_half
    assert init == str(PACKAGE / "exercises" / "__init__.py")
    assert sandboxed_exercises.CHAPTERS == CHAPTERS


def test_the_sandboxed_exercises_module_has_no_tasks():
    stub = sandboxed_exercises.__getattr__("ch02")
    assert stub.q1.check(print) is None and stub.q1.failing_input() is None
    assert stub.q1.reference(3) is None  # an alias of "the reference" is a function that returns None
    with pytest.raises(AttributeError):
        sandboxed_exercises.__getattr__("held_out")


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, Decoder):
        return (isinstance(b, Decoder) and a.config == b.config and a.training == b.training
                and all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values())))
    if isinstance(a, torch.Generator):
        return isinstance(b, torch.Generator) and torch.equal(a.get_state(), b.get_state())
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("held_out", [False, True])
@pytest.mark.parametrize("name", CHAPTERS)
def test_the_work_order_carries_the_inputs_the_judge_uses(name, held_out):
    """Every input of every task arrives as the judge builds it (a model used twice arrives as one model),
    and nothing but plain data and the inputs travels. A run's order holds the visible inputs or the
    held-out ones, never both: no run that can show a learner's text holds a held-out input."""
    module = chapter(name)
    order = unpack_order(work_order(name, module.TASKS, held_out=held_out))
    assert order["chapter"] == name and [t["name"] for t in order["tasks"]] == module.TASKS
    for sent in order["tasks"]:
        task = getattr(module, sent["name"])
        assert set(sent) == {"name", "function", "arg_names", "forbid", "watch", "library", "cases"}
        judged = task.judged_cases(held_out)[0]
        assert same(sent["cases"], [tuple(c) for c in judged])
        assert len(judged) == (len(task.held_out_cases()) if held_out else len(task.cases()))
        models = [a for case in sent["cases"] for a in case if isinstance(a, Decoder)]
        built = [a for case in judged for a in case if isinstance(a, Decoder)]
        assert len({id(m) for m in models}) == len({id(m) for m in built})


@pytest.mark.parametrize("name", CHAPTERS)
def test_the_solutions_pass_on_the_inputs_that_crossed(name):
    """The calling half on the order's inputs, the judging half on the judge's own: the solutions pass."""
    module, answers = chapter(name), solutions(name)
    from nexttoken.exercises.calling import run_on
    from nexttoken.exercises.watches import WATCHES

    order = unpack_order(work_order(name, module.TASKS, held_out=True))
    for sent in order["tasks"]:
        task = getattr(module, sent["name"])
        outcomes = run_on(answers[sent["function"]], sent["cases"], sent["forbid"], WATCHES.get(sent["watch"]),
                          sent["arg_names"])
        assert task.evaluate(outcomes, held_out=True)[0] == "passed", (name, sent["name"])


def test_a_packed_order_refuses_an_input_it_has_no_form_for():
    with pytest.raises(TypeError, match="no form in the work order"):
        pack_order({"tasks": [{"name": "q1", "cases": [(object(),)]}]})


def test_library_names_resolve_to_the_library():
    assert "nexttoken.model:causal_mask" in library_names(chapter("ch02").q1)
    assert "nexttoken.generate:generate" in library_names(chapter("ch06").q5)


def test_a_sandbox_without_generate_replaces_its_file_and_hides_its_compiled_copies(monkeypatch):
    monkeypatch.setattr(sandbox, "_python_roots", lambda: [])
    monkeypatch.setattr(sandbox, "generate_files",
                        lambda: ("/pkg/nexttoken/generate.py", ["/pkg/nexttoken/__pycache__/generate.cpython-311.pyc"]))
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)  # the rootless command: no uid to pass
    cmd = sandbox.bwrap_command(["true"], sandbox.Limits(), 3, None, 4, generate_fd=7)
    at = cmd.index("--ro-bind-data")
    assert cmd[at - 2:at + 3] == ["--perms", "0644", "--ro-bind-data", "7", "/pkg/nexttoken/generate.py"]
    assert ["--ro-bind", "/dev/null", "/pkg/nexttoken/__pycache__/generate.cpython-311.pyc"] == cmd[at + 3:at + 6]
    assert "--ro-bind-data" not in sandbox.bwrap_command(["true"], sandbox.Limits(), 3, None, 4)


def test_the_generate_a_forbidding_sandbox_shows_keeps_the_rest_of_the_module():
    from nexttoken.exercises.calling import RULE
    from nexttoken.grading.orders import first_tasks, generate_rule

    module = chapter("ch05")
    message = generate_rule(module.q2)
    assert message.startswith(RULE) and generate_rule(module.q1) is None
    assert "q2" not in first_tasks("ch05") and "q1" in first_tasks("ch05")
    space: dict = {"__name__": "nexttoken.generate", "__package__": "nexttoken"}
    exec(compile(sandbox.without_generate(message), "generate.py", "exec"), space)
    assert {"greedy", "sample", "temperature"} <= set(space)
    with pytest.raises(RuntimeError) as raised:
        space["generate"](None, None, 1)
    assert str(raised.value) == message
    # every task that forbids it says the same rule: one generate.py serves them all
    rules = {generate_rule(getattr(chapter(c), t)) for c in CHAPTERS for t in chapter(c).TASKS} - {None}
    assert len(rules) == 1
