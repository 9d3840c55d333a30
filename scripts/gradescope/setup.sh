#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu, Python 3.10 or newer).
# It installs the course's torch pin (the CPU wheel) and the nexttoken wheel that came in this zip, then
# deletes the package's solutions file (the solution notebooks' code, which grading never reads): where
# bubblewrap cannot run here, the container is the submission's only wall, so nothing may be in it to read.
set -euo pipefail
cd "$(dirname "$0")"
apt-get update -q
apt-get install -y -q python3-pip
python3 -m pip install -q "torch==TORCH_VERSION" --index-url https://download.pytorch.org/whl/cpu
python3 -m pip install -q "$(ls nexttoken-*.whl)[grade]"
python3 - <<'PY'
import importlib.util, pathlib
[package] = importlib.util.find_spec("nexttoken").submodule_search_locations
(pathlib.Path(package) / "exercises" / "solutions.json").unlink(missing_ok=True)
PY
