#!/usr/bin/env bash
# The presence test (service/presence.py) on the half-catalog test, docs/no-match.md (2026-11-29):
# - eight: the eight subgroups of half-catalog-lite0.sh (index: fruit, sweets, flowers, birds; out:
#   mammals, ground transport, prepared food, household), two lite0 models trained on 3,000 scenes
#   of all eight (the paper's ranking loss, and --presence-weight 1), each calibrated on 2,000 fresh
#   scenes of all eight (seed 3, an index of its own): half-catalog-presence-eight.md and
#   half-catalog-presence-eight-penalty.md;
# - half: every other subgroup of the catalog's 82 (index: 41 of them, out: the other 41), a lite0
#   model trained on 6,000 scenes of the whole catalog, calibrated on 2,000 scenes of both halves:
#   half-catalog-presence-half.md.
# Run from the repository root after the test command's install (~45 min on 2 cores).
# SPLITS=eight SUFFIX=-9bit: the eight-subgroup part alone, its tables named with the suffix (the
# re-measurement after the presence test's 9-bit comparison, 2026-12-02; ~20 min).
# SCALES=0,0.75: the grid's present floor scales (default 0.75, as in every table before
# function-words.sh; docs/no-match.md, "Function words make no match").
# MORE="...": more options for every grid (plural-floors.sh's SPLITS=eight SUFFIX=-related run:
# MORE="--function-words-match no --plural-floors yes,no --related-shares none,0.3,0.5").
set -euo pipefail
V="env OMP_WAIT_POLICY=PASSIVE .venv/bin/vsparta"
NM=${NM:-.cache/nm224}
HC=${HC:-.cache/hc-whole}
common=(--kind objects --size 224 --heldout-words 0 --heldout-objects 0 --held-word-share 0 --held-object-share 0 --no-vocabulary --no-progress)
train=(--config lite0 --epochs 8 --lr 2e-3 --augment-views 2 --seed 0 --threads 2 --no-progress)
grid=(--positives captions --quantiles 0.5 --negative-quantiles 0.01 --combine mid --min-weights 0.5,2
  --common-shares 0.5,0.6 --presence-quantiles none,0.5,0.65,0.75 --presence-alphas 0.05
  --presence-ratios 1,1.5,2 --present-floor-scales ${SCALES:-0.75} --out-dir docs/no-match ${MORE:-})
half() {  # every other subgroup (some names have spaces: "sky & weather"), from the first or the second
  .venv/bin/python docs/no-match/subgroups.py $1
}
index_all() {  # $1: scenes folder, $2: model, $3: index, $4: calibration index
  for part in a/train a/test calib/test; do
    index=$3; [ $part = calib/test ] && index=$4
    $V index "$1/$part.jsonl" --backend "embedded:$index" --model "$2" --resume --failures "$index-failures.jsonl" --no-progress
  done
}
SPLITS=${SPLITS:-eight half}
SUFFIX=${SUFFIX:-}
for split in $SPLITS; do
  if [ $split = eight ]; then
    S=$NM A=food-fruit,food-sweet,plant-flower,animal-bird B=animal-mammal,transport-ground,food-prepared,household
    n_train=3000 seed=0
  else
    S=$HC A=$(half 0) B=$(half 1) n_train=6000 seed=20
  fi
  [ -f $S/all/train.jsonl ] || $V scenes "${common[@]}" --seed $seed --out $S/all --train $n_train --val 0 --test 0 --groups "$A,$B"
  [ -f $S/a/test.jsonl ] || $V scenes "${common[@]}" --seed 1 --out $S/a --train 2000 --val 0 --test 500 --groups "$A"
  [ -f $S/b/test.jsonl ] || $V scenes "${common[@]}" --seed 2 --out $S/b --train 0 --val 0 --test 500 --groups "$B"
  [ -f $S/calib/test.jsonl ] || $V scenes "${common[@]}" --seed 3 --out $S/calib --train 0 --val 0 --test 2000 --groups "$A,$B"
  tags=("")
  [ $split = eight ] && tags=("" -presence)
  for tag in "${tags[@]}"; do
    extra=(); [ -n "$tag" ] && extra=(--presence-weight 1)
    M=$S/model$tag
    [ -d $M/final ] || $V train --manifest $S/all/train.jsonl --out $M "${train[@]}" --feature-cache $S/feature-cache "${extra[@]}"
    index_all $S $M/final $S/index$tag $S/calib-index$tag
    name=half-catalog-presence-$split; [ -n "$tag" ] && name=$name-penalty
    $V bench no-match-floors --index embedded:$S/index$tag --model $M/final --calibration-index embedded:$S/calib-index$tag \
      --in-split $S/a/test.jsonl --out-split $S/b/test.jsonl --index-manifest $S/a/train.jsonl --index-manifest $S/a/test.jsonl \
      --calibration-manifest $S/calib/test.jsonl "${grid[@]}" --name $name$SUFFIX
  done
done
[[ " $SPLITS " == *" half "* ]] || exit 0
# half, calibrated on more images: 8,000 more scenes of both halves (seed 4) in an index of their
# own: half-catalog-presence-half-8k.md.
S=$HC A=$(half 0) B=$(half 1)
[ -f $S/calib2/test.jsonl ] || $V scenes "${common[@]}" --seed 4 --out $S/calib2 --train 0 --val 0 --test 8000 --groups "$A,$B"
$V index $S/calib2/test.jsonl --backend embedded:$S/calib-index-8k --model $S/model/final --resume --failures $S/calib-index-8k-failures.jsonl --no-progress
$V bench no-match-floors --index embedded:$S/index --model $S/model/final --calibration-index embedded:$S/calib-index-8k \
  --in-split $S/a/test.jsonl --out-split $S/b/test.jsonl --index-manifest $S/a/train.jsonl --index-manifest $S/a/test.jsonl \
  --calibration-manifest $S/calib2/test.jsonl "${grid[@]}" --common-shares 0.6 --presence-quantiles none,0.5,0.65,0.75 \
  --name half-catalog-presence-half-8k
echo done
