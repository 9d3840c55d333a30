"""The set-up scripts say what they change: system packages installed only when missing, after a dry run
is shown; kernels started quietly (no "running over TCP without encryption" warning)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def fake_system(tmp_path: Path, installed: set[str], uid: int = 0) -> dict:
    """A PATH whose dpkg-query, apt-get and id are stand-ins: dpkg-query knows ``installed``, apt-get
    logs every call to apt.log (a dry run prints an Inst line per package, and an upgrade of "libdep")."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "apt.log"
    scripts = {
        "dpkg-query": f"""
            for p in "$@"; do :; done
            case " {' '.join(sorted(installed))} " in *" $p "*) printf 'install ok installed';; *) exit 1;; esac""",
        "apt-get": f"""
            echo "apt-get $*" >> {log}
            if [ "$1" = install ] && [ "$2" = -s ]; then
              for p in "$@"; do case "$p" in -*|install) ;; *) echo "Inst $p (2.0 Debian:13 [amd64])";; esac; done
              echo "Inst libdep [1.0] (1.1 Debian:13 [amd64])"
            fi""",
        "id": f"echo {uid}",
    }
    for name, body in scripts.items():
        (bin_ / name).write_text("#!/bin/sh\n" + textwrap.dedent(body).strip() + "\n")
        (bin_ / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}"}


def install_missing(tmp_path, env, *packages):
    command = f'source scripts/apt_missing.sh && install_missing "the test" {" ".join(packages)}'
    return subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_only_missing_packages_are_installed_after_saying_what_changes(tmp_path):
    env = fake_system(tmp_path, installed={"chromium", "fonts-liberation"})
    result = install_missing(tmp_path, env, "chromium", "chromium-driver", "fonts-liberation")
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "apt.log").read_text().splitlines()
    installs = [c for c in calls if c.startswith("apt-get install") and " -s " not in c]
    assert installs == ["apt-get install -y -q --no-install-recommends --no-upgrade chromium-driver"]
    out = result.stdout
    assert "not installed: chromium-driver\n" in out
    assert "  install chromium-driver 2.0" in out
    assert "  upgrade libdep 1.0 -> 1.1 (installed, a dependency of the new packages)" in out
    assert calls.index(next(c for c in calls if " -s " in c)) < calls.index(installs[0])  # dry run first


def test_nothing_runs_when_everything_is_installed(tmp_path):
    env = fake_system(tmp_path, installed={"bubblewrap", "util-linux"})
    result = install_missing(tmp_path, env, "bubblewrap", "util-linux")
    assert result.returncode == 0 and result.stdout == result.stderr == ""
    assert not (tmp_path / "apt.log").exists()


def test_without_root_it_says_what_to_run_and_changes_nothing(tmp_path):
    env = fake_system(tmp_path, installed=set(), uid=1000)
    result = install_missing(tmp_path, env, "bubblewrap")
    assert result.returncode == 0 and "missing Debian packages for the test: bubblewrap" in result.stderr
    assert not (tmp_path / "apt.log").exists()


def test_kernels_start_without_the_tcp_encryption_warning(tmp_path):
    """setup.sh puts scripts/ipython_kernel_config.py where IPython reads it for .venv's kernels; a kernel
    started as nbclient (and nbval, Jupyter Book) starts it writes nothing to its stderr."""
    installed = Path(sys.prefix) / "etc" / "ipython" / "ipython_kernel_config.py"
    assert installed.read_text() == (ROOT / "scripts" / "ipython_kernel_config.py").read_text(), \
        "run bash scripts/setup.sh"
    probe = ("import nbformat\nfrom nbclient import NotebookClient\n"
             "nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('import warnings; 6 * 7')])\n"
             "NotebookClient(nb, kernel_name='python3').execute()\n"
             "print(nb.cells[0].outputs[0]['data']['text/plain'])\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "42", result.stderr
    assert "without encryption" not in result.stderr and "WARNING" not in result.stderr, result.stderr


def test_setup_sandbox_says_in_one_line_that_the_sandbox_is_ready(tmp_path):
    """With every package installed, scripts/setup_sandbox.sh changes nothing and prints one line saying the
    sandbox is ready (its tools found), nothing else."""
    import shutil

    if not all(shutil.which(t) for t in ("bwrap", "prlimit", "setpriv")) or subprocess.run(
            ["/usr/bin/python3", "-c", "import seccomp"], capture_output=True).returncode:
        pytest.skip("needs the sandbox's tools installed: bash scripts/setup_sandbox.sh as root")
    env = fake_system(tmp_path, installed={"bubblewrap", "util-linux", "python3-seccomp"})
    result = subprocess.run(["bash", "scripts/setup_sandbox.sh"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert not (tmp_path / "apt.log").exists()
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("the grader's sandbox is ready: bubblewrap "), result.stdout
