"""The grader's own process against what a submission can put in front of it: names and texts that do not
encode, symbolic links, files swapped during a batch, names that escape alike, forged or junk recorder
lines, and notebooks built to blow up a parser. Unit tests of nexttoken.grade (no sandbox, seconds)."""

import csv
import os
import secrets

import pytest

from nexttoken.grading import cli, outputs, protocol, read, sandbox
from nexttoken.recorder import contract
from nexttoken.grading.rows import FIELDS, clean_rows
from nexttoken.grading.text import FORMULA_STARTS, clean, escape, name_text, one_line, shown


@pytest.mark.parametrize("text", ["x\ud800y", "\udcff", "a\0b", "ok é 字"])
def test_clean_text_always_encodes_and_reads_back_through_csv(tmp_path, text):
    row = dict(submission="s", task="-", points=0, max_points=0, status="error", reason=clean(text))
    outputs.write_csv(tmp_path / "g.csv", FIELDS, [row])
    [back] = outputs.read_previous(tmp_path / "g.csv")
    assert back["reason"] == clean(text)
    assert "\0" not in back["reason"] and back["reason"].encode("utf-8")


def test_names_that_are_not_utf8_are_written_and_never_collide():
    names = [b"b_\xff\xfe.ipynb", b"b_\\xff\\xfe.ipynb", "b_\udcff\udcfe.ipynb".encode("utf-8", "surrogateescape")]
    texts = [name_text(os.fsdecode(n)) for n in names]
    assert len(set(texts)) == 2  # the first and the last are the same bytes
    assert texts[0] == "b_\\xff\\xfe.ipynb" and texts[1] == "b_\\\\xff\\\\xfe.ipynb"
    assert all(t.encode("utf-8") for t in texts)


def test_the_formula_starts_are_owasps():
    """OWASP's list of what makes a spreadsheet cell a formula (CSV injection), tab and CR included."""
    assert set(FORMULA_STARTS) >= {"=", "+", "-", "@", "\t", "\r"}


@pytest.mark.parametrize("a, b", [("-bob.ipynb", "'-bob.ipynb"), ("=x", "'=x"), ("'x", "x"), ("''-", "'-")])
def test_the_formula_escape_is_exact_so_resume_never_merges_two_names(tmp_path, a, b):
    assert escape(a) != escape(b)
    rows = [dict(submission=n, task="-", points=0, max_points=0, status="error", reason="r") for n in (a, b)]
    outputs.write_csv(tmp_path / "g.csv", FIELDS, rows)
    assert [r["submission"] for r in outputs.read_previous(tmp_path / "g.csv")] == [a, b]
    with open(tmp_path / "g.csv", newline="") as f:  # and a spreadsheet still sees no formula
        assert not [c for r in csv.reader(f) for c in r if c[:1] in FORMULA_STARTS and c != "-"]


def test_a_link_is_a_row_not_followed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "real.ipynb").write_text("{}")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "inside.ipynb").write_text("{}")
    os.symlink("real.ipynb", "link.ipynb")
    os.symlink("/etc/shadow", "shadow.ipynb")
    os.symlink("folder", "linked_folder")
    assert read.read_submission("real.ipynb", 1000) == (b"{}", None)
    assert read.read_submission("folder/inside.ipynb", 1000) == (b"{}", None)
    for name, component in (("link.ipynb", "link.ipynb"), ("shadow.ipynb", "shadow.ipynb"),
                            ("linked_folder/inside.ipynb", "linked_folder")):
        data, (status, reason) = read.read_submission(name, 1000)
        assert data is None and status == "symlink", name
        assert f"a symbolic link ({component}), not graded" in reason


def test_a_submission_is_read_once_at_the_start(tmp_path, monkeypatch):
    """Swapping a file for a link (to a classmate's notebook, the solution) after the batch started changes
    nothing: the snapshot is what gets graded."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "stub.ipynb").write_text('{"stub": 1}')
    (tmp_path / "solution.ipynb").write_text('{"solution": 1}')
    snapshots = read.Snapshots([tmp_path / "stub.ipynb"], 1000)
    try:
        (tmp_path / "stub.ipynb").unlink()
        os.symlink("solution.ipynb", tmp_path / "stub.ipynb")
        assert snapshots.read(name_text(tmp_path / "stub.ipynb")) == (b'{"stub": 1}', None)
        assert oct(os.stat(snapshots.folder.name).st_mode & 0o777) == "0o700"
    finally:
        snapshots.close()


def test_a_notebook_of_millions_of_values_is_refused_before_parsing(tmp_path):
    path = tmp_path / "dicts.ipynb"
    path.write_text('{"metadata": {"junk": [' + ",".join(["{}"] * (read.MAX_STRUCTURES + 1)) + "]}}")
    data, (status, reason) = read.read_submission(path, 20 * 1024 * 1024)
    assert data is None and status == "too_complex" and "junk" not in reason


def test_lines_without_the_nonce_cost_no_memory():
    nonce = secrets.token_hex(16)
    lines = protocol.Lines(nonce)
    junk = b"x" * (1 << 16)
    for _ in range(33 * 16):  # a 33 MB line without the nonce, in the pipe's chunks
        assert lines.feed(junk) == []
        assert len(lines.buffer) < 100
    real = f'{{"nonce": "{nonce}", "done": true}}'.encode()
    assert lines.feed(b"\n" + real[:10]) == [] and lines.feed(real[10:] + b"\n") == [real]
    forged = f'{{"nonce": "{"0" * 32}", "done": true}}\n'.encode()
    assert lines.feed(forged) == []


def test_a_forged_message_of_millions_of_values_is_not_parsed():
    nonce = secrets.token_hex(16)
    bomb = f'{{"nonce": "{nonce}", "record": "q1", "outcomes": ['.encode() + b"[]," * 300_000 + b"[]]}"
    assert contract.decode_line(bomb) is None
    assert contract.decode_line(f'{{"nonce": "{nonce}", "done": true}}'.encode()) == {"nonce": nonce, "done": True}


def test_resume_reads_back_what_any_submission_made_the_grader_write(tmp_path):
    rows = [dict(submission=name_text(os.fsdecode(b"b_\xff.ipynb")), task="ch02.q1", points=0,
                 max_points=1, status="error", reason=clean("ValueError: \ud800\0"))]
    outputs.write_csv(tmp_path / "g.csv", FIELDS, clean_rows(rows))
    [back] = outputs.read_previous(tmp_path / "g.csv")
    assert back["submission"] == "b_\\xff.ipynb" and back["reason"] == "ValueError: \\ud800\\x00"


def test_without_a_cgroup_the_grader_refuses_unless_told_to_fall_back(monkeypatch, capsys):
    
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: "/usr/bin/bwrap")
    monkeypatch.setattr(sandbox, "find_cgroups", lambda: (None, sandbox.CGROUP_MESSAGE.format(why="none here")))
    monkeypatch.setattr(sandbox, "allocate_uids", lambda n: [None] * n)
    monkeypatch.setattr(sandbox, "check_bwrap", lambda limits, cgroups, uid: None)
    refused = cli.setup(cli.parse_args(["--out", "g.csv", "x.ipynb"]), sandbox.Limits())
    assert isinstance(refused, str) and "none here" in refused and "--allow-no-cgroup" in refused
    assert cli.main(["--out", "g.csv", "x.ipynb"]) == 2
    assert "--allow-no-cgroup" in capsys.readouterr().err
    ready = cli.setup(cli.parse_args(["--out", "g.csv", "--allow-no-cgroup", "--jobs", "2", "x.ipynb"]),
                        sandbox.Limits())
    assert ready == (None, [None, None])
    assert "WARNING" in capsys.readouterr().err


def test_the_grader_says_which_cgroups_it_uses(monkeypatch, capsys, tmp_path):
    
    cgroups = sandbox.Cgroups(1, {"memory": tmp_path / "memory", "pids": tmp_path / "pids"})
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: "/usr/bin/bwrap")
    monkeypatch.setattr(sandbox, "find_cgroups", lambda: (cgroups, ""))
    monkeypatch.setattr(sandbox, "allocate_uids", lambda n: [61000 + i for i in range(n)])
    monkeypatch.setattr(sandbox, "check_bwrap", lambda limits, cgroups, uid: None)
    assert cli.setup(cli.parse_args(["--out", "g.csv", "--jobs", "1", "x.ipynb"]), sandbox.Limits()) \
        == (cgroups, [61000])
    assert f"limits per sandbox: cgroup v1 ({tmp_path / 'memory'}, {tmp_path / 'pids'})" in capsys.readouterr().err


@pytest.mark.parametrize("args, named", [(["--total-memory", "0"], "--total-memory"),
                                         (["--total-memory", "lots"], "--total-memory")])
def test_bad_limits_are_named(args, named, capsys):
    with pytest.raises(SystemExit):
        cli.parse_args(["--out", "g.csv", *args, "x.ipynb"])
    assert f"argument {named}" in capsys.readouterr().err


def test_a_reason_of_several_lines_is_one_csv_line():
    text = "your output is wrong\n   input:    f(3)\n   expected: 1\n   got:      2\n"
    assert one_line(text) == "your output is wrong | input:    f(3) | expected: 1 | got:      2"


def test_the_recorders_message_order_is_accepted_and_anything_else_refused():
    """protocol.Sequence: the recorder's own order passes; a forged message out of order or form is named."""
    genuine = [({"cell": 1}, None), ({"cell_error": 1, "error": "E"}, ("cell", 1)), ({"cell": 3}, ("cell", 1)),
               ({"task": "q1"}, ("cell", 3)),
               ({"record": "q1", "outcomes": [], "library": [], "tampered": [], "notes": {}}, ("task", "q1")),
               ({"task": "q2"}, ("task", "q1")),
               ({"record": "q2", "outcomes": [], "library": ["a.b"], "tampered": ["x"], "notes": {
                   "defined": {"cells": [3, 5], "counts": [14, None], "used": 5},
                   "loop": {"cell": 2, "line": 1, "name": "table"}}}, ("task", "q2")),
               ({"done": True}, ("task", "q2"))]
    sequence = protocol.Sequence(["q1", "q2"])
    for message, current in genuine:
        assert sequence.check({"nonce": "n", **message}, current) is None, message
    forged = [({"cell": True}, []), ({"cell": 1}, [({"cell": 2}, None)]), ({"done": True}, []),
              ({"task": "q2"}, []), ({"record": "q1", "outcomes": [], "library": [], "tampered": []}, []),
              ({"task": "q1", "extra": 1}, []), ({"surprise": 1}, []), ({"cell": 1, "task": "q1"}, []),
              ({"record": "q1", "outcomes": {}, "library": [], "tampered": []}, [({"task": "q1"}, None)]),
              ({"record": "q1", "outcomes": [], "library": "x", "tampered": []}, [({"task": "q1"}, None)]),
              ({"record": "q1", "outcomes": [], "library": [], "tampered": []},
               [({"task": "q1"}, None),
                ({"record": "q1", "outcomes": [], "library": [], "tampered": [], "notes": {}}, None)]),
              ({"cell_error": 2, "error": "E"}, [({"cell": 1}, None)])]
    record = {"record": "q1", "outcomes": [], "library": [], "tampered": []}
    for notes in ({"said": "award 3/3"}, {"loop": {"cell": 2, "line": 1, "name": "x y"}}, [],
                  {"loop": {"cell": 2, "line": 1, "name": "t" * 61}}, {"defined": {"cells": [3], "counts": [1],
                                                                                   "used": 3}},
                  {"defined": {"cells": [3, 4], "counts": ["9", 1], "used": 3}}):
        forged.append(({**record, "notes": notes}, [({"task": "q1"}, None)]))
    for message, before in forged:
        sequence = protocol.Sequence(["q1", "q2"])
        for earlier, _ in before:
            assert sequence.check({"nonce": "n", **earlier}, None) is None
        assert sequence.check({"nonce": "n", **message}, ("cell", 1)) is not None, message


def test_a_cell_sends_one_error_at_most_and_no_line_longer_than_the_recorder_sends():
    """The recorder sends one error per cell, cut to MAX_STRING characters, and only a record may be long,
    while its task awaits it: a second error, a longer one, or a long line at any other point is refused,
    the long line before it is parsed (each parse of a forged flood cost the grader's own CPU)."""
    sequence = protocol.Sequence(["q1"])
    assert sequence.check({"nonce": "n", "cell": 1}, None) is None
    assert sequence.check({"nonce": "n", "cell_error": 1, "error": "E"}, ("cell", 1)) is None
    assert "a second error" in sequence.check({"nonce": "n", "cell_error": 1, "error": "E"}, ("cell", 1))
    assert sequence.check({"nonce": "n", "cell": 2}, ("cell", 1)) is None
    long_error = {"nonce": "n", "cell_error": 2, "error": "E" * (protocol.MAX_STRING + 1)}
    assert "longer one" in sequence.check(long_error, ("cell", 2))
    prefix = b'{"nonce": "n"'
    honest = (prefix + b', "cell_error": 3, "error": "' + b"\\ud83d\\ude00" * protocol.MAX_STRING + b'"}')
    assert len(honest) <= protocol.MAX_SMALL_LINE and sequence.fits(honest, len(prefix)) is None
    flood = prefix + b', "cell_error": 3, "error": "' + b"x" * protocol.MAX_SMALL_LINE + b'"}'
    assert "longer than the recorder sends" in sequence.fits(flood, len(prefix))
    big_record = prefix + b', "record": "q1", "outcomes": [' + b"1, " * protocol.MAX_SMALL_LINE + b'1]}'
    assert sequence.fits(big_record, len(prefix)) is not None  # no task announced: no record awaited
    assert sequence.check({"nonce": "n", "task": "q1"}, ("cell", 2)) is None
    assert sequence.fits(big_record, len(prefix)) is None
    assert sequence.check({"nonce": "n", "record": "q1", "outcomes": [], "library": [], "tampered": [],
                           "notes": {}}, ("task", "q1")) is None
    assert sequence.fits(big_record, len(prefix)) is not None  # its record came: a second one is refused


def test_a_forged_or_flooding_cell_is_charged_to_the_submission_with_no_run_again():
    """A stop that only a hostile cell causes (a forged message, more output than MAX_REPORT) would buy a
    run after each cell it skips: instead every task left gets the stop, naming the cell, and no run."""
    from nexttoken.grading import run, stops

    for stop in (run.Stop(("cell", 4), "error", "a forged record", forged=True),
                 run.Stop(("cell", 4), "too_much_output", "sent more than 33554432 bytes of outputs")):
        recording = run.Recording("ch02", tasks={})
        left = stops.charge(recording, run.RunResult(stopped=stop), ["q1", "q2"], run.Settings())
        assert left == [] and recording.skip == {}
        for task in ("q1", "q2"):
            status, reason = recording.results[task]
            assert status == "error" and reason.startswith("your code cell 4") and "not run again" in reason
    honest = run.Recording("ch02", tasks={})  # a cell that hangs is skipped and the notebook run again
    assert stops.charge(honest, run.RunResult(stopped=run.Stop(("cell", 4), "timeout", "ran past 60 s")),
                        ["q1"], run.Settings()) == ["q1"] and 4 in honest.skip


# --- what a judged value may cost, one escaping, the careless cases -----------------------

def test_a_tensor_of_no_elements_and_huge_dimensions_is_refused_by_the_wire():
    from nexttoken.recorder import wire

    for shape in ([4194304, 4194304, 0], [4194304, 0, 5], [0, 1 << 22, 2]):
        with pytest.raises(wire.Rejected, match="no elements but dimensions"):
            wire.decode_outcomes([["ok", {"dtype": "int64", "shape": shape, "data": ""}]], 1)
    [(kind, value)] = wire.decode_outcomes([["ok", {"dtype": "int64", "shape": [1 << 20, 0], "data": ""}]], 1)
    assert kind == "ok" and tuple(value.shape) == (1 << 20, 0)


def test_feedback_never_lists_a_tensor_with_many_rows_of_nothing():
    import torch

    from nexttoken.exercises import feedback

    shown = feedback.show(torch.empty(4194304, 4194304, 0).long())
    assert shown == "a torch.int64 tensor of shape (4194304, 4194304, 0)"
    assert feedback.describe(torch.empty(1 << 20, 0)) == "a torch.float32 tensor of shape (1048576, 0)"
    assert feedback.show(torch.tensor([[1, 2]])) == "tensor([[1, 2]])"


def test_judging_that_runs_out_of_memory_is_that_tasks_grader_error():
    from nexttoken.grading import judge

    class Greedy:
        name = "q1"

        def cases(self):
            return [(1,)]

        def evaluate(self, outcomes, cases=None, hidden=None):
            return "passed", str(len(bytearray(8 * 1024 ** 3)))  # far past JUDGE_MEMORY_MB

    status, reason = judge.judge(Greedy(), {"outcomes": [["ok", 1]]})
    assert status == "grader_error" and f"more than {judge.JUDGE_MEMORY_MB} MB" in reason
    assert len(bytearray(1024 ** 3)) == 1024 ** 3  # the cap is lifted afterwards


def test_cutting_lines_is_linear_in_the_chunk():
    """64 KB of newlines cut as one chunk or as 16 chunks of 4 KB: the same work (the old loop copied the
    rest of the chunk for every line, so one big chunk cost 16 times the small ones)."""
    import time

    nonce = secrets.token_hex(16)

    def cost(chunk_size: int) -> float:
        lines, data = protocol.Lines(nonce), b"\n" * 65536
        start = time.process_time()
        for _ in range(8):
            for i in range(0, len(data), chunk_size):
                lines.feed(data[i:i + chunk_size])
        return time.process_time() - start

    cost(4096)  # warm up
    assert cost(65536) < 4 * cost(4096) + 0.05


def test_junk_lines_cost_no_python_step_each():
    """A newline flood must not cost the grader one Python step per line (that cost 7x the CPU of a sandbox
    sleeping as long). Counted here as the calls a chunk costs (sys.setprofile sees every call, C functions too): a
    chunk of 65,536 empty lines, or of 4,096 short junk lines, costs a handful, not one or more a line."""
    import sys

    nonce = secrets.token_hex(16)
    real = f'{{"nonce": "{nonce}", "done": true}}'.encode()
    for chunk in (b"\n" * 65536, b"junk line\n" * 4096, b"\n" * 30000 + real + b"\n" + b"x\n" * 30000):
        lines, calls = protocol.Lines(nonce), [0]

        def count(frame, event, arg):
            calls[0] += event in ("call", "c_call")

        sys.setprofile(count)
        try:
            got = lines.feed(chunk)
        finally:
            sys.setprofile(None)
        assert got == ([real] if real in chunk else []) and calls[0] < 40, calls


def test_lines_are_cut_as_a_split_would_cut_them_however_the_chunks_fall():
    import random

    nonce = "ab12"
    ours = b'{"nonce": "ab12"'
    pieces = [ours + b', "done": true}', b"junk", ours[:5], ours[:5] + b"zz", b"", ours, ours + b"more" * 50,
              b"\n" * 3, b'{"nonce": "ab1"', b"x" + ours]
    rng = random.Random(0)
    for _ in range(3000):
        data = b"\n".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) + rng.choice([b"", b"\n"])
        cuts = sorted(rng.sample(range(len(data) + 1), min(len(data) + 1, rng.randint(0, 6))))
        chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)]) if b > a]
        lines = protocol.Lines(nonce)
        expected = [line for line in data.split(b"\n")[:-1] if line.startswith(ours)]
        assert [line for c in chunks for line in lines.feed(c)] == expected, (data, chunks)


def test_a_line_split_across_chunks_is_kept_and_junk_is_dropped():
    nonce = secrets.token_hex(16)
    line = f'{{"nonce": "{nonce}", "done": true}}'.encode()
    lines = protocol.Lines(nonce)
    assert lines.feed(line[:7]) == [] and lines.feed(line[7:] + b"\njunk\n\n" + line[:3]) == [line]
    assert lines.feed(b"x" + line + b"\n") == [] and lines.feed(line + b"\n") == [line]


@pytest.mark.parametrize("text", ["\x1b]0;title\x07", "\x1b[2J", "a\rb", "\x9b31m", "\u202etxt", "\x7f", "\t"])
def test_one_escaping_leaves_no_control_character(text):
    for escaped in (clean(text), shown(text), name_text(text)):
        assert all(c.isprintable() for c in escaped), escaped
    assert clean("line\nnext") == "line\nnext" and shown("line\nnext") == "line\\nnext"
    assert clean(name_text(text)) == name_text(text)  # what --resume reads back is the key


def test_names_that_differ_only_in_control_characters_keep_their_own_rows():
    names = ["a\x1b.ipynb", "a\\x1b.ipynb", "a\n.ipynb", "a\\n.ipynb"]
    assert len({name_text(n) for n in names}) == 4


def test_a_defining_cell_with_a_python_cell_magic_or_a_with_block_defines_its_function():
    import ast

    from nexttoken.recorder import cells

    for source in ("%%time\ndef f(x):\n    return x\n", "%%capture out\ndef f(x):\n    return x\n",
                   "import torch\nwith torch.no_grad():\n    def f(x):\n        return x\n    print('hi')\n"):
        namespace: dict = {}
        exec(compile(cells.definitions(cells.to_python(source)), "<cell>", "exec"), namespace)
        assert namespace["f"](3) == 3, source
    kept = ast.unparse(cells.definitions(cells.to_python("%%bash\necho hi\n")))
    assert "def" not in kept


def test_a_missing_function_is_explained_by_where_it_is_written():
    from nexttoken.recorder import cells

    assert cells.missing_reason("f", ["x = 1"]) == "the notebook does not define a function named f"
    nested = cells.missing_reason("f", ["x = 1", "for _ in range(1):\n    def f(T):\n        pass\n"])
    assert "code cell 2" in nested and "top level" in nested
    assert "did that cell raise" in cells.missing_reason("f", ["def f(T):\n    pass\n"])


def test_no_sandbox_as_root_never_runs_a_submission_as_root_unless_told_it_is_trusted(monkeypatch, capsys):
    """Where the sandbox's user id cannot start this Python (a pyenv under /root), the grader refuses and
    says what the image must provide, rather than run the submission as root (which could rewrite
    run_autograder on Gradescope); --trusted-as-root is the explicit choice for notebooks the instructor
    wrote."""
    monkeypatch.setattr(sandbox, "find_cgroups", lambda: (None, "no cgroup here"))
    monkeypatch.setattr(sandbox, "allocate_uids", lambda n: [61000 + i for i in range(n)])
    monkeypatch.setattr(sandbox, "can_run_as", lambda uid, limits: False)
    base = ["--out", "g.csv", "--no-sandbox", "--allow-no-cgroup", "x.ipynb"]
    refused = cli.setup(cli.parse_args(base), sandbox.Limits())
    assert isinstance(refused, str) and "a submission never runs as root" in refused
    assert "Python that every user can run" in refused
    assert cli.setup(cli.parse_args(["--trusted-as-root", *base]), sandbox.Limits()) == (None, [None, None])
    assert "run as root" in capsys.readouterr().err
    monkeypatch.setattr(sandbox, "can_run_as", lambda uid, limits: True)
    monkeypatch.setattr(sandbox, "package_reachable_by", lambda uid: False)
    assert cli.setup(cli.parse_args(base), sandbox.Limits()) == (None, [61000, 61001])


def test_no_sandbox_as_root_refuses_where_the_submission_could_read_the_installed_package(monkeypatch):
    """A run without bubblewrap imports a copy of what a sandbox shows (the package view), and the installed
    package must be out of the user's reach: its permissions are then not the only thing between the
    submission and the judging files, nor the library's generate within reach of the tasks that forbid it."""
    monkeypatch.setattr(sandbox, "find_cgroups", lambda: (None, "no cgroup here"))
    monkeypatch.setattr(sandbox, "allocate_uids", lambda n: [61000 + i for i in range(n)])
    monkeypatch.setattr(sandbox, "can_run_as", lambda uid, limits: True)
    monkeypatch.setattr(sandbox, "package_reachable_by", lambda uid: True)
    refused = cli.setup(cli.parse_args(["--out", "g.csv", "--no-sandbox", "--allow-no-cgroup", "x.ipynb"]),
                        sandbox.Limits())
    assert isinstance(refused, str) and "can read the installed package" in refused and "chmod 0700" in refused
