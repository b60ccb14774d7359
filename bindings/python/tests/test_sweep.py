"""Every global function, called with wrong arguments, fails with a Python exception.

A child process calls each registered global function with no arguments, with each value of a
pool of every kind (None, ints at the edges, NaN, strings, bytes, containers, arrays of several
dtypes and layouts, functions, one that raises, devices, dtypes, tensors) and with random tuples
of two to five of them (a fixed seed, so a failure repeats). Each call may succeed or raise; it
must not crash, hang or raise anything but an ``Exception``. The child writes each case to stderr
before making the call, so a crash names the function and the arguments that caused it.

On the official library two functions are left out: they abort the process on such input
(``ffi.MakeObjectFromPackedArgs`` and ``ffi._RegisterFFIInit`` with a non-type first argument).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import T

HERE = os.path.dirname(os.path.abspath(__file__))
CASES_PER_FUNCTION = 60

# `runtime.memcpy`/`memcpy_async` take raw addresses (void*, as in the LLAISYS table) and copy
# wherever they point, as C's memcpy does; the pool holds no opaque pointer, so the sweep only
# checks that they refuse everything else. Nothing is left out on our library.
OFFICIAL_ABORTS = {"ffi.MakeObjectFromPackedArgs", "ffi._RegisterFFIInit"}

CHILD = r"""
import json, math, random, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import anyffi

def pool():
    p = [None, 0, 1, -1, 3, 2**62, -(2**63), 1.5, float("nan"), float("inf"), -0.0, True, False,
         "", "abc", "x" * 100, "ffi.Array", "int32", "float32", b"bytes",
         anyffi.Array([1, 2]), anyffi.Array([]), anyffi.Array(["a", 1.5]), anyffi.Map({"a": 1}),
         anyffi.Map({}), anyffi.Shape([2, 3]), anyffi.Shape([]),
         np.zeros((2, 3), np.float32), np.arange(3, dtype=np.int64), np.zeros((0,), np.float32),
         np.zeros((2,), np.bool_), np.ones((4, 4), np.float16), np.zeros((1, 2, 3), np.float64),
         np.ones((3, 2), np.float32).T,
         anyffi.Function(lambda *a: None), anyffi.Function(lambda *a: 1 / 0),
         anyffi.device("cpu", 0), anyffi.dtype("float32"), anyffi.device("cuda", 0),
         [1, 2, 3], {"k": "v"}, (), [anyffi.Array([1])]]
    p.append(anyffi.from_dlpack(np.zeros((2, 2), np.float32)))
    return p

skip = set(json.loads(sys.argv[2]))
per_function = int(sys.argv[3])
P = pool()
odd = []
for name in sorted(anyffi.list_global_func_names()):
    if name in skip:
        continue
    f = anyffi.get_global_func(name)
    rng = random.Random(name)
    cases = [()] + [(i,) for i in range(len(P))]
    cases += [tuple(rng.randrange(len(P)) for _ in range(rng.randint(2, 5))) for _ in range(per_function)]
    for c in cases:
        sys.stderr.write(json.dumps([name, c]) + "\n")
        sys.stderr.flush()
        try:
            f(*(P[i] for i in c))
        except Exception as e:
            if not str(e).strip():
                odd.append([name, c, type(e).__name__, "empty message"])
        except BaseException as e:
            odd.append([name, c, type(e).__name__, str(e)[:200]])
print(json.dumps(odd))
"""


def test_every_global_function_survives_wrong_arguments():
    skip = sorted(OFFICIAL_ABORTS) if T.official else []
    pkg = os.path.dirname(HERE)
    try:
        r = subprocess.run(
            [sys.executable, "-c", CHILD, pkg, json.dumps(skip), str(CASES_PER_FUNCTION)],
            capture_output=True,
            text=True,
            timeout=600,
            env=dict(os.environ),
        )
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise AssertionError(f"the sweep hung; last case: {err.strip().splitlines()[-1:]}") from None
    lines = r.stderr.strip().splitlines()
    last = [ln for ln in lines if ln.startswith("[")][-1:]
    assert r.returncode == 0, (
        f"the sweep died with status {r.returncode}; last case {last}; "
        f"stderr tail: {[ln for ln in lines if not ln.startswith('[')][-5:]}"
    )
    odd = json.loads(r.stdout.strip().splitlines()[-1])
    assert odd == [], odd[:10]
