#!/usr/bin/env bash
# The README's first command: on a fresh machine, install the system packages its steps use (as
# root; otherwise it names them and stops, before the Python packages), install, generate the
# scene data set, train a small VisualSparta model on CPU, index the scenes into the embedded engine
# and serve the API and web page on http://127.0.0.1:8000 (Ctrl-C stops it). Extra arguments go to
# `vsparta demo`.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-system-deps.sh demo

source scripts/venv.sh
ensure_venv "model,service"

# Threads waiting for work sleep instead of spinning: where other jobs share the cores, spinning
# OpenMP threads made each training step ~7x slower (README, "Two commands").
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
exec "$VENV/bin/vsparta" demo "$@"
