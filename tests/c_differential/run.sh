#!/usr/bin/env bash
# Differential test of the TVM FFI C ABI: ~670 edge cases (C, compiled once against the official
# headers) run on our target/release/libtvm_ffi.so and on the official libtvm_ffi.so, one process
# per case and library; the outputs must agree (see README.md).
#
#   tests/c_differential/run.sh [--accepted FILE] [--valgrind] [--jobs N] [--timeout S]
#                               [--exclude SUBSTR]... [SUBSTR ...]
#
# Fails on a crash, abort or hang of our library and on a value or error-kind difference that is
# not in accepted.txt; --valgrind also runs our library's cases under memcheck. Builds the driver
# into .cache/c_differential/ (gcc, official headers, no rpath) when its sources change; fetches
# the official wheel with scripts/fetch-official.sh when missing. Report:
# .cache/c_differential/report.txt.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
pkg=$root/.cache/wheel/unpacked/tvm_ffi
out=$root/.cache/c_differential
bin=$out/cdiff

[[ -f "$pkg/lib/libtvm_ffi.so" && -f "$pkg/include/tvm/ffi/c_api.h" ]] || "$root/scripts/fetch-official.sh" >/dev/null
[[ -f "$root/target/release/libtvm_ffi.so" ]] || {
  echo "c_differential: target/release/libtvm_ffi.so is missing: build it first (cargo build --release)" >&2
  exit 2
}
if [[ " $* " == *" --valgrind "* ]] && ! command -v valgrind >/dev/null; then
  echo "c_differential: --valgrind needs valgrind on PATH" >&2
  exit 2
fi

mkdir -p "$out"
# Rebuilt when the sources, their list, the official headers or the command change.
sources=("$here"/common.h "$here"/common.c "$here"/cases_*.c)
cc=(${CC:-gcc} -std=gnu11 -g -O0 -Wall -Wextra -Wno-unused-parameter -I"$pkg/include")
stamp=$({ printf '%s\n' "${cc[@]}" "${sources[@]}"; cat "${sources[@]}" "$pkg"/include/tvm/ffi/c_api.h \
  "$pkg"/include/tvm/ffi/extra/c_env_api.h; } | sha256sum | cut -d' ' -f1)
if [[ ! -x "$bin" || "$(cat "$bin.stamp" 2>/dev/null)" != "$stamp" ]]; then
  # Linked against the official library only to satisfy the linker; no rpath, so at run time
  # LD_LIBRARY_PATH picks the library under test.
  "${cc[@]}" "$here"/common.c "$here"/cases_*.c -L"$pkg/lib" -ltvm_ffi -lpthread -o "$bin.tmp"
  mv "$bin.tmp" "$bin"
  echo "$stamp" >"$bin.stamp"
fi
exec python3 "$here/driver.py" "$@"
