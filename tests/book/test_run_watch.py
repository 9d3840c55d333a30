"""tests/run_watch.py, the plugin every test run loads: a run whose tests leave a process (a kernel
not shut down, a server) or a file in the session's temporary folder behind fails, naming it (a file with
the test after which it appeared); what is left is killed and removed; a slow test's start and end are
printed as they happen, through a pipe too.

Each case runs a small pytest session of its own, in a fresh folder, with the plugin loaded as
scripts/test.sh loads it (``-p tests.run_watch``, from the repository root).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]

LEAVES_A_PROCESS = '''
import subprocess, sys

def test_starts_a_kernel_like_child_and_forgets_it():
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)  # LEFT-BEHIND-MARKER"])
'''

LEAVES_A_FILE = '''
import tempfile

def test_writes_a_temporary_file_and_keeps_it():
    tempfile.NamedTemporaryFile(prefix="left-behind-", delete=False).close()
'''

LEAVES_A_GRADES_CSV = '''
from pathlib import Path

def test_grades_a_class_into_the_repository():
    Path("{name}").write_text("submission,task,points\\n")  # the cwd: the repository, as scripts/test.sh runs
'''

CLEAN = '''
import subprocess, sys, tempfile
import pytest

@pytest.mark.slow
def test_waits_for_its_child_and_removes_its_file():
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    with tempfile.NamedTemporaryFile():
        pass
'''


def session(tmp_path: Path, source: str) -> subprocess.CompletedProcess:
    """pytest on SOURCE, a test file in a fresh folder, with the plugin; its output read through a pipe."""
    test = tmp_path / "test_case.py"
    test.write_text(source)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    env = {k: v for k, v in os.environ.items() if k != "NEXTTOKEN_TEST_SESSION"}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # nbval, xdist, ...: seconds of imports this needs none of
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.run_watch", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), "-c", str(tmp_path / "pytest.ini"), str(test)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def markers_alive() -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if "LEFT-BEHIND-MARKER" in " ".join(process.info["cmdline"] or []):
            found.append(process)
    return found


def test_a_process_left_behind_fails_the_run_is_named_and_killed(tmp_path):
    done = session(tmp_path, LEAVES_A_PROCESS)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]  # the test itself passed: the run fails for what it left
    assert "1 passed" in out and "the tests left these behind" in out, out[-3000:]
    assert re.search(r"process \d+ still running: .*LEFT-BEHIND-MARKER", out), out[-3000:]
    assert not markers_alive()


def test_a_temporary_file_left_behind_fails_the_run_is_named_with_its_test_and_removed(tmp_path):
    done = session(tmp_path, LEAVES_A_FILE)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]  # the test itself passed: the run fails for what it left
    assert re.search(r"left in the session's temporary folder: left-behind-\S+ "
                     r"\(after test_case\.py::test_writes_a_temporary_file_and_keeps_it\)", out), out[-3000:]
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("nexttoken-test-session-*/left-behind-*"))


def test_a_clean_run_passes_and_shows_its_slow_test_start_and_end(tmp_path):
    done = session(tmp_path, CLEAN)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "left these behind" not in out
    start = re.search(r"\[\s*\d+:\d\d\] start   test_case\.py::test_waits_for_its_child_and_removes_its_file", out)
    end = re.search(r"\[\s*\d+:\d\d\] passed  test_case\.py::test_waits_for_its_child_and_removes_its_file "
                    r"\(\d+ s, \d+ s of CPU\)", out)
    assert start and end and start.start() < end.start(), out[-3000:]


def test_a_file_git_ignores_left_in_the_repository_fails_the_run_and_is_named(tmp_path):
    """A grades CSV written into the repository (git ignores /grades*.csv, so git status alone shows nothing);
    the build folders and caches tests make on purpose are not counted (``MADE_ON_PURPOSE``)."""
    name = f"grades-left-behind-{os.getpid()}.csv"
    try:
        done = session(tmp_path, LEAVES_A_GRADES_CSV.format(name=name))
        assert (ROOT / name).exists()  # git ignores it
    finally:
        (ROOT / name).unlink(missing_ok=True)
    assert done.returncode != 0, done.stdout
    assert f"left in the repository (ignored by git): {name}" in done.stdout, done.stdout
