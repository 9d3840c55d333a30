"""The Gradescope autograder against a hostile submission, in a layout like Gradescope's: the
zip names its chapter (a notebook of another chapter gets 0, two notebooks never add up), a daemon the
submission starts neither outlives run_autograder nor rewrites results.json, and the package's solutions
file is not readable by the submission."""

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path

import pytest

from nexttoken.exercises import chapter
from submissions import CH02_GOOD, HEADER, notebook

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("bwrap") is None and os.environ.get("CI", "").lower() != "true",
                                 reason="bubblewrap is not installed: run 'sudo bash scripts/setup_sandbox.sh'")]
MARK = f"gradescope-daemon-{uuid.uuid4().hex[:10]}"


def daemon(results: Path) -> str:
    """A cell that, when its def runs, starts a detached process (its own session, its parent gone) that
    waits for the grader to finish and then rewrites results.json, for a minute."""
    script = (f"import time, json\n# {MARK}\ntime.sleep(2)\nend = time.time() + 60\nwhile time.time() < end:\n"
              f"    try:\n        open({str(results / 'results.json')!r}, 'w').write(json.dumps({{'score': 999}}))\n"
              "    except OSError:\n        pass\n    time.sleep(0.2)\n")
    return ("import subprocess as _sp, sys as _sys\n"
            f"def _start(x=_sp.Popen([_sys.executable, '-c', {script!r}, {MARK!r}], start_new_session=True,\n"
            "                        stdin=_sp.DEVNULL, stdout=_sp.DEVNULL, stderr=_sp.DEVNULL)):\n    return x\n")


# changed_positions reads the package's solutions file: any text of it fails the task with the text as
# its reason (which results.json would show); an empty or unreadable file leaves the right answer.
LEAK = ("def changed_positions(T, j):\n    import nexttoken, pathlib\n"
        "    path = pathlib.Path(nexttoken.__file__).parent / 'exercises' / 'solutions.json'\n"
        "    try:\n        text = path.read_text()\n    except OSError:\n        text = ''\n"
        "    if text:\n        raise ValueError('leaked: ' + text[:300])\n    return torch.arange(T) >= j\n")


def survivors() -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if MARK.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gradescope")
    subprocess.run([sys.executable, "scripts/make_gradescope_autograder.py", "--chapter", "2", "--out",
                    str(tmp / "ag.zip")], cwd=ROOT, check=True, capture_output=True, timeout=300)
    with zipfile.ZipFile(tmp / "ag.zip") as z:
        assert z.read("chapter").decode() == "ch02\n"
        z.extractall(tmp / "source")
    return tmp / "source" / "run_autograder"


def run(run_autograder: Path, folder: Path, *notebooks: tuple[str, Path], **env: str) -> tuple[dict, str]:
    (folder / "submission").mkdir(parents=True)
    for name, path in notebooks:
        shutil.copy(path, folder / "submission" / name)
    done = subprocess.run(["bash", str(run_autograder)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "AUTOGRADER": str(folder), "PYTHON": sys.executable, **env})
    return json.loads((folder / "results" / "results.json").read_text()), done.stderr + f"\nexit {done.returncode}"


def test_a_daemon_neither_outlives_the_autograder_nor_rewrites_results_and_the_solutions_stay_hidden(
        autograder, tmp_path):
    assert (ROOT / "lib" / "nexttoken" / "exercises" / "solutions.json").read_text()  # there is one to read
    attacker = notebook(tmp_path / "attacker.ipynb", HEADER, daemon(tmp_path / "gs" / "results"),
                        *list(CH02_GOOD.values())[:4], LEAK)
    results, log = run(autograder, tmp_path / "gs", ("mine.ipynb", attacker),
                       ("ch01.ipynb", ROOT / "solutions" / "ch01.ipynb"))
    assert survivors() == [], "a process of the submission outlived run_autograder"
    time.sleep(3)  # the daemon would have woken by now
    after = json.loads((tmp_path / "gs" / "results" / "results.json").read_text())
    core = len(chapter("ch02").CORE)  # what the grade counts: the core task (not 999, nor the ch01 notebook's)
    assert after == results and results["score"] == core, (results, log)
    graded = [t for t in results["tests"] if t["visibility"] == "visible"]
    assert [t["status"] for t in graded] == ["passed"] * 5  # q5 read no solutions
    assert all(t["name"].startswith("ch02.") for t in graded)
    # The explanation's answer is kept for the instructor: a test of 0 points the student never sees.
    [explained] = [t for t in results["tests"] if t["visibility"] == "hidden"]
    assert explained["name"] == "ch02 explanation (marked by your instructor)" and explained["max_score"] == 0
    assert "the learner's answer, as written" in explained["output"] and "rubric (" in explained["output"]
    assert "leaked" not in json.dumps(results) and "ch01.ipynb" in results["output"]  # named, not counted
    assert oct((tmp_path / "gs" / "results").stat().st_mode & 0o777) == "0o755"


def test_without_bubblewrap_a_submission_never_runs_as_root(autograder, tmp_path):
    """The path of a container where bubblewrap cannot run (--no-sandbox, as root). Each submission would
    run as a user id of its own; this machine's Python is under /root, which that id cannot open. The
    grader refuses (rather than run the submission as root, whose daemon would rewrite results.json), says
    what the image must provide, and nothing of the submission runs."""
    attacker = notebook(tmp_path / "attacker.ipynb", HEADER, daemon(tmp_path / "gs" / "results"),
                        *CH02_GOOD.values())
    results, log = run(autograder, tmp_path / "gs", ("mine.ipynb", attacker), NEXTTOKEN_AUTOGRADER_NO_BWRAP="1")
    assert "--no-sandbox" in log, log
    if "cannot start" not in log:
        pytest.skip("a sandbox user id can start this Python here: the refusal is not reached")
    assert "a submission never runs as root" in log and "Python that every user can run" in log, log
    assert results["score"] == 0 and "The grader failed" in results["output"], results
    time.sleep(3)  # a daemon would have woken by now
    assert survivors() == [], "the submission ran"
    assert json.loads((tmp_path / "gs" / "results" / "results.json").read_text()) == results


def test_setup_leaves_no_judging_file_in_the_autograders_source_folder(autograder, tmp_path):
    """setup.sh, its installs stubbed (no apt-get, no pip here): the wheel, which holds every judging file,
    is deleted from /autograder/source after installing, and the folder is root's alone (0700)."""
    source = tmp_path / "source"
    shutil.copytree(autograder.parent, source)
    assert list(source.glob("nexttoken-*.whl"))
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name in ("apt-get", "python3"):
        (stubs / name).write_text("#!/bin/sh\ncat >/dev/null 2>&1 || true\nexit 0\n")
        (stubs / name).chmod(0o755)
    subprocess.run(["bash", str(source / "setup.sh")], check=True, capture_output=True, timeout=60,
                   env={**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}"})
    assert not list(source.glob("*.whl")), sorted(p.name for p in source.iterdir())
    assert oct(source.stat().st_mode & 0o777) == "0o700"
    assert (source / "run_autograder").is_file() and (source / "reap.py").is_file()


def test_a_notebook_of_another_chapter_gets_0_of_the_chapters_points(autograder, tmp_path):
    results, log = run(autograder, tmp_path / "gs", ("mine.ipynb", ROOT / "solutions" / "ch05.ipynb"))
    assert results["score"] == 0, (results, log)
    assert "wrong_chapter" in json.dumps(results) and "ch02" in json.dumps(results)


def test_an_autograder_without_its_chapter_refuses(autograder, tmp_path):
    source = tmp_path / "source"
    shutil.copytree(autograder.parent, source)
    (source / "chapter").unlink()
    results, log = run(source / "run_autograder", tmp_path / "gs", ("mine.ipynb", ROOT / "solutions" / "ch02.ipynb"))
    assert results["score"] == 0 and "--chapter" in results["output"] and log.endswith("exit 1")


def test_the_subreaper_ends_a_detached_daemon_with_no_cgroup_or_namespace_to_help():
    """reap.py alone (what run_autograder runs the grader under): a command that leaves a daemon in a
    session of its own, its parent gone (so it would be init's), exits; reap.py returns its status only
    once the daemon is dead. Here no cgroup or PID namespace ends it: the subreaper does."""
    script = (f"import os, subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', "
              f"{MARK!r}], start_new_session=True)\nif os.fork() == 0:\n    os.setsid()\n"
              f"    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(300)', {MARK!r}])\n"
              "sys.exit(3)\n")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gradescope" / "reap.py"), sys.executable, "-c",
                           script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr  # the command's own status
    assert survivors() == []
