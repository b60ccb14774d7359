#!/usr/bin/env bash
# An older official Python package (apache-tvm-ffi 0.1.x before 0.1.15.post2) runs its own test
# suite (tests/python of its sdist) on our library exactly as it runs on the official 0.1.15.post2
# library: the script runs the suite on both and fails if ours fails a test that the official
# library passes. (Some tests of an older package fail on both: globals the official library
# dropped or renamed since; those are the official project's changes, not ours.)
#
#   tests/older_packages/run.sh VERSION [LIBDIR]      e.g. 0.1.14.post1 (LIBDIR: target/release)
#
# Not part of ./test (one version takes 5-15 minutes and downloads the wheel and the sdist from
# PyPI). Session 24 ran 0.1.0, 0.1.3, 0.1.5, 0.1.8.post2, 0.1.10, 0.1.12, 0.1.13.post3 and
# 0.1.14.post1: no test failed on ours that passes on the official library. 0.1.0's testing
# library needs `__cxa_call_terminate` (libstdc++ of GCC 14), and 0.1.8.post2's package calls
# `ffi.MapGetMissingObject` at import; neither imports on either library.
#
# Each version's package is staged with the library under test as tvm_ffi/lib/libtvm_ffi.so
# (the first place every version's loader looks, and core.so's RUNPATH), with its own
# libtvm_ffi_testing.so; tests/upstream_python/conftest.py stops the run unless exactly that
# library is mapped.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[[ $# -ge 1 ]] || { echo "usage: $0 VERSION [LIBDIR]" >&2; exit 2; }
ver=$1
libdir="$(cd "${2:-$root/target/release}" && pwd)"
[[ -f "$libdir/libtvm_ffi.so" ]] || { echo "$0: no libtvm_ffi.so in $libdir" >&2; exit 2; }
official="$root/.cache/wheel/unpacked/tvm_ffi/lib"
[[ -d "$official" ]] || "$root/scripts/fetch-official.sh" >/dev/null
venv="$root/.cache/venv-upstream"
# shellcheck source=../python_official/package.sh
source "$root/tests/python_official/package.sh"
ensure_venv "$venv" "numpy, pytest, xdist, typing_extensions, ml_dtypes, ninja" \
  numpy pytest pytest-xdist typing_extensions ml_dtypes ninja

cache="$root/.cache/older-packages/$ver"
mkdir -p "$cache/dl"
if [[ ! -d "$cache/wheel/tvm_ffi" ]]; then
  "$venv/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.11 "apache-tvm-ffi==$ver" -d "$cache/dl"
  rm -rf "$cache/wheel" && mkdir -p "$cache/wheel"
  (cd "$cache/wheel" && python3 -m zipfile -e "$cache"/dl/apache_tvm_ffi-*.whl .)
fi
if [[ ! -d "$cache/sdist/tests/python" ]]; then
  # the sdist's URL from PyPI's simple index, JSON form (`pip download --no-binary` would build
  # its build dependencies, cmake among them, from source)
  "$venv/bin/python" - "$ver" "$cache/dl" <<'PY'
import json, os, sys, urllib.request
ver, dest = sys.argv[1], sys.argv[2]
req = urllib.request.Request("https://pypi.org/simple/apache-tvm-ffi/",
                             headers={"Accept": "application/vnd.pypi.simple.v1+json"})
with urllib.request.urlopen(req) as r:
    files = json.load(r)["files"]
name = f"apache_tvm_ffi-{ver}.tar.gz"
url = next(f["url"] for f in files if f["filename"] == name)
urllib.request.urlretrieve(url, os.path.join(dest, name))
PY
  rm -rf "$cache/sdist" && mkdir -p "$cache/sdist"
  tar -xzf "$cache"/dl/apache_tvm_ffi-*.tar.gz -C "$cache/sdist" --strip-components=1
fi

run_on() {  # run_on NAME LIBFILE: junit XML at $cache/NAME.xml
  local name=$1 lib=$2 work="$cache/work-$1"
  rm -rf "$work" && mkdir -p "$work/pkg"
  cp -a "$cache/wheel/tvm_ffi" "$work/pkg/tvm_ffi"
  cp "$lib" "$work/pkg/tvm_ffi/lib/libtvm_ffi.so"
  # loaders before 0.1.13 find the package's files through its installed metadata
  cp -a "$cache"/wheel/*.dist-info "$work/pkg/"
  cp -a "$cache/sdist/tests/python" "$work/tests"
  # the identity check of tests/upstream_python (no 0.1.x suite has a conftest of its own)
  [[ ! -f "$work/tests/conftest.py" ]] ||
    { echo "$0: apache-tvm-ffi $ver's suite has a conftest.py; the identity check would replace it" >&2; exit 2; }
  cp "$root/tests/upstream_python/conftest.py" "$work/tests/conftest.py"
  : >"$work/pytest.ini"
  echo "run.sh: apache-tvm-ffi $ver tests/python on $name ($lib)"
  (cd "$work/tests" && env -u LD_LIBRARY_PATH -u LD_PRELOAD PYTHONPATH="$work/pkg" PYTHONNOUSERSITE=1 \
    PYTHONDONTWRITEBYTECODE=1 TVMFFI_UNDER_TEST_LIB="$work/pkg/tvm_ffi/lib/libtvm_ffi.so" \
    PATH="$venv/bin:$PATH" "$venv/bin/python" -m pytest -c "$work/pytest.ini" --rootdir "$work/tests" \
    -p no:cacheprovider -q -n "${UPSTREAM_JOBS:-2}" --junitxml="$cache/$name.xml" . | tail -3) || true
}
run_on official "$official/libtvm_ffi.so"
run_on ours "$libdir/libtvm_ffi.so"
"$venv/bin/python" "$root/tests/older_packages/compare.py" "$cache/official.xml" "$cache/ours.xml"
