#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu, Python 3.10 or newer).
# It installs the course's torch pin (the CPU wheel) and the nexttoken wheel that came in this zip, then
# deletes the package's solutions file (the solution notebooks' code, which grading never reads), makes
# the installed package root's alone (a submission imports only a copy of what a sandbox shows), and deletes the
# wheel from /autograder/source (it holds the same files) and makes that folder root's alone: where
# bubblewrap cannot run here, the container is the submission's only wall, so nothing may be in it to read.
set -euo pipefail
cd "$(dirname "$0")"
apt-get update -q
apt-get install -y -q python3-pip
python3 -m pip install -q "torch==TORCH_VERSION" --index-url https://download.pytorch.org/whl/cpu
python3 -m pip install -q "$(ls nexttoken-*.whl)[grade]"
python3 - <<'PY'
from nexttoken.grading.sandbox.policy import package_folder
package = package_folder()
(package / "exercises" / "solutions.json").unlink(missing_ok=True)
# The installed package, root's alone: where the submission runs without bubblewrap (--no-sandbox, as a user
# id of its own) it imports a copy of what a sandbox shows (the allow-list, the stand-in for the exercises and,
# for the tasks that forbid it, a generate.py without generate), and cannot read the package itself: not the
# exercises' held-out inputs and references, not the grader, not the library's generate. In a sandbox the
# allow-list is bound from the package's files as before. The grader refuses where it could read it.
package.chmod(0o700)
PY
# The wheel holds every judging file (solutions, held-out inputs, the explanations' rubrics): installed,
# it is not needed any more. The folder keeps run_autograder, reap.py and chapter, for root alone.
rm -f nexttoken-*.whl
chmod 0700 .
