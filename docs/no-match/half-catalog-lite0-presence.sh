#!/usr/bin/env bash
# docs/no-match/half-catalog-lite0-presence.md: the half-catalog test of half-catalog-lite0.sh with
# the model trained with the presence penalty (--presence-weight 1, margin 1; model.presence), its
# grid finer between floors 2 and 4. Run from the repository root after the test command's install.
set -euo pipefail
NM=${NM:-.cache/nm224}
export NM TAG=-presence
export TRAIN_ARGS="--presence-weight 1 --feature-cache $NM/model/feature-cache"
export GRID="--min-weights 0,0.5,1,2,2.5,3,4 --common-shares 0.5,0.6"
exec bash "$(dirname "$0")/half-catalog-lite0.sh"
