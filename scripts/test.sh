#!/usr/bin/env bash
# The whole test suite: the library's tests (among them the website opened in headless Chromium, and
# a chapter run from the installed package in a fresh environment), then every notebook executed and
# compared with its stored outputs (nbval, strict), then the notebooks again on the CPU's baseline
# kernels (ATEN_CPU_CAPABILITY=default), as a machine without AVX2/AVX-512 would run them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup_browser.sh  # Debian's chromium + chromedriver, for tests/test_website.py
bash scripts/setup_sandbox.sh  # bubblewrap, for the grader's sandbox (tests/test_grade*.py)
export PYTHONHASHSEED=0 TQDM_DISABLE=1
.venv/bin/python -m pytest tests "$@"
notebooks=$(find chapters exercises solutions model_card.ipynb -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' 2>/dev/null | sort || true)
if [ -n "$notebooks" ]; then
  .venv/bin/python -m pytest --nbval $notebooks
  ATEN_CPU_CAPABILITY=default .venv/bin/python -m pytest --nbval $notebooks
fi
