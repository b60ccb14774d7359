#!/usr/bin/env bash
# Build and run the standalone C test of the runtime.* packed functions.
#
# Usage: tests/c_runtime/run.sh [--valgrind] [LIBDIR]
#   LIBDIR  directory holding the libtvm_ffi.so to test (default: target/release of this repo;
#           build it first with `cargo build --release -p anyffi-runtime`)
#
# The test declares the few ABI structs and TVMFFI functions it needs itself, so it needs only
# a C compiler (CC, default gcc). The binary goes to target/c_runtime/. The last line printed is
# "N passed, N failed" (", N skipped" when the CUDA parts are skipped for lack of a driver); the
# exit status is nonzero when anything failed. --valgrind runs it under memcheck, failing on
# invalid accesses and on definite or possible leaks (tests/valgrind.supp applies).
set -euo pipefail
valgrind=0
if [[ "${1:-}" == "--valgrind" ]]; then
  valgrind=1
  shift
fi

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
libdir="${1:-$repo_root/target/release}"
libdir="$(cd "$libdir" && pwd)"
if [[ ! -f "$libdir/libtvm_ffi.so" ]]; then
  echo "tests/c_runtime/run.sh: error: $libdir/libtvm_ffi.so not found" >&2
  exit 2
fi
out="$repo_root/target/c_runtime"
mkdir -p "$out"
"${CC:-gcc}" -std=c11 -O1 -g -Wall -Wextra -Werror -o "$out/test_runtime" \
  "$repo_root/tests/c_runtime/test_runtime.c" -L"$libdir" -ltvm_ffi -Wl,-rpath,"$libdir"
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [[ $valgrind -eq 1 ]]; then
  exec valgrind --quiet --suppressions="$repo_root/tests/valgrind.supp" --leak-check=full \
    --show-leak-kinds=definite,possible --errors-for-leak-kinds=definite,possible \
    --error-exitcode=99 "$out/test_runtime"
fi
"$out/test_runtime"
