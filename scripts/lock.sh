#!/usr/bin/env bash
# Regenerate requirements.txt, the lock (every package pinned, with the sha256 of each of its files), from
# requirements.in (the direct dependencies). Run it after editing requirements.in; scripts/setup.sh then
# rebuilds .venv from the new lock.
#
# pip-tools' pip-compile resolves in a throwaway environment with --generate-hashes. requirements.in pins
# torch's CPU-only build (torch==VERSION+cpu, which only PyTorch's CPU index has, so the CUDA build and its
# NVIDIA libraries never enter the resolution): pip-compile finds it there when that index can be reached,
# or in a find-links folder of pip's configuration. scripts/torch_cpu.py then writes torch's entry as
# torch==VERSION with the hashes of every CPU-only wheel PyTorch's index lists for it (macOS's wheel
# too, which has no "+cpu" label), so the lock installs on Linux, macOS and Windows, and no CUDA build can.
# Existing pins are kept unless requirements.in asks otherwise (pip-compile's default); add --upgrade to
# move everything to the newest versions.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
"$PYTHON" -m venv "$tools"
"$tools/bin/python" -m pip install --quiet "pip-tools==7.6.2"
index=()
if "$PYTHON" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=20)' \
    https://download.pytorch.org/whl/cpu/torch/ 2>/dev/null; then
  index=(--pip-args "--extra-index-url https://download.pytorch.org/whl/cpu")
fi
cp requirements.txt "$tools/old.txt" 2>/dev/null || : > "$tools/old.txt"
# Extras are kept (markdown-it-py[linkify]==...): pip's hash-checking mode refuses a dependency's extra that the
# lock does not pin itself.
CUSTOM_COMPILE_COMMAND="bash scripts/lock.sh" "$tools/bin/pip-compile" --quiet --no-strip-extras \
  --generate-hashes --allow-unsafe --no-emit-index-url --no-emit-find-links "${index[@]}" \
  --output-file=requirements.txt "$@" requirements.in
"$PYTHON" scripts/torch_cpu.py relock requirements.txt "$tools/old.txt"
