"""The recorder's cells run as the learner's kernel ran them, without a sandbox: honest but
careless notebooks that Jupyter would give full marks, each graded so, or with a reason naming the real
cause. (The same notebooks through the whole grader are in test_grade_careless.py.)"""

import sys

import pytest
import torch

from nexttoken.recorder import notebook

RIGHT = "def causal_mask(T):\n    return torch.ones(T, T, dtype=torch.bool).tril()\n"
FLOAT = "def causal_mask(T):\n    return torch.ones(T, T).tril()\n"


def run(cells: list[str], counts=None, folder=None) -> tuple[notebook.Kernel, list]:
    kernel = notebook.Kernel(counts or [None] * len(cells))
    errors = [kernel.run_cell(n, source) for n, source in enumerate(cells, start=1)]
    kernel.rerun_last_executed()
    return kernel, errors


def test_a_function_defined_twice_is_the_one_the_kernel_ran_last():
    """The right causal_mask ran last (execution count 14), an older float one further down (count 9): the
    grader defined in file order and never said the function was defined twice."""
    kernel, _ = run(["import torch", RIGHT, "x = 1", FLOAT], counts=[1, 14, 3, 9])
    assert kernel.namespace["causal_mask"](3).dtype == torch.bool
    assert kernel.notes("causal_mask", kernel.namespace["causal_mask"]) == {
        "defined": {"cells": [2, 4], "counts": [14, 9], "used": 2}}
    kernel, _ = run(["import torch", RIGHT, FLOAT])  # no counts saved: the notebook's last, and said so
    assert kernel.namespace["causal_mask"](3).dtype == torch.float32
    assert kernel.notes("causal_mask", None)["defined"] == {"cells": [2, 3], "counts": [None, None], "used": 3}


def test_an_import_the_grader_lacks_costs_only_its_line():
    kernel, errors = run(["import math, ipywidgets\nimport torch\nslider = ipywidgets.IntSlider()\n" + RIGHT])
    assert "causal_mask" in kernel.namespace and "torch" in kernel.namespace and "math" in kernel.namespace
    assert errors[0].startswith("ModuleNotFoundError: No module named 'ipywidgets' (line 1): the grading machine "
                                "lacks that module, so that line was skipped")
    kernel, errors = run(["from google.colab import drive\nimport torch\n" + RIGHT])
    assert "causal_mask" in kernel.namespace and "'google.colab'" in errors[0]
    kernel, errors = run(["import torch\nx = 1 / 0\n" + RIGHT])  # any other error stops the cell, as in a kernel
    assert "causal_mask" not in kernel.namespace and errors[0] == "ZeroDivisionError: division by zero"


def test_magics_that_assign_run_as_a_notebook_runs_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    kernel, errors = run(["t = %time 1 + 1\nimport torch\nr = %timeit torch.ones(2)\n",
                          "%%writefile masks_for_the_test.py\nimport torch\n\ndef tril(T):\n"
                          "    return torch.ones(T, T, dtype=torch.bool).tril()\n",
                          "from masks_for_the_test import tril\n\ndef causal_mask(T):\n    return tril(T)\n",
                          "files = !ls\n"])
    assert errors[:3] == [None, None, None] and kernel.namespace["t"] == 2 and kernel.namespace["r"] is None
    assert kernel.namespace["causal_mask"](2).tolist() == [[True, False], [True, True]]
    assert "shell commands do not run while grading" in errors[3]
    sys.modules.pop("masks_for_the_test", None)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the grader's Python reads 3.12's syntax")
@pytest.mark.parametrize("line, feature", [
    ('label = f"{names["mask"]} mask"', "an f-string that uses its own quotes inside its braces"),
    ("text = f'{chr(10).join(rows)}' + f'{\"\\n\".join(rows)}'", "a backslash inside an f-string's braces"),
    ("type Mask = torch.Tensor", "a type statement"),
    ("def first[T](items: list[T]) -> T:\n    return items[0]", "type parameters in brackets")])
def test_syntax_newer_than_the_graders_python_is_named_as_such(line, feature):
    kernel, errors = run(["import torch\nnames = {'mask': 'causal'}\nrows = []", line + "\n" + RIGHT])
    assert "causal_mask" not in kernel.namespace
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert errors[1].startswith(f"line 1 needs Python 3.12 ({feature}")
    assert f"the grader runs Python {version}" in errors[1]


def test_a_skipped_top_level_loop_is_named_for_a_function_that_reads_what_it_sets():
    kernel, errors = run(["import torch\nMASKS = {}\nfor T in range(1, 80):\n"
                          "    MASKS[T] = torch.ones(T, T, dtype=torch.bool).tril()\n",
                          "def causal_mask(T):\n    return MASKS[T]\n",
                          "def mask_scores(scores):\n"
                          "    return scores.masked_fill(~causal_mask(scores.shape[-1]), -1e9)\n",
                          "for _ in range(3):\n    torch.manual_seed(0)\n"  # a loop that calls a module: no name
                          "def other(x):\n    return torch.zeros(x)\n"])
    loop = {"loop": {"cell": 1, "line": 3, "name": "MASKS"}}
    assert kernel.notes("causal_mask", kernel.namespace["causal_mask"]) == loop
    assert kernel.notes("mask_scores", kernel.namespace["mask_scores"]) == loop  # through the function it calls
    assert kernel.notes("other", kernel.namespace["other"]) == {}
