#!/usr/bin/env bash
# docs/no-match/demo-everyday.md: the match rule on the demo's own index (the README's first
# command's model and index), asked for everyday objects it never learnt (everyday-objects.txt;
# only the queries that name no word of the demo's captions count). Run from the repository root
# after the test command's install.
set -euo pipefail
D=${D:-.cache/demo}
export OMP_WAIT_POLICY=PASSIVE
[ -d "$D/index" ] || .venv/bin/vsparta demo --out "$D" --no-serve --no-progress
.venv/bin/vsparta bench no-match --index "embedded:$D/index" --model "$D/model/final" \
  --in-split "$D/scenes/test.jsonl" --out-split docs/no-match/everyday-objects.txt \
  --index-manifest "$D/scenes/train.jsonl" --index-manifest "$D/scenes/test.jsonl" \
  --min-weights 0,0.25,0.5,1,2 --out-dir docs/no-match --name demo-everyday
