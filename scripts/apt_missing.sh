# Sourced by setup_browser.sh and setup_sandbox.sh:
#
#   install_missing "what needs them" PACKAGE...
#
# installs the Debian packages of the list that are not installed, and only those (an installed one is
# never named to apt-get, so it is not upgraded; --no-upgrade keeps it so), after saying which are missing
# and what apt-get will change: the packages it will install, and any installed package it would have to
# upgrade as a dependency (from a dry run, apt-get -s). Needs root and apt-get; without them it says what
# to run, and changes nothing.
install_missing() {
  local purpose=$1
  shift
  local missing=() package
  for package in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$package")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "missing Debian packages for $purpose: ${missing[*]}; run 'bash $0' as root (sudo bash $0 otherwise)" >&2
    return 0
  fi
  echo "$purpose needs Debian packages that are not installed: ${missing[*]}"
  apt-get update -qq
  local plan
  plan=$(apt-get install -s -q --no-install-recommends --no-upgrade "${missing[@]}" | grep -E '^(Inst|Remv) ' || true)
  echo "apt-get will make these changes (from a dry run):"
  echo "${plan:-  (none)}" | sed -E 's/^Inst ([^ ]+) \[([^]]+)\] \(([^ ]+).*/  upgrade \1 \2 -> \3 (installed, a dependency of the new packages)/; s/^Inst ([^ ]+) \(([^ ]+).*/  install \1 \2/; s/^Remv ([^ ]+).*/  remove \1/'
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends --no-upgrade "${missing[@]}"
}
