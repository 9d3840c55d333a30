#!/usr/bin/env bash
# The test suite.
#
#   bash scripts/test.sh          everything (CI runs this), in tiers, the quickest first, so that a broken
#                                 change fails early; each tier is announced with what it runs and ends with
#                                 its time, a summary of all of them comes last, and every tier runs even
#                                 when one before it failed (the exit status says whether all passed):
#                                   1. lint and the fast tests (as --fast);
#                                   2. the slow tests: the website in headless Chromium, the grader's sandbox,
#                                      a chapter from the installed package in a fresh environment, ...;
#                                   3. every notebook executed and compared with its stored outputs (nbval);
#                                   4. the chapters again on the CPU's baseline kernels (ATEN_CPU_CAPABILITY=
#                                      default), as a machine without AVX2/AVX-512 runs them;
#                                   5. the slowest: the lowest versions the package declares (tests/library/
#                                      test_lowest_versions.py: downloaded the first time, torch's CPU-only
#                                      build where PyTorch's CPU index can be reached, else 3.6 GB), the
#                                      benchmarks (--tiny) and the fast path's real compiles.
#                                 A slow test's or a notebook's start and end are printed as they happen,
#                                 through a pipe too (tests/run_watch.py), and the run fails if a test leaves
#                                 a process, a kernel or a file behind. Tiers 2 to 5 run two tests at a time,
#                                 torch on one thread in each (the grader's sandbox tests one at a time, beside
#                                 the others); NEXTTOKEN_TEST_WORKERS=1 runs one at a time.
#   bash scripts/test.sh --fast   the tests a contributor runs on every change (ruff's lint, then pytest -m
#                                 "not slow": the library, the exercise checks, the grader's units): no website, no fresh
#                                 environment, no nbval, no benchmark, no real compile, on every core
#                                 (pytest-xdist). It prints its time.
#
# Other arguments go to pytest (the fast tier's run, and the slow tests' run).
set -euo pipefail
cd "$(dirname "$0")/.."
fast=false
if [ "${1:-}" = "--fast" ]; then
  fast=true
  shift
fi
export NEXTTOKEN_TEST_START=${NEXTTOKEN_TEST_START:-$(date +%s)} PYTHONHASHSEED=0 TQDM_DISABLE=1 PYTHONUNBUFFERED=1
if ! $fast; then
  cat <<'EOF'
The full test run (20 to 30 minutes on 2 cores, by machine), in 5 tiers, the slowest last. What it may download and
install first:
  - .venv/ and node_modules/ (scripts/setup.sh), if missing or out of date: about 600 MB from PyPI, PyTorch's
    CPU index and npm;
  - as root, Debian packages that are missing, with apt-get (each listed, with a dry run, before it installs):
    bubblewrap and python3-seccomp (the grader's sandbox), chromium, chromium-driver and two fonts (the website
    test); not as root, the tests that need them skip (and fail under CI=true);
  - in its last tier, the lowest versions the package declares, into _build/lowest-versions/ (once; then
    reused): torch 2.5.1's CPU-only build from PyTorch's CPU index where it can be reached (about 175 MB),
    else its CUDA build from PyPI with the NVIDIA libraries it needs to import (about 3.6 GB).
EOF
fi
bash scripts/setup.sh
bash scripts/setup_sandbox.sh  # bubblewrap, for the grader's sandbox (tests/grading)
pytest=(.venv/bin/python -m pytest)
# -n auto: one worker per core (pytest-xdist); the fast tests share no files or ports. Each worker's torch on
# one thread: two workers with two threads each on 2 cores spin against each other (measured from a clean
# clone: 687 s, against 66 s with one thread each). nbval's plugin is left out: no fast test runs a notebook
# under it, and importing it costs each process about half a second (measured: 0.7 s against pytest's 0.3 s).
fast_tests() { OMP_NUM_THREADS=1 "${pytest[@]}" tests -m "not slow" -n auto -p no:nbval "$@"; }
if $fast; then
  start=$SECONDS
  status=0
  # Lint first (pyproject.toml's [tool.ruff]: unused imports, undefined names, lines up to 120).
  .venv/bin/ruff check lib tests scripts bench _ext || status=$?
  [ $status -eq 0 ] && { fast_tests "$@" || status=$?; }
  echo "fast tests: $((SECONDS - start)) s (the set-up above not counted)"
  exit $status
fi
bash scripts/setup_browser.sh  # Debian's chromium + chromedriver, for tests/book/test_website.py

# The tiers: a name, then the command, quickest first.
notebooks=$(find chapters exercises solutions appendix model_card.ipynb model_card_smollm2.ipynb -name '*.ipynb' \
  -not -path '*/.ipynb_checkpoints/*' | sort)
# The baseline pass re-runs only the notebooks whose stored outputs print numbers computed by the model
# (chapters, appendix, model card). The exercise and solution notebooks store only the lines of their
# checks (pass/fail, compared with tolerances), which the CPU's kernels do not change.
kernel_dependent=$(find chapters appendix model_card.ipynb model_card_smollm2.ipynb -name '*.ipynb' \
  -not -path '*/.ipynb_checkpoints/*' | sort)
# Tier 5's tests, in the order pytest-xdist hands out their files (--no-loadscope-reorder; a worker gets the
# next file when two of its tests are left): the real compiles (about 4 minutes) to one worker, the lowest
# versions (2 minutes; its first two tests instant) to the other, then the GPU script on the CPU (1 minute)
# and the other benchmarks to whichever is nearer done. Measured from clean clones (2-core Intel Xeon): 302 s
# with the GPU script among the real compiles, one worker done 100 s before the other; 247 s in this order,
# the two done 4 s apart.
slowest=(tests/bench/test_bench_compiles.py tests/library/test_lowest_versions.py tests/bench/test_gpu_script.py
         tests/bench/test_bench.py tests/library/test_fast.py)
# Two at a time (NEXTTOKEN_TEST_WORKERS=2, the default), each torch on one thread: tier 2 as two sessions side
# by side, the tests that run the grader's sandbox one at a time in one (they look for processes of the
# sandbox's user ids, which a batch graded beside them would show) and the other slow tests in the other, each
# line marked with its session; nbval and tier 5 with pytest-xdist, a file's tests on one worker (their module
# fixtures made once). The stored outputs give the same lines with one thread as with two (tiers 3 and 4 check
# it). NEXTTOKEN_TEST_WORKERS=1: one test at a time, torch on its default threads. nbval's runs load
# tests/run_watch.py themselves (they do not read tests/conftest.py).
workers=${NEXTTOKEN_TEST_WORKERS:-2}
files=() nbval=(-p tests.run_watch --nbval)
if [ "$workers" != 1 ]; then
  files=(-n "$workers" --dist loadfile) nbval+=("${files[@]}")
  export OMP_NUM_THREADS=1
fi
slow_tests() { NEXTTOKEN_TEST_WATCH=all "${pytest[@]}" tests/grading tests "${slowest[@]/#/--ignore=}" "$@"; }
# The slow tests in two sessions at once: the sandbox's (with the few long tests marked sandbox_session, which
# start no sandbox, to even the two out) and the others, each line prefixed with its name; the tier's status
# is the first failing session's.
two_sessions() {
  local status_dir status=0
  status_dir=$(mktemp -d)
  { slow_tests -m "slow and (sandbox or sandbox_session)" "$@"; echo $? >"$status_dir/sandbox"; } 2>&1 |
    sed -u 's/^/sandbox | /' &
  { slow_tests -m "slow and not (sandbox or sandbox_session)" "$@"; echo $? >"$status_dir/others"; } 2>&1 |
    sed -u 's/^/others  | /'
  wait
  for session in sandbox others; do
    [ "$(cat "$status_dir/$session" 2>/dev/null || echo 1)" = 0 ] || status=1
  done
  rm -rf "$status_dir"
  return $status
}
tiers=(
  "lint (ruff) and the fast tests"
  "the slow tests: website, sandboxed grading, fresh environments"
  "every notebook against its stored outputs (nbval)"
  "the chapters on the CPU's baseline kernels (nbval, ATEN_CPU_CAPABILITY=default)"
  "the slowest: lowest declared versions (downloaded the first time), benchmarks, real compiles"
)
run_tier() {
  case $1 in
    1) .venv/bin/ruff check lib tests scripts bench _ext && fast_tests "${@:2}" ;;
    2) if [ "$workers" = 1 ]; then slow_tests -m slow "${@:2}"; else two_sessions "${@:2}"; fi ;;
    # shellcheck disable=SC2086
    3) "${pytest[@]}" "${nbval[@]}" $notebooks ;;
    # shellcheck disable=SC2086
    4) ATEN_CPU_CAPABILITY=default "${pytest[@]}" "${nbval[@]}" $kernel_dependent ;;
    5) NEXTTOKEN_TEST_WATCH=all "${pytest[@]}" "${slowest[@]}" -m slow "${files[@]}" --no-loadscope-reorder ;;
  esac
}
results=()
status=0
for i in "${!tiers[@]}"; do
  n=$((i + 1))
  echo
  echo "=== tier $n/${#tiers[@]}: ${tiers[$i]} (at $(( (SECONDS) / 60 )) min) ==="
  start=$SECONDS
  code=0
  run_tier "$n" "$@" || code=$?
  seconds=$((SECONDS - start))
  [ $code -eq 0 ] && verdict=passed || { verdict="FAILED (exit $code)"; status=1; }
  results+=("$(printf '  tier %d  %-8s %5d s  %s' "$n" "${verdict%% *}" "$seconds" "${tiers[$i]}")")
  echo "=== tier $n/${#tiers[@]}: $verdict in $seconds s ==="
done
echo
echo "=== the full run: $((SECONDS / 60)) min $((SECONDS % 60)) s, the set-up included ==="
printf '%s\n' "${results[@]}"
exit $status
