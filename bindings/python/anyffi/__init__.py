"""anyffi: Python bindings of the TVM FFI stable C ABI (``libtvm_ffi.so``), in pure Python (ctypes).

Works with our Rust library and with the official apache-tvm-ffi one alike (set ``ANYFFI_LIBRARY``
to choose). Borrowed in, owned out: arguments are views valid for the call; results are owned and
released when their Python object is collected (or ``close()``d).
"""

from __future__ import annotations

from . import _capi
from .container import Array, Dict, List, Map, Shape
from .device import Device, device
from .dtype import dtype
from .errors import Error, register_error
from .function import (
    Function,
    get_global_func,
    list_global_func_names,
    register_global_func,
    remove_global_func,
)
from .module import Module, load_module
from .object import Object, register_object
from .tensor import Tensor, from_dlpack

from . import function as _function  # noqa: E402

_function._install_native_call()  # after tensor.py: it tells function.py numpy's ndarray

from . import reflection  # noqa: E402  (reflected fields and methods on object classes)
from . import ops, runtime  # noqa: E402  (they use everything above)

__version__ = "0.1.0"

library_path: str = _capi.LIB_PATH
"""The ``libtvm_ffi.so`` this process loaded."""

abi_version: tuple[int, int, int] = _capi.version()
"""The C ABI version the loaded library reports (0.1.16 for apache-tvm-ffi 0.1.15.post2)."""

__all__ = [
    "Array",
    "Device",
    "Dict",
    "Error",
    "Function",
    "List",
    "Map",
    "Module",
    "Object",
    "Shape",
    "Tensor",
    "abi_version",
    "device",
    "dtype",
    "from_dlpack",
    "get_global_func",
    "library_path",
    "list_global_func_names",
    "load_module",
    "ops",
    "register_error",
    "register_global_func",
    "register_object",
    "remove_global_func",
    "runtime",
    "__version__",
]
