#!/bin/bash
# The stack's one-shot first-run step (docker-compose.yml service `first-run`, indexer image):
# from nothing to a searchable index, then it exits and the API starts.
#
# /data/images and /models/model are what the API serves: the demo volumes by default, or the
# user's folders (VSPARTA_IMAGES, VSPARTA_MODEL, mounted read-only). /demo/images and /demo/model
# are always the demo volumes. With the demo volumes it builds what `vsparta demo` builds (the
# object scenes of the whole catalog, the demo model trained on CPU, the training and test scenes
# indexed), through `vsparta demo` itself with the volumes as its folders and Elasticsearch as its
# index; with the user's model it indexes the user's folder.
# Every step is resumable: a second `up` reuses the scenes and the model, and --resume skips
# documents the index already has. A folder that cannot be used is reported in one sentence and
# left to the API to explain (/ready answers 503 with the reason), so the stack does not loop.
set -euo pipefail

log() { echo "first-run: $*" >&2; }
same_dir() { [ -d "$1" ] && [ -d "$2" ] && [ "$(stat -c %d:%i "$1")" = "$(stat -c %d:%i "$2")" ]; }

BACKEND=${VSPARTA_BACKEND:?VSPARTA_BACKEND is not set}
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

# `vsparta demo` with the stack's folders; its size is the demo's unless VSPARTA_DEMO_* say otherwise.
demo=(vsparta demo --out /demo/model/work --scenes /demo/images --no-serve --no-progress)
[ -n "${VSPARTA_DEMO_TRAIN_IMAGES:-}" ] && demo+=(--train-images "$VSPARTA_DEMO_TRAIN_IMAGES")
[ -n "${VSPARTA_DEMO_TEST_IMAGES:-}" ] && demo+=(--test-images "$VSPARTA_DEMO_TEST_IMAGES")
[ -n "${VSPARTA_DEMO_EPOCHS:-}" ] && demo+=(--epochs "$VSPARTA_DEMO_EPOCHS")
trained=0
if [ -f /models/model/tokenizer.json ]; then
  demo+=(--model /models/model) # the user's model, or the demo model an earlier run trained
else
  trained=1
fi

if [ $demo_images = 1 ]; then
  log "building the demo into $BACKEND (scenes, CPU training and indexing resume where they stopped)"
  "${demo[@]}" --backend "$BACKEND"
elif [ $trained = 1 ]; then
  log "training the demo model on CPU for your images (resumes from its last checkpoint)"
  "${demo[@]}" --no-index
fi
if [ $trained = 1 ]; then
  cp -r /demo/model/work/model/final/. /demo/model/
fi
if [ $demo_images = 0 ]; then
  log "indexing /data/images into $BACKEND"
  vsparta index /data/images --model /models/model --backend "$BACKEND" --device "${VSPARTA_DEVICE:-auto}" \
    --resume --no-progress
fi
log "done"
