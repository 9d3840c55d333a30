#!/usr/bin/env bash
# The test suite.
#
#   bash scripts/test.sh          everything (CI runs this): the library's tests (among them the website
#                                 opened in headless Chromium, and a chapter run from the installed package
#                                 in a fresh environment), then every notebook executed and compared with
#                                 its stored outputs (nbval, strict), then the chapters again on the CPU's
#                                 baseline kernels (ATEN_CPU_CAPABILITY=default), as a machine without
#                                 AVX2/AVX-512 would run them.
#   bash scripts/test.sh --fast   the tests a contributor runs on every change (ruff's lint, then pytest -m
#                                 "not slow": the library, the exercise checks, the grader's units): no website, no fresh
#                                 environment, no nbval, no benchmark, no real compile, on every core
#                                 (pytest-xdist). It prints its time.
#
# Other arguments go to pytest (for the library's tests).
set -euo pipefail
cd "$(dirname "$0")/.."
fast=false
if [ "${1:-}" = "--fast" ]; then
  fast=true
  shift
fi
bash scripts/setup.sh
bash scripts/setup_sandbox.sh  # bubblewrap, for the grader's sandbox (tests/test_grade*.py)
export PYTHONHASHSEED=0 TQDM_DISABLE=1
# Lint first, in both tiers (pyproject.toml's [tool.ruff]: unused imports, undefined names, lines up to 120).
.venv/bin/ruff check lib tests scripts bench _ext
if $fast; then
  start=$SECONDS
  status=0
  # -n auto: one worker per core (pytest-xdist); the tests of this tier share no files or ports. Each
  # worker's torch on one thread: two workers with two threads each on 2 cores spin against each other
  # (measured from a clean clone: 687 s, against 66 s with one thread each).
  OMP_NUM_THREADS=1 .venv/bin/python -m pytest tests -m "not slow" -n auto "$@" || status=$?
  echo "fast tests: $((SECONDS - start)) s (the set-up above not counted)"
  exit $status
fi
bash scripts/setup_browser.sh  # Debian's chromium + chromedriver, for tests/book/test_website.py
.venv/bin/python -m pytest tests "$@"
notebooks=$(find chapters exercises solutions appendix model_card.ipynb model_card_smollm2.ipynb -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' 2>/dev/null | sort || true)
.venv/bin/python -m pytest --nbval $notebooks
# The second pass re-runs only the notebooks whose stored outputs print numbers computed by the model
# (chapters, appendix, model card). The exercise and solution notebooks store only the lines of their
# checks (pass/fail, compared with tolerances), which the CPU's kernels do not change.
kernel_dependent=$(find chapters appendix model_card.ipynb model_card_smollm2.ipynb -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' 2>/dev/null | sort || true)
ATEN_CPU_CAPABILITY=default .venv/bin/python -m pytest --nbval $kernel_dependent
