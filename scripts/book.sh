#!/usr/bin/env bash
# Build the course website into _build/html from the notebooks' stored outputs (scripts/test.sh proves them
# fresh); any warning fails the build. The live page needs the site served over HTTP, not opened as a file.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/jupyter-book build . -n -W --keep-going "$@"
echo "built: serve it with  python3 -m http.server -d _build/html  and open http://localhost:8000"
