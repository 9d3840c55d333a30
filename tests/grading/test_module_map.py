"""The grading package as its map says: ``grading/__init__.py`` names every module it holds, and a
submission's way through it runs forward: no stage's module (read, run, judge, rows, outputs) imports a
module of an earlier stage, so none can call back into one; outputs alone takes the rows' own definitions
(``Row``, the columns) from rows, whose rows it writes. The run stage starts and follows processes and never
judges: it imports no judging (``judge``, the exercises' verdicts). Read from the code (AST); nothing runs."""

import re

from helpers import PACKAGE, imports, modules

GRADING = PACKAGE / "grading"
STAGES = ["read", "run", "judge", "rows", "outputs"]  # in the order a submission passes through them


def mapped() -> set[str]:
    """The modules and folders the package docstring's map names, one a line ("run.py   2. its runs...")."""
    text = (GRADING / "__init__.py").read_text(encoding="utf-8")
    return set(re.findall(r"^ {4}(\w+\.py|\w+/) ", text, re.M))


def test_the_map_names_every_module_of_the_grading_package():
    held = {p.name for p in GRADING.glob("*.py") if p.name != "__init__.py"}
    held |= {f"{p.name}/" for p in GRADING.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert len(held) > 10, held  # the reader found the package
    assert held - mapped() == set(), f"grading/__init__.py's map leaves out {sorted(held - mapped())}"
    assert mapped() - held == set(), f"grading/__init__.py's map names what is gone: {sorted(mapped() - held)}"


def test_no_stage_imports_an_earlier_stage():
    found = modules()
    for later, name in enumerate(STAGES):
        module = f"nexttoken.grading.{name}"
        earlier = {f"nexttoken.grading.{stage}" for stage in STAGES[:later] if (stage, name) != ("rows", "outputs")}
        assert earlier.isdisjoint(imports(module, found[module], set(found))), (module, earlier)


def test_the_run_stage_judges_nothing():
    found = modules()
    for name in ("run", "launch", "follow", "protocol", "orders"):
        module = f"nexttoken.grading.{name}"
        assert "nexttoken.grading.judge" not in imports(module, found[module], set(found)), module


def test_the_stage_check_sees_a_call_back(tmp_path):
    """The import reader the check above trusts does see a stage importing an earlier one."""
    source = tmp_path / "rows.py"
    source.write_text("def f():\n    from .run import Recording\n")
    known = {"nexttoken.grading.run", "nexttoken.grading.rows"}
    assert imports("nexttoken.grading.rows", source, known) == {"nexttoken.grading.run"}
