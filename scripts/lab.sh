#!/usr/bin/env bash
# Open the notebooks locally in JupyterLab, with the course's environment (.venv) as the kernel, at chapter 1
# (the file browser shows the whole repository). Extra arguments go to JupyterLab, e.g.
# `bash scripts/lab.sh --no-browser --port 8889`; a notebook or folder named there opens instead of chapter 1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
root=()
if [ "$(id -u)" -eq 0 ]; then
  # JupyterLab refuses to start as root unless told; containers and course VMs often run as root.
  echo "running as root: starting JupyterLab with --allow-root"
  root=(--allow-root)
fi
# Trust the course's own notebooks as they are here (Jupyter's documented `jupyter trust`, which records
# their signatures in your Jupyter data folder): JupyterLab then shows their stored outputs as stored and
# no "not trusted" notice. A notebook you change and save stays trusted; one changed elsewhere is not.
notebooks=$(find chapters exercises solutions appendix -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*'; ls model_card*.ipynb)
echo "trusting the course's $(echo "$notebooks" | wc -l) notebooks (jupyter trust)"
# shellcheck disable=SC2086
.venv/bin/jupyter trust $notebooks >/dev/null
# JupyterLab opens the first path among its arguments: the caller's, else chapter 1; its file browser shows the
# repository (given a file, JupyterLab would otherwise show that file's folder only). LabApp.default_url is the
# page the URL it prints leads to (with --no-browser, the one a learner copies): chapter 1 too, not the Launcher.
exec .venv/bin/jupyter lab "${root[@]}" --ServerApp.root_dir="$PWD" \
  --LabApp.default_url=/lab/tree/chapters/01_chain_rule.ipynb "$@" chapters/01_chain_rule.ipynb
