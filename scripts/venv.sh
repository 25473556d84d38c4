# Sourced by demo.sh and test.sh: make the virtual environment and install this project into it
# (editable, with the given extras) only when something that matters changed since the last time:
# the Python, the dependencies in pyproject.toml (and bench/pyproject.toml), the extras or this
# checkout's path. A rerun then starts at once, without pip. Setuptools' "Editable installation"
# notice (a warning block about folders named like packages) is informational and is not shown.
#
# The benchmarks are a distribution of their own (bench/pyproject.toml, not in the product's
# wheel): the extras `all` and `bench` install it too (`bench` is not an extra of the product).
#
#   ensure_venv EXTRAS   ->  sets VENV (default .venv, or $VSPARTA_VENV)
ensure_venv() {
  local extras=$1
  VENV=${VSPARTA_VENV:-.venv}
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  local stamp="$VENV/.vsparta-install"
  local want
  want="$("$VENV/bin/python" -c 'import sys; print(sys.version)') $(pwd) [$extras] $(cat pyproject.toml bench/pyproject.toml 2>/dev/null | sha256sum | cut -c1-64)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$VENV/bin/vsparta" ]; then
    return 0
  fi
  local product targets
  product=$(echo ",$extras," | sed 's/,bench,/,/g; s/^,*//; s/,*$//')
  targets=(-e ".${product:+[$product]}")
  case ",$extras," in
  *,all,* | *,bench,*) targets+=(-e ./bench) ;;
  esac
  "$VENV/bin/python" -m pip install -q --upgrade pip
  PYTHONWARNINGS="ignore:Editable installation" "$VENV/bin/python" -m pip install -q "${targets[@]}"
  printf '%s' "$want" > "$stamp"
}
