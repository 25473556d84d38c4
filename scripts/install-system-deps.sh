#!/usr/bin/env bash
# Debian packages the project's commands use, installed with apt when missing (as root; otherwise
# one sentence naming them, and exit 1 before anything else runs).
#
#   bash scripts/install-system-deps.sh demo   what the first command (scripts/demo.sh) needs: a Python
#                                               that makes virtual environments (python3-venv), and the
#                                               Noto Color Emoji font and Unicode's emoji-test.txt that
#                                               `vsparta scenes --kind objects` draws from
#   bash scripts/install-system-deps.sh         (or `test`) those, and what the tests drive for real:
#                                               headless Chromium for the browser tests (Playwright's own
#                                               browser download cannot be used here; they drive
#                                               /usr/bin/chromium), the Docker Engine (docker.io;
#                                               scripts/docker.sh starts it) with docker-compose for the
#                                               compose tests, and debootstrap for the local base images
#                                               (no container registry is reachable here), iptables
#                                               (the partition tests and the soak cut a local cluster's
#                                               nodes apart; bench/fault_net.py) and faketime (a load
#                                               whose clock is hours off, test_elastic_leases.py)
set -euo pipefail
what=${1:-test}
case "$what" in
demo | test) ;;
*)
  echo "usage: bash scripts/install-system-deps.sh [demo|test]" >&2
  exit 2
  ;;
esac
missing=()
# The demo's: Debian's python3 makes a venv only with ensurepip, which python3-venv brings.
command -v python3 >/dev/null 2>&1 || missing+=(python3)
python3 -c 'import ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
[ -f /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf ] || missing+=(fonts-noto-color-emoji)
[ -f /usr/share/unicode/emoji/emoji-test.txt ] || missing+=(unicode-data)
if [ "$what" = test ]; then
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1 || missing+=(docker-compose)
  command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  command -v iptables >/dev/null 2>&1 || missing+=(iptables)
  command -v faketime >/dev/null 2>&1 || missing+=(faketime)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "missing system packages: ${missing[*]}; install them with 'sudo apt-get install -y ${missing[*]}' (Debian, Ubuntu), then run this again" >&2
  exit 1
fi
echo "installing the system packages ${missing[*]} (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/dev/null
