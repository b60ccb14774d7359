#!/usr/bin/env bash
# Build and run the reflection conformance test against one libtvm_ffi.so.
#
# Usage: tests/reflection/run.sh [--valgrind] [--no-fork] LIBDIR [FILTER...]
#
#   LIBDIR     directory holding the libtvm_ffi.so under test, e.g.
#                .cache/wheel/unpacked/tvm_ffi/lib   (official)
#                target/release                      (ours)
#   --no-fork  run all tests in one process (default: one child per test)
#   --valgrind run once under valgrind memcheck (implies --no-fork)
#
# The test is compiled against the OFFICIAL headers (scripts/fetch-official.sh) with the
# framework of tests/c, linked without an rpath, and run with LD_LIBRARY_PATH=LIBDIR. It loads
# the official libtvm_ffi_testing.so (TVM_FFI_TESTING_LIB, default: the wheel's) against the
# library under test. Prints "N passed, N failed" last; exits nonzero on failure.
set -euo pipefail

die() {
  echo "tests/reflection/run.sh: error: $*" >&2
  exit 2
}

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
official="$repo/.cache/wheel/unpacked/tvm_ffi"
build="$repo/target/reflection-tests"
valgrind=0
args=()
libdir=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --valgrind) valgrind=1 ;;
    --no-fork) args+=(--no-fork) ;;
    -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) if [[ -z "$libdir" ]]; then libdir="$1"; else args+=("$1"); fi ;;
  esac
  shift
done
[[ -n "$libdir" ]] || die "missing LIBDIR (see --help)"
libdir="$(cd "$libdir" && pwd)" || die "no such directory"
[[ -f "$libdir/libtvm_ffi.so" ]] || die "no libtvm_ffi.so in $libdir"
[[ -f "$official/include/tvm/ffi/c_api.h" ]] ||
  die "official headers missing at $official; run scripts/fetch-official.sh first"
dlpack_inc="$official/3rdparty/dlpack/include"
[[ -f "$dlpack_inc/dlpack/dlpack.h" ]] || dlpack_inc="$official/include"

mkdir -p "$build"
"${CC:-gcc}" -std=c11 -O1 -g -Wall -Wextra -Wno-unused-parameter \
  -Werror=implicit-function-declaration -Werror=incompatible-pointer-types \
  -I "$official/include" -I "$dlpack_inc" -I "$repo/tests/c" -I "$repo/tests/reflection" \
  -o "$build/test_reflection" "$repo/tests/reflection/test_reflection.c" "$repo/tests/c/tffi_main.c" \
  -L "$official/lib" -ltvm_ffi -lpthread -ldl || die "build failed"

export LD_LIBRARY_PATH="$libdir"
export TVM_FFI_TESTING_LIB="${TVM_FFI_TESTING_LIB:-$official/lib/libtvm_ffi_testing.so}"
if [[ $valgrind -eq 0 ]]; then
  exec "$build/test_reflection" "${args[@]}"
fi
command -v valgrind >/dev/null 2>&1 || die "valgrind not found"
exec valgrind --quiet --suppressions="$repo/tests/valgrind.supp" --leak-check=full --errors-for-leak-kinds=definite,possible \
  --show-leak-kinds=definite,possible --error-exitcode=99 "$build/test_reflection" --no-fork "${args[@]}"
