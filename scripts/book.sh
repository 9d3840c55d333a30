#!/usr/bin/env bash
# Build the course website into _build/html: every notebook is executed, and any warning fails the build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/jupyter-book build . -n -W --keep-going "$@"
echo "open _build/html/index.html"
