#!/usr/bin/env bash
# Install what tests/test_website.py drives: Debian's chromium and chromium-driver, and fonts for its
# screenshots (Liberation for text, Noto Color Emoji for the exercises' check marks), when missing.
# Needs root (CI runs as root); elsewhere it says what to do and the website test skips (fails under CI=true).
set -euo pipefail
packages=(chromium chromium-driver fonts-liberation fonts-noto-color-emoji)
if dpkg -s "${packages[@]}" >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  echo "installing ${packages[*]} (Debian packages) for the website test"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${packages[@]}"
else
  echo "missing Debian packages for tests/test_website.py: run 'sudo bash scripts/setup_browser.sh'" >&2
fi
