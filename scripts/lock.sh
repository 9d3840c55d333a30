#!/usr/bin/env bash
# Regenerate requirements.txt (every package pinned) from requirements.in (the direct dependencies).
# Run it after editing requirements.in; scripts/setup.sh then rebuilds .venv from the new lock.
#
# pip-tools' pip-compile resolves with this machine's pip configuration, where torch 2.13.0 is the local
# CPU wheel (2.13.0+cpu): a lock made against PyPI's Linux torch would pin its multi-GB CUDA libraries.
# The lock then says torch==2.13.0, as requirements.in does, so that it also installs where no +cpu
# wheel exists (macOS; PyPI has none); on these machines pip still picks the local CPU wheel.
# Existing pins in requirements.txt are kept unless requirements.in asks otherwise (pip-compile's
# default); add --upgrade to move everything to the newest versions.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
"$PYTHON" -m venv "$tools"
"$tools/bin/python" -m pip install --quiet "pip-tools==7.6.2"
CUSTOM_COMPILE_COMMAND="bash scripts/lock.sh  # pip-compile --strip-extras --no-emit-index-url --no-emit-find-links requirements.in, then torch==2.13.0+cpu -> torch==2.13.0" "$tools/bin/pip-compile" --quiet --strip-extras \
  --no-emit-index-url --no-emit-find-links --output-file=requirements.txt "$@" requirements.in
sed -i 's/^torch==2\.13\.0+cpu$/torch==2.13.0/' requirements.txt
grep -qx 'torch==2.13.0' requirements.txt || { echo "requirements.txt does not pin torch==2.13.0" >&2; exit 1; }
