#!/usr/bin/env bash
# Debian packages the tests drive for real: headless Chromium for the browser tests (Playwright's
# own browser download cannot be used here; it drives /usr/bin/chromium), the Docker Engine
# (docker.io; scripts/docker.sh starts it) with docker-compose for the compose stack tests,
# debootstrap to build the local base images (no container registry is reachable here), the
# Noto Color Emoji font and Unicode's emoji-test.txt that `vsparta scenes --kind objects` draws from,
# iptables (the partition tests and the soak cut a local cluster's nodes apart; bench/fault_net.py)
# and faketime (a load whose clock is hours off, tests/termindex/test_elastic_leases.py).
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1 || missing+=(docker-compose)
[ -f /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf ] || missing+=(fonts-noto-color-emoji)
[ -f /usr/share/unicode/emoji/emoji-test.txt ] || missing+=(unicode-data)
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
command -v faketime >/dev/null 2>&1 || missing+=(faketime)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing system packages: ${missing[*]}; install them with 'sudo apt-get install -y ${missing[*]}'" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/dev/null
