#!/usr/bin/env bash
# Runs the unit tests of the `anyffi` crate (object header, refcounts, Any, strings, errors,
# functions, tensors, type table) under valgrind memcheck: the stand-in for Miri, which needs a
# nightly toolchain these machines do not have. Definite leaks and invalid accesses fail.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bin=$(cargo test -p anyffi --release --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["kind"] == ["lib"] and m.get("executable"):
        print(m["executable"])')
[[ -n "$bin" ]] || { echo "valgrind-rust-core: could not find the anyffi test binary" >&2; exit 2; }
# Definite leaks only: libtest's own main-thread handle (std::thread::current, made for its
# channels) is "possibly lost" at exit. The C, reflection, structural, kernel-library and
# differential runs, whose programs are like users', fail on possible leaks too.
valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=9 \
  "$bin" --test-threads=1 -q
