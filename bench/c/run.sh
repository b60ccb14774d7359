#!/usr/bin/env bash
# Build and run the C ABI micro-benchmarks, official libtvm_ffi.so vs ours.
#
# Usage: bench/c/run.sh [OURS_LIBDIR] [-- BENCH_ARGS...]
#
#   OURS_LIBDIR  directory with our libtvm_ffi.so (default: target/release).
#                If it has no libtvm_ffi.so, only the official numbers are shown.
#   BENCH_ARGS   passed to bench_abi, e.g. --reps 21 --ms 50
#
# Both libraries are dlopen'ed into one process (RTLD_LOCAL) and measured
# interleaved; the table shows median ns/op and ours/official (target <= 1.0).
# Needs the official wheel: scripts/fetch-official.sh. Output binary goes to
# target/cbench/. Env: CC (default gcc).
set -euo pipefail

die() {
  echo "bench/c/run.sh: error: $*" >&2
  exit 2
}

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
official="$repo_root/.cache/wheel/unpacked/tvm_ffi"
official_so="$official/lib/libtvm_ffi.so"
build_dir="$repo_root/target/cbench"
bin="$build_dir/bench_abi"

ours_dir="$repo_root/target/release"
bench_args=()
if [[ $# -gt 0 && "$1" != "--" ]]; then
  ours_dir="$1"
  shift
fi
if [[ $# -gt 0 && "$1" == "--" ]]; then
  shift
  bench_args=("$@")
fi

[[ -f "$official/include/tvm/ffi/c_api.h" && -f "$official_so" ]] ||
  die "official wheel missing at $official; run scripts/fetch-official.sh first"

dlpack_inc="$official/3rdparty/dlpack/include"
[[ -f "$dlpack_inc/dlpack/dlpack.h" ]] || dlpack_inc="$official/include"

CC="${CC:-gcc}"
mkdir -p "$build_dir"
src="$repo_root/bench/c/bench_abi.c"
if [[ ! -x "$bin" || "$src" -nt "$bin" || "${BASH_SOURCE[0]}" -nt "$bin" ]]; then
  echo "building $bin" >&2
  "$CC" -std=c11 -O2 -g -Wall -Wextra -Wno-unused-parameter \
    -I "$official/include" -I "$dlpack_inc" \
    -o "$bin.tmp" "$src" -ldl || die "build failed"
  mv -f "$bin.tmp" "$bin"
fi

args=("$official_so")
if [[ -f "$ours_dir/libtvm_ffi.so" ]]; then
  args+=("$(cd "$ours_dir" && pwd)/libtvm_ffi.so")
else
  echo "note: no libtvm_ffi.so in $ours_dir; showing official numbers only" >&2
fi

# Neither library may come from LD_LIBRARY_PATH: both are opened by full path.
unset LD_LIBRARY_PATH
exec "$bin" "${bench_args[@]}" "${args[@]}"
