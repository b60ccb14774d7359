#!/usr/bin/env bash
# Cross-library test of the structural, JSON and serialization built-ins: main.cc (compiled
# against the OFFICIAL headers) prints one line per case, `name = <value>` or
# `name ! <kind>: <message>`; every line must equal the one recorded on the official library in
# expected.txt.
#
# Usage: tests/structural/run.sh LIBDIR          compare LIBDIR/libtvm_ffi.so with expected.txt
#        tests/structural/run.sh --valgrind LIBDIR   the same under valgrind memcheck (invalid
#                                                accesses and definite leaks fail)
#        tests/structural/run.sh --record        re-record expected.txt on the official library
# Cases named `ours.*` (cycles: the official library recurses until its stack overflows) are not
# run on the official library (LIBDIR = the wheel's lib/, or --record); their lines are kept by
# hand in expected_ours.txt.
# Env:   WHEEL (default <repo>/.cache/wheel/unpacked/tvm_ffi), CXX (default g++)
# Prints every differing case and ends with "N passed, N failed"; exits non-zero on failure.
set -euo pipefail

die() {
  echo "run.sh: error: $*" >&2
  exit 2
}

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
wheel="${WHEEL:-$repo/.cache/wheel/unpacked/tvm_ffi}"
[[ -f "$wheel/include/tvm/ffi/c_api.h" ]] || die "official headers not found under $wheel (run scripts/fetch-official.sh)"
record=0
official=0
valgrind=()
if [[ "${1:-}" == "--valgrind" ]]; then
  valgrind=(valgrind --quiet --suppressions="$repo/tests/valgrind.supp" --leak-check=full
    --errors-for-leak-kinds=definite,possible --error-exitcode=9)
  shift
fi
if [[ "${1:-}" == "--record" ]]; then
  record=1
  libdir="$wheel/lib"
else
  [[ $# -ge 1 ]] || die "usage: tests/structural/run.sh LIBDIR | --record"
  libdir="$(cd "$1" && pwd)" || die "no such directory: $1"
fi
[[ -f "$libdir/libtvm_ffi.so" ]] || die "$libdir has no libtvm_ffi.so"
# The official library itself: the `ours.*` cases would crash it, so they are left out.
[[ "$(cd "$libdir" && pwd -P)" == "$(cd "$wheel/lib" && pwd -P)" ]] && official=1

build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
"${CXX:-g++}" -std=c++17 -O1 -g -Wall -Wno-unused-function \
  -I"$wheel/include" -I"$wheel/include/dlpack" \
  "$here/main.cc" -o "$build/cases" -L"$libdir" -ltvm_ffi -ldl

set +e
HARNESS_SKIP_OURS="$( [[ $official -eq 1 ]] && echo 1 || true)" \
TVM_FFI_TESTING_LIB="$wheel/lib/libtvm_ffi_testing.so" \
  LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ${valgrind[@]+"${valgrind[@]}"} "$build/cases" \
  >"$build/out.txt" 2>"$build/err.txt"
rc=$?
set -e
if [[ $rc -ne 0 ]]; then
  echo "cases exited with status $rc; stderr:"
  tail -20 "$build/err.txt"
fi

if [[ $record -eq 1 ]]; then
  [[ $rc -eq 0 ]] || die "the official library must run every case"
  cp "$build/out.txt" "$here/expected.txt"
  echo "recorded $(wc -l <"$here/expected.txt") cases into $here/expected.txt"
  exit 0
fi

python3 - "$here/expected.txt" "$build/out.txt" "$rc" "$official" <<'PY'
import sys

def lines(path):
    out = {}
    order = []
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        name = line.split(" ", 1)[0]
        out[name] = line
        order.append(name)
    return out, order

want, order = lines(sys.argv[1])
if sys.argv[4] != "1":
    extra, extra_order = lines(sys.argv[1].replace("expected.txt", "expected_ours.txt"))
    want.update(extra)
    order += extra_order
got, got_order = lines(sys.argv[2])
passed = failed = 0
for name in got_order:
    if name not in want and (sys.argv[4] != "1" or not name.startswith("ours.")):
        failed += 1
        print(f"FAIL {name}: no expected line (record it in expected.txt or expected_ours.txt)\n  ours:     {got[name]}")
for name in order:
    if got.get(name) == want[name]:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}\n  official: {want[name]}\n  ours:     {got.get(name, '<missing: crashed before this case?>')}")
if sys.argv[3] != "0":
    failed += 1
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
