#!/usr/bin/env bash
# Container benchmark: ours vs the official libtvm_ffi.so in one process (see bench_containers.c).
#
# Usage: bench/containers/run.sh [ROUNDS]        (default 200 rounds; builds ours with --release)
# Env:   WHEEL (default: <repo>/.cache/wheel/unpacked/tvm_ffi), CC (default: cc), SKIP_BUILD=1
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
wheel="${WHEEL:-$repo/.cache/wheel/unpacked/tvm_ffi}"
[[ -f "$wheel/lib/libtvm_ffi.so" ]] || { echo "run.sh: official wheel not found under $wheel" >&2; exit 2; }
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  (cd "$repo" && cargo build --release -j 2 --quiet)
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
"${CC:-cc}" -O2 -std=c11 -D_GNU_SOURCE -I"$wheel/include" -I"$wheel/include/dlpack" \
  "$repo/bench/containers/bench_containers.c" -o "$out/bench_containers" -ldl
"$out/bench_containers" "$repo/target/release/libtvm_ffi.so" "$wheel/lib/libtvm_ffi.so" "${1:-200}"
