#!/usr/bin/env bash
# The README's test command: set up everything from scratch, start the real services the tests
# need (Elasticsearch, headless Chromium), run ruff and the whole test suite (fast and slow).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not slow"`.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/venv.sh
ensure_venv "all"

bash scripts/install-system-deps.sh

started_es=0
if ! bash scripts/elasticsearch.sh status >/dev/null 2>&1; then
  bash scripts/elasticsearch.sh start
  started_es=1
fi
stop_es() { [ "$started_es" = 1 ] && bash scripts/elasticsearch.sh stop || true; }
trap stop_es EXIT

"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
"$VENV/bin/python" -m pytest "$@"
