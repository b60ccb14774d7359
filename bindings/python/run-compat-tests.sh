#!/usr/bin/env bash
# Runs the Python package's tests on the oldest Python it supports (3.9) with numpy 1.x, and on
# the newest Python found (3.13/3.12), each in its own venv under the checkout (.venv-compat-*).
# numpy < 2.1 has no versioned DLPack capsules and refuses read-only arrays; Python 3.9/3.10
# word some errors differently: the package must work on all of them. An interpreter that is
# not installed (python3.X on PATH or pyenv's ~/.pyenv/versions/3.X*) is skipped with a note.
#
#   bindings/python/run-compat-tests.sh [LIBDIR] [pytest arguments...]
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
libdir=${1:-$root/target/release}
[[ $# -gt 0 ]] && shift

find_python() { # 3.X -> an interpreter path, or nothing
  local v=$1 p
  for p in "$(command -v "python$v" 2>/dev/null)" "$HOME"/.pyenv/versions/"$v".*/bin/python"$v"; do
    # (a pyenv shim is on PATH even when that version is not selected: it must run)
    [[ -x $p ]] && "$p" -c "import venv" >/dev/null 2>&1 \
      && { echo "$p"; return; }
  done
}

status=0
ran=0
run_on() { # version, numpy requirement
  local v=$1 numpy=$2 py venv
  shift 2
  py=$(find_python "$v")
  if [[ -z $py ]]; then
    echo "run-compat-tests: Python $v not installed, skipped"
    return 1
  fi
  venv=$root/.venv-compat-$v
  if ! "$venv/bin/python" -c "import pytest, numpy" 2>/dev/null; then
    "$py" -m venv "$venv" && "$venv/bin/pip" install -q pytest "$numpy" || {
      echo "run-compat-tests: could not set up $venv (no network?), skipped"
      return 1
    }
  fi
  echo "run-compat-tests: Python $("$venv/bin/python" -c 'import sys, numpy; print(sys.version.split()[0], "numpy", numpy.__version__)')"
  ran=$((ran + 1))
  ANYFFI_VENV=$venv "$here/run-tests.sh" "$libdir" "$@" || status=1
}

run_on 3.9 "numpy<2" "$@"
run_on 3.13 numpy "$@" || run_on 3.12 numpy "$@"
[[ $ran -eq 0 ]] && echo "run-compat-tests: no other Python found; nothing ran"
exit $status
