#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu, Python 3.10 or newer).
# It installs the course's torch pin (the CPU wheel) and the nexttoken wheel that came in this zip, then
# deletes the package's solutions file (the solution notebooks' code, which grading never reads), makes
# what a sandbox never shows of the package (the exercises and the grader) root's alone, and deletes the
# wheel from /autograder/source (it holds the same files) and makes that folder root's alone: where
# bubblewrap cannot run here, the container is the submission's only wall, so nothing may be in it to read.
set -euo pipefail
cd "$(dirname "$0")"
apt-get update -q
apt-get install -y -q python3-pip
python3 -m pip install -q "torch==TORCH_VERSION" --index-url https://download.pytorch.org/whl/cpu
python3 -m pip install -q "$(ls nexttoken-*.whl)[grade]"
python3 - <<'PY'
from nexttoken.grading.sandbox.policy import hidden, package_folder
package = package_folder()
(package / "exercises" / "solutions.json").unlink(missing_ok=True)
# What a sandbox never shows of the package (the exercises and the grader: the sandbox's allow-list, read
# from the grader itself): root's alone, so that where the submission runs without bubblewrap
# (--no-sandbox, as a user id of its own) it cannot read them either; the grader is root.
for path in hidden(package):
    path.chmod(0o700 if path.is_dir() else 0o600)
PY
# The wheel holds every judging file (solutions, held-out inputs, the explanations' rubrics): installed,
# it is not needed any more. The folder keeps run_autograder, reap.py and chapter, for root alone.
rm -f nexttoken-*.whl
chmod 0700 .
