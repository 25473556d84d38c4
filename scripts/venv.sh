# Sourced by demo.sh and test.sh: make the virtual environment and install this project into it
# (editable, with the given extras) only when something that matters changed since the last time:
# the Python, the dependencies in pyproject.toml, the extras or this checkout's path. A rerun then
# starts at once, without pip. Setuptools' "Editable installation" notice (a warning block
# about folders named like packages) is informational and is not shown.
#
#   ensure_venv EXTRAS   ->  sets VENV (default .venv, or $VSPARTA_VENV)
ensure_venv() {
  local extras=$1
  VENV=${VSPARTA_VENV:-.venv}
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  local stamp="$VENV/.vsparta-install"
  local want
  want="$("$VENV/bin/python" -c 'import sys; print(sys.version)') $(pwd) [$extras] $(sha256sum pyproject.toml | cut -c1-64)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$VENV/bin/vsparta" ]; then
    return 0
  fi
  "$VENV/bin/python" -m pip install -q --upgrade pip
  PYTHONWARNINGS="ignore:Editable installation" "$VENV/bin/python" -m pip install -q -e ".[$extras]"
  printf '%s' "$want" > "$stamp"
}
