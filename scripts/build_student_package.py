"""Build the student wheel: the nexttoken package without what only the grader may know.

    .venv/bin/python scripts/build_student_package.py [--out-dir dist]

A class that is graded gets this wheel (its notebooks' first cell installs it, or the instructor's
environment does) instead of the full package. It leaves out:

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


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--out-dir", type=Path, default=Path("dist"), help="where the wheel goes (default dist/)")
    args = parser.parse_args(argv)
    wheel = build(args.out_dir)
    print(f"wrote {wheel}: nexttoken without {', '.join(WITHHELD)}")
    return wheel


if __name__ == "__main__":
    main()
