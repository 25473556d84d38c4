#!/usr/bin/env bash
# A real local OpenSearch (2.19 by default, `--version 3` for 3.x): scripts/elasticsearch.sh with
# --distribution opensearch, so both engines start, stop and cluster the same way.
#
#   bash scripts/opensearch.sh start|stop|status|logs [N]|restart|pids [--nodes N] [--base-port P]
#        [--version 2|3|X.Y.Z]
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/elasticsearch.sh" "$@" --distribution opensearch
