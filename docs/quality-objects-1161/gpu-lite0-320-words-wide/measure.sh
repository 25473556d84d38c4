#!/usr/bin/env bash
# docs/quality-objects-1161/gpu-lite0-320-words-wide: the model run.sh trained on the H200 (its
# best checkpoint, epoch 11 of 12), read on the CPU here: every pool at 320 px and at 256, 320 and
# 480 px (`python -m bench.index_scales`), then completed (`vsparta complete-words`, the trained and
# the completed model on every pool, held-out phrases asked alone: ../lite0-224-words-completed/
# measure.sh), and the completed model read at the three sizes. From the repository root after the
# test command's install:
#   D=CACHE/objects-16000-500-1000-224-0 RUN=FOLDER/best bash THIS
# D: `vsparta scenes --kind objects --out D --train 16000 --val 500 --test 1000 --heldout-words 1000
# --heldout-objects 1000 --shift 1000 --size 224 --seed 0` (the scenes run.sh drew: same seed, same
# bytes; its 320 px figures agree with the GPU's own to 0.05 points). RUN: `cat
# model-best.tgz.* | tar xzf -` from the device run's files. ~50 min on 2 cores.
set -euo pipefail
: "${D:?the object scenes folder}" "${RUN:?the trained model folder}"
HERE=${HERE:-docs/quality-objects-1161/gpu-lite0-320-words-wide}  # HERE=FOLDER: another GPU row (../gpu-lite0-320-words-wide-tuned)
.venv/bin/python -m bench.index_scales --model "$RUN" --data "$D" --scales 320 --scales 256,320,480 \
  --device cpu --out-dir "$HERE"
cp "$RUN/config.json" "$HERE/model-config.json"
WORK=${WORK:-$(mktemp -d)}
HERE=$HERE/completed WORK=$WORK bash docs/quality-objects-1161/lite0-224-words-completed/measure.sh
.venv/bin/python -m bench.index_scales --model "$WORK/completed" --data "$D" --scales 256,320,480 \
  --device cpu --out-dir "$HERE/completed-scales"
