"""Attackers beside honest classmates, end to end: one batch with --held-out and every export. The attacker
gets no marks it did not earn, every honest classmate keeps full marks and every row, and the batch finishes.

1. a tensor of 0 elements and huge dimensions (printing it would build ~17 trillion lists);
2. held-out inputs read from the recorder's frames and raised as error text;
3. terminal escapes in an error text and a file name;
4. a thread that calls the library or torch.softmax outside the rules;
5. 13 MB of newlines written to the recorder's pipe;
6. careless but honest: a %%time defining cell, a def inside ``with torch.no_grad():``; and a def inside a
   loop, whose reason names the real cause.
(Gradescope without bubblewrap is in test_grade_gradescope.py.)"""

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from submissions import CH02_GOOD as GOOD

from nexttoken.exercises import chapter
from nexttoken.exercises.held_out import cases_of

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("bwrap") is None and os.environ.get("CI", "").lower() != "true",
                                 reason="bubblewrap is not installed: run 'sudo bash scripts/setup_sandbox.sh'")]

HEADER = "import math, os, sys\nimport torch\nimport nexttoken\nfrom nexttoken.exercises import ch02\n"
# q2 to q5, none of them calling causal_mask (which the attackers replace)
TRIL = "torch.ones(T, T, dtype=torch.bool).tril()"
REST = ["def mask_scores(scores):\n    T = scores.shape[-1]\n"
        f"    return scores.masked_fill(~{TRIL}, float('-inf'))\n",
        GOOD["attention_weights"],
        "def padded_causal_mask(attention_mask):\n    T = attention_mask.shape[-1]\n"
        f"    return {TRIL} & attention_mask.bool()[:, None, :]\n",
        GOOD["changed_positions"]]
VISIBLE_T = sorted(args[0] for args in chapter("ch02").q1.cases())
HELD_OUT_T = sorted(args[0] for _, args in cases_of(chapter("ch02").q1))
# The work order in the recorder's frames: the Ts of every case of q1 this run holds.
FIND_TS = ("    import sys as _s\n    f = _s._getframe()\n"
           "    while f is not None and not isinstance(f.f_locals.get('order'), dict):\n"
           "        f = f.f_back\n    ts = sorted(c[0] for t in f.f_locals['order']['tasks'] if t['name'] == 'q1' "
           "for c in t['cases'])\n")
ESCAPES = "\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[1;1Hch02.q1,1,1,passed\r\x9b31m\u202e"


def notebook(path: Path, *cells: str, ch: str = "ch02") -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["nexttoken"] = {"chapter": ch}
    nbformat.write(nb, path)
    return path


SUBMISSIONS = {
    "good.ipynb": [HEADER, *GOOD.values()],
    "empty_giant.ipynb": [HEADER, "def causal_mask(T):\n    return torch.empty(4194304, 4194304, 0).long()\n", *REST],
    "leak_visible.ipynb": [HEADER, "def causal_mask(T):\n" + FIND_TS + "    raise ValueError(f'LEAK {ts}')\n", *REST],
    "leak_held.ipynb": [HEADER, "def causal_mask(T):\n" + FIND_TS + f"    if T in {VISIBLE_T}:\n"
                        "        return torch.ones(T, T, dtype=torch.bool).tril()\n"
                        "    raise ValueError(f'LEAK {ts}')\n", *REST],
    "escapes\x1b]0;title\x07.ipynb": [HEADER, f"def causal_mask(T):\n    raise ValueError({ESCAPES!r})\n", *REST],
    "thread_library.ipynb": [HEADER, "def causal_mask(T):\n    import threading\n    out = []\n"
                             "    t = threading.Thread(target=lambda: out.append(nexttoken.causal_mask(T)))\n"
                             "    t.start(); t.join()\n    return out[0]\n", *REST],
    "careless.ipynb": [HEADER, "%%time\n" + GOOD["causal_mask"], "with torch.no_grad():\n"
                       + "".join("    " + line + "\n" for line in REST[0].splitlines()), *REST[1:]],
    "def_in_a_loop.ipynb": [HEADER, "for _ in range(1):\n    def causal_mask(T):\n"
                            "        return torch.ones(T, T, dtype=torch.bool).tril()\n", *REST],
    "newlines.ipynb": [HEADER, "def _flood(fd=int(sys.argv[sys.argv.index('--out-fd') + 1]),\n"
                       "           done=[os.write(int(sys.argv[sys.argv.index('--out-fd') + 1]), b'\\n' * 65536)\n"
                       "                 for _ in range(200)]):\n    pass\n", *GOOD.values()],
}
THREAD_SOFTMAX = ("import torch, threading\nfrom nexttoken.exercises import ch04\n"
                  "def stable_softmax(logits):\n    out = []\n"
                  "    t = threading.Thread(target=lambda: out.append(torch.softmax(logits, dim=-1)))\n"
                  "    t.start(); t.join()\n    return out[0]\n")


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    folder = tmp_path_factory.mktemp("round5")
    names = []
    for name, cells in SUBMISSIONS.items():
        notebook(folder / name, *cells)
        names.append(name)
    done = subprocess.run([sys.executable, "-m", "nexttoken.grade",
                           "--count-practice", "--out", "grades.csv", "--gradebook",
                           "gradebook.csv", "--feedback", "feedback", "--gradescope", "gradescope", "--held-out",
                           "--timeout", "30", "--jobs", "2", "--", *names],
                          cwd=folder, capture_output=True, timeout=900)
    # A chapter-4 notebook: a run of its own, since --gradescope refuses a batch of two chapters (issue 66)
    notebook(folder / "thread_softmax.ipynb", THREAD_SOFTMAX, ch="ch04")
    subprocess.run([sys.executable, "-m", "nexttoken.grade",
                    "--count-practice", "--out", "grades-ch04.csv", "--held-out", "--timeout",
                    "30", "--", "thread_softmax.ipynb"], cwd=folder, capture_output=True, timeout=900)
    rows = []
    for out in ("grades.csv", "grades-ch04.csv"):
        with open(folder / out, newline="", encoding="utf-8") as f:
            rows += list(csv.DictReader(f))
    grades: dict = {}
    for r in rows:
        grades.setdefault(r["submission"], {})[r["task"]] = r
    return {"folder": folder, "done": done, "grades": grades}


def outputs(folder: Path) -> dict[str, bytes]:
    """Every file the grader wrote, by its path in the folder."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*")
            if p.is_file() and p.suffix != ".ipynb"}


def test_the_batch_finishes_with_every_row(batch):
    assert batch["done"].returncode == 0, batch["done"].stderr[-3000:]
    assert len(batch["grades"]) == len(SUBMISSIONS) + 1
    for name, tasks in batch["grades"].items():
        assert len(tasks) == 5, (name, tasks)


@pytest.mark.parametrize("name", ["good.ipynb", "careless.ipynb", "newlines.ipynb"])
def test_honest_classmates_keep_full_marks(batch, name):
    rows = batch["grades"][name]
    assert {t: (r["status"], r["points"]) for t, r in rows.items()} == {
        f"ch02.q{i}": ("passed", "1") for i in range(1, 6)}, rows
    assert "held out)" in rows["ch02.q1"]["reason"]


def test_a_tensor_of_no_elements_and_huge_dimensions_is_refused_as_such(batch):
    rows = batch["grades"]["empty_giant.ipynb"]
    assert rows["ch02.q1"]["points"] == "0" and "no elements but dimensions" in rows["ch02.q1"]["reason"]
    assert all(rows[f"ch02.q{i}"]["status"] == "passed" for i in range(2, 6))


def test_no_run_that_shows_a_learners_text_holds_a_held_out_input(batch):
    visible = batch["grades"]["leak_visible.ipynb"]["ch02.q1"]
    assert visible["points"] == "0" and f"LEAK {VISIBLE_T}" in visible["reason"], visible
    held = batch["grades"]["leak_held.ipynb"]["ch02.q1"]
    assert held["status"] == "error" and held["reason"].endswith("it raised an exception"), held
    for path, data in outputs(batch["folder"]).items():
        text = data.decode("utf-8", "replace")
        assert f"LEAK {HELD_OUT_T}" not in text and str(HELD_OUT_T) not in text, path
        assert text.count("LEAK") == text.count(f"LEAK {VISIBLE_T}"), path


def test_nothing_a_submission_writes_reaches_a_file_or_the_terminal_unescaped(batch):
    found = outputs(batch["folder"])
    assert any("escapes" in p for p in found) and "grades-explanations.csv" in found
    streams = {"stdout": batch["done"].stdout, "stderr": batch["done"].stderr}
    for path, data in [*found.items(), *streams.items()]:
        text = data.decode("utf-8", "replace").replace("\r\n", "\n")
        bad = sorted({hex(ord(c)) for c in text if (ord(c) < 32 and c != "\n") or 0x7f <= ord(c) <= 0x9f
                      or c == "\u202e"})
        assert not bad, (path, bad)
    row = batch["grades"]["escapes\\x1b]0;title\\x07.ipynb"]["ch02.q1"]
    assert "\\x1b]52;c;" in row["reason"] and row["points"] == "0"


@pytest.mark.parametrize("name, task", [("thread_library.ipynb", "ch02.q1"), ("thread_softmax.ipynb", "ch04.q3")])
def test_threads_are_refused_while_grading_with_a_reason(batch, name, task):
    row = batch["grades"][name][task]
    assert row["points"] == "0" and "threads are refused while grading" in row["reason"], row


def test_a_def_the_grader_does_not_run_is_named_where_it_is(batch):
    row = batch["grades"]["def_in_a_loop.ipynb"]["ch02.q1"]
    assert row["status"] == "missing" and "code cell 2" in row["reason"] and "top level" in row["reason"], row


def test_the_gradescope_results_repeat_nothing_of_the_held_out_failure(batch):
    [results] = [json.loads(data) for path, data in outputs(batch["folder"]).items()
                 if path.startswith("gradescope/leak_held") and path.endswith("results.json")]
    [q1] = [t for t in results["tests"] if t["name"] == "ch02.q1"]
    assert "LEAK" not in q1["output"] and "held-out test" in q1["output"]
