#!/usr/bin/env bash
# Function words make no match on their own, docs/no-match.md (2026-12-02): the grids of the
# presence test again, each with function words allowed to match alone (the rule before) and not
# (the service's default since), and present floor scales 0 and 0.75: on the eight-subgroup test
# (half-catalog-presence.sh's two models: half-catalog-presence-eight-function-words.md and
# half-catalog-presence-eight-penalty-function-words.md) and on half of the whole catalog
# (half-catalog-presence-words.sh's ranking model on 2,500, 10,000 and 40,000 images, and
# half-catalog-presence-words-penalty.sh's model on 10,000: function-words-half-*.md).
# Run from the repository root after those scripts and half-catalog-presence-40k.sh have run (their
# models, indexes and scenes are used as they left them; ~45 min on 2 cores).
set -euo pipefail
V="env OMP_WAIT_POLICY=PASSIVE .venv/bin/vsparta"
S=${HC:-.cache/hc-whole}
SPLITS=eight SUFFIX=-function-words SCALES=0,0.75 bash docs/no-match/half-catalog-presence.sh
grid=(--positives captions --quantiles 0.5 --negative-quantiles 0.01 --combine mid --min-weights 0.5,2
  --common-shares 0.6 --presence-quantiles none,0.5,0.65,0.75 --presence-alphas 0.05
  --presence-ratios 1,1.5,2 --present-floor-scales 0,0.75 --function-words-match yes,no --out-dir docs/no-match)
run() {  # $1: model, $2: index, $3: calibration index, $4: table name, then more index manifests
  $V bench no-match-floors --index "embedded:$S/$2" --model "$S/$1/final" --calibration-index "embedded:$S/$3" \
    --in-split $S/a/test.jsonl --out-split $S/b/test.jsonl --index-manifest $S/a/train.jsonl --index-manifest $S/a/test.jsonl \
    --calibration-manifest $S/calib2/test.jsonl "${grid[@]}" --name "$4" "${@:5}"
}
run model-words index-words calib-index-words-8k function-words-half-2500
run model-words index-words-10k calib-index-words-8k function-words-half-10k --index-manifest $S/a2-more.jsonl
run model-words-penalty index-words-penalty-10k calib-index-words-penalty-8k function-words-half-penalty-10k \
  --index-manifest $S/a2-more.jsonl
run model-words index-words-40k calib-index-words-8k function-words-half-40k --index-manifest $S/a2-more.jsonl \
  --index-manifest $S/a3-bulk.jsonl
# Which out queries still show results with the service's defaults, and through which word:
for args in "model-words calib-index-words-8k index-words-10k a2-more.jsonl" \
  "model-words-penalty calib-index-words-penalty-8k index-words-penalty-10k a2-more.jsonl"; do
  set -- $args
  .venv/bin/python docs/no-match/what-still-matches.py "$@" > "docs/no-match/still-matches-${3}.md"
done
.venv/bin/python docs/no-match/what-still-matches.py --function-words-match model-words-penalty \
  calib-index-words-penalty-8k index-words-penalty-10k a2-more.jsonl > docs/no-match/still-matches-index-words-penalty-10k-before.md
echo done
