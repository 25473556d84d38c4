#!/usr/bin/env bash
# The README's test command: set up everything from scratch, start the real services the tests
# need (Elasticsearch 7.17, OpenSearch 2.19 and 3.x, headless Chromium, a Docker Engine for the
# compose stack tests), run ruff and the whole test suite (fast and slow). Services this script
# starts, it stops; running ones are reused.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not slow"`.
set -euo pipefail
cd "$(dirname "$0")/.."

# A run from nothing needs ~20 GB: the virtual environment (~7 GB, torch's CUDA build from PyPI) and
# pip's unpacking, the Docker images (~9 GB the first time, ~1.6 GB a rebuild; superseded builds
# are pruned), the tests' temporary files. Say so before pip fails with "No space left on device".
free_gb=$(df -Pk . | awk 'NR == 2 { print int($4 / 1048576) }')
if [ "$free_gb" -lt 20 ]; then
  echo "[test.sh] warning: $free_gb GB free here; a run from nothing needs about 20 GB" >&2
fi

source scripts/venv.sh
ensure_venv "all"

bash scripts/install-system-deps.sh

# One node per engine line, on the ports tests/conftest.py expects (OPENSEARCH_LINES there).
NODES=(
  "scripts/elasticsearch.sh"
  "scripts/opensearch.sh --version 2 --base-port 9250"
  "scripts/opensearch.sh --version 3 --base-port 9251"
)
started=()
# node COMMAND "SCRIPT FLAGS...": the script with COMMAND first, then the node's flags.
node() {
  local script flags
  read -r script flags <<<"$2"
  # shellcheck disable=SC2086 # flags are words
  bash "$script" "$1" $flags
}
stop_nodes() {
  local n
  for n in ${started[@]+"${started[@]}"}; do node stop "$n" || true; done
}
trap stop_nodes EXIT
for n in "${NODES[@]}"; do
  if ! node status "$n" >/dev/null 2>&1; then
    node start "$n"
    started+=("$n")
  fi
done
# A Docker Engine for tests/docker (marker `compose`): started when none answers and stopped again
# (scripts/docker.sh stops only a dockerd it started); the local base images build on first use.
started_docker=0
if [ "$(id -u)" = 0 ] && ! docker version >/dev/null 2>&1; then
  bash scripts/docker.sh start
  started_docker=1
fi
clusters_pid=
rest_pid=
stop_services() {
  # Stopped early (SIGTERM, Ctrl-C): stop the pytest processes still running and wait while they
  # tear down (tests/signal_teardown.py: fault clusters' nodes and netfilter chains, compose
  # stacks); what a SIGKILL leaves, the next run's fault_cluster fixture removes.
  local p
  for p in $rest_pid $clusters_pid; do kill "$p" 2>/dev/null || true; done
  for p in $rest_pid $clusters_pid; do wait "$p" 2>/dev/null || true; done
  [ -n "${work:-}" ] && rm -rf "$work"
  stop_nodes
  [ "$started_docker" = 1 ] && bash scripts/docker.sh stop || true
}
trap stop_services EXIT

"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
PYTEST=("$VENV/bin/python" -m pytest)
if [ "$#" -gt 0 ]; then
  "${PYTEST[@]}" --durations=20 "$@"  # the slowest tests, to keep CI well under its limit
  exit
fi
# The whole suite: the tests on local fault clusters (marker cluster_faults, ~20 min that mostly
# wait for the engines to notice a fault) run in a process of their own beside the rest, whose
# CPU-heavy steps (training, image builds) run at a lower priority so the clusters' nodes keep
# their timing; the clusters' report is printed after the rest's. No shared state between them:
# the clusters have their own nodes, addresses and netfilter chains; each run its own temp dir.
work=$(mktemp -d)
"${PYTEST[@]}" -m cluster_faults --durations=10 -p no:cacheprovider --basetemp="$work/tmp" \
  >"$work/clusters.log" 2>&1 &
clusters_pid=$!
rest=0
nice -n 10 "${PYTEST[@]}" -m "not cluster_faults" --durations=20 &
rest_pid=$!  # in the background, so that a SIGTERM to this script reaches the trap at once
wait "$rest_pid" || rest=$?
rest_pid=
clusters=0
wait "$clusters_pid" || clusters=$?
clusters_pid=
echo "======== the tests on local fault clusters (-m cluster_faults), run beside the above ========"
cat "$work/clusters.log"
rm -rf "$work"
echo "[test.sh] pytest exit status: $rest for the rest, $clusters for the cluster tests"
[ "$rest" = 0 ] && [ "$clusters" = 0 ]
