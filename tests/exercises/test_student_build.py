"""The student build (scripts/build_student_package.py): a wheel without the held-out cases, the
solutions and the explanations' rubrics, which still runs every exercise notebook, says the solutions are
withheld, and cannot be used to grade with --held-out."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
from helpers import ROOT

pytestmark = pytest.mark.slow  # builds a wheel and runs seven notebooks: about a minute

WITHHELD = {"nexttoken/exercises/held_out.py", "nexttoken/exercises/solutions.json",
            "nexttoken/exercises/explanations.json"}  # the rubrics and model answers of the explanations
KERNEL = "student-build"
WHEEL_URL = "https://lms.example.edu/course/nexttoken-0.1.0+student-py3-none-any.whl"  # where a class gets it


@pytest.fixture(scope="module")
def student(tmp_path_factory) -> tuple[Path, Path]:
    """(the student wheel, the folder it is unpacked in: an import path holding that nexttoken only)."""
    tmp = tmp_path_factory.mktemp("student")
    done = subprocess.run([sys.executable, "scripts/build_student_package.py", "--out-dir", str(tmp / "dist"),
                           "--wheel-url", WHEEL_URL], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (wheel,) = (tmp / "dist").glob("nexttoken-*.whl")
    site = tmp / "site"
    zipfile.ZipFile(wheel).extractall(site)
    return wheel, site


def test_the_wheel_lacks_exactly_the_withheld_files(student):
    wheel, _ = student
    assert "+student" in wheel.name
    names = set(zipfile.ZipFile(wheel).namelist())
    package = ROOT / "lib" / "nexttoken"
    full = {f"nexttoken/{p.relative_to(package).as_posix()}" for p in package.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    assert WITHHELD <= full  # they exist in the full package
    assert not WITHHELD & names, sorted(WITHHELD & names)
    assert full - WITHHELD <= names, sorted(full - WITHHELD - names)
    assert (ROOT / "dist").exists() is False or not any((ROOT / "dist").glob("*student*"))  # the repo stays clean


def test_the_class_notebooks_install_the_student_wheel_not_the_repository(student):
    """The student build's notebooks install the student wheel from where the instructor published it, not
    the full package from the course's repository (held-out inputs and solutions included), which a class
    whose instructor published them would hand out."""
    wheel, _ = student
    folder = wheel.parent / "exercises"
    written = sorted(folder.glob("*.ipynb"))
    assert [p.name for p in written] == [p.name for p in sorted((ROOT / "exercises").glob("ch0*.ipynb"))]
    for path in written:
        text = path.read_text(encoding="utf-8")
        assert "git+" not in text and text.count(f'\\"nexttoken @ {WHEEL_URL}\\"') == 1, path.name
        original = nbformat.read(ROOT / "exercises" / path.name, as_version=4)
        mine = nbformat.read(path, as_version=4)
        changed = [i for i, (a, b) in enumerate(zip(original.cells, mine.cells)) if a != b]
        assert len(original.cells) == len(mine.cells) and len(changed) == 1, (path.name, changed)
    refused = subprocess.run([sys.executable, "scripts/build_student_package.py", "--wheel-url",
                              "git+https://example.org/repo"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "the https address of the student wheel" in refused.stderr


def student_env(site: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = str(site)  # before site-packages, so it shadows the repository's editable install
    return env


def test_every_exercise_notebook_runs_with_it_and_solutions_are_withheld(student, tmp_path):
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    _, site = student
    kernels = tmp_path / "kernels"
    (kernels / KERNEL).mkdir(parents=True)
    (kernels / KERNEL / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "student build", "language": "python"}))
    notebooks = sorted((ROOT / "exercises").glob("ch0*.ipynb"))
    assert len(notebooks) == 7
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        chapter = path.stem
        nb.cells.append(nbformat.v4.new_code_cell(
            f"import json, nexttoken\nfrom nexttoken.exercises import {chapter}\n{chapter}.q1.solution()\n"
            "print(json.dumps({'file': nexttoken.__file__}))"))
        work = tmp_path / chapter
        work.mkdir()
        km = KernelManager(kernel_name=KERNEL, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
        try:  # cleanup_kc: nbclient shuts down only a kernel of its own manager, unless told (failed or not)
            NotebookClient(nb, km=km, timeout=300, kernel_name=KERNEL,
                           resources={"metadata": {"path": str(work)}}).execute(env=student_env(site), cleanup_kc=True)
        finally:  # also where the kernel failed to start, or nbclient stopped before its own clean-up
            if km.has_kernel:
                km.shutdown_kernel(now=True)
        outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
        assert not [o for o in outputs if o.output_type == "error"], path.name
        last = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
        assert "the solutions are withheld in this build" in last and "def " not in last, last
        where = json.loads(last.strip().splitlines()[-1])
        assert Path(where["file"]).resolve().is_relative_to(site.resolve()), where


def test_the_grader_refuses_held_out_grading_with_it(student, tmp_path):
    _, site = student
    notebook = tmp_path / "s.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), notebook)
    done = subprocess.run([sys.executable, "-m", "nexttoken.grade",
                           "--count-practice", "--held-out", "--out", str(tmp_path / "g.csv"),
                           str(notebook)], env=student_env(site), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "student build" in done.stderr and "--held-out" in done.stderr, done.stderr
    assert not (tmp_path / "g.csv").exists()
