#!/usr/bin/env bash
# half-catalog-full.sh's half split on 10,000 images: its 2,500 and 7,500 more scenes of the same
# 41 subgroups (seed 5; ids renamed more-NNNNN, as half-catalog-presence-words.sh does), the same
# out captions and the same 2,000 calibration scenes, only the rules around the service's defaults
# (the presence test at its defaults, numbers and function words alone or not): does a larger index
# prove enough of its own words for the defaults to keep R@10? Tables half-catalog-full-10k SUFFIX,
# still-matches-half-catalog-full-10k SUFFIX. Run after half-catalog-full.sh (SPLITS=half) with the
# same HC, MODEL and SUFFIX.
set -euo pipefail
V="env OMP_WAIT_POLICY=PASSIVE .venv/bin/vsparta"
S=${HC:-.cache/hc-full}/half
MODEL=${MODEL:?the model half-catalog-full.sh used}
A=$(.venv/bin/python docs/no-match/subgroups.py 0)
common=(--kind objects --size 224 --heldout-words 0 --heldout-objects 0 --held-word-share 0 --held-object-share 0 --no-vocabulary --no-progress)
[ -f $S/a2/test.jsonl ] || $V scenes "${common[@]}" --seed 5 --out $S/a2 --train 0 --val 0 --test 7500 --groups "$A"
.venv/bin/python docs/no-match/renamed-scenes.py "$S" a2 more a2-more.jsonl
for part in a/train a/test a2-more; do  # the 2,500 again into a new index, then the 7,500
  $V index $S/$part.jsonl --backend embedded:$S/index-10k --model "$MODEL" --resume --failures $S/index-10k-failures.jsonl --no-progress
done
$V bench no-match-floors --index embedded:$S/index-10k --model "$MODEL" --calibration-index embedded:$S/calib-index \
  --in-split $S/a/test.jsonl --out-split $S/b/test.jsonl --index-manifest $S/a/train.jsonl --index-manifest $S/a/test.jsonl \
  --index-manifest $S/a2-more.jsonl --calibration-manifest $S/calib/test.jsonl --positives captions --quantiles 0.5 \
  --negative-quantiles 0.01 --combine mid --min-weights 0.5 --common-shares 0.6 --presence-quantiles none,0.65 \
  --presence-alphas 0.05 --presence-ratios 1.5 --present-floor-scales 0.75 --function-words-match yes,no \
  --out-dir docs/no-match --name half-catalog-full-10k${SUFFIX:-}
HC=$S CALIBRATION=calib .venv/bin/python docs/no-match/what-still-matches.py "$MODEL" calib-index index-10k a2-more.jsonl \
  > docs/no-match/still-matches-half-catalog-full-10k${SUFFIX:-}.md
echo done
