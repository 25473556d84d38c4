#!/usr/bin/env bash
# A plural takes its singular's calibration, docs/no-match.md (2026-12-03): half of the whole catalog
# (half-catalog-presence-words.sh's ranking model, its 10,000-image index and 8,000 calibration
# scenes) with plural floors on and off, function words making no match (the default since
# function-words.sh): plural-floors-half-10k.md; and which out queries still show results with the
# service's defaults (still-matches-index-words-10k-plural.md), which of the index's own test
# captions the defaults cost and why (lost-index-words-10k*.md); then the same grid with plural
# floors and images of a word's aliases and kinds left out of its negatives (FloorRule.related_share
# none, 0.3, 0.5): related-words-half-10k.md; and two other treatments of the words the presence
# test cannot prove (unproven-words.py): unproven-words-half-10k.md.
# Draws what is missing with the commands and seeds of half-catalog-presence.sh and
# half-catalog-presence-words.sh (scenes, model, indexes: 45 min on 2 cores from nothing; the
# grids and tables after them ~25 min). Run from the repository root after the test command's install.
set -euo pipefail
V="env OMP_WAIT_POLICY=PASSIVE .venv/bin/vsparta"
S=${HC:-.cache/hc-whole}
common=(--kind objects --size 224 --heldout-words 0 --heldout-objects 0 --held-word-share 0 --held-object-share 0 --no-vocabulary --no-progress)
half() {  # every other subgroup of the catalog's 82, from the first ($1 = 0) or the second
  .venv/bin/python docs/no-match/subgroups.py $1
}
A=$(half 0) B=$(half 1)
draw() {  # $1: folder, $2: seed, $3: groups, then --train/--test counts
  [ -f "$S/$1/test.jsonl" ] || $V scenes "${common[@]}" --seed "$2" --out "$S/$1" --val 0 --groups "$3" "${@:4}"
}
draw all16k 20 "$A,$B" --train 16000 --test 0
draw a 1 "$A" --train 2000 --test 500
draw b 2 "$B" --train 0 --test 500
draw calib2 4 "$A,$B" --train 0 --test 8000
draw a2 5 "$A" --train 0 --test 7500
[ -f $S/a2-more.jsonl ] || .venv/bin/python - "$S" <<'PY'
import json, sys
root = sys.argv[1]
rows = [json.loads(line) for line in open(f"{root}/a2/test.jsonl")]
more = [dict(r, id="more-" + r["id"].split("-")[1], image="a2/" + r["image"]) for r in rows]
open(f"{root}/a2-more.jsonl", "w").write("".join(json.dumps(r) + "\n" for r in more))
PY
M=$S/model-words
[ -d $M/final ] || $V train --manifest $S/all16k/train.jsonl --out $M --config docs/quality-objects-1161/lite0-224-words/config.json \
  --init none --epochs 8 --lr 2e-3 --pretrained-lr 2e-3 --augment-views 2 --seed 0 --threads 2 --no-progress \
  --feature-cache $S/feature-cache-words
for part in a/train a/test a2-more; do
  $V index $S/$part.jsonl --backend embedded:$S/index-words-10k --model $M/final --resume --failures $S/index-words-10k-failures.jsonl --no-progress
done
$V index $S/calib2/test.jsonl --backend embedded:$S/calib-index-words-8k --model $M/final --resume --failures $S/calib-index-words-8k-failures.jsonl --no-progress
grid() {  # the grid of function-words.sh on the 10,000-image index, then more options
  $V bench no-match-floors --index "embedded:$S/index-words-10k" --model "$M/final" \
    --calibration-index "embedded:$S/calib-index-words-8k" --in-split $S/a/test.jsonl --out-split $S/b/test.jsonl \
    --index-manifest $S/a/train.jsonl --index-manifest $S/a/test.jsonl --index-manifest $S/a2-more.jsonl \
    --calibration-manifest $S/calib2/test.jsonl --positives captions --quantiles 0.5 --negative-quantiles 0.01 \
    --combine mid --min-weights 0.5,2 --common-shares 0.6 --presence-quantiles none,0.5,0.65,0.75 --presence-alphas 0.05 \
    --presence-ratios 1,1.5,2 --present-floor-scales 0.75 --function-words-match no --out-dir docs/no-match "$@"
}
grid --plural-floors yes,no --name plural-floors-half-10k
.venv/bin/python docs/no-match/what-still-matches.py model-words calib-index-words-8k index-words-10k a2-more.jsonl \
  > docs/no-match/still-matches-index-words-10k-plural.md
.venv/bin/python docs/no-match/what-is-lost.py model-words calib-index-words-8k index-words-10k \
  > docs/no-match/lost-index-words-10k.md
.venv/bin/python docs/no-match/what-is-lost.py --no-plural-floors model-words calib-index-words-8k index-words-10k \
  > docs/no-match/lost-index-words-10k-no-plural-floors.md
grid --plural-floors yes --related-shares none,0.3,0.5 --name related-words-half-10k
.venv/bin/python docs/no-match/unproven-words.py > docs/no-match/unproven-words-half-10k.md
echo done
