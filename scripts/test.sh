#!/usr/bin/env bash
# The README's test command: set up everything from scratch, start the real services the tests
# need (Elasticsearch, headless Chromium, a Docker Engine for the compose stack tests), run ruff
# and the whole test suite (fast and slow).
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
# A Docker Engine for tests/docker (marker `compose`): started when none answers and stopped again
# (scripts/docker.sh stops only a dockerd it started); the local base images build on first use.
started_docker=0
if [ "$(id -u)" = 0 ] && ! docker version >/dev/null 2>&1; then
  bash scripts/docker.sh start
  started_docker=1
fi
stop_services() {
  [ "$started_es" = 1 ] && bash scripts/elasticsearch.sh stop || true
  [ "$started_docker" = 1 ] && bash scripts/docker.sh stop || true
}
trap stop_services EXIT

"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
"$VENV/bin/python" -m pytest "$@"
