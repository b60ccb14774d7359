#!/usr/bin/env python3
"""Structural hash/equality, deep copy and JSON graphs through the official ``tvm_ffi`` package,
on our library and on the official one: rounds alternate between the two (one process per
library per round), and each case prints the median over rounds and our time as a multiple of
the official library's.

    bench/structural/run.sh [ROUNDS]       (stages the packages, then runs this)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def one_round(pkgroot: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=pkgroot, PYTHONNOUSERSITE="1", OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, os.path.join(HERE, "cases.py")], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def main() -> None:
    official, ours, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    times: dict[str, dict[str, list[float]]] = {"official": {}, "ours": {}}
    for _ in range(rounds):
        for side, root in (("official", official), ("ours", ours)):
            for case, t in one_round(root).items():
                times[side].setdefault(case, []).append(t)
    print(f"| case ({rounds} rounds, medians) | official (ms) | ours (ms) | ours / official |")
    print("|---|---|---|---|")
    for case, ts in times["official"].items():
        a, b = statistics.median(ts), statistics.median(times["ours"][case])
        print(f"| {case} | {a * 1e3:.2f} | {b * 1e3:.2f} | {b / a:.2f}x |")


if __name__ == "__main__":
    main()
