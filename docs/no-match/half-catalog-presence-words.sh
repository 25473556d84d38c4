#!/usr/bin/env bash
# The presence test on half of the whole catalog with a stronger whole-catalog model, docs/no-match.md
# (2026-11-29): issue 30's lite0-224-words recipe (docs/quality-objects-1161/lite0-224-words: MiniLM's
# word embeddings, 224 px, 2 views, 8 epochs) trained on 16,000 scenes of all 82 subgroups (seed 20),
# against the same index (41 subgroups, 2,500 scenes), out captions (the other 41) and calibration
# scenes (2,000 of seed 3, 8,000 of seed 4, each in an index of its own) as half-catalog-presence.sh,
# which must have run first (it draws them):
# half-catalog-presence-half-words.md, half-catalog-presence-half-words-8k.md and, with a
# 10,000-image index, half-catalog-presence-half-words-10k.md.
# Run from the repository root after the test command's install (~70 min on 2 cores).
set -euo pipefail
V="env OMP_WAIT_POLICY=PASSIVE .venv/bin/vsparta"
S=${HC:-.cache/hc-whole}
common=(--kind objects --size 224 --heldout-words 0 --heldout-objects 0 --held-word-share 0 --held-object-share 0 --no-vocabulary --no-progress)
grid=(--positives captions --quantiles 0.5 --negative-quantiles 0.01 --combine mid --min-weights 0.5,2
  --common-shares 0.6 --presence-quantiles none,0.5,0.65,0.75 --presence-alphas 0.05
  --presence-ratios 1,1.5,2 --present-floor-scales 0.75 --out-dir docs/no-match)
groups=$(.venv/bin/python docs/no-match/subgroups.py)
[ -f $S/all16k/train.jsonl ] || $V scenes "${common[@]}" --seed 20 --out $S/all16k --train 16000 --val 0 --test 0 --groups "$groups"
M=$S/model-words
[ -d $M/final ] || $V train --manifest $S/all16k/train.jsonl --out $M --config docs/quality-objects-1161/lite0-224-words/config.json \
  --init none --epochs 8 --lr 2e-3 --pretrained-lr 2e-3 --augment-views 2 --seed 0 --threads 2 --no-progress \
  --feature-cache $S/feature-cache-words
for part in a/train a/test; do
  $V index $S/$part.jsonl --backend embedded:$S/index-words --model $M/final --resume --failures $S/index-words-failures.jsonl --no-progress
done
$V index $S/calib/test.jsonl --backend embedded:$S/calib-index-words-2k --model $M/final --resume --failures $S/calib-index-words-2k-failures.jsonl --no-progress
$V index $S/calib2/test.jsonl --backend embedded:$S/calib-index-words-8k --model $M/final --resume --failures $S/calib-index-words-8k-failures.jsonl --no-progress
run() {  # $1: index, $2: calibration index, $3: calibration manifest, $4: table name, then more options
  $V bench no-match-floors --index "embedded:$1" --model $M/final --calibration-index "embedded:$2" \
    --in-split $S/a/test.jsonl --out-split $S/b/test.jsonl --index-manifest $S/a/train.jsonl --index-manifest $S/a/test.jsonl \
    --calibration-manifest "$3" "${grid[@]}" --name "$4" "${@:5}"
}
run $S/index-words $S/calib-index-words-2k $S/calib/test.jsonl half-catalog-presence-half-words
run $S/index-words $S/calib-index-words-8k $S/calib2/test.jsonl half-catalog-presence-half-words-8k
# A larger index: 7,500 more scenes of the same 41 subgroups (seed 5; ids renamed more-NNNNN, as an
# index keeps one image per id) beside the 2,500: 10,000 images, the same out captions and 8,000
# calibration scenes: half-catalog-presence-half-words-10k.md.
A=$(.venv/bin/python docs/no-match/subgroups.py 0)
[ -f $S/a2/test.jsonl ] || $V scenes "${common[@]}" --seed 5 --out $S/a2 --train 0 --val 0 --test 7500 --groups "$A"
.venv/bin/python docs/no-match/renamed-scenes.py "$S" a2 more a2-more.jsonl
for part in a/train.jsonl a/test.jsonl a2-more.jsonl; do
  $V index $S/$part --backend embedded:$S/index-words-10k --model $M/final --resume --failures $S/index-words-10k-failures.jsonl --no-progress
done
run $S/index-words-10k $S/calib-index-words-8k $S/calib2/test.jsonl half-catalog-presence-half-words-10k \
  --index-manifest $S/a2-more.jsonl
echo done
