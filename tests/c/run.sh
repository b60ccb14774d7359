#!/usr/bin/env bash
# Build and run the C conformance suite against one libtvm_ffi.so.
#
# Usage: tests/c/run.sh [--valgrind] [--no-fork] [--rebuild] LIBDIR [FILTER...]
#
#   LIBDIR       directory holding the libtvm_ffi.so to test, e.g.
#                  .cache/wheel/unpacked/tvm_ffi/lib   (official)
#                  target/release                      (ours)
#   --valgrind   run once under valgrind memcheck (implies --no-fork); definite
#                leaks or memory errors count as one extra failure
#   --no-fork    run all tests in one process (default: one child per test, so
#                a crash fails only that test)
#   --rebuild    force a rebuild of the test binary
#   FILTER       only run tests whose name contains one of these substrings
#
# The suite is compiled against the OFFICIAL headers from the wheel (run
# scripts/fetch-official.sh first) and linked with -L<official lib> -ltvm_ffi
# without an rpath; the library actually used is chosen by LD_LIBRARY_PATH.
# The binary goes to target/ctests/. Env: CC (default gcc), CFLAGS_EXTRA.
#
# The last line printed is "N passed, N failed" (", N skipped" appended when
# tests were skipped); the exit status is nonzero when anything failed.
set -euo pipefail

die() {
  echo "tests/c/run.sh: error: $*" >&2
  exit 2
}

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
src_dir="$repo_root/tests/c"
official="$repo_root/.cache/wheel/unpacked/tvm_ffi"
build_dir="$repo_root/target/ctests"
bin="$build_dir/tffi_tests"

use_valgrind=0
rebuild=0
runner_args=()
libdir=""
filters=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --valgrind) use_valgrind=1 ;;
    --no-fork) runner_args+=(--no-fork) ;;
    --rebuild) rebuild=1 ;;
    -h|--help) sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1" ;;
    *)
      if [[ -z "$libdir" ]]; then libdir="$1"; else filters+=("$1"); fi
      ;;
  esac
  shift
done
[[ -n "$libdir" ]] || die "missing LIBDIR (see --help)"
[[ -d "$libdir" ]] || die "LIBDIR $libdir is not a directory"
libdir="$(cd "$libdir" && pwd)"
[[ -f "$libdir/libtvm_ffi.so" ]] || die "no libtvm_ffi.so in $libdir"
[[ -f "$official/include/tvm/ffi/c_api.h" ]] ||
  die "official headers missing at $official; run scripts/fetch-official.sh first"

dlpack_inc="$official/3rdparty/dlpack/include"
[[ -f "$dlpack_inc/dlpack/dlpack.h" ]] || dlpack_inc="$official/include"

# ---- build (only when sources, flags or the source list changed) ------------
CC="${CC:-gcc}"
mkdir -p "$build_dir"
sources=("$src_dir"/*.c)
cflags=(-std=c11 -O1 -g -Wall -Wextra -Wno-unused-parameter
  -Werror=implicit-function-declaration -Werror=incompatible-pointer-types
  -I "$official/include" -I "$dlpack_inc")
# shellcheck disable=SC2206
extra_cflags=(${CFLAGS_EXTRA:-})
ldflags=(-L "$official/lib" -ltvm_ffi -lpthread -ldl)
stamp="$bin.stamp"
stamp_text="$CC ${cflags[*]} ${extra_cflags[*]} ${ldflags[*]} ${sources[*]}"
need_build=$rebuild
if [[ ! -x "$bin" || ! -f "$stamp" || "$(cat "$stamp")" != "$stamp_text" ]]; then
  need_build=1
elif [[ -n "$(find "$src_dir" "${BASH_SOURCE[0]}" -newer "$bin" \( -name '*.c' -o -name '*.h' -o -name 'run.sh' \) | head -n 1)" ]]; then
  need_build=1
fi
if [[ $need_build -eq 1 ]]; then
  echo "building $bin" >&2
  "$CC" "${cflags[@]}" "${extra_cflags[@]}" -o "$bin.tmp" "${sources[@]}" "${ldflags[@]}" ||
    die "build failed"
  mv -f "$bin.tmp" "$bin"
  printf '%s' "$stamp_text" >"$stamp"
fi

# ---- run ---------------------------------------------------------------------
export LD_LIBRARY_PATH="$libdir"
if [[ $use_valgrind -eq 0 ]]; then
  set +e
  "$bin" "${runner_args[@]}" "${filters[@]}"
  rc=$?
  set -e
  exit $rc
fi

command -v valgrind >/dev/null 2>&1 || die "valgrind not found"
vg_log="$build_dir/valgrind.log"
out="$build_dir/valgrind-run.out"
set +e
valgrind --quiet --suppressions="$repo_root/tests/valgrind.supp" --leak-check=full --errors-for-leak-kinds=definite,possible \
  --show-leak-kinds=definite,possible --error-exitcode=99 --log-file="$vg_log" \
  "$bin" --no-fork "${filters[@]}" | tee "$out"
rc=${PIPESTATUS[0]}
set -e

summary="$(tail -n 1 "$out")"
if [[ ! "$summary" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed(,\ ([0-9]+)\ skipped)?$ ]]; then
  echo "[  FAILED  ] test binary did not finish (rc=$rc); valgrind log: $vg_log"
  cat "$vg_log"
  echo "0 passed, 1 failed"
  exit 1
fi
passed="${BASH_REMATCH[1]}"
failed="${BASH_REMATCH[2]}"
skipped="${BASH_REMATCH[4]:-0}"
if [[ $rc -eq 99 || -s "$vg_log" ]]; then
  echo "[  FAILED  ] valgrind reported errors or definite leaks (log: $vg_log):"
  sed 's/^/    /' "$vg_log"
  failed=$((failed + 1))
else
  echo "[       OK ] valgrind: no memory errors, no definite leaks"
fi
if [[ "$skipped" -gt 0 ]]; then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
[[ "$failed" -eq 0 ]]
