#!/usr/bin/env bash
# docs/no-match/half-catalog-lite0.md: the half-catalog test with the pretrained stem (lite0,
# 224 px scenes, 8 epochs). Run from the repository root after the test command's install.
# TAG, TRAIN_ARGS and GRID make its variants (half-catalog-lite0-presence.sh).
set -euo pipefail
V="env OMP_WAIT_POLICY=PASSIVE .venv/bin/vsparta"
NM=${NM:-.cache/nm224}
TAG=${TAG:-}  # suffix of the model, index and table names
read -r -a train_args <<< "${TRAIN_ARGS:-}"
read -r -a grid <<< "${GRID:-}"
A=food-fruit,food-sweet,plant-flower,animal-bird
B=animal-mammal,transport-ground,food-prepared,household
common=(--kind objects --size 224 --heldout-words 0 --heldout-objects 0 --held-word-share 0 --held-object-share 0 --no-vocabulary --no-progress)
[ -f $NM/all/train.jsonl ] || $V scenes "${common[@]}" --seed 0 --out $NM/all --train 3000 --val 0 --test 0 --groups "$A,$B"
[ -f $NM/a/test.jsonl ] || $V scenes "${common[@]}" --seed 1 --out $NM/a --train 2000 --val 0 --test 500 --groups "$A"
[ -f $NM/b/test.jsonl ] || $V scenes "${common[@]}" --seed 2 --out $NM/b --train 0 --val 0 --test 500 --groups "$B"
M=$NM/model$TAG
[ -d $M/final ] || $V train --manifest $NM/all/train.jsonl --out $M --config lite0 --epochs 8 --lr 2e-3 --augment-views 2 --seed 0 --threads 2 --no-progress "${train_args[@]}"
for split in train test; do
  $V index $NM/a/$split.jsonl --backend embedded:$NM/index$TAG --model $M/final --resume --failures $NM/index$TAG-failures.jsonl --no-progress
done
$V bench no-match --index embedded:$NM/index$TAG --model $M/final --in-split $NM/a/test.jsonl --out-split $NM/b/test.jsonl --index-manifest $NM/a/train.jsonl --out-dir docs/no-match --name half-catalog-lite0$TAG "${grid[@]}"
echo done
