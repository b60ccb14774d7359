#!/usr/bin/env bash
# Runs the Julia package's tests offline with Pkg.test():
#   1. installs Julia when no working one is on PATH (../../scripts/install-julia.sh: Julia 1.5.3
#      from Debian bullseye on bookworm, a wrapper with bullseye's libunwind and libgcc_s
#      preloaded, and an empty local registry so Pkg.test() needs no network);
#   2. builds libtvm_ffi.so (cargo, incremental) unless ANYFFI_LIBRARY names one;
#   3. runs Pkg.test() for bindings/julia.
# The last line is "julia: N passed, 0 failed, M skipped" (skipped: groups waiting for globals the
# library does not register yet); the exit status is non-zero on any failure.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

# Julia, and the empty offline registry in the depot (both idempotent; a no-op when present)
"$root/scripts/install-julia.sh"
hash -r

if [[ -z "${ANYFFI_LIBRARY:-}" ]]; then
  (cd "$root" && cargo build --release --quiet -j "${CARGO_BUILD_JOBS:-2}")
fi

# The wrapper installed by install-julia.sh already sets these for Julia 1.5 on bookworm; repeat
# them so a julia found first on PATH (another wrapper, a plain /usr/bin/julia) gets them too.
compat=/opt/julia-1.5-compat/lib
if [[ -d $compat ]]; then
  export LD_LIBRARY_PATH="$compat${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
libgcc=$(ls /usr/lib/*-linux-gnu/libgcc_s.so.1 /lib/*-linux-gnu/libgcc_s.so.1 2>/dev/null | head -n 1 || true)
if [[ -n $libgcc && ${LD_PRELOAD:-} != *libgcc_s* ]]; then
  export LD_PRELOAD="$libgcc${LD_PRELOAD:+ $LD_PRELOAD}"
fi
export JULIA_PKG_OFFLINE=true
export JULIA_NUM_THREADS=${JULIA_NUM_THREADS:-2}  # the threads test calls in from two threads

cd "$here"
exec julia --project="$here" --color=no -e 'using Pkg; Pkg.offline(true); Pkg.test()'
