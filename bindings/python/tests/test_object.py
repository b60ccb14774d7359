"""Object ownership: one strong reference per Python owner, released on collection or close()."""

from __future__ import annotations

import gc

import anyffi
import pytest


def test_use_count_tracks_python_owners(t):
    f = anyffi.Function(lambda: None)
    assert f.use_count == 1
    g = t.echo(f)  # a second owner of the same object
    assert f.use_count == 2 and g.same_as(f)
    del g
    gc.collect()
    assert f.use_count == 1


def test_arguments_are_borrowed(t):
    f = anyffi.Function(lambda: None)
    for _ in range(100):
        t.nop(f, f, f)
    assert f.use_count == 1


def test_close_is_idempotent_and_releases(t):
    f = anyffi.Function(lambda: None)
    g = t.echo(f)
    assert f.use_count == 2
    g.close()
    g.close()
    assert f.use_count == 1
    assert "closed" in repr(g)


def test_context_manager_closes():
    with anyffi.Function(lambda: 1) as f:
        assert f() == 1
    with pytest.raises(ValueError, match="closed"):
        f.handle


def test_closed_function_call_raises():
    f = anyffi.Function(lambda: 1)
    f.close()
    with pytest.raises(ValueError, match="closed"):
        f()


def test_closed_object_as_argument_raises(t):
    f = anyffi.Function(lambda: 1)
    f.close()
    with pytest.raises(ValueError, match="closed"):
        t.nop(f)


def test_type_key_and_index(t):
    f = anyffi.Function(lambda: 1)
    assert f.type_key == "ffi.Function"
    assert f.type_index == 68
    assert isinstance(f, anyffi.Object)


def test_same_as_and_equality(t):
    f = anyffi.Function(lambda: 1)
    g = anyffi.Function(lambda: 1)
    assert f.same_as(t.echo(f)) and not f.same_as(g)
    assert f == t.echo(f) and f != g
    assert hash(f) == hash(t.echo(f))
    assert not f.same_as(1)


def test_objects_cannot_be_constructed_directly():
    with pytest.raises(TypeError):
        anyffi.Object()


def test_result_objects_get_their_class(t):
    assert isinstance(t.echo(t.nop), anyffi.Function)


def test_opaque_object_lifetime(t):
    import weakref

    class Thing:
        pass

    x = Thing()
    ref = weakref.ref(x)
    t.nop(x)  # a temporary ffi.OpaquePyObject holds x during the call only
    del x
    gc.collect()
    assert ref() is None


def test_opaque_object_kept_by_ffi_holder(t):
    import weakref

    class Thing:
        pass

    x = Thing()
    ref = weakref.ref(x)
    # a Function made from a lambda closing over the opaque value keeps it alive in the library
    holder = t.echo(anyffi.Function(lambda v=x: v))
    del x
    gc.collect()
    assert ref() is not None and holder() is ref()
    del holder
    gc.collect()
    assert ref() is None


def test_copy_and_pickle_never_share_a_handle():
    import copy
    import pickle

    a = anyffi.Array([1, anyffi.List([2])])
    for c in (copy.copy(a), copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
        assert c == a and not c.same_as(a) and a.use_count == 1
    m = anyffi.Map({"k": (1, 2)})
    assert pickle.loads(pickle.dumps(m)) == m
    assert pickle.loads(pickle.dumps(anyffi.Shape((2, 3)))) == (2, 3)
    f = anyffi.Function(lambda: 1)
    for op in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError):
            op(f)


def _official_testing_lib():
    from conftest import official_testing_library

    if not official_testing_library():
        pytest.skip("no libtvm_ffi_testing.so")


def test_reflected_fields_and_methods_of_an_unregistered_type():
    # as the official package: a class per type named after it, fields as properties, member
    # methods bound, repr from ffi.ReprPrint
    _official_testing_lib()
    o = anyffi.get_global_func("testing.make_unregistered_object")()
    assert type(o).__name__ == "TestUnregisteredObject" and type(o).__module__ == "testing"
    assert isinstance(o, anyffi.Object) and o.type_key == "testing.TestUnregisteredObject"
    assert (o.v1, o.v2) == (41, 42)
    assert o.get_v1_plus_one() == 42 and o.get_v2_plus_two() == 44
    assert {"v1", "v2", "get_v1_plus_one"} <= set(dir(o))
    assert repr(o) == "testing.TestUnregisteredObject(v1=41, v2=42)"
    assert repr(o) == anyffi.get_global_func("ffi.ReprPrint")(o)
    with pytest.raises(AttributeError, match="`v1` of TestUnregisteredObject is a read-only field"):
        o.v1 = 5
    with pytest.raises(AttributeError, match="nosuch"):
        o.nosuch
    o2 = anyffi.get_global_func("testing.make_unregistered_object")()
    assert type(o2) is type(o)  # one class per type
    o.close()
    with pytest.raises(ValueError, match="closed"):
        o.v1
    assert "closed" in repr(o)


def test_registered_classes_get_constructors_fields_and_methods():
    _official_testing_lib()

    @anyffi.register_object("testing.TestIntPair")
    class TestIntPair(anyffi.Object):
        pass

    p = TestIntPair(1, 2)  # __ffi_init__
    assert (p.a, p.b, p.sum()) == (1, 2, 3)
    assert anyffi.get_global_func("testing.TestIntPairSum")(p) == 3
    assert repr(p) == "testing.TestIntPair(a=1, b=2)"

    @anyffi.register_object("testing.TestObjectBase")
    class Base(anyffi.Object):
        def twice(self):  # the class's own members stay
            return 2 * self.v_i64

    o = Base(v_i64=7, v_f64=2.5, v_str="abc")  # keyword arguments after the KWARGS marker
    assert (o.v_i64, o.v_f64, o.v_str, o.twice()) == (7, 2.5, "abc", 14)
    o.v_i64 = 11  # a writable field
    assert o.v_i64 == 11 and o.add_i64(5) == 16
    with pytest.raises(TypeError, match="int"):
        o.v_i64 = "x"
    assert o.v_i64 == 11
    # an unregistered subtype: a class below the registered one, with the subtype's fields too
    d = anyffi.get_global_func("ffi.MakeObjectFromPackedArgs")(
        "testing.TestObjectDerived", "v_i64", 1, "v_map", {"a": 1}, "v_array", [1, 2]
    )
    assert isinstance(d, Base) and type(d) is not Base
    assert d.v_i64 == 1 and dict(d.v_map) == {"a": 1} and list(d.v_array) == [1, 2]
    assert d.twice() == 2


def test_reflected_field_keeps_an_owned_tensor_of_a_numpy_array():
    # the setter got the borrowed DLTensor* view of a call argument, which an Any field kept
    # (garbage after the call); now an owned ffi.Tensor sharing the array's memory, as tvm_ffi
    np = pytest.importorskip("numpy")
    _official_testing_lib()
    mk = anyffi.get_global_func("ffi.MakeObjectFromPackedArgs")
    o = mk("testing.TestDeepCopyEdges", "v_any", 1, "v_obj", None)
    x = np.arange(4, dtype="float32")
    o.v_any = x
    del x
    gc.collect()
    v = o.v_any
    assert isinstance(v, anyffi.Tensor) and v.shape == (4,)
    np.testing.assert_array_equal(v.numpy(), np.arange(4, dtype="float32"))


def test_setting_a_long_string_field_keeps_no_copy_per_set():
    _official_testing_lib()
    from anyffi import _marshal

    @anyffi.register_object("testing.TestObjectBase")
    class Base(anyffi.Object):
        pass

    o = Base(v_i64=1)
    s = "a string longer than the inline seven bytes"
    o.v_str = s
    before = len(_marshal._STR_BYTES)
    for _ in range(1000):
        o.v_str = s
    assert len(_marshal._STR_BYTES) == before and o.v_str == s


def test_one_class_per_type_across_threads_and_parent_classes():
    _official_testing_lib()
    import sys
    import threading

    from anyffi import object as obj_mod

    # forget the classes made so far, so that the threads below all meet the type anew
    ti = anyffi.get_global_func("testing.make_unregistered_object")().type_index
    for t in [ti] + obj_mod._ancestors(ti):
        if t not in obj_mod._CLASS_BY_INDEX:
            obj_mod._CLASS_CACHE.pop(t, None)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        out = []
        bar = threading.Barrier(8)

        def work():
            bar.wait()
            out.append(type(anyffi.get_global_func("testing.make_unregistered_object")()))

        ts = [threading.Thread(target=work) for _ in range(8)]
        for th in ts:
            th.start()
        for th in ts:
            th.join()
    finally:
        sys.setswitchinterval(old)
    assert len(set(out)) == 1
    # the class of an unregistered parent type is the base, as in tvm_ffi
    names = [c.__name__ for c in out[0].__mro__]
    assert names[:3] == ["TestUnregisteredObject", "TestUnregisteredBaseObject", "Object"], names
    o = anyffi.get_global_func("testing.make_unregistered_object")()
    assert (o.get_v1_plus_one(), o.get_v2_plus_two()) == (42, 44)
