#!/usr/bin/env bash
# docs/no-match/half-catalog-lite0-floors.md and docs/no-match/half-catalog-lite0-presence-floors.md:
# the half-catalog test (half-catalog-lite0.sh and half-catalog-lite0-presence.sh build the scenes,
# both models and their indexes) with a floor per word, calibrated on 800 fresh scenes of all eight
# subgroups (seed 3) that neither index holds.
# Run from the repository root after the test command's install.
set -euo pipefail
V="env OMP_WAIT_POLICY=PASSIVE .venv/bin/vsparta"
NM=${NM:-.cache/nm224}
A=food-fruit,food-sweet,plant-flower,animal-bird
B=animal-mammal,transport-ground,food-prepared,household
common=(--kind objects --size 224 --heldout-words 0 --heldout-objects 0 --held-word-share 0 --held-object-share 0 --no-vocabulary --no-progress)
[ -f $NM/calib/test.jsonl ] || $V scenes "${common[@]}" --seed 3 --out $NM/calib --train 0 --val 0 --test 800 --groups "$A,$B"
for tag in "" -presence; do
  $V index $NM/calib/test.jsonl --backend embedded:$NM/calib-index$tag --model $NM/model$tag/final --resume --failures $NM/calib-index$tag-failures.jsonl --no-progress
  $V bench no-match-floors --index embedded:$NM/index$tag --model $NM/model$tag/final --in-split $NM/a/test.jsonl --out-split $NM/b/test.jsonl --index-manifest $NM/a/train.jsonl --calibration-index embedded:$NM/calib-index$tag --calibration-manifest $NM/calib/test.jsonl --out-dir docs/no-match --name half-catalog-lite0$tag-floors
done
echo done
