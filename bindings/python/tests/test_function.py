"""Global functions, Python callables as FFI functions, callbacks both ways."""

from __future__ import annotations

import gc
import itertools
import weakref

import anyffi
import pytest

_names = itertools.count()


def fresh(name: str) -> str:
    return f"anyffi.pytest.{name}.{next(_names)}"


def test_get_global_func(t):
    f = anyffi.get_global_func("ffi.FunctionListGlobalNamesFunctor")
    assert isinstance(f, anyffi.Function) and callable(f)


def test_missing_global_func():
    with pytest.raises(ValueError, match="no.such.function"):
        anyffi.get_global_func("no.such.function")
    assert anyffi.get_global_func("no.such.function", allow_missing=True) is None


def test_list_global_func_names(t):
    names = anyffi.list_global_func_names()
    assert "ffi.FunctionListGlobalNamesFunctor" in names
    assert all(isinstance(n, str) for n in names)
    assert len(names) == len(set(names))


def test_register_and_call_python_function():
    name = fresh("add")

    @anyffi.register_global_func(name)
    def add(a, b):
        return a + b

    assert add(1, 2) == 3  # the decorator returns the Python function itself
    f = anyffi.get_global_func(name)
    assert f(2, 3) == 5
    assert f("ab", "cdefghijk") == "abcdefghijk"
    assert name in anyffi.list_global_func_names()


def test_register_bare_decorator_uses_the_name():
    def anyffi_test_bare_registered(x):
        return x + 1

    assert anyffi.register_global_func(anyffi_test_bare_registered) is anyffi_test_bare_registered
    assert anyffi.get_global_func("anyffi_test_bare_registered")(1) == 2
    anyffi.remove_global_func("anyffi_test_bare_registered")


def test_deep_python_c_python_recursion_and_unprintable_errors(t):
    # 150 levels of Python -> C -> Python work; an exception whose str() fails still crosses
    # with its kind (never "no error set")
    def rec(n):
        return 0 if n == 0 else 1 + t.apply(rec, n - 1)

    assert rec(150) == 150

    class BadStr(ValueError):
        def __str__(self):
            raise RuntimeError("no message")

    def bad():
        raise BadStr()

    def catcher():
        try:
            t.apply(bad)
        except BaseException as e:  # noqa: BLE001
            return e

    # from another thread the object cannot come back as itself: the kind and a message do
    import threading

    out = {}
    th = threading.Thread(target=lambda: out.setdefault("e", catcher()))
    th.start()
    th.join()
    assert isinstance(out["e"], ValueError)


def test_register_duplicate_and_override():
    name = fresh("dup")
    anyffi.register_global_func(name, lambda: 1)
    with pytest.raises(RuntimeError, match="already registered"):
        anyffi.register_global_func(name, lambda: 2)
    anyffi.register_global_func(name, lambda: 3, override=True)
    assert anyffi.get_global_func(name)() == 3


def test_register_function_object():
    name = fresh("fobj")
    f = anyffi.Function(lambda x: x * 2)
    anyffi.register_global_func(name, f)
    assert anyffi.get_global_func(name).same_as(f)
    assert anyffi.get_global_func(name)(21) == 42


def test_remove_global_func():
    if anyffi.get_global_func("ffi.FunctionRemoveGlobal", allow_missing=True) is None:
        pytest.skip("no ffi.FunctionRemoveGlobal")
    name = fresh("rm")
    anyffi.register_global_func(name, lambda: None)
    assert anyffi.remove_global_func(name) is True
    assert anyffi.get_global_func(name, allow_missing=True) is None
    assert anyffi.remove_global_func(name) is False


def test_function_wraps_python_callable():
    f = anyffi.Function(lambda *a: sum(a))
    assert f() == 0 and f(1, 2, 3) == 6
    assert isinstance(f, anyffi.Object) and f.type_key == "ffi.Function"
    g = anyffi.Function(f)  # another owner of the same function
    assert g.same_as(f)


def test_calls_without_arguments_return_every_kind_and_reuse_frames():
    # Calls with no arguments take their own path in Function.__call__ (no try/finally); every
    # result kind must still decode, and frames must go back to the pool on success and failure.
    from anyffi import _marshal

    for v in [None, 7, -(2**80), 1.25, True, "x", "a longer result string", b"long bytes result"]:
        assert anyffi.Function(lambda v=v: v)() == v
    arr = anyffi.Function(lambda: anyffi.Array([1, 2]))()
    assert isinstance(arr, anyffi.Array) and list(arr) == [1, 2]

    def boom():
        raise KeyError("missing")

    f = anyffi.Function(boom)
    pooled = len(_marshal.POOL)
    for _ in range(50):
        with pytest.raises(KeyError, match="missing"):
            f()
    assert len(_marshal.POOL) == pooled
    assert anyffi.Function(lambda: None)() is None and len(_marshal.POOL) == pooled


def test_callback_receives_every_kind(t):
    got = []
    f = anyffi.Function(lambda *a: got.extend(a))
    dev = anyffi.device("cuda", 1)
    dt = anyffi.dtype("bfloat16")
    t.apply(f, 1, -(2**70), 2.5, True, None, "short", "a much longer string", b"b", b"longer bytes", dev, dt)
    assert got == [1, -(2**70), 2.5, True, None, "short", "a much longer string", b"b", b"longer bytes", dev, dt]
    assert type(got[3]) is bool


def test_callback_returns_every_kind(t):
    for v in [None, 7, -(2**80), 1.25, False, "", "x", "a longer result string", b"", b"long bytes result", anyffi.device("cpu")]:
        assert t.apply(lambda v=v: v) == v


def test_callback_returns_objects(t):
    f = anyffi.Function(lambda: 5)
    r = t.apply(lambda: f)
    assert r.same_as(f) and r() == 5
    inner = t.apply(lambda: (lambda: "made in a callback"))
    assert isinstance(inner, anyffi.Function) and inner() == "made in a callback"


def test_callback_returns_opaque_python_object(t):
    class Box:
        pass

    b = Box()
    assert t.apply(lambda: b) is b


def test_nested_callbacks(t):
    # Python -> Rust -> Python -> Rust -> Python, each level with its own frame
    def level(n):
        if n == 0:
            return 0
        return 1 + t.apply(level, n - 1)

    assert t.apply(level, 20) == 20


def test_python_function_called_from_python_through_ffi():
    f = anyffi.Function(lambda a, b="unused": a)
    assert f("x") == "x"
    with pytest.raises(TypeError):
        f(1, 2, 3)  # the Python error of the callable itself, crossing back


def test_keyword_arguments_rejected():
    f = anyffi.Function(lambda: 0)
    with pytest.raises(TypeError):
        f(x=1)


def test_callable_kept_alive_by_the_function():
    class C:
        def __call__(self):
            return "alive"

    c = C()
    ref = weakref.ref(c)
    f = anyffi.Function(c)
    del c
    gc.collect()
    assert ref() is not None and f() == "alive"
    del f
    gc.collect()
    assert ref() is None  # the deleter released the callable


def test_registered_callable_lives_forever():
    name = fresh("forever")

    class C:
        def __call__(self):
            return 1

    c = C()
    ref = weakref.ref(c)
    anyffi.register_global_func(name, c)
    del c
    gc.collect()
    assert ref() is not None and anyffi.get_global_func(name)() == 1


def test_function_argument_released_after_call(t):
    class C:
        def __call__(self):
            return 1

    c = C()
    ref = weakref.ref(c)
    t.nop(c)  # converted to a temporary ffi.Function for the call only
    del c
    gc.collect()
    assert ref() is None


def test_call_through_echo_keeps_function(t):
    g = t.echo(lambda: "kept")
    gc.collect()
    assert g() == "kept"


def test_rvalue_ref_argument_is_moved():
    # a C caller may pass an object as ObjectRValueRef (10): the callee takes the reference out of
    # the caller's slot and leaves NULL there
    import ctypes

    from anyffi import _capi

    got = []
    f = anyffi.Function(lambda o: got.append(o))
    moved = anyffi.Function(lambda: "moved")
    slot = ctypes.c_void_p(moved.handle)
    _capi.TVMFFIObjectIncRef(moved.handle)  # the slot owns one reference
    args = (_capi.TVMFFIAny * 1)()
    args[0].type_index = _capi.kObjectRValueRef
    args[0].v_int64 = ctypes.addressof(slot)
    res = _capi.TVMFFIAny()
    assert _capi.TVMFFIFunctionCall(ctypes.c_void_p(f.handle), args, 1, ctypes.byref(res)) == 0
    assert slot.value is None
    assert got[0].same_as(moved) and got[0]() == "moved"
    assert moved.use_count == 2  # ours and the callback's (moved, not copied)


def test_a_function_returning_nothing_gives_none_after_any_result():
    # the official library's void functions leave the result slot untouched: the package resets
    # it after every result, or DictClear would return DictSize's 1
    get = anyffi.get_global_func
    d = get("ffi.Dict")("a", 1)
    for before in (lambda: get("ffi.DictSize")(d), lambda: get("ffi.Dict")("b", 2.5), lambda: get("ffi.String")("x" * 20)):
        before()
        assert get("ffi.DictClear")(d) is None
        get("ffi.DictSetItem")(d, "a", 1)
    assert get("ffi.DictSize")(d) == 1
    assert get("ffi.DictErase")(d, "a") is None


def _official_testing_lib():
    from conftest import official_testing_library

    if not official_testing_library():
        pytest.skip("no libtvm_ffi_testing.so")


def test_numpy_arrays_reach_tensor_typed_parameters():
    np = pytest.importorskip("numpy")
    _official_testing_lib()
    x = np.arange(3.0)
    for name in ("testing.schema_id_tensor", "testing.schema_id_object", "testing.schema_id_opt_obj"):
        r = anyffi.get_global_func(name)(x)
        assert isinstance(r, anyffi.Tensor) and r.data_ptr == x.ctypes.data
    with pytest.raises(TypeError, match="Expected `int`"):
        anyffi.get_global_func("testing.schema_id_int")(x)


def test_numpy_dtypes_pass_as_data_types():
    np = pytest.importorskip("numpy")
    _official_testing_lib()
    assert anyffi.get_global_func("testing.schema_id_dtype")(np.dtype("float16")) == "float16"
    assert type(anyffi.get_global_func("testing.echo")(np.dtype("int8"))) is anyffi.dtype


def test_a_callback_chain_at_the_recursion_limit_always_sets_an_error():
    import sys

    from anyffi import _capi

    if _capi.AnyFFIFunctionCreateChecked is _capi.TVMFFIFunctionCreate:
        # when ctypes cannot enter a callback (here: the recursion limit; before 3.11 ctypes
        # counts the entry against it too), it returns whatever its return slot held, usually
        # 0 ("success", result never written): only our library's checked functions catch that,
        # on other libraries the outcome is luck (it passed on 3.11, failed on 3.10 and 3.13)
        pytest.skip("the library lacks AnyFFIFunctionCreateChecked")

    f = anyffi.Function(lambda n: n if n == 0 else f(n - 1))

    def nest(d):
        return f(10_000) if d == 0 else nest(d - 1)

    depth = len(__import__("inspect").stack(0))
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + 120)  # a short chain: each failing level formats a traceback
    try:
        for d in range(12):  # the limit hits each frame of the callback path in turn
            with pytest.raises(Exception) as e:
                nest(d)
            assert "without raising an error" not in str(e.value)
    finally:
        sys.setrecursionlimit(old)
