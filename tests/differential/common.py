"""Shared by the runner and the cases: anyffi loaded on the library named by ANYFFI_LIBRARY
(set by driver.py) plus the official libtvm_ffi_testing.so (its test types and functions), and ser() /
ser_exc(), which turn an outcome into JSON that compares equal across the two processes."""
import ctypes
import os
import re
import struct
import sys

from paths import ROOT, TESTING_LIB

sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
sys.setrecursionlimit(20000)
import anyffi  # noqa: E402
from anyffi import errors as _errors  # noqa: E402

ctypes.CDLL(TESTING_LIB, mode=ctypes.RTLD_GLOBAL)

_FN = {}


def G(name):
    """The global function `name` (cached)."""
    f = _FN.get(name)
    if f is None:
        f = _FN[name] = anyffi.get_global_func(name)
    return f


_ADDR = re.compile(r"0x[0-9a-fA-F]{6,}")


def mask(s):
    return _ADDR.sub("0xADDR", s)


def safe_repr(o):
    try:
        return mask(G("ffi.ReprPrint")(o))
    except BaseException as e:  # noqa: BLE001
        return "<ReprPrint failed: %s: %s>" % (type(e).__name__, mask(str(e)))


def ser(v, depth=0):
    """v as JSON: floats with their exact bits, containers element by element, other objects as
    type key + ReprPrint, addresses masked."""
    if depth > 200:
        return ["too-deep"]
    t, d = type(v), depth + 1
    if v is None:
        return None
    if t is bool:
        return ["bool", v]
    if t is int:
        return ["int", str(v)]
    if t is float:
        return ["float", repr(v), struct.pack("<d", v).hex()]
    if t is str:
        return ["str", v]
    if t is bytes:
        return ["bytes", v.hex()]
    if isinstance(v, anyffi.dtype):
        return ["dtype", str(v)]
    if isinstance(v, anyffi.Device):
        return ["Device", str(v)]
    if isinstance(v, ctypes.c_void_p):
        return ["ptr", "null" if not v.value else "nonnull"]
    if t in (tuple, list):
        return ["py" + t.__name__, [ser(x, d) for x in v]]
    if t is dict:
        return ["pydict", [[ser(k, d), ser(x, d)] for k, x in v.items()]]
    if isinstance(v, anyffi.Object):
        if not v._h:
            return ["closed"]
        if isinstance(v, anyffi.Shape):
            return ["Shape", list(v)]
        if isinstance(v, (anyffi.Array, anyffi.List)):
            return [v.type_key, [ser(x, d) for x in v]]
        if isinstance(v, (anyffi.Map, anyffi.Dict)):
            return [v.type_key, [[ser(k, d), ser(x, d)] for k, x in v._walk()]]
        if isinstance(v, anyffi.Function):
            return ["Function"]
        if isinstance(v, anyffi.Tensor):
            return ["Tensor", list(v.shape), str(v.dtype), str(v.device)]
        return ["obj", v.type_key, safe_repr(v)]
    if isinstance(v, anyffi.Tensor):
        return ["TensorView", list(v.shape), str(v.dtype)]
    return ["py", t.__name__, mask(repr(v))]


def ser_exc(e):
    """An exception as ["exc", Python class, FFI error kind, message]."""
    kind = getattr(e, "kind", None) or _errors.kind_of(e)
    return ["exc", type(e).__name__, kind, mask(str(e))]
