#!/usr/bin/env bash
# Install what the batch grader's sandbox needs, when missing: bubblewrap (bwrap), util-linux's prlimit and
# setpriv, and libseccomp's Python binding (Debian's python3-seccomp), with which the grader builds the
# seccomp filter it hands to bwrap. The grader's own venv does not import it: it runs Debian's
# /usr/bin/python3 once per batch to export the filter as BPF (nexttoken.grading.sandbox.seccomp_filter).
# Needs root (CI runs as root); elsewhere it says what to do, and the grader's sandbox tests skip
# (python -m nexttoken.grade refuses to run without bwrap unless given --no-sandbox).
set -euo pipefail
packages=(bubblewrap util-linux python3-seccomp)
if dpkg -s "${packages[@]}" >/dev/null 2>&1 && command -v bwrap prlimit setpriv >/dev/null; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  echo "installing ${packages[*]} (Debian packages) for the grader's sandbox"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${packages[@]}"
else
  echo "missing ${packages[*]} for the grader's sandbox: run 'sudo bash scripts/setup_sandbox.sh'" >&2
fi
