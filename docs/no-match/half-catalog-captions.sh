#!/usr/bin/env bash
# The floors as `vsparta calibrate` makes them (a word's positive calibration images: those whose
# captions use it), on the half-catalog test:
# - the two models of half-catalog-lite0.sh / half-catalog-lite0-presence.sh (3,000 training
#   scenes; run those and half-catalog-floors.sh first): half-catalog-lite0-floors-captions.md,
#   half-catalog-lite0-presence-floors-captions.md;
# - the same two recipes on 12,000 training scenes of the same eight subgroups (seed 10), each
#   with floors from the scenes' own labels and from captions: half-catalog-lite0-12k-floors.md,
#   half-catalog-lite0-12k-presence-floors.md, half-catalog-lite0-12k-floors-captions.md,
#   half-catalog-lite0-12k-presence-floors-captions.md.
# The demo's index with floors from its 100 validation scenes: demo-everyday-floors-captions.md
# (demo-everyday.sh builds the demo). Run from the repository root after the test command's install.
set -euo pipefail
V="env OMP_WAIT_POLICY=PASSIVE .venv/bin/vsparta"
NM=${NM:-.cache/nm224}
BIG=${BIG:-.cache/nm-12k}
D=${D:-.cache/demo}
A=food-fruit,food-sweet,plant-flower,animal-bird
B=animal-mammal,transport-ground,food-prepared,household
common=(--kind objects --size 224 --heldout-words 0 --heldout-objects 0 --held-word-share 0 --held-object-share 0 --no-vocabulary --no-progress)
grid=(--min-weights 0.5,1,2 --common-shares 0.5,0.6 --quantiles 0.1,0.2,0.3,0.5 --negative-quantiles 0,0.01,0.05)
queries=(--in-split $NM/a/test.jsonl --out-split $NM/b/test.jsonl --index-manifest $NM/a/train.jsonl --calibration-manifest $NM/calib/test.jsonl --out-dir docs/no-match)
for tag in "" -presence; do
  $V bench no-match-floors --index embedded:$NM/index$tag --model $NM/model$tag/final --calibration-index embedded:$NM/calib-index$tag "${queries[@]}" --positives captions "${grid[@]}" --name half-catalog-lite0$tag-floors-captions
done
[ -f $BIG/all/train.jsonl ] || $V scenes "${common[@]}" --seed 10 --out $BIG/all --train 12000 --val 0 --test 0 --groups "$A,$B"
for tag in -presence ""; do
  M=$BIG/model$tag
  extra=(); [ -n "$tag" ] && extra=(--presence-weight 1)
  [ -d $M/final ] || $V train --manifest $BIG/all/train.jsonl --out $M --config lite0 --epochs 8 --lr 2e-3 --augment-views 2 --seed 0 --threads 2 --no-progress --feature-cache $BIG/feature-cache "${extra[@]}"
  for split in a/train a/test calib/test; do
    index=$BIG/index$tag; [ $split = calib/test ] && index=$BIG/calib-index$tag
    $V index $NM/$split.jsonl --backend embedded:$index --model $M/final --resume --failures $index-failures.jsonl --no-progress
  done
  $V bench no-match-floors --index embedded:$BIG/index$tag --model $M/final --calibration-index embedded:$BIG/calib-index$tag "${queries[@]}" --name half-catalog-lite0-12k$tag-floors
  $V bench no-match-floors --index embedded:$BIG/index$tag --model $M/final --calibration-index embedded:$BIG/calib-index$tag "${queries[@]}" --positives captions "${grid[@]}" --name half-catalog-lite0-12k$tag-floors-captions
done
[ -d $D/calibration-index ] || $V index $D/scenes/val.jsonl --backend embedded:$D/calibration-index --model $D/model/final --no-progress
$V bench no-match-floors --index embedded:$D/index --model $D/model/final --in-split $D/scenes/test.jsonl \
  --out-split docs/no-match/everyday-objects.txt --index-manifest $D/scenes/train.jsonl --index-manifest $D/scenes/test.jsonl \
  --calibration-index embedded:$D/calibration-index --calibration-manifest $D/scenes/val.jsonl --positives captions \
  --min-weights 0.5,1 --common-shares 0.5 --quantiles 0.1,0.2,0.3,0.5 --negative-quantiles 0,0.01,0.05 \
  --out-dir docs/no-match --name demo-everyday-floors-captions
echo done
