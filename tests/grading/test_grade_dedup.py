"""Identical submissions (the same bytes) are graded once: the grader runs one of them and
gives every file of those bytes its own rows, under its own name and, with a roster, its own student."""

import csv

from submissions import recorded

from nexttoken.grading import batch, cli, sandbox


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_identical_submissions_are_graded_once_and_each_keeps_its_rows(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sandbox, "find_cgroups", lambda: (None, "no cgroup in this test"))
    graded = []

    def run_submission(data, settings, slot=0, boxes=None):  # stands in for the sandboxed runs: counts them
        graded.append(data)
        status = "passed" if b"right" in data else "failed"
        return recorded("ch02", {f"q{i}": (status, "r") for i in (1, 2)})

    monkeypatch.setattr(batch, "run_submission", run_submission)
    same = b'{"cells": [], "nbformat": 4, "right": 1}'
    files = {"alice.ipynb": same, "bob.ipynb": same, "carol.ipynb": b'{"wrong": 1}', "dave.ipynb": same,
             "erin.ipynb": same + b" "}  # one byte more: other bytes, graded on its own
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "roster.csv").write_text("file,student_id,name\n" + "".join(
        f"{n},{n[0]}1,{n.split('.')[0].title()}\n" for n in files))
    code = cli.main(["--no-sandbox", "--trusted-as-root", "--allow-no-cgroup", "--jobs", "2", "--count-practice",
                     "--out", "grades.csv",
                     "--roster", "roster.csv", "--gradescope", "gs", "--", *files])
    err = capsys.readouterr().err
    assert code == 0, err
    assert sorted(graded) == sorted([same, files["carol.ipynb"], files["erin.ipynb"]])  # bob's, dave's: alice's
    rows = read(tmp_path / "grades.csv")
    by_file = {}
    for r in rows:
        by_file.setdefault(r["submission"], []).append((r["task"], r["points"], r["student_id"]))
    assert by_file == {name: [("ch02.q1", p, f"{name[0]}1"), ("ch02.q2", p, f"{name[0]}1")]
                       for name, p in (("alice.ipynb", "1"), ("bob.ipynb", "1"), ("carol.ipynb", "0"),
                                       ("dave.ipynb", "1"), ("erin.ipynb", "1"))}
    assert "bob.ipynb 2/2 the same bytes as alice.ipynb: graded once" in err
    assert "dave.ipynb 2/2 the same bytes as alice.ipynb: graded once" in err
    progress = [line for line in err.splitlines() if line.startswith("[")]
    assert len(progress) == 5 and progress[-1].startswith("[5/5] ")
    assert sorted(p.name for p in (tmp_path / "gs").iterdir()) == ["a1", "b1", "c1", "d1", "e1"]
