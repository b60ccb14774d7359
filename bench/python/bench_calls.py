#!/usr/bin/env python3
"""Call overhead of the anyffi Python package, with ratios against its anchors.

Rows (ns per call, the minimum of several timed repeats):
  * anyffi on our libtvm_ffi.so (its native ``Function.__call__``), the same with the package's
    pure-Python ``__call__`` (``ANYFFI_NATIVE_CALL=0``), and anyffi on the official libtvm_ffi.so;
  * the official apache-tvm-ffi package (Cython) on its own library;
  * a bare ctypes call of TVMFFIFunctionCall with pre-built arguments, in each anyffi process.

Each configuration runs in its own process (two libtvm_ffi.so copies must not share one).

    python bench/python/bench_calls.py [--quick] [--official-python .venv-official/bin/python]

Run it with the interpreter of a venv that has numpy; the official package is looked for in
``.venv-official`` (``pip install apache-tvm-ffi==0.1.15.post2 numpy``) unless given.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import timeit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(ROOT, "bindings", "python")
OFFICIAL_LIB = os.path.join(ROOT, ".cache", "wheel", "unpacked", "tvm_ffi", "lib", "libtvm_ffi.so")

CASES = [
    ("nop()", "nop()"),
    ("nop(1)", "nop(1)"),
    ("nop(1.5)", "nop(1.5)"),
    ("nop('short')", "nop('short')"),
    ("nop(long str)", "nop(LONG)"),
    ("nop(ndarray)", "nop(x)"),
    ("nop(Tensor)", "nop(tx)"),
    ("nop(Function)", "nop(fcb)"),
    ("nop(1, 2.5, 'abc')", "nop(1, 2.5, 'abc')"),
    ("echo(1)", "echo(1)"),
    ("echo('hello world long')", "echo(LONG)"),
    ("apply(f) [callback]", "apply(fcb)"),
    ("apply(f, 1) [callback]", "apply(fcb1, 1)"),
]


def measure_all(stmts: dict, g: dict, number: int, repeat: int) -> dict:
    """ns per call of each statement: the minimum over ``repeat`` rounds, each round timing every
    statement once (round-robin, so a noisy spell on the shared machine hits all cases alike)."""
    # CPU time of this thread, not wall time: time spent descheduled while other processes run
    # would otherwise land in the numbers.
    timers = {k: timeit.Timer(stmt, globals=g, timer=time.thread_time) for k, stmt in stmts.items()}
    for t in timers.values():
        t.timeit(number // 10 or 1)  # warm up
    best = {k: float("inf") for k in stmts}
    for _ in range(repeat):
        for k, t in timers.items():
            best[k] = min(best[k], t.timeit(number) / number * 1e9)
    return best


def child_anyffi(number: int, repeat: int) -> dict:
    sys.path.insert(0, PKG)
    import ctypes

    import numpy as np

    import anyffi
    from anyffi import _capi

    get = anyffi.get_global_func
    if get("anyffi.testing.nop", allow_missing=True) is not None:
        pre = "anyffi.testing."
    else:
        ctypes.CDLL(os.path.join(os.path.dirname(anyffi.library_path), "libtvm_ffi_testing.so"), mode=ctypes.RTLD_GLOBAL)
        pre = "testing."
    g = dict(
        nop=get(pre + "nop"),
        echo=get(pre + "echo"),
        apply=get(pre + "apply"),
        x=np.zeros((2, 3), dtype="float32"),
        LONG="hello world long",
        fcb=anyffi.Function(lambda: None),
        fcb1=anyffi.Function(lambda a: None),
    )
    g["tx"] = anyffi.from_dlpack(g["x"])
    g["nop_gil"] = get(pre + "nop")
    g["nop_gil"].release_gil = False
    # bare ctypes anchors: the natural form (ctypes objects built once), and the byref form the
    # package itself uses
    h = g["nop"].handle
    args = (_capi.TVMFFIAny * 4)()
    res = (_capi.TVMFFIAny * 1)()
    g.update(call=_capi.LIB.TVMFFIFunctionCall, h=ctypes.c_void_p(h), args=args, res=res)
    g.update(hb=ctypes.byref(ctypes.c_char.from_address(h)), ab=ctypes.byref(args), rb=ctypes.byref(res))
    stmts = {f"anyffi {label}": stmt for label, stmt in CASES}
    stmts["anyffi nop() [release_gil=False]"] = "nop_gil()"
    stmts["anyffi nop(ndarray) [release_gil=False]"] = "nop_gil(x)"
    stmts["bare ctypes nop()"] = "call(h, args, 0, res)"
    stmts["bare ctypes nop() [byref args]"] = "call(hb, ab, 0, rb)"
    out = measure_all(stmts, g, number, repeat)
    out["library"] = anyffi.library_path
    return out


def child_official(number: int, repeat: int) -> dict:
    import numpy as np
    import tvm_ffi

    get = tvm_ffi.get_global_func
    g = dict(
        nop=get("testing.nop"),
        echo=get("testing.echo"),
        apply=get("testing.apply"),
        x=np.zeros((2, 3), dtype="float32"),
        LONG="hello world long",
        fcb=tvm_ffi.convert(lambda: None),
        fcb1=tvm_ffi.convert(lambda a: None),
    )
    g["tx"] = tvm_ffi.from_dlpack(g["x"])
    out = measure_all({f"tvm_ffi {label}": stmt for label, stmt in CASES}, g, number, repeat)
    out["library"] = tvm_ffi.libinfo.find_libtvm_ffi() if hasattr(tvm_ffi, "libinfo") else "?"
    return out


def run_child(python: str, mode: str, env_extra: dict, number: int, repeat: int) -> dict:
    env = dict(os.environ, **env_extra)
    cmd = [python, os.path.abspath(__file__), "--child", mode, "--number", str(number), "--repeat", str(repeat)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"[{mode} with {python}] failed:\n{r.stderr[-2000:]}", file=sys.stderr)
        return {}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", choices=["anyffi", "official"])
    ap.add_argument("--number", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--official-python", default=os.path.join(ROOT, ".venv-official", "bin", "python"))
    a = ap.parse_args()
    if a.child == "anyffi":
        print(json.dumps(child_anyffi(a.number, a.repeat)))
        return
    if a.child == "official":
        print(json.dumps(child_official(a.number, a.repeat)))
        return
    if a.quick:
        a.number, a.repeat = 50_000, 3

    ours = run_child(sys.executable, "anyffi", {"ANYFFI_LIBRARY": os.path.join(ROOT, "target", "release", "libtvm_ffi.so")}, a.number, a.repeat)
    # the same library with the package's pure-Python __call__ (no native call installed)
    py_path = run_child(
        sys.executable,
        "anyffi",
        {"ANYFFI_LIBRARY": os.path.join(ROOT, "target", "release", "libtvm_ffi.so"), "ANYFFI_NATIVE_CALL": "0"},
        a.number,
        a.repeat,
    )
    on_official = {}
    if os.path.isfile(OFFICIAL_LIB):
        on_official = run_child(sys.executable, "anyffi", {"ANYFFI_LIBRARY": OFFICIAL_LIB}, a.number, a.repeat)
    official = {}
    if os.path.isfile(a.official_python):
        official = run_child(a.official_python, "official", {}, a.number, a.repeat)

    def cell(d: dict, key: str) -> str:
        v = d.get(key)
        return f"{v:9.0f}" if v is not None else f"{'-':>9}"

    def ratio(x, y) -> str:
        return f"{x / y:7.2f}x" if x and y else f"{'-':>8}"

    print(f"anyffi Python call overhead, ns of thread CPU time per call (min of {a.repeat} x {a.number}); lower is better")
    print(f"  ours     = anyffi on {ours.get('library', '?')} (the library's native Function.__call__)")
    print("  py-path  = the same with ANYFFI_NATIVE_CALL=0 (the package's pure-Python __call__, one ctypes call)")
    print(f"  on-off   = anyffi on {on_official.get('library', '(official library not found)')}")
    print(f"  official = apache-tvm-ffi package (Cython) on its own library")
    print()
    hdr = f"{'case':32s} {'ours':>9} {'py-path':>9} {'on-off':>9} {'official':>9} {'ours/bare':>9} {'ours/off':>9}"
    print(hdr)
    print("-" * len(hdr))
    bare = ours.get("bare ctypes nop()")
    for label, _ in CASES:
        o = ours.get(f"anyffi {label}")
        print(
            f"{label:32s} {cell(ours, f'anyffi {label}')} {cell(py_path, f'anyffi {label}')} "
            f"{cell(on_official, f'anyffi {label}')} {cell(official, f'tvm_ffi {label}')} {ratio(o, bare)} {ratio(o, official.get(f'tvm_ffi {label}'))}"
        )
    for label in ("nop() [release_gil=False]", "nop(ndarray) [release_gil=False]"):
        o = ours.get(f"anyffi {label}")
        print(
            f"{label:32s} {cell(ours, f'anyffi {label}')} {cell(py_path, f'anyffi {label}')} "
            f"{cell(on_official, f'anyffi {label}')} {'':>9} {ratio(o, bare)}"
        )
    for label, key in (("bare ctypes nop()", "bare ctypes nop()"), ("bare ctypes nop() [byref]", "bare ctypes nop() [byref args]")):
        print(f"{label:32s} {cell(ours, key)} {cell(py_path, key)} {cell(on_official, key)}")
    cb = ours.get("anyffi apply(f) [callback]")
    nf = ours.get("anyffi nop(Function)")
    if cb and nf:
        print()
        print(f"callback increment (apply(f) - nop(f)), ours: {cb - nf:.0f} ns", end="")
        ocb, onf = official.get("tvm_ffi apply(f) [callback]"), official.get("tvm_ffi nop(Function)")
        if ocb and onf:
            print(f"; official package: {ocb - onf:.0f} ns")
        else:
            print()
    nop = ours.get("anyffi nop()")
    if nop and bare:
        print()
        print("targets (issue 7; the absolute ones were set on a machine where the official package's nop() is 86-112 ns):")
        offnop = official.get("tvm_ffi nop()")
        scale = f" (official nop() here: {offnop:.0f} ns)" if offnop else ""
        print(f"  nop() <= 2x bare ctypes: {nop / bare:.2f}x  {'PASS' if nop <= 2 * bare else 'MISS'}")
        print(f"  nop() <= 250 ns: {nop:.0f} ns  {'PASS' if nop <= 250 else 'MISS'}{scale}")
        nd = ours.get("anyffi nop(ndarray)")
        print(f"  nop(ndarray) <= 600 ns: {nd:.0f} ns  {'PASS' if nd <= 600 else 'MISS'}")
        print(f"  callback <= 1 us: the callback (apply(f) - nop(f)) {cb - nf:.0f} ns  {'PASS' if cb - nf <= 1000 else 'MISS'}; "
              f"the whole apply(f) {cb:.0f} ns  {'PASS' if cb <= 1000 else 'MISS'}")


if __name__ == "__main__":
    main()
