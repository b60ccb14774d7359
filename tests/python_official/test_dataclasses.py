"""Dataclass behaviour of the official package: `c_class` types from the testing library
(copy, deepcopy, replace, asdict, fields, generated eq/order/hash, custom hooks) and
Python-defined `py_class` types registered in the library's type table."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import tvm_ffi
from tvm_ffi import Object, testing
from tvm_ffi.dataclasses import asdict, astuple, field, fields, is_dataclass, py_class, replace
from tvm_ffi.testing import _ffi_api as T

pytestmark = pytest.mark.issue4


# --- c_class types from the testing library ------------------------------------------------


def test_fields_and_asdict() -> None:
    o = testing.TestObjectBase(v_i64=7, v_f64=2.5, v_str="abc")
    assert is_dataclass(o)
    assert [f.name for f in fields(testing.TestObjectDerived)] == ["v_i64", "v_f64", "v_str", "v_map", "v_array"]
    assert asdict(o) == {"v_i64": 7, "v_f64": 2.5, "v_str": "abc"}
    assert astuple(o) == (7, 2.5, "abc")


def test_replace() -> None:
    o = testing.TestObjectBase(v_i64=7, v_str="abc")
    r = replace(o, v_i64=100)
    assert not r.same_as(o)
    assert (r.v_i64, r.v_str) == (100, "abc")
    assert o.v_i64 == 7


def test_shallow_copy() -> None:
    d = testing.TestObjectDerived(v_map={"a": 1}, v_array=[1, 2])
    c = copy.copy(d)
    assert not c.same_as(d)
    assert c.v_array.same_as(d.v_array)  # shallow: children shared
    assert repr(c) == repr(d)


def test_deep_copy() -> None:
    d = testing.TestObjectDerived(v_map={"a": [1]}, v_array=[1, [2]])
    c = copy.deepcopy(d)
    assert not c.same_as(d)
    assert not c.v_array.same_as(d.v_array)
    assert repr(c) == repr(d)


def test_deep_copy_keeps_sharing() -> None:
    o = testing.TestObjectBase()
    arr = tvm_ffi.convert([o, o, [o]])
    c = copy.deepcopy(arr)
    assert not c[0].same_as(o)
    assert c[0].same_as(c[1]) and c[0].same_as(c[2][0])
    assert list(copy.deepcopy(tvm_ffi.convert([1, [2]]))[1]) == [2]


def test_deep_copy_function() -> None:
    deep_copy = tvm_ffi.get_global_func("ffi.DeepCopy")
    m = tvm_ffi.convert({"k": [1, 2], "j": testing.TestIntPair(1, 2)})
    c = deep_copy(m)
    assert not c.same_as(m)
    assert repr(c) == repr(m)


def test_non_copyable_type() -> None:
    with pytest.raises(TypeError, match="does not support copy"):
        copy.copy(testing.TestNonCopyable(3))


def test_generated_eq_order_hash() -> None:
    a = testing._TestCxxClassDerived(1, 2, 3.5)
    b = testing._TestCxxClassDerived(1, 2, 3.5)
    c = testing._TestCxxClassDerived(1, 2, 4.5)
    assert a == b and a != c
    assert a < c and c > a and a <= b and a >= b
    assert hash(a) == hash(b)
    assert repr(a) == "testing.TestCxxClassDerived(v_f64=3.5, v_f32=8)"  # base fields repr(false)


def test_custom_hash_and_compare_hooks() -> None:
    recursive_eq = tvm_ffi.get_global_func("ffi.RecursiveEq")
    recursive_hash = tvm_ffi.get_global_func("ffi.RecursiveHash")
    assert recursive_hash(testing.TestCustomHash(1, "a")) == recursive_hash(testing.TestCustomHash(1, "b"))
    assert recursive_eq(testing.TestCustomCompare(1, "a"), testing.TestCustomCompare(1, "b"))
    assert not recursive_eq(testing.TestCustomCompare(1, "a"), testing.TestCustomCompare(2, "a"))
    assert recursive_hash(testing.TestCustomCompare(1, "a")) == recursive_hash(testing.TestCustomCompare(1, "z"))
    lt = tvm_ffi.get_global_func("ffi.RecursiveLt")
    assert lt(testing.TestCustomCompare(1, "z"), testing.TestCustomCompare(2, "a"))


def test_compare_and_hash_field_flags() -> None:
    recursive_eq = tvm_ffi.get_global_func("ffi.RecursiveEq")
    recursive_hash = tvm_ffi.get_global_func("ffi.RecursiveHash")
    assert recursive_eq(testing.TestCompare(1, "a", 2), testing.TestCompare(1, "a", 3))
    assert not recursive_eq(testing.TestCompare(1, "a", 2), testing.TestCompare(1, "b", 2))
    assert recursive_hash(testing.TestHash(1, "a", 2)) == recursive_hash(testing.TestHash(1, "a", 3))


def test_eq_without_hash_is_rejected_by_recursive_hash() -> None:
    recursive_hash = tvm_ffi.get_global_func("ffi.RecursiveHash")
    with pytest.raises(Exception):  # noqa: B017, PT011
        recursive_hash(testing.TestEqWithoutHash(1, "a"))


def test_repr_print() -> None:
    repr_print = tvm_ffi.get_global_func("ffi.ReprPrint")
    assert repr_print([1, "a", {"k": testing.TestIntPair(1, 2)}]) == (
        '(1, "a", {"k": testing.TestIntPair(a=1, b=2)})'
    )


# --- py_class -------------------------------------------------------------------------------


@py_class("pyofficial.Point")
class Point(Object):
    x: int
    y: int = 0


@py_class("pyofficial.Node", eq=True, order=True, unsafe_hash=True)
class Node(Object):
    name: str
    children: list = field(default_factory=list)


@py_class("pyofficial.Frozen", frozen=True)
class Frozen(Object):
    v: int


def test_py_class_construction_and_repr() -> None:
    assert repr(Point(1, 2)) == "pyofficial.Point(x=1, y=2)"
    assert repr(Point(1)) == "pyofficial.Point(x=1, y=0)"
    p = Point(y=3, x=4)
    assert (p.x, p.y) == (4, 3)
    with pytest.raises(TypeError, match="expected int, got str"):
        Point("a")


def test_py_class_is_registered_in_the_library() -> None:
    assert "pyofficial.Point" in tvm_ffi.registry.get_registered_type_keys()
    p = Point(1, 2)
    r = T.echo(p)
    assert r.same_as(p) and isinstance(r, Point)
    assert T.object_use_count(p) == 2
    del r
    assert T.object_use_count(p) == 1
    made = testing.create_object("pyofficial.Point", x=5, y=6)
    assert isinstance(made, Point) and (made.x, made.y) == (5, 6)


def test_py_class_fields_helpers() -> None:
    assert [f.name for f in fields(Point)] == ["x", "y"]
    assert asdict(Point(1, 2)) == {"x": 1, "y": 2}
    assert repr(replace(Point(1, 2), y=9)) == "pyofficial.Point(x=1, y=9)"


def test_py_class_default_equality_is_identity() -> None:
    p = Point(1, 2)
    assert p == p
    assert Point(1, 2) != Point(1, 2)


def test_py_class_eq_order_hash() -> None:
    a = Node("a", [Node("b")])
    assert repr(a) == 'pyofficial.Node(name="a", children=[pyofficial.Node(name="b", children=[])])'
    assert isinstance(a.children, tvm_ffi.List)
    assert a == Node("a", [Node("b")])
    assert a != Node("a", [Node("c")])
    assert Node("a") < Node("b")
    assert hash(Node("a")) == hash(Node("a"))


def test_py_class_mutation_and_frozen() -> None:
    p = Point(1, 2)
    p.x = 10
    assert p.x == 10
    with pytest.raises(TypeError):
        p.x = "s"
    f = Frozen(1)
    with pytest.raises(AttributeError):
        f.v = 2


def test_py_class_copy() -> None:
    n = Node("a", [Node("b")])
    c = copy.copy(n)
    assert not c.same_as(n) and c.children.same_as(n.children)
    d = copy.deepcopy(n)
    assert not d.children.same_as(n.children) and d == n


def test_py_class_inheritance() -> None:
    @py_class("pyofficial.Point3")
    class Point3(Point):
        z: int = 0

    p = Point3(1, 2, 3)
    assert isinstance(p, Point)
    assert (p.x, p.y, p.z) == (1, 2, 3)
    assert repr(p) == "pyofficial.Point3(x=1, y=2, z=3)"
    ti = Point3.__tvm_ffi_type_info__
    assert ti.parent_type_info.type_key == "pyofficial.Point"


# --- hook callbacks called on another thread while the hook runs ------------------------------


def _on_another_thread(fn):  # type: ignore[no-untyped-def]
    import threading

    out: list = []

    def body() -> None:
        try:
            out.append(fn())
        except Exception as e:  # noqa: BLE001
            _threaded_errors.append(f"{type(e).__name__}: {e}")
            out.append(None)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    return out[0]


@py_class("pyofficial.ThreadedHooks", eq=True, order=True, unsafe_hash=True)
class ThreadedHooks(Object):
    x: Any

    def __ffi_repr__(self, fn_repr):  # type: ignore[no-untyped-def]
        _threaded_calls.append("repr")
        if len(_threaded_calls) > 10:
            return "runaway"
        return "T<" + _on_another_thread(lambda: fn_repr(tvm_ffi.List([self]))) + ">"

    def __ffi_eq__(self, other, fn_eq):  # type: ignore[no-untyped-def]
        _threaded_calls.append("eq")
        if len(_threaded_calls) > 10:
            return False
        return _on_another_thread(lambda: fn_eq(tvm_ffi.List([self]), tvm_ffi.List([other])))

    def __ffi_compare__(self, other, fn_cmp):  # type: ignore[no-untyped-def]
        _threaded_calls.append("cmp")
        if len(_threaded_calls) > 10:
            return 1
        r = _on_another_thread(lambda: fn_cmp(tvm_ffi.List([self]), tvm_ffi.List([other])))
        return 0 if r is None else r

    def __ffi_hash__(self, fn_hash):  # type: ignore[no-untyped-def]
        _threaded_calls.append("hash")
        if len(_threaded_calls) > 10:
            return 0
        return _on_another_thread(lambda: fn_hash(tvm_ffi.List([self])))


_threaded_calls: list = []
_threaded_errors: list = []


def test_hook_callbacks_on_another_thread_see_the_hooks_running() -> None:
    # The callback, called on another thread while its hook waits, meets the hook's own object
    # again: as in the official library (one printer or walk for every thread), that object is
    # in progress there (`...`, a cycle), and the hook runs once rather than without end.
    a, b = ThreadedHooks(1), ThreadedHooks(1)
    _threaded_errors.clear()
    got = []
    for run in (
        lambda: repr(a),
        lambda: tvm_ffi._ffi_api.RecursiveEq(a, b),
        lambda: tvm_ffi._ffi_api.RecursiveLt(a, b),
        lambda: tvm_ffi._ffi_api.RecursiveHash(a),
    ):
        _threaded_calls.clear()
        got.append((run(), len(_threaded_calls)))
    assert got == [("T<[...]>", 1), (True, 1), (False, 1), (THREADED_HASH, 1)]
    # ordering a value that contains itself is an error (there, raised in the thread)
    assert len(_threaded_errors) == 1 and "cyclic reference detected in ordering" in _threaded_errors[0]
    _threaded_errors.clear()


THREADED_HASH = 8469211059539376391  # recorded on the official library


# --- session 24: found by a differential fuzz on both libraries -----------------------------


@py_class("pyofficial.KwAfterPos")
class KwAfterPos(Object):
    x: float
    y: int = field(kw_only=True)


def test_init_binds_the_positional_arguments_that_fit_before_counting_them() -> None:
    # with keywords, a bad positional argument is the error even when there are too many
    with pytest.raises(TypeError, match="field 'x'"):
        KwAfterPos(b"by", 1, y=2)
    with pytest.raises(TypeError, match="takes at most 1 positional argument"):
        KwAfterPos(1.0, 1, y=2)
    with pytest.raises(TypeError, match="takes at most 1 positional argument"):
        KwAfterPos(b"by", 1)


@py_class("pyofficial.Text", eq=True, order=True)
class Text(Object):
    s: str = ""


def test_order_of_strings_compares_bytes_as_signed_chars() -> None:
    # the official comparison reads each byte as a C char (signed on x86-64): non-ASCII text
    # (UTF-8 bytes from 0x80) sorts before ASCII
    assert not Text(s="a") < Text(s="\u00e9")
    assert Text(s="\u00e9") < Text(s="q")
    assert Text(s="ab") < Text(s="abc")
    assert Text(s="b") > Text(s="a")
