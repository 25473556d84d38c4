#!/usr/bin/env bash
# half-catalog-full.sh's half split with 8,000 calibration scenes (seed 4, both halves, an index of
# their own) in place of its 2,000, on its 2,500-image index and on half-catalog-full-10k.sh's
# 10,000: the rules around the service's defaults, presence-bound.py and which out queries still
# show results under the defaults. Does a larger calibration (more words calibrated, sharper null
# rates) move the defaults or the perfect test (docs/no-match.md)? Tables presence-scan-SIZE-calib-8k
# SUFFIX, presence-bound-SIZE-calib-8k SUFFIX, still-matches-half-catalog-full-SIZE-calib-8k SUFFIX
# (SIZE: half, 10k). Run after half-catalog-full.sh (SPLITS=half) and half-catalog-full-10k.sh with
# the same HC, MODEL and SUFFIX.
set -euo pipefail
V="env OMP_WAIT_POLICY=PASSIVE .venv/bin/vsparta"
S=${HC:-.cache/hc-full}/half
MODEL=${MODEL:?the model half-catalog-full.sh used}
A=$(.venv/bin/python docs/no-match/subgroups.py 0); B=$(.venv/bin/python docs/no-match/subgroups.py 1)
common=(--kind objects --size 224 --heldout-words 0 --heldout-objects 0 --held-word-share 0 --held-object-share 0 --no-vocabulary --no-progress)
[ -f $S/calib8k/test.jsonl ] || $V scenes "${common[@]}" --seed 4 --out $S/calib8k --train 0 --val 0 --test 8000 --groups "$A,$B"
$V index $S/calib8k/test.jsonl --backend embedded:$S/calib-index-8k --model "$MODEL" --resume --failures $S/calib-index-8k-failures.jsonl --no-progress
for size in half 10k; do
  index=index; more=(); manifests=()  # 10k: a2-more.jsonl's 7,500 beside the 2,500
  [ $size = 10k ] && index=index-10k && more=(a2-more.jsonl) && manifests=(--index-manifest $S/a2-more.jsonl)
  $V bench no-match-floors --index embedded:$S/$index --model "$MODEL" --calibration-index embedded:$S/calib-index-8k \
    --in-split $S/a/test.jsonl --out-split $S/b/test.jsonl --index-manifest $S/a/train.jsonl --index-manifest $S/a/test.jsonl \
    "${manifests[@]}" --calibration-manifest $S/calib8k/test.jsonl --positives captions --quantiles 0.5 \
    --negative-quantiles 0.01 --combine mid --min-weights 0.5 --common-shares 0.6 --numbers-match no \
    --function-words-match no --presence-quantiles none,0.65 --presence-alphas 0.05 --presence-ratios 1,1.5 \
    --present-floor-scales 0.75 --presence-scans yes,no --out-dir docs/no-match --name presence-scan-$size-calib-8k${SUFFIX:-}
  HC=$S INDEX=$index MORE="${more[*]}" MODEL=$MODEL CALIBRATION=calib8k CALIBRATION_INDEX=calib-index-8k \
    .venv/bin/python docs/no-match/presence-bound.py > docs/no-match/presence-bound-$size-calib-8k${SUFFIX:-}.md
  HC=$S CALIBRATION=calib8k .venv/bin/python docs/no-match/what-still-matches.py "$MODEL" calib-index-8k $index "${more[@]}" \
    > docs/no-match/still-matches-half-catalog-full-$size-calib-8k${SUFFIX:-}.md
done
echo done
