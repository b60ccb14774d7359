#!/usr/bin/env bash
# Builds tests/cpp/*.cc against the official tvm-ffi headers and runs each against the
# libtvm_ffi.so in LIBDIR (ours: target/release; the official one: the wheel's lib/).
#
# Usage: tests/cpp/run.sh LIBDIR [TEST...]      e.g.  tests/cpp/run.sh target/release
# Env:   WHEEL (default: <repo>/.cache/wheel/unpacked/tvm_ffi), CXX (default: g++),
#        TVM_FFI_TESTING_LIB (default: the wheel's libtvm_ffi_testing.so, loaded by tests that
#        let the official C++ testing library check our containers)
# Prints each test's report and ends with "N passed, N failed" over all tests; exits non-zero
# on any failure.
set -euo pipefail

die() {
  echo "run.sh: error: $*" >&2
  exit 2
}

[[ $# -ge 1 ]] || die "usage: tests/cpp/run.sh LIBDIR [TEST...]"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
libdir="$(cd "$1" && pwd)" || die "no such directory: $1"
shift
[[ -f "$libdir/libtvm_ffi.so" ]] || die "$libdir has no libtvm_ffi.so"
wheel="${WHEEL:-$repo/.cache/wheel/unpacked/tvm_ffi}"
[[ -f "$wheel/include/tvm/ffi/c_api.h" ]] || die "official headers not found under $wheel (run scripts/fetch-official.sh)"
cxx="${CXX:-g++}"

tests=("$@")
if [[ ${#tests[@]} -eq 0 ]]; then
  for f in "$repo"/tests/cpp/*.cc; do tests+=("$(basename "$f" .cc)"); done
fi

build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT

total_pass=0
total_fail=0
for t in "${tests[@]}"; do
  src="$repo/tests/cpp/$t.cc"
  [[ -f "$src" ]] || die "no such test: $src"
  # Link against the library under test; header code needs only its C symbols (spec §1.3).
  "$cxx" -std=c++17 -O1 -g -Wall -Wno-unused-function \
    -I"$wheel/include" -I"$wheel/include/dlpack" \
    "$src" -o "$build/$t" -L"$libdir" -ltvm_ffi -ldl
  echo "== $t against $libdir/libtvm_ffi.so"
  set +e
  out="$(TVM_FFI_TESTING_LIB="${TVM_FFI_TESTING_LIB:-$wheel/lib/libtvm_ffi_testing.so}" \
    LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$build/$t" 2>&1)"
  rc=$?
  set -e
  echo "$out"
  line="$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -1)"
  if [[ -z "$line" ]]; then
    echo "$t: crashed or printed no summary (exit $rc)"
    total_fail=$((total_fail + 1))
    continue
  fi
  total_pass=$((total_pass + $(echo "$line" | cut -d' ' -f1)))
  total_fail=$((total_fail + $(echo "$line" | cut -d' ' -f3)))
  [[ $rc -eq 0 ]] || [[ "$(echo "$line" | cut -d' ' -f3)" != 0 ]] || total_fail=$((total_fail + 1))
done
echo "$total_pass passed, $total_fail failed"
[[ $total_fail -eq 0 ]]
