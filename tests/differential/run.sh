#!/usr/bin/env bash
# Differential test: every `ffi.*` global function shared with the official library, called with
# ~7,800 argument sets on our target/release/libtvm_ffi.so and on the official libtvm_ffi.so, through
# the pure-ctypes package in bindings/python; the outcomes must agree (see README.md).
#
#   tests/differential/run.sh [--accepted FILE] [group ...]
#
# Fails on a crash or hang of our library and on a result or exception-kind difference that is not
# in accepted.txt. Writes .cache/differential/report.txt. Uses the venv $ANYFFI_VENV (default:
# .venv at the checkout root), creating it with numpy when missing; needs g++ (for tiny_module.cc).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${ANYFFI_VENV:-$root/.venv}
if ! "$venv/bin/python" -c "import numpy" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q numpy
fi
[[ -f "$root/.cache/wheel/unpacked/tvm_ffi/lib/libtvm_ffi.so" ]] || "$root/scripts/fetch-official.sh" >/dev/null
exec "$venv/bin/python" "$here/driver.py" "$@"
