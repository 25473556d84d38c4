#!/usr/bin/env bash
# The half-catalog test with a model trained on the whole catalog (docs/no-match.md): MODEL is the
# issue-30 model `lite0-320-words` (docs/quality-objects-1161; 16,000 scenes of all 82 subgroups),
# read at its 320 px. Two splits of the subgroups:
# - eight: the eight subgroups of half-catalog-lite0.sh (index: fruit, sweets, flowers, birds;
#   out: mammals, ground transport, prepared food, household), as the earlier tables;
# - half: every other subgroup of the catalog's 82, in the catalog's order (index: 41 of them).
# Each: 2,500 indexed scenes (2,000 + the 500 of its own test split), 500 out scenes, 2,000
# calibration scenes of both halves (seed 3, in an index of their own; never the searched one).
# Tables: half-catalog-full-eight-floors-captions.md and half-catalog-full-half-floors-captions.md.
# Run from the repository root after the test command's install; MODEL=path/to/best. SPLITS: some of
# "eight half" (default both); SUFFIX names another model's tables (half-catalog-full-half-...-wide).
# Scenes and indexes go to HC (another model: another HC, the index holds one model's terms).
# DEFAULTS=1: then also the grid around the service's defaults (function-words.sh's: the presence
# test, function words alone or not; table half-catalog-full-SPLIT-defaults SUFFIX) and which out
# queries still show results under the defaults, through which word (a table
# still-matches-half-catalog-full-SPLIT SUFFIX). INDEX_ONLY=1: the scenes and indexes, no table
# (presence-joint-eight.sh's).
set -euo pipefail
V="env OMP_WAIT_POLICY=PASSIVE .venv/bin/vsparta"
HC=${HC:-.cache/hc-full}
MODEL=${MODEL:?the lite0-320-words model folder}
common=(--kind objects --size 224 --heldout-words 0 --heldout-objects 0 --held-word-share 0 --held-object-share 0 --no-vocabulary --no-progress)
# every other subgroup (some names have spaces: "sky & weather"), from the first or the second
HALF_A=$(.venv/bin/python docs/no-match/subgroups.py 0); HALF_B=$(.venv/bin/python docs/no-match/subgroups.py 1)
grid=(--min-weights 0.5,1,2 --common-shares 0.5,0.6 --quantiles 0.1,0.2,0.3,0.5 --negative-quantiles 0,0.01,0.05)
for split in ${SPLITS:-eight half}; do
  if [ $split = eight ]; then
    A=food-fruit,food-sweet,plant-flower,animal-bird; B=animal-mammal,transport-ground,food-prepared,household
  else
    A=$HALF_A; B=$HALF_B
  fi
  S=$HC/$split
  [ -f $S/a/test.jsonl ] || $V scenes "${common[@]}" --seed 1 --out $S/a --train 2000 --val 0 --test 500 --groups "$A"
  [ -f $S/b/test.jsonl ] || $V scenes "${common[@]}" --seed 2 --out $S/b --train 0 --val 0 --test 500 --groups "$B"
  [ -f $S/calib/test.jsonl ] || $V scenes "${common[@]}" --seed 3 --out $S/calib --train 0 --val 0 --test 2000 --groups "$A,$B"
  for part in a/train a/test calib/test; do
    index=$S/index; [ $part = calib/test ] && index=$S/calib-index
    $V index $S/$part.jsonl --backend embedded:$index --model "$MODEL" --resume --failures $index-failures.jsonl --no-progress
  done
  [ -z "${INDEX_ONLY:-}" ] || continue
  $V bench no-match-floors --index embedded:$S/index --model "$MODEL" --calibration-index embedded:$S/calib-index \
    --in-split $S/a/test.jsonl --out-split $S/b/test.jsonl --index-manifest $S/a/train.jsonl --index-manifest $S/a/test.jsonl \
    --calibration-manifest $S/calib/test.jsonl --positives captions "${grid[@]}" --out-dir docs/no-match \
    --name half-catalog-full-$split-floors-captions${SUFFIX:-}
  [ -n "${DEFAULTS:-}" ] || continue
  $V bench no-match-floors --index embedded:$S/index --model "$MODEL" --calibration-index embedded:$S/calib-index \
    --in-split $S/a/test.jsonl --out-split $S/b/test.jsonl --index-manifest $S/a/train.jsonl --index-manifest $S/a/test.jsonl \
    --calibration-manifest $S/calib/test.jsonl --positives captions --quantiles 0.5 --negative-quantiles 0.01 \
    --combine mid --min-weights 0.5,2 --common-shares 0.6 --presence-quantiles none,0.5,0.65,0.75 --presence-alphas 0.05 \
    --presence-ratios 1,1.5,2 --present-floor-scales 0,0.75 --function-words-match yes,no --out-dir docs/no-match \
    --name half-catalog-full-$split-defaults${SUFFIX:-}
  HC=$S CALIBRATION=calib .venv/bin/python docs/no-match/what-still-matches.py "$MODEL" calib-index index \
    > docs/no-match/still-matches-half-catalog-full-$split${SUFFIX:-}.md
done
echo done
