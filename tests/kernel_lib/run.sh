#!/usr/bin/env bash
# Builds userlib.cc (a kernel library using only the official headers) and driver.c, then runs
# the driver against one libtvm_ffi.so. Usage: tests/kernel_lib/run.sh LIBDIR
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
official="$root/.cache/wheel/unpacked/tvm_ffi"
libdir="$(cd "${1:?usage: run.sh LIBDIR}" && pwd)"
out="$root/target/kernel-lib"
mkdir -p "$out"
inc=(-I"$official/include")
g++ -std=c++17 -O1 -shared -fPIC -DTVM_FFI_DLL_EXPORT_INCLUDE_METADATA=1 "${inc[@]}" "$root/tests/kernel_lib/userlib.cc" -L"$official/lib" -ltvm_ffi -o "$out/userlib.so"
gcc -std=c11 -O1 -Wall "${inc[@]}" "$root/tests/kernel_lib/driver.c" -L"$official/lib" -ltvm_ffi -o "$out/driver"
LD_LIBRARY_PATH="$libdir" "$out/driver" "$out/userlib.so"
