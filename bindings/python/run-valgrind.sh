#!/usr/bin/env bash
# Runs the Python package's call-path tests under valgrind memcheck, on our library: invalid
# reads, writes and frees in the library's native `Function.__call__` (ffi/src/capi/python.rs),
# the tensor views and the containers, as Python drives them.
#
#   bindings/python/run-valgrind.sh [LIBDIR] [pytest arguments...]
#
# PYTHONMALLOC=malloc lets memcheck see every Python allocation. Uninitialised-value errors are
# off: CPython 3.11 reads the unset digit of a zero-sized int in int.from_bytes (longobject.c,
# medium_value), and memcheck follows that value into every later use of the small int 0, all
# over the interpreter. Leaks are not checked here (an interpreter keeps memory until exit);
# tests/test_leak.py measures them.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
libdir=${1:-$root/target/release}
[[ $# -gt 0 ]] && shift
venv=${ANYFFI_VENV:-$root/.venv}
"$venv/bin/python" -c "import pytest, numpy" 2>/dev/null || { "$here/run-tests.sh" "$libdir" --co -q >/dev/null; }
tests=(test_native_call.py test_function.py test_convert.py test_tensor.py test_containers.py test_errors.py)
ANYFFI_LIBRARY="$libdir/libtvm_ffi.so" PYTHONMALLOC=malloc exec valgrind --quiet --error-exitcode=9 \
  --undef-value-errors=no --leak-check=no --suppressions="$root/tests/valgrind.supp" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "${tests[@]/#/$here/tests/}" "$@"
