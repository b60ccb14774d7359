"""ctypes mirrors of ``tvm/ffi/c_api.h`` and ``dlpack.h``: structs, constants and prototypes.

Each binding sits under its C prototype. Calls that can run Python callbacks or take long release
the GIL (CDLL); tiny leaf calls that never call back keep it (PyDLL), which is ~45 ns cheaper.
Handles are ``void*`` and travel as Python ints.
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, Structure, c_char_p, c_int, c_int32, c_int64, c_size_t, c_uint8, c_uint16
from ctypes import c_uint32, c_uint64, c_void_p
from typing import Any, Callable, Optional

from . import _lib

LIB, PYLIB, LIB_PATH = _lib.load()

# ---------------------------------------------------------------------------------------------
# Type indices (c_api.h: TVMFFITypeIndex)
# ---------------------------------------------------------------------------------------------
kNone = 0
kInt = 1
kBool = 2
kFloat = 3
kOpaquePtr = 4
kDataType = 5
kDevice = 6
kDLTensorPtr = 7
kRawStr = 8
kByteArrayPtr = 9
kObjectRValueRef = 10
kSmallStr = 11
kSmallBytes = 12
kStaticObjectBegin = 64
kObject = 64
kStr = 65
kBytes = 66
kError = 67
kFunction = 68
kShape = 69
kTensor = 70
kArray = 71
kMap = 72
kModule = 73
kOpaquePyObject = 74
kList = 75
kDict = 76
kBigInt = 78

# ---------------------------------------------------------------------------------------------
# Structs (c_api.h, dlpack.h); sizes are checked at the bottom of this file.
# ---------------------------------------------------------------------------------------------


class TVMFFIAny(Structure):
    _fields_ = [("type_index", c_int32), ("small_str_len", c_uint32), ("v_int64", c_int64)]


class TVMFFIByteArray(Structure):
    _fields_ = [("data", c_void_p), ("size", c_size_t)]


class TVMFFIVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32), ("patch", c_uint32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


DLManagedTensorDeleter = ctypes.CFUNCTYPE(None, c_void_p)


class DLManagedTensor(Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", c_void_p)]


class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", c_void_p),
        ("deleter", c_void_p),
        ("flags", c_uint64),
        ("dl_tensor", DLTensor),
    ]


# Offsets from an object header (c_api.h cells follow the 24-byte TVMFFIObject header).
OBJ_TYPE_INDEX = 8
OBJ_CELL = 24


class TVMFFITypeInfo(Structure):
    _fields_ = [
        ("type_index", c_int32),
        ("type_depth", c_int32),
        ("type_key", TVMFFIByteArray),
        ("type_ancestors", c_void_p),
        ("type_key_hash", c_uint64),
        ("num_fields", c_int32),
        ("num_methods", c_int32),
        ("fields", c_void_p),
        ("methods", c_void_p),
        ("metadata", c_void_p),
    ]


# offsets into a TVMFFITypeInfo for the raw reads of the hot paths (object.py)
TYPEINFO_KEY = TVMFFITypeInfo.type_key.offset  # TVMFFIByteArray
TYPEINFO_DEPTH = TVMFFITypeInfo.type_depth.offset
TYPEINFO_ANCESTORS = TVMFFITypeInfo.type_ancestors.offset
# DLTensor fields inside an ffi.Tensor (header + DLTensor)
DLT_DATA, DLT_DEVICE, DLT_NDIM, DLT_DTYPE, DLT_SHAPE, DLT_STRIDES, DLT_BYTE_OFFSET = 0, 8, 16, 20, 24, 32, 40

# ---------------------------------------------------------------------------------------------
# Prototypes
# ---------------------------------------------------------------------------------------------

SafeCall = ctypes.CFUNCTYPE(c_int, c_size_t, c_size_t, c_int32, c_size_t)
"""``int (*)(void* handle, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result)``, with the
pointers seen by Python as ints (``c_size_t`` never converts to None)."""

SelfDeleter = ctypes.CFUNCTYPE(None, c_size_t)
"""``void (*)(void* self)``."""


def _cfunc(name: str, argtypes: list, restype: Any, *, keep_gil: bool = False) -> Callable[[Callable], Any]:
    """Binds the C symbol ``name``, replacing the decorated typed stub by the ctypes function itself
    (no wrapper frame per call)."""

    def bind(stub: Callable) -> Any:
        f = getattr(PYLIB if keep_gil else LIB, name)
        f.argtypes = argtypes
        f.restype = restype
        f.__doc__ = stub.__doc__
        return f

    return bind


def recursion_error_of(e: BaseException) -> BaseException:
    """At the recursion limit, ctypes reports the RecursionError raised while it converts a
    call's arguments as ``ctypes.ArgumentError("argument i: RecursionError: ...")``: that error as
    the RecursionError it is; any other exception unchanged. (Before 3.10 ctypes can fail to
    format even the class and message there: ``"argument i: ???"``.)"""
    if type(e) is ctypes.ArgumentError and ("RecursionError" in str(e) or str(e).endswith(": ???")):
        return RecursionError(str(e))
    return e


# void TVMFFIGetVersion(TVMFFIVersion* out);
@_cfunc("TVMFFIGetVersion", [POINTER(TVMFFIVersion)], None, keep_gil=True)
def TVMFFIGetVersion(out: Any, /) -> None: ...


# int TVMFFIObjectIncRef(TVMFFIObjectHandle obj);
@_cfunc("TVMFFIObjectIncRef", [c_void_p], c_int, keep_gil=True)
def TVMFFIObjectIncRef(obj: int, /) -> int: ...


# int TVMFFIObjectDecRef(TVMFFIObjectHandle obj);
# Keeps the GIL: a deleter that runs here may call a Python deleter callback, which takes the GIL
# again on the same thread (re-entrant).
@_cfunc("TVMFFIObjectDecRef", [c_void_p], c_int, keep_gil=True)
def TVMFFIObjectDecRef(obj: int, /) -> int: ...


def native_entry(name: str) -> Optional[Any]:
    """The library's CPython entry point ``name`` (``AnyFFIPy*``, ``ffi/src/capi/python.rs``) when
    the package may use it: our library, CPython 3.9+ with the GIL, and not
    ``ANYFFI_NATIVE_CALL=0``; else None (the ctypes paths)."""
    import os
    import sys
    import sysconfig

    if os.environ.get("ANYFFI_NATIVE_CALL", "1") == "0":
        return None
    if sys.implementation.name != "cpython" or sys.version_info < (3, 9) or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return None
    return getattr(PYLIB, name, None)


def _native_refcounts() -> Optional[tuple]:
    """On our library, CPython builtins of the library's for the two functions above (the same
    arguments and return codes, without a ctypes call: ~250 ns less each, and every Python
    wrapper of an object pays a DecRef when it dies); None where ``native_entry`` says no.
    See ``AnyFFIPyRefcountInstall``."""
    install = native_entry("AnyFFIPyRefcountInstall")
    if install is None:
        return None
    api = ctypes.pythonapi

    class Table(ctypes.Structure):
        _fields_ = [
            ("size", c_size_t),
            ("PyLong_AsUnsignedLongLong", c_void_p),
            ("PyLong_FromLongLong", c_void_p),
            ("PyErr_Occurred", c_void_p),
            ("none", c_void_p),
        ]

    names = ("PyLong_AsUnsignedLongLong", "PyLong_FromLongLong", "PyErr_Occurred")
    table = Table(ctypes.sizeof(Table), *(ctypes.cast(getattr(api, n), c_void_p).value for n in names), id(None))
    install.argtypes = [c_void_p]
    install.restype = c_void_p
    defs = install(ctypes.addressof(table))
    if not defs:
        return None
    new = ctypes.PYFUNCTYPE(ctypes.py_object, c_void_p, ctypes.py_object, ctypes.py_object)(("PyCFunction_NewEx", api))
    size = 4 * ctypes.sizeof(c_void_p)  # a PyMethodDef: name, function, flags (padded), doc
    inc, dec = new(defs, None, None), new(defs + size, None, None)
    # the builtins point at the library's method table, which lives for the process
    return inc, dec


_refcounts = _native_refcounts()
if _refcounts is not None:
    TVMFFIObjectIncRef, TVMFFIObjectDecRef = _refcounts  # noqa: F811


# int TVMFFIObjectCreateOpaque(void* handle, int32_t type_index, void (*deleter)(void*),
#                              TVMFFIObjectHandle* out);
@_cfunc("TVMFFIObjectCreateOpaque", [c_void_p, c_int32, SelfDeleter, POINTER(c_void_p)], c_int, keep_gil=True)
def TVMFFIObjectCreateOpaque(handle: int, type_index: int, deleter: Any, out: Any, /) -> int: ...


# int TVMFFITypeKeyToIndex(const TVMFFIByteArray* type_key, int32_t* out_tindex);
@_cfunc("TVMFFITypeKeyToIndex", [POINTER(TVMFFIByteArray), POINTER(c_int32)], c_int, keep_gil=True)
def TVMFFITypeKeyToIndex(type_key: Any, out: Any, /) -> int: ...


# const TVMFFITypeInfo* TVMFFIGetTypeInfo(int32_t type_index);
@_cfunc("TVMFFIGetTypeInfo", [c_int32], c_void_p, keep_gil=True)
def TVMFFIGetTypeInfo(type_index: int, /) -> int | None: ...


# int TVMFFIFunctionCreate(void* self, TVMFFISafeCallType safe_call, void (*deleter)(void* self),
#                          TVMFFIObjectHandle* out);
@_cfunc("TVMFFIFunctionCreate", [c_void_p, SafeCall, SelfDeleter, POINTER(c_void_p)], c_int, keep_gil=True)
def TVMFFIFunctionCreate(self_: int, safe_call: Any, deleter: Any, out: Any, /) -> int: ...


# int AnyFFIFunctionCreateChecked(...) (same prototype; not part of the TVM FFI ABI): the library
# never reads the rc of a ctypes thunk, which is garbage when ctypes cannot enter the callable.
try:
    AnyFFIFunctionCreateChecked = PYLIB.AnyFFIFunctionCreateChecked
    AnyFFIFunctionCreateChecked.argtypes = [c_void_p, SafeCall, SelfDeleter, POINTER(c_void_p)]
    AnyFFIFunctionCreateChecked.restype = c_int
except AttributeError:  # another library (the official one): the unchecked ABI function
    AnyFFIFunctionCreateChecked = TVMFFIFunctionCreate


# int AnyFFITensorIsReadOnly(TVMFFIObjectHandle tensor) (not part of the TVM FFI ABI): 1 when the
# tensor's memory was imported read-only (DLPack's READ_ONLY flag), 0 if not, -1 on error. None on
# another library (the official one keeps no such record).
try:
    AnyFFITensorIsReadOnly = PYLIB.AnyFFITensorIsReadOnly
    AnyFFITensorIsReadOnly.argtypes = [c_void_p]
    AnyFFITensorIsReadOnly.restype = c_int
except AttributeError:
    AnyFFITensorIsReadOnly = None


# int TVMFFIFunctionGetGlobal(const TVMFFIByteArray* name, TVMFFIObjectHandle* out);
@_cfunc("TVMFFIFunctionGetGlobal", [POINTER(TVMFFIByteArray), POINTER(c_void_p)], c_int, keep_gil=True)
def TVMFFIFunctionGetGlobal(name: Any, out: Any, /) -> int: ...


# int TVMFFIFunctionSetGlobal(const TVMFFIByteArray* name, TVMFFIObjectHandle f, int allow_override);
@_cfunc("TVMFFIFunctionSetGlobal", [POINTER(TVMFFIByteArray), c_void_p, c_int], c_int, keep_gil=True)
def TVMFFIFunctionSetGlobal(name: Any, f: int, allow_override: int, /) -> int: ...


# int TVMFFIFunctionCall(TVMFFIObjectHandle func, TVMFFIAny* args, int32_t num_args, TVMFFIAny* result);
# The hot path: bound WITHOUT argtypes and called with pre-built byref() objects and an int count,
# which ctypes passes without allocating (see function.py). Releases the GIL.
TVMFFIFunctionCall = LIB.TVMFFIFunctionCall
TVMFFIFunctionCall.restype = c_int
# The same, keeping the GIL (Function.release_gil = False).
TVMFFIFunctionCallKeepGIL = PYLIB.TVMFFIFunctionCall
TVMFFIFunctionCallKeepGIL.restype = c_int


# int TVMFFIAnyViewToOwnedAny(const TVMFFIAny* any_view, TVMFFIAny* out);
@_cfunc("TVMFFIAnyViewToOwnedAny", [c_void_p, c_void_p], c_int, keep_gil=True)
def TVMFFIAnyViewToOwnedAny(view: int, out: int, /) -> int: ...


# void TVMFFIErrorMoveFromRaised(TVMFFIObjectHandle* result);
@_cfunc("TVMFFIErrorMoveFromRaised", [POINTER(c_void_p)], None, keep_gil=True)
def TVMFFIErrorMoveFromRaised(result: Any, /) -> None: ...


# void TVMFFIErrorSetRaised(TVMFFIObjectHandle error);
@_cfunc("TVMFFIErrorSetRaised", [c_void_p], None, keep_gil=True)
def TVMFFIErrorSetRaised(error: int, /) -> None: ...


# int TVMFFIErrorCreate(const TVMFFIByteArray* kind, const TVMFFIByteArray* message,
#                       const TVMFFIByteArray* backtrace, TVMFFIObjectHandle* out);
@_cfunc(
    "TVMFFIErrorCreate",
    [POINTER(TVMFFIByteArray), POINTER(TVMFFIByteArray), POINTER(TVMFFIByteArray), POINTER(c_void_p)],
    c_int,
    keep_gil=True,
)
def TVMFFIErrorCreate(kind: Any, message: Any, backtrace: Any, out: Any, /) -> int: ...


# int TVMFFITensorFromDLPack(DLManagedTensor* from, int32_t require_alignment,
#                            int32_t require_contiguous, TVMFFIObjectHandle* out);
@_cfunc("TVMFFITensorFromDLPack", [c_void_p, c_int32, c_int32, POINTER(c_void_p)], c_int, keep_gil=True)
def TVMFFITensorFromDLPack(from_: int, align: int, contiguous: int, out: Any, /) -> int: ...


# int TVMFFITensorFromDLPackVersioned(DLManagedTensorVersioned* from, int32_t require_alignment,
#                                     int32_t require_contiguous, TVMFFIObjectHandle* out);
@_cfunc("TVMFFITensorFromDLPackVersioned", [c_void_p, c_int32, c_int32, POINTER(c_void_p)], c_int, keep_gil=True)
def TVMFFITensorFromDLPackVersioned(from_: int, align: int, contiguous: int, out: Any, /) -> int: ...


# int TVMFFITensorToDLPack(TVMFFIObjectHandle from, DLManagedTensor** out);
@_cfunc("TVMFFITensorToDLPack", [c_void_p, POINTER(c_void_p)], c_int, keep_gil=True)
def TVMFFITensorToDLPack(tensor: int, out: Any, /) -> int: ...


# int TVMFFITensorToDLPackVersioned(TVMFFIObjectHandle from, DLManagedTensorVersioned** out);
@_cfunc("TVMFFITensorToDLPackVersioned", [c_void_p, POINTER(c_void_p)], c_int, keep_gil=True)
def TVMFFITensorToDLPackVersioned(tensor: int, out: Any, /) -> int: ...


# int TVMFFIStringFromByteArray(const TVMFFIByteArray* input, TVMFFIAny* out);
@_cfunc("TVMFFIStringFromByteArray", [POINTER(TVMFFIByteArray), c_void_p], c_int, keep_gil=True)
def TVMFFIStringFromByteArray(input_: Any, out: int, /) -> int: ...


# int TVMFFIBytesFromByteArray(const TVMFFIByteArray* input, TVMFFIAny* out);
@_cfunc("TVMFFIBytesFromByteArray", [POINTER(TVMFFIByteArray), c_void_p], c_int, keep_gil=True)
def TVMFFIBytesFromByteArray(input_: Any, out: int, /) -> int: ...


# int TVMFFIBigIntFromByteArray(const TVMFFIByteArray* input, TVMFFIAny* out);
@_cfunc("TVMFFIBigIntFromByteArray", [POINTER(TVMFFIByteArray), c_void_p], c_int, keep_gil=True)
def TVMFFIBigIntFromByteArray(input_: Any, out: int, /) -> int: ...


# int TVMFFIDataTypeFromString(const TVMFFIByteArray* str, DLDataType* out);
@_cfunc("TVMFFIDataTypeFromString", [POINTER(TVMFFIByteArray), POINTER(DLDataType)], c_int, keep_gil=True)
def TVMFFIDataTypeFromString(s: Any, out: Any, /) -> int: ...


# int TVMFFIDataTypeToString(const DLDataType* dtype, TVMFFIAny* out);
@_cfunc("TVMFFIDataTypeToString", [POINTER(DLDataType), c_void_p], c_int, keep_gil=True)
def TVMFFIDataTypeToString(dtype: Any, out: int, /) -> int: ...


def byte_array(b: bytes) -> TVMFFIByteArray:
    """A ``TVMFFIByteArray`` over ``b`` (keep ``b`` alive while it is used)."""
    return TVMFFIByteArray(ctypes.cast(c_char_p(b), c_void_p).value, len(b))


def version() -> tuple[int, int, int]:
    """The C ABI version the library reports."""
    v = TVMFFIVersion()
    TVMFFIGetVersion(ctypes.byref(v))
    return (v.major, v.minor, v.patch)


# Layout checks (c_api.h / dlpack.h sizes); a mismatch would corrupt every call.
assert ctypes.sizeof(TVMFFIAny) == 16
assert ctypes.sizeof(TVMFFIByteArray) == 16
assert ctypes.sizeof(DLTensor) == 48
assert ctypes.sizeof(DLManagedTensor) == 64
assert ctypes.sizeof(DLManagedTensorVersioned) == 80
assert DLManagedTensorVersioned.dl_tensor.offset == 32
