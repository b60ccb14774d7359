#!/usr/bin/env bash
# Fetch the official apache-tvm-ffi source distribution (same version as the wheel) and unpack
# it under <repo>/.cache/sdist/. The sdist carries the official project's own test suites
# (tests/python, tests/cpp, rust/tvm-ffi/tests), which we run against our library as
# independent judges. Nothing from it is copied into the project.
#
# Idempotent: does nothing when the unpacked tree is already present. Works from any cwd.
# Prints the path of the unpacked source tree.
#
# Usage: scripts/fetch-official-sdist.sh
set -euo pipefail

VERSION="0.1.15.post2"
NAME="apache_tvm_ffi-${VERSION}"
SHA256="909be9ef5af07726aa9afd38a3111abc4d86cfd5927ebedfa9166232ce7d287b"
URL="https://files.pythonhosted.org/packages/a8/8f/2fcd88ce2f43dd2c1945c6613356a9bc1f5fdbe6e37080d34d2b980ad9f6/${NAME}.tar.gz"

die() {
  echo "fetch-official-sdist.sh: error: $*" >&2
  exit 1
}

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$repo_root/.cache/sdist"
src="$dir/$NAME"

if [[ -f "$src/PKG-INFO" && -d "$src/tests/python" ]]; then
  echo "$src"
  exit 0
fi

mkdir -p "$dir" || die "cannot create $dir"
tarball="$dir/$NAME.tar.gz"
if [[ ! -f "$tarball" ]] || ! echo "$SHA256  $tarball" | sha256sum -c --status; then
  echo "fetch-official-sdist.sh: downloading $NAME.tar.gz" >&2
  tmp_tar="$(mktemp "$dir/.download.XXXXXX")"
  if command -v curl >/dev/null 2>&1; then
    curl -fsSL "$URL" -o "$tmp_tar" || { rm -f "$tmp_tar"; die "download of $URL failed"; }
  else
    python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' \
      "$URL" "$tmp_tar" || { rm -f "$tmp_tar"; die "download of $URL failed"; }
  fi
  echo "$SHA256  $tmp_tar" | sha256sum -c --status || { rm -f "$tmp_tar"; die "checksum mismatch for $URL"; }
  mv "$tmp_tar" "$tarball"
fi

tmp="$(mktemp -d "$dir/.unpack.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$tarball" -C "$tmp" || die "unpacking $tarball failed"
rm -rf "$src"
mv "$tmp/$NAME" "$src" || die "cannot move the unpacked tree into $src"
echo "$src"
