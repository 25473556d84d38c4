#!/usr/bin/env bash
# The presence test's scan (docs/no-match.md, "A scan of strong weights"): the rules around the
# service's defaults with the scan and without it (one strong weight, the rule before 2026-12-04),
# relation words ("left", "next") matching alone or not (the rule before 2026-12-04: they did),
# a proven word's floor at 0.75 and 0 of its calibrated one, on half-catalog-full.sh's 2,500-image
# indexes (SIZES eight and half) and half-catalog-full-10k.sh's 10,000 (10k); and presence-bound.py
# (a perfect test, and scans of other weights) beside each. Tables presence-scan-SIZE SUFFIX and
# presence-bound-SIZE SUFFIX. Run after those scripts with the same HC, MODEL and SUFFIX.
set -euo pipefail
V="env OMP_WAIT_POLICY=PASSIVE .venv/bin/vsparta"
HC=${HC:-.cache/hc-full}
MODEL=${MODEL:?the model half-catalog-full.sh used}
for size in ${SIZES:-eight half 10k}; do
  S=$HC/half; index=index; more=(); manifests=()  # 10k: a2-more.jsonl's 7,500 beside the 2,500
  [ $size = eight ] && S=$HC/eight
  [ $size = 10k ] && index=index-10k && more=(a2-more.jsonl) && manifests=(--index-manifest $S/a2-more.jsonl)
  $V bench no-match-floors --index embedded:$S/$index --model "$MODEL" --calibration-index embedded:$S/calib-index \
    --in-split $S/a/test.jsonl --out-split $S/b/test.jsonl --index-manifest $S/a/train.jsonl --index-manifest $S/a/test.jsonl \
    "${manifests[@]}" --calibration-manifest $S/calib/test.jsonl --positives captions --quantiles 0.5 \
    --negative-quantiles 0.01 --combine mid --min-weights 0.5 --common-shares 0.6 --numbers-match no \
    --function-words-match no --presence-quantiles none,0.65 --presence-alphas 0.05 --presence-ratios 1,1.5 \
    --present-floor-scales 0,0.75 --presence-scans yes,no \
    --relation-words-match yes,no --out-dir docs/no-match --name presence-scan-$size${SUFFIX:-}
  HC=$S INDEX=$index MORE="${more[*]}" MODEL=$MODEL CALIBRATION=calib CALIBRATION_INDEX=calib-index \
    .venv/bin/python docs/no-match/presence-bound.py > docs/no-match/presence-bound-$size${SUFFIX:-}.md
done
echo done
