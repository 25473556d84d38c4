#!/usr/bin/env bash
# A Docker Engine and the base images the stack builds on, on a machine with no registry.
#
#   bash scripts/docker.sh start|stop|status|base-images|debian-image|node-images|env|prune
#
# start        starts dockerd when none answers: its own data root, exec root and socket state
#              under VSPARTA_DOCKER_HOME, `--iptables=false --ip6tables=false --bridge=none`
#              (compose networks are user-defined bridges; ports publish through docker-proxy).
#              A dockerd this script started is recorded in its pid file; `stop` stops only that one.
# base-images  builds the local equivalents of the official base images the Dockerfile and
#              docker-compose.yml name by default, once, and reuses them while their inputs
#              (this script, docker/base/*, the Elasticsearch artifacts) are unchanged:
#                vsparta-local/debian:bookworm       debootstrap --variant=minbase bookworm, docker import
#                vsparta-local/python:3.11           Debian's python3 in a venv on PATH (python:3.11-slim)
#                vsparta-local/torch:pypi            + torch from PyPI, its CUDA build, run on the CPU
#                                                    (pytorch/pytorch:...-runtime)
#                vsparta-local/elasticsearch:7.17.29 Debian's OpenJDK 17 + Elastic's Maven Central
#                                                    artifacts (docker.elastic.co/.../elasticsearch)
#                vsparta-local/opensearch:2.19.6     the same with OpenSearch's Maven Central
#                                                    artifacts (opensearchproject/opensearch:2.19.x)
# debian-image only the first of those (a fresh Debian: tests/docker/test_demo_fresh_machine.py)
# node-images  only the Debian, Elasticsearch and OpenSearch images (a compose cluster without the
#              service or the indexer: tests/docker/test_compose_cluster_faults.py)
# env          prints the variables that make docker-compose build and run on those images
#              (`eval "$(bash scripts/docker.sh env)"`).
# prune        removes the project's images a newer build superseded: dangling images carrying the
#              Dockerfile's label io.vsparta.image (each rebuild of the stack leaves ~1.6 GB of
#              them; the base images above and everything else on the engine are left alone).
#
# Behind a TLS-intercepting proxy, builds reach PyPI only with the CA bundle the host trusts:
# VSPARTA_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt (the default here when that file exists;
# `none` turns it off) is copied into the build context as docker/ca-bundle.pem (ignored by git)
# and pip uses it (see the Dockerfile's CA_BUNDLE argument).
#
# Environment (all optional):
#   VSPARTA_DOCKER_HOME   dockerd's data root and state (default /var/lib/vsparta-docker)
#   VSPARTA_DEBIAN_MIRROR debootstrap mirror (default http://deb.debian.org/debian)
#   VSPARTA_ES_VERSION    7.17.29 (default); the artifacts come from scripts/elasticsearch.sh's cache
#   VSPARTA_OS_VERSION    2.19.6 (default, scripts/opensearch.sh's 2.x); artifacts from the same cache
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DHOME=${VSPARTA_DOCKER_HOME:-/var/lib/vsparta-docker}
PIDFILE=$DHOME/dockerd.pid
MIRROR=${VSPARTA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
ES_VERSION=${VSPARTA_ES_VERSION:-7.17.29}
ES_CACHE=${VSPARTA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vsparta/elasticsearch}
export DOCKER_BUILDKIT=0 # the legacy builder needs no frontend image from a registry

DEBIAN_IMAGE=vsparta-local/debian:bookworm
PYTHON_IMAGE=vsparta-local/python:3.11
TORCH_IMAGE=vsparta-local/torch:pypi
ES_IMAGE=vsparta-local/elasticsearch:$ES_VERSION
OS_VERSION=${VSPARTA_OS_VERSION:-2.19.6}
OS_IMAGE=vsparta-local/opensearch:$OS_VERSION

log() { echo "[docker.sh] $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

cmd_start() {
  if answers; then
    log "dockerd already answers ($(docker version --format '{{.Server.Version}}'))"
    return 0
  fi
  command -v dockerd >/dev/null 2>&1 || die "dockerd is missing: bash scripts/install-system-deps.sh installs docker.io"
  [ "$(id -u)" = 0 ] || die "dockerd runs as root here: run this as root or start a Docker Engine yourself"
  mkdir -p "$DHOME"
  log "starting dockerd (data root $DHOME/data, log $DHOME/dockerd.log)"
  # setsid: the daemon outlives the shell that started it; `stop` ends it by the recorded pid.
  setsid dockerd --iptables=false --ip6tables=false --bridge=none --data-root "$DHOME/data" \
    --exec-root "$DHOME/exec" --pidfile "$PIDFILE" >"$DHOME/dockerd.log" 2>&1 </dev/null &
  local i
  for i in $(seq 1 60); do
    answers && break
    sleep 1
  done
  answers || {
    tail -n 30 "$DHOME/dockerd.log" >&2
    die "dockerd did not answer within 60 s (log tail above)"
  }
  log "dockerd answers after ${i}s"
}

cmd_stop() {
  if [ ! -s "$PIDFILE" ]; then
    log "no dockerd started by this script (no $PIDFILE)"
    return 0
  fi
  local pid
  pid=$(cat "$PIDFILE")
  if ! kill -0 "$pid" 2>/dev/null; then
    rm -f "$PIDFILE"
    return 0
  fi
  log "stopping dockerd (pid $pid)"
  kill -TERM "$pid"
  for _ in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  kill -0 "$pid" 2>/dev/null && die "dockerd (pid $pid) still runs 30 s after SIGTERM"
  rm -f "$PIDFILE"
  log "stopped"
}

# The hash of everything an image is made from (comments aside); an image whose label differs is
# rebuilt, and so is every image built on it.
inputs_hash() {
  local f
  for f in "$@"; do
    case $f in
    *.Dockerfile | *.sh) grep -v '^[[:space:]]*#' "$f" ;;
    *) sha256sum <"$f" ;;
    esac
  done | sha256sum | cut -c1-16
}
DEBOOTSTRAP_INCLUDE=ca-certificates,python3,python3-venv,curl
image_label() { docker image inspect --format '{{ index .Config.Labels "vsparta.inputs" }}' "$1" 2>/dev/null || true; }

ca_bundle() {
  local ca=${VSPARTA_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
  if [ "$ca" = none ] || [ ! -s "$ca" ]; then
    : >"$REPO/docker/ca-bundle.pem"
  else
    cp "$ca" "$REPO/docker/ca-bundle.pem"
  fi
}

build_debian() {
  local want
  want=$(echo "bookworm minbase $DEBOOTSTRAP_INCLUDE $MIRROR" | sha256sum | cut -c1-16)
  [ "$(image_label "$DEBIAN_IMAGE")" = "$want" ] && return 0
  command -v debootstrap >/dev/null 2>&1 || die "debootstrap is missing: bash scripts/install-system-deps.sh installs it"
  local root
  root=$(mktemp -d /var/tmp/vsparta-rootfs.XXXXXX)
  log "debootstrap bookworm (minbase) into $root"
  local t0=$SECONDS
  debootstrap --variant=minbase --include=$DEBOOTSTRAP_INCLUDE \
    bookworm "$root" "$MIRROR" >"$DHOME/debootstrap.log" 2>&1 || {
    tail -n 30 "$DHOME/debootstrap.log" >&2
    rm -rf "$root"
    die "debootstrap failed (log tail above)"
  }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import --change "LABEL vsparta.inputs=$want" \
    --change 'CMD ["bash"]' --change 'ENV LANG=C.UTF-8' - "$DEBIAN_IMAGE" >/dev/null
  rm -rf "$root"
  log "$DEBIAN_IMAGE imported after $((SECONDS - t0))s"
}

# docker build of docker/base/$1.Dockerfile in context $2 as image $3, labelled with $4.
build_from() {
  local name=$1 ctx=$2 image=$3 want=$4
  shift 4
  [ "$(image_label "$image")" = "$want" ] && return 0
  log "building $image"
  local t0=$SECONDS
  docker build --network host -f "$REPO/docker/base/$name.Dockerfile" --label "vsparta.inputs=$want" \
    "$@" -t "$image" "$ctx" >"$DHOME/build-$name.log" 2>&1 || {
    tail -n 30 "$DHOME/build-$name.log" >&2
    die "building $image failed (log tail above; whole log $DHOME/build-$name.log)"
  }
  log "$image built after $((SECONDS - t0))s"
}

cmd_debian_image() {
  answers || die "no Docker Engine answers: bash scripts/docker.sh start"
  mkdir -p "$DHOME"
  build_debian
}

cmd_base_images() {
  cmd_debian_image
  ca_bundle
  local deb
  deb=$(image_label "$DEBIAN_IMAGE")
  build_from python "$REPO/docker" "$PYTHON_IMAGE" \
    "$(echo "$deb $(inputs_hash "$REPO/docker/base/python.Dockerfile")" | sha256sum | cut -c1-16)" \
    --build-arg "BASE_IMAGE=$DEBIAN_IMAGE"
  local py
  py=$(image_label "$PYTHON_IMAGE")
  build_from torch "$REPO/docker" "$TORCH_IMAGE" \
    "$(echo "$py $(inputs_hash "$REPO/docker/base/torch.Dockerfile")" | sha256sum | cut -c1-16)" \
    --build-arg "BASE_IMAGE=$PYTHON_IMAGE"
  cmd_node_images
}

cmd_node_images() {
  answers || die "no Docker Engine answers: bash scripts/docker.sh start"
  mkdir -p "$DHOME"
  build_debian
  build_node elasticsearch "$ES_VERSION" "$ES_IMAGE" ES_VERSION
  build_node opensearch "$OS_VERSION" "$OS_IMAGE" OS_VERSION
}

# A search-engine image ($1: elasticsearch|opensearch) from the Maven Central artifacts that
# scripts/elasticsearch.sh caches (fetched here when missing): version $2, image $3, build arg $4.
build_node() {
  local dist=$1 version=$2 image=$3 arg=$4 ctx deb
  deb=$(image_label "$DEBIAN_IMAGE")
  ctx=$(mktemp -d /var/tmp/vsparta-$dist-ctx.XXXXXX)
  if [ ! -s "$ES_CACHE/$dist-$version.zip" ] || [ ! -s "$ES_CACHE/mapper-extras-client-$version.jar" ]; then
    log "fetching the $dist $version artifacts (scripts/elasticsearch.sh's cache)"
    VSPARTA_CACHE=$ES_CACHE bash "$REPO/scripts/elasticsearch.sh" fetch --distribution "$dist" --version "$version"
  fi
  cp "$ES_CACHE/$dist-$version.zip" "$ctx/$dist.zip"
  cp "$ES_CACHE/mapper-extras-client-$version.jar" "$ctx/mapper-extras.jar"
  cp "$REPO/docker/base/es-entrypoint.sh" "$ctx/"
  build_from "$dist" "$ctx" "$image" \
    "$(echo "$deb $(inputs_hash "$REPO/docker/base/$dist.Dockerfile" "$REPO/docker/base/es-entrypoint.sh" \
      "$ctx/$dist.zip" "$ctx/mapper-extras.jar")" | sha256sum | cut -c1-16)" \
    --build-arg "BASE_IMAGE=$DEBIAN_IMAGE" --build-arg "$arg=$version"
  rm -rf "$ctx"
}

cmd_env() {
  # Containers may not raise the open-files limit above dockerd's own hard limit.
  local nofile
  nofile=$(ulimit -Hn)
  if [ "$nofile" = unlimited ] || [ "$nofile" -ge 65535 ]; then nofile=65535; fi
  cat <<ENV
export ES_NOFILE=$nofile
export DOCKER_BUILDKIT=0
export VSPARTA_PYTHON_IMAGE=$PYTHON_IMAGE
export VSPARTA_TORCH_IMAGE=$TORCH_IMAGE
export VSPARTA_ES_IMAGE=$ES_IMAGE
export VSPARTA_OPENSEARCH_IMAGE=$OS_IMAGE
export VSPARTA_BUILD_NETWORK=host
export VSPARTA_CA_BUNDLE_FILE=docker/ca-bundle.pem
ENV
}

cmd_status() {
  if answers; then
    echo "dockerd $(docker version --format '{{.Server.Version}}') answers$([ -s "$PIDFILE" ] && echo " (started by this script, pid $(cat "$PIDFILE"))")"
    docker image ls 'vsparta-local/*' --format '{{.Repository}}:{{.Tag}} {{.Size}}'
  else
    echo "no Docker Engine answers" >&2
    return 1
  fi
}

cmd_prune() {
  answers || die "no Docker Engine answers: bash scripts/docker.sh start"
  docker image prune --force --filter label=io.vsparta.image >&2
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
base-images) cmd_base_images ;;
debian-image) cmd_debian_image ;;
node-images) cmd_node_images ;;
env) cmd_env ;;
prune) cmd_prune ;;
*)
  echo "usage: $0 start|stop|status|base-images|debian-image|node-images|env|prune" >&2
  exit 2
  ;;
esac
