#!/usr/bin/env bash
# A word the calibration never saw needs its key's unseen floor, docs/no-match.md (2026-12-03):
# FloorRule.unseen_quantile none (the rule's one floor, as before), 0.001 (the default) and 0 (the
# largest weight of the key on any calibration image), with the service's other defaults, on
# - half of the whole catalog: plural-floors.sh's ranking model, 10,000-image index and 8,000
#   calibration scenes (unseen-floors-half-10k.md), and which out queries still show results
#   (still-matches-index-words-10k-unseen.md);
# - the eight-subgroup test: half-catalog-presence.sh's two models
#   (half-catalog-presence-eight-unseen.md, half-catalog-presence-eight-penalty-unseen.md).
# Run from the repository root after plural-floors.sh and half-catalog-presence.sh (SPLITS=eight) have
# made their models and indexes (~30 min on 2 cores; they draw what is missing, 45 + 20 min more).
set -euo pipefail
[ -d .cache/hc-whole/model-words/final ] || bash docs/no-match/plural-floors.sh
S=.cache/hc-whole M=.cache/hc-whole/model-words
env OMP_WAIT_POLICY=PASSIVE .venv/bin/vsparta bench no-match-floors --index "embedded:$S/index-words-10k" --model "$M/final" \
  --calibration-index "embedded:$S/calib-index-words-8k" --in-split $S/a/test.jsonl --out-split $S/b/test.jsonl \
  --index-manifest $S/a/train.jsonl --index-manifest $S/a/test.jsonl --index-manifest $S/a2-more.jsonl \
  --calibration-manifest $S/calib2/test.jsonl --positives captions --quantiles 0.5 --negative-quantiles 0.01 \
  --combine mid --min-weights 0.5,2 --common-shares 0.6 --presence-quantiles none,0.5,0.65,0.75 --presence-alphas 0.05 \
  --presence-ratios 1,1.5,2 --present-floor-scales 0.75 --function-words-match no --out-dir docs/no-match \
  --unseen-quantiles none,0.001,0 --name unseen-floors-half-10k
.venv/bin/python docs/no-match/what-still-matches.py model-words calib-index-words-8k index-words-10k a2-more.jsonl \
  > docs/no-match/still-matches-index-words-10k-unseen.md
SPLITS=eight SUFFIX=-unseen MORE="--function-words-match no --unseen-quantiles none,0.001,0" \
  bash docs/no-match/half-catalog-presence.sh
