#!/usr/bin/env bash
# `pip install ./bindings/python` in a fresh venv, then, from outside the checkout (so the
# source tree cannot be imported instead), the installed package must find the library it
# bundled and call into it. The venv is .cache/venv-pip-install, rebuilt on every run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="$root/.cache/venv-pip-install"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "$root/bindings/python"
cd "$(mktemp -d)"
env -u ANYFFI_LIBRARY "$venv/bin/python" - "$venv" <<'PY'
import os, sys
import anyffi

venv = os.path.realpath(sys.argv[1])
lib = os.path.realpath(anyffi.library_path)
assert lib.startswith(venv + os.sep) and lib.endswith("anyffi/libtvm_ffi.so"), f"not the bundled library: {lib}"
assert os.path.realpath(anyffi.__file__).startswith(venv + os.sep), anyffi.__file__
add_one = anyffi.get_global_func("anyffi.testing.add_one")
assert add_one(41) == 42
assert anyffi.Array([1, "two"])[1] == "two"
print(f"pip-installed anyffi {anyffi.__version__}: {lib}")
PY
