# Shared by tests/python_official/run.sh and tests/upstream_python/run.sh (sourced): the Python
# 3.11 virtual environment without apache-tvm-ffi, and a copy of the official `tvm_ffi` package
# that loads a chosen libtvm_ffi.so.

# ensure_venv VENV IMPORTS PACKAGE...: creates VENV with pip's PACKAGEs unless `import IMPORTS`
# already works there; fails if apache-tvm-ffi is installed (its RECORD would pick the library,
# spec §10.1).
ensure_venv() {
  local venv=$1 imports=$2
  shift 2
  # the wheel's core.so is built for CPython 3.11
  local py=python3
  command -v python3.11 >/dev/null && py=python3.11
  if ! "$venv/bin/python" -c "import $imports" 2>/dev/null; then
    "$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' ||
      { echo "run.sh: needs Python 3.11 (the wheel is cp311); $py is $("$py" --version)" >&2; exit 2; }
    echo "run.sh: creating $venv"
    "$py" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "$@"
  fi
  if "$venv/bin/python" -c "import importlib.metadata as m; m.distribution('apache-tvm-ffi')" 2>/dev/null; then
    echo "run.sh: apache-tvm-ffi is installed in $venv; its RECORD would pick the library. Remove it." >&2
    exit 2
  fi
}

# library_name ROOT WHEEL_PKG LIBDIR: "official" for the wheel's own library directory, else
# LIBDIR relative to ROOT with unsafe characters replaced (a cache directory name).
library_name() {
  local root=$1 wheel_pkg=$2 libdir=$3
  if [[ "$libdir" == "$(cd "$wheel_pkg/lib" && pwd)" ]]; then
    echo official
  else
    echo "${libdir#"$root"/}" | tr -c 'A-Za-z0-9_.\n-' '_'
  fi
}

# stage_package WHEEL_PKG LIBDIR NAME DEST: a fresh copy of the wheel's package at DEST/tvm_ffi;
# unless NAME is "official", LIBDIR/libtvm_ffi.so goes to tvm_ffi/build/lib/, which the
# package's loader prefers to tvm_ffi/lib/ (spec §10.2 (b)). Prints the library path the
# package will load.
stage_package() {
  local wheel_pkg=$1 libdir=$2 name=$3 dest=$4
  rm -rf "$dest"
  mkdir -p "$dest"
  cp -a "$wheel_pkg" "$dest/tvm_ffi"
  if [[ "$name" == official ]]; then
    echo "$dest/tvm_ffi/lib/libtvm_ffi.so"
  else
    mkdir -p "$dest/tvm_ffi/build/lib"
    cp "$libdir/libtvm_ffi.so" "$dest/tvm_ffi/build/lib/libtvm_ffi.so"
    echo "$dest/tvm_ffi/build/lib/libtvm_ffi.so"
  fi
}
