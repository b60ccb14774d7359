#!/usr/bin/env bash
# Runs the Python package's tests against one libtvm_ffi.so: ours by default, or the one in LIBDIR
# (the official library's folder also holds libtvm_ffi_testing.so, which the tests load).
#
#   bindings/python/run-tests.sh [LIBDIR] [pytest arguments...]
#
# Uses the venv $ANYFFI_VENV (default: .venv at the checkout root), creating it with pytest and
# numpy when they are missing, and adding ml_dtypes (bfloat16/float8 numpy arrays).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
libdir=${1:-$root/target/release}
[[ $# -gt 0 ]] && shift
venv=${ANYFFI_VENV:-$root/.venv}
if ! "$venv/bin/python" -c "import pytest, numpy" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q pytest numpy
fi
# bfloat16/float8 numpy arrays (test_ml_dtypes.py); without it those tests skip
"$venv/bin/python" -c "import ml_dtypes" 2>/dev/null || "$venv/bin/pip" install -q ml_dtypes ||
  echo "run-tests.sh: pip could not install ml_dtypes; its tests skip" >&2
ANYFFI_LIBRARY="$libdir/libtvm_ffi.so" exec "$venv/bin/python" -m pytest -q "$here/tests" "$@"
