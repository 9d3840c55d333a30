"""Write the autograder.zip Gradescope takes: setup.sh, run_autograder, the assignment's chapter and the
nexttoken wheel.

    .venv/bin/python scripts/make_gradescope_autograder.py --chapter 5 [--out autograder.zip]

setup.sh installs the course's CPU torch pin and the wheel (with its ``grade`` extra) and deletes the
solutions file from the installed package; run_autograder grades the submission's notebooks for the
chapter the zip names (``chapter``: a notebook of another chapter gets 0), in bubblewrap's sandbox where
the container allows it, ends every process the submission started, and writes Gradescope's results.json
last. Both are in scripts/gradescope/.
"""

import argparse
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from nexttoken.grading.assignment import chapter_arg

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "scripts" / "gradescope"


def torch_pin() -> str:
    """The torch version requirements.txt pins (the course's one source for it)."""
    found = re.search(r"^torch==([^\s;]+)", (ROOT / "requirements.txt").read_text(), re.M)
    if not found:
        raise SystemExit("requirements.txt pins no torch==VERSION")
    return found.group(1)


def build_wheel(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(folder),
                    str(ROOT)], check=True)
    [wheel] = folder.glob("nexttoken-*.whl")
    return wheel


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("autograder.zip"))
    parser.add_argument("--chapter", type=chapter_arg, required=True,
                        help="the assignment's chapter (5 or ch05): run_autograder grades it alone")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_wheel(Path(tmp))
        setup = (TEMPLATES / "setup.sh").read_text().replace("TORCH_VERSION", torch_pin())
        with zipfile.ZipFile(args.out, "w", zipfile.ZIP_DEFLATED) as z:
            for name, text in (("setup.sh", setup), ("run_autograder", (TEMPLATES / "run_autograder").read_text()),
                               ("chapter", f"{args.chapter}\n"), ("reap.py", (TEMPLATES / "reap.py").read_text())):
                info = zipfile.ZipInfo(name)
                info.external_attr = 0o755 << 16  # executable, as Gradescope runs them
                z.writestr(info, text)
            z.write(wheel, wheel.name)  # at the zip's root: Gradescope unpacks it into /autograder/source
    print(f"wrote {args.out}: setup.sh (torch=={torch_pin()}), run_autograder, chapter ({args.chapter}), reap.py,"
          f" {wheel.name}")
    return args.out


if __name__ == "__main__":
    main()
