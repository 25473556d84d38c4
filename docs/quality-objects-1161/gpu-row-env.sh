# Sourced by the GPU rows' run.sh (gpu-*/run.sh beside this file) after `cd` to the repository root:
# what runs there reads the carried .gpurow/ (gpu-check.sh's packages, the emoji font and list the
# object scenes draw with), writes under $OUT/r (archived by the script at its end), and spends at
# most LIMIT seconds (DEFAULT_LIMIT unless set), which `left` counts down.
export PYTHONUNBUFFERED=1 GPU_CHECK_CARRY=.gpurow
export VSPARTA_EMOJI_FONT=.gpurow/NotoColorEmoji.ttf VSPARTA_EMOJI_TEST=.gpurow/emoji-test.txt
out=${OUT:-gpu-row-out}
res=$out/r
mkdir -p "$res"
limit=${LIMIT:-$DEFAULT_LIMIT}  # seconds for everything; the device command's timeout is a little more
left() { echo $((limit - SECONDS)); }
# The carried wheels installed once under $1 (gpu-check.sh then skips its own install on every call).
stage_wheels() {
  if ! "${PYTHON:-python3}" -c "import pydantic_settings" 2>/dev/null; then
    "${PYTHON:-python3}" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --target "$1/site" .gpurow/wheels/*.whl
    export PYTHONPATH="$1/site${PYTHONPATH:+:$PYTHONPATH}"
  fi
}
# At the end: each step's table beside one archive of $res (named after its step), and the listing.
pack_results() {
  local f
  for f in "$res"/*/*.md; do
    [ -f "$f" ] && cp "$f" "$out/$(basename "$(dirname "$f")")-$(basename "$f")"
  done
  tar czf "$out/results.tgz" -C "$res" . && rm -rf "$res"
  ls -la "$out"
}
