#!/usr/bin/env bash
# Install what tests/book/test_website.py drives: Debian's chromium and chromium-driver, and fonts for its
# screenshots (Liberation for text, Noto Color Emoji for the exercises' check marks), each only when it is
# not installed (an installed chromium is left as it is), saying first what apt-get will change.
# Needs root (CI runs as root); elsewhere it says what to do and the website test skips (fails under CI=true).
set -euo pipefail
source "$(dirname "$0")/apt_missing.sh"
install_missing "the website test (tests/book/test_website.py)" chromium chromium-driver fonts-liberation fonts-noto-color-emoji
