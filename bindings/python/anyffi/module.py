"""``anyffi.load_module(path)``: kernel libraries built against the TVM FFI headers.

A module exports functions as ``__tvm_ffi_<name>`` symbols; the library loads it
(``ffi.ModuleLoadFromFile``) and looks them up (``ffi.ModuleGetFunction``). Modules of other
kinds (C++ subclasses of ``ModuleObj``, the sub-modules a library embeds) answer the same
methods through the ``ffi.Module*`` globals.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

from . import _capi, _mem
from .container import Array
from .function import Function, ffi_api
from .object import Object, register_object


@register_object("ffi.Module", _capi.kModule)
class Module(Object):
    """A loaded module. ``m.get_function("add_one")``, ``m["add_one"]`` or ``m.add_one``."""

    __slots__ = ("_funcs",)

    @classmethod
    def _from_owned(cls, h: int) -> "Module":
        o = object.__new__(cls)
        o._h = h
        o._funcs = {}
        return o

    @property
    def kind(self) -> str:
        return ffi_api.require("ModuleGetKind", "module kind")(self)

    def get_function(self, name: str, query_imports: bool = False) -> Optional[Function]:
        """The exported function ``name``, or None."""
        f = self._funcs.get(name)
        if f is None:
            f = ffi_api.require("ModuleGetFunction", "module function lookup")(self, name, query_imports)
            if f is not None:
                self._funcs[name] = f
        return f

    def implements_function(self, name: str, query_imports: bool = False) -> bool:
        return bool(ffi_api.require("ModuleImplementsFunction", "module queries")(self, name, query_imports))

    def __contains__(self, name: str) -> bool:
        return self.get_function(name) is not None

    def __getitem__(self, name: str) -> Function:
        f = self.get_function(name)
        if f is None:
            raise KeyError(f"module has no function `{name}`")
        return f

    def __getattr__(self, name: str) -> Function:
        if name.startswith("_"):
            raise AttributeError(name)
        f = self.get_function(name)
        if f is None:
            raise AttributeError(f"module has no function `{name}`")
        return f

    def __call__(self, *args: Any) -> Any:
        """Calls the module's entry function, `main`."""
        return self["main"](*args)

    def import_module(self, other: "Module") -> None:
        ffi_api.require("ModuleImportModule", "module imports")(self, other)
        self._funcs.clear()

    def clear_imports(self) -> None:
        ffi_api.require("ModuleClearImports", "module imports")(self)
        self._funcs.clear()

    @property
    def imports(self) -> list["Module"]:
        """The imported modules (the ``imports_`` field, an ``ffi.Array`` at offset 24)."""
        arr = _mem.Q[_mem.qi(self.handle + 24)]
        _capi.TVMFFIObjectIncRef(arr)
        return list(Array._from_owned(arr))

    def get_function_doc(self, name: str, query_imports: bool = False) -> Optional[str]:
        return ffi_api.require("ModuleGetFunctionDoc", "module docs")(self, name, query_imports)

    def get_function_metadata(self, name: str, query_imports: bool = False) -> Optional[dict[str, Any]]:
        """The metadata a module exports for ``name`` (parsed JSON), or None."""
        text = ffi_api.require("ModuleGetFunctionMetadata", "module metadata")(self, name, query_imports)
        return None if text is None else json.loads(text)

    def inspect_source(self, fmt: str = "") -> str:
        return ffi_api.require("ModuleInspectSource", "module source")(self, fmt)

    def get_write_formats(self) -> list[str]:
        return list(ffi_api.require("ModuleGetWriteFormats", "module formats")(self))

    def write_to_file(self, file_name: str, fmt: str = "") -> None:
        ffi_api.require("ModuleWriteToFile", "writing modules")(self, os.fspath(file_name), fmt)

    def get_property_mask(self) -> int:
        """Bits: 1 binary-serializable, 2 runnable, 4 compilation-exportable."""
        return ffi_api.require("ModuleGetPropertyMask", "module properties")(self)

    def is_binary_serializable(self) -> bool:
        return bool(self.get_property_mask() & 1)

    def is_runnable(self) -> bool:
        return bool(self.get_property_mask() & 2)

    def is_compilation_exportable(self) -> bool:
        return bool(self.get_property_mask() & 4)


def load_module(path: str, keep_module_alive: bool = True) -> Module:
    """Loads a shared library built against the TVM FFI headers as a module.

    With ``keep_module_alive`` (the default) the module also joins the library's process-lifetime
    set (``ffi.ModuleGlobalsAdd``, when present), so that functions and objects it made stay valid
    after the Python ``Module`` is collected.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"load_module: no such file: {path}")
    m = ffi_api.require("ModuleLoadFromFile", "loading modules")(os.path.abspath(path))
    if keep_module_alive:
        add = ffi_api.get("ModuleGlobalsAdd")
        if add is not None:
            add(m)
    return m
