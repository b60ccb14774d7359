"""One round of the structural benchmarks, run by ``bench.py`` in a process of its own with the
official ``tvm_ffi`` package on one library: prints ``{case: seconds}`` (each the minimum of a few
timed calls) as JSON."""

from __future__ import annotations

import copy
import json
import sys
import time

import tvm_ffi
from tvm_ffi import serialization, structural_equal, structural_hash
from tvm_ffi.dataclasses import field, py_class


@py_class("bench.structural.Var", structural_eq="var")
class Var(tvm_ffi.Object):
    name: str = field(structural_eq="ignore")


@py_class("bench.structural.Int", structural_eq="tree")
class Int(tvm_ffi.Object):
    value: int


@py_class("bench.structural.Add", structural_eq="tree")
class Add(tvm_ffi.Object):
    a: tvm_ffi.Object
    b: tvm_ffi.Object


@py_class("bench.structural.Let", structural_eq="tree")
class Let(tvm_ffi.Object):
    var: Var = field(structural_eq="def")
    value: tvm_ffi.Object


@py_class("bench.structural.Func", structural_eq="tree")
class Func(tvm_ffi.Object):
    params: list = field(structural_eq="def")
    body: list
    comment: str = field(structural_eq="ignore", default="")


def ir_function(n: int) -> Func:
    """An IR-like tree: 4 parameters and n let-bindings of nested additions over earlier
    variables (7 objects per binding)."""
    params = [Var(name=f"p{i}") for i in range(4)]
    body, names = [], list(params)
    for i in range(n):
        v = Var(name=f"v{i}")
        e = Add(a=names[i % len(names)], b=Add(a=Int(value=i), b=names[(i * 7) % len(names)]))
        body.append(Let(var=v, value=e))
        names.append(v)
    return Func(params=params, body=body)


def best(f, n: int = 7) -> float:
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


def main() -> None:
    H, E = structural_hash, structural_equal
    f1, f2 = ir_function(5000), ir_function(5000)
    assert E(f1, f2) and H(f1) == H(f2)
    maps = [tvm_ffi.Array([tvm_ffi.Map({f"k{i}": tvm_ffi.Array([i, i + 1, i + 2])}) for i in range(20000)])
            for _ in range(2)]
    ints = [tvm_ffi.Array(list(range(200000))) for _ in range(2)]
    wide = [tvm_ffi.Map({i: f"v{i}" for i in range(50000)}) for _ in range(2)]
    deep = tvm_ffi.Array([1])
    for i in range(200):
        deep = tvm_ffi.Array([deep, i, "s"])
    js = serialization.to_json_graph_str(f1)
    one, one2 = Int(value=1), Int(value=1)
    let = [Let(var=Var(name="a"), value=Add(a=Int(value=1), b=Int(value=2))) for _ in range(2)]
    res = {
        "IR tree (35k objects), hash": best(lambda: H(f1)),
        "IR tree, equal": best(lambda: E(f1, f2)),
        "IR tree, equal (map_free_vars)": best(lambda: E(f1, f2, map_free_vars=True)),
        "IR tree, deepcopy": best(lambda: copy.deepcopy(f1), 3),
        "IR tree, to_json_graph_str": best(lambda: serialization.to_json_graph_str(f1), 3),
        "IR tree, from_json_graph_str": best(lambda: serialization.from_json_graph_str(js), 3),
        "20k one-entry Maps of Arrays, hash": best(lambda: H(maps[0])),
        "20k one-entry Maps of Arrays, equal": best(lambda: E(maps[0], maps[1])),
        "200k-int Array, hash": best(lambda: H(ints[0])),
        "200k-int Array, equal": best(lambda: E(ints[0], ints[1])),
        "50k-entry Map, hash": best(lambda: H(wide[0])),
        "50k-entry Map, equal": best(lambda: E(wide[0], wide[1])),
        "200-deep nesting, hash x100": best(lambda: [H(deep) for _ in range(100)]),
        "one Int node, hash x10000 (per-call cost)": best(lambda: [H(one) for _ in range(10000)]),
        "one Int node, equal x10000": best(lambda: [E(one, one2) for _ in range(10000)]),
        "one let-binding (5 objects), hash x10000": best(lambda: [H(let[0]) for _ in range(10000)]),
        "one let-binding, equal x10000": best(lambda: [E(let[0], let[1]) for _ in range(10000)]),
        "int 5, hash x10000 (the Python call alone)": best(lambda: [H(5) for _ in range(10000)]),
    }
    json.dump(res, sys.stdout)


if __name__ == "__main__":
    main()
