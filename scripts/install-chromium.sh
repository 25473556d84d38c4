#!/usr/bin/env bash
# Headless Chromium for the browser test, from Debian's packages (Playwright's own browser
# download cannot reach its host here; playwright drives /usr/bin/chromium instead).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "chromium is missing: run 'sudo apt-get install -y chromium' (browser tests need it)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium >/dev/null
