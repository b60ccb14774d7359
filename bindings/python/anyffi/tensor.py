"""``anyffi.Tensor`` and DLPack, both ways, with no copies.

* Arguments: a numpy array (or any ``__dlpack__`` producer) is passed as a borrowed ``DLTensor*``
  view (type index 7): the producer's own capsule is made, its ``DLTensor`` handed to the callee,
  and the capsule dropped after the call (its deleter frees the producer's bookkeeping). No
  ``ffi.Tensor`` object is allocated.
* :func:`from_dlpack` makes an owning ``ffi.Tensor`` (``TVMFFITensorFromDLPack[Versioned]``).
* ``Tensor.__dlpack__`` exports one (``TVMFFITensorToDLPack[Versioned]``), so ``numpy.from_dlpack``
  and ``torch.from_dlpack`` take anyffi tensors. ``Tensor.numpy()`` goes through
  ``__array_interface__`` instead: writable on every numpy version (numpy < 2.1 marks DLPack imports
  read-only), valid for borrowed views too, and the array keeps the Tensor alive.
* Arrays that cannot export through DLPack (read-only arrays on numpy < 2.1) are passed through a
  ``DLTensor`` built from their ``__array_interface__``.

A ``Tensor`` either owns an ``ffi.Tensor`` object, or (in a callback that received a ``DLTensor*``
argument, or from a function returning one) is a view of a ``DLTensor`` owned by someone else,
valid only as long as that someone keeps it.
"""

from __future__ import annotations

import ctypes
import sys
from _thread import get_ident as _get_ident
from typing import Any, Optional

from . import _capi, _marshal, _mem
from . import function as _function
from .device import Device, _device_from_packed
from .dtype import _from_packed as _dtype_from_packed
from .dtype import _is_long_double
from .dtype import dtype
from .errors import check_call
from .object import Object, register_object

Q, I = _mem.Q, _mem.I
qi = _mem.qi

_CAPSULE_POINTER = 16  # PyCapsule: PyObject_HEAD, void* pointer, const char* name, ...
_CAPSULE_NAME = 24
_LEGACY = b"dltensor"
_VERSIONED = b"dltensor_versioned"
_USED_LEGACY = b"used_dltensor"
_USED_VERSIONED = b"used_dltensor_versioned"

_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
_PyCapsule_SetName = ctypes.pythonapi.PyCapsule_SetName
_PyCapsule_SetName.restype = ctypes.c_int
_PyCapsule_SetName.argtypes = (ctypes.py_object, ctypes.c_char_p)
# the PyCapsule type (the stdlib's datetime module exports its C API as one): the raw reads of
# a capsule's fields below are only valid on a real capsule
_CAPSULE = type(__import__("datetime").datetime_CAPI)


def _require_capsule(cap: object, source: str) -> None:
    """TypeError unless ``cap`` (what ``source``, a ``__dlpack__()`` call, returned) is a
    PyCapsule: the capsule's fields are read at raw offsets."""
    if type(cap) is not _CAPSULE:
        raise TypeError(f"{source} returned {type(cap).__name__}, not a capsule")


def _capsule_name(cap: object) -> bytes:
    p = Q[qi(id(cap) + _CAPSULE_NAME)]
    return ctypes.string_at(p) if p else b""


def _capsule_pointer(cap: object) -> int:
    return Q[qi(id(cap) + _CAPSULE_POINTER)]


def check_writable(func: str, name: str, x: Any) -> None:
    """Raises ValueError when ``x`` is a read-only numpy array given as an output: a borrowed
    DLTensor* view carries no read-only flag, so the library would write into it unchecked (a
    broadcast, a read-only memory map)."""
    if getattr(getattr(x, "flags", None), "writeable", True) is False:
        raise ValueError(f"{func}: `{name}` is a read-only numpy array")
    if isinstance(x, Tensor):
        if _read_only(x):
            raise ValueError(f"{func}: `{name}` is a read-only tensor")
        return
    if _np is not None and isinstance(x, _np.ndarray):
        return
    if hasattr(x, "__dlpack__"):
        # any other producer (a wrapper around a read-only array, ...): ask for a versioned
        # capsule and refuse one flagged read-only (the unconsumed capsule frees itself)
        try:
            cap = x.__dlpack__(max_version=(1, 3))
        except TypeError:  # a producer that predates the versioned protocol has no flag
            return
        _require_capsule(cap, f"{func}: `{name}`.__dlpack__()")
        if _capsule_name(cap) == _VERSIONED and _flagged_read_only(_capsule_pointer(cap)):
            raise ValueError(f"{func}: `{name}` is exported read-only by its producer")


def ml_dtype_of(np_dtype: Any) -> Optional[dtype]:
    """The dtype of a numpy dtype that ``ml_dtypes`` defines (``bfloat16``, ``float8_e4m3fn``,
    ...) when DLPack stores it the same way (one element per item, no packing), else None.
    numpy cannot export such arrays through DLPack; they pass from their array interface."""
    t = getattr(np_dtype, "type", None)
    if t is None or not getattr(t, "__module__", "").startswith("ml_dtypes"):
        return None
    if not np_dtype.isnative:  # byte-swapped: DLPack has no byte order (refused as '>f4' is)
        return None
    try:
        d = dtype(np_dtype.name)
    except (TypeError, ValueError):
        return None
    return d if d.lanes == 1 and d.bits == 8 * np_dtype.itemsize else None


def _ml_numpy_dtype(d: dtype) -> Any:
    """The ``ml_dtypes`` numpy dtype for ``d`` (bfloat16, float8_*), or None (not one of them,
    or ml_dtypes is not installed)."""
    if d.code not in _ML_CODES or d.lanes != 1:
        return None
    try:
        import ml_dtypes
        import numpy as np
    except ImportError:
        return None
    t = getattr(ml_dtypes, str(d), None)
    return np.dtype(t) if t is not None and ml_dtype_of(np.dtype(t)) == d else None


def check_tensor_like(func: str, name: str, x: Any) -> Any:
    """TypeError naming the function and argument unless ``x`` is an anyffi Tensor, a DLPack
    producer (numpy, torch, ...) or a DLPack capsule; then :func:`check_byte_order`. Returns
    what to pass on: ``x``, or the Tensor a capsule holds (consumed here: the library cannot
    take a capsule, which it would see as an opaque Python object)."""
    if isinstance(x, Tensor):
        return x
    if not hasattr(x, "__dlpack__"):
        if type(x).__name__ == "PyCapsule":
            return from_dlpack(x)
        raise TypeError(
            f"{func}: `{name}` must be an anyffi.Tensor, a numpy array or a DLPack producer, got {type(x).__name__}"
        )
    check_byte_order(func, name, x)
    return x


def check_byte_order(func: str, name: str, x: Any) -> None:
    """TypeError naming the function and argument for a numpy array that DLPack cannot
    describe: non-native byte order (DLPack has none), or an object, structured, string,
    datetime or long double dtype (the producer would refuse with a bare BufferError)."""
    if _np is None or not isinstance(x, _np.ndarray):
        return
    dt = x.dtype
    if not dt.isnative:
        raise TypeError(
            f"{func}: `{name}` has non-native byte order ({dt.str}); convert it first, e.g. "
            f"x.astype(x.dtype.newbyteorder('='))"
        )
    if dt.kind in "OVUSMm" or _is_long_double(dt):
        if ml_dtype_of(dt) is not None:  # bfloat16, float8_* of ml_dtypes: they pass
            return
        raise TypeError(
            f"{func}: `{name}` has dtype {dt}, which has no DLPack equivalent (DLPack tensors hold "
            f"bool, int, uint, float or complex elements)"
        )


# -- numpy / DLPack producers as DLTensor* views -----------------------------------------------

_LEGACY_NAME_PTRS: set[int] = set()  # addresses of the static "dltensor" names producers use
_VERSIONED_OFFSET = _capi.DLManagedTensorVersioned.dl_tensor.offset
_VERSIONED_FLAGS_OFFSET = _capi.DLManagedTensorVersioned.flags.offset
_DLPACK_FLAG_READ_ONLY = 1  # DLPACK_FLAG_BITMASK_READ_ONLY
_DLPACK_FLAG_IS_COPIED = 2  # DLPACK_FLAG_BITMASK_IS_COPIED


def _flagged_read_only(mt: int) -> bool:
    """Whether the versioned managed tensor at ``mt`` carries the DLPack READ_ONLY flag."""
    return bool(Q[qi(mt + _VERSIONED_FLAGS_OFFSET)] & _DLPACK_FLAG_READ_ONLY)


def _dltensor_offset(name_ptr: int, producer: type) -> int:
    """Where the DLTensor sits in a capsule's managed tensor, by the capsule's name."""
    name = ctypes.string_at(name_ptr) if name_ptr else b""
    if name == _LEGACY:
        _LEGACY_NAME_PTRS.add(name_ptr)
        return 0
    if name == _VERSIONED:
        return _VERSIONED_OFFSET
    raise TypeError(f"{producer.__name__}.__dlpack__() returned a capsule named {name!r}")


# DLTensor* arguments of read-only producers, passed right now (address -> count): a callback
# receiving one gets a read-only view (its numpy() is read-only, ops refuse it as an output).
_READ_ONLY_DL: dict[int, int] = {}


class _ReadOnlyMark:
    """Marks a DLTensor* read-only while it sits in a call frame's ``keep`` list."""

    __slots__ = ("p",)

    def __init__(self, p: int):
        self.p = p
        _READ_ONLY_DL[p] = _READ_ONLY_DL.get(p, 0) + 1

    def __del__(self, marks=_READ_ONLY_DL):
        n = marks.get(self.p, 0) - 1
        if n > 0:
            marks[self.p] = n
        else:
            marks.pop(self.p, None)


def _arg_owner(p: int) -> Any:
    """The Python object that keeps alive the memory of ``p``, the DLTensor* of an argument that
    Python code of this thread is passing right now (None for a foreign caller's memory).

    Looked up only when a callback derives something from its argument view, in the frames of
    the running calls: a call's numpy capsules are in its ``cap`` local and its frame's ``keep``
    list (``Function.__call__``, ``conv_dlpack``), an ``__array_interface__`` exporter just before
    its DLTensor in ``keep``; the library's native call (function.py) keeps its numpy arrays
    in flight itself. The hot path pays nothing for it."""
    if _ArgOwner is not None:
        a = _ArgOwner(p)
        if a:
            return ctypes.cast(a, ctypes.py_object).value  # a borrowed numpy array, alive now
    f = sys._getframe(1)
    while f is not None:
        if "fr" in f.f_code.co_varnames:
            loc = f.f_locals
            fr = loc.get("fr")
            if type(fr) is _marshal.Frame:
                cap = loc.get("cap")
                items = fr.keep if cap is None else [cap, *fr.keep]
                for j, c in enumerate(items):
                    if type(c) is _DLTensor:
                        if j and ctypes.addressof(c) == p:
                            return items[j - 1]
                    elif type(c).__name__ == "PyCapsule" and _capsule_dltensor(c) == p:
                        # its managed tensor holds the producer, but the caller may consume the
                        # capsule (a callback returning its argument: from_result): keep the
                        # call's producers themselves as well
                        return (c, loc.get("args"), loc.get("a"))
        f = f.f_back
    return None


_DLTensor = _capi.DLTensor
# void* AnyFFIPyArgOwner(const void* dltensor) (our library only): the numpy array behind a
# DLTensor* that a native call of this thread is passing right now, borrowed, or NULL
_ArgOwner = getattr(_capi.PYLIB, "AnyFFIPyArgOwner", None)
if _ArgOwner is not None:
    _ArgOwner.argtypes = [ctypes.c_void_p]
    _ArgOwner.restype = ctypes.c_void_p


def conv_dlpack(a: Any, k: int, fr) -> None:
    """Passes a DLPack producer as a borrowed ``DLTensor*`` view of its own capsule."""
    read_only = False
    try:
        cap = a.__dlpack__()
    except BufferError:
        ml = ml_dtype_of(getattr(a, "dtype", None))
        if ml is not None and hasattr(a, "__array_interface__"):
            # bfloat16/float8 arrays of ml_dtypes: numpy cannot export them through DLPack
            _pass_array_interface(a, k, fr, ml)
            return
        try:
            cap = a.__dlpack__(max_version=(1, 3))  # read-only numpy arrays export only this way
        except TypeError:  # ... on numpy >= 2.1; older numpy cannot export them at all
            if not hasattr(a, "__array_interface__"):
                raise
            _pass_array_interface(a, k, fr, None)
            return
        read_only = True
    _require_capsule(cap, f"{type(a).__name__}.__dlpack__()")
    base = id(cap)
    name_ptr = Q[(base >> 3) + 2]  # PyCapsule.name at +24
    off = 0 if name_ptr in _LEGACY_NAME_PTRS else _dltensor_offset(name_ptr, type(a))
    fr.keep.append(cap)
    mt = Q[(base >> 3) + 1]  # PyCapsule.pointer at +16: the managed tensor
    if read_only and off == _VERSIONED_OFFSET and _flagged_read_only(mt):
        fr.keep.append(_ReadOnlyMark(mt + off))
    fr.Q[k] = _capi.kDLTensorPtr
    fr.Q[k + 1] = mt + off


def _pass_array_interface(a: Any, k: int, fr, dt: Optional[dtype]) -> None:
    """Passes an ``__array_interface__`` exporter as a ``DLTensor*`` (of dtype ``dt``, else the
    interface's) kept in the call's frame, marked read-only when its memory is."""
    p = _dltensor_of_array_interface(a, fr.keep, dt)
    if a.__array_interface__["data"][1]:
        fr.keep.append(_ReadOnlyMark(p))
    fr.Q[k] = _capi.kDLTensorPtr
    fr.Q[k + 1] = p


# numpy's __array_interface__ type codes -> DLDataType code
_ARRAY_KIND_CODE = {"i": 0, "u": 1, "f": 2, "b": 6, "c": 5}


def _compact_strides(shape: "tuple[int, ...]") -> "tuple[int, ...]":
    """Row-major strides, in elements, of a compact tensor of ``shape``."""
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def _dltensor_of_array_interface(a: Any, keep: list, dt: Optional[dtype] = None) -> int:
    """A DLTensor over the memory of an ``__array_interface__`` exporter (CPU), kept in ``keep``;
    of dtype ``dt`` (an ml_dtypes array: the interface says only "void") or the interface's."""
    ai = a.__array_interface__
    typestr, shape = ai["typestr"], tuple(ai["shape"])
    kind = typestr[1]
    if dt is not None:
        item = dt.bits // 8
    else:
        if typestr[0] == ">" or kind not in _ARRAY_KIND_CODE:
            raise TypeError(f"cannot pass a {typestr} array as a tensor")
        item = int(typestr[2:])
        if 8 * item not in _NUMPY_BITS[kind]:  # long double (x87, padded), complex256
            raise TypeError(f"cannot pass a {typestr} array as a tensor (no DLPack equivalent)")
    byte_strides = ai.get("strides")
    if byte_strides is not None and any(s % item for s in byte_strides):
        raise BufferError(f"cannot pass an array whose byte strides {tuple(byte_strides)} are not multiples of its item size {item}")
    strides = _compact_strides(shape) if byte_strides is None else [s // item for s in byte_strides]
    nd = len(shape)
    dims = (ctypes.c_int64 * max(nd, 1))(*shape)
    strs = (ctypes.c_int64 * max(nd, 1))(*strides)
    t = _capi.DLTensor()
    t.data = ai["data"][0]
    t.device = _capi.DLDevice(1, 0)
    t.ndim = nd
    t.dtype = _capi.DLDataType(dt.code, dt.bits, 1) if dt is not None else _capi.DLDataType(_ARRAY_KIND_CODE[kind], 8 * item, 1)
    t.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strs, ctypes.POINTER(ctypes.c_int64))
    keep.extend((a, t, dims, strs))
    return ctypes.addressof(t)


def _is_dlpack_producer(t: type) -> bool:
    return hasattr(t, "__dlpack__") and not issubclass(t, Object)


_marshal.PROTOCOL_CONVERTERS.append((_is_dlpack_producer, conv_dlpack))
try:
    import numpy as _np
except ImportError:  # numpy is optional
    _np = None
def _conv_foreign_dtype(a: Any, k: int, fr) -> None:
    """numpy and torch dtypes pass as DLDataType, as the official package passes them."""
    _marshal.conv_dtype(dtype(a), k, fr)


_marshal.PROTOCOL_CONVERTERS.append((lambda t: t.__module__ == "torch" and t.__name__ == "dtype", _conv_foreign_dtype))
if _np is not None:
    _marshal.CONVERTERS[_np.dtype] = _conv_foreign_dtype  # and its subclasses (Float32DType, ...)
    _marshal.CONVERTERS[_np.ndarray] = conv_dlpack
    _function._ndarray = _np.ndarray  # Function.__call__ inlines numpy arrays


# -- Tensor -----------------------------------------------------------------------------------


def _read_only(t: "Tensor", _ask=_capi.AnyFFITensorIsReadOnly) -> bool:
    """Whether ``t``'s memory is read-only. A view or a tensor this package imported knows it; a
    wrapper made for a handle (a function's result, a callback's argument, a container's element)
    asks the library once: the read-only flag of a DLPack import stays with the ffi.Tensor there,
    whichever wrapper, binding or thread holds it (the official library keeps no such record)."""
    r = t._ro
    if r is None:
        r = t._ro = bool(_ask is not None and t._h and _ask(t._h) == 1)
    return r


@register_object("ffi.Tensor", _capi.kTensor)
class Tensor(Object):
    """An n-dimensional array: an owned ``ffi.Tensor``, or a borrowed ``DLTensor`` view."""

    # _owners: the ffi.Tensors a borrowed view's DLPack exports were made from (`_export_view`)
    __slots__ = ("_dl", "_keep", "_ro", "_exported", "_owners")

    @classmethod
    def _from_owned(cls, h: int) -> "Tensor":
        o = object.__new__(cls)
        o._h = h
        o._dl = h + _capi.OBJ_CELL
        o._keep = None
        o._ro = None  # not known yet: `_read_only` asks the library once, when it matters
        o._exported = False
        o._owners = None
        return o

    @classmethod
    def _view(cls, dltensor: int, keep: Any = None) -> "Tensor":
        """A non-owning view of the DLTensor at ``dltensor``, valid while its owner keeps it."""
        o = object.__new__(cls)
        o._h = 0
        o._dl = dltensor
        o._keep = keep
        o._ro = False
        o._exported = False
        o._owners = None
        return o

    def _pin_owner(self) -> Any:
        """What keeps a view's memory alive, found once (``_arg_owner``) for the DLTensor* of a
        callback's argument: what is derived from the view (``numpy()``, DLPack exports) keeps it
        through the view's ``_keep``, so that it may outlive the call."""
        if self._keep is None and not self._h:
            self._keep = _arg_owner(self._dl)
        return self._keep

    @property
    def read_only(self) -> bool:
        """Whether the producer exported this memory read-only (numpy views of it are too)."""
        return _read_only(self)

    def close(self) -> None:
        if getattr(self, "_exported", False):
            # numpy arrays made from this object's __array_interface__ (np.asarray(t)) have it as
            # their base and read the memory still: this object keeps what keeps the memory (its
            # reference moves to a holder) until it is garbage, and is closed for every use
            h = self._h
            if h:
                self._h = 0
                self._keep = (self._keep, Tensor._from_owned(h))
            self._dl = 0
            return
        self._dl = 0
        self._keep = None
        self._owners = None
        super().close()

    def _conv_without_handle(self, k: int, fr) -> None:
        # a borrowed view passes its DLTensor* on (an owned tensor passes itself, as any object)
        if not self._dl:
            raise ValueError("cannot pass a closed anyffi.Tensor")
        fr.Q[k] = _capi.kDLTensorPtr
        fr.Q[k + 1] = self._dl

    @property
    def is_view(self) -> bool:
        """Whether this is a borrowed ``DLTensor*`` view rather than an owned ``ffi.Tensor``."""
        return not self._h

    def _dlt(self) -> int:
        dl = self._dl
        if not dl:
            raise ValueError("anyffi.Tensor: the tensor is closed")
        return dl

    @property
    def data_ptr(self) -> int:
        """Address of the first element (``data + byte_offset``)."""
        dl = self._dlt()
        return Q[qi(dl)] + Q[qi(dl + _capi.DLT_BYTE_OFFSET)]

    @property
    def byte_offset(self) -> int:
        return Q[qi(self._dlt() + _capi.DLT_BYTE_OFFSET)]

    @property
    def ndim(self) -> int:
        return I[((self._dlt() + _capi.DLT_NDIM) >> 2) - 2]

    @property
    def shape(self) -> tuple[int, ...]:
        dl = self._dlt()
        nd = I[((dl + _capi.DLT_NDIM) >> 2) - 2]
        p = Q[qi(dl + _capi.DLT_SHAPE)]
        return tuple(_mem.q[qi(p) + i] for i in range(nd)) if nd else ()

    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in elements (compact row-major ones when the DLTensor has none)."""
        dl = self._dlt()
        nd = I[((dl + _capi.DLT_NDIM) >> 2) - 2]
        p = Q[qi(dl + _capi.DLT_STRIDES)]
        if p:
            return tuple(_mem.q[qi(p) + i] for i in range(nd))
        return _compact_strides(self.shape)

    @property
    def dtype(self) -> dtype:
        return _dtype_from_packed(I[((self._dlt() + _capi.DLT_DTYPE) >> 2) - 2] & 0xFFFFFFFF)

    @property
    def device(self) -> Device:
        return _device_from_packed(Q[qi(self._dlt() + _capi.DLT_DEVICE)])

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def is_contiguous(self) -> bool:
        """Compact row-major (size-1 dimensions ignored; empty tensors count as contiguous)."""
        shape, strides = self.shape, self.strides
        if 0 in shape:
            return True
        acc = 1
        for d, s in zip(reversed(shape), reversed(strides)):
            if d != 1 and s != acc:
                return False
            acc *= d
        return True

    def __dlpack_device__(self) -> tuple[int, int]:
        d = self.device
        return (d.device_type, d.device_id)

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: Optional[tuple[int, int]] = None,
        dl_device: Any = None,
        copy: Optional[bool] = None,
    ) -> object:
        """A DLPack capsule sharing this tensor's memory (the capsule holds a reference); with
        ``copy=True``, of a compact copy of it (CPU tensors; versioned capsules flag it copied)."""
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"anyffi.Tensor.__dlpack__: cannot export to device {dl_device}")
        if stream is not None and self.device.device_type == 1:
            # the array API: "On CPU and other device types without streams, only None is accepted"
            raise BufferError(f"anyffi.Tensor.__dlpack__: stream must be None for a CPU tensor, got {stream!r}")
        if copy:
            # the array API: copy=True "must always copy" (np/torch.from_dlpack(x, copy=True))
            if self.device.device_type != 1:
                raise BufferError(f"anyffi.Tensor.__dlpack__: copy=True is supported for CPU tensors only, not {self.device}")
            try:
                c = _owned_copy_of_view(self)  # an owned ffi.Tensor with a compact copy of the data
            except (ImportError, TypeError) as e:
                raise BufferError(f"anyffi.Tensor.__dlpack__: cannot copy: {e}") from e
            cap = c.__dlpack__(max_version=max_version)
            if _capsule_name(cap) == _VERSIONED:
                Q[qi(_capsule_pointer(cap) + _VERSIONED_FLAGS_OFFSET)] |= _DLPACK_FLAG_IS_COPIED
            return cap
        h = self._h
        if not h:
            return _export_view(self, max_version is not None and max_version[0] >= 1)
        out = ctypes.c_void_p()
        if max_version is not None and max_version[0] >= 1:
            check_call(_capi.TVMFFITensorToDLPackVersioned(h, ctypes.byref(out)))
            if _read_only(self):
                Q[qi(out.value + _VERSIONED_FLAGS_OFFSET)] |= _DLPACK_FLAG_READ_ONLY
            return _PyCapsule_New(out.value, _VERSIONED, _CAPSULE_DESTRUCTOR_ADDR)
        if _read_only(self):
            raise BufferError("anyffi.Tensor.__dlpack__: read-only memory exports only as a versioned capsule (max_version >= (1, 0))")
        check_call(_capi.TVMFFITensorToDLPack(h, ctypes.byref(out)))
        return _PyCapsule_New(out.value, _LEGACY, _CAPSULE_DESTRUCTOR_ADDR)

    @property
    def __array_interface__(self) -> dict:
        """numpy's array interface over this tensor's memory (CPU tensors of numpy dtypes)."""
        return self._array_interface(False)

    def _array_interface(self, bits: bool) -> dict:
        """The array interface (CPU tensors); ``bits``: bfloat16/float8 as unsigned ints of their
        size (for :meth:`numpy`, which views them as the ml_dtypes type)."""
        self._exported = True  # (`close` then leaves the memory to the arrays made from this)
        if not self._h:
            self._pin_owner()  # the array made from it keeps this object, hence the memory
        if self.device.device_type != 1:
            raise BufferError(
                f"anyffi.Tensor: the tensor is on {self.device}, not the CPU; copy it first: "
                "anyffi.runtime.to_device(t, 'cpu')"
            )
        d = self.dtype
        kind = _NUMPY_KIND.get(d.code)
        if bits and d.code in _ML_CODES:
            kind = "u"
        elif kind is None or d.lanes != 1 or d.bits not in _NUMPY_BITS[kind]:
            hint = ""
            if d.code in _ML_CODES and d.lanes == 1:
                hint = (
                    " (Tensor.numpy() returns it as an ml_dtypes array)"
                    if _ml_numpy_dtype(d) is not None
                    else " (install ml_dtypes for it: Tensor.numpy() then returns an ml_dtypes array)"
                )
            raise TypeError(f"anyffi.Tensor: numpy has no dtype for {d}{hint}")
        item = d.bits // 8
        return {
            "version": 3,
            "shape": self.shape,
            "typestr": f"<{kind}{item}",
            "data": (self.data_ptr, _read_only(self)),
            "strides": tuple(s * item for s in self.strides),
        }

    def numpy(self):
        """A writable numpy array sharing this tensor's memory (CPU tensors); it keeps the tensor
        alive (a borrowed view only as long as its owner). bfloat16 and float8 tensors come as
        arrays of the ``ml_dtypes`` types when that package is installed."""
        import numpy as np

        ml = _ml_numpy_dtype(self.dtype)
        h = self._h
        if not h:
            return np.asarray(self) if ml is None else np.asarray(_Bits(self)).view(ml)
        # The array holds its own reference to the ffi.Tensor (a second Python object), so that
        # closing this one (``close()``, a ``with`` block) cannot free the memory under it.
        _capi.TVMFFIObjectIncRef(h)
        holder = Tensor._from_owned(h)
        holder._ro = _read_only(self)
        holder._keep = self  # ... and keeps this Python object alive too, as before
        return np.asarray(holder) if ml is None else np.asarray(_Bits(holder)).view(ml)

    def __len__(self) -> int:
        s = self.shape
        if not s:
            raise TypeError("len() of a 0-d tensor")
        return s[0]

    def __repr__(self) -> str:
        if not self._dl:
            return "<anyffi.Tensor (closed)>"
        kind = "view" if not self._h else "Tensor"
        return f"<anyffi.{kind} shape={self.shape} dtype={self.dtype} device={self.device}>"


# The DLTensor* views handed to running callbacks, by (thread, address), innermost last. A
# DLTensor* result equal to one of this thread's (a callback passing its argument through another
# function, `echo(t)`) is that same view, so that it is closed with it when the callback returns
# instead of outliving the caller's DLTensor. Per thread: a C caller may pass the same DLTensor*
# to callbacks on several threads at once (a parallel kernel), and each list is then changed by
# one thread only (no view of another thread's callback, no list changing under an iteration).
_CALLBACK_VIEWS: dict[tuple[int, int], list] = {}


def _arg_view(dltensor: int, _ident=_get_ident) -> Tensor:
    o = Tensor._view(dltensor)
    if _READ_ONLY_DL and dltensor in _READ_ONLY_DL:
        o._ro = True  # the caller passed a read-only array
    _CALLBACK_VIEWS.setdefault((_ident(), dltensor), []).append(o)
    return o


def _result_view(dltensor: int, _ident=_get_ident) -> Tensor:
    stack = _CALLBACK_VIEWS.get((_ident(), dltensor))
    if stack:
        return stack[-1]
    return Tensor._view(dltensor)


def _close_arg_view(v: Tensor, views=_CALLBACK_VIEWS, _ident=_get_ident) -> None:
    # runs on the thread that made the view (the trampoline's `finally`)
    key = (_ident(), v._dl)
    v._dl = 0
    stack = views.get(key)
    if stack:
        for j in range(len(stack) - 1, -1, -1):
            if stack[j] is v:
                del stack[j]
                break
        if not stack:
            views.pop(key, None)


_marshal.DLTENSOR_VIEW.append(_result_view)
_marshal.DLTENSOR_ARG_VIEW.append(_arg_view)
_function._Tensor = Tensor
_function._close_arg_view = _close_arg_view


_NUMPY_KIND = {0: "i", 1: "u", 2: "f", 6: "b", 5: "c"}  # DLDataType code -> numpy kind
# DLDataType codes of the types numpy has only through ml_dtypes: bfloat16 and the float8s
_ML_CODES = frozenset((4, 7, 8, 9, 10, 11, 12, 13, 14))


class _Bits:
    """A tensor's array interface with bfloat16/float8 elements as unsigned ints (numpy then
    views them as the ml_dtypes type); it keeps the tensor alive as the array's base."""

    __slots__ = ("t",)

    def __init__(self, t: "Tensor"):
        self.t = t

    @property
    def __array_interface__(self) -> dict:
        return self.t._array_interface(True)


# the sizes numpy has for each kind (no complex32 '<c4', no int128 '<i16': numpy rejects those)
_NUMPY_BITS = {"i": (8, 16, 32, 64), "u": (8, 16, 32, 64), "f": (16, 32, 64), "b": (8,), "c": (64, 128)}


# -- capsule destructor: frees a managed tensor nobody consumed ---------------------------------


# PyErr_Occurred through ctypes raises the exception pending on this thread, if any (a private
# function object: setting restype on ctypes.pythonapi's would change it for everyone)
_PyErr_Occurred = ctypes.PYFUNCTYPE(ctypes.c_void_p)(("PyErr_Occurred", ctypes.pythonapi))


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(cap: int, Q=Q, string_at=ctypes.string_at, Deleter=_capi.DLManagedTensorDeleter,
                        err_occurred=_PyErr_Occurred) -> None:
    # Runs while the capsule is being destroyed, possibly during interpreter shutdown (hence the
    # defaults): read its fields directly, taking no new reference to it.
    #
    # A consumer that fails after taking the capsule (np.from_dlpack of a bfloat16 tensor) drops
    # it with its exception still set, and every ctypes call below then failed with it: the
    # deleter never ran (the tensor leaked) and ctypes printed and cleared the exception, so the
    # consumer raised "SystemError: ... returned NULL without setting an exception". Take the
    # pending exception first (a ctypes callback cannot set it again on return: it is reported
    # as unraisable below, the consumer still raises SystemError, but nothing leaks).
    pending = None
    try:
        err_occurred()
    except BaseException as e:  # noqa: BLE001 - the consumer's exception, whatever it is
        pending = e
    base = cap >> 3
    name_ptr = Q[base + 2]  # name at +24
    name = string_at(name_ptr) if name_ptr else b""
    if name == b"dltensor":
        deleter_off = 56  # DLManagedTensor.deleter
    elif name == b"dltensor_versioned":
        deleter_off = 16  # DLManagedTensorVersioned.deleter
    else:
        return  # consumed ("used_dltensor...")
    mt = Q[base + 1]  # pointer at +16
    if mt:
        deleter = Q[((mt + deleter_off) >> 3) - 1]
        if deleter:
            Deleter(deleter)(mt)
    if pending is not None:
        raise pending  # printed by ctypes as "Exception ignored ...": the consumer's real error


try:
    # the library's own destructor: no Python code, so it also runs while a consumer's
    # exception is pending (the ctypes one above is the fallback on other libraries)
    _CAPSULE_DESTRUCTOR_ADDR = ctypes.cast(_capi.LIB.AnyFFIDLPackCapsuleDestructor, ctypes.c_void_p).value
except AttributeError:
    _CAPSULE_DESTRUCTOR_ADDR = ctypes.cast(_capsule_destructor, ctypes.c_void_p).value
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_capsule_destructor))  # lives as long as any capsule


# -- exporting a borrowed view ------------------------------------------------------------------
#
# A view (a callback's DLTensor* argument) has no ffi.Tensor to hand out. Its export is a managed
# tensor built here: a copy of the DLTensor with its own shape and strides, kept in
# _VIEW_EXPORTS until the consumer calls the deleter. The memory is the view's owner's, so the
# consumer's array is valid as long as the view is (during the callback), as with numpy().

_VIEW_EXPORTS: dict[int, Any] = {}


@_capi.DLManagedTensorDeleter
def _view_export_deleter(mt: int, exports=_VIEW_EXPORTS) -> None:
    exports.pop(mt, None)


_VIEW_EXPORT_DELETER_ADDR = ctypes.cast(_view_export_deleter, ctypes.c_void_p).value
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_view_export_deleter))  # a consumer may outlive the module


def _managed_tensor(dl_src, shape, strides, versioned: bool, read_only: bool, keep: Any = None) -> int:
    """A managed tensor (kept in _VIEW_EXPORTS until its deleter) with the data, device, dtype and
    byte offset of ``dl_src`` (a DLTensor) and its own copy of ``shape`` and ``strides``; ``keep``
    lives as long as it. Its address."""
    nd = len(shape)
    dims = (ctypes.c_int64 * (2 * nd or 1))(*shape, *strides)
    mt = _capi.DLManagedTensorVersioned() if versioned else _capi.DLManagedTensor()
    dl = mt.dl_tensor
    dl.data, dl.device, dl.ndim, dl.dtype, dl.byte_offset = dl_src.data, dl_src.device, nd, dl_src.dtype, dl_src.byte_offset
    dl.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
    dl.strides = ctypes.cast(ctypes.byref(dims, 8 * nd), ctypes.POINTER(ctypes.c_int64))
    mt.deleter = _VIEW_EXPORT_DELETER_ADDR
    if versioned:
        mt.version.major, mt.version.minor = 1, 0
        mt.flags = _DLPACK_FLAG_READ_ONLY if read_only else 0
    addr = ctypes.addressof(mt)
    _VIEW_EXPORTS[addr] = (mt, dims, keep)
    return addr


def _import_managed(addr: int, read_only: bool, require_alignment: int = 0, require_contiguous: bool = False) -> Tensor:
    """The owned ``ffi.Tensor`` over the versioned managed tensor ``_managed_tensor`` made at
    ``addr`` (the library takes it over; when it refuses it, the entry is dropped here)."""
    out = ctypes.c_void_p()
    try:
        check_call(_capi.TVMFFITensorFromDLPackVersioned(addr, require_alignment, int(require_contiguous), ctypes.byref(out)))
    except BaseException:
        _VIEW_EXPORTS.pop(addr, None)
        raise
    t = Tensor._from_owned(out.value)
    t._ro = read_only
    return t


def _export_view(t: Tensor, versioned: bool) -> object:
    """A capsule of a borrowed view's memory. The view's managed tensor (whose deleter is Python
    code) goes into an ``ffi.Tensor`` the view keeps, and the capsule is that tensor's export,
    whose deleter is the library's: a consumer that fails and releases the capsule with its own
    exception pending (``np.from_dlpack`` of a bfloat16 view) runs no Python code then (a
    Python deleter there was a SystemError)."""
    ro = _read_only(t)
    if ro and not versioned:
        raise BufferError("anyffi.Tensor.__dlpack__: read-only memory exports only as a versioned capsule (max_version >= (1, 0))")
    src = _capi.DLTensor.from_address(t._dlt())
    owner = _import_managed(_managed_tensor(src, t.shape, t.strides, True, ro, t._pin_owner()), ro)
    # the view keeps it (released when the view closes, or by the consumer, whichever is last)
    t._owners = [owner] if t._owners is None else t._owners + [owner]
    return owner.__dlpack__(max_version=(1, 0) if versioned else None)


class _RawArray:
    """An ``__array_interface__`` over raw memory, for numpy to read."""

    def __init__(self, ai: dict):
        self.__array_interface__ = ai


def _owned_copy_of_view(t: Tensor) -> Tensor:
    """An owned ``ffi.Tensor`` holding a compact copy of a borrowed view's data (CPU): what a
    container keeps must outlive the call, and the view's memory is the caller's."""
    import numpy as np

    if t.device.device_type != 1:
        raise TypeError(
            f"a callback's tensor argument on {t.device} is a view of the caller's memory, valid during "
            f"the call only; it cannot be kept in a container or result (make an owned copy first)"
        )
    d = t.dtype
    if d.bits % 8:
        raise TypeError(f"cannot keep a copy of a borrowed {d} tensor view (sub-byte type)")
    item = d.bits // 8 * d.lanes
    shape, strides = t.shape, t.strides
    src = np.asarray(_RawArray({
        "version": 3, "shape": shape + (item,), "typestr": "|u1", "data": (t.data_ptr, True),
        "strides": tuple(s * item for s in strides) + (1,),
    }))
    from .container import Shape
    from .runtime import api as _runtime_api

    empty = _runtime_api.get("empty")
    if empty is not None:
        # a tensor the library allocates (and frees: no Python deleter, which could not run
        # while a failing consumer's exception is pending, as np.from_dlpack(t, copy=True) of a
        # dtype numpy lacks)
        out_t = empty(Shape(shape), d, Device(1, 0))
        dst = np.asarray(_RawArray({
            "version": 3, "shape": shape + (item,), "typestr": "|u1", "data": (out_t.data_ptr, False),
            "strides": tuple(s * item for s in _compact_strides(shape)) + (1,),
        }))
        dst[...] = src
        return out_t
    buf = np.array(src, order="C", copy=True)
    copy = _capi.DLTensor()
    copy.data, copy.device, copy.dtype = buf.ctypes.data, _capi.DLDevice(1, 0), _capi.DLDataType(d.code, d.bits, d.lanes)
    # buf: until the deleter
    return _import_managed(_managed_tensor(copy, shape, _compact_strides(shape), True, False, buf), False)


_marshal.VIEW_TO_OWNED.append(_owned_copy_of_view)


def from_dlpack(x: Any, *, require_alignment: int = 0, require_contiguous: bool = False) -> Tensor:
    """An ``ffi.Tensor`` sharing the memory of ``x`` (a DLPack producer or a DLPack capsule)."""
    if isinstance(x, Tensor) and x._h:
        return x
    if type(x).__name__ == "PyCapsule":
        cap = x
    elif hasattr(x, "__dlpack__"):
        ml = ml_dtype_of(getattr(x, "dtype", None))
        if ml is not None and hasattr(x, "__array_interface__"):
            # bfloat16/float8 arrays of ml_dtypes: numpy cannot export them through DLPack
            return _from_array_interface(x, require_alignment, require_contiguous, ml)
        try:
            cap = x.__dlpack__(max_version=(1, 3))
        except TypeError:  # producers that predate the versioned protocol
            try:
                cap = x.__dlpack__()
            except BufferError:
                # numpy < 2.1 exports no read-only array: share its memory all the same, through
                # __array_interface__, as a tensor flagged read-only
                ai = getattr(x, "__array_interface__", None)
                if ai is None or not ai["data"][1]:
                    raise  # not refused for being read-only (dtype, byte order): numpy's error
                return _from_array_interface(x, require_alignment, require_contiguous)
    else:
        raise TypeError(f"from_dlpack: {type(x).__name__} is not a DLPack producer (no __dlpack__)")
    _require_capsule(cap, f"from_dlpack: {type(x).__name__}.__dlpack__()")
    name = _capsule_name(cap)
    ptr = _capsule_pointer(cap)
    out = ctypes.c_void_p()
    if name == _VERSIONED:
        read_only = _flagged_read_only(ptr)
        check_call(_capi.TVMFFITensorFromDLPackVersioned(ptr, require_alignment, int(require_contiguous), ctypes.byref(out)))
        _PyCapsule_SetName(cap, _USED_VERSIONED)
        t = Tensor._from_owned(out.value)
        # an ffi.Tensor has no read-only flag of its own: this object keeps it (read-only numpy
        # views, exports flagged, refused as an op's output)
        t._ro = read_only
        return t
    elif name == _LEGACY:
        check_call(_capi.TVMFFITensorFromDLPack(ptr, require_alignment, int(require_contiguous), ctypes.byref(out)))
        _PyCapsule_SetName(cap, _USED_LEGACY)
    else:
        raise ValueError(f"from_dlpack: the capsule is named {name!r} (already consumed?)")
    return Tensor._from_owned(out.value)


def _from_array_interface(x: Any, require_alignment: int, require_contiguous: bool, dt: Optional[dtype] = None) -> Tensor:
    """An owned ``ffi.Tensor`` sharing the memory of a CPU ``__array_interface__`` exporter
    (which keeps it alive); read-only when the exporter's memory is; of dtype ``dt`` if given
    (see :func:`_dltensor_of_array_interface`)."""
    keep: list = []
    src = _capi.DLTensor.from_address(_dltensor_of_array_interface(x, keep, dt))
    nd = src.ndim
    shape, strides = tuple(src.shape[:nd]), tuple(src.strides[:nd])
    read_only = bool(x.__array_interface__["data"][1])
    addr = _managed_tensor(src, shape, strides, True, read_only, x)
    return _import_managed(addr, read_only, require_alignment, require_contiguous)


def _capsule_dltensor(cap: object) -> int:
    """The address of the DLTensor inside an unconsumed DLPack capsule (0 when consumed)."""
    name = _capsule_name(cap)
    if name == _LEGACY:
        return _capsule_pointer(cap)
    if name == _VERSIONED:
        return _capsule_pointer(cap) + _VERSIONED_OFFSET
    return 0


def _kept_to_tensor(keep: list, ptr: int) -> Optional[Tensor]:
    """An owning Tensor for a ``DLTensor*`` result that points into one of the call's own
    arguments (`keep` of its frame), else None: a capsule is consumed (sharing the producer's
    memory); a DLTensor made from an ``__array_interface__`` (ml_dtypes arrays, read-only arrays
    on numpy < 2.1) is made again as an owned tensor of the exporter, which precedes it."""
    for j, c in enumerate(keep):
        if type(c) is _DLTensor:
            if j and ctypes.addressof(c) == ptr:
                src = keep[j - 1]
                return _from_array_interface(src, 0, False, ml_dtype_of(getattr(src, "dtype", None)))
        elif type(c).__name__ == "PyCapsule" and _capsule_dltensor(c) == ptr:
            return from_dlpack(c)
    return None


_marshal.KEPT_TO_TENSOR.append(_kept_to_tensor)


def _owned_prepare(v: Any) -> Optional[Tensor]:
    """Callback results that are DLPack producers become owned tensors."""
    if _is_dlpack_producer(type(v)):
        return from_dlpack(v)
    return None


_marshal.OWNED_PREPARE.append(_owned_prepare)
