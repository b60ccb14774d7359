"""Diagnostic mode only (run.sh --stub-missing): lets `import tvm_ffi` get past a library that
lacks some of what the package looks up at import, so the rest of the suite can say what else
fails. Never part of a pass/fail verdict.

Before the package is imported, the library under test is loaded with ctypes and, for every
`ffi.*` global function the official library registers (golden.json "surface") that it lacks, a stub
function is registered that raises RuntimeError("... not implemented by the library under
test"); `ffi.*` type keys it lacks whose only ancestor is ffi.Object are allocated as empty types.
`testing.*` names are left alone: the testing library registers them after this, and a duplicate
would terminate the process.
`ffi._RegisterFFIInit` is never stubbed: the testing library calls it during its static
initialisation, where an exception would terminate the process.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

NEVER_STUB = {"ffi._RegisterFFIInit"}

_KEEP_ALIVE: list = []


class _ByteArray(ctypes.Structure):
    _fields_ = [("data", ctypes.c_char_p), ("size", ctypes.c_size_t)]


def _bytes(name: str) -> _ByteArray:
    raw = name.encode()
    ba = _ByteArray(raw, len(raw))
    _KEEP_ALIVE.append(raw)
    return ba


SAFE_CALL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p)


def install(lib_path: str, golden_path: Path) -> dict:
    """Registers the stubs; returns {"functions": [...], "types": [...]} of what was stubbed."""
    surface = json.loads(golden_path.read_text())["surface"]
    lib = ctypes.CDLL(lib_path, mode=ctypes.RTLD_GLOBAL)
    lib.TVMFFIFunctionGetGlobal.argtypes = [ctypes.POINTER(_ByteArray), ctypes.POINTER(ctypes.c_void_p)]
    lib.TVMFFIFunctionCreate.argtypes = [ctypes.c_void_p, SAFE_CALL, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.TVMFFIFunctionSetGlobal.argtypes = [ctypes.POINTER(_ByteArray), ctypes.c_void_p, ctypes.c_int]
    lib.TVMFFIObjectDecRef.argtypes = [ctypes.c_void_p]
    lib.TVMFFIErrorSetRaisedFromCStr.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    lib.TVMFFIErrorSetRaisedFromCStr.restype = None
    lib.TVMFFITypeKeyToIndex.argtypes = [ctypes.POINTER(_ByteArray), ctypes.POINTER(ctypes.c_int32)]
    lib.TVMFFITypeGetOrAllocIndex.argtypes = [ctypes.POINTER(_ByteArray)] + [ctypes.c_int32] * 5
    lib.TVMFFITypeGetOrAllocIndex.restype = ctypes.c_int32
    lib.TVMFFIErrorMoveFromRaised.argtypes = [ctypes.POINTER(ctypes.c_void_p)]

    def clear_raised() -> None:
        err = ctypes.c_void_p()
        lib.TVMFFIErrorMoveFromRaised(ctypes.byref(err))
        if err.value:
            lib.TVMFFIObjectDecRef(err)

    stubbed: dict = {"functions": [], "types": []}
    # only ffi.*: testing.* functions and types are registered later by the testing library
    for name in surface["global_functions"]:
        if name in NEVER_STUB or not name.startswith("ffi."):
            continue
        out = ctypes.c_void_p()
        if lib.TVMFFIFunctionGetGlobal(ctypes.byref(_bytes(name)), ctypes.byref(out)) != 0:
            clear_raised()
            continue
        if out.value:
            lib.TVMFFIObjectDecRef(out)
            continue
        message = f"diagnostic stub: {name} is not implemented by the library under test".encode()

        def stub(handle, args, num_args, result, message=message):  # noqa: ARG001
            lib.TVMFFIErrorSetRaisedFromCStr(b"RuntimeError", message)
            return -1

        cb = SAFE_CALL(stub)
        _KEEP_ALIVE.extend([cb, message])
        f = ctypes.c_void_p()
        if lib.TVMFFIFunctionCreate(None, cb, None, ctypes.byref(f)) == 0:
            lib.TVMFFIFunctionSetGlobal(ctypes.byref(_bytes(name)), f, 0)
            lib.TVMFFIObjectDecRef(f)
            stubbed["functions"].append(name)

    for key, info in surface["types"].items():
        if not key.startswith("ffi."):
            continue
        index = ctypes.c_int32(-1)
        if lib.TVMFFITypeKeyToIndex(ctypes.byref(_bytes(key)), ctypes.byref(index)) == 0:
            continue
        clear_raised()
        if info["ancestors"] == ["ffi.Object"]:
            lib.TVMFFITypeGetOrAllocIndex(ctypes.byref(_bytes(key)), -1, 1, 0, 1, 64)
            stubbed["types"].append(key)
    return stubbed
