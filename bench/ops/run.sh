#!/usr/bin/env bash
# Operator benchmark: our ops.* against numpy (OpenBLAS, both threads) and a parallel memcpy,
# interleaved in one run. Usage: bench/ops/run.sh [FILTER]   (needs .venv with numpy; see
# AGENTS.md). OPENBLAS_CORETYPE/L2_SIZE are unset for this command only: they select a slower
# OpenBLAS kernel (/work/.library/env/README.md); the table header names the kernel used.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
EXE=$(cargo bench -q -p anyffi-runtime --bench ops --no-run --message-format=json 2>/dev/null \
      | "$PY" -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "ops" and m.get("executable"):
        print(m["executable"])')
exec env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$PY" bench/ops/bench.py "$EXE" "${1:-}"
