#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu, Python 3.10 or newer).
# It installs the course's torch pin (the CPU wheel) and the nexttoken wheel that came in this zip, then
# deletes the package's solutions file (the solution notebooks' code, which grading never reads) and makes
# the exercises' judging files root's alone, and deletes the wheel from /autograder/source (it holds the
# same files) and makes that folder root's alone: where bubblewrap cannot run here, the container is the
# submission's only wall, so nothing may be in it to read.
set -euo pipefail
cd "$(dirname "$0")"
apt-get update -q
apt-get install -y -q python3-pip
python3 -m pip install -q "torch==TORCH_VERSION" --index-url https://download.pytorch.org/whl/cpu
python3 -m pip install -q "$(ls nexttoken-*.whl)[grade]"
python3 - <<'PY'
import importlib.util, pathlib
[package] = importlib.util.find_spec("nexttoken").submodule_search_locations
exercises = pathlib.Path(package) / "exercises"
(exercises / "solutions.json").unlink(missing_ok=True)
# The judging half (tasks, references, held-out inputs): root's alone, so that where the submission runs
# without bubblewrap (--no-sandbox, as a user id of its own) it cannot read them either; the grader is root.
from nexttoken.grading.sandbox import JUDGING_FILES
for name in JUDGING_FILES:
    if (exercises / name).is_file():
        (exercises / name).chmod(0o600)
if (exercises / "__pycache__").is_dir():
    (exercises / "__pycache__").chmod(0o700)
PY
# The wheel holds every judging file (solutions, held-out inputs, the explanations' rubrics): installed,
# it is not needed any more. The folder keeps run_autograder, reap.py and chapter, for root alone.
rm -f nexttoken-*.whl
chmod 0700 .
