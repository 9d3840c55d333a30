#!/usr/bin/env bash
# Open the notebooks locally in JupyterLab, with the course's environment (.venv) as the kernel.
# Extra arguments go to JupyterLab, e.g. `bash scripts/lab.sh --no-browser --port 8889`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
root=()
if [ "$(id -u)" -eq 0 ]; then
  # JupyterLab refuses to start as root unless told; containers and course VMs often run as root.
  echo "running as root: starting JupyterLab with --allow-root"
  root=(--allow-root)
fi
exec .venv/bin/jupyter lab "${root[@]}" "$@"
