"""A wrong answer of another dtype or rank costs only its own task in the batch grader."""

import csv
import subprocess
import sys

import nbformat
import pytest

from submissions import CH02_GOOD, HEADER

pytestmark = pytest.mark.slow  # grades a notebook in a fresh kernel


def test_wrong_dtype_answer_keeps_the_points_of_correct_tasks(tmp_path):
    cells = [HEADER, *CH02_GOOD.values(),
             "_right = attention_weights\n"
             "def attention_weights(q, k):\n    return _right(q, k).double()\n",
             "def padded_causal_mask(attention_mask):\n"
             "    return causal_mask(attention_mask.shape[-1]) & attention_mask[0].bool()\n"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["nexttoken"] = {"chapter": "ch02"}
    path = tmp_path / "dtype.ipynb"
    nbformat.write(nb, path)
    out = tmp_path / "grades.csv"
    trusted = ["--no-sandbox", "--trusted-as-root"] if "--trusted-as-root" in _help() else []
    result = subprocess.run([sys.executable, "-m", "nexttoken.grade", "--count-practice", str(path), "--out", str(out),
                             "--timeout", "30", *trusted],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    with open(out, newline="") as f:
        rows = {r["task"]: r for r in csv.DictReader(f)}
    assert rows["ch02.q3"]["status"] == "failed" and "float64" in rows["ch02.q3"]["reason"]
    assert rows["ch02.q4"]["status"] == "failed" and "(T, T)" in rows["ch02.q4"]["reason"]
    assert all(rows[t]["status"] == "passed" and rows[t]["points"] == "1" for t in ("ch02.q1", "ch02.q2"))


def _help() -> str:
    return subprocess.run([sys.executable, "-m", "nexttoken.grade", "--help"], capture_output=True, text=True).stdout
