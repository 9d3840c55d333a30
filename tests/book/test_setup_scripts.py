"""The set-up scripts say what they change: system packages installed only when missing, after a dry run
is shown; kernels started quietly (no "running over TCP without encryption" warning)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import load_script

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


@pytest.mark.slow  # starts a kernel
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


# ---------------------------------------------------------------------------------------------------------
# the lock (requirements.txt) and torch's CPU-only build (scripts/torch_cpu.py)

def torch_cpu():

    module = load_script("scripts/torch_cpu.py")
    return module


def lock_entries() -> dict[str, str]:
    """name -> its whole entry (the requirement line and the indented lines under it) of requirements.txt."""
    import re

    text = (ROOT / "requirements.txt").read_text()
    entry = re.compile(r"^([A-Za-z0-9_.-]+)\S*.*?\n(?=\S|\Z)", re.M | re.S)  # a line and the indented ones after it
    return {m.group(1).lower(): m.group(0) for m in entry.finditer(text)}


def test_the_lock_pins_every_package_with_its_hashes():
    """A lock with hashes: every entry is name==version with at least one sha256; none is editable (pip
    refuses an editable install in hash-checking mode: setup.sh installs nexttoken by itself)."""
    entries = lock_entries()
    assert len(entries) > 100 and "torch" in entries and "setuptools" in entries
    for name, entry in entries.items():
        first = entry.splitlines()[0]
        assert "==" in first and not first.startswith("-"), first
        assert "--hash=sha256:" in entry, f"{name} has no hash in requirements.txt"


def test_the_lock_lists_only_torchs_cpu_wheels_and_no_gpu_package():
    """torch's entry pins the version without "+cpu" (so macOS's wheel matches too) and lists the CPU-only
    wheels' hashes; nothing of the CUDA build (NVIDIA's libraries, triton) is in the lock or in .venv."""
    from importlib import metadata

    entries = lock_entries()
    assert entries["torch"].startswith("torch==2.13.0 \\\n")
    assert not [n for n in entries if n.startswith(("nvidia-", "triton", "cuda-"))]
    assert metadata.version("torch").endswith("+cpu")  # the set-up installed the CPU build here
    installed = {d.metadata["Name"].lower() for d in metadata.distributions()}
    assert not [n for n in installed if n.startswith(("nvidia-", "triton", "cuda-"))]


def fake_index(folder: Path, wheels: dict[str, Path]) -> str:
    """A PEP 503 index in FOLDER holding WHEELS (file name -> the file), linked with their sha256 as
    PyTorch's index links them (the "+" quoted); its file: URL."""
    import hashlib
    import urllib.parse

    (folder / "torch").mkdir(parents=True)
    links = []
    for name, file in wheels.items():
        (folder / "torch" / name).symlink_to(file)
        digest = hashlib.sha256(file.read_bytes()).hexdigest()
        links.append(f'<a href="{urllib.parse.quote(name)}#sha256={digest}">{name}</a><br/>')
    (folder / "torch" / "index.html").write_text("<html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    return folder.as_uri()


def dry_run(tmp_path: Path, index: str, local: bool) -> tuple[subprocess.CompletedProcess, dict]:
    """scripts/torch_cpu.py install, as pip's --dry-run into an empty environment: (the run, pip's report).
    local: with pip's configuration (here, its find-links folder); else with none and no index but INDEX."""
    import json

    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    if local:
        env.update({k: v for k, v in os.environ.items() if k.startswith("PIP_")})
    else:
        env["PIP_CONFIG_FILE"] = os.devnull
    report = tmp_path / "report.json"
    env.update(TORCH_INDEX=index, PIP_DRY_RUN="1", PIP_IGNORE_INSTALLED="1", PIP_REPORT=str(report))
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "torch_cpu.py"), "install", sys.executable],
                          env=env, capture_output=True, text=True, timeout=300)
    return done, json.loads(report.read_text()) if report.exists() else {}


def local_cpu_wheel(tmp_path: Path) -> Path:
    """The CPU wheel pip finds without the network here (a find-links folder), or skip."""
    done, report = dry_run(tmp_path / "probe", (tmp_path / "no-index").as_uri(), local=True)
    (tmp_path / "probe").mkdir(exist_ok=True)
    if done.returncode != 0 or not report.get("install"):
        pytest.skip("pip finds no copy of torch's CPU wheel without the network here (no find-links folder)")
    url = report["install"][0]["download_info"]["url"]
    assert url.startswith("file:"), url
    from urllib.parse import unquote, urlparse

    return Path(unquote(urlparse(url).path))


@pytest.mark.slow  # pip reads the 190 MB wheel to check its hash, three times: about 15 s
def test_torch_installs_its_cpu_build_from_a_local_copy_else_the_cpu_index_and_no_other_build(tmp_path):
    """The set-up's torch step: a copy pip has without the network is taken as is (no download); without one,
    the wheel comes from PyTorch's CPU index (here a copy of it, TORCH_INDEX); a wheel of the same version
    that is not a CPU-only one (PyPI's CUDA build) is refused by its hash, wherever it is found."""
    (tmp_path / "probe").mkdir()
    wheel = local_cpu_wheel(tmp_path)
    done, report = dry_run(tmp_path / "probe", (tmp_path / "no-index").as_uri(), local=True)
    assert done.returncode == 0 and "downloading" not in done.stdout, done.stdout + done.stderr
    assert [p["metadata"]["version"] for p in report["install"]] == ["2.13.0+cpu"]

    index = fake_index(tmp_path / "index", {wheel.name: wheel})
    (tmp_path / "from-index").mkdir()
    done, report = dry_run(tmp_path / "from-index", index, local=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"downloading torch's CPU-only build (about 200 MB) from {index}" in done.stdout
    assert report["install"][0]["download_info"]["url"].startswith(index)

    cuda = tmp_path / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"  # a wheel of another build
    cuda.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: not the CPU wheel's bytes
    index = fake_index(tmp_path / "other", {cuda.name: cuda})
    (tmp_path / "other-build").mkdir()
    done, report = dry_run(tmp_path / "other-build", index, local=False)
    assert done.returncode != 0 and "do not match the hashes" in done.stderr.lower(), done.stderr[-2000:]
    assert not report.get("install")


def test_relock_takes_the_cpu_wheels_hashes_from_the_index_and_refuses_another_build(tmp_path, monkeypatch):
    """lock.sh's last step: torch's entry from pip-compile (torch==2.13.0+cpu, the one wheel it found) becomes
    torch==2.13.0 with the hashes of every CPU-only wheel the index lists (+cpu, and macOS's), not CUDA's;
    offline, the old lock's hashes for the same version are kept; a wheel that is none of them is refused."""
    lock = torch_cpu()
    cpu, mac, cuda, older = "1" * 64, "2" * 64, "3" * 64, "4" * 64
    page = (f'<a href="/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl#sha256={cpu}">x</a>\n'
            f'<a href="/whl/cpu/torch-2.13.0-cp311-none-macosx_11_0_arm64.whl#sha256={mac}">x</a>\n'
            f'<a href="/whl/cpu/torch-2.13.0%2Bcu128-cp311-cp311-manylinux_2_28_x86_64.whl#sha256={cuda}">x</a>\n'
            f'<a href="/whl/cpu/torch-2.12.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl#sha256={older}">x</a>\n')
    (tmp_path / "index" / "torch").mkdir(parents=True)
    (tmp_path / "index" / "torch" / "index.html").write_text(page)
    monkeypatch.setenv("TORCH_INDEX", (tmp_path / "index").as_uri())
    new = f"six==1.17.0 \\\n    --hash=sha256:{'5' * 64}\ntorch==2.13.0+cpu \\\n    --hash=sha256:{cpu}\n    # via\n" \
          f"    #   -r requirements.in\ntqdm==4.70.1 \\\n    --hash=sha256:{'6' * 64}\n"
    relocked = lock.relock(new, old="")
    assert f"torch==2.13.0 \\\n    --hash=sha256:{cpu} \\\n    --hash=sha256:{mac}\n    # via\n" in relocked
    assert relocked.startswith("six==1.17.0") and relocked.endswith(f"tqdm==4.70.1 \\\n    --hash=sha256:{'6' * 64}\n")

    monkeypatch.setenv("TORCH_INDEX", (tmp_path / "nowhere").as_uri())  # unreachable: the old lock's hashes
    assert lock.relock(new, old=relocked) == relocked
    with pytest.raises(SystemExit, match="cannot be reached"):
        lock.relock(new.replace("2.13.0+cpu", "2.14.0+cpu"), old=relocked)
    with pytest.raises(SystemExit, match="not one of"):
        lock.relock(new.replace(cpu, cuda), old=relocked)


@pytest.mark.slow  # about 15 s: trusts the notebooks, starts JupyterLab
def test_lab_sh_opens_jupyterlab_at_chapter_one(tmp_path):
    """bash scripts/lab.sh starts JupyterLab on the repository (its file browser at the root) and opens chapter 1:
    the page it sends the browser to (the open.html JupyterLab writes for it) is chapters/01_chain_rule.ipynb's."""
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    current = subprocess.run(["bash", "scripts/setup.sh", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert current.returncode == 0, current.stderr  # else lab.sh would build .venv anew under the running tests
    runtime = tmp_path / "runtime"
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime), "JUPYTER_DATA_DIR": str(tmp_path / "data"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "config")}  # trust's database, settings: none of the user's
    log = tmp_path / "lab.log"
    with open(log, "w") as printed:
        lab = subprocess.Popen(["bash", "scripts/lab.sh", "--no-browser", f"--port={port}",
                                "--ServerApp.ip=127.0.0.1"], cwd=ROOT, env=env, stdout=printed, stderr=printed)
    pages = {}
    try:
        for _ in range(120):
            pages = {p.name: p.read_text() for p in runtime.glob("*open.html")} if runtime.is_dir() else {}
            if (len(pages) == 2 and "?token=" in log.read_text()) or lab.poll() is not None:
                break
            time.sleep(1)
    finally:
        lab.terminate()
        lab.wait(timeout=60)
    opened = [name for name, html in pages.items() if "/lab/tree/chapters/01_chain_rule.ipynb" in html]
    assert opened, f"JupyterLab was not sent to chapter 1: {pages or 'no page written (did it start?)'}"
    # with --no-browser, the URL it prints (the one a learner copies) leads to chapter 1, not the Launcher
    assert f"http://127.0.0.1:{port}/lab/tree/chapters/01_chain_rule.ipynb?token=" in log.read_text()


@pytest.mark.slow  # about 8 s: imports Jupyter Book (Sphinx and its extensions)
def test_book_sh_drops_jupyter_books_file_banner_and_keeps_the_rest():
    """Jupyter Book ends a build with a banner that says to open index.html as a file (which breaks the live
    page); book.sh pipes the build through scripts/drop_book_banner.py, which drops that banner, its own
    (printed here by Jupyter Book's code), and passes everything else, a failed build's red box too."""
    import re

    probe = ("from pathlib import Path\nfrom jupyter_book.cli.main import builder_specific_actions\n"
             "from jupyter_book.utils import _message_box\n"
             "print('building [html]: 20 source files')\n_message_box('Building your book, returns a non-zero "
             "exit code (1). Look above for the cause.', color='red')\nprint('last line of sphinx')\n"
             "builder_specific_actions(0, 'html', Path('_build/html'), 'book', None, print)\n")
    book = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert book.returncode == 0 and "file://" in book.stdout, book.stderr  # the banner as Jupyter Book prints it
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "drop_book_banner.py")], input=book.stdout,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "file://" not in done.stdout and "Finished generating HTML" not in done.stdout
    kept = [line for line in done.stdout.splitlines() if line.strip()]
    assert kept[0] == "building [html]: 20 source files" and "returns a non-zero exit code (1)" in done.stdout
    borders = [line for line in kept if set(re.sub(r"\x1b\[[0-9;]*m", "", line).strip()) == {"="}]
    assert kept[-1] == "last line of sphinx" and len(borders) == 2  # the red box's two
    assert '| .venv/bin/python scripts/drop_book_banner.py' in (ROOT / "scripts" / "book.sh").read_text()
