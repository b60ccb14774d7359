"""Calls in both directions: Python functions called from C++ (`testing.apply`), global
functions registered from Python and found again, and exceptions crossing each way."""

from __future__ import annotations

import gc
import traceback

import pytest
import tvm_ffi
from tvm_ffi.testing import _ffi_api as T

apply = tvm_ffi.get_global_func("testing.apply")


def test_apply_calls_python_function() -> None:
    assert apply(lambda a, b: a + b, 1, 2) == 3
    assert apply(lambda: "no args") == "no args"
    assert apply(lambda *a: len(a), *range(10)) == 10


def test_apply_passes_every_kind() -> None:
    seen = []

    def record(*args):
        seen.extend(args)
        return args[0]

    o = tvm_ffi.testing.TestIntPair(1, 2)
    apply(record, 1, 2.5, "s", "long" * 30, b"b", None, True, o, [1, 2], {"k": "v"})
    assert seen[:7] == [1, 2.5, "s", "long" * 30, b"b", None, True]
    assert seen[7].same_as(o)
    assert isinstance(seen[8], tvm_ffi.Array) and list(seen[8]) == [1, 2]
    assert isinstance(seen[9], tvm_ffi.Map) and seen[9]["k"] == "v"


def test_apply_returns_every_kind() -> None:
    o = tvm_ffi.testing.TestIntPair(1, 2)
    for v in (1, 2.5, "s", "long" * 30, b"b", None, True, 2**70):
        assert apply(lambda v=v: v) == v
    assert apply(lambda: o).same_as(o)
    r = apply(lambda: [1, [2]])
    assert isinstance(r, tvm_ffi.Array) and r[1][0] == 2


def test_apply_of_ffi_function() -> None:
    assert apply(tvm_ffi.get_global_func("testing.add_one"), 41) == 42
    assert apply(apply, lambda x: x * 3, 5) == 15


def test_nested_callbacks() -> None:
    def level(n):
        if n == 0:
            return 0
        return 1 + apply(level, n - 1)

    assert level(20) == 20


def test_returned_python_function_keeps_working() -> None:
    def make():
        counter = [0]

        def inc():
            counter[0] += 1
            return counter[0]

        return inc

    f = apply(make)
    assert isinstance(f, tvm_ffi.Function)
    assert f() == 1 and f() == 2


@pytest.mark.parametrize(
    "exc_type",
    [ValueError, TypeError, KeyError, IndexError, RuntimeError, AttributeError, AssertionError, MemoryError],
)
def test_python_exception_keeps_its_type(exc_type: type) -> None:
    def raiser():
        raise exc_type("from python")

    with pytest.raises(exc_type) as info:
        apply(raiser)
    if exc_type is KeyError:
        # official: the KeyError's str() ("'from python'") becomes the message
        assert info.value.args[0] == "'from python'"
    else:
        assert str(info.value) == "from python"


@pytest.mark.parametrize("exc_type", [NotImplementedError, ZeroDivisionError, OverflowError, Exception])
def test_unregistered_python_exception_becomes_runtime_error(exc_type: type) -> None:
    def raiser():
        raise exc_type("other")

    with pytest.raises(RuntimeError) as info:
        apply(raiser)
    assert str(info.value) == "other"


def test_exception_through_two_levels_of_callbacks() -> None:
    def inner():
        raise KeyError("deep")

    with pytest.raises(KeyError):
        apply(lambda: apply(inner))


def test_callback_error_traceback_shows_python_and_cpp_frames() -> None:
    def raiser_function_name():
        raise ValueError("tb")

    with pytest.raises(ValueError) as info:
        apply(raiser_function_name)
    tb = "".join(traceback.format_exception(info.value))
    assert "raiser_function_name" in tb
    assert "TestApply" in tb  # C++ frame of testing.apply, from the library's backtrace


def test_register_global_func_decorator() -> None:
    @tvm_ffi.register_global_func("pyofficial.decorated_add")
    def add(a, b):
        return a + b

    try:
        f = tvm_ffi.get_global_func("pyofficial.decorated_add")
        assert isinstance(f, tvm_ffi.Function)
        assert f(2, 3) == 5
        assert apply(f, 4, 5) == 9
        assert "pyofficial.decorated_add" in tvm_ffi.registry.list_global_func_names()
    finally:
        tvm_ffi.remove_global_func("pyofficial.decorated_add")


def test_register_global_func_plain() -> None:
    def triple(x):
        return x * 3

    tvm_ffi.register_global_func("pyofficial.triple", triple)
    try:
        assert tvm_ffi.get_global_func("pyofficial.triple")(7) == 21
        assert apply(tvm_ffi.get_global_func("pyofficial.triple"), "ab") == "ababab"
        with pytest.raises(RuntimeError, match="already registered"):
            tvm_ffi.register_global_func("pyofficial.triple", triple)
        tvm_ffi.register_global_func("pyofficial.triple", lambda x: x * 4, override=True)
        assert tvm_ffi.get_global_func("pyofficial.triple")(2) == 8
    finally:
        tvm_ffi.remove_global_func("pyofficial.triple")
    assert tvm_ffi.get_global_func("pyofficial.triple", allow_missing=True) is None


def test_registered_function_raising() -> None:
    @tvm_ffi.register_global_func("pyofficial.raises")
    def raises(kind):
        raise {"v": ValueError, "t": TypeError, "k": KeyError}[kind]("registered")

    try:
        f = tvm_ffi.get_global_func("pyofficial.raises")
        with pytest.raises(ValueError):
            apply(f, "v")
        with pytest.raises(TypeError):
            f("t")
        with pytest.raises(KeyError):
            apply(f, "k")
    finally:
        tvm_ffi.remove_global_func("pyofficial.raises")


def test_get_global_func_missing() -> None:
    with pytest.raises(ValueError, match="Cannot find global function"):
        tvm_ffi.get_global_func("pyofficial.no_such_function")
    assert tvm_ffi.get_global_func("pyofficial.no_such_function", allow_missing=True) is None


def test_global_func_metadata() -> None:
    md = tvm_ffi.get_global_func_metadata("testing.schema_id_int")
    assert md["type_schema"] == (
        '{"type":"ffi.Function","named_args":{"return":[{"type":"int"}],"params":[{"type":"int"}]}}'
    )
    assert md["bool_attr"] is True and md["int_attr"] == 1 and md["str_attr"] == "hello"


def test_c_symbol_function() -> None:
    from_extern = tvm_ffi.get_global_func("ffi.FunctionFromExternC")
    import ctypes

    sym = T.get_add_one_c_symbol()
    f = from_extern(ctypes.c_void_p(0), ctypes.c_void_p(sym), ctypes.c_void_p(0))
    assert f(41) == 42


def test_callbacks_do_not_leak_references() -> None:
    class Marker:
        pass

    import weakref

    m = Marker()
    ref = weakref.ref(m)

    def cb():
        return m

    for _ in range(10):
        apply(lambda: None)
    f = tvm_ffi.convert(cb)
    del cb
    f = None  # noqa: F841
    del m
    gc.collect()
    assert ref() is None
