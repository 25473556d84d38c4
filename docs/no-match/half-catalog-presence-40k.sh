#!/usr/bin/env bash
# The presence test on half of the whole catalog with a 40,000-image index, docs/no-match.md
# (2026-11-29): the 10,000-image index of half-catalog-presence-words.sh (which must have run first:
# the model, the calibration index and the out captions are its) and 30,000 more scenes of the same
# 41 subgroups (seed 6; ids renamed bulk-NNNNN, as an index keeps one image per id):
# half-catalog-presence-half-words-40k.md.
# Run from the repository root after the test command's install (~50 min on 2 cores: the scenes
# ~10 min, encoding ~25 min, the benchmark ~9 min).
set -euo pipefail
V="env OMP_WAIT_POLICY=PASSIVE .venv/bin/vsparta"
S=${HC:-.cache/hc-whole}
M=$S/model-words
common=(--kind objects --size 224 --heldout-words 0 --heldout-objects 0 --held-word-share 0 --held-object-share 0 --no-vocabulary --no-progress)
grid=(--positives captions --quantiles 0.5 --negative-quantiles 0.01 --combine mid --min-weights 0.5,2
  --common-shares 0.6 --presence-quantiles none,0.5,0.65,0.75 --presence-alphas 0.05
  --presence-ratios 1,1.5,2 --present-floor-scales 0.75 --out-dir docs/no-match)
A=$(.venv/bin/python docs/no-match/subgroups.py 0)
[ -f $S/a3/test.jsonl ] || $V scenes "${common[@]}" --seed 6 --out $S/a3 --train 0 --val 0 --test 30000 --groups "$A"
.venv/bin/python docs/no-match/renamed-scenes.py "$S" a3 bulk a3-bulk.jsonl
[ -d $S/index-words-40k ] || cp -r $S/index-words-10k $S/index-words-40k
$V index $S/a3-bulk.jsonl --backend embedded:$S/index-words-40k --model $M/final --resume --failures $S/index-words-40k-failures.jsonl --no-progress
$V bench no-match-floors --index "embedded:$S/index-words-40k" --model $M/final --calibration-index "embedded:$S/calib-index-words-8k" \
  --in-split $S/a/test.jsonl --out-split $S/b/test.jsonl --index-manifest $S/a/train.jsonl --index-manifest $S/a/test.jsonl \
  --calibration-manifest $S/calib2/test.jsonl "${grid[@]}" --name half-catalog-presence-half-words-40k \
  --index-manifest $S/a2-more.jsonl --index-manifest $S/a3-bulk.jsonl
echo done
