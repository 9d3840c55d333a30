"""exercises/ is generated from solutions/ and stored executed: every check passes on a solution and
fails visibly on a stub."""

import importlib.util
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent


def load_make_exercises():
    spec = importlib.util.spec_from_file_location("make_exercises", ROOT / "scripts" / "make_exercises.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_outputs(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    lines = []
    for cell in nb.cells:
        if cell.cell_type == "code" and ".check(" in cell.source:
            text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
            lines.append(text.strip())
    return lines


def test_exercises_are_up_to_date_with_solutions():
    assert load_make_exercises().out_of_date() == []


def test_stub_replaces_exactly_the_solution_block():
    make = load_make_exercises()
    source = "def f(x):\n    '''doc'''\n    ### BEGIN SOLUTION\n    y = x + 1\n    return y\n    ### END SOLUTION\n"
    assert make.stub_source(source) == "def f(x):\n    '''doc'''\n    raise NotImplementedError(\"write your code here\")\n"


def test_stored_checks_pass_on_solutions_and_fail_on_stubs():
    solutions = sorted((ROOT / "solutions").glob("*.ipynb"))
    assert len(solutions) == 7
    for solution in solutions:
        passed = check_outputs(solution)
        failed = check_outputs(ROOT / "exercises" / solution.name)
        assert passed and all(line.startswith("✅") for line in passed), (solution.name, passed)
        assert len(failed) == len(passed)
        assert all(line.startswith("❌") and "NotImplementedError" in line for line in failed), failed
