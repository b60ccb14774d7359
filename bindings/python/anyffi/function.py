"""``anyffi.Function``: calling FFI functions, and Python callables as FFI functions.

On our library both directions are native (``_install_native_call``; the library's
``ffi/src/capi/python.rs``): ``Function.__call__`` is a CPython method of the library's, and
Python callables become functions the library calls itself. What it does not convert comes back
to the pure-Python code below, which is also the whole path on the official library (and with
``ANYFFI_NATIVE_CALL=0``).

Calling in Python (``Function._python_call`` once the native call is installed): take a frame from
the pool, write each argument as a borrowed view (ints and floats inline, the rest through
``_marshal.CONVERTERS``), call ``TVMFFIFunctionCall`` with pre-built ``byref`` arguments (ctypes
passes them without allocating), decode the owned result, release the temporaries, give the frame
back. The GIL is released during the call; frames are never shared, so threads and re-entrant
callbacks are safe.

Callbacks through ctypes: a Python callable becomes an ``ffi.Function`` through
``AnyFFIFunctionCreateChecked`` (``TVMFFIFunctionCreate`` on the official library) with one shared
ctypes trampoline; ``self`` is an odd key into ``_CALLBACKS``, which keeps the callable alive until
the library runs the deleter. Callbacks run on the thread that called into the library. An
exception in a callback becomes an ``ffi.Error`` of the same kind (``errors.py``).
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Optional

from . import _capi, _marshal, _mem
from .errors import (
    check_call,
    discard_raised,
    error_fields,
    error_parts,
    kind_of,
    make_error,
    new_exception,
    raise_from_raised,
    set_raised_from_python,
    take_raised,
)
from .object import Object, register_object

_MQ, _MI = _mem.Q, _mem.I  # address-space views (object headers, capsules, callback results)
_CONV = _marshal.CONVERTERS
_convert_slow = _marshal.convert_slow
_from_result = _marshal.from_result
_POOL = _marshal.POOL
_pop, _push = _POOL.pop, _POOL.append
_new_frame = _marshal.new_frame
_conv_big_int = _marshal.conv_big_int
_CAP = _marshal.FRAME_CAP
_FunctionCall = _capi.TVMFFIFunctionCall
_IncRef = _capi.TVMFFIObjectIncRef
_FunctionCallKeepGIL = _capi.TVMFFIFunctionCallKeepGIL
_conv_object = _marshal.conv_object
_conv_str = _marshal.conv_str
_STR_CELLS = _marshal.STR_CELLS
_byref, _c_char = ctypes.byref, ctypes.c_char
_ArgumentError = ctypes.ArgumentError
_recursion_error_of = _capi.recursion_error_of


@register_object("ffi.Error", _capi.kError)
class ErrorObject(Object):
    """An ``ffi.Error`` held as a value (a result, an element), not raised: ``kind``,
    ``message``, ``backtrace``, and ``py_error()``, the exception to raise for it (as
    ``tvm_ffi``'s ``Error``). Pickles by value."""

    __slots__ = ()

    @property
    def kind(self) -> str:
        return error_parts(self.handle)[0]

    @property
    def message(self) -> str:
        return error_parts(self.handle)[1]

    @property
    def backtrace(self) -> str:
        return error_parts(self.handle)[2]

    def py_error(self) -> BaseException:
        exc = new_exception(*error_parts(self.handle))
        try:
            exc.__anyffi_error__ = self  # passed back as a value, it is this ffi.Error again
        except AttributeError:  # an exception class with __slots__ and no __dict__
            pass
        return exc

    def __reduce_ex__(self, protocol):
        return (_error_object, error_parts(self.handle))

    def __repr__(self) -> str:
        if not self._h:
            return "<anyffi.ErrorObject (closed)>"
        kind, message, _ = error_parts(self._h)
        return f"ffi.Error({kind}: {message!r})"


def _error_object(kind: str, message: str, backtrace: str) -> ErrorObject:
    return ErrorObject._from_owned(make_error(kind, message, backtrace))


def _call_ref(h: int):
    """A ready ctypes argument whose pointer value is ``h`` (passed with no per-call allocation)."""
    return _byref(_c_char.from_address(h))


@register_object("ffi.Function", _capi.kFunction)
class Function(Object):
    """A callable FFI function: ``Function(pycallable)`` wraps a Python callable; functions from
    the library come from :func:`get_global_func` or as results."""

    __slots__ = ("_hb", "_call")

    def __init__(self, f: Callable):
        if isinstance(f, Function):
            h = f.handle
            _capi.TVMFFIObjectIncRef(h)
        elif callable(f):
            h = make_function_handle(f)
        else:
            raise TypeError(f"anyffi.Function: expected a callable, got {type(f).__name__}")
        self._h = h
        self._hb = _call_ref(h)
        self._call = _FunctionCall

    @classmethod
    def _from_owned(cls, h: int) -> "Function":
        o = object.__new__(cls)
        o._h = h
        o._hb = _call_ref(h)
        o._call = _FunctionCall
        return o

    def close(self) -> None:
        self._hb = _CLOSED_REF
        super().close()

    @property
    def release_gil(self) -> bool:
        """Whether calls release the GIL (the default; other Python threads run meanwhile).
        Set False for tiny functions: ~50-75 ns less per call, but the call blocks other threads."""
        return self._call is _FunctionCall

    @release_gil.setter
    def release_gil(self, value: bool) -> None:
        self._call = _FunctionCall if value else _FunctionCallKeepGIL

    def __call__(self, *args: Any) -> Any:
        # The hot path: measure with bench/python/bench_calls.py before changing it.
        # Frame cells: result at 0-1, argument j at 2+2j, 3+2j (small indices are cheap).
        # Literal type indices: 1 Int, 3 Float, 7 DLTensorPtr.
        try:
            fr = _pop()
        except IndexError:
            fr = _new_frame()
        if not args:
            # Nothing to release, so no try/finally: a frame lost to an exception raised before
            # it goes back is only garbage (the pool makes another when it runs out).
            ab, rb, I = fr.hot0
            try:
                rc = self._call(self._hb, ab, 0, rb)
            except BaseException as e:
                # a signal handled right after the call (Ctrl-C during it): the owned result
                # the callee wrote is nobody's yet
                instead = _call_interrupted(e, fr)
                if instead is None or instead is e:
                    raise  # keeps the exception's own __cause__ (a callback's `raise X from Y`)
                raise instead from None
            if rc:
                _push(fr)
                raise_from_raised(rc)
            if I[0] == 0:
                _push(fr)
                return None
            try:
                return _from_result(fr)
            finally:
                _push(fr)
        Q, q, D, I, ab, rb, keep, owned = fr.hot
        n = len(args)
        cap = None  # the DLPack capsule of the (first) numpy argument, alive until we return
        try:
            if n > _CAP:
                return _call_many(self, args)
            k = 2
            for a in args:
                t = type(a)
                if t is int:
                    Q[k] = 1
                    try:
                        q[k + 1] = a
                    except ValueError:
                        _conv_big_int(a, k, fr)
                elif t is float:
                    Q[k] = 3
                    D[k + 1] = a
                elif t is str:
                    cells = _STR_CELLS.get(a)
                    if cells is None:
                        _conv_str(a, k, fr)
                    else:
                        Q[k], Q[k + 1] = cells
                elif t is _ndarray:
                    # numpy's __dlpack__() is a legacy DLManagedTensor capsule (the DLTensor
                    # is its first field); read-only arrays raise BufferError -> slow path
                    try:
                        capsule = a.__dlpack__()
                    except BufferError:
                        _CONV[t](a, k, fr)
                    else:
                        Q[k] = 7
                        Q[k + 1] = _MQ[(id(capsule) >> 3) + 1]  # PyCapsule.pointer at +16
                        # (`cap` and `keep` are also where a callback's view of this argument
                        # finds what keeps its memory alive: tensor._arg_owner)
                        if cap is None:
                            cap = capsule
                        else:
                            keep.append(capsule)
                else:
                    c = _CONV.get(t)
                    if c is _conv_object:
                        h = a._h
                        if h:
                            Q[k] = _MI[h >> 2]  # the object's type index (header+8)
                            Q[k + 1] = h
                            if self._call is _FunctionCall:
                                # the GIL is released during the call: another thread may
                                # close() the argument; the call holds its own reference
                                _IncRef(h)
                                owned.append(h)
                        else:
                            a._conv_without_handle(k, fr)
                    elif c is None:
                        _convert_slow(a, k, fr)
                    else:
                        c(a, k, fr)
                k += 2
            rc = self._call(self._hb, ab, n, rb)
            if rc:
                return _call_failed(self, args, rc)
            ti = I[0]
            if ti == 0:
                return None
            if ti == 1:
                Q[0] = 0  # None again for the next call (see _marshal.from_result)
                return q[1]
            if ti == 7 and cap is not None:
                keep.append(cap)  # the result may be the argument's own DLTensor
            return _from_result(fr)
        except BaseException as e:
            # zero-cost when nothing is raised; a KeyboardInterrupt handled right after the call
            # returned (Ctrl-C during it) leaves the callee's owned result in the frame
            instead = _call_interrupted(e, fr)
            if instead is None or instead is e:
                raise
            raise instead from None
        finally:
            if keep or owned:
                fr.release()
            _push(fr)

    def __repr__(self) -> str:
        return f"<anyffi.Function at 0x{self._h:x}>" if self._h else "<anyffi.Function (closed)>"


def _drop_result(fr, _DecRef=_capi.TVMFFIObjectDecRef) -> None:
    """Releases an owned object result still in the frame (not decoded: an exception came first)."""
    if fr.I[0] >= 64:
        h = fr.Q[1]
        fr.Q[0] = 0
        fr.Q[1] = 0
        _DecRef(h)
    else:
        fr.Q[0] = 0


def _call_many(f: Function, args: tuple) -> Any:
    """A call with more arguments than a pooled frame holds, in a frame of its own."""
    fr = _new_frame(len(args))
    try:
        _marshal.convert_args(args, fr)
        rc = f._call(f._hb, fr.ab, len(args), fr.rb)
        if rc:
            return _call_failed(f, args, rc)
        return _from_result(fr)
    except BaseException as e:
        instead = _call_interrupted(e, fr)
        if instead is None or instead is e:
            raise
        raise instead from None
    finally:
        fr.release()


def _call_interrupted(e: BaseException, fr) -> Optional[BaseException]:
    """For an exception ``e`` raised around a foreign call made with frame ``fr``: drops the
    owned result the callee may have written (nobody decoded it), and returns the exception to
    raise instead of ``e`` (None: re-raise ``e`` as it is). At the recursion limit ctypes wraps
    the RecursionError in an ArgumentError; after a native loop saw Ctrl-C, ctypes reports the
    handler's KeyboardInterrupt as a SystemError (see ``_host_error``)."""
    _drop_result(fr)
    if type(e) is _ArgumentError:
        return _recursion_error_of(e)
    if type(e) is SystemError or type(e) is KeyboardInterrupt:
        return _host_error(e)
    return None


def _host_error(e: BaseException) -> BaseException:
    """The exception to raise for ``e``, raised by the ctypes call itself. A callee polling
    ``TVMFFIEnvCheckSignals`` ran the Python signal handler (Ctrl-C during a long C++ loop) and
    returned -1 with ``EnvErrorAlreadySet`` in the slot; the handler's exception was pending when
    ctypes returned, which CPython reports as ``SystemError`` caused by it (a call keeping the GIL
    raises it directly; "with an error set" before Python 3.10). Raises the handler's exception
    and drops the placeholder FFI error."""
    cause = e.__cause__ if type(e) is SystemError else e
    if cause is None or "returned a result with an" not in str(e) and cause is not e:
        return e
    discard_raised()
    return cause


def _register_host_capi() -> None:
    """As the official package: lets native code poll for Ctrl-C (``TVMFFIEnvCheckSignals``)."""
    try:
        reg = _capi.PYLIB.TVMFFIEnvRegisterCAPI
    except AttributeError:
        return
    reg.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    reg.restype = ctypes.c_int
    api = ctypes.pythonapi
    for name in ("PyGILState_Ensure", "PyGILState_Release", "PyErr_CheckSignals"):
        if reg(name.encode(), ctypes.cast(getattr(api, name), ctypes.c_void_p).value) != 0:
            discard_raised()
            return


_register_host_capi()


def _call_failed(f: "Function", args: tuple, rc: int) -> Any:
    """A call with arguments failed: raises its error. When a typed function refused a
    ``DLTensor*`` (a parameter declared ``ffi::Tensor``, ``ObjectRef``, ``Optional<...>``, which
    take objects only) at the position of a DLPack producer we passed (a numpy array, ...), the
    call is made again with the producers as owned ``ffi.Tensor`` objects sharing their memory,
    as the official package passes them. A typed function checks its arguments before its body
    runs, so the first attempt did nothing; the retry has no ``DLTensor*`` left, so it is the
    last."""
    exc, kind, message = take_raised(rc)
    prefix = "Mismatched type on argument #"
    if kind == "TypeError" and message.startswith(prefix) and "but got `DLTensor*`" in message:
        i = message[len(prefix) :].split(" ", 1)[0]
        refused = args[int(i)] if i.isdigit() and int(i) < len(args) else None
        if refused is not None and not isinstance(refused, Object):
            owned = list(args)
            for j, a in enumerate(args):
                if not isinstance(a, Object):
                    for prep in _marshal.OWNED_PREPARE:
                        t = prep(a)
                        if t is not None:
                            owned[j] = t
                            break
            if owned[int(i)] is not refused:
                return f(*owned)
    raise exc


# numpy arrays are inlined in __call__ (tensor.py sets numpy.ndarray; None disables the branch)
_ndarray: Any = None


# ---------------------------------------------------------------------------------------------
# Python callables as FFI functions
# ---------------------------------------------------------------------------------------------

_CALLBACKS = _marshal.KeepAlive()  # key -> the Python callable of a function we made
# whether Function.__call__ is the library's native method (and the library calls Python
# callables itself): _install_native_call
_NATIVE_CALL = False
_from_view = _marshal.from_view
_write_owned = _marshal.write_owned


_SetRaisedFromCStr = _capi.PYLIB.TVMFFIErrorSetRaisedFromCStr
_SetRaisedFromCStr.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
_SetRaisedFromCStr.restype = None


def _plain_error(kind: str, msg: str) -> None:
    _SetRaisedFromCStr(kind.encode("utf-8", "replace"), msg.encode("utf-8", "replace").replace(b"\0", b"\\0"))


def _set_raised_plain(e: BaseException) -> bool:
    """Sets the thread's FFI error from ``e`` with as little work as possible (no traceback,
    the message only if ``str(e)`` works); never raises. Whether an error was set."""
    try:
        kind = kind_of(e)
        try:
            msg = str(e)
        except BaseException:  # noqa: BLE001
            msg = f"<{type(e).__name__} whose message could not be formed>"
        _plain_error(kind, msg)
        return True
    except BaseException:  # noqa: BLE001
        return False


_LAST_RESORT = (b"RecursionError", b"maximum recursion depth exceeded (in a Python callback)")


def _callback_error(
    e: BaseException,
    _set_raised_from_python=set_raised_from_python,
    _set_raised_plain=_set_raised_plain,
    _last_resort=_SetRaisedFromCStr,
    _last_args=_LAST_RESORT,
) -> None:
    """Sets the thread's FFI error for ``e``, raised by a Python callback; never raises."""
    try:
        _set_raised_from_python(e)
    except BaseException:  # noqa: BLE001
        # building the full error failed (no stack left, a __str__ that raises): the kind
        # and what can be said of the message still cross, never "no error set"
        try:
            ok = _set_raised_plain(e)
        except BaseException:  # noqa: BLE001 - not even a Python call fits on the stack
            ok = False
        if not ok:
            # one C call, the fewest frames possible: a call chain at the recursion limit
            # leaves no room for the Python helpers above
            try:
                _last_resort(*_last_args)
            except BaseException:  # noqa: BLE001
                pass


def _run_callback(
    f: Callable,
    args: int,
    n: int,
    result: int,
    _from_view=_from_view,
    _write_owned=_write_owned,
    _Q=_MQ,
    _callback_error=_callback_error,
    _last_resort=_SetRaisedFromCStr,
    _last_args=_LAST_RESORT,
) -> int:
    """Calls the Python callable ``f`` of an FFI function with the ``n`` argument views at
    address ``args``, writing its result as the owned Any at ``result``; 0, or -1 with the
    thread's FFI error set. Never raises. Globals are bound as defaults: fewer lookups per
    call, and callbacks keep working during interpreter shutdown."""
    a = x = None
    try:
        if n == 0:
            r = f()
        elif n == 1:
            x = _from_view((args >> 3) - 1)
            r = f(x)
        else:
            i = (args >> 3) - 1
            a = tuple(map(_from_view, range(i, i + 2 * n, 2)))
            r = f(*a)
        if r is None:
            ri = (result >> 3) - 1
            _Q[ri] = 0
            _Q[ri + 1] = 0
        else:
            _write_owned(r, (result >> 3) - 1)
        return 0
    except BaseException as e:  # noqa: BLE001 - everything crosses back as an FFI error
        try:
            _callback_error(e)
        except BaseException:  # noqa: BLE001 - no stack left even for that call
            try:
                _last_resort(*_last_args)
            except BaseException:  # noqa: BLE001
                pass
        return -1
    finally:
        # DLTensor* arguments are the caller's, valid only during the call: a view the callback
        # kept raises "closed" when used later instead of reading freed memory
        # (a view has no handle: clearing its pointer is all `close` would do)
        if type(x) is _Tensor:
            if not x._h:
                _close_arg_view(x)
        elif a:
            for y in a:
                if type(y) is _Tensor and not y._h:
                    _close_arg_view(y)


def _trampoline(key: int, args: int, n: int, result: int, _callbacks=_CALLBACKS, _run=_run_callback) -> int:
    # The safe_call of every Python function made through ctypes (the official library; on ours
    # the library calls Python itself, see AnyFFIPyFunctionCreate): `key` finds the callable.
    try:
        f = _callbacks[key]
    except BaseException as e:  # noqa: BLE001
        _callback_error(e)
        return -1
    return _run(f, args, n, result)


# anyffi.Tensor, set by tensor.py (the trampoline closes the DLTensor* views it handed out)
_Tensor: Any = None
_close_arg_view: Any = None  # tensor.py: closes a callback's argument view


_SAFE_CALL = _capi.SafeCall(_trampoline)
# The thunks must outlive every function object, even objects released during interpreter
# shutdown after this module's globals are cleared: keep one extra reference forever.
ctypes.pythonapi.Py_IncRef(ctypes.py_object((_SAFE_CALL, _CALLBACKS.deleter, _marshal.OPAQUE.deleter)))


def make_function_handle(f: Callable) -> int:
    """A new ``ffi.Function`` (new reference) that calls the Python callable ``f``: made by the
    library when the native call is installed (it calls ``f`` itself), else a ctypes thunk."""
    if _NATIVE_CALL:
        out = ctypes.c_void_p()
        check_call(_NativePyFunctionCreate(f, ctypes.byref(out)))
        return out.value
    return _CALLBACKS.create(f, lambda key, deleter, out: _capi.AnyFFIFunctionCreateChecked(key, _SAFE_CALL, deleter, out))


_NativePyFunctionCreate: Any = None  # AnyFFIPyFunctionCreate, once the native call is installed


def _conv_callable(a, k, fr):
    h = make_function_handle(a)
    fr.owned.append(h)
    fr.Q[k] = _capi.kFunction
    fr.Q[k + 1] = h


_marshal.CALLABLE_CONVERTER.append(_conv_callable)


def _conv_exception(a, k, fr):
    # as in tvm_ffi: an exception passed as a value is an ffi.Error (kind, message, its Python
    # backtrace); one made by ErrorObject.py_error() is that same ffi.Error again
    held = getattr(a, "__anyffi_error__", None)
    if isinstance(held, ErrorObject) and held._h:
        h = held._h
        _capi.TVMFFIObjectIncRef(h)
    else:
        h = make_error(*error_fields(a))
    fr.owned.append(h)
    fr.Q[k] = _capi.kError
    fr.Q[k + 1] = h


# Exception and its subclasses (found through the MRO); other BaseExceptions (KeyboardInterrupt,
# SystemExit, ...) stay opaque Python objects, as in tvm_ffi
_marshal.CONVERTERS[Exception] = _conv_exception
_marshal.CONVERTERS[type(_trampoline)] = _conv_callable  # plain Python functions
_marshal.CONVERTERS[type(lambda: None)] = _conv_callable


def _closed(*args):
    raise ValueError("anyffi.Function: the function handle is closed")


_CLOSED = Function(_closed)
_CLOSED_REF = _CLOSED._hb


# ---------------------------------------------------------------------------------------------
# The native call (our library): Function.__call__ without a ctypes call
# ---------------------------------------------------------------------------------------------


def _native_result(i: int, *caps: Any) -> Any:
    """``on_result`` of the native call: the Python value of the owned result Any at ``_mem.Q``
    index ``i`` (a type the library does not convert itself). The Any moves into a pooled frame
    and its type word goes back to None, which tells the library it is taken; one not taken (an
    exception before that: Ctrl-C) the library releases. From the frame on it is decoded as a
    pure-Python call's result. ``caps`` are the call's numpy capsules (a ``DLTensor*`` result
    may point into one: it becomes an owning Tensor)."""
    try:
        fr = _pop()
    except IndexError:
        fr = _new_frame()
    Q = fr.Q
    Q[0] = _MQ[i]
    Q[1] = _MQ[i + 1]
    _MQ[i] = 0  # no call since the first copy: no signal handler ran in between
    try:
        if caps:
            fr.keep.extend(caps)
        return _from_result(fr)
    except BaseException as e:
        _drop_result(fr)  # not decoded (an exception first), or already None
        if type(e) is _ArgumentError:  # a ctypes call at the recursion limit, as _call_interrupted
            instead = _recursion_error_of(e)
            if instead is not e:
                raise instead from None
        raise
    finally:
        if fr.keep or fr.owned:
            fr.release()
        _push(fr)


def _native_failed(f: Function, rc: int, *args: Any) -> Any:
    """``on_failed`` of the native call: the call returned ``rc`` != 0 (see _call_failed)."""
    try:
        return _call_failed(f, args, rc)
    except _ArgumentError as e:
        # at the recursion limit ctypes wraps the RecursionError (take_raised's foreign calls):
        # the RecursionError, as the pure-Python __call__ raises it (_call_interrupted)
        instead = _recursion_error_of(e)
        if instead is e:
            raise
        raise instead from None


def _slot_offset(cls: type, name: str) -> int:
    """The byte offset of slot ``name`` in instances of ``cls`` (and of its subclasses, which
    keep the base's layout), found by storing a marker in it; 0 when not found (the native call
    then reads the attribute)."""
    o = object.__new__(cls)
    marker = float("-0.0")  # a new object each time, and false (Object.__del__ skips it)
    try:
        setattr(o, name, marker)
        found = [off for off in range(16, cls.__basicsize__, 8) if _MQ[_mem.qi(id(o) + off)] == id(marker)]
        return found[0] if len(found) == 1 else 0
    finally:
        setattr(o, name, 0)


def _install_native_call() -> bool:
    """Makes ``Function.__call__`` the library's native CPython method (``AnyFFIPyInstall``, see
    ``ffi/src/capi/python.rs``): a call then costs what a builtin method call costs instead of a
    ctypes foreign call (~250 ns). Only on our library, on CPython 3.9+ with the GIL, where every
    object's type pointer is its second word; ``ANYFFI_NATIVE_CALL=0`` keeps the pure-Python
    ``__call__`` (the official library always does). Whether it was installed."""
    global _NATIVE_CALL
    import sys
    import threading

    if _NATIVE_CALL:
        return True  # (a second call would make the native method its own fallback)
    install = _capi.native_entry("AnyFFIPyInstall")
    if install is None:
        return False
    for probe in (None, 1, 2.5, "s", b"", (), Function):
        if _MQ[_mem.qi(id(probe)) + 1] != id(type(probe)):
            return False
    # and a type's name (`tp_name`) is its fourth word (the library names an exception's kind
    # from it when nothing else can be done at the recursion limit)
    if ctypes.string_at(_MQ[_mem.qi(id(KeyboardInterrupt)) + 3]) != b"KeyboardInterrupt":
        return False
    api = ctypes.pythonapi
    from .device import Device
    from .dtype import dtype

    fns = (
        "Py_IncRef", "Py_DecRef", "PyObject_GetAttr", "PyObject_VectorcallDict", "PyObject_VectorcallMethod",
        "PyLong_AsLongLongAndOverflow", "PyLong_AsUnsignedLongLong", "PyLong_FromLongLong",
        "PyLong_FromUnsignedLongLong", "PyFloat_AsDouble", "PyFloat_FromDouble", "PyBool_FromLong",
        "PyUnicode_AsUTF8AndSize", "PyCapsule_GetPointer", "PyErr_Occurred", "PyErr_ExceptionMatches",
        "PyErr_Clear", "PyErr_SetString", "PyEval_SaveThread", "PyEval_RestoreThread", "PyType_IsSubtype",
        "PyUnicode_DecodeUTF8", "PyBytes_FromStringAndSize", "PyGILState_Ensure", "PyGILState_Release",
        "Py_IsInitialized", "PyErr_Fetch", "PyErr_NormalizeException", "PyException_SetTraceback",
        "Py_IsFinalizing",
    )
    intern = sys.intern
    objs = (
        ("none", None), ("true_", True), ("int_type", int), ("float_type", float), ("bool_type", bool),
        ("str_type", str), ("ndarray_type", _ndarray), ("device_type", Device), ("dtype_type", dtype),
        ("object_type", Object), ("buffer_error", BufferError), ("system_error", SystemError),
        ("name_h", intern("_h")), ("name_call", intern("_call")), ("name_packed", intern("_packed")),
        ("name_dlpack", intern("__dlpack__")), ("release_gil", _FunctionCall),
        ("keep_gil", _FunctionCallKeepGIL),
        ("slow_call", Function.__call__), ("on_failed", _native_failed), ("on_result", _native_result),
        ("run_callback", _run_callback), ("callback_error", _callback_error), ("write_result", _write_owned),
        ("object_of", _marshal.from_owned_object),
    )
    addr = {}
    for name in fns:
        f = getattr(api, name, None)
        if f is None and name == "Py_IsFinalizing":
            f = getattr(api, "_Py_IsFinalizing", None)  # its name before 3.13
        if f is None:  # not exported by this CPython
            return False
        addr[name] = ctypes.cast(f, ctypes.c_void_p).value

    class Table(ctypes.Structure):
        _fields_ = (
            [("size", ctypes.c_size_t)]
            + [(n, ctypes.c_void_p) for n in fns]
            + [("main_thread", ctypes.c_size_t), ("h_offset", ctypes.c_size_t), ("call_offset", ctypes.c_size_t)]
            + [(n, ctypes.c_void_p) for n, _ in objs]
        )

    main = threading.main_thread().ident  # pthread_self() of the thread that finalizes
    table = Table(
        ctypes.sizeof(Table),
        *(addr[n] for n in fns),
        main,
        _slot_offset(Object, "_h"),
        _slot_offset(Function, "_call"),
        *(None if o is None and n != "none" else id(o) for n, o in objs),
    )
    # the library keeps borrowed pointers to these objects: one reference each, held for good
    api.Py_IncRef(ctypes.py_object(tuple(o for _, o in objs)))
    install.restype = ctypes.c_void_p
    install.argtypes = [ctypes.c_void_p]
    method_def = install(ctypes.addressof(table))
    if not method_def:
        return False
    global _NativePyFunctionCreate
    create = _capi.PYLIB.AnyFFIPyFunctionCreate
    create.argtypes = [ctypes.py_object, ctypes.POINTER(ctypes.c_void_p)]
    create.restype = ctypes.c_int
    _NativePyFunctionCreate = create
    new_method = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object, ctypes.c_void_p)(("PyDescr_NewMethod", api))
    Function._python_call = Function.__call__
    Function.__call__ = new_method(Function, method_def)
    _NATIVE_CALL = True
    return True


# ---------------------------------------------------------------------------------------------
# The global function registry
# ---------------------------------------------------------------------------------------------


def get_global_func(name: str, allow_missing: bool = False) -> Optional[Function]:
    """The global function ``name``; ValueError when missing (None with ``allow_missing``)."""
    if not isinstance(name, str):
        raise TypeError(f"get_global_func: name must be a str, got {type(name).__name__}")
    b = name.encode()
    out = ctypes.c_void_p()
    check_call(_capi.TVMFFIFunctionGetGlobal(_capi.byte_array(b), ctypes.byref(out)))
    if not out.value:
        if allow_missing:
            return None
        raise ValueError(f"Cannot find global function `{name}`")
    return (_StoringFunction if name in _STORES_ARGS else Function)._from_owned(out.value)


# Globals that keep their arguments in a container: a DLPack producer (numpy array, ...) passed
# to them as a borrowed DLTensor* view would dangle in the container once the call returns, so
# such arguments become owned ffi.Tensor objects first (as anyffi.Array([...]) does).
_STORES_ARGS = frozenset(
    ("ffi.Array", "ffi.List", "ffi.Map", "ffi.Dict", "ffi.ListAppend", "ffi.ListInsert",
     "ffi.ListSetItem", "ffi.ListReplaceSlice", "ffi.DictSetItem")
)


class _StoringFunction(Function):
    __slots__ = ()

    def __call__(self, *args: Any) -> Any:
        return Function.__call__(self, *_marshal.owned_elements(args))


def register_global_func(name: str, f: Optional[Callable] = None, override: bool = False):
    """Registers ``f`` (a Python callable or a Function) as the global function ``name``.

    Used as a decorator when ``f`` is omitted: ``@register_global_func("my.add")``, or bare,
    ``@register_global_func``, which registers the function under its ``__name__``. A name that
    exists already is a RuntimeError unless ``override``. Returns ``f``.
    """
    if f is None and callable(name) and not isinstance(name, str):
        f, name = name, getattr(name, "__name__", None)
        if not isinstance(name, str):
            raise TypeError("register_global_func: a bare decorator needs a function with a __name__")
    if not isinstance(name, str):
        raise TypeError(f"register_global_func: name must be a str, got {type(name).__name__}")

    def register(func: Callable) -> Callable:
        fn = func if isinstance(func, Function) else Function(func)
        b = name.encode()
        check_call(_capi.TVMFFIFunctionSetGlobal(_capi.byte_array(b), fn.handle, 1 if override else 0))
        return func

    if f is None:
        return register
    return register(f)


def list_global_func_names() -> list[str]:
    """Names of every global function (through ``ffi.FunctionListGlobalNamesFunctor``)."""
    names = get_global_func("ffi.FunctionListGlobalNamesFunctor")()
    n = names(-1)
    return [names(i) for i in range(n)]


def remove_global_func(name: str) -> bool:
    """Removes a global function (``ffi.FunctionRemoveGlobal``); whether it existed."""
    return bool(get_global_func("ffi.FunctionRemoveGlobal")(name))


class GlobalFunctions:
    """Lazily looked-up global functions by name, cached (``ffi = GlobalFunctions("ffi")``;
    ``ffi.Array(1, 2)``). A missing function is an AttributeError naming it."""

    def __init__(self, prefix: str):
        self._prefix = prefix
        self._cache: dict[str, Function] = {}

    def get(self, name: str) -> Optional[Function]:
        f = self._cache.get(name)
        if f is None:
            f = get_global_func(f"{self._prefix}.{name}", allow_missing=True)
            if f is not None:
                self._cache[name] = f
        return f

    def require(self, name: str, what: str = "") -> Function:
        f = self.get(name)
        if f is None:
            need = f" ({what})" if what else ""
            raise NotImplementedError(
                f"the global function `{self._prefix}.{name}`{need} is not registered in the loaded "
                f"library {_capi.LIB_PATH}"
            )
        return f

    def __getattr__(self, name: str) -> Function:
        if name.startswith("_"):
            raise AttributeError(name)
        f = self.get(name)
        if f is None:
            raise AttributeError(f"no global function `{self._prefix}.{name}` in {_capi.LIB_PATH}")
        return f


ffi_api = GlobalFunctions("ffi")
