#!/usr/bin/env bash
# Runs the official project's own Python test-suite (tests/python of the official sdist, the
# same version as the wheel) with the official `tvm_ffi` package on one libtvm_ffi.so.
#
#   tests/upstream_python/run.sh LIBDIR [pytest args...]
#
# LIBDIR holds libtvm_ffi.so: the official .cache/wheel/unpacked/tvm_ffi/lib (run it first: the
# suite must pass there, which proves the setup) or ours, target/release. Setup is idempotent:
#   - .cache/sdist/apache_tvm_ffi-<ver>: the sdist (scripts/fetch-official-sdist.sh), untouched;
#   - .cache/venv-upstream: numpy, pytest, pytest-xdist, typing_extensions, ml_dtypes, ninja
#     (the suite builds C++ modules with tvm_ffi.cpp, which drives ninja and g++), and NOT
#     apache-tvm-ffi;
#   - .cache/upstream-python/<name>/pkg/tvm_ffi: a fresh copy of the wheel's package; for a
#     library other than the official one, LIBDIR/libtvm_ffi.so goes to tvm_ffi/build/lib/,
#     which the package's loader prefers (spec §10.2 (b));
#   - .cache/upstream-python/<name>/tests: a fresh copy of the suite plus conftest.py (this
#     directory), which stops the run unless exactly the library under test is mapped.
# Tests skipped there are those needing torch, CUDA or a newer/free-threaded Python.
# UPSTREAM_JOBS sets the pytest-xdist worker count (default 2); UPSTREAM_VENV another venv (one
# with torch installed runs the torch tests too: .venv-torch, see AGENTS.md). The exit status is
# pytest's.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/tests/upstream_python"
wheel_pkg="$root/.cache/wheel/unpacked/tvm_ffi"
venv="${UPSTREAM_VENV:-$root/.cache/venv-upstream}"

[[ $# -ge 1 ]] || { echo "usage: $0 LIBDIR [pytest args...]" >&2; exit 2; }
libdir="$(cd "$1" && pwd)"
shift
[[ -f "$libdir/libtvm_ffi.so" ]] || { echo "$0: no libtvm_ffi.so in $libdir" >&2; exit 2; }
[[ -d "$wheel_pkg" ]] || "$root/scripts/fetch-official.sh" >/dev/null
sdist="$("$root/scripts/fetch-official-sdist.sh")"

# shellcheck source=../python_official/package.sh
source "$root/tests/python_official/package.sh"
ensure_venv "$venv" "numpy, pytest, xdist, typing_extensions, ml_dtypes, ninja" \
  numpy pytest pytest-xdist typing_extensions ml_dtypes ninja

name="$(library_name "$root" "$wheel_pkg" "$libdir")"
work="$root/.cache/upstream-python/$name"
rm -rf "$work"
expected="$(stage_package "$wheel_pkg" "$libdir" "$name" "$work/pkg")"
cp -a "$sdist/tests/python" "$work/tests"
cp "$here/conftest.py" "$work/tests/conftest.py"
: >"$work/pytest.ini"

export PATH="$venv/bin:$PATH"
export PYTHONPATH="$work/pkg"
export PYTHONNOUSERSITE=1
export PYTHONDONTWRITEBYTECODE=1
export TVMFFI_UNDER_TEST_LIB="$expected"
unset LD_LIBRARY_PATH LD_PRELOAD
echo "run.sh: official tests/python on $libdir/libtvm_ffi.so (as $expected)"
cd "$work/tests"
exec "$venv/bin/python" -m pytest -c "$work/pytest.ini" --rootdir "$work/tests" -p no:cacheprovider \
  -q -n "${UPSTREAM_JOBS:-2}" . "$@"
