"""Build the student wheel: the nexttoken package without what only the grader may know; and the class's
exercise notebooks, whose Colab cell installs that wheel.

    .venv/bin/python scripts/build_student_package.py [--out-dir dist]
    .venv/bin/python scripts/build_student_package.py --wheel-url https://HOST/PATH/nexttoken-0.1.0+student-py3-none-any.whl

A class that is graded gets this wheel instead of the full package. With ``--wheel-url`` (where the
instructor publishes the wheel: the course's LMS, a release page) it also writes the notebooks of
``exercises/`` into ``OUT_DIR/exercises/``, each one's first cell, on Colab, installing the wheel from that
address instead of the full package from the course's repository (``nexttoken @ git+...``, which holds the
held-out inputs and the solutions). Those are the notebooks to hand out. The wheel leaves out:

- ``nexttoken/exercises/held_out.py``: the held-out test inputs ``python -m nexttoken.grade --held-out``
  judges every task on, besides the visible ones each ``qN.check`` runs;
- ``nexttoken/exercises/solutions.json``: the solution notebooks' code, which ``qN.solution()`` prints
  (in the student build it says the solutions are withheld);
- ``nexttoken/exercises/explanations.json``: each chapter's explanation question with its rubric and
  model answer, which the grader exports for the instructor to mark (the question itself is in the
  exercise notebook).

This list is not the grader's sandbox's (``nexttoken.grading.sandbox.policy.SHOWN``, what a sandbox shows of the
package: the lesson's library and the recorder, never the exercises): a student's wheel keeps the exercises,
which ``qN.check`` needs, and lacks only what would give away the answers or the held-out inputs.
Everything else is the same package, so every exercise notebook runs with it
(tests/exercises/test_student_build.py). The wheel's version carries the local label ``+student``,
so ``pip show nexttoken`` tells the two apart. The script checks the wheel's file list before it
reports success.
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WITHHELD = ("nexttoken/exercises/held_out.py", "nexttoken/exercises/solutions.json",
            "nexttoken/exercises/explanations.json")


def student_sources(folder: Path) -> None:
    """A copy of the package's sources in ``folder``, without the withheld files, versioned +student."""
    shutil.copy2(ROOT / "README.md", folder / "README.md")
    pyproject = (ROOT / "pyproject.toml").read_text()
    pyproject, found = re.subn(r'^version = "([^"+]+)"$', r'version = "\1+student"', pyproject, flags=re.M)
    if found != 1:
        raise SystemExit('pyproject.toml has no line `version = "X"` to label +student')
    (folder / "pyproject.toml").write_text(pyproject)
    shutil.copytree(ROOT / "lib", folder / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in WITHHELD:
        (folder / "lib" / name).unlink()


def build(out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        sources = Path(tmp) / "src"
        sources.mkdir()
        student_sources(sources)
        # no build isolation: the build uses this environment's setuptools, so it needs no download
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                        "--wheel-dir", tmp, str(sources)], check=True)
        [wheel] = Path(tmp).glob("nexttoken-*+student-*.whl")
        names = set(zipfile.ZipFile(wheel).namelist())
        leaked = [name for name in WITHHELD if name in names]
        if leaked or "nexttoken/exercises/task.py" not in names:
            raise SystemExit(f"the student wheel is wrong: it holds {leaked} or lacks the exercises")
        target = out_dir / wheel.name
        shutil.copy2(wheel, target)
    return target


# The requirement of an exercise notebook's install cell, as scripts/set_repository.py writes it: the full package.
FULL_PACKAGE = re.compile(r'"nexttoken @ git\+[^"]*"')


def student_notebooks(out_dir: Path, wheel_url: str) -> list[Path]:
    """The notebooks of exercises/ in ``out_dir``, each one's install cell installing the student wheel from
    ``wheel_url``; refuses a notebook whose install cell it cannot find (it would install the full package)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted((ROOT / "exercises").glob("ch0*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        found = 0
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                lines = cell["source"] if isinstance(cell["source"], list) else [cell["source"]]
                counts = [FULL_PACKAGE.subn(json.dumps(f"nexttoken @ {wheel_url}"), line) for line in lines]
                cell["source"] = [line for line, _ in counts]
                found += sum(n for _, n in counts)
        if found != 1:
            raise SystemExit(f"{path.name}: found {found} install cells of the full package, expected 1")
        target = out_dir / path.name
        target.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(target)
    return written


def wheel_address(text: str) -> str:
    if not re.fullmatch(r"https://[^\s\"']+\+student-[^\s\"'/]*\.whl", text):
        raise argparse.ArgumentTypeError(f"expected the https address of the student wheel (...+student-...whl), "
                                         f"got {text!r}")
    return text


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--out-dir", type=Path, default=Path("dist"), help="where the wheel goes (default dist/)")
    parser.add_argument("--wheel-url", type=wheel_address, help="where the class downloads the wheel: also "
                        "write OUT_DIR/exercises/, the exercise notebooks installing it on Colab")
    args = parser.parse_args(argv)
    wheel = build(args.out_dir)
    print(f"wrote {wheel}: nexttoken without {', '.join(WITHHELD)}")
    if args.wheel_url is not None:
        if not args.wheel_url.endswith("/" + wheel.name):
            print(f"note: --wheel-url names another file than {wheel.name}: upload this wheel there under that name")
        notebooks = student_notebooks(args.out_dir / "exercises", args.wheel_url)
        print(f"wrote {len(notebooks)} exercise notebooks to {args.out_dir / 'exercises'}, each installing "
              f"{args.wheel_url} on Colab")
    return wheel


if __name__ == "__main__":
    main()
