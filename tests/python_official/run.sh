#!/usr/bin/env bash
# Runs the official `tvm_ffi` Python package (and the official libtvm_ffi_testing.so it loads)
# on one libtvm_ffi.so, with pytest on tests/python_official/.
#
#   tests/python_official/run.sh LIBDIR [pytest args...]
#   tests/python_official/run.sh --record-golden     (rewrites golden.json; official library only)
#   tests/python_official/run.sh --stub-missing LIBDIR [pytest args...]
#       diagnostic only: global functions and types the official library has and LIBDIR lacks are
#       stubbed (calls raise RuntimeError) so `import tvm_ffi` gets through and the rest of the
#       suite can report what else fails (diagnostic_stubs.py); never a verdict
#
# LIBDIR is a directory holding libtvm_ffi.so. The official one is
# .cache/wheel/unpacked/tvm_ffi/lib (run it first: the suite must pass there, which proves the
# tests); ours is target/release. Setup is idempotent:
#   - .cache/venv-pyofficial: numpy, pytest, typing_extensions, ml_dtypes, and NOT apache-tvm-ffi
#     (an installed distribution's RECORD would win the library search, spec §10.1);
#   - .cache/tvmffi-under-test/<name>/tvm_ffi: a fresh copy of the unpacked official package;
#     for a library other than the official one, LIBDIR/libtvm_ffi.so is copied to
#     tvm_ffi/build/lib/, which the package's loader prefers to tvm_ffi/lib/ (spec §10.2 (b)).
# conftest.py then checks /proc/self/maps: exactly one libtvm_ffi.so mapped, the one under test.
# The exit status is pytest's; its closing line is the result.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/tests/python_official"
wheel_pkg="$root/.cache/wheel/unpacked/tvm_ffi"
venv="$root/.cache/venv-pyofficial"

record=0
stub=0
if [[ "${1:-}" == "--stub-missing" ]]; then
  stub=1
  shift
elif [[ "${1:-}" == "--record-golden" ]]; then
  record=1
  set -- "$wheel_pkg/lib"
fi
[[ $# -ge 1 ]] || { echo "usage: $0 LIBDIR [pytest args...] | --record-golden" >&2; exit 2; }
libdir="$(cd "$1" && pwd)"
shift
[[ -f "$libdir/libtvm_ffi.so" ]] || { echo "$0: no libtvm_ffi.so in $libdir" >&2; exit 2; }
[[ -d "$wheel_pkg" ]] || "$root/scripts/fetch-official.sh"

# --- the virtual environment ------------------------------------------------------------
# shellcheck source=package.sh
source "$here/package.sh"
ensure_venv "$venv" "numpy, pytest, typing_extensions, ml_dtypes" numpy pytest typing_extensions ml_dtypes

# --- the package under test ---------------------------------------------------------------
official_lib="$(cd "$wheel_pkg/lib" && pwd)"
name="$(library_name "$root" "$wheel_pkg" "$libdir")"
pkgroot="$root/.cache/tvmffi-under-test/$name"
expected="$(stage_package "$wheel_pkg" "$libdir" "$name" "$pkgroot")"

export PYTHONPATH="$pkgroot"
export PYTHONNOUSERSITE=1
export PYTHONDONTWRITEBYTECODE=1
export TVMFFI_UNDER_TEST_LIB="$expected"
export TVMFFI_UNDER_TEST_NAME="$name"
export TVMFFI_OFFICIAL_INCLUDE="$wheel_pkg/include"
export TVMFFI_OFFICIAL_LIBDIR="$official_lib"
unset LD_LIBRARY_PATH LD_PRELOAD TVMFFI_DIAGNOSTIC_STUBS
if [[ $stub -eq 1 ]]; then
  [[ "$name" != official ]] || { echo "$0: --stub-missing is for libraries other than the official one" >&2; exit 2; }
  export TVMFFI_DIAGNOSTIC_STUBS=1
  echo "run.sh: DIAGNOSTIC MODE: missing global functions and types are stubbed; not a verdict"
fi

if [[ $record -eq 1 ]]; then
  exec "$venv/bin/python" "$here/record_golden.py" "$here/golden.json"
fi
echo "run.sh: library under test: $libdir/libtvm_ffi.so (as $expected)"
cd "$here"
exec "$venv/bin/python" -m pytest -p no:cacheprovider -q "$here" "$@"
