"""A core task asks the learner to carry a chapter's idea to a case the chapter did not print: no function that
the chapter defines, under any name, passes a core task's check as it is.

Every top-level `def` of the chapter's code cells (its Going deeper sections included: a learner reads them
too) is taken out with ast and defined alone, in a namespace holding what the chapters import (torch, math,
nexttoken); nothing of the chapter is run, so no model is loaded. A function that reads a name the chapter
set elsewhere (its `model`, its `tokenizer`) fails with NameError when called, as it would pasted into an
exercise notebook alone. Each is then run through the checks of every core task of its chapter (CORE, what
the grader counts), as `qN.check(fn)` would: none may pass. The practice tasks may be copies; the detector
is shown to find one (a chapter function that passes a practice task), so a pass is not out of its reach.
"""

import __future__
import ast
import math
from pathlib import Path

import nbformat
import pytest
import torch

import nexttoken
from nexttoken.exercises import chapter

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("0[1-6]_*.ipynb"))


def chapter_functions(path: Path) -> dict:
    """{name: function} of every top-level def in the notebook's code cells, each defined on its own (a def that
    calls another of the chapter's finds it: all share one namespace). Annotations are not evaluated, so a
    def annotated with a type the namespace lacks (pandas') is defined all the same."""
    namespace = {"torch": torch, "math": math, "nexttoken": nexttoken, "F": torch.nn.functional}
    names = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:  # a cell with IPython magic holds no def the test needs
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                source = ast.get_source_segment(cell.source, node, padded=False)
                decorators = "".join(f"@{ast.get_source_segment(cell.source, d)}\n" for d in node.decorator_list)
                exec(compile(decorators + source, f"<{path.name}: {node.name}>", "exec",
                             flags=__future__.annotations.compiler_flag, dont_inherit=True), namespace)
                names.append(node.name)
    return {name: namespace[name] for name in names}


def passes(task, fn) -> bool:
    state = torch.random.get_rng_state()
    try:
        status, _ = task.evaluate(task.run(fn))
    finally:
        torch.random.set_rng_state(state)  # a check seeds torch; leave other tests' state alone
    return status == "passed"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_function_the_chapter_prints_passes_a_core_task(path):
    module = chapter(f"ch{path.name[:2]}")
    functions = chapter_functions(path)
    assert functions, f"{path.name} defines no function: the test would prove nothing"
    copied = [f"{name} passes {q} ({getattr(module, q).function})"
              for q in module.CORE for name, fn in functions.items() if passes(getattr(module, q).task, fn)]
    assert not copied, (f"{path.name}: a core task is passed by a function the chapter prints, pasted as it is: "
                        + "; ".join(copied) + ". Make the task practice (CORE and its heading), or promote one "
                        "that asks for more than the chapter shows")


def test_the_detector_finds_a_copy():
    """Run on the practice tasks, the same extraction finds a chapter function that passes one unchanged (today
    chapter 2's my_causal_mask passes q1, chapter 4's softmax q3, chapter 6's generate_batch_until_eos q5):
    the check above can fail. It stops at the first found."""
    found = next((f"{path.stem} {name} -> {q}" for path in CHAPTERS
                  for module in [chapter(f"ch{path.name[:2]}")] for name, fn in chapter_functions(path).items()
                  for q in module.TASKS if q not in module.CORE and passes(getattr(module, q).task, fn)), None)
    assert found, "no chapter function passes any practice task: the extraction may be broken"
