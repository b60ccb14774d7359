#!/usr/bin/env bash
# Structural algorithms through the official Python package, ours against the official library
# (bench.py): bench/structural/run.sh [ROUNDS] (default 5). Builds the release library first.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
wheel_pkg="$root/.cache/wheel/unpacked/tvm_ffi"
venv="$root/.cache/venv-pyofficial"
[[ -d "$wheel_pkg" ]] || "$root/scripts/fetch-official.sh"
# shellcheck source=../../tests/python_official/package.sh
source "$root/tests/python_official/package.sh"
ensure_venv "$venv" "numpy, pytest, typing_extensions, ml_dtypes" numpy pytest typing_extensions ml_dtypes
(cd "$root" && cargo build --release -q)
stage_package "$wheel_pkg" "$wheel_pkg/lib" official "$root/.cache/bench-structural/official" >/dev/null
stage_package "$wheel_pkg" "$root/target/release" ours "$root/.cache/bench-structural/ours" >/dev/null
exec "$venv/bin/python" "$root/bench/structural/bench.py" \
  "$root/.cache/bench-structural/official" "$root/.cache/bench-structural/ours" "${1:-5}"
