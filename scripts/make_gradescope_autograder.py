"""Write the autograder.zip Gradescope takes: setup.sh, run_autograder and the nexttoken wheel.

    .venv/bin/python scripts/make_gradescope_autograder.py [--out autograder.zip]

setup.sh installs the course's CPU torch pin and the wheel (with its ``grade`` extra); run_autograder
grades the submission's notebooks with ``python -m nexttoken.grade --no-sandbox`` (the container holds
that submission only) and writes Gradescope's results.json. Both are in scripts/gradescope/.
"""

import argparse
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("autograder.zip"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_wheel(Path(tmp))
        setup = (TEMPLATES / "setup.sh").read_text().replace("TORCH_VERSION", torch_pin())
        with zipfile.ZipFile(args.out, "w", zipfile.ZIP_DEFLATED) as z:
            for name, text in (("setup.sh", setup), ("run_autograder", (TEMPLATES / "run_autograder").read_text())):
                info = zipfile.ZipInfo(name)
                info.external_attr = 0o755 << 16  # executable, as Gradescope runs them
                z.writestr(info, text)
            z.write(wheel, wheel.name)  # at the zip's root: Gradescope unpacks it into /autograder/source
    print(f"wrote {args.out}: setup.sh (torch=={torch_pin()}), run_autograder, {wheel.name}")
    return args.out


if __name__ == "__main__":
    main()
