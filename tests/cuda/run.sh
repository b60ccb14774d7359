#!/usr/bin/env bash
# CUDA kernel checks that need no GPU:
#  1. tests/cuda/emu: every kernel source run on CPU threads (host emulation of blocks, barriers
#     and warp shuffles) against naive references;
#  2. runtime/tests/cuda_compile.rs: every source compiled with the real NVRTC to PTX and CUBIN
#     for sm_80 and sm_90. NVRTC comes from PyPI (nvidia-cuda-nvrtc-cu12) into .venv-cuda; if pip
#     cannot fetch it, this part is skipped (exit status of part 1) with a message.
# Usage: tests/cuda/run.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
mkdir -p target
echo "tests/cuda: host emulation of the kernels"
g++ -std=c++20 -O1 -pthread -Wall -Wno-unused-function -Wno-unknown-pragmas -o target/cuda_emu_test tests/cuda/emu/emu_test.cc \
  && target/cuda_emu_test || { echo "tests/cuda: kernel emulation FAILED" >&2; exit 1; }
echo "tests/cuda: NVRTC compilation"
venv=.venv-cuda
find_lib() { ls -d "$venv"/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib 2>/dev/null | head -1; }
lib=$(find_lib)
if [[ -z "$lib" || ! -e "$lib/libnvrtc.so.12" ]]; then
  if [[ ! -x "$venv/bin/pip" ]]; then
    python3 -m venv "$venv" || { echo "tests/cuda: cannot create $venv (python3 -m venv)" >&2; exit 1; }
  fi
  if ! "$venv/bin/pip" install -q nvidia-cuda-nvrtc-cu12; then
    echo "tests/cuda: SKIPPED: pip could not fetch nvidia-cuda-nvrtc-cu12 (no NVRTC to compile the kernels with)"
    exit 0
  fi
  lib=$(find_lib)
fi
[[ -e "$lib/libnvrtc.so.12" ]] || { echo "tests/cuda: libnvrtc.so.12 missing under $venv" >&2; exit 1; }
export ANYFFI_NVRTC_LIBRARY="$PWD/$lib/libnvrtc.so.12"
export LD_LIBRARY_PATH="$PWD/$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export ANYFFI_REQUIRE_NVRTC=1
cargo test --release --quiet -p anyffi-runtime --test cuda_compile -- --test-threads=2
