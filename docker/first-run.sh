#!/bin/bash
# The stack's one-shot first-run step (docker-compose.yml service `first-run`, indexer image):
# from nothing to a searchable index, then it exits and the API starts.
#
# /data/images and /models/model are what the API serves: the demo volumes by default, or the
# user's folders (VSPARTA_IMAGES, VSPARTA_MODEL, mounted read-only). /demo/images and /demo/model
# are always the demo volumes. With the demo volumes it generates the scenes, trains the demo
# model on CPU and indexes the test scenes; with the user's model it indexes the user's folder.
# Every step is resumable: a second `up` reuses the scenes and the model, and --resume skips
# documents the index already has. A folder that cannot be used is reported in one sentence and
# left to the API to explain (/ready answers 503 with the reason), so the stack does not loop.
set -euo pipefail

log() { echo "first-run: $*" >&2; }
same_dir() { [ -d "$1" ] && [ -d "$2" ] && [ "$(stat -c %d:%i "$1")" = "$(stat -c %d:%i "$2")" ]; }

BACKEND=${VSPARTA_BACKEND:?VSPARTA_BACKEND is not set}
TRAIN=${VSPARTA_DEMO_TRAIN_IMAGES:-2000}
TEST=${VSPARTA_DEMO_TEST_IMAGES:-300}
EPOCHS=${VSPARTA_DEMO_EPOCHS:-10}
demo_images=0
demo_model=0
same_dir /data/images /demo/images && demo_images=1
same_dir /models/model /demo/model && demo_model=1

if [ ! -f /models/model/tokenizer.json ] && [ $demo_model = 0 ]; then
  log "VSPARTA_MODEL holds no saved model (no tokenizer.json): nothing indexed; the API reports it on /ready"
  exit 0
fi
if [ $demo_images = 0 ] && [ -z "$(ls -A /data/images 2>/dev/null)" ]; then
  log "VSPARTA_IMAGES is missing or empty: nothing indexed; the API reports it on /ready"
  exit 0
fi

if [ $demo_images = 1 ] || [ ! -f /models/model/tokenizer.json ]; then
  if [ ! -f /demo/images/test.jsonl ]; then
    log "generating the demo scenes ($TRAIN training, $TEST test)"
    vsparta scenes --out /demo/images --train "$TRAIN" --val 100 --test "$TEST" --no-progress
  fi
fi
if [ ! -f /models/model/tokenizer.json ]; then
  log "training the demo model on CPU ($EPOCHS epochs; resumes from its last checkpoint)"
  resume=()
  [ -d /demo/model/run ] && resume=(--resume)
  vsparta train --manifest /demo/images/train.jsonl --out /demo/model/run --config tiny \
    --epochs "$EPOCHS" --lr 5e-3 --device cpu --no-progress "${resume[@]}"
  cp -r /demo/model/run/final/. /demo/model/
fi
if [ $demo_images = 1 ]; then
  source=(/data/images/test.jsonl)
else
  source=(/data/images)
fi
log "indexing ${source[*]} into $BACKEND"
vsparta index "${source[@]}" --model /models/model --backend "$BACKEND" --device "${VSPARTA_DEVICE:-auto}" \
  --resume --no-progress
log "done"
