"""A hostile batch: submissions that attack the grader, the package, each other and the machine, graded
together with correct ones. The correct ones keep full marks, nothing outside the sandboxes changes, no
process of the batch survives, and the CSV is complete."""

import csv
import hashlib
import json
import os
import re
import signal
import site
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import nbformat
import pytest

import nexttoken
from nexttoken.grading import judge, sandbox
from nexttoken.grading.text import FORMULA_STARTS, name_text, unescape
from nexttoken.recorder import wire
from nexttoken.exercises import chapter

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(nexttoken.__file__).resolve().parent
MARK = f"hostile-{uuid.uuid4().hex[:12]}"  # in the argv of every process an attack leaves behind
SECRET = f"instructor-secret-{uuid.uuid4().hex[:8]}"
# Small limits keep the batch short (a few seconds per hang).
LIMITS = ["--timeout", "6", "--notebook-timeout", "90", "--memory", "1536", "--total-memory", "1536",
          "--processes", "32", "--file-size", "4", "--jobs", "2"]


# Without bubblewrap the grader refuses to run: skip, except under CI=true, where the tests then fail.
pytestmark = [pytest.mark.slow,  # graded batches of notebooks: minutes, not seconds
              pytest.mark.skipif(sandbox.bwrap_path() is None and os.environ.get("CI", "").lower() != "true",
                                 reason="bubblewrap is not installed: run 'sudo bash scripts/setup_sandbox.sh'")]

HEADER = "import math, os, sys, time\nimport torch\nimport nexttoken\nfrom nexttoken.exercises import ch02\n"
GOOD = [
    "def causal_mask(T):\n    return torch.ones(T, T, dtype=torch.bool).tril()\n",
    "def mask_scores(scores):\n    T = scores.shape[-1]\n"
    "    return scores.masked_fill(~causal_mask(T), float('-inf'))\n",
    "def attention_weights(q, k):\n    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
    "    return torch.softmax(mask_scores(scores), dim=-1)\n",
    "def padded_causal_mask(attention_mask):\n"
    "    return causal_mask(attention_mask.shape[-1]) & attention_mask.bool()[:, None, :]\n",
    "def changed_positions(T, j):\n    return torch.arange(T) >= j\n",
]
CH02 = [f"ch02.{name}" for name in chapter("ch02").TASKS]  # GOOD answers every one of them
CH05 = [f"ch05.{name}" for name in chapter("ch05").TASKS]
FULL = {task: ("passed", 1) for task in CH02}
DAEMON = ("import time\ntime.sleep(3)\ntry:\n    open({csv!r}, 'w').write('pwned')\nexcept OSError:\n    pass\n"
          "time.sleep(60)\n")
# q2 and q3 that do not use the notebook's causal_mask: they stay right when an attack replaces it.
OWN = [
    "def mask_scores(scores):\n    T = scores.shape[-1]\n"
    "    return scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float('-inf'))\n",
    GOOD[2],
    "def padded_causal_mask(attention_mask):\n    T = attention_mask.shape[-1]\n"
    "    return torch.ones(T, T, dtype=torch.bool).tril() & attention_mask.bool()[:, None, :]\n",
    GOOD[4],
]
STUBS = [f"def {name}(*args):\n    raise NotImplementedError\n"
         for name in ("causal_mask", "mask_scores", "attention_weights", "padded_causal_mask", "changed_positions")]


def notebook(path: Path, *cells: str, chapter="ch02", markdown_first=False) -> Path:
    made = [nbformat.v4.new_code_cell(c) for c in cells]
    if markdown_first:  # markdown between code cells: "code cell N" must not count them
        made = [x for c in made for x in (nbformat.v4.new_markdown_cell("Some text."), c)]
    nb = nbformat.v4.new_notebook(cells=made)
    nb.metadata["nexttoken"] = {"chapter": chapter}
    nbformat.write(nb, path)
    return path


def source(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def attack(body: str) -> str:
    """A causal_mask that runs ``body`` when the grader calls it, then is a stub: its task's status
    "not_implemented" shows that the attack ran to its end."""
    indented = textwrap.indent(source(body), " " * 8)
    return ("def causal_mask(T):\n    try:\n" + indented
            + "    except Exception:\n        pass\n    raise NotImplementedError\n")


def probe(body: str) -> str:
    """A causal_mask that runs ``body`` (which sets ``report``) and raises it: the reason shows the report."""
    indented = textwrap.indent(source(body), " " * 4)
    return "def causal_mask(T):\n" + indented + "    raise ValueError('report: ' + report)\n"


# The kernel interfaces a sandbox must not reach, each called and its errno reported (EPERM: denied).
KERNEL_PROBE = r"""
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
def call(label, fn, *args):
    ok = getattr(libc, fn)(*args) >= 0
    return f"{label}={'ok' if ok else errno.errorcode.get(ctypes.get_errno(), '?')}"
out = [call('ptrace', 'ptrace', 16, 1, None, None),  # PTRACE_ATTACH to the sandbox's init
       call('vm_read', 'syscall', 310, 1, None, 0, None, 0, 0),  # process_vm_readv of the init
       call('keyctl', 'syscall', 250, 0, -3, 0),  # KEYCTL_GET_KEYRING_ID of the session keyring
       call('add_key', 'syscall', 248, b'user', b'planted', b'x', 1, -3),
       call('request_key', 'syscall', 249, b'user', b'instructor-token', None, 0),
       call('userns', 'unshare', 0x10000000),
       call('clone_userns', 'syscall', 56, 0x10000000 | 17, None, None, None, None),
       call('mount', 'mount', b'none', b'/tmp', b'tmpfs', 0, None),
       call('vsock', 'socket', 40, 1, 0),  # AF_VSOCK: no network namespace holds it
       call('vsock_high', 'syscall', 41, ctypes.c_long(0x100000028), 1, 0),  # the same with high bits set
       call('uring', 'syscall', 425, 8, ctypes.create_string_buffer(120)),  # io_uring_setup
       call('uring_enter', 'syscall', 426, -1, 0, 0, 0, None, 0),
       call('uring_register', 'syscall', 427, -1, 0, None, 0)]
try:
    open('/dev/planted', 'w')
    out.append('dev=ok')
except OSError as e:
    out.append('dev=' + errno.errorcode[e.errno])
report = ' '.join(out)
"""
DENIED = "ptrace=EPERM vm_read=EPERM keyctl=EPERM add_key=EPERM request_key=EPERM userns=EPERM " \
         "clone_userns=EPERM mount=EPERM vsock=EPERM vsock_high=EPERM uring=EPERM uring_enter=EPERM " \
         "uring_register=EPERM dev=EROFS"
# Runs the grader in a session keyring holding an instructor's key, then writes what is in it afterwards.
KEYRING = r"""
import ctypes, json, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
assert libc.syscall(250, 1, b"instructor-session") >= 0  # KEYCTL_JOIN_SESSION_KEYRING
key = libc.syscall(248, b"user", b"instructor-token", b"s3cret", 6, -3)
assert key >= 0
code = subprocess.call(sys.argv[2:])
buf = ctypes.create_string_buffer(4096)
size = libc.syscall(250, 11, key, buf, 4096)  # KEYCTL_READ the key
payload = buf.raw[:max(0, size)].decode()
listed = libc.syscall(250, 11, -3, buf, 4096)  # KEYCTL_READ the session keyring: 4 bytes per key
json.dump({"payload": payload, "keys": listed // 4}, open(sys.argv[1], "w"))
sys.exit(code)
"""
NON_UTF8 = os.fsdecode(b"b_\xff\xfe.ipynb")  # a file name that is not UTF-8


def tree_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(folder)).encode() + p.read_bytes())
    return h.hexdigest()


def outside_state(peers: list[Path]) -> dict:
    """What no submission may change: the package, site-packages' .pth files, the instructor's IPython
    startup folder and the other submissions."""
    home = Path(os.path.expanduser("~"))
    return {
        "package": tree_hash(PACKAGE),
        "pth": sorted(p.name for d in site.getsitepackages() for p in Path(d).glob("*.pth")),
        "ipython": sorted(str(p) for p in (home / ".ipython").rglob("*") if "startup" in p.parts),
        **{f"peer {p.name}": hashlib.sha256(p.read_bytes()).hexdigest() for p in peers},
    }


def survivors() -> list[str]:
    """Processes left by an ended grader: run by a sandbox's user id, or carrying the attacks' mark. A
    sandbox's process in the cgroup of a grader still running (its name holds the grader's pid:
    ``Cgroups.new_group``) is another batch's, on the same machine, and not counted."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            uid = Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0]
            group = re.search(r"nexttoken-(\d+)-\d+", Path(f"/proc/{pid}/cgroup").read_text())
        except (OSError, IndexError):
            continue
        if group is not None and Path(f"/proc/{group[1]}").exists() and MARK not in cmdline:
            continue  # a running grader's sandbox
        if MARK in cmdline or sandbox.FIRST_UID <= int(uid) < sandbox.FIRST_UID + 16:
            found.append(f"{pid} (uid {uid}): {cmdline[:120]}")
    return found


def run_grader(folder: Path, names: list[str], *extra: str, env=None, keyring=None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "nexttoken.grade",
           "--count-practice", "--out", "grades.csv", *LIMITS, *extra, "--", *names]
    if keyring is not None:  # in a session keyring holding an instructor's key; afterwards, what it holds
        cmd = [sys.executable, "-c", KEYRING, str(keyring), *cmd]
    return subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NEXTTOKEN_SECRET": SECRET, **(env or {})})


def swap_when_grading_starts(csv_path: Path, stub: Path, target: Path) -> threading.Thread:
    """Once the first grades are written, replace ``stub`` by a link to ``target`` (too late: snapshots)."""
    def swap():
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and len(csv_path.read_text().splitlines() if csv_path.exists() else []) < 2:
            time.sleep(0.1)
        stub.unlink()
        stub.symlink_to(target)
    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    return thread


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    good = notebook(d / "good.ipynb", HEADER, *GOOD)
    good2 = notebook(d / "good_too.ipynb", HEADER, *GOOD, markdown_first=True)
    ch05 = d / "ch05_solution.ipynb"
    ch05.write_bytes((ROOT / "solutions" / "ch05.ipynb").read_bytes())
    peers = [good, good2, ch05]
    csv_path = d / "grades.csv"
    home = os.path.expanduser("~")
    daemon = DAEMON.format(csv=str(csv_path))
    subs = {
        # Rewrite the installed package (a later chapter 5 submission would score 0) and plant a .pth
        # file and an IPython startup file that would run in every later process.
        "package_rewrite": [HEADER, attack(r"""
            import nexttoken.exercises as ex
            for f in ('ch05.py', 'task.py', '__init__.py'):
                try:
                    open(os.path.join(os.path.dirname(ex.__file__), f), 'a').write('\nimport os; os._exit(3)\n')
                except OSError:
                    pass
            """)],
        "pth_file": [HEADER, attack(r"""
            import site
            for d in site.getsitepackages():
                try:
                    open(os.path.join(d, 'zz_hostile.pth'), 'w').write('import os; os._exit(4)\n')
                except OSError:
                    pass
            """)],
        "ipython_startup": [HEADER, attack(rf"""
            for home in (os.path.expanduser('~'), {home!r}):
                try:
                    d = os.path.join(home, '.ipython', 'profile_default', 'startup')
                    os.makedirs(d, exist_ok=True)
                    open(os.path.join(d, '00-hostile.py'), 'w').write('import os; os._exit(5)\n')
                except OSError:
                    pass
            """)],
        # Find classmates' notebooks (by path, or through the grader's command line) and copy their answers.
        "peer_read": [HEADER, *STUBS, source(rf"""
            import json
            def steal():
                paths = [{str(good)!r}, {str(good2)!r}, 'good.ipynb', '../good.ipynb']
                for pid in filter(str.isdigit, os.listdir('/proc')):
                    try:
                        args = open(f'/proc/{{pid}}/cmdline', 'rb').read().split(b'\0')
                    except OSError:
                        continue
                    paths += [a.decode() for a in args if a.endswith(b'.ipynb') and b'/submission/' not in a]
                for p in paths:
                    try:
                        cells = json.load(open(p))['cells']
                    except Exception:
                        continue
                    for c in cells:
                        src = ''.join(c['source'])
                        if c['cell_type'] == 'code' and 'def ' in src and 'NotImplementedError' not in src:
                            exec(src, globals())
                return paths
            """), "stolen = steal()\n"],
        "peer_overwrite": [HEADER, attack(rf"""
            for p in ({str(good)!r}, {str(good2)!r}, {str(ch05)!r}):
                try:
                    open(p, 'w').write('{{}}')
                except OSError:
                    pass
            """)],
        # A daemon (setsid + double fork) that would rewrite the grades after the batch.
        "daemon": [HEADER, attack(rf"""
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    os.execv(sys.executable, [sys.executable, '-c', {daemon!r}, {MARK!r}])
                os._exit(0)
            time.sleep(0.5)
            """)],
        # Kill the grader (the parent) and everything else in sight.
        "grader_kill": [HEADER, attack(r"""
            import signal
            for pid in [os.getppid()] + [int(p) for p in os.listdir('/proc') if p.isdigit()]:
                if pid != os.getpid():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            """)],
        # Replace the recorder so that stubs record the reference's outputs: at top level (does not run),
        # then hidden in an assignment (runs, but finds no task module: the judging half is not inside).
        "recorder_patch": [HEADER, *STUBS, source(r"""
            import nexttoken.exercises.task as task_module
            import nexttoken.recorder.main as harness
            task_module.Task.run = lambda self, fn: [('ok', self.reference(*a)) for a in self.cases()]
            harness.record = lambda *a, **k: None
            task_module.Task.evaluate = lambda self, outcomes: ('passed', 'all good')
            """), "_patched = setattr(task_module.Task, 'run', "
                  "lambda self, fn: [('ok', self.reference(*a)) for a in self.cases()])\n"],
        # A thread that writes forged records wherever the recorder might write.
        "forged_records": [HEADER, *STUBS, source(r"""
            import threading, json
            def forge():
                import nexttoken.exercises.ch02 as c
                for _ in range(200):
                    for name in ('q1', 'q2', 'q3'):
                        fake = {'dtype': 'bool', 'shape': [], 'data': ''}
                        outs = [['ok', fake] for a in getattr(c, name).cases()]
                        line = json.dumps({'record': name, 'outcomes': outs, 'nonce': None}) + '\n'
                        for fd in range(3, 20):
                            try:
                                os.write(fd, line.encode())
                            except OSError:
                                pass
                    time.sleep(0.01)
            forger = threading.Thread(target=forge, daemon=True).start()
            """)],
        # Gigabytes of output, printed and displayed: graded normally.
        "display_flood": [HEADER, *GOOD, source(r"""
            from IPython.display import display
            flood = [display('x' * 50_000_000) or print('y' * 50_000_000) for _ in range(10)]
            """)],
        # Outputs that would blow up the grader: a stride-0 expanded tensor, nested shared lists.
        "bomb_stride0": [HEADER, source(r"""
            def causal_mask(T):
                return torch.zeros(1, dtype=torch.bool).expand(1 << 40)
            """), *OWN],
        "bomb_nested": [HEADER, source(r"""
            def causal_mask(T):
                a = [True]
                for _ in range(40):
                    a = [a, a]
                return a
            """), *OWN],
        # A hang inside the learner's own check cell: costs only that task.
        "check_hang": [HEADER, GOOD[0], GOOD[1], GOOD[3], GOOD[4], "q1, q2, q3 = ch02.q1, ch02.q2, ch02.q3\n",
                       "def attention_weights(q, k):\n    while True:\n        pass\n",
                       "q1.check(causal_mask)\n", "ch02.q2.check = lambda fn: time.sleep(10 ** 6)\n",
                       "q2.check(mask_scores)\n", "q3.check(attention_weights)\n"],
        "fork_bomb": [HEADER, attack(r"""
            while True:
                try:
                    os.fork()
                except OSError:
                    time.sleep(0.05)
            """), *OWN],
        "memory_hog": [HEADER, attack("hog = bytearray(8 * 1024 ** 3)\n"), *OWN],
        # Text that does not encode: a lone surrogate in a task's exception and in a top-level cell's.
        "surrogate_task": [HEADER, source(r"""
            def causal_mask(T):
                raise ValueError(chr(0xD800) + ' and a NUL \0')
            """), *OWN],
        "surrogate_cell": [HEADER, "bad = int(chr(0xD800))\n", *GOOD],
        # Memory outside every process: memfd pages written with write(), millions of empty files.
        # (each memfd under --file-size, 450 of them under the open-files limit: 1.8 GB, over --total-memory)
        "memfd": [HEADER, attack(r"""
            block, fds = b'x' * (4 << 20), []
            for i in range(450):
                fds.append(os.memfd_create(f'hog{i}'))
                os.write(fds[-1], block)
            """), *OWN],
        "many_files": [HEADER, attack(r"""
            start, i = time.time(), 0
            while i < 3_000_000 and time.time() - start < 4:
                open(f'/tmp/f{i}', 'w').close()
                i += 1
            """), *OWN],
        # ptrace of the init, other processes' memory, the keyrings, new user namespaces, mounts, /dev.
        "kernel": [HEADER, probe(KERNEL_PROBE), *OWN],
        # Switching off the watch for library calls, to hide one.
        "profile_off": [HEADER, "def causal_mask(T):\n    sys.setprofile(None)\n    return nexttoken.causal_mask(T)\n",
                        *OWN],
        # 33 MB of junk lines (no nonce) where the recorder writes.
        "junk_line": [HEADER, attack(r"""
            junk = b'x' * (33 << 20) + b'\n'
            for fd in range(3, 20):
                try:
                    os.write(fd, junk)
                except OSError:
                    pass
            """), *OWN],
        "environment": [HEADER, source(r"""
            def causal_mask(T):
                raise ValueError(' '.join(sorted(os.environ)) + str(os.environ.get('NEXTTOKEN_SECRET')))
            """), *OWN],
    }
    names = []
    for name, cells in subs.items():
        notebook(d / f"{name}.ipynb", *cells)
        names.append(f"{name}.ipynb")
    os.mkfifo(d / "fifo.ipynb")
    (d / "surrogate_field.ipynb").write_text('{"nbformat": "\\ud800", "cells": []}')  # no code at all
    (d / NON_UTF8).write_bytes(good.read_bytes())
    (d / "-bob.ipynb").write_bytes(good.read_bytes())  # escape("-bob.ipynb") was escape("'-bob.ipynb")
    notebook(d / "'-bob.ipynb", HEADER, *STUBS)
    (d / "link_peer.ipynb").symlink_to(good)  # a classmate's notebook, the solution, a secret file
    (d / "link_solution.ipynb").symlink_to(ROOT / "solutions" / "ch02.ipynb")
    (d / "link_shadow.ipynb").symlink_to("/etc/shadow")
    notebook(d / "swapped.ipynb", HEADER, *STUBS)  # becomes a link to the solution once grading started
    old = nbformat.v3.new_notebook(metadata={"nexttoken": {"chapter": "ch02"}}, worksheets=[
        nbformat.v3.new_worksheet(cells=[nbformat.v3.new_code_cell(input=c) for c in (HEADER, *GOOD)])])
    (d / "nbformat3.ipynb").write_text(nbformat.writes(old, version=3))
    (d / "nbformat5.ipynb").write_text('{"nbformat": 5, "nbformat_minor": 0, "cells": [], "metadata": {}}')
    (d / "zero.ipynb").symlink_to("/dev/zero")  # a link: not followed
    (d / "--timeout=1.ipynb").write_bytes(good.read_bytes())  # a name that looks like an option
    (d / '=HYPERLINK("x.example","y").ipynb').write_bytes(good.read_bytes())
    names = ["good.ipynb", *names[:6], "good_too.ipynb", *names[6:], "ch05_solution.ipynb", "fifo.ipynb",
             "zero.ipynb", "/dev/zero", "--timeout=1.ipynb", '=HYPERLINK("x.example","y").ipynb',
             "surrogate_field.ipynb", NON_UTF8, "-bob.ipynb", "'-bob.ipynb", "link_peer.ipynb",
             "link_solution.ipynb", "link_shadow.ipynb", "swapped.ipynb", "nbformat3.ipynb", "nbformat5.ipynb"]

    before = outside_state(peers)
    start = time.monotonic()
    swapper = swap_when_grading_starts(csv_path, d / "swapped.ipynb", ROOT / "solutions" / "ch02.ipynb")
    result = run_grader(d, names, keyring=d.parent / f"{d.name}-keyring.json")
    elapsed = time.monotonic() - start
    assert result.returncode == 0, result.stderr[-3000:]
    swapper.join(timeout=10)
    after = outside_state(peers)
    csv_text = csv_path.read_text()
    time.sleep(4)  # the daemon would write 3 s after its start
    keyring = json.loads((d.parent / f"{d.name}-keyring.json").read_text())
    return dict(folder=d, names=names, rows=read_rows(csv_path), before=before, after=after,
                csv_text=csv_text, csv_later=csv_path.read_text(), survivors=survivors(), elapsed=elapsed,
                keyring=keyring, stderr=result.stderr)


def by_submission(rows):
    out = {}
    for r in rows:
        out.setdefault(unescape(r["submission"]), {})[r["task"]] = r
    return out


def statuses(batch, name):
    return {t: (r["status"], int(r["points"])) for t, r in by_submission(batch["rows"])[name].items()}


def test_correct_submissions_keep_full_marks(batch):
    for name in ("good.ipynb", "good_too.ipynb", "--timeout=1.ipynb", "display_flood.ipynb", "surrogate_cell.ipynb",
                 name_text(NON_UTF8), "-bob.ipynb", "nbformat3.ipynb"):
        assert statuses(batch, name) == FULL, name
    assert statuses(batch, "ch05_solution.ipynb") == {task: ("passed", 1) for task in CH05}


def test_nothing_outside_the_sandboxes_changed(batch):
    assert batch["after"] == batch["before"]
    assert batch["csv_later"] == batch["csv_text"]  # the daemon did not rewrite the grades


def test_no_process_of_the_batch_survives(batch):
    assert batch["survivors"] == []


def test_the_csv_is_complete(batch):
    grades = by_submission(batch["rows"])
    assert set(grades) == {name_text(n) for n in batch["names"]}
    for name, rows in grades.items():
        if name not in ("fifo.ipynb", "zero.ipynb", "/dev/zero", "surrogate_field.ipynb", "nbformat5.ipynb")\
                and not name.startswith("link_"):
            assert set(rows) in (set(CH02), set(CH05)), name


def test_attacks_score_nothing(batch):
    for name in ("package_rewrite", "pth_file", "ipython_startup", "peer_read", "peer_overwrite", "daemon",
                 "grader_kill", "recorder_patch", "forged_records"):
        assert all(points == 0 for _, points in statuses(batch, f"{name}.ipynb").values()), name
    for name in ("package_rewrite", "pth_file", "ipython_startup", "peer_read", "peer_overwrite", "daemon",
                 "grader_kill", "forged_records"):  # each attack ran to its end
        assert statuses(batch, f"{name}.ipynb")["ch02.q1"] == ("not_implemented", 0), name


def test_a_recorder_patch_finds_nothing_to_patch(batch):
    """The judging half is outside the sandbox: the task module the patch imports is not there,
    so the patching cells fail, and the stubs are graded as what they are."""
    assert statuses(batch, "recorder_patch.ipynb") == {t: ("not_implemented", 0) for t in CH02}


def test_output_bombs_cost_only_their_task(batch):
    stride0, nested = statuses(batch, "bomb_stride0.ipynb"), statuses(batch, "bomb_nested.ipynb")
    assert stride0["ch02.q1"][0] in ("error", "crashed") and nested["ch02.q1"][0] in ("error", "timeout")
    assert all(stride0[t] == nested[t] == ("passed", 1) for t in CH02[1:])
    assert len(batch["csv_text"]) < 100_000  # nothing huge reached the CSV


def test_a_hang_in_a_check_cell_costs_only_the_hanging_task(batch):
    assert statuses(batch, "check_hang.ipynb") == {**FULL, "ch02.q3": ("timeout", 0)}


def test_limits_contain_fork_bombs_and_memory_hogs(batch):
    for name in ("fork_bomb.ipynb", "memory_hog.ipynb"):
        rows = statuses(batch, name)
        assert rows["ch02.q1"][1] == 0 and all(rows[t] == ("passed", 1) for t in CH02[1:]), name


def test_the_instructors_environment_does_not_reach_the_submission(batch):
    reason = by_submission(batch["rows"])["environment.ipynb"]["ch02.q1"]["reason"]
    assert "NEXTTOKEN_GRADING" in reason and SECRET not in reason and "NEXTTOKEN_SECRET" not in reason


def test_fifo_and_device_get_a_row_without_being_read(batch):
    for name in ("fifo.ipynb", "/dev/zero"):
        [row] = by_submission(batch["rows"])[name].values()
        assert row["status"] == "not_a_file" and row["points"] == "0"
    [row] = by_submission(batch["rows"])["zero.ipynb"].values()  # a link to the device is not followed
    assert row["status"] == "symlink" and "a symbolic link" in row["reason"]


def test_formulas_are_escaped_in_the_csv(batch):
    cells = [value for row in batch["rows"] for value in row.values()]
    assert not [c for c in cells if c[:1] in FORMULA_STARTS and c != "-"]  # a lone "-" is no formula
    assert '\'=HYPERLINK("x.example","y").ipynb' in cells and "'--timeout=1.ipynb" in cells
    assert statuses(batch, '=HYPERLINK("x.example","y").ipynb') == FULL


def test_the_batch_is_quick(batch):
    assert batch["elapsed"] < 240, batch["elapsed"]


def test_text_that_does_not_encode_costs_nothing_but_its_task(batch):
    rows = by_submission(batch["rows"])
    assert statuses(batch, "surrogate_task.ipynb") == {**FULL, "ch02.q1": ("error", 0)}
    assert "\\ud800 and a NUL \\x00" in rows["surrogate_task.ipynb"]["ch02.q1"]["reason"]
    [row] = rows["surrogate_field.ipynb"].values()
    assert row["status"] == "invalid_notebook" and "nbformat version" in row["reason"]
    assert "b_\\xff\\xfe.ipynb" in batch["csv_text"]


def test_names_that_escaped_alike_keep_their_own_rows(batch):
    assert statuses(batch, "-bob.ipynb") == FULL
    assert all(points == 0 for _, points in statuses(batch, "'-bob.ipynb").values())
    assert "''-bob.ipynb" in batch["csv_text"]


def test_links_are_rows_not_followed_and_nothing_of_their_target_leaks(batch):
    for name in ("link_peer.ipynb", "link_solution.ipynb", "link_shadow.ipynb", "zero.ipynb"):
        [row] = by_submission(batch["rows"])[name].values()
        assert row["status"] == "symlink" and f"a symbolic link ({name}), not graded" in row["reason"]
    assert "root:" not in batch["csv_text"]
    assert (batch["folder"] / "swapped.ipynb").is_symlink()  # the swap happened, during the batch
    assert all(points == 0 for _, points in statuses(batch, "swapped.ipynb").values())  # the snapshot was graded


def test_old_notebook_formats_are_upgraded_or_refused_with_a_reason(batch):
    assert statuses(batch, "nbformat3.ipynb") == FULL
    [row] = by_submission(batch["rows"])["nbformat5.ipynb"].values()
    assert row["status"] == "old_notebook" and "save it" in row["reason"]


def test_memory_outside_any_process_is_the_sandboxs_own(batch):
    for name in ("memfd.ipynb", "many_files.ipynb"):
        rows = statuses(batch, name)
        assert rows["ch02.q1"][1] == 0 and all(rows[t] == ("passed", 1) for t in CH02[1:]), name
    # The cgroup's OOM killer ends it (crashed, naming --total-memory); once, on a loaded machine
    # (cgroup v1, no swap), the sandbox stalled at its limit instead until its --timeout: contained either way.
    memfd = by_submission(batch["rows"])["memfd.ipynb"]["ch02.q1"]
    assert (memfd["status"] == "crashed" and "--total-memory" in memfd["reason"]) or memfd["status"] == "timeout", memfd


def test_the_kernel_interfaces_are_denied(batch):
    reason = by_submission(batch["rows"])["kernel.ipynb"]["ch02.q1"]["reason"]
    assert f"report: {DENIED}" in reason, reason
    assert "limits per sandbox: cgroup v" in batch["stderr"]  # it says which cgroups it uses


def test_the_instructors_keyring_is_out_of_reach(batch):
    assert batch["keyring"] == {"payload": "s3cret", "keys": 1}  # the key is intact and nothing was planted


def test_switching_off_the_library_watch_is_tampering(batch):
    row = by_submission(batch["rows"])["profile_off.ipynb"]["ch02.q1"]
    assert row["status"] == "error" and "sys.setprofile" in row["reason"], row


def test_junk_lines_cost_only_their_task(batch):
    rows = statuses(batch, "junk_line.ipynb")
    assert rows["ch02.q1"] == ("too_much_output", 0) and all(rows[t] == ("passed", 1) for t in CH02[1:])


# --- the grader's own robustness: a killed grader, --resume, the gradebook, refusing without bwrap -------

def test_a_killed_grader_keeps_its_grades_and_resume_goes_on(tmp_path):
    good = notebook(tmp_path / "a_good.ipynb", HEADER, *GOOD)
    notebook(tmp_path / "b_slow.ipynb", HEADER, *GOOD, "def slow():\n    time.sleep(600)\n", "x = slow()\n")
    (tmp_path / "tmp").mkdir()  # what a grader killed cannot remove (its snapshots of the submissions) lands here
    proc = subprocess.Popen([sys.executable, "-m", "nexttoken.grade",
                             "--count-practice", "--out", "grades.csv", "--jobs", "1",
                             "--timeout", "300", "--", "a_good.ipynb", "b_slow.ipynb"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "TMPDIR": str(tmp_path / "tmp")})
    out = tmp_path / "grades.csv"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and f"a_good.ipynb,{CH02[-1]}" not in (out.read_text() if out.exists() else ""):
        time.sleep(0.2)
    time.sleep(2)  # b_slow is now inside its sleep
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rows = read_rows(out)
    assert [(r["submission"], r["status"]) for r in rows] == [("a_good.ipynb", "passed")] * len(CH02)
    time.sleep(1)
    assert survivors() == []  # the sandbox died with the grader
    assert not list(tmp_path.glob(".grades.csv.*"))  # no temporary file left behind

    good.write_text("{}")  # would now be invalid: --resume must not grade it again
    result = subprocess.run([sys.executable, "-m", "nexttoken.grade",
                             "--count-practice", "--out", "grades.csv", "--resume",
                             "--timeout", "5", "--gradebook", "book.csv", "--", "a_good.ipynb", "b_slow.ipynb"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    grades = by_submission(read_rows(out))
    assert [r["status"] for r in grades["a_good.ipynb"].values()] == ["passed"] * len(CH02)
    assert [r["status"] for r in grades["b_slow.ipynb"].values()] == ["passed"] * len(CH02)  # hung cell skipped
    book = read_rows(tmp_path / "book.csv")
    assert list(book[0]) == ["submission", *CH02, "total", "max_points"]
    n = str(len(CH02))
    assert [(b["submission"], b["total"], b["max_points"]) for b in book] == [("a_good.ipynb", n, n),
                                                                             ("b_slow.ipynb", n, n)]


def test_the_notebook_budget_bounds_reruns(tmp_path):
    slow_cells = [f"x{i} = time.sleep(100)\n" for i in range(6)]
    notebook(tmp_path / "slow.ipynb", HEADER, *GOOD, *slow_cells)
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "nexttoken.grade",
                             "--count-practice", "--out", "grades.csv", "--timeout", "3",
                             "--notebook-timeout", "8", "--", "slow.ipynb"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - start < 30
    rows = read_rows(tmp_path / "grades.csv")
    assert all(r["status"] == "timeout" and "--notebook-timeout" in r["reason"] for r in rows), rows


def test_reasons_use_the_learners_cell_numbers(tmp_path):
    # IPython syntax in a cell (a magic, a shell command) does not hide the definitions beside it.
    notebook(tmp_path / "numbers.ipynb", HEADER, "%time x = 1\n!true\n" + GOOD[0], "import does_not_exist\n",
             GOOD[2], markdown_first=True)
    result = subprocess.run([sys.executable, "-m", "nexttoken.grade", "--count-practice", "--out", "grades.csv", "--",
                             "numbers.ipynb"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    rows = {r["task"]: r for r in read_rows(tmp_path / "grades.csv")}
    assert rows["ch02.q1"]["status"] == "passed"
    assert rows["ch02.q2"]["status"] == "missing"
    assert "your code cell 3 raised ModuleNotFoundError" in rows["ch02.q2"]["reason"]


def test_answers_that_call_the_library_they_rebuild_are_refused_alike(tmp_path):
    """The policy: every task that rebuilds a library function refuses an answer that is (or just calls) it,
    the same way for each (ch02.q1's causal_mask, ch05.q1's generate), its reason naming the call. Using an
    earlier chapter's library function as a helper is neither refused nor reported."""
    notebook(tmp_path / "library.ipynb", HEADER, "causal_mask = nexttoken.causal_mask\n",
             "def mask_scores(scores):\n    return scores.masked_fill(~nexttoken.causal_mask(scores.shape[-1]), "
             "float('-inf'))\n", GOOD[2])
    notebook(tmp_path / "library5.ipynb", "import nexttoken\nfrom nexttoken.exercises import ch05\n",
             "def generation_step(model, input_ids):\n    return nexttoken.generate(model, input_ids, 1)\n",
             chapter="ch05")
    result = subprocess.run([sys.executable, "-m", "nexttoken.grade", "--count-practice", "--out", "grades.csv", "--",
                             "library.ipynb", "library5.ipynb"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    rows = {(r["submission"], r["task"]): r for r in read_rows(tmp_path / "grades.csv")}
    key = ("library5.ipynb", "ch05.q1")
    assert rows[key]["points"] == "0" and "do not call nexttoken.generate here" in rows[key]["reason"], rows[key]
    q1 = rows[("library.ipynb", "ch02.q1")]
    assert q1["points"] == "0" and "do not call nexttoken.causal_mask here" in q1["reason"], q1
    for key in (("library.ipynb", "ch02.q2"), ("library.ipynb", "ch02.q3")):
        assert rows[key]["status"] == "passed" and rows[key]["library_calls"] == ""


def test_without_bubblewrap_the_grader_refuses_unless_told_no_sandbox(tmp_path):
    notebook(tmp_path / "good.ipynb", HEADER, *GOOD)
    bare = tmp_path / "bin"
    bare.mkdir()
    env = {**os.environ, "PATH": str(bare)}  # no bwrap on PATH
    cmd = [sys.executable, "-m", "nexttoken.grade", "--count-practice", "--out", "grades.csv", "--", "good.ipynb"]
    refused = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert refused.returncode == 2 and not (tmp_path / "grades.csv").exists()
    assert "apt-get install bubblewrap" in refused.stderr and "--no-sandbox" in refused.stderr
    trusted = subprocess.run(cmd[:6] + ["--no-sandbox", "--trusted-as-root"] + cmd[6:], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300, env=env)
    assert trusted.returncode == 0, trusted.stderr
    assert "trusted" in trusted.stderr
    assert [r["status"] for r in read_rows(tmp_path / "grades.csv")] == ["passed"] * len(CH02)


def test_limits_too_small_for_torch_are_refused_up_front(tmp_path):
    notebook(tmp_path / "good.ipynb", HEADER, *GOOD)
    result = subprocess.run([sys.executable, "-m", "nexttoken.grade",
                             "--count-practice", "--out", "grades.csv", "--memory", "200",
                             "--", "good.ipynb"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "--memory" in result.stderr
    assert not (tmp_path / "grades.csv").exists()


@pytest.mark.parametrize("args, named", [(["--jobs", "0"], "--jobs"), (["--timeout", "x"], "--timeout"),
                                         (["--memory", "-5"], "--memory")])
def test_bad_options_are_named(tmp_path, args, named):
    result = subprocess.run([sys.executable, "-m", "nexttoken.grade",
                             "--count-practice", "--out", str(tmp_path / "g.csv"), *args,
                             "x.ipynb"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and f"argument {named}" in result.stderr


# --- recorded outputs are data, checked before judging ----------------------------------------------------

@pytest.mark.parametrize("outcomes, why", [
    ([["ok", {"dtype": "float32", "shape": [1 << 21, 1 << 21], "data": ""}]], "elements"),
    ([["ok", {"dtype": "float32", "shape": [4], "data": "AAAA"}]], "does not match"),
    ([["ok", {"dtype": "object", "shape": [1], "data": "AA=="}]], "dtype"),
    ([["ok", {"dtype": "float32", "shape": [1], "data": "AAAAAA==", "strides": [0]}]], "type dict"),
    ([["ok", json.loads("[" * 10 + "]" * 10)]], "deeper"),
    ([["ok", [0] * 100]], "longer"),
    ([["ok", "x" * 5000]], "longer than"),
    ([["ok", 1]] * 9, "1 to 3 outcomes"),
    ([["o" * 50, 1]], "pair"),
    ({"ok": 1}, "list of"),
])
def test_recorded_outputs_outside_the_limits_are_rejected(outcomes, why):
    with pytest.raises(wire.Rejected, match=why):
        wire.decode_outcomes(outcomes, 3)


def test_a_recorded_tensor_is_rebuilt_exactly():
    import base64

    import torch

    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    record = {"dtype": "float32", "shape": [2, 3], "data": base64.b64encode(t.numpy().tobytes()).decode()}
    [(kind, value)] = wire.decode_outcomes([["ok", record]], 3)
    assert kind == "ok" and torch.equal(value, t) and value.is_contiguous()


def test_an_exception_in_evaluate_is_that_tasks_grader_error():
    class Broken:
        name = "q1"

        def cases(self):
            return [(1,)]

        def evaluate(self, outcomes, cases=None, hidden=None):
            raise RuntimeError("boom")

    assert judge.judge(Broken(), {"outcomes": [["ok", 1]]}) == ("grader_error", "judging q1 failed: "
                                                                                         "RuntimeError: boom")


def test_resume_never_gives_one_students_rows_to_another(tmp_path):
    """An interrupted run graded the attacker "'-bob.ipynb" only; --resume must still grade "-bob.ipynb"
    (once, "-bob.ipynb" and "'-bob.ipynb" were the same text in the CSV)."""
    notebook(tmp_path / "'-bob.ipynb", HEADER, *STUBS)
    notebook(tmp_path / "-bob.ipynb", HEADER, *GOOD)
    first = run_grader(tmp_path, ["'-bob.ipynb"])
    assert first.returncode == 0, first.stderr[-2000:]
    again = run_grader(tmp_path, ["'-bob.ipynb", "-bob.ipynb"], "--resume")
    assert again.returncode == 0, again.stderr[-2000:]
    grades = by_submission(read_rows(tmp_path / "grades.csv"))
    assert {t: (r["status"], int(r["points"])) for t, r in grades["-bob.ipynb"].items()} == FULL
    assert all(r["points"] == "0" for r in grades["'-bob.ipynb"].values())


def test_the_graders_memory_stays_small_whatever_a_submission_holds(tmp_path):
    """A 20 MB notebook of 7 million empty dicts (3.7 GB in the grader when nbformat parsed it there), and
    one just under the grader's count of values (parsed in its sandbox): the grader's own peak stays small."""
    (tmp_path / "dicts.ipynb").write_text('{"cells": [], "metadata": {"junk": [' + ",".join(["{}"] * 7_000_000)
                                          + ']}, "nbformat": 4, "nbformat_minor": 5}')
    (tmp_path / "fewer.ipynb").write_text('{"cells": [], "metadata": {"nexttoken": {"chapter": "ch02"}, "junk": ['
                                          + ",".join(["{}"] * 900_000) + ']}, "nbformat": 4, "nbformat_minor": 5}')
    proc = subprocess.Popen([sys.executable, "-m", "nexttoken.grade",
                             "--count-practice", "--out", "grades.csv", "--max-size", "21",
                             *LIMITS, "--", "dicts.ipynb", "fewer.ipynb"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak, deadline = 0, time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
            peak = max(peak, int(status.split("VmHWM:")[1].split()[0]) * 1024)
        except (OSError, IndexError):
            pass
        time.sleep(0.05)
    assert proc.wait(timeout=60) == 0
    assert peak < 1024 ** 3, f"{peak / 1024 ** 2:.0f} MB"
    grades = by_submission(read_rows(tmp_path / "grades.csv"))
    [row] = grades["dicts.ipynb"].values()
    assert row["status"] == "too_complex"
    assert {r["status"] for r in grades["fewer.ipynb"].values()} == {"missing"}  # read, in the sandbox
