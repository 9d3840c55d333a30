#!/usr/bin/env bash
# Build the course website into _build/html from the notebooks' stored outputs (scripts/test.sh proves them
# fresh); any warning fails the build. The live page needs the site served over HTTP, not opened as a file:
# Jupyter Book's closing banner, which says to open index.html as a file, is dropped from its output
# (scripts/drop_book_banner.py), and the last line here says how to read the site.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/jupyter-book build . -n -W --keep-going "$@" | .venv/bin/python scripts/drop_book_banner.py
# The Colab and GitHub buttons need the repository's real address (scripts/set_repository.py sets it).
.venv/bin/python - <<'PY'
import sys, yaml
sys.path.insert(0, "scripts")
from set_repository import PLACEHOLDER
if yaml.safe_load(open("_config.yml"))["repository"]["url"] == PLACEHOLDER:
    print(f"note: repository.url in _config.yml is still the placeholder {PLACEHOLDER}, so the site has no "
          "Colab or GitHub buttons: set the real address with .venv/bin/python scripts/set_repository.py "
          "https://github.com/OWNER/REPO")
PY
echo "built. To read it, serve it over HTTP (opened as a file, its live page cannot load its model):" \
     "python3 -m http.server -d _build/html, then open http://localhost:8000"
