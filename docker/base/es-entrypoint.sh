#!/bin/bash
# As the official Elasticsearch and OpenSearch images do: every environment variable whose name
# has a dot (discovery.type=single-node, node.name=es01, ...) becomes an `-E name=value` setting.
# VSPARTA_NODE_BIN names the launcher (the OpenSearch image sets it).
set -euo pipefail
es_opts=()
while IFS='=' read -r -d '' name value; do
  if [[ $name =~ ^[a-z0-9_]+\.[a-z0-9_.]+$ ]]; then
    es_opts+=("-E" "$name=$value")
  fi
done < <(env -0)
exec "${VSPARTA_NODE_BIN:-/usr/share/elasticsearch/bin/elasticsearch}" "${es_opts[@]}" "$@"
