#!/usr/bin/env bash
# Fetch the official apache-tvm-ffi wheel (the reference implementation we must
# stay binary compatible with) and unpack it under <repo>/.cache/wheel/unpacked.
#
# Idempotent: does nothing when the unpacked tree is already present.
# Works from any cwd. Prints the path of the unpacked `tvm_ffi` package.
#
# Usage: scripts/fetch-official.sh
# Env:   PIP (default: pip, falling back to `python3 -m pip`)
set -euo pipefail

VERSION="0.1.15.post2"
PKG="apache-tvm-ffi"

die() {
  echo "fetch-official.sh: error: $*" >&2
  exit 1
}

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
wheel_dir="$repo_root/.cache/wheel"
unpacked="$wheel_dir/unpacked"
pkg_dir="$unpacked/tvm_ffi"

is_complete() {
  [[ -f "$pkg_dir/lib/libtvm_ffi.so" && -f "$pkg_dir/include/tvm/ffi/c_api.h" ]]
}

if is_complete; then
  echo "$pkg_dir"
  exit 0
fi

mkdir -p "$wheel_dir" || die "cannot create $wheel_dir"

find_wheel() {
  # The wheel file name is normalised by pip: apache_tvm_ffi-<ver>-*.whl
  compgen -G "$wheel_dir/apache_tvm_ffi-${VERSION}-*.whl" | head -n 1 || true
}

whl="$(find_wheel)"
if [[ -z "$whl" ]]; then
  pip_cmd=()
  if [[ -n "${PIP:-}" ]]; then
    read -r -a pip_cmd <<<"$PIP"
  elif command -v pip >/dev/null 2>&1; then
    pip_cmd=(pip)
  elif command -v python3 >/dev/null 2>&1; then
    pip_cmd=(python3 -m pip)
  else
    die "neither pip nor python3 found; install pip or set PIP"
  fi
  echo "fetch-official.sh: downloading ${PKG}==${VERSION} into $wheel_dir" >&2
  if ! "${pip_cmd[@]}" download --no-deps --only-binary=:all: \
      "${PKG}==${VERSION}" -d "$wheel_dir" >&2; then
    die "pip download of ${PKG}==${VERSION} failed (no network, or no wheel for this platform?)"
  fi
  whl="$(find_wheel)"
  [[ -n "$whl" ]] || die "pip succeeded but no ${PKG} ${VERSION} wheel appeared in $wheel_dir"
fi

echo "fetch-official.sh: unpacking $(basename "$whl")" >&2
tmp="$(mktemp -d "$wheel_dir/.unpack.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
if command -v unzip >/dev/null 2>&1; then
  unzip -q -o "$whl" -d "$tmp" || die "unzip of $whl failed"
else
  python3 -m zipfile -e "$whl" "$tmp" || die "extracting $whl failed (no unzip, python3 zipfile failed)"
fi
[[ -f "$tmp/tvm_ffi/lib/libtvm_ffi.so" ]] || die "wheel $whl has no tvm_ffi/lib/libtvm_ffi.so"

rm -rf "$unpacked"
mv "$tmp" "$unpacked" || die "cannot move unpacked tree into $unpacked"
trap - EXIT

is_complete || die "unpacked tree at $pkg_dir is incomplete"
echo "$pkg_dir"
