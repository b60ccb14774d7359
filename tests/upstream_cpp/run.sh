#!/usr/bin/env bash
# Runs the official apache-tvm-ffi project's own C++ gtest suite (the sdist's tests/cpp/test*.cc
# and tests/cpp/extra/test*.cc, compiled unchanged) against one libtvm_ffi.so, with the official
# libtvm_ffi_testing.so from the wheel loaded beside it.
#
#   tests/upstream_cpp/run.sh LIBDIR [gtest args...]
#
# LIBDIR holds libtvm_ffi.so: the official .cache/wheel/unpacked/tvm_ffi/lib (must pass; that
# proves the setup) or ours, target/release. The tests are compiled once against the sdist's
# headers and linked against the OFFICIAL library (the link step needs a library that has every
# symbol the tests name); at run time LD_LIBRARY_PATH selects the library under test, and ldd
# must show LIBDIR's library as the one loaded. Objects and the binary live in
# .cache/upstream-cpp/<hash of sources, headers, compiler, flags>, one object per test file, so
# a second run compiles nothing (the first takes ~10 minutes on 2 cores).
#
# The extra tests call 14 C++-mangled functions of the library (json::Parse, ToJSONGraph,
# StructuralEqual::Equal, ReprPrint, ...); anyffi exports them under the same names. Before the
# run, every symbol the binary takes from libtvm_ffi.so must be defined by LIBDIR's library
# (else the list of missing ones, instead of a "symbol lookup error" in the middle of the run).
#
# Needs g++ and GoogleTest (Debian: libgtest-dev; installed here when running as root).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[[ $# -ge 1 ]] || { echo "usage: $0 LIBDIR [gtest args...]" >&2; exit 2; }
libdir="$(cd "$1" && pwd -P)"
shift
[[ -f "$libdir/libtvm_ffi.so" ]] || { echo "$0: no libtvm_ffi.so in $libdir" >&2; exit 2; }

wheel_pkg="$root/.cache/wheel/unpacked/tvm_ffi"
[[ -f "$wheel_pkg/lib/libtvm_ffi_testing.so" ]] || "$root/scripts/fetch-official.sh" >/dev/null
official_lib="$(cd "$wheel_pkg/lib" && pwd -P)"
sdist="$("$root/scripts/fetch-official-sdist.sh")"

# --- GoogleTest ---------------------------------------------------------------------------
find_gtest() {
  gtest_inc="" gtest_lib=""
  local d
  for d in /usr/include /usr/local/include; do
    [[ -f "$d/gtest/gtest.h" ]] && { gtest_inc=$d; break; }
  done
  for d in /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib; do
    [[ -f "$d/libgtest.a" || -f "$d/libgtest.so" ]] && [[ -f "$d/libgtest_main.a" || -f "$d/libgtest_main.so" ]] &&
      { gtest_lib=$d; break; }
  done
  [[ -n "$gtest_inc" && -n "$gtest_lib" ]]
}
if ! find_gtest; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "run.sh: installing libgtest-dev" >&2
    apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libgtest-dev >/dev/null 2>&1 || true
  fi
  find_gtest || {
    echo "run.sh: GoogleTest not found (need gtest/gtest.h, libgtest and libgtest_main)." >&2
    echo "run.sh: install it, e.g. 'apt-get install libgtest-dev' (Debian/Ubuntu)." >&2
    exit 2
  }
fi

# --- compile (cached) ---------------------------------------------------------------------
cxx=${CXX:-g++}
flags=(-std=c++17 -O0 -g0 -DTVM_FFI_CMAKE_LITTLE_ENDIAN=1 -I"$sdist/include" -I"$sdist/3rdparty/dlpack/include"
  -I"$gtest_inc")
sources=("$sdist"/tests/cpp/test*.cc "$sdist"/tests/cpp/extra/test*.cc)
key="$(
  {
    "$cxx" --version
    echo "${flags[@]}"
    find "$sdist/include" "$sdist/3rdparty/dlpack/include" "$sdist/tests/cpp" -type f -print0 | sort -z |
      xargs -0 sha256sum | sed "s|$sdist||"
    sha256sum "$gtest_inc/gtest/gtest.h" "$official_lib/libtvm_ffi.so" "$official_lib/libtvm_ffi_testing.so" | cut -d' ' -f1
  } | sha256sum | cut -c1-16
)"
build="$root/.cache/upstream-cpp/$key"
bin="$build/tvm_ffi_tests"
if [[ ! -x "$bin" ]]; then
  mkdir -p "$build/obj"
  objs=()
  for src in "${sources[@]}"; do
    rel="${src#"$sdist"/tests/cpp/}"
    obj="$build/obj/${rel//\//_}.o"
    objs+=("$obj")
    [[ -f "$obj" ]] && continue
    echo "run.sh: compiling $rel" >&2
    "$cxx" "${flags[@]}" -c "$src" -o "$obj.tmp"
    mv "$obj.tmp" "$obj"
  done
  # testing_object.h defines reflected test types in the test binary; the testing library
  # registers its own. Both link against libtvm_ffi.so by SONAME.
  "$cxx" -o "$bin.tmp" "${objs[@]}" -Wl,--no-as-needed -L"$official_lib" -ltvm_ffi -ltvm_ffi_testing \
    -Wl,--as-needed -L"$gtest_lib" -lgtest_main -lgtest -pthread
  mv "$bin.tmp" "$bin"
fi

# --- exclusions -----------------------------------------------------------------------------
# Official tests that cannot pass on anyffi for a reason outside our control, one gtest pattern
# per line with its reason above it. They still run (and must pass) on the official library.
# Currently none: every official test passes on anyffi.
excluded=(
)

filter="*"
if [[ "$libdir" != "$official_lib" && ${#excluded[@]} -gt 0 ]]; then
  filter="*-$(IFS=:; echo "${excluded[*]}")"
fi

# --- run ------------------------------------------------------------------------------------
# LD_LIBRARY_PATH: LIBDIR first (the library under test), then the wheel's lib for
# libtvm_ffi_testing.so (its RUNPATH $ORIGIN is only consulted for libraries not yet loaded;
# libtvm_ffi.so is loaded first, from LIBDIR, as the binary's own dependency).
export LD_LIBRARY_PATH="$libdir:$official_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
loaded="$(ldd "$bin" | awk '$1 == "libtvm_ffi.so" { print $3 }')"
[[ "$(readlink -f "$loaded")" == "$(readlink -f "$libdir/libtvm_ffi.so")" ]] ||
  { echo "run.sh: the test binary would load $loaded, not $libdir/libtvm_ffi.so" >&2; exit 2; }
# Every symbol the binary takes from libtvm_ffi.so (per the official library's exports) must be
# defined by the library under test.
needed="$(comm -12 <(nm -D --undefined-only "$bin" | awk '{print $2}' | sed 's/@.*//' | sort -u) \
  <(nm -D --defined-only "$official_lib/libtvm_ffi.so" | awk '{print $3}' | sed 's/@.*//' | sort -u))"
missing="$(comm -23 <(echo "$needed") <(nm -D --defined-only "$libdir/libtvm_ffi.so" | awk '{print $3}' | sed 's/@.*//' | sort -u))"
if [[ -n "$missing" ]]; then
  echo "run.sh: $libdir/libtvm_ffi.so lacks symbols the official tests use:" >&2
  echo "$missing" | c++filt | sed 's/^/  /' >&2
  exit 1
fi
echo "run.sh: $bin on $libdir/libtvm_ffi.so" >&2
cd "$build"
exec "$bin" --gtest_filter="$filter" "$@"
