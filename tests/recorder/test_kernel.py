"""The recorder's cells run as the learner's kernel ran them, without a sandbox: honest but
careless notebooks that Jupyter would give full marks, each graded so, or with a reason naming the real
cause. (The same notebooks through the whole grader are in test_grade_careless.py.)"""

import sys

import pytest
import torch

from nexttoken.recorder import kernel as kernels
from nexttoken.recorder import notebook

RIGHT = "def causal_mask(T):\n    return torch.ones(T, T, dtype=torch.bool).tril()\n"
FLOAT = "def causal_mask(T):\n    return torch.ones(T, T).tril()\n"


def run(cells: list[str], counts=None, folder=None) -> tuple[kernels.Kernel, list]:
    kernel = kernels.Kernel(counts or [None] * len(cells))
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


def test_the_names_a_jupyter_kernel_gives_every_notebook_exist():
    """A debugging display(x) in a function raised NameError: name 'display' is not defined."""
    kernel, errors = run(["import torch", "def causal_mask(T):\n    mask = torch.ones(T, T, dtype=torch.bool).tril()\n"
                          "    display(mask)\n    return mask\n", "shell = get_ipython()\nhistory = (In, Out, _)\n"])
    assert errors == [None, None, None]
    assert kernel.namespace["causal_mask"](2).tolist() == [[True, False], [True, True]]
    assert kernel.namespace["display"](torch.ones(10**6)) is None  # shows nothing: no output is read


def test_items_and_attributes_of_the_notebooks_own_names_are_set_as_in_the_kernel():
    """SETTINGS = {} in one cell, SETTINGS["k"] = v in a later one: the function reading it raised KeyError."""
    kernel, errors = run(["import torch\nSETTINGS = {}", "SETTINGS['size'] = 3\nSETTINGS['rows'] = {}\n"
                          "SETTINGS['rows'][0] = 1\nSETTINGS['size'] += 1\n",
                          "class Config:\n    pass\nConfig.scale = 2\nconfig = Config()\nconfig.shift = 1\n",
                          "def size():\n"
                          "    return SETTINGS['size'] * Config.scale + config.shift + SETTINGS['rows'][0]\n"])
    assert errors == [None] * 4 and kernel.namespace["size"]() == 10


def test_patches_of_modules_and_their_functions_still_do_not_run():
    kernel, errors = run(["import torch\nimport torch.nn.functional as F\ntorch.marker_for_the_test = 1\n"
                          "G = F\nG.marker_for_the_test = 1\nLinear = torch.nn.Linear\nLinear.marker_for_the_test = 1\n"
                          "softmax = torch.softmax\nsoftmax.marker_for_the_test = 1\n"])
    assert errors == [None]
    assert not any(hasattr(x, "marker_for_the_test") for x in (torch, torch.nn.functional, torch.nn.Linear))


def test_an_item_assignment_that_fails_costs_only_its_line_and_is_named():
    """A dict a skipped loop would have filled: the item assignment after it fails, and that line alone
    is skipped (before, item assignments never ran; the function below it must still be defined)."""
    kernel, errors = run(["import torch\nTABLE = {}\nfor k in range(3):\n    pass\nTABLE[key] = 1\n" + RIGHT])
    assert "causal_mask" in kernel.namespace
    assert errors[0].startswith("NameError: name 'key' is not defined (line 5): an assignment to an item or attribute "
                                "failed, so that line was skipped")


def test_execution_counts_of_two_kernel_sessions_are_not_compared_as_one():
    """Cell 2's float causal_mask kept count 5 from before a restart; after it, cells 1, 3 and 4 (the right
    one) ran as 1, 3 and 4: the stale 5 outranked the session that ran last. Cells 3 and 5 showing the same
    count prove two sessions: the notebook's last definition is graded, and no count is claimed."""
    kernel, _ = run(["import torch", FLOAT, "x = 1", RIGHT, "y = 2"], counts=[1, 5, 3, 4, 3])
    assert kernel.namespace["causal_mask"](3).dtype == torch.bool
    assert kernel.notes("causal_mask", None)["defined"] == {"cells": [2, 4], "counts": [None, None], "used": 4}


def test_the_times_a_notebook_saved_order_runs_across_restarts():
    """Colab and JupyterLab save when each cell ran: the latest ran last, whatever its count."""
    kernel = kernels.Kernel([1, 9, 3], [10.0, 20.0, 30.0])
    for n, source in enumerate(["import torch", RIGHT, FLOAT], start=1):
        kernel.run_cell(n, source)
    kernel.rerun_last_executed()
    assert kernel.namespace["causal_mask"](3).dtype == torch.float32
    assert kernel.notes("causal_mask", None)["defined"] == {"cells": [2, 3], "counts": [9, 3], "used": 3}
    kernel = kernels.Kernel([None] * 3, [10.0, 30.0, 20.0])  # times without counts: the row could not say
    for n, source in enumerate(["import torch", RIGHT, FLOAT], start=1):  # which count, so the last, as said
        kernel.run_cell(n, source)
    kernel.rerun_last_executed()
    assert kernel.notes("causal_mask", None)["defined"] == {"cells": [2, 3], "counts": [None, None], "used": 3}
    nb = {"cells": [{"cell_type": "code", "metadata": {"executionInfo": {"timestamp": 1700000000123}}},
                    {"cell_type": "markdown"},
                    {"cell_type": "code", "metadata": {"execution": {"iopub.execute_input": "2023-11-14T22:13:20.5Z"}}},
                    {"cell_type": "code", "metadata": {"execution": {"iopub.execute_input": "not a time"}}},
                    {"cell_type": "code"}]}
    assert notebook.execution_times(nb) == [1700000000.123, 1700000000.5, None, None]


def test_only_the_stubs_not_implemented_error_means_not_written():
    """torch's own NotImplementedError (an op without a kernel for a layout or dtype) read as
    "still raises NotImplementedError: write your code there"."""
    from nexttoken.recorder.calling import run_on

    def stub(T):
        raise NotImplementedError("write your code here")

    def bare(T):
        raise NotImplementedError

    def sparse(T):
        return torch.ones(T, T).to_sparse().tril()

    assert run_on(stub, [(2,)]) == [("not_implemented", "")]
    assert run_on(bare, [(2,)]) == [("not_implemented", "")]
    [(kind, text)] = run_on(sparse, [(2,)])
    assert kind == "error" and text.startswith("NotImplementedError: Could not run 'aten::tril'"), text


def test_a_guard_whose_body_does_not_run_costs_nothing():
    """An if, try or with whose body holds only what the grader does not run (a raise, a print) keeps the
    cell's definitions: the emptied body gets a pass with a line of its own (without one the cell failed to
    compile, "required field lineno missing", and lost every definition in it)."""
    cells = ["import torch\nif torch.__version__ < '1':\n    raise RuntimeError('too old')\n" + RIGHT,
             "import torch\ntry:\n    print(torch.__version__)\nexcept Exception:\n    print('no torch')\n" + RIGHT,
             "import torch\nwith torch.no_grad():\n    print('x')\nif True:\n    pass\nelse:\n    print(1)\n" + RIGHT]
    for cell in cells:
        kernel, errors = run([cell])
        assert errors == [None] and kernel.namespace["causal_mask"](2).dtype == torch.bool, cell
