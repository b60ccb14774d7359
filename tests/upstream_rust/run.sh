#!/usr/bin/env bash
# Runs the official project's own Rust binding tests (the `tvm-ffi`, `tvm-ffi-sys` and
# `tvm-ffi-macros` crates of the official sdist: unit tests, rust/tvm-ffi/tests/*.rs and doc
# tests) against one libtvm_ffi.so.
#
#   tests/upstream_rust/run.sh LIBDIR [--list-skips]
#
# LIBDIR holds the libtvm_ffi.so under test: .cache/wheel/unpacked/tvm_ffi/lib (official; run it
# first, it proves the setup) or target/release (ours). The crates' build scripts find the
# library through `tvm-ffi-config --libdir`; here a stand-in for that script prints a directory
# of links to the OFFICIAL library, so the test binaries are built once and reused for every
# LIBDIR. They run with LD_LIBRARY_PATH set to a second directory of links that this script
# points at LIBDIR/libtvm_ffi.so (and at LIBDIR/libtvm_ffi_testing.so when present, else the
# official testing library, which the tests link and which is loaded against the library under
# test). Before the run, `ldd` must resolve libtvm_ffi.so of a test binary to that directory.
#
# Setup (idempotent; the first build downloads a few crates and takes a minute or two):
#   .cache/upstream-rust/src     copy of the sdist's rust/ (nothing is written into the sdist),
#                                with tests/upstream_rust/Cargo.lock (dependency versions pinned)
#   .cache/upstream-rust/target  cargo's target directory (kept between runs)
#   .cache/upstream-rust/{bin,link,run}  the tvm-ffi-config stand-in and the two link directories
# PATH and LD_LIBRARY_PATH are fixed values for cargo (the build scripts rerun, and everything
# after them rebuilds, when either changes).
#
# Prints the per-binary results, then "N passed, N failed, N skipped"; exits non-zero on any
# failure. Tests on SKIPS (below) are skipped unless LIBDIR/libtvm_ffi.so is the official
# library itself (byte-identical to the wheel's), where every test must pass.
set -euo pipefail

die() {
  echo "tests/upstream_rust/run.sh: error: $*" >&2
  exit 2
}

# Official tests that cannot pass on anyffi, each with the reason. Matched as test-name
# substrings by libtest's --skip (only these names match).
SKIPS=(
  # Sets this thread's DLPack allocator to NULL (not the process-wide one) and expects
  # TVMFFIEnvTensorAlloc to fail with RuntimeError, i.e. that no process-wide allocator exists.
  # anyffi installs its CPU allocator at load as a fallback of TVMFFIEnvTensorAlloc by design
  # (AGENTS.md, "Device runtime"; tests/c/test_env.c checks both behaviours), so the call
  # succeeds there. (Get/Set of the allocator do not report it, as in the official library.)
  # The thread-local/global fallback itself is the official one and passes the C suite.
  "env_alloc::fails_without_an_allocator"
)

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$repo/tests/upstream_rust"
[[ $# -ge 1 ]] || die "usage: tests/upstream_rust/run.sh LIBDIR"
if [[ "$1" == "-h" || "$1" == "--help" ]]; then
  sed -n '2,28p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 0
fi
libdir="$(cd "$1" && pwd)" || die "no such directory: $1"
[[ -f "$libdir/libtvm_ffi.so" ]] || die "no libtvm_ffi.so in $libdir"
command -v cargo >/dev/null || die "cargo not found"

official="$repo/.cache/wheel/unpacked/tvm_ffi/lib"
[[ -f "$official/libtvm_ffi.so" && -f "$official/libtvm_ffi_testing.so" ]] ||
  "$repo/scripts/fetch-official.sh" >/dev/null || die "cannot fetch the official wheel"
sdist="$("$repo/scripts/fetch-official-sdist.sh")" || die "cannot fetch the official sdist"
[[ -f "$sdist/rust/Cargo.toml" ]] || die "no rust/ workspace in $sdist"

cache="$repo/.cache/upstream-rust"
src="$cache/src"
mkdir -p "$cache/bin" "$cache/link" "$cache/run"

# --- the crates, copied out of the sdist --------------------------------------------------
stamp="$(basename "$sdist") $(sha256sum "$here/Cargo.lock" | cut -d' ' -f1)"
if [[ ! -f "$src/.stamp" || "$(cat "$src/.stamp")" != "$stamp" ]]; then
  rm -rf "$src"
  cp -r "$sdist/rust" "$src"
  cp "$here/Cargo.lock" "$src/Cargo.lock"
  echo "$stamp" >"$src/.stamp"
fi

# --- tvm-ffi-config stand-in and the link directories -------------------------------------
cat >"$cache/bin/tvm-ffi-config.new" <<EOF
#!/bin/sh
# Stand-in for the official package's tvm-ffi-config (only --libdir), written by
# tests/upstream_rust/run.sh: the crates link against the official library here.
if [ "\$1" = "--libdir" ]; then echo "$cache/link"; exit 0; fi
echo "tvm-ffi-config stand-in: only --libdir is supported" >&2
exit 1
EOF
chmod +x "$cache/bin/tvm-ffi-config.new"
if ! cmp -s "$cache/bin/tvm-ffi-config.new" "$cache/bin/tvm-ffi-config"; then
  mv "$cache/bin/tvm-ffi-config.new" "$cache/bin/tvm-ffi-config"
else
  rm "$cache/bin/tvm-ffi-config.new"
fi
ln -sfn "$official/libtvm_ffi.so" "$cache/link/libtvm_ffi.so"
ln -sfn "$official/libtvm_ffi_testing.so" "$cache/link/libtvm_ffi_testing.so"
ln -sfn "$libdir/libtvm_ffi.so" "$cache/run/libtvm_ffi.so"
testing="$official/libtvm_ffi_testing.so"
[[ -f "$libdir/libtvm_ffi_testing.so" ]] && testing="$libdir/libtvm_ffi_testing.so"
ln -sfn "$testing" "$cache/run/libtvm_ffi_testing.so"

is_official=0
cmp -s "$libdir/libtvm_ffi.so" "$official/libtvm_ffi.so" && is_official=1

# --- build ---------------------------------------------------------------------------------
cargo_dir="$(dirname "$(command -v cargo)")"
export PATH="$cache/bin:$cargo_dir:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
export LD_LIBRARY_PATH="$cache/run"
export CARGO_TARGET_DIR="$cache/target"
unset DOCS_RS RUSTFLAGS CARGO_BUILD_RUSTFLAGS RUSTDOCFLAGS
cd "$src"
echo "building the official crates' tests ($src)"
if ! cargo test --workspace --no-run --quiet >"$cache/last-build.log" 2>&1; then
  tail -n 60 "$cache/last-build.log"
  die "build failed (log: $cache/last-build.log)"
fi

# The library the tests will load must be LIBDIR's.
probe="$(find "$CARGO_TARGET_DIR/debug/deps" -maxdepth 1 -type f -executable -name 'test_any-*' | head -n1)"
[[ -n "$probe" ]] || die "no test_any binary under $CARGO_TARGET_DIR/debug/deps"
resolved="$(ldd "$probe" | awk '$1 == "libtvm_ffi.so" { print $3 }')"
[[ "$resolved" == "$cache/run/libtvm_ffi.so" ]] ||
  die "libtvm_ffi.so of the tests resolves to '$resolved', not $cache/run/libtvm_ffi.so"
echo "library under test: $(readlink -f "$cache/run/libtvm_ffi.so")$([[ $is_official -eq 1 ]] && echo ' (official)')"
echo "testing library:    $(readlink -f "$cache/run/libtvm_ffi_testing.so")"

# --- run -------------------------------------------------------------------------------------
skip_args=()
if [[ $is_official -eq 0 ]]; then
  for s in "${SKIPS[@]}"; do
    skip_args+=(--skip "$s")
    echo "skipped on this library: $s"
  done
fi
log="$cache/last-run.log"
set +e
cargo test --workspace --no-fail-fast -- "${skip_args[@]}" >"$log" 2>&1
rc=$?
set -e
grep -E '^\s+(Running|Doc-tests)|^test result:|^test .* FAILED$|^failures:$|^    [A-Za-z_:]+$' "$log" |
  sed -E 's# \(.*/([^/]+)-[0-9a-f]+\)$# [\1]#' || true
sum() { # the numbers before WORD on every "test result:" line, added up
  grep -E '^test result:' "$log" | grep -oE "[0-9]+ $1" | awk '{ n += $1 } END { print n + 0 }'
}
passed=$(sum passed)
failed=$(sum failed)
filtered=$(sum 'filtered out')
if [[ $rc -ne 0 && ${failed:-0} -eq 0 ]]; then
  tail -n 40 "$log"
  echo "cargo test failed (rc $rc); full log: $log"
  failed=1
fi
[[ $rc -ne 0 ]] && echo "full log: $log"
echo "${passed:-0} passed, ${failed:-0} failed, ${filtered:-0} skipped"
exit $rc
