#!/usr/bin/env bash
# docs/no-match/half-catalog.md: the match rule on an index of half of 8 emoji subgroups, with a
# model trained on all 8, asked with captions that name only objects of the other half.
# Run from the repository root after the test command's install (bash scripts/test.sh sets it up).
set -euo pipefail
V=.venv/bin/vsparta
NM=${NM:-.cache/nm8}
A=food-fruit,food-sweet,plant-flower,animal-bird
B=animal-mammal,transport-ground,food-prepared,household
common=(--kind objects --size 64 --heldout-words 0 --heldout-objects 0 --held-word-share 0 --held-object-share 0 --no-vocabulary --no-progress)
mkdir -p "$NM"
[ -f "$NM/all/train.jsonl" ] || $V scenes "${common[@]}" --seed 0 --out "$NM/all" --train 3000 --val 0 --test 0 --groups "$A,$B"
[ -f "$NM/a/test.jsonl" ] || $V scenes "${common[@]}" --seed 1 --out "$NM/a" --train 2000 --val 0 --test 500 --groups "$A"
[ -f "$NM/b/test.jsonl" ] || $V scenes "${common[@]}" --seed 2 --out "$NM/b" --train 0 --val 0 --test 500 --groups "$B"
resume=(); [ -d "$NM/model" ] && resume=(--resume)
# The measured model is checkpoint-epoch-9 of this run (it was stopped there).
[ -d "$NM/model/checkpoint-epoch-9" ] || $V train --manifest "$NM/all/train.jsonl" --out "$NM/model" --config tiny --epochs 10 --lr 5e-3 --seed 0 --threads 2 --no-progress "${resume[@]}"
M=$NM/model/checkpoint-epoch-9
for split in train test; do
  $V index "$NM/a/$split.jsonl" --backend "embedded:$NM/index" --model "$M" --resume --failures "$NM/index-failures.jsonl" --no-progress
done
$V bench no-match --index "embedded:$NM/index" --model "$M" --in-split "$NM/a/test.jsonl" --out-split "$NM/b/test.jsonl" \
  --index-manifest "$NM/a/train.jsonl" --out-dir docs/no-match --name half-catalog
