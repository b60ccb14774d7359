"""Errors both ways: FFI kinds -> Python exceptions, Python exceptions -> FFI errors -> back."""

from __future__ import annotations

import traceback

import anyffi
import pytest

BUILTIN_KINDS = [
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    RuntimeError,
    NotImplementedError,
    AssertionError,
    MemoryError,
    OverflowError,
    ZeroDivisionError,
]


@pytest.mark.parametrize("cls", BUILTIN_KINDS, ids=lambda c: c.__name__)
def test_kind_maps_to_builtin(t, cls):
    with pytest.raises(cls) as info:
        t.raise_error(cls.__name__, "the message")
    assert type(info.value) is cls
    text = info.value.args[0]
    assert text == "the message"
    assert isinstance(info.value.__anyffi_backtrace__, str)


@pytest.mark.parametrize("kind", ["InternalError", "MyCustomError", "EnvErrorAlreadySet"])
def test_unknown_kind_is_anyffi_error(t, kind):
    with pytest.raises(anyffi.Error) as info:
        t.raise_error(kind, "custom")
    assert info.value.kind == kind
    assert str(info.value) == "custom"
    assert isinstance(info.value, RuntimeError)


def test_registered_kind():
    class QuotaError(Exception):
        pass

    anyffi.register_error("QuotaError", QuotaError)

    def f():
        raise QuotaError("over quota")

    with pytest.raises(QuotaError, match="over quota"):
        anyffi.Function(f)()


def test_backtrace_note_names_the_native_frame(t):
    with pytest.raises(ValueError) as info:
        t.raise_error("ValueError", "with a backtrace")
    notes = getattr(info.value, "__notes__", [])
    bt = info.value.__anyffi_backtrace__
    if bt:  # a library built without line tables may report no frames
        assert notes and notes[0].startswith("FFI backtrace")
        assert "File " in bt


@pytest.mark.parametrize("cls", [ValueError, TypeError, KeyError, IndexError, AttributeError, RuntimeError, NotImplementedError])
def test_python_exception_crosses_rust_with_same_kind(t, cls):
    def bad():
        raise cls("raised in python")

    with pytest.raises(cls):
        t.apply(bad)


def test_python_exception_comes_back_as_same_object(t):
    err = ValueError("identity")

    def bad():
        raise err

    with pytest.raises(ValueError) as info:
        t.apply(bad)
    assert info.value is err
    # the Python frames of the callback are in the traceback, the FFI ones in the note
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert "bad" in frames
    assert "bad" in info.value.__anyffi_backtrace__


def test_python_exception_kind_seen_by_other_side(t):
    # an exception raised in a callback is an ffi.Error of the same kind for the library: a second
    # Python function catching it through FFI sees the kind, and the backtrace names the callback
    class MyValueError(ValueError):
        pass

    def inner():
        raise MyValueError("deep")

    def outer():
        try:
            t.apply(inner)
        except ValueError as e:
            return f"{type(e).__name__}:{e}"
        return "no error"

    assert t.apply(outer) == "MyValueError:deep"


def test_exception_from_a_different_thread_is_a_new_object(t):
    import threading

    out = {}

    def run():
        try:
            t.raise_error("IndexError", "in thread")
        except IndexError as e:
            out["e"] = e

    th = threading.Thread(target=run)
    th.start()
    th.join()
    assert isinstance(out["e"], IndexError)


def test_unregistered_exception_class_is_runtime_error(t):
    class Weird(Exception):
        pass

    def bad():
        raise Weird("weird")

    with pytest.raises(Weird):  # same object comes back on the same thread
        t.apply(bad)

    # but the kind the library saw is RuntimeError
    def catcher():
        try:
            t.apply(bad)
        except Exception as e:  # noqa: BLE001
            return anyffi.errors.kind_of(e)

    assert t.apply(catcher) == "RuntimeError"


def test_anyffi_error_chooses_kind(t):
    def bad():
        raise anyffi.Error("custom kind", kind="ShapeError")

    with pytest.raises(anyffi.Error) as info:
        t.apply(bad)
    assert info.value.kind == "ShapeError"


def test_keyboard_interrupt_crosses(t):
    def bad():
        raise KeyboardInterrupt()

    with pytest.raises(KeyboardInterrupt):
        t.apply(bad)


def test_key_error_message_is_not_double_quoted(t):
    def bad():
        raise KeyError("k")

    def catcher():
        try:
            t.apply(bad)
        except KeyError as e:
            return e.args[0]

    assert t.apply(catcher) == "k"


def _raw_call_error(f: anyffi.Function) -> tuple[str, str, str]:
    """Calls ``f`` with no arguments through the bare C ABI and returns the raised error's parts,
    exactly as any other language would see them."""
    import ctypes

    from anyffi import _capi, errors

    res = _capi.TVMFFIAny()
    rc = _capi.TVMFFIFunctionCall(ctypes.c_void_p(f.handle), None, 0, ctypes.byref(res))
    assert rc == -1
    out = ctypes.c_void_p()
    _capi.TVMFFIErrorMoveFromRaised(ctypes.byref(out))
    assert out.value
    try:
        return errors.error_parts(out.value)
    finally:
        _capi.TVMFFIObjectDecRef(out.value)


@pytest.mark.parametrize(
    "exc, kind, message",
    [
        (ValueError("v"), "ValueError", "v"),
        (KeyError("k"), "KeyError", "k"),
        (IndexError("i"), "IndexError", "i"),
        (NotImplementedError("n"), "NotImplementedError", "n"),
        (type("Sub", (TypeError,), {})("sub"), "TypeError", "sub"),
        (type("Odd", (Exception,), {})("odd"), "RuntimeError", "odd"),
        (anyffi.Error("e", kind="ShapeError"), "ShapeError", "e"),
    ],
)
def test_error_as_seen_through_the_c_abi(exc, kind, message):
    def raiser():
        raise exc

    k, m, bt = _raw_call_error(anyffi.Function(raiser))
    assert (k, m) == (kind, message)
    assert "in raiser" in bt and "test_errors.py" in bt


def test_kinds_whose_class_needs_more_arguments_come_back_as_error(t):
    # UnicodeDecodeError(message) is not a valid construction: the error still arrives, as
    # anyffi.Error with its kind and message
    with pytest.raises(anyffi.Error, match="boom") as info:
        t.raise_error("UnicodeDecodeError", "boom")
    assert info.value.kind == "UnicodeDecodeError"


def test_an_error_the_caller_dropped_never_comes_back_as_its_exception(t):
    # A callback raises E under a C caller that drops the error; a later, unrelated error with
    # the same kind and message (often at the freed error's address) must be a new exception,
    # not E with the old callback's traceback.
    E = ValueError("bad input")

    def raiser():
        raise E

    f = anyffi.Function(raiser)
    for _ in range(50):
        _raw_call_error(f)  # the "C caller": moves the error out and releases it
        with pytest.raises(ValueError, match="bad input") as e:
            t.raise_error("ValueError", "bad input")
        assert e.value is not E


def test_a_signal_right_after_a_call_releases_its_result(t):
    # Ctrl-C during a slow call is raised right after the foreign call returns, before the owned
    # result is decoded: that result must be released, not leaked in the pooled frame. The
    # signal is simulated by a `_call` that raises once the real call has returned.
    o = anyffi.Array([1, 2])
    n = o.use_count
    for f, args in ((anyffi.Function(lambda: o), ()), (t.echo, (o,))):
        g = type(f)._from_borrowed(f.handle)  # another handle, whose `_call` we replace

        def interrupted(*a, real=g._call):
            real(*a)
            raise KeyboardInterrupt

        g._call = interrupted
        with pytest.raises(KeyboardInterrupt):
            g(*args)
        g.close()
        assert o.use_count == n
        assert f(*args) == o  # the pooled frames still work


def test_backtrace_through_nested_callbacks_is_linear(t):
    # An exception raised at the bottom of n nested Python -> library -> Python calls crosses
    # the library n times. Each crossing appended the exception's whole traceback to the
    # backtrace it already carried, which holds the same frames: n(n+1)/2 copies of the frame,
    # ~cubic time (150 levels: 2.6 s). Now each crossing adds the frames since the last one.
    def rec(n):
        if n == 0:
            raise ValueError("bottom")
        return t.apply(rec, n - 1) + 1

    for n in (10, 60):
        with pytest.raises(ValueError, match="bottom") as info:
            rec(n)
        text = "".join(traceback.format_exception(type(info.value), info.value, info.value.__traceback__))
        frames = text.count(" in rec")
        assert n + 1 <= frames <= 2 * n + 2, (n, frames)


def test_recursion_limit_in_ctypes_argument_conversion_is_a_recursion_error(t):
    # Near the limit ctypes converts a call's arguments and the RecursionError that raises
    # comes out wrapped as ctypes.ArgumentError("argument 1: RecursionError: ..."), which made
    # ==, hash() and repr() of a deep Array, and nested callbacks, raise ArgumentError or a
    # RuntimeError naming it.
    import ctypes
    import sys

    if t.official:
        pytest.skip("needs the library's deep-value support")  # the other library's parser is recursive
    parse = anyffi.get_global_func("ffi.json.Parse")
    x = parse("[" * 2000 + "]" * 2000)
    y = parse("[" * 2000 + "]" * 2000)

    def pad(k, fn):
        return fn() if k == 0 else pad(k - 1, fn)

    for fn in (lambda: x == y, lambda: hash(x), lambda: repr(x)):
        for k in range(60):  # the limit meets each frame of the conversion in turn
            try:
                pad(k, fn)
            except RecursionError:
                pass
            except ctypes.ArgumentError as e:  # pragma: no cover - the failure being tested
                pytest.fail(f"ArgumentError instead of RecursionError: {e}")

    def rec(n):
        if n == 0:
            raise ValueError("bottom")
        return t.apply(rec, n - 1) + 1

    with pytest.raises(RecursionError):
        rec(sys.getrecursionlimit())


def _official_testing_lib():
    from conftest import official_testing_library

    if not official_testing_library():
        pytest.skip("no libtvm_ffi_testing.so")


def test_ctrl_c_stops_a_native_loop_that_polls_for_signals():
    # the package registers PyErr_CheckSignals and the GIL pair with the library (as the
    # official one), so TVMFFIEnvCheckSignals in native code sees Ctrl-C; without it the loop
    # ran to its end (4 s) and printed "Function finished without catching signal"
    import os
    import signal
    import threading
    import time

    _official_testing_lib()
    f = anyffi.get_global_func("testing.run_check_signal")
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        f(4)
    assert time.monotonic() - t0 < 3.0
    assert anyffi.get_global_func("testing.add_one")(1) == 2  # no stale error left behind


def test_registered_error_subclasses_keep_their_kind_both_ways(t):
    class QuotaError(anyffi.Error):
        pass

    anyffi.register_error("QuotaError", QuotaError)
    with pytest.raises(QuotaError) as info:
        t.raise_error("QuotaError", "over quota")
    assert info.value.kind == "QuotaError"

    def bad():
        raise QuotaError("from python")

    with pytest.raises(QuotaError) as info:
        t.apply(bad)
    assert info.value.kind == "QuotaError"
    assert QuotaError("x").kind == "QuotaError" and anyffi.Error("x").kind == "RuntimeError"

    # the official package's decorator forms
    @anyffi.register_error
    class DecoratedError(anyffi.Error):
        pass

    @anyffi.register_error("OtherKind")
    class Other(anyffi.Error):
        pass

    assert DecoratedError("m").kind == "DecoratedError" and Other("m").kind == "OtherKind"
    with pytest.raises(Other):
        t.raise_error("OtherKind", "m")


def test_an_error_held_as_a_value():
    # an ffi.Error returned, not raised: kind/message/backtrace and py_error(), as tvm_ffi's
    import pickle

    _official_testing_lib()
    err_h = anyffi.errors.make_error("ValueError", "boom", "")
    from anyffi.function import ErrorObject

    e = ErrorObject._from_owned(err_h)
    v = anyffi.get_global_func("testing.echo")(e)
    assert isinstance(v, ErrorObject) and (v.kind, v.message) == ("ValueError", "boom")
    assert isinstance(v.py_error(), ValueError) and str(v.py_error()).startswith("boom")
    w = pickle.loads(pickle.dumps(v))
    assert (w.kind, w.message) == ("ValueError", "boom") and not w.same_as(v)
    assert "ValueError" in repr(v)


def test_python_frames_are_not_shown_twice(t):
    import traceback

    def cb():
        raise ValueError("in callback")

    def outer():
        t.apply(cb)

    with pytest.raises(ValueError) as info:
        t.apply(outer)
    text = "".join(traceback.format_exception(type(info.value), info.value, info.value.__traceback__))
    assert text.count("in cb\n") == 1, text
    assert text.count("in outer\n") == 1, text


def test_a_callbacks_chained_exception_keeps_its_cause():
    import ctypes

    for cls in (RuntimeError, SystemError, KeyboardInterrupt, ctypes.ArgumentError):

        def f(x=None, cls=cls):
            try:
                raise ValueError("root")
            except ValueError as v:
                raise cls("outer") from v

        for args in ((), (1,)):
            with pytest.raises(cls) as info:
                anyffi.Function(f)(*args)
            assert isinstance(info.value.__cause__, ValueError), (cls, args)
            assert str(info.value.__cause__) == "root"


def test_an_exception_whose_str_fails_comes_back_as_itself():
    class BadStr(Exception):
        def __str__(self):
            raise RuntimeError("no str")

    class BadStrValue(ValueError):
        def __str__(self):
            return 42

    for cls in (BadStr, BadStrValue):
        e = cls("m")

        def cb(e=e):
            raise e

        with pytest.raises(cls) as info:
            anyffi.Function(cb)()
        assert info.value is e


def test_an_exception_passed_as_a_value_is_an_ffi_error():
    # as in tvm_ffi: Exception instances cross as ffi.Error values (kind, message, the Python
    # backtrace), not as opaque Python objects; other BaseExceptions stay opaque
    from anyffi.function import ErrorObject

    echo = anyffi.Function(lambda x: x)
    try:
        raise KeyError("the key")
    except KeyError as caught:
        exc = caught
    v = echo(exc)
    assert isinstance(v, ErrorObject) and (v.kind, v.message) == ("KeyError", "the key")
    assert "test_an_exception_passed_as_a_value_is_an_ffi_error" in v.backtrace
    a = anyffi.get_global_func("ffi.Array")(ValueError("in a list"), 1)
    assert isinstance(a[0], ErrorObject) and (a[0].kind, a[0].message) == ("ValueError", "in a list")
    nested = echo([anyffi.Error("custom", "MyKind")])
    assert (nested[0].kind, nested[0].message) == ("MyKind", "custom")
    # the exception a held ffi.Error makes is that same ffi.Error when passed back
    again = echo(v.py_error())
    assert again.same_as(v)
    assert isinstance(again.py_error(), KeyError)
    # raised from a callback, an ffi.Error value's exception still raises with its kind
    with pytest.raises(KeyError, match="the key"):
        anyffi.Function(lambda: (_ for _ in ()).throw(v.py_error()))()
    ki = KeyboardInterrupt()
    assert echo(ki) is ki
