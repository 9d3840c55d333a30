#!/usr/bin/env bash
# Open the notebooks locally in JupyterLab, with the course's environment (.venv) as the kernel.
# Extra arguments go to JupyterLab, e.g. `bash scripts/lab.sh --no-browser --port 8889`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/jupyter lab "$@"
