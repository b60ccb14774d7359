"""The library's native ``Function.__call__`` (``AnyFFIPyInstall``, our library only) against the
pure-Python ``__call__`` it replaces: same values, same errors, same ownership.

The whole suite runs once with the native call (the default) and once with
``ANYFFI_NATIVE_CALL=0`` (``./test``); these tests compare the two paths in one process."""

from __future__ import annotations

import builtins
import gc
import os

import pytest

import anyffi
from anyffi import _capi, function
from test_threads import run_threads  # noqa: E402  (the tests folder is on sys.path)

np = pytest.importorskip("numpy")

pytestmark = pytest.mark.skipif(
    not hasattr(_capi.PYLIB, "AnyFFIPyInstall") or os.environ.get("ANYFFI_NATIVE_CALL") == "0",
    reason="no native call: the official library, or ANYFFI_NATIVE_CALL=0",
)


def python_call(f, *args):
    """``f(*args)`` through the pure-Python ``__call__``."""
    return anyffi.Function._python_call(f, *args)


def outcome(fn):
    try:
        r = fn()
    except BaseException as e:  # noqa: BLE001
        return ("raised", type(e), str(e))
    if isinstance(r, anyffi.Tensor):
        return ("tensor", r.shape, str(r.dtype), r.numpy().tolist())
    if isinstance(r, anyffi.Object):
        return ("object", r.type_key, repr(r))
    return ("value", type(r), r)


def test_installed_on_our_library():
    assert function._NATIVE_CALL  # CPython 3.9 and newer with the GIL: every interpreter we test
    assert type(anyffi.Function.__call__).__name__ == "method_descriptor"


VALUES = [
    None, True, False, 0, -1, 7, (1 << 63) - 1, -(1 << 63), 1 << 63, -(1 << 64), 10**30,
    0.0, -2.5, float("inf"), "", "abc", "1234567", "12345678", "é" * 3, "é" * 4, "a\0b",
    "long string " * 40, b"", b"xy", b"y" * 100, anyffi.device("cpu", 0), anyffi.dtype("bfloat16"),
    [1, "a"], {"k": 2.5}, (1, 2),
]


@pytest.mark.parametrize("v", VALUES, ids=lambda v: type(v).__name__)
def test_echo_gives_what_the_python_path_gives(t, v):
    native = outcome(lambda: t.echo(v))
    pure = outcome(lambda: python_call(t.echo, v))
    assert native == pure
    if native[0] == "value" and not isinstance(v, (list, tuple, dict)):
        assert native[2] == v and native[1] is type(v)


def test_unencodable_str_is_the_python_paths_error(t):
    s = "bad \udc80 surrogate"
    native, pure = outcome(lambda: t.echo(s)), outcome(lambda: python_call(t.echo, s))
    assert native == pure and native[0] == "raised" and native[1] is UnicodeEncodeError


def test_arrays_and_tensors(t):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    for x in (a, a[:, ::2], a.T, np.zeros((0, 4)), a[::-1]):
        assert outcome(lambda: t.echo(x)) == outcome(lambda: python_call(t.echo, x))
        r = t.echo(x)  # the result is the argument's own DLTensor: an owning Tensor
        np.testing.assert_array_equal(r.numpy(), x)
    ro = np.arange(3.0)
    ro.flags.writeable = False  # numpy refuses __dlpack__: the Python path takes it
    np.testing.assert_array_equal(t.echo(ro).numpy(), ro)

    class Sub(np.ndarray):
        pass

    s = np.arange(4.0).view(Sub)
    np.testing.assert_array_equal(t.echo(s).numpy(), s)
    objs = np.array([object()])
    assert outcome(lambda: t.echo(objs)) == outcome(lambda: python_call(t.echo, objs))
    ten = anyffi.from_dlpack(np.arange(3.0))
    assert t.echo(ten).same_as(ten)


def test_argument_counts(t):
    for n in range(12):  # the native path converts up to 8, the Python path the rest
        args = tuple(range(n))
        assert t.nop(*args) is None
        assert outcome(lambda: t.echo(*args)) == outcome(lambda: python_call(t.echo, *args))


def test_keywords_are_refused(t):
    with pytest.raises(TypeError, match="keyword"):
        t.echo(x=1)


def test_closed_and_keep_gil(t):
    f = type(t.echo)._from_borrowed(t.echo.handle)
    f.release_gil = False
    assert f(41) == 41 and f("x") == "x"
    f.close()
    with pytest.raises(ValueError, match="closed"):
        f(1)


def test_errors_keep_their_kind(t):
    for kind in ("ValueError", "TypeError", "KeyError", "IndexError", "AttributeError", "RuntimeError"):
        with pytest.raises(getattr(builtins, kind), match="boom"):
            t.raise_error(kind, "boom")

    def cb(x):
        raise KeyError(x)

    with pytest.raises(KeyError):
        t.apply(anyffi.Function(cb), 3)


def test_a_result_python_did_not_take_is_released(t, monkeypatch):
    # an exception (Ctrl-C) before Python takes an object result (the library releases it) or
    # after it took it but before decoding (the frame does)
    o = anyffi.Array([1, 2])
    n = o.use_count

    def interrupted(*a):
        raise KeyboardInterrupt

    for name in ("_pop", "_from_result"):
        monkeypatch.setattr(function, name, interrupted)
        for _ in range(3):
            with pytest.raises(KeyboardInterrupt):
                t.echo(o)
        monkeypatch.undo()
        assert o.use_count == n, name
        assert t.echo(o).same_as(o)
        assert o.use_count == n


def test_adopted_results_are_owned_once(t):
    o = anyffi.Array([1, 2])
    n = o.use_count
    rs = [t.echo(o) for _ in range(5)]
    assert o.use_count == n + 5
    del rs
    gc.collect()
    assert o.use_count == n


def test_a_callback_view_outlives_the_call_through_its_array(t):
    # a callback's DLTensor* argument view finds the numpy array a native call is passing
    # (AnyFFIPyArgOwner): what it derives keeps that memory alive after the call
    kept = []
    f = anyffi.Function(lambda x: kept.append(x.numpy()))
    t.apply(f, np.arange(1000, dtype=np.float64) * 2)
    gc.collect()
    junk = [np.full(1000, -1.0) for _ in range(50)]  # reuse freed memory, if any was freed
    np.testing.assert_array_equal(kept[0], np.arange(1000) * 2.0)
    del junk


def test_threads_call_at_once(t):
    def work(k):
        a = np.full(8, float(k))
        for i in range(2000):
            assert t.echo(i) == i
            assert t.echo("s%d" % k) == "s%d" % k
            assert t.echo(a).numpy()[0] == k

    assert not run_threads(work, 4)


def test_a_custom_entry_point_takes_the_python_path(t):
    f = type(t.echo)._from_borrowed(t.echo.handle)
    seen = []

    def spy(*a, real=f._call):
        seen.append(1)
        return real(*a)

    f._call = spy
    assert f(5) == 5 and seen == [1]
    f.close()


# -- callbacks: Python callables the library calls itself (AnyFFIPyFunctionCreate) -------------


def ctypes_function(fn, monkeypatch):
    """``fn`` as an FFI function made through the ctypes trampoline (the pure-Python path)."""
    monkeypatch.setattr(function, "_NATIVE_CALL", False)
    try:
        f = anyffi.Function(fn)
    finally:
        monkeypatch.undo()
    assert any(v is fn for v in function._CALLBACKS.values())  # a trampoline key, not native
    return f


CALLBACK_VALUES = [
    None, True, False, 0, -3, (1 << 63) - 1, 1 << 64, 2.5, float("-inf"), "", "short", "1234567",
    "twelve chars", "é" * 5, "a\0b", b"by", b"b" * 30, anyffi.device("cpu"), anyffi.dtype("int8"),
    [1, 2], {"a": [3]},
]


@pytest.mark.parametrize("v", CALLBACK_VALUES, ids=lambda v: type(v).__name__)
def test_callback_arguments_and_results_as_the_trampoline(t, v, monkeypatch):
    seen = {}

    def ident(x):
        seen.setdefault("arg", []).append(x)
        return x

    native = anyffi.Function(ident)
    slow = ctypes_function(ident, monkeypatch)
    a = outcome(lambda: t.apply(native, v))
    b = outcome(lambda: t.apply(slow, v))
    assert a == b
    x, y = seen["arg"]
    assert type(x) is type(y) and repr(x) == repr(y)


def test_callback_results_the_library_cannot_write_itself(t, monkeypatch):
    for r in (10**30, "bad \udc80", np.arange(3.0), object(), anyffi.Array([1])):
        native = anyffi.Function(lambda r=r: r)
        slow = ctypes_function(lambda r=r: r, monkeypatch)
        assert outcome(lambda: t.apply(native)) == outcome(lambda: t.apply(slow))


def test_callback_with_many_or_view_arguments(t):
    f = anyffi.Function(lambda *a: sum(a))
    assert t.apply(f, *range(10)) == 45  # more than the native path converts
    kept = []
    g = anyffi.Function(lambda x: kept.append(x) or float(x.numpy().sum()))
    assert t.apply(g, np.arange(4.0)) == 6.0
    with pytest.raises(ValueError, match="closed"):
        kept[0].numpy()  # the DLTensor* view was the caller's, valid during the call only


def test_callback_exceptions_keep_kind_message_and_traceback(t):
    def inner(x):
        raise LookupError(f"no {x}")

    def outer(x):
        return inner(x)

    with pytest.raises(LookupError, match="no 7") as info:
        t.apply(anyffi.Function(outer), 7)
    assert "inner" in "".join(__import__("traceback").format_exception(info.type, info.value, info.tb))

    def interrupted():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        t.apply(anyffi.Function(interrupted))


def test_callback_releases_its_callable(t):
    import weakref

    class Callable:
        def __call__(self, x):
            return x + 1

    c = Callable()
    ref = weakref.ref(c)
    f = anyffi.Function(c)
    assert not any(v is c for v in function._CALLBACKS.values())  # the library holds it
    assert t.apply(f, 1) == 2
    del c
    gc.collect()
    assert ref() is not None  # the function holds it
    f.close()
    gc.collect()
    assert ref() is None


def test_callbacks_from_threads(t):
    hits = []
    f = anyffi.Function(lambda k: hits.append(k) or k * 2)

    def work(k):
        for _ in range(500):
            assert t.apply(f, k) == 2 * k

    assert not run_threads(work, 4) and len(hits) == 2000


SHUTDOWN = r"""
import sys, threading, time
import anyffi
apply = anyffi.get_global_func("anyffi.testing.apply")
nop = anyffi.get_global_func("anyffi.testing.nop")
mode = sys.argv[1]
if mode == "global":  # a registered Python function outlives the interpreter
    anyffi.register_global_func("test_native_call.cb", lambda x: x * 2)
    assert anyffi.get_global_func("test_native_call.cb")(21) == 42
elif mode == "cycle":  # a Function held by its own callable: released by the last GC
    class C:
        def __call__(self, x=0):
            return x
    c = C()
    c.f = anyffi.Function(c)
    assert apply(c.f, 3) == 3
elif mode == "container":
    keep = anyffi.Array([anyffi.Function(lambda: 1) for _ in range(10)])
elif mode == "daemon":  # a daemon thread calling in a loop while the interpreter exits
    def loop():
        while True:
            nop(1)
    threading.Thread(target=loop, daemon=True).start()
    time.sleep(0.1)
print("ok")
"""


@pytest.mark.parametrize("mode", ["global", "cycle", "container", "daemon"])
def test_interpreter_exit_with_native_functions_alive(mode, tmp_path):
    import subprocess
    import sys

    script = tmp_path / "exit.py"
    script.write_text(SHUTDOWN)
    r = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(anyffi.__file__))))
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_a_ctypes_recursion_error_is_a_recursion_error_on_both_paths(t, monkeypatch):
    # at the recursion limit ctypes reports the RecursionError it met converting a foreign call's
    # arguments as ArgumentError("argument 1: RecursionError: ..."); the pure-Python __call__
    # raises it as RecursionError (_call_interrupted), so must the native call's handlers
    import ctypes

    def at_the_limit(*a, **k):
        raise ctypes.ArgumentError("argument 1: RecursionError: maximum recursion depth exceeded")

    monkeypatch.setattr(function, "take_raised", at_the_limit)
    for call in (lambda: t.add_one("x"), lambda: python_call(t.add_one, "x")):
        with pytest.raises(RecursionError):
            call()
    monkeypatch.undo()
    o = anyffi.Array([1])
    n = o.use_count
    monkeypatch.setattr(function, "_from_result", at_the_limit)
    for call in (lambda: t.echo(o), lambda: python_call(t.echo, o)):
        with pytest.raises(RecursionError):
            call()
    monkeypatch.undo()
    assert o.use_count == n
    function.discard_raised()


def test_slots_read_in_place(t):
    # the native call reads `_h` and `_call` at their slot offsets (found once at import)
    assert function._slot_offset(anyffi.Object, "_h") >= 16
    assert function._slot_offset(anyffi.Function, "_call") >= 16

    class Sub(type(t.echo)):  # a subclass with a __dict__ keeps the base's slots in place
        pass

    f = Sub._from_borrowed(t.echo.handle)
    f.note = "x"
    assert f(3) == 3 and f(f).same_as(f)
    f.close()
    bare = object.__new__(anyffi.Function)  # slots never set: the attribute errors of the Python path
    assert outcome(lambda: bare(1))[:2] == outcome(lambda: python_call(bare, 1))[:2] == ("raised", AttributeError)
    assert outcome(lambda: t.echo(bare))[:2] == outcome(lambda: python_call(t.echo, bare))[:2]


def test_recursion_through_callbacks_is_a_recursion_error(t):
    # the native call's on_failed takes the error with ctypes calls, which at the recursion limit
    # raise ctypes.ArgumentError("argument 1: RecursionError: ..."): it came out as that (the
    # pure-Python call raises the RecursionError), and native callbacks pass it up unchanged
    import ctypes

    def rec(n):
        return 0 if n == 0 else 1 + t.apply(f, n - 1)

    f = anyffi.Function(rec)

    def pad(k):
        return rec(10_000) if k == 0 else pad(k - 1)

    for k in range(40):  # the limit meets each frame of the failing call's path in turn
        try:
            pad(k)
        except RecursionError:
            pass
        except ctypes.ArgumentError as e:  # pragma: no cover - the failure being tested
            pytest.fail(f"ArgumentError instead of RecursionError: {e}")


def test_refcount_builtins():
    # on our library the package's TVMFFIObjectIncRef/DecRef are the library's builtins
    inc, dec = _capi.TVMFFIObjectIncRef, _capi.TVMFFIObjectDecRef
    assert type(inc).__name__ == "builtin_function_or_method"
    a = anyffi.Array([1, 2])
    n = a.use_count
    assert inc(a.handle) == 0 and a.use_count == n + 1
    assert dec(a.handle) == 0 and a.use_count == n
    assert dec(None) == 0  # NULL, as the C function takes it
    with pytest.raises(TypeError):
        inc("not a handle")
    with pytest.raises(OverflowError):
        dec(-1)
