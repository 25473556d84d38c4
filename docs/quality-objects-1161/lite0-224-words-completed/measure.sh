#!/usr/bin/env bash
# docs/quality-objects-1161/lite0-224-words-completed: `vsparta complete-words` on the lite0 model
# whose word table started from MiniLM's (../lite0-224-words: its quality.md has the training
# command, which also draws the scenes), then the trained and the completed model side by side on
# every pool (`vsparta eval`, top-n natural) and with held-out phrases asked alone
# (`python -m bench.heldout_alone`). Run from the repository root after the test command's install:
#   D=CACHE/objects-16000-500-1000-224-0 RUN=CACHE/runs/visualsparta-...-85f1a0d3/best bash THIS
# (RUN: the model folder the training command printed; ~12 min on 2 cores). HERE=FOLDER writes
# another run's figures elsewhere (lite0-320-words-completed: its RUN from ../lite0-320-words).
set -euo pipefail
: "${D:?the object scenes folder}" "${RUN:?the trained model folder}"
HERE=${HERE:-docs/quality-objects-1161/lite0-224-words-completed}
mkdir -p "$HERE"
WORK=${WORK:-$(mktemp -d)}
.venv/bin/vsparta complete-words --model "$RUN" --train "$D/train.jsonl" --val "$D/val.jsonl" --out "$WORK/completed"
cp "$WORK/completed/word-completion.json" "$HERE/"
for pool in test shift heldout_words heldout_objects; do
  for name in trained completed; do
    model=$RUN
    [ "$name" = completed ] && model=$WORK/completed
    .venv/bin/vsparta eval --manifest "$D/$pool.jsonl" --model "$model" --top-n natural --threads 2 \
      --no-progress --json "$HERE/$pool-$name.json"
  done
done
.venv/bin/python -m bench.heldout_alone --scenes "$D" --seed 0 --model "trained=$RUN" \
  --model "completed=$WORK/completed" --out-dir "$HERE" --feature-cache "$WORK/regions"
