"""Objects from the official testing library: construction through the reflection-generated
`__ffi_init__` (positional, keywords, defaults), fields, methods, `create_object`
(ffi.MakeObjectFromPackedArgs), reference counts and identity."""

from __future__ import annotations

import gc

import pytest
import tvm_ffi
from tvm_ffi import testing
from tvm_ffi.testing import _ffi_api as T


def test_object_base_keywords_and_defaults() -> None:
    o = testing.TestObjectBase(v_i64=1, v_f64=2.5, v_str="abc")
    assert (o.v_i64, o.v_f64, o.v_str) == (1, 2.5, "abc")
    d = testing.TestObjectBase()
    assert (d.v_i64, d.v_f64, d.v_str) == (10, 10.0, "hello")
    p = testing.TestObjectBase(5, 6.0, "p")
    assert (p.v_i64, p.v_f64, p.v_str) == (5, 6.0, "p")
    partial = testing.TestObjectBase(v_str="only")
    assert (partial.v_i64, partial.v_str) == (10, "only")


def test_object_base_long_string_field() -> None:
    o = testing.TestObjectBase(v_str="s" * 1000)
    assert o.v_str == "s" * 1000


def test_object_base_bad_construction() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        testing.TestObjectBase(nope=1)
    with pytest.raises(TypeError, match="Cannot convert from type `ffi.SmallStr` to `int`"):
        testing.TestObjectBase(v_i64="x")


def test_object_repr() -> None:
    o = testing.TestObjectBase(v_i64=1, v_f64=2.5, v_str="abc")
    assert repr(o) == 'testing.TestObjectBase(v_i64=1, v_f64=2.5, v_str="abc")'
    assert repr(testing.TestIntPair(1, 2)) == "testing.TestIntPair(a=1, b=2)"


def test_field_setters() -> None:
    o = testing.TestObjectBase()
    o.v_i64 = 7
    o.v_str = "changed"
    assert o.v_i64 == 7 and o.v_str == "changed"
    with pytest.raises(AttributeError):
        o.v_f64 = 1.0  # def_ro: read-only
    with pytest.raises(TypeError):
        o.v_i64 = "s"


def test_methods() -> None:
    o = testing.TestObjectBase(v_i64=3)
    assert o.add_i64(4) == 7
    with pytest.raises(TypeError, match="Mismatched type on argument #1"):
        o.add_i64("x")
    pair = testing.TestIntPair(3, 4)
    assert pair.sum() == 7
    assert T.TestIntPairSum(pair) == 7
    assert (pair.a, pair.b) == (3, 4)


def test_derived_object() -> None:
    d = testing.TestObjectDerived(v_map={"a": 1}, v_array=[1, 2], v_i64=3)
    assert isinstance(d, testing.TestObjectBase)
    assert isinstance(d.v_map, tvm_ffi.Map) and d.v_map["a"] == 1
    assert isinstance(d.v_array, tvm_ffi.Array) and list(d.v_array) == [1, 2]
    assert d.add_i64(1) == 4
    assert repr(d) == (
        'testing.TestObjectDerived(v_i64=3, v_f64=10, v_str="hello", v_map={"a": 1}, v_array=(1, 2))'
    )


def test_object_holding_objects() -> None:
    o = testing.TestObjectBase(v_i64=1)
    h = testing.TestObjectPtrHolder(value=o)
    assert h.value.same_as(o)
    assert h.optional_value is None
    h.optional_value = o
    assert h.optional_value.same_as(o)


def test_create_object() -> None:
    o = testing.create_object("testing.TestObjectBase", v_i64=9, v_str="q")
    assert isinstance(o, testing.TestObjectBase)
    assert (o.v_i64, o.v_f64, o.v_str) == (9, 10.0, "q")
    d = testing.create_object("testing.TestObjectDerived", v_map={}, v_array=[])
    assert isinstance(d, testing.TestObjectDerived) and len(d.v_array) == 0


def test_create_object_errors() -> None:
    with pytest.raises(TypeError, match="Required field `v_array` not set in type `testing.TestObjectDerived`"):
        testing.create_object("testing.TestObjectDerived", v_map={})
    with pytest.raises(TypeError, match="does not have field `zzz`"):
        testing.create_object("testing.TestObjectBase", zzz=1)
    with pytest.raises(RuntimeError, match="Cannot find type `testing.NoSuchType`"):
        testing.create_object("testing.NoSuchType")


def test_cxx_init_variants() -> None:
    a = testing._TestCxxAutoInit(1, c=3)
    assert (a.a, a.b, a.c, a.d) == (1, 42, 3, 99)
    with pytest.raises(TypeError, match="missing required keyword-only argument: 'c'"):
        testing._TestCxxAutoInit(1)
    k = testing._TestCxxKwOnly(x=1, y=2, z=3)
    assert (k.x, k.y, k.z, k.w) == (1, 2, 3, 100)
    with pytest.raises(TypeError, match="takes at most 0 positional argument"):
        testing._TestCxxKwOnly(1, 2, 3)
    s = testing._TestCxxInitSubset(5)
    assert (s.required_field, s.optional_field, s.note) == (5, -1, "default")
    kd = testing._TestCxxAutoInitKwOnlyDefaults(1, k_required=2)
    assert (kd.p_required, kd.p_default, kd.k_required, kd.k_default, kd.hidden) == (1, 11, 2, 22, 33)
    c = testing._TestCxxAutoInitChild(1, 2, child_kw_only=3)
    assert (c.parent_required, c.parent_default, c.child_required, c.child_kw_only) == (1, 5, 2, 3)
    simple = testing._TestCxxAutoInitSimple(4, 5)
    assert (simple.x, simple.y) == (4, 5)
    with pytest.raises(TypeError, match="cannot be constructed directly"):
        testing._TestCxxNoAutoInit()


def test_cxx_class_hierarchy() -> None:
    b = testing._TestCxxClassBase(1, 2)  # its Python __init__ adds 1 and 2
    assert (b.v_i64, b.v_i32) == (2, 4)
    d = testing._TestCxxClassDerived(1, 2, 3.5)
    assert (d.v_i64, d.v_i32, d.v_f64, d.v_f32) == (1, 2, 3.5, 8.0)
    dd = testing._TestCxxClassDerivedDerived(1, 2, 3.5, True)
    assert (dd.v_str, dd.v_bool) == ("default", True)
    assert isinstance(dd, testing._TestCxxClassBase)


def test_unregistered_object() -> None:
    o = T.make_unregistered_object()
    assert (o.v1, o.v2) == (41, 42)
    assert o.get_v1_plus_one() == 42
    assert o.get_v2_plus_two() == 44
    assert repr(o) == "testing.TestUnregisteredObject(v1=41, v2=42)"


def test_non_copyable_object() -> None:
    n = testing.TestNonCopyable(3)
    assert n.value == 3


def test_object_use_count() -> None:
    o = testing.TestIntPair(1, 2)
    assert T.object_use_count(o) == 1
    a = tvm_ffi.convert([o, o])
    assert T.object_use_count(o) == 3
    m = tvm_ffi.convert({"k": o})
    assert T.object_use_count(o) == 4
    del a, m
    gc.collect()
    assert T.object_use_count(o) == 1


def test_use_count_of_echoed_object() -> None:
    o = testing.TestObjectBase()
    r = T.echo(o)
    assert T.object_use_count(o) == 2
    del r
    assert T.object_use_count(o) == 1


def test_identity_and_hash() -> None:
    o = testing.TestIntPair(1, 2)
    r = T.echo(o)
    assert r is not o
    assert r.same_as(o) and r == o
    assert hash(r) == hash(o)
    assert not testing.TestIntPair(1, 2).same_as(o)
    assert testing.TestIntPair(1, 2) != o  # default equality is identity


def test_type_info() -> None:
    ti = testing.TestObjectBase.__tvm_ffi_type_info__
    assert ti.type_key == "testing.TestObjectBase"
    assert [f.name for f in ti.fields] == ["v_i64", "v_f64", "v_str"]
    assert [m.name for m in ti.methods] == ["add_i64"]
    assert ti.parent_type_info.type_key == "ffi.Object"
    assert ti.fields[0].doc == "i64 field"
    assert ti.fields[1].frozen is True
    assert testing.TestObjectDerived.__tvm_ffi_type_info__.parent_type_info.type_key == "testing.TestObjectBase"


def test_registered_type_keys() -> None:
    keys = set(tvm_ffi.registry.get_registered_type_keys())
    for k in ("ffi.Object", "ffi.Array", "ffi.Map", "testing.TestObjectBase", "testing.TestIntPair",
              "ffi.EnumState", "ffi.reflection.AccessPath", "testing.SchemaAllTypes"):  # fmt: skip
        assert k in keys


def test_many_objects_are_freed() -> None:
    import weakref  # noqa: F401  (objects are not weakref-able; check counts instead)

    holder = testing.TestObjectBase()
    for _ in range(1000):
        testing.TestObjectPtrHolder(value=holder)
    gc.collect()
    assert T.object_use_count(holder) == 1
