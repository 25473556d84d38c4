#!/usr/bin/env bash
# A real single-node Elasticsearch for tests, CI and users without Docker (docs/architecture.md section 4).
#
#   bash scripts/elasticsearch.sh start|stop|status|logs [N]|restart
#
# Elastic publishes no Debian/PyPI package, but Maven Central holds its own artifacts: the 7.17
# integ-test-zip (server + transport module) and the mapper-extras jar (rank_feature/rank_features),
# which this script installs as a module. Both are fetched with Maven's own client and cached.
#
# Environment (all optional):
#   VSPARTA_ES_PORT      HTTP port on 127.0.0.1 (default 9200)
#   VSPARTA_ES_HOME      work dir: unpacked distribution, config, data, logs, pid file
#                        (default <repo>/.es; /var/tmp/vsparta-elasticsearch when the node's user
#                        cannot reach the repo, e.g. a checkout under /root)
#   VSPARTA_CACHE        download cache (default ~/.cache/vsparta/elasticsearch)
#   VSPARTA_ES_VERSION   7.17.29 (default)
#   VSPARTA_ES_HEAP      JVM heap, e.g. 512m (default) -> -Xms/-Xmx
#   ES_JAVA_OPTS         extra JVM options (appended)
#   VSPARTA_ES_USER      user that runs the node when started as root (default vsparta-es)
#   VSPARTA_ES_TIMEOUT   seconds to wait for green (default 180)
#   ES_JAVA_HOME         JDK to use (default: Debian's OpenJDK 17)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PORT=${VSPARTA_ES_PORT:-9200}
VERSION=${VSPARTA_ES_VERSION:-7.17.29}
HEAP=${VSPARTA_ES_HEAP:-512m}
TIMEOUT=${VSPARTA_ES_TIMEOUT:-180}
CACHE=${VSPARTA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vsparta/elasticsearch}
ES_USER=${VSPARTA_ES_USER:-vsparta-es}
URL="http://127.0.0.1:${PORT}"
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
    runuser -u "$ES_USER" -- "$@"
  else
    "$@"
  fi
}

ensure_user() {
  is_root || return 0
  if ! id -u "$ES_USER" >/dev/null 2>&1; then
    log "creating system user $ES_USER"
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$ES_USER"
  fi
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
  DIST=$ES_HOME_DIR/dist/elasticsearch-$VERSION
  NODE=$ES_HOME_DIR/node-$PORT
  PIDFILE=$NODE/es.pid
}

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

find_java() {
  if [ -n "${ES_JAVA_HOME:-}" ]; then
    JAVA_DIR=$ES_JAVA_HOME
  elif ! scan_java17; then
    apt_install openjdk-17-jre-headless "Elasticsearch 7.17 runs on Java 17 (or set ES_JAVA_HOME)"
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
  command -v mvn >/dev/null 2>&1 || apt_install maven "Maven's client fetches the Elasticsearch artifacts"
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
  fetch "org.elasticsearch.distribution.integ-test-zip:elasticsearch:$VERSION:zip" "elasticsearch-$VERSION.zip"
  fetch "org.elasticsearch.plugin:mapper-extras-client:$VERSION:jar" "mapper-extras-client-$VERSION.jar"
  command -v unzip >/dev/null 2>&1 || apt_install unzip "to unpack the distribution"
  log "unpacking Elasticsearch $VERSION into $ES_HOME_DIR/dist"
  rm -rf "$DIST"
  mkdir -p "$ES_HOME_DIR/dist"
  unzip -q "$CACHE/elasticsearch-$VERSION.zip" -d "$ES_HOME_DIR/dist"
  # mapper-extras as a module: the jar plus a descriptor (PluginInfo rejects unknown keys).
  local mod=$DIST/modules/mapper-extras
  mkdir -p "$mod"
  cp "$CACHE/mapper-extras-client-$VERSION.jar" "$mod/mapper-extras-$VERSION.jar"
  cat >"$mod/plugin-descriptor.properties" <<EOF
description=Adds advanced field mappers (rank_feature, rank_features, scaled_float, ...)
version=$VERSION
name=mapper-extras
classname=org.elasticsearch.index.mapper.MapperExtrasPlugin
java.version=1.8
elasticsearch.version=$VERSION
extended.plugins=
has.native.controller=false
EOF
  chmod -R a+rX "$ES_HOME_DIR/dist"
  touch "$DIST/.vsparta-installed"
}

write_config() {
  # Transport (node-to-node) ports near the HTTP port, so nodes on different ports don't collide.
  local TRANSPORT_PORTS=9300-9400
  if [ "$PORT" != 9200 ] && [ "$PORT" -le 65000 ]; then
    TRANSPORT_PORTS="$((PORT + 100))-$((PORT + 200))"
  fi
  mkdir -p "$NODE/config" "$NODE/data" "$NODE/logs" "$NODE/tmp"
  cp "$DIST/config/log4j2.properties" "$NODE/config/"
  cat >"$NODE/config/elasticsearch.yml" <<EOF
# Written by scripts/elasticsearch.sh: a single local node for tests and development.
cluster.name: vsparta
node.name: vsparta-$PORT
path.data: $NODE/data
path.logs: $NODE/logs
network.host: 127.0.0.1
http.port: $PORT
transport.port: $TRANSPORT_PORTS
discovery.type: single-node
# The integ-test-zip carries x-pack core/security; a local test node runs without security.
xpack.security.enabled: false
# A shared development disk must not flip indices read-only.
cluster.routing.allocation.disk.threshold_enabled: false
action.destructive_requires_name: true
EOF
  cat >"$NODE/config/jvm.options" <<EOF
-XX:+UseG1GC
-Djava.io.tmpdir=\${ES_TMPDIR}
-XX:+ExitOnOutOfMemoryError
-XX:ErrorFile=$NODE/logs/hs_err_pid%p.log
-Xlog:gc*:file=$NODE/logs/gc.log:utctime,pid,tags:filecount=4,filesize=16m
EOF
  if is_root; then
    chown -R "$ES_USER:" "$NODE"
  fi
}

answers() {
  local body
  body=$(curl -fsS --max-time 3 "$URL/" 2>/dev/null) || return 1
  [[ $body == *'"cluster_name"'* ]]
}

pid_alive() {
  [ -f "$PIDFILE" ] || return 1
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] &&
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'org.elasticsearch.bootstrap.Elasticsearch'
}

# The process exists and has not exited (an exiting JVM loses its cmdline before it is a zombie).
proc_running() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

log_tail() {
  local n=${1:-60}
  for f in "$NODE/logs/vsparta.log" "$NODE/logs/stdout.log"; do
    if [ -f "$f" ]; then
      echo "==> $f <=="
      tail -n "$n" "$f"
    fi
  done
}

cmd_start() {
  if answers; then
    log "already running at $URL"
    return 0
  fi
  ensure_user
  pick_home
  if pid_alive; then
    log "a node (pid $(cat "$PIDFILE")) is starting or hung; waiting for it"
  else
    find_java
    install_dist
    write_config
    rm -f "$PIDFILE"
    local t0=$SECONDS
    log "starting Elasticsearch $VERSION on $URL (heap $HEAP, work dir $NODE)"
    as_es env ES_JAVA_HOME="$JAVA_DIR" ES_PATH_CONF="$NODE/config" ES_TMPDIR="$NODE/tmp" \
      ES_JAVA_OPTS="-Xms$HEAP -Xmx$HEAP ${ES_JAVA_OPTS:-}" JAVA_HOME= \
      "$DIST/bin/elasticsearch" -d -p "$PIDFILE" >"$NODE/logs/stdout.log" 2>&1 </dev/null ||
      {
        log_tail 80 >&2
        die "Elasticsearch failed to start (log tail above)"
      }
    START_T0=$t0
  fi
  wait_green
}

wait_green() {
  local deadline=$((SECONDS + TIMEOUT)) t0=${START_T0:-$SECONDS}
  until answers; do
    if [ -f "$PIDFILE" ] && ! pid_alive; then
      log_tail 80 >&2
      die "Elasticsearch exited during startup (log tail above)"
    fi
    if [ $SECONDS -ge $deadline ]; then
      log_tail 80 >&2
      die "Elasticsearch did not answer on $URL within ${TIMEOUT}s (log tail above)"
    fi
    sleep 1
  done
  # One node: replicas could never be assigned, so every new index gets none and stays green.
  curl -fsS --max-time 10 -X PUT "$URL/_template/vsparta-single-node" -H 'Content-Type: application/json' \
    -d '{"index_patterns": ["*"], "order": -1000, "settings": {"number_of_replicas": 0}}' >/dev/null ||
    log "warning: could not install the zero-replica template"
  local left=$((deadline - SECONDS))
  [ $left -gt 0 ] || left=1
  local health
  health=$(curl -sS --max-time $((left + 5)) "$URL/_cluster/health?wait_for_status=green&timeout=${left}s" || true)
  if [[ $health != *'"status":"green"'* ]]; then
    log_tail 40 >&2
    die "cluster at $URL is not green within ${TIMEOUT}s: $(curl -sS "$URL/_cluster/health" || true)"
  fi
  log "green at $URL after $((SECONDS - t0))s"
}

cmd_stop() {
  pick_home
  if ! pid_alive; then
    rm -f "$PIDFILE"
    if answers; then
      die "a node answers on $URL but its pid file is not in $NODE (started from another work dir?)"
    fi
    log "not running"
    return 0
  fi
  local pid
  pid=$(cat "$PIDFILE")
  log "stopping pid $pid"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 60); do
    proc_running "$pid" || break
    sleep 0.5
  done
  if proc_running "$pid"; then
    log "still alive after 30s: kill -9 $pid"
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do
      proc_running "$pid" || break
      sleep 0.5
    done
  fi
  rm -f "$PIDFILE"
  log "stopped"
}

cmd_status() {
  if answers; then
    curl -fsS --max-time 3 "$URL/_cluster/health"
    echo
    return 0
  fi
  echo "not running at $URL" >&2
  return 1
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
restart)
  cmd_stop
  cmd_start
  ;;
status) cmd_status ;;
logs)
  pick_home
  log_tail "${2:-60}"
  ;;
*)
  echo "usage: $0 start|stop|restart|status|logs [N]" >&2
  exit 2
  ;;
esac
