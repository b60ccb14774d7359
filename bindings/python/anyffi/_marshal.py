"""Python values <-> ``TVMFFIAny``: argument views, owned results, callback arguments.

Arguments are borrowed views written straight into a pooled call frame (``TVMFFIAny`` cells in a
bytearray), one converter per Python type, looked up by ``type(value)`` in :data:`CONVERTERS`.
A converter ``conv(value, k, frame)`` writes the 16 bytes of the Any whose first 8-byte cell is
``frame.Q[k]`` (frame-relative: small indices are cheaper than address-sized ones); temporaries
that must outlive the call go to ``frame.keep`` (Python objects) or ``frame.owned`` (FFI
references released after the call).

Results are owned Anys decoded by type index (:func:`from_owned`); callback arguments and container
elements are borrowed views (:func:`from_view`), whose objects get a new reference.
"""

from __future__ import annotations

import ctypes
import itertools
import operator
from typing import Any, Callable

from . import _capi, _mem
from .device import Device, _device_from_packed
from .dtype import _from_packed as _dtype_from_packed
from .dtype import dtype
from .errors import check_call
from .object import Object, class_of

Q, q, I, D = _mem.Q, _mem.q, _mem.I, _mem.D
qi = _mem.qi
read_str, read_bytes = _mem.read_str, _mem.read_bytes
_IncRef = _capi.TVMFFIObjectIncRef
_DecRef = _capi.TVMFFIObjectDecRef
_BYTES_OFF = _mem.BYTES_DATA_OFFSET

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

# ---------------------------------------------------------------------------------------------
# Call frames
# ---------------------------------------------------------------------------------------------

FRAME_CAP = 8  # arguments a pooled frame holds; longer calls get a frame of their own


class Frame:
    """Memory for one call: the result Any (cells 0-1), ``cap`` argument Anys (argument j at cells
    2+2j, 3+2j) and ``cap`` 16-byte scratch cells (argument j's at 2+2cap+2j: byte-array structs
    for ``bytes`` views), with views over it by cell, and the keep-alive lists."""

    __slots__ = ("buf", "mem", "addr", "cap", "Q", "q", "D", "I", "ri", "rb", "ab", "keep", "owned", "hot", "hot0")

    def __init__(self, cap: int):
        self.buf = bytearray(16 * (1 + 2 * cap))
        self.mem = (_capi.TVMFFIAny * (1 + 2 * cap)).from_buffer(self.buf)
        self.addr = ctypes.addressof(self.mem)
        self.cap = cap
        view = memoryview(self.buf)
        self.Q, self.q, self.D, self.I = view.cast("Q"), view.cast("q"), view.cast("d"), view.cast("i")
        self.ri = qi(self.addr)  # the result's index in the address-space views (_mem.Q)
        self.rb = ctypes.byref(self.mem)  # TVMFFIAny* result, ready for a ctypes call
        self.ab = ctypes.byref(self.mem, 16)  # TVMFFIAny* args
        self.keep: list = []
        self.owned: list = []
        # what the call path reads, in one tuple (one attribute load and an unpack per call)
        self.hot = (self.Q, self.q, self.D, self.I, self.ab, self.rb, self.keep, self.owned)
        self.hot0 = (self.ab, self.rb, self.I)  # what a call without arguments reads

    def cell_addr(self, k: int) -> int:
        """The address of cell ``k``."""
        return self.addr + 8 * k

    def release(self) -> None:
        """Drops the temporaries of the last call."""
        self.keep.clear()
        owned = self.owned
        while owned:
            _DecRef(owned.pop())


POOL: list[Frame] = [Frame(FRAME_CAP) for _ in range(4)]


def new_frame(n: int = FRAME_CAP) -> Frame:
    return Frame(max(n, FRAME_CAP))


# ---------------------------------------------------------------------------------------------
# Arguments: Python value -> borrowed Any view
# ---------------------------------------------------------------------------------------------


def conv_none(a, k, fr):
    Q = fr.Q
    Q[k] = 0
    Q[k + 1] = 0


def conv_bool(a, k, fr):
    Q = fr.Q
    Q[k] = _capi.kBool
    Q[k + 1] = 1 if a else 0


def conv_int(a, k, fr):
    a = int(a)
    if INT64_MIN <= a <= INT64_MAX:
        fr.Q[k] = _capi.kInt
        fr.q[k + 1] = a
    else:
        conv_big_int(a, k, fr)


def conv_big_int(a: int, k: int, fr: Frame) -> None:
    """An int beyond int64: an owned ffi.BigInt, released after the call."""
    write_big_int(a, fr.cell_addr(k))
    if fr.Q[k] >= _capi.kStaticObjectBegin:
        fr.owned.append(fr.Q[k + 1])


def write_big_int(a: int, addr: int) -> None:
    """Writes ``a`` as an owned Int/BigInt Any at ``addr`` (TVMFFIBigIntFromByteArray)."""
    nbytes = (a.bit_length() + 1 + 63) // 64 * 8
    words = a.to_bytes(nbytes, "little", signed=True)
    check_call(_capi.TVMFFIBigIntFromByteArray(_capi.byte_array(words), addr))


def conv_float(a, k, fr):
    fr.Q[k] = _capi.kFloat
    fr.D[k + 1] = a


def _small(b: bytes) -> int:
    return int.from_bytes(b, "little")


# Strings seen as arguments -> their two cells, ready to copy: a SmallStr (type word with the
# length, value), or for longer ones a RawStr view of UTF-8 bytes this module keeps for good.
# Function.__call__ looks here first. Never evicted (a view may be in use by a call on another
# thread), so bounded instead: at most STR_CELLS_MAX strings, long ones up to STR_CELLS_LONG bytes
# (~1 MB in all); others take the uncached path.
STR_CELLS: dict[str, tuple[int, int]] = {}
STR_CELLS_MAX = 4096
STR_CELLS_LONG = 256
_STR_BYTES: list[bytes] = []  # the bytes behind cached RawStr cells


def conv_str(a: str, k: int, fr: Frame) -> None:
    """SmallStr inline when at most 7 UTF-8 bytes; else a RawStr view of the encoded bytes (or an
    owned ffi.String when the text holds NUL characters)."""
    b = a.encode("utf-8")
    n = len(b)
    Q = fr.Q
    if n <= 7:
        cells = (_capi.kSmallStr | (n << 32), _small(b))
        if len(STR_CELLS) < STR_CELLS_MAX:
            STR_CELLS[a] = cells
        Q[k], Q[k + 1] = cells
    elif _BYTES_OFF >= 0 and b"\0" not in b:
        # convert_args (reflected setters, calls of more than FRAME_CAP arguments) comes here
        # without looking in STR_CELLS first: reuse the cached cells rather than keeping another
        # copy of the bytes for good on every call
        cells = STR_CELLS.get(a)
        if cells is None:
            cells = (_capi.kRawStr, id(b) + _BYTES_OFF)
            if n <= STR_CELLS_LONG and len(STR_CELLS) < STR_CELLS_MAX:
                _STR_BYTES.append(b)
                STR_CELLS[a] = cells
            else:
                fr.keep.append(b)
        Q[k], Q[k + 1] = cells
    else:
        check_call(_capi.TVMFFIStringFromByteArray(_capi.byte_array(b), fr.cell_addr(k)))
        if Q[k] == _capi.kStr:
            fr.owned.append(Q[k + 1])


def conv_bytes(a, k: int, fr: Frame) -> None:
    """SmallBytes inline when at most 7 bytes; else a ByteArrayPtr view (struct in frame scratch)."""
    b = bytes(a)
    n = len(b)
    Q = fr.Q
    if n <= 7:
        Q[k] = _capi.kSmallBytes | (n << 32)
        Q[k + 1] = _small(b)
    elif _BYTES_OFF >= 0:
        fr.keep.append(b)
        j = k + 2 * fr.cap  # this argument's scratch cells hold the TVMFFIByteArray
        Q[j] = id(b) + _BYTES_OFF
        Q[j + 1] = n
        Q[k] = _capi.kByteArrayPtr
        Q[k + 1] = fr.cell_addr(j)
    else:
        check_call(_capi.TVMFFIBytesFromByteArray(_capi.byte_array(b), fr.cell_addr(k)))
        if Q[k] == _capi.kBytes:
            fr.owned.append(Q[k + 1])


def conv_object(a: Object, k: int, fr: Frame) -> None:
    """Objects travel as themselves (borrowed); Function.__call__ inlines this. Without a handle
    the object decides (a Tensor view passes its DLTensor*, a closed object raises)."""
    h = a._h
    if h:
        Q = fr.Q
        Q[k] = I[h >> 2]
        Q[k + 1] = h
    else:
        a._conv_without_handle(k, fr)


def conv_device(a: Device, k, fr):
    Q = fr.Q
    Q[k] = _capi.kDevice
    Q[k + 1] = a._packed


def conv_dtype(a: dtype, k, fr):
    Q = fr.Q
    Q[k] = _capi.kDataType
    Q[k + 1] = a._packed


def conv_void_p(a: ctypes.c_void_p, k, fr):
    Q = fr.Q
    Q[k] = _capi.kOpaquePtr
    Q[k + 1] = a.value or 0


class KeepAlive(dict):
    """Python objects the library holds, under odd integer keys passed as the ``void*`` of an FFI
    object (CPython object addresses are even, so a foreign handle is never mistaken for a key).
    ``deleter`` is the C ``void(void*)`` that drops a key when the FFI object dies."""

    def __init__(self) -> None:
        super().__init__()
        self._next = itertools.count(1)
        # bound through a default: deleters may run during interpreter shutdown
        self.deleter = _capi.SelfDeleter(lambda key, _pop=self.pop: _pop(key, None))

    def create(self, obj: object, make: Callable[[int, Any, Any], int]) -> int:
        """Holds ``obj`` under a new key and returns ``make(key, deleter, out)``'s FFI object (new
        reference); the key is dropped again when ``make`` fails."""
        key = 2 * next(self._next) + 1
        self[key] = obj
        out = ctypes.c_void_p()
        try:
            check_call(make(key, self.deleter, ctypes.byref(out)))
        except BaseException:
            self.pop(key, None)
            raise
        return out.value


# Python objects passed as ffi.OpaquePyObject (the cell's handle is the key).
OPAQUE = KeepAlive()


def make_opaque(a: object) -> int:
    """A new ``ffi.OpaquePyObject`` (new reference) holding ``a`` alive."""
    return OPAQUE.create(a, lambda key, deleter, out: _capi.TVMFFIObjectCreateOpaque(key, _capi.kOpaquePyObject, deleter, out))


def conv_opaque(a, k, fr):
    h = make_opaque(a)
    fr.owned.append(h)
    fr.Q[k] = _capi.kOpaquePyObject
    fr.Q[k + 1] = h


def _conv_via(f: Callable[[Any], Any]) -> Callable:
    """A converter that first maps the value with ``f`` (IntEnum -> int, numpy scalars -> Python)."""

    def conv(a, k, fr):
        v = f(a)
        CONVERTERS.get(type(v), convert_slow)(v, k, fr)

    return conv


CONVERTERS: dict[type, Callable[[Any, int, Frame], None]] = {
    type(None): conv_none,
    bool: conv_bool,
    int: conv_int,
    float: conv_float,
    str: conv_str,
    bytes: conv_bytes,
    bytearray: conv_bytes,
    Device: conv_device,
    dtype: conv_dtype,
    ctypes.c_void_p: conv_void_p,
    Object: conv_object,
}

# Hooks that later modules fill in: (predicate on the type, converter), tried in order by
# resolve_converter for types not in CONVERTERS (DLPack producers, ...).
PROTOCOL_CONVERTERS: list[tuple[Callable[[type], bool], Callable]] = []
# The converter of Python callables (function.py).
CALLABLE_CONVERTER: list[Callable] = []


def _scalar_item(a):
    return a.item()


def resolve_converter(t: type, sample: Any) -> Callable:
    """The converter for values of type ``t`` (``sample`` is one), found once and cached in
    CONVERTERS."""
    conv = None
    for base in t.__mro__[1:-1]:  # not `object`, whose converter (opaque) is the last resort
        c = CONVERTERS.get(base)
        if c is not None:
            # subclasses of int/float/str (IntEnum, numpy.float64, ...) convert as their base value
            conv = _conv_via(base) if base in (int, float, str) else c
            break
    if conv is None:
        conv = next((c for pred, c in PROTOCOL_CONVERTERS if pred(t)), None)
    if conv is None and t.__module__ == "numpy" and hasattr(t, "item"):
        conv = _conv_via(_scalar_item)  # numpy scalars: numpy.int32, numpy.bool_, ...
    if conv is None and hasattr(t, "__index__"):
        conv = _conv_via(operator.index)
    if conv is None and callable(sample) and CALLABLE_CONVERTER:
        conv = CALLABLE_CONVERTER[0]
    if conv is None:
        conv = conv_opaque
    CONVERTERS[t] = conv
    return conv


def convert_slow(a, k, fr):
    """Converts a value whose type is not yet in CONVERTERS."""
    resolve_converter(type(a), a)(a, k, fr)


def convert_args(args: tuple, fr: Frame) -> None:
    """Writes ``args`` as views into ``fr`` (for the generic, non-inlined paths)."""
    k = 2
    for a in args:
        CONVERTERS.get(type(a), convert_slow)(a, k, fr)
        k += 2


# ---------------------------------------------------------------------------------------------
# Results: owned Any -> Python value (the reference is adopted or released)
# ---------------------------------------------------------------------------------------------


def _text_of_str_object(h: int) -> str:
    j = (h >> 3) + 2  # qi(h + 24): the TVMFFIByteArray {data, size} after the header
    return read_str(Q[j], Q[j + 1])


def _bytes_of_object(h: int) -> bytes:
    j = (h >> 3) + 2
    return read_bytes(Q[j], Q[j + 1])


_BigIntContent = _capi.PYLIB.TVMFFIBigIntGetContentByteArray
_BigIntContent.argtypes = [ctypes.c_void_p]
_BigIntContent.restype = _capi.TVMFFIByteArray


def _bigint_value(i: int) -> int:
    """The value of the Int/BigInt Any at Q index ``i`` (borrowed)."""
    ba = _BigIntContent(8 * (i + 1))
    return int.from_bytes(read_bytes(ba.data, ba.size), "little", signed=True)


def opaque_value(h: int) -> Any:
    """The Python object inside an ``ffi.OpaquePyObject`` made here (borrowed ``h``), or None."""
    key = Q[(h >> 3) + 2]  # TVMFFIOpaqueObjectCell.handle at header+24
    if key & 1:
        return OPAQUE.get(key, _MISSING)
    return _MISSING


_MISSING = object()

# DLTensorPtr -> a non-owning Tensor view (a result; a callback's argument); set by tensor.py.
DLTENSOR_VIEW: list[Callable[[int], Any]] = []
DLTENSOR_ARG_VIEW: list[Callable[[int], Any]] = []
# a borrowed view -> an owned ffi.Tensor with its own copy of the data; set by tensor.py.
VIEW_TO_OWNED: list[Callable[[Any], Any]] = []


def _pod_value(ti: int, i: int) -> Any:
    """POD and inline values (type index < 64) at Q index ``i``."""
    if ti == 0:
        return None
    if ti == 1:
        return q[i + 1]
    if ti == 3:
        return D[i + 1]
    if ti == 2:
        return Q[i + 1] != 0
    if ti == 11:
        return read_str(8 * (i + 1) + 8, I[2 * i + 1])
    if ti == 12:
        return read_bytes(8 * (i + 1) + 8, I[2 * i + 1])
    if ti == 6:
        return _device_from_packed(Q[i + 1])
    if ti == 5:
        return _dtype_from_packed(Q[i + 1] & 0xFFFFFFFF)
    if ti == 4:
        return ctypes.c_void_p(Q[i + 1] or None)
    if ti == 7:
        return DLTENSOR_VIEW[0](Q[i + 1])
    raise TypeError(f"unexpected FFI value of type index {ti}")


def from_owned(i: int) -> Any:
    """The Python value of the owned Any at Q index ``i``, adopting its reference."""
    ti = I[2 * i]
    if ti < 64:
        if ti in (8, 9, 10):
            raise ValueError(f"a function returned a borrowed view (type index {ti}), which no owned value may be")
        return _pod_value(ti, i)
    h = Q[i + 1]
    if ti == 65:
        try:
            return _text_of_str_object(h)
        finally:
            _DecRef(h)
    if ti == 66:
        try:
            return _bytes_of_object(h)
        finally:
            _DecRef(h)
    if ti == 78:
        try:
            return _bigint_value(i)
        finally:
            _DecRef(h)
    if ti == 74:
        v = opaque_value(h)
        if v is not _MISSING:
            _DecRef(h)
            return v
    return class_of(ti)._from_owned(h)


def from_result(fr: Frame) -> Any:
    """The result of a call made with frame ``fr`` (owned), for types other than None and Int.

    A ``DLTensor*`` result that points into one of the call's own arguments (a function that
    returned its tensor argument: a DLPack capsule, or a DLTensor made from an array interface)
    would dangle once the call's frame lets go of it: it becomes an owning Tensor instead,
    sharing the producer's memory.
    """
    i = fr.ri
    ti = fr.I[0]
    # The slot goes back to None after every result: callees treat it as an owned Any (it must
    # not keep an object the caller now owns), and a function that returns nothing leaves it as
    # it is (the official library's void functions do), which must read as None, not as the
    # previous call's result.
    try:
        if ti == 7 and fr.keep:
            t = KEPT_TO_TENSOR[0](fr.keep, fr.Q[1])
            if t is not None:
                return t
        return from_owned(i)
    finally:
        fr.Q[0] = 0


# (a call's `keep` list, a DLTensor* result) -> an owning Tensor when the result points into one
# of the call's own arguments, else None; set by tensor.py.
KEPT_TO_TENSOR: list[Callable[[list, int], Any]] = []


def from_view(i: int) -> Any:
    """The Python value of the borrowed Any at Q index ``i``; objects get a new reference."""
    ti = I[2 * i]
    if ti == 1:
        return q[i + 1]
    if ti == 3:
        return D[i + 1]
    if ti < 64:
        if ti == 7:
            # a callback's DLTensor* argument: a view closed when the callback returns
            return DLTENSOR_ARG_VIEW[0](Q[i + 1])
        if ti == 8:
            p = Q[i + 1]
            return ctypes.string_at(p).decode("utf-8") if p else ""
        if ti == 9:
            j = qi(Q[i + 1])
            return read_bytes(Q[j], Q[j + 1])
        if ti == 10:
            slot = qi(Q[i + 1])
            h = Q[slot]
            if not h:
                raise ValueError("an ObjectRValueRef argument was already moved")
            Q[slot] = 0
            return from_owned_object(h)
        return _pod_value(ti, i)
    h = Q[i + 1]
    if ti == 65:
        return _text_of_str_object(h)
    if ti == 66:
        return _bytes_of_object(h)
    if ti == 78:
        return _bigint_value(i)
    if ti == 74:
        v = opaque_value(h)
        if v is not _MISSING:
            return v
    try:
        _IncRef(h)
    except ctypes.ArgumentError as e:  # at the recursion limit (deep containers: ==, hash, repr)
        raise _capi.recursion_error_of(e) from None
    return class_of(ti)._from_owned(h)


def from_owned_object(h: int) -> Any:
    """The Python value of an object handle whose reference the caller gives away."""
    ti = I[h >> 2]
    if ti in (65, 66, 74, 78):
        tmp = (_capi.TVMFFIAny * 1)()
        tmp[0].type_index = ti
        tmp[0].v_int64 = h
        return from_owned(qi(ctypes.addressof(tmp)))
    return class_of(ti)._from_owned(h)


# ---------------------------------------------------------------------------------------------
# Python value -> owned Any (callback results)
# ---------------------------------------------------------------------------------------------

# Values that must become objects before they can be owned (DLPack producers -> ffi.Tensor); set
# by tensor.py: a function returning the owning object, or None when the value is not such.
OWNED_PREPARE: list[Callable[[Any], Any]] = []


# Element types that never need preparing before a container keeps them.
_PLAIN_ELEMENTS = frozenset((type(None), bool, int, float, str, bytes))


def owned_elements(items: Any) -> Any:
    """``items`` (a sequence), with DLPack producers (numpy arrays, ...) turned into owned
    ``ffi.Tensor`` objects that share their memory: a container keeps its elements after the
    call, so the borrowed ``DLTensor*`` view an argument gets would dangle there."""
    if _PLAIN_ELEMENTS.issuperset(map(type, items)):
        return items
    out = None
    for j, v in enumerate(items):
        if type(v) in _PLAIN_ELEMENTS:
            continue
        if isinstance(v, Object):
            # a borrowed view (a callback's DLTensor* argument) points at the caller's DLTensor,
            # and at memory only the caller keeps alive, both possibly gone after the call: the
            # container gets an ffi.Tensor with its own copy of the data instead
            if v._h or not getattr(v, "is_view", False) or not v._dl:
                continue
            if out is None:
                out = list(items)
            out[j] = VIEW_TO_OWNED[0](v)
            continue
        for prep in OWNED_PREPARE:
            v2 = prep(v)
            if v2 is not None:
                if out is None:
                    out = list(items)
                out[j] = v2
                break
    return items if out is None else out


def write_owned(v: Any, i: int) -> None:
    """Writes ``v`` as an owned Any at Q index ``i`` (the caller receives the reference)."""
    t = type(v)
    if v is None:
        Q[i] = 0
        Q[i + 1] = 0
        return
    if t is int:
        if INT64_MIN <= v <= INT64_MAX:
            Q[i] = 1
            q[i + 1] = v
        else:
            write_big_int(v, 8 * (i + 1))
        return
    if t is float:
        Q[i] = 3
        D[i + 1] = v
        return
    if isinstance(v, Object) and v._h:
        h = v._h
        _IncRef(h)
        Q[i] = I[h >> 2]
        Q[i + 1] = h
        return
    for prep in OWNED_PREPARE:
        v2 = prep(v)
        if v2 is not None:
            v = v2
            break
    # Generic: write a view into a scratch frame, then copy it into an owned value (RawStr and
    # ByteArrayPtr views become ffi.String/ffi.Bytes; objects gain a reference).
    try:
        fr = POOL.pop()
    except IndexError:
        fr = new_frame()
    try:
        CONVERTERS.get(type(v), convert_slow)(v, 2, fr)
        if fr.I[4] == _capi.kDLTensorPtr:
            if not (isinstance(v, Object) and v._h == 0):
                raise TypeError(f"cannot return a borrowed tensor view of type {type(v).__name__}")
            # a DLTensor* view received as an argument goes back as that pointer (a POD value,
            # valid for the caller, whose tensor it is)
            Q[i] = _capi.kDLTensorPtr
            Q[i + 1] = fr.Q[3]
            return
        check_call(_capi.TVMFFIAnyViewToOwnedAny(fr.cell_addr(2), 8 * (i + 1)))
    finally:
        fr.release()
        POOL.append(fr)
