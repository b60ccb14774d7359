#!/usr/bin/env bash
# The GPU checks, for a machine with an NVIDIA GPU, its driver, the CUDA 12 or 13 toolkit
# libraries (NVRTC, cuBLAS) and Python with torch, but no Rust toolchain: everything is built
# here first and staged in .gpu/ (gitignored), which travels to that machine.
#
#   scripts/gpu-check.sh prepare [PYVER]   here: build and stage (PYVER of the GPU machine's
#                                          python3, default 3.12, picks the official wheel)
#   scripts/gpu-check.sh run [--quick]     there: run every check from .gpu/ (logs in $OUT,
#                                          else .gpu/logs); exit status 1 if any failed;
#                                          --quick leaves out the official Python suite
#
# The checks: runtime/tests/cuda_ops.rs (every op, 3 dtypes, CUDA against the CPU kernels),
# cuda_compile.rs (the device's NVRTC), runtime_api.rs and tests/c_runtime (device round trips),
# the Python package's test_cuda.py and test_torch.py (torch CUDA tensors through DLPack, the ops
# against torch), the benchmarks bench/cuda/calls.rs (host cost of each step of a call) and
# bench_cuda.py (ops against torch), and the official Python suite with the official `tvm_ffi`
# package on our library and then on the official one (the counts must agree).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
G="$root/.gpu"
cd "$root"

prepare() {
  local pyver=${1:-3.12} tag bins
  tag="cp${pyver/./}"
  set -e
  rm -rf "$G" && mkdir -p "$G/up"
  cargo build --release -p anyffi-runtime
  bins=$(cargo test --release -p anyffi-runtime --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])')
  for b in cuda_ops runtime_api cuda_compile; do
    strip -o "$G/$b" "$(awk -v b="$b" '$1 == b { print $2 }' <<<"$bins")"
  done
  strip -o "$G/cuda_calls" "$(cargo bench -p anyffi-runtime --bench cuda_calls --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "cuda_calls":
        print(m["executable"])')"
  strip -o "$G/libtvm_ffi.so" target/release/libtvm_ffi.so
  "${CC:-gcc}" -std=c11 -O1 -Wall -Wextra -o "$G/test_runtime" tests/c_runtime/test_runtime.c \
    -L"$G" -ltvm_ffi -Wl,-rpath,'$ORIGIN'
  # the official package for the GPU machine's Python, twice: on our library and on its own
  local whl="$root/.cache/wheel-$tag"
  if ! ls "$whl"/*.whl >/dev/null 2>&1; then
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
      -d "$whl" apache-tvm-ffi==0.1.15.post2
  fi
  python3 -m zipfile -e "$whl"/*.whl "$G/up/wheel"
  mkdir -p "$G/up/ours" "$G/up/official"
  cp -a "$G/up/wheel/tvm_ffi" "$G/up/ours/tvm_ffi"
  mv "$G/up/wheel/tvm_ffi" "$G/up/official/tvm_ffi"
  rm -rf "$G/up/wheel"
  mkdir -p "$G/up/ours/tvm_ffi/build/lib"  # the package's loader prefers build/lib
  cp "$G/libtvm_ffi.so" "$G/up/ours/tvm_ffi/build/lib/"
  local sdist
  sdist="$(scripts/fetch-official-sdist.sh)"
  cp -a "$sdist/tests/python" "$G/up/tests"
  cp tests/upstream_python/conftest.py "$G/up/tests/"
  : >"$G/up/pytest.ini"
  du -sh "$G"
}

run() {
  local out=${OUT:-$G/logs} r=0 nvrtc cublas quick=${1:-}
  mkdir -p "$out"
  export PYTHONUNBUFFERED=1
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  find_one() {
    find /usr/local/cuda* /usr/local/nvidia /opt /usr/lib/x86_64-linux-gnu -name "$1" 2>/dev/null |
      sort -V | tail -1
  }
  nvrtc=$(find_one 'libnvrtc.so.1[0-9]*')
  cublas=$(find_one 'libcublas.so.1[0-9]*')
  echo "NVRTC: $nvrtc; cuBLAS: $cublas"
  # cuda_ops finds the libraries by name in their directories (libX.so or libX.so.13/.12);
  # everything after it names them by path as well (ANYFFI_NVRTC_LIBRARY, ANYFFI_CUBLAS_LIBRARY)
  export LD_LIBRARY_PATH="$(dirname "$nvrtc"):$(dirname "$cublas")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export ANYFFI_REQUIRE_CUDA=1 ANYFFI_REQUIRE_NVRTC=1 ANYFFI_LIBRARY=$G/libtvm_ffi.so
  echo "== cuda_ops"
  timeout 120 "$G/cuda_ops" --test-threads=1 2>&1 | tee "$out/cuda_ops.log" | tail -30 || r=1
  export ANYFFI_NVRTC_LIBRARY=$nvrtc ANYFFI_CUBLAS_LIBRARY=$cublas
  echo "== cuda_compile"
  timeout 60 "$G/cuda_compile" 2>&1 | tail -5 || r=1
  echo "== runtime_api"
  timeout 60 "$G/runtime_api" 2>&1 | tail -3 || r=1
  echo "== tests/c_runtime"
  timeout 30 "$G/test_runtime" 2>&1 | tail -2 || r=1
  echo "== bindings/python: test_cuda.py, test_torch.py"
  timeout 150 python3 -m pytest -q --no-header -p no:cacheprovider bindings/python/tests/test_cuda.py \
    bindings/python/tests/test_torch.py 2>&1 | tee "$out/pytest_cuda.log" | tail -30 || r=1
  echo "== bench/cuda/calls.rs"
  timeout 60 "$G/cuda_calls" 2>&1 | tee "$out/cuda_calls.log" || r=1
  local b
  for b in 2 4 16 32; do  # the split-KV attention's occupancy target (default 8)
    ANYFFI_CUDA_ATTN_BLOCKS_PER_SM=$b timeout 30 "$G/cuda_calls" 2>&1 | grep self_attention | sed "s/^/ANYFFI_CUDA_ATTN_BLOCKS_PER_SM=$b: /"
  done
  echo "== bench/cuda/bench_cuda.py"
  timeout 90 python3 bench/cuda/bench_cuda.py --quick 2>&1 | tee "$out/bench_cuda.log" || r=1
  [[ $quick == --quick ]] && return $r
  local name lib
  for name in ours official; do
    [[ $name == ours ]] && lib=$G/up/ours/tvm_ffi/build/lib/libtvm_ffi.so || lib=$G/up/official/tvm_ffi/lib/libtvm_ffi.so
    echo "== the official Python suite on $name"
    (cd "$G/up/tests" && TVMFFI_UNDER_TEST_LIB=$lib PYTHONPATH=$G/up/$name PYTHONDONTWRITEBYTECODE=1 \
      timeout 200 python3 -m pytest -c "$G/up/pytest.ini" --rootdir "$G/up/tests" -p no:cacheprovider \
      -q -n "$(nproc)" -rfEs . 2>&1 | tee "$out/upstream_$name.log" | grep -E "passed|failed|FAILED|ERROR" | tail -20) || r=1
  done
  return $r
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 prepare [PYVER] | run" >&2; exit 2 ;;
esac
