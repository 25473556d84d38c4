#!/usr/bin/env bash
# Issue 30 on a GPU: the recommended preset `lite0-320-words-wide` with the stem fine-tuned end to
# end (Lite0 at 1e-4, the new parts at 2e-3, batch 64), from ImageNet's weights, on the 16,000
# scenes of ../gpu-lite0-320-words-wide (frozen there: test 60.2, shift 40.2, 0.67): does training
# the stem on the generator's pictures keep more of the shift split, or less? Then the best epoch
# read at 320 px and at 256, 320 and 480 px (bench/index_scales.py). One device command; everything
# lands in $OUT (results.tgz; the trained model as model-best.tgz.*, parts of at most 15 MiB).
#
# Here, first (with network), the git-ignored .gpurow/ (~45 MB):
#   bash docs/quality-objects-1161/gpu-lite0-320-s16-words/carry.sh
# Then on the device tool: carry [".gpurow"], command `LIMIT=560 bash THIS_FILE` (timeout 590).
# The training gets what the scenes and the sizes' reading leave (its timeout ends it; each better
# epoch is kept as it comes). DRY=1: toy sizes, on the CPU.
#
# Ran once, 2026-12-04 (one H200, 16-core Xeon; 451 s): scenes ~50 s, 6 epochs 270 s, the sizes'
# reading ~70 s. Read here from the model that came back (the scenes drawn again by seed):
#   D=.../objects-16000-500-1000-224-0 RUN=.../best HERE=docs/quality-objects-1161/gpu-lite0-320-words-wide-tuned \
#     bash docs/quality-objects-1161/gpu-lite0-320-words-wide/measure.sh
# docs/transformer-width.md, "On one H200, the stem fine-tuned end to end".
set -uo pipefail
cd "$(dirname "$0")/../../.."
DEFAULT_LIMIT=560
source docs/quality-objects-1161/gpu-row-env.sh  # $out, $res, $limit, left, stage_wheels, pack_results
cache=$(mktemp -d /tmp/wide-tuned.XXXXXX)
stage_wheels "$cache"
config=lite0-320-words-wide
if [ -n "${DRY:-}" ]; then
  sizes=(--train 64 --val 16 --test 16 --heldout 16) epochs=1
  config='{"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64,
    "stem": "efficientnet_lite0", "image_size": 64, "grid_size": 2, "sparsity_loss": "flops",
    "sparsity_weight": 0.0005, "word_embeddings_from": "sentence-transformers/all-MiniLM-L6-v2"}'
  scales=(--scales 64 --scales 64,96)
else
  sizes=(--train 16000 --val 500 --test 1000 --heldout 1000) epochs=${EPOCHS:-6}
  scales=(--scales 320 --scales 256,320,480)
fi

echo "== stem fine-tuned, at most $epochs epochs ($(left) s left)"
timeout $(($(left) - ${SCALES_S:-75})) bash scripts/gpu-check.sh cli bench quality --kind objects \
  "${sizes[@]}" --size 224 --batch-size 64 --seed 0 --init none --cache-dir "$cache" --config "$config" \
  --lrs 2e-3 --pretrained-lr 2e-3 --fine-tune-stem --stem-lr 1e-4 --weights 5e-4 --augment-views 2 \
  --no-dense --epochs "$epochs" --patience 2 --out-dir "$res/tuned" >"$res/tuned.log" 2>&1
echo "== tuned: rc $?"
best=$(ls -d "$cache"/runs/*/best 2>/dev/null | head -1)
data=$(ls -d "$cache"/objects-* 2>/dev/null | head -1)
if [ -n "$best" ]; then
  echo "== read at several sizes ($(left) s left)"
  timeout $(($(left) - 10)) bash scripts/gpu-check.sh module vsparta.bench.index_scales \
    --model "$best" --data "$data" "${scales[@]}" --out-dir "$res/tuned-scales" >"$res/tuned-scales.log" 2>&1
  echo "== index scales: rc $?"
  tar czf - -C "$(dirname "$best")" best | split -b 15M -d - "$out/model-best.tgz."
fi
rm -rf "$cache"
pack_results
grep -h "^| " "$out"/tuned-scales-index-scales.md 2>/dev/null
