"""Errors across the boundary, both ways.

FFI -> Python: a call that returns -1 left an ``ffi.Error`` (kind, message, backtrace) in the
thread's slot; :func:`raise_from_raised` moves it out and raises the builtin exception named by the
kind (``ValueError``, ``KeyError``, ...) or :class:`Error` for kinds Python does not know. The FFI
backtrace travels as an exception note and as ``exc.__anyffi_backtrace__``.

Python -> FFI: :func:`set_raised_from_python` turns an exception raised in a callback into an
``ffi.Error`` of the same kind with the Python frames in its backtrace, so that it crosses Rust/C++
and comes back to a Python caller as the same kind (on the same thread, as the very same object).
"""

from __future__ import annotations

import builtins
import ctypes
import threading
import traceback
from . import _capi, _mem


class Error(RuntimeError):
    """An FFI error whose kind names no Python exception (``InternalError``, custom kinds).

    ``kind`` is the error kind; ``backtrace`` the FFI backtrace (most recent call first).
    Raise it from a callback to choose the kind the other side sees.
    """

    def __init__(self, message: str = "", kind: "str | None" = None, backtrace: str = ""):
        super().__init__(message)
        # a subclass registered with register_error defaults to its registered kind
        self.kind = _registered_kind(type(self), Error) if kind is None else kind
        self.backtrace = backtrace


def _registered_kind(cls: type, stop: "type | None" = None) -> str:
    """The kind registered for ``cls`` or its nearest registered base before ``stop``, else
    RuntimeError."""
    for c in cls.__mro__:
        if c is stop:
            break
        kind = _CLASS_TO_KIND.get(c)
        if kind is not None:
            return kind
    return "RuntimeError"


_KIND_TO_CLASS: dict[str, type] = {}
_CLASS_TO_KIND: dict[type, str] = {}


def register_error(kind: "str | type | None" = None, cls: "type | None" = None):
    """Maps the error kind ``kind`` to the exception class ``cls``, both ways. As in
    ``tvm_ffi.register_error`` also a decorator: ``@register_error`` (the kind is the class
    name) or ``@register_error("kind")``. Returns ``cls``."""
    if isinstance(kind, type):
        kind, cls = kind.__name__, kind

    def register(c: type) -> type:
        k = kind if isinstance(kind, str) else c.__name__
        _KIND_TO_CLASS[k] = c
        _CLASS_TO_KIND[c] = k
        return c

    return register if cls is None else register(cls)


for _name in (
    "ValueError", "TypeError", "KeyError", "IndexError", "AttributeError", "RuntimeError",
    "NotImplementedError", "AssertionError", "MemoryError", "OverflowError", "ZeroDivisionError",
    "RecursionError", "StopIteration", "LookupError", "ArithmeticError", "OSError",
    "FileNotFoundError", "PermissionError", "TimeoutError", "UnicodeError", "KeyboardInterrupt",
):  # fmt: skip
    register_error(_name, getattr(builtins, _name))


def exception_class(kind: str) -> type:
    """The Python exception class for an FFI error kind."""
    cls = _KIND_TO_CLASS.get(kind)
    if cls is None:
        cls = getattr(builtins, kind, None)
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            cls = Error
    return cls


def kind_of(exc: BaseException) -> str:
    """The FFI error kind for a Python exception (its class or nearest registered base)."""
    if isinstance(exc, Error):
        return exc.kind
    exc = _capi.recursion_error_of(exc)  # ctypes' ArgumentError around a RecursionError
    return _registered_kind(type(exc))


# -- reading an ffi.Error object ------------------------------------------------------------------
# TVMFFIErrorCell at header+24: kind@0, message@16, backtrace@32 (each a TVMFFIByteArray).


def _cell_text(h: int, off: int) -> str:
    Q = _mem.Q
    i = _mem.qi(h + _capi.OBJ_CELL + off)
    return _mem.read_bytes(Q[i], Q[i + 1]).decode("utf-8", "replace")


def error_parts(h: int) -> tuple[str, str, str]:
    """(kind, message, backtrace) of the ``ffi.Error`` object ``h`` (borrowed)."""
    return _cell_text(h, 0), _cell_text(h, 16), _cell_text(h, 32)


# The last Python exception sent out of a callback on this thread, with the error handle made for
# it: when that error comes back to Python, the original exception object is raised again.
_tls = threading.local()


class _Sent:
    """The remembered (error, exception, message). It owns a reference to the ffi.Error: an
    address alone could be freed (C code that swallows the error) and reused by an unrelated
    error, which would then come back as this old exception object."""

    __slots__ = ("h", "exc", "message", "backtrace")

    def __init__(self, h: int, exc: BaseException, message: str, backtrace: str):
        self.h, self.exc, self.message, self.backtrace = h, exc, message, backtrace

    def __del__(self, _dec=_capi.TVMFFIObjectDecRef):
        h = self.h
        if h:
            self.h = 0
            _dec(h)


_NOTE_HEAD = "FFI backtrace (most recent call last):"


def _is_ctypes_frame(line: str) -> bool:
    # the frames of the ctypes call itself carry no information about the error
    return "/_ctypes/" in line or line.endswith(" in ffi_call") or line.endswith(" in ffi_call_unix64")


def _backtrace_note(backtrace: str) -> str:
    lines = [ln for ln in backtrace.splitlines() if ln.strip() and not _is_ctypes_frame(ln)]
    lines.reverse()  # FFI order is most recent first; Python prints most recent last
    return _NOTE_HEAD + "\n" + "\n".join(lines)


def exception_from_error(h: int) -> BaseException:
    """A Python exception for the ``ffi.Error`` ``h`` (borrowed)."""
    return _exception_from_parts(h, *error_parts(h))


def _exception_from_parts(h: int, kind: str, message: str, backtrace: str) -> BaseException:
    sent = getattr(_tls, "sent", None)
    if sent is not None and sent.h == h:
        _tls.sent = None
        exc = sent.exc
        if sent.message == message and kind_of(exc) == kind:
            # the frames we sent are in exc.__traceback__ already: note only what was added
            sent_bt = sent.backtrace
            if sent_bt and backtrace.startswith(sent_bt):
                extra = backtrace[len(sent_bt):]
            elif sent_bt and backtrace.endswith(sent_bt):
                extra = backtrace[: len(backtrace) - len(sent_bt)]
            else:
                extra = backtrace
            _attach_backtrace(exc, backtrace, extra)
            return exc
    return new_exception(kind, message, backtrace)


def new_exception(kind: str, message: str, backtrace: str) -> BaseException:
    """A new Python exception for an FFI error of ``kind``."""
    cls = exception_class(kind)
    try:
        exc = cls(message, kind, backtrace) if cls is Error else cls(message)
    except Exception:  # noqa: BLE001 - a class that wants other arguments (UnicodeDecodeError)
        exc = Error(message, kind, backtrace)
    if isinstance(exc, Error):  # a registered subclass of Error: the kind it came with
        exc.kind, exc.backtrace = kind, backtrace
    _attach_backtrace(exc, backtrace)
    return exc


def _attach_backtrace(exc: BaseException, backtrace: str, shown: "str | None" = None) -> None:
    """Records the FFI backtrace on ``exc`` and shows it (or the part ``shown`` of it that the
    traceback lacks) as its (single) FFI note."""
    exc.__anyffi_backtrace__ = backtrace
    shown = backtrace if shown is None else shown
    notes = [n for n in getattr(exc, "__notes__", ()) if not n.startswith(_NOTE_HEAD)]
    if shown.strip():
        notes.append(_backtrace_note(shown))
    if notes or hasattr(exc, "__notes__"):
        exc.__notes__ = notes  # what BaseException.add_note (3.11+) appends to


def take_raised(rc: int = -1) -> tuple[BaseException, str, str]:
    """Moves out the error the last failed call left in this thread's slot: its Python
    exception, its FFI kind and its FFI message."""
    out = ctypes.c_void_p()
    _capi.TVMFFIErrorMoveFromRaised(ctypes.byref(out))
    h = out.value
    if not h:
        raise Error(f"an FFI call failed (return code {rc}) without raising an error", "InternalError")
    try:
        kind, message, backtrace = error_parts(h)
        return _exception_from_parts(h, kind, message, backtrace), kind, message
    finally:
        _capi.TVMFFIObjectDecRef(h)


def discard_raised(_Move=_capi.TVMFFIErrorMoveFromRaised, _DecRef=_capi.TVMFFIObjectDecRef) -> None:
    """Drops whatever error this thread's slot holds (one expected and not wanted), so that it
    cannot be mistaken for a later call's."""
    out = ctypes.c_void_p()
    _Move(ctypes.byref(out))
    if out.value:
        _DecRef(out.value)


def raise_from_raised(rc: int = -1) -> None:
    """Raises the error the last failed call left in this thread's slot."""
    raise take_raised(rc)[0]


def check_call(rc: int) -> None:
    """Raises the pending FFI error when ``rc`` is not 0."""
    if rc != 0:
        raise_from_raised(rc)


# -- Python -> FFI ----------------------------------------------------------------------------------


def python_backtrace(exc: BaseException, stop: object = None) -> str:
    """The traceback of ``exc`` in the FFI format, most recent call first, down to (not
    including) the traceback entry ``stop``: the frames added since ``exc`` last crossed into the
    library, whose FFI backtrace already holds the older ones."""
    frames = []
    tb = exc.__traceback__
    while tb is not None and tb is not stop:
        frames.append(tb)
        tb = tb.tb_next
    return "".join(
        f'  File "{t.tb_frame.f_code.co_filename}", line {t.tb_lineno}, in {t.tb_frame.f_code.co_name}\n'
        for t in reversed(frames)
    )


def make_error(kind: str, message: str, backtrace: str) -> int:
    """A new ``ffi.Error`` object (new reference)."""
    k, m, b = kind.encode(), message.encode("utf-8", "replace"), backtrace.encode("utf-8", "replace")
    out = ctypes.c_void_p()
    if _capi.TVMFFIErrorCreate(_capi.byte_array(k), _capi.byte_array(m), _capi.byte_array(b), ctypes.byref(out)):
        raise MemoryError("TVMFFIErrorCreate failed")
    return out.value


def error_fields(exc: BaseException) -> tuple[str, str, str]:
    """(kind, message, backtrace) of the ``ffi.Error`` that stands for ``exc``."""
    kind = kind_of(exc)
    try:
        message = str(exc.args[0]) if isinstance(exc, KeyError) and len(exc.args) == 1 else str(exc)
    except Exception:  # noqa: BLE001 - a __str__ that raises: the exception object still crosses
        message = f"<{type(exc).__name__} whose message could not be formed>"
    prior = getattr(exc, "__anyffi_backtrace__", "")
    if prior:
        # the same exception coming back out through another callback: its traceback still holds
        # every frame the prior backtrace has (most recent first); add only the outer ones since
        # (appending the whole traceback again made the backtrace quadratic in the depth)
        backtrace = prior + python_backtrace(exc, getattr(exc, "__anyffi_tb__", None))
    else:
        backtrace = python_backtrace(exc)
    return kind, message, backtrace


def set_raised_from_python(exc: BaseException) -> None:
    """Stores ``exc`` as this thread's raised FFI error (for a callback about to return -1)."""
    kind, message, backtrace = error_fields(exc)
    h = make_error(kind, message, backtrace)
    try:
        exc.__anyffi_tb__ = exc.__traceback__  # where the next crossing's new frames end
    except AttributeError:  # an exception class with __slots__ and no __dict__
        pass
    _capi.TVMFFIErrorSetRaised(h)
    _tls.sent = _Sent(h, exc, message, backtrace)  # keeps our reference to h

