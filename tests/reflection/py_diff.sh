#!/usr/bin/env bash
# Runs tests/reflection/py_smoke.py with the official tvm_ffi Python package on the official
# libtvm_ffi.so and on ours, and diffs the two outputs (spec §10.2 (b): an unpacked package on
# PYTHONPATH, the library under test at tvm_ffi/build/lib/, no apache-tvm-ffi installed).
#
# Usage: tests/reflection/py_diff.sh PYTHON [OURS_LIBDIR]
#   PYTHON       a CPython 3.11 with numpy, pytest and typing_extensions, WITHOUT apache-tvm-ffi
#   OURS_LIBDIR  default target/release
# Prints "N passed, N failed" (1 check: the outputs are identical); exits nonzero otherwise.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
py="${1:?usage: tests/reflection/py_diff.sh PYTHON [OURS_LIBDIR]}"
ours="$(cd "${2:-$repo/target/release}" && pwd)"
pkg="$repo/.cache/wheel/unpacked/tvm_ffi"
[[ -f "$pkg/__init__.py" ]] || { echo "py_diff.sh: run scripts/fetch-official.sh first" >&2; exit 2; }
"$py" -c "import importlib.metadata as m; m.version('apache-tvm-ffi')" 2>/dev/null &&
  { echo "py_diff.sh: apache-tvm-ffi is installed in that Python; use a clean venv" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for side in official ours; do
  mkdir -p "$tmp/$side"
  cp -r "$pkg" "$tmp/$side/tvm_ffi"
  mkdir -p "$tmp/$side/tvm_ffi/build/lib"
  lib="$pkg/lib/libtvm_ffi.so"
  [[ $side == ours ]] && lib="$ours/libtvm_ffi.so"
  cp "$lib" "$tmp/$side/tvm_ffi/build/lib/libtvm_ffi.so"
  (cd "$tmp" && PYTHONPATH="$tmp/$side" "$py" "$repo/tests/reflection/py_smoke.py" >"$tmp/$side.txt" 2>&1) ||
    echo "py_smoke.py exited nonzero on the $side library" >>"$tmp/$side.txt"
done
if diff -u "$tmp/official.txt" "$tmp/ours.txt"; then
  echo "py_smoke.py: $(wc -l <"$tmp/ours.txt") lines identical on both libraries"
  echo "1 passed, 0 failed"
else
  echo "1 passed, 1 failed" | sed 's/^1 passed/0 passed/'
  exit 1
fi
