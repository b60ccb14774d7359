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
# The same library through the C++ API (Module::LoadFromFile, a module's virtual functions, the
# extra C++ functions and their exceptions), as code built on the official headers uses it.
g++ -std=c++17 -O1 -Wall "${inc[@]}" "$root/tests/kernel_lib/cxx_driver.cc" -L"$official/lib" -ltvm_ffi -o "$out/cxx_driver"
# A custom module kind: a C++ subclass of ModuleObj (the driver's last section).
g++ -std=c++17 -O1 -shared -fPIC "${inc[@]}" "$root/tests/kernel_lib/custom_module.cc" -L"$official/lib" -ltvm_ffi -o "$out/custom_module.so"
# CXX_DRIVER_VALGRIND=1: the C++ driver only, under valgrind memcheck (thrown exceptions
# included); any error or definite leak fails.
if [[ "${CXX_DRIVER_VALGRIND:-0}" == 1 ]]; then
  LD_LIBRARY_PATH="$libdir" valgrind -q --leak-check=full --show-leak-kinds=definite,possible --errors-for-leak-kinds=definite,possible \
    --error-exitcode=9 --suppressions="$root/tests/valgrind.supp" "$out/cxx_driver" "$out/userlib.so" "$out/custom_module.so"
else
  LD_LIBRARY_PATH="$libdir" "$out/cxx_driver" "$out/userlib.so" "$out/custom_module.so"
fi
