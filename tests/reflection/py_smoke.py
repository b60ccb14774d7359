"""Smoke check of the official `tvm_ffi` Python package on the library it was loaded with.

Prints one line per check; tests/reflection/py_diff.sh runs it on the official library and on
ours and diffs the outputs. Covers import, the testing library's classes (construction, fields,
methods, generated __init__ errors), create_object, @py_class classes (MakeFieldGetter/Setter,
_PyClassRegisterTypeAttrColumns), enums, containers, repr, copy/deepcopy and equality hooks.
"""

import copy
import os
import re

import numpy as np
import tvm_ffi
import tvm_ffi.testing as T
from tvm_ffi.dataclasses import IntEnum, StrEnum, field, py_class


def show(label, f):
    try:
        print(label, "->", repr(f()))
    except Exception as e:  # noqa: BLE001
        print(label, "!!", type(e).__name__, (str(e).splitlines() or [""])[0])


def kind(label, f):
    try:
        print(label, "->", repr(f()))
    except Exception as e:  # noqa: BLE001
        print(label, "!!", type(e).__name__)


# The library under test is the one at tvm_ffi/build/lib (never the wheel's lib/ copy).
maps = open("/proc/self/maps").read()
show("libtvm_ffi.so mapped from", lambda: sorted({m.split("/tvm_ffi/")[-1] for m in
                                                   re.findall(r"\S*/libtvm_ffi\.so", maps)}))

# The testing library's classes.
o = T.TestObjectBase(v_i64=3, v_f64=1.5, v_str="hello")
show("TestObjectBase()", lambda: T.TestObjectBase())
show("TestObjectBase kw", lambda: T.TestObjectBase(v_i64=3, v_f64=1.5, v_str="x"))
show("fields", lambda: (o.v_i64, o.v_f64, o.v_str))
show("method", lambda: o.add_i64(4))
show("IntPair", lambda: T.TestIntPair(1, 2))
show("IntPair.sum", lambda: T.TestIntPair(1, 2).sum())
show("IntPair eq", lambda: T.TestIntPair(1, 2) == T.TestIntPair(1, 2))
show("copy", lambda: copy.copy(T.TestIntPair(3, 4)))
show("create_object", lambda: T.create_object("testing.TestObjectBase", v_i64=5, v_str="abc"))
show("create_object derived",
     lambda: T.create_object("testing.TestObjectDerived", v_i64=5, v_map={"a": 1}, v_array=[1, 2]))
show("create_object missing", lambda: T.create_object("testing.TestObjectDerived", v_i64=5))
show("create_object bad field", lambda: T.create_object("testing.TestObjectBase", nope=1))
show("create_object bad type", lambda: T.create_object("testing.TestObjectBase", v_i64="str"))
kind("create_object unknown type", lambda: T.create_object("no.Such", a=1))
show("deepcopy", lambda: copy.deepcopy(
    T.create_object("testing.TestObjectDerived", v_i64=5, v_map={"a": [1]}, v_array=[1, 2])))
show("recursive eq", lambda: tvm_ffi.get_global_func("ffi.RecursiveEq")(T.TestIntPair(1, 2),
                                                                        T.TestIntPair(1, 2)))
show("unregistered object", lambda: T.make_unregistered_object())
show("enum variant", lambda: tvm_ffi.get_global_func("testing.enum_variant_get")("Alpha"))


# Python-defined classes.
@py_class("reflect_smoke.Point")
class Point(tvm_ffi.Object):
    x: int
    y: float = 2.5
    name: str = "pt"
    tags: list = field(default_factory=list)


p = Point(4, tags=[1, 2])
show("Point(1)", lambda: Point(1))
show("Point kw", lambda: Point(x=3, y=1.0, name="a long name here"))
show("Point missing", lambda: Point())
show("Point bad", lambda: Point("no"))
show("Point fields", lambda: (p.x, p.y, p.name, p.tags))
show("Point copy", lambda: copy.copy(p))
show("Point deepcopy", lambda: copy.deepcopy(p))


class Color(IntEnum, type_key="reflect_smoke.Color"):
    RED = 1
    BLUE = 10


class Mode(StrEnum, type_key="reflect_smoke.Mode"):
    FAST = "fast"


show("enum members", lambda: [(c.name, c.value) for c in Color])
show("enum by value", lambda: Color(10))
show("enums in array", lambda: tvm_ffi.convert([Color.RED, Mode.FAST]))

# Containers and repr.
rp = tvm_ffi.get_global_func("ffi.ReprPrint")
for v in [None, True, -7, 2**63, 1.0, -0.0, 1e-5, 123456789.0, float("nan"), "", "unicode é 中 😀",
          b"bytes\x00\xff", [1, [2, []]], (), {"a": {"b": [1, 2]}}, tvm_ffi.Shape((1, 2)),
          tvm_ffi.dtype("bfloat16"), tvm_ffi.Device("rocm", 3), tvm_ffi.List([1, 2]),
          tvm_ffi.Dict({"k": [1]}), tvm_ffi.from_dlpack(np.zeros((2, 3), "float64")),
          tvm_ffi.get_global_func("testing.add_one"),
          tvm_ffi.access_path.AccessPath.root().attr("f").array_item(2).map_item("k")]:
    show("repr", lambda v=v: rp(v))
os.environ["TVM_FFI_REPR_WITH_ADDR"] = "1"
cyc = tvm_ffi.List([1])
cyc.append(cyc)
show("repr cycle with addresses", lambda: re.sub(r"0x[0-9a-f]+", "ADDR", rp(cyc)))
