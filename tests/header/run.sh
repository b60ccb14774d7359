#!/usr/bin/env bash
# Checks include/anyffi/c_api.h against the official headers: the layout probe is compiled with
# each, and the printed sizes, offsets and constants must be identical.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
official="$root/.cache/wheel/unpacked/tvm_ffi"
[[ -f "$official/include/tvm/ffi/c_api.h" ]] || { echo "tests/header/run.sh: run scripts/fetch-official.sh first" >&2; exit 2; }
out="$root/target/header-probe"
mkdir -p "$out"
gcc -std=c11 -Wall -Werror -I"$root/include" "$root/tests/header/layout_probe.c" -o "$out/ours"
gcc -std=c11 -Wall -Werror -DPROBE_OFFICIAL -I"$official/include" "$root/tests/header/layout_probe.c" -o "$out/official"
# The generated header must also compile as C++.
g++ -std=c++17 -Wall -Werror -fsyntax-only -x c++ -I"$root/include" - <<<'#include "anyffi/c_api.h"'
"$out/ours" >"$out/ours.txt"
"$out/official" >"$out/official.txt"
n=$(wc -l <"$out/official.txt")
if diff -u "$out/official.txt" "$out/ours.txt"; then
  echo "header layout: $n facts identical"
  echo "1 passed, 0 failed"
else
  echo "header layout: include/anyffi/c_api.h differs from the official headers (diff above)"
  echo "0 passed, 1 failed"
  exit 1
fi
