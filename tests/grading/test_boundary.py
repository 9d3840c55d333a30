"""The grader's trust boundary, without a sandbox: what crosses it and what the inside imports.

The submission's process only computes: it gets a work order (``grading.orders``: function names, rules,
inputs as data) and returns outputs. Judging stays outside. These tests hold the pieces of that design in
place; tests/grading/test_grade_boundary.py attacks it through real sandboxes.
"""

import ast
import importlib
import os
import sys
import types
from pathlib import Path

import pytest
import torch

import nexttoken
from nexttoken.exercises import CHAPTERS, chapter, solutions
from nexttoken.exercises.held_out import cases_of
from nexttoken.grading import sandbox
from nexttoken.grading.cases import judged_cases
from nexttoken.grading.orders import work_order
from nexttoken.grading.sandbox import policy
from nexttoken.recorder.calling import copy_args
from nexttoken.model import Decoder
from nexttoken.recorder import stand_in
from nexttoken.recorder.wire import pack_order, unpack_order

PACKAGE = Path(nexttoken.__file__).parent
# What runs inside the sandbox (the recorder package) and the library it may import: the allow-list's.
INSIDE = sorted(str(p.relative_to(PACKAGE)) for p in (PACKAGE / policy.INSIDE).glob("*.py"))
LIBRARY = sorted(name for name in policy.LIBRARY if name.endswith(".py"))
LIBRARY_MODULES = {"nexttoken"} | {f"nexttoken.{name[:-3]}" for name in LIBRARY}


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
def test_the_inside_imports_only_the_library_and_itself(name):
    imported = {m for m in nexttoken_imports(PACKAGE / name) if not m.startswith("nexttoken.recorder")}
    assert imported <= LIBRARY_MODULES, imported - LIBRARY_MODULES


@pytest.mark.parametrize("name", LIBRARY)
def test_the_library_never_imports_the_exercises_or_the_grader(name):
    imported = nexttoken_imports(PACKAGE / name)
    assert not {m for m in imported if m.startswith(("nexttoken.exercises", "nexttoken.grading"))}, imported


def test_the_exercises_never_import_the_grader():
    for path in sorted((PACKAGE / "exercises").glob("*.py")):
        assert not any(m.startswith("nexttoken.grading") for m in nexttoken_imports(path)), path.name


def test_the_sandbox_shows_the_allow_list_and_nothing_of_the_exercises_or_the_grader(tmp_path):
    """A package laid out as nexttoken is, with a file added to exercises/ and grading/ that no list names:
    the sandbox shows neither, nor anything else of those folders; the stand-in is nexttoken.exercises."""
    package = tmp_path / "nexttoken"
    for name in [*policy.LIBRARY, "exercises/ch02.py", "exercises/new.py", "grading/new.py", "training/x.py",
                 "recorder/main.py", "recorder/stand_in.py", "__pycache__/model.cpython-311.pyc",
                 "__pycache__/grade.cpython-311.pyc", "exercises/__pycache__/ch02.cpython-311.pyc"]:
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).touch()
    shown = {place: source for source, place in policy.shown(package)}  # where it appears: what it is
    assert shown.pop(str(package / "exercises" / "__init__.py")) == str(package / "recorder" / "stand_in.py")
    assert {Path(p).relative_to(package).parts[0] for p in shown} == set(policy.SHOWN) | {"__pycache__"}
    assert str(package / "__pycache__" / "model.cpython-311.pyc") in shown
    assert not any(Path(p).name.startswith("grade") for p in shown)
    assert not any(p.startswith((str(package / "exercises"), str(package / "grading"))) for p in shown.values())
    assert {p.name for p in policy.hidden(package)} == {"exercises", "grading", "training"}
    assert str(package / "generate.py") not in {place for _, place in policy.shown(package, generate=False)}
    assert stand_in.CHAPTERS == CHAPTERS


def test_the_sandbox_command_binds_the_allow_list_into_an_empty_package(monkeypatch):
    package = policy.package_folder()
    monkeypatch.setattr(policy, "python_roots", lambda: [str(package.parent)])
    monkeypatch.setattr(policy.os, "geteuid", lambda: 1000)  # the rootless command: no uid to pass
    cmd = sandbox.bwrap_command(["true"], sandbox.Limits(), 3, None, 4)
    empty = cmd.index("--tmpfs", cmd.index(str(package.parent)))
    done = cmd.index("--remount-ro", empty)
    assert cmd[empty + 1] == str(package) and cmd[done + 1] == str(package)
    binds = [cmd[i + 1] for i in range(empty, done) if cmd[i] == "--ro-bind"]
    assert binds == [source for source, _ in policy.shown(package)]


def test_the_stand_in_for_the_exercises_has_no_tasks():
    stub = stand_in.__getattr__("ch02")
    assert stub.q1.check(print) is None and stub.q1.failing_input() is None
    assert stub.q1.reference(3) is None  # an alias of "the reference" is a function that returns None
    with pytest.raises(AttributeError):
        stand_in.__getattr__("held_out")


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
        judged = judged_cases(task, held_out)[0]
        assert same(sent["cases"], [tuple(c) for c in judged])
        assert len(judged) == (len(cases_of(task)) if held_out else len(task.cases()))
        models = [a for case in sent["cases"] for a in case if isinstance(a, Decoder)]
        built = [a for case in judged for a in case if isinstance(a, Decoder)]
        assert len({id(m) for m in models}) == len({id(m) for m in built})


@pytest.mark.parametrize("name", CHAPTERS)
def test_the_solutions_pass_on_the_inputs_that_crossed(name):
    """The calling half on the order's inputs, the judging half on the judge's own: the solutions pass."""
    module, answers = chapter(name), solutions(name)
    from nexttoken.recorder.calling import run_on
    from nexttoken.recorder.watches import WATCHES

    order = unpack_order(work_order(name, module.TASKS, held_out=True))
    for sent in order["tasks"]:
        task = getattr(module, sent["name"])
        outcomes = run_on(answers[sent["function"]], sent["cases"], sent["forbid"], WATCHES.get(sent["watch"]),
                          sent["arg_names"])
        assert task.evaluate(outcomes, *judged_cases(task, True))[0] == "passed", (name, sent["name"])


def test_a_packed_order_refuses_an_input_it_has_no_form_for():
    with pytest.raises(TypeError, match="no form in the work order"):
        pack_order({"tasks": [{"name": "q1", "cases": [(object(),)]}]})


def profiled_library_names(task) -> set[str]:
    """"module:qualname" of the library functions a task's answer re-implements, found from its code: a
    nexttoken function (outside nexttoken.exercises and nexttoken.grading) with the task's function name,
    or one whose result the reference returns as its own (the reference is a thin wrapper of it, e.g.
    ``lambda T: causal_mask(T)``, even through a decorator such as torch.no_grad), seen by running the
    reference on the task's first input under a profile hook."""
    ours = os.path.dirname(os.path.abspath(nexttoken.__file__))
    exercises = os.path.join(ours, "exercises")
    outside = ("nexttoken.exercises", "nexttoken.grading")
    found = set()
    for name, mod in list(sys.modules.items()):
        if name.startswith("nexttoken") and not name.startswith(outside):
            fn = getattr(mod, task.function, None)
            if isinstance(fn, types.FunctionType) and fn.__code__.co_filename.startswith(ours):
                found.add(f"{fn.__module__}:{fn.__qualname__}")
    returned = []

    def called_by_exercises(frame) -> bool:
        """Called from the task's code, perhaps through wrappers outside nexttoken (torch.no_grad)."""
        caller = frame.f_back
        while caller is not None and not caller.f_code.co_filename.startswith(ours):
            caller = caller.f_back
        return caller is not None and caller.f_code.co_filename.startswith(exercises)

    def profile(frame, event, arg):
        name = frame.f_code.co_filename
        if event == "return" and name.startswith(ours) and not name.startswith(exercises) \
                and called_by_exercises(frame):
            returned.append((frame.f_globals.get("__name__", ""), frame.f_code.co_qualname, arg))

    sys.setprofile(profile)
    try:
        result = task.reference(*copy_args(task.cases()[0]))
    except Exception:
        result = None
    finally:
        sys.setprofile(None)
    return found | {f"{module}:{qualname}" for module, qualname, value in returned
                    if result is not None and value is result and "<" not in qualname}


@pytest.mark.parametrize("name", CHAPTERS)
def test_each_task_declares_the_library_functions_its_reference_rebuilds(name):
    """Task.rebuilds, which the work order sends (the sandbox reports calls to them), says what profiling
    the reference finds: the library function of the task's name, or the one whose result it returns."""
    module = chapter(name)
    for task_name in module.TASKS:
        task = getattr(module, task_name)
        assert set(task.rebuilds) == profiled_library_names(task), (name, task_name)


def test_library_names_resolve_to_the_library():
    assert "nexttoken.model:causal_mask" in chapter("ch02").q1.rebuilds
    assert "nexttoken.generate:generate" in chapter("ch06").q5.rebuilds
    for name in CHAPTERS:
        for task_name in chapter(name).TASKS:
            for rebuilt in getattr(chapter(name), task_name).rebuilds:
                module, _, qualname = rebuilt.partition(":")
                target = importlib.import_module(module)
                for part in qualname.split("."):
                    target = getattr(target, part)
                assert callable(target), rebuilt


def test_a_sandbox_without_generate_replaces_its_file_and_shows_no_compiled_copy(monkeypatch):
    package = policy.package_folder()
    monkeypatch.setattr(policy, "python_roots", lambda: [str(package.parent)])
    monkeypatch.setattr(policy.os, "geteuid", lambda: 1000)  # the rootless command: no uid to pass
    cmd = sandbox.bwrap_command(["true"], sandbox.Limits(), 3, None, 4, generate_fd=7)
    at = cmd.index("--ro-bind-data")
    assert cmd[at - 2:at + 3] == ["--perms", "0644", "--ro-bind-data", "7", str(package / "generate.py")]
    assert not any(a.startswith(str(package / "__pycache__" / "generate.")) for a in cmd)
    assert cmd.count(str(package / "generate.py")) == 1
    assert "--ro-bind-data" not in sandbox.bwrap_command(["true"], sandbox.Limits(), 3, None, 4)


def test_the_generate_a_forbidding_sandbox_shows_keeps_the_rest_of_the_module():
    from nexttoken.recorder.calling import RULE
    from nexttoken.grading.orders import first_tasks, generate_rule

    module = chapter("ch05")
    message = generate_rule(module.q2)
    assert message.startswith(RULE) and generate_rule(module.q3) is None  # q1 forbids it too
    assert "q2" not in first_tasks("ch05") and "q1" not in first_tasks("ch05") and "q3" in first_tasks("ch05")
    space: dict = {"__name__": "nexttoken.generate", "__package__": "nexttoken"}
    exec(compile(policy.without_generate(message), "generate.py", "exec"), space)
    assert {"greedy", "sample", "temperature"} <= set(space)
    with pytest.raises(RuntimeError) as raised:
        space["generate"](None, None, 1)
    assert str(raised.value) == message
    # every task that forbids it says the same rule: one generate.py serves them all
    rules = {generate_rule(getattr(chapter(c), t)) for c in CHAPTERS for t in chapter(c).TASKS} - {None}
    assert len(rules) == 1


def test_importing_the_recorder_loads_no_optional_part_of_the_library():
    """nexttoken imports fast, hf, smollm2 and pretrained when first asked for: a sandbox loads none of them,
    nor registers fast's custom torch op. In the same fresh process, building a test model (as the judging
    half and a notebook's first check do) does not import torch._dynamo, 2 s of CPU that torch's wrapper of a
    dispatch mode would spend."""
    import subprocess
    import sys

    probe = ("import sys, torch, nexttoken.recorder.main\n"
             "print(sorted(m for m in sys.modules if m.split('.')[-1] in ('fast', 'hf', 'smollm2', 'pretrained')))\n"
             "print(hasattr(torch.ops.nexttoken, 'onednn_linear'))\n"
             "from nexttoken.exercises.common import small_model\n"
             "small_model(3)\n"
             "print('torch._dynamo' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.splitlines() == ["[]", "False", "False"], done.stdout
    assert nexttoken.fast.__name__ == "nexttoken.fast" and nexttoken.load_smollm2.__module__ == "nexttoken.smollm2"
