#!/usr/bin/env bash
# Install what the batch grader's sandbox needs, each package only when it is not installed (saying first
# what apt-get will change): bubblewrap (bwrap), util-linux's prlimit and
# setpriv, and libseccomp's Python binding (Debian's python3-seccomp), with which the grader builds the
# seccomp filter it hands to bwrap. The grader's own venv does not import it: it runs Debian's
# /usr/bin/python3 once per batch to export the filter as BPF (nexttoken.grading.sandbox.seccomp_filter).
# Needs root (CI runs as root); elsewhere it says what to do, and the grader's sandbox tests skip
# (python -m nexttoken.grade refuses to run without bwrap unless given --no-sandbox).
set -euo pipefail
source "$(dirname "$0")/apt_missing.sh"
# util-linux (prlimit, setpriv) is essential on Debian: listed so that a system without it is told
install_missing "the grader's sandbox" bubblewrap util-linux python3-seccomp
# One line when all of it is there (install_missing has said already what is not).
if command -v bwrap >/dev/null && command -v prlimit >/dev/null && command -v setpriv >/dev/null \
    && /usr/bin/python3 -c "import seccomp" 2>/dev/null; then
  echo "the grader's sandbox is ready: $(bwrap --version), prlimit, setpriv, and python3-seccomp for /usr/bin/python3"
else
  echo "the grader's sandbox is not ready: bwrap, prlimit, setpriv or /usr/bin/python3's seccomp module is missing" >&2
fi
