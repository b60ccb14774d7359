"""Reflected fields and methods: what the official package gives objects of every type.

A type whose ``TVMFFITypeInfo`` lists fields or methods (its own, or those of ancestors that have
no registered class) gets them on its Python class: fields as properties (with a setter when
the field is writable), member methods bound to the object, static methods as plain functions.
Objects of a type with no class of its own get a subclass of the nearest registered ancestor's
class named after the type (``testing.TestUnregisteredObject``), made once per type; classes
given with :func:`register_object` get the members they do not define themselves. ``repr`` of an
object without a ``__repr__`` of its own is ``ffi.ReprPrint``'s text, as in the official package
(``testing.TestIntPair(a=1, b=2)``).
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

from . import _capi, _marshal, _mem
from . import object as _object
from .errors import check_call
from .function import Function, get_global_func
from .object import Object, type_info

_FIELD_WRITABLE = 1 << 0
_STATIC_METHOD = 1 << 2
_SETTER_IS_FUNCTION = 1 << 11


class _ByteArray(_capi.TVMFFIByteArray):
    """A TVMFFIByteArray that reads as text."""

    def text(self) -> str:
        return _mem.read_str(self.data, self.size) if self.size else ""


class _FieldInfo(ctypes.Structure):
    _fields_ = [
        ("name", _ByteArray),
        ("doc", _ByteArray),
        ("metadata", _ByteArray),
        ("flags", ctypes.c_int64),
        ("size", ctypes.c_int64),
        ("alignment", ctypes.c_int64),
        ("offset", ctypes.c_int64),
        ("getter", ctypes.c_void_p),
        ("setter", ctypes.c_void_p),
        ("default_value_or_factory", _capi.TVMFFIAny),
        ("field_static_type_index", ctypes.c_int32),
    ]


class _MethodInfo(ctypes.Structure):
    _fields_ = [
        ("name", _ByteArray),
        ("doc", _ByteArray),
        ("metadata", _ByteArray),
        ("flags", ctypes.c_int64),
        ("method", _capi.TVMFFIAny),
    ]


_TypeInfo = _capi.TVMFFITypeInfo


# int (*TVMFFIFieldGetter)(void* field, TVMFFIAny* result)
_Getter = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
# int (*TVMFFIFieldSetter)(void* field, const TVMFFIAny* value)
_Setter = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def _owned(value: Any) -> Any:
    """``value`` as a field keeps it: DLPack producers (numpy arrays, ...) and tensor views become
    owned ``ffi.Tensor`` objects sharing their memory, as a container's elements do."""
    return _marshal.owned_elements((value,))[0]


def _field_property(cls_name: str, f: _FieldInfo) -> property:
    name, offset, flags = f.name.text(), f.offset, f.flags
    getter = _Getter(f.getter)
    from_owned = _marshal.from_owned

    def fget(self):
        h = self._h
        if not h:
            raise ValueError(f"cannot read `{name}` of a closed {type(self).__name__}")
        out = _capi.TVMFFIAny()  # zeroed: None, in case the getter writes nothing
        check_call(getter(h + offset, ctypes.addressof(out)))
        return from_owned(_mem.qi(ctypes.addressof(out)))

    def fset(self, value):
        # every Python version says the same (3.11+ would say "property ... has no setter")
        raise AttributeError(f"`{name}` of {type(self).__name__} is a read-only field")

    if flags & _FIELD_WRITABLE and f.setter:
        if flags & _SETTER_IS_FUNCTION:
            setter_fn = Function._from_borrowed(f.setter)

            def fset(self, value):
                h = self._h
                if not h:
                    raise ValueError(f"cannot set `{name}` of a closed {type(self).__name__}")
                # the field keeps the value: a DLPack producer must become an owned ffi.Tensor,
                # not the borrowed DLTensor* view an argument gets (it would dangle)
                setter_fn(ctypes.c_void_p(h + offset), _owned(value))

        else:
            setter = _Setter(f.setter)

            def fset(self, value):
                h = self._h
                if not h:
                    raise ValueError(f"cannot set `{name}` of a closed {type(self).__name__}")
                value = _owned(value)  # kept alive by this frame until the setter returns
                fr = _marshal.new_frame()
                try:
                    _marshal.convert_args((value,), fr)
                    rc = setter(h + offset, fr.cell_addr(2))
                finally:
                    fr.release()
                check_call(rc)

    doc = f.doc.text() or f"field `{name}` of {cls_name}"
    return property(fget, fset, None, doc)


def _method(m: _MethodInfo):
    """The method's function (static) or a descriptor binding it to the object (member)."""
    if m.method.type_index != _capi.kFunction:
        return None
    fn = Function._from_borrowed(m.method.v_int64)
    if m.flags & _STATIC_METHOD:
        return staticmethod(fn)
    return _BoundOnAccess(fn, m.name.text(), m.doc.text())


class _BoundOnAccess:
    """A member method: the function with the object as its first argument."""

    def __init__(self, fn: Function, name: str, doc: str) -> None:
        self.fn, self.name, self.__doc__ = fn, name, doc or None

    def __get__(self, obj: Any, owner: Any = None):
        if obj is None:
            return self.fn
        return functools.partial(self.fn, obj)


class _AttrColumn(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_int32), ("begin_index", ctypes.c_int32)]


_GetTypeAttrColumn = _capi.LIB.TVMFFIGetTypeAttrColumn
_GetTypeAttrColumn.argtypes = [ctypes.POINTER(_capi.TVMFFIByteArray)]
_GetTypeAttrColumn.restype = ctypes.POINTER(_AttrColumn)


def _type_attr_function(type_index: int, attr: str):
    """The Function stored for ``type_index`` in the type attribute column ``attr``, or None."""
    name = attr.encode()
    col = _GetTypeAttrColumn(ctypes.byref(_capi.byte_array(name)))
    if not col:
        return None
    c = col.contents
    j = type_index - c.begin_index
    if not c.data or not 0 <= j < c.size:
        return None
    cell = _capi.TVMFFIAny.from_address(c.data + 16 * j)
    if cell.type_index != _capi.kFunction:
        return None
    return Function._from_borrowed(cell.v_int64)


def _constructor(type_index: int, infos: list["_TypeInfo"]):
    """``__init__`` from the type's ``__ffi_init__`` (a static method or a type attribute), or
    None. Keyword arguments travel after the KWARGS sentinel, as the official package sends them."""
    init = None
    for m in _iter_methods(infos[:1]):
        if m.name.text() == "__ffi_init__" and m.method.type_index == _capi.kFunction:
            init = Function._from_borrowed(m.method.v_int64)
    if init is None:
        init = _type_attr_function(type_index, "__ffi_init__")
    if init is None:
        return None

    def __init__(self, *args, **kwargs):
        if kwargs:
            args = args + (_kwargs_marker(),) + tuple(x for kv in kwargs.items() for x in kv)
        made = init(*args)
        if not isinstance(made, Object) or not made._h:
            raise TypeError(f"{type(self).__name__}: __ffi_init__ returned {type(made).__name__}, not an object")
        self._h, made._h = made._h, 0  # adopt its reference

    return __init__


def _kwargs_marker():
    return get_global_func("ffi.GetKwargsObject")()


def _iter_methods(infos):
    for info in infos:
        for j in range(info.num_methods):
            yield _MethodInfo.from_address(info.methods + j * ctypes.sizeof(_MethodInfo))


def _infos(type_index: int, stop: int) -> list[_TypeInfo]:
    """The type infos of ``type_index`` and its ancestors below index ``stop`` (the nearest one
    with a class of its own), nearest first."""
    out = []
    for ti in [type_index] + _object._ancestors(type_index):
        if ti == stop:
            break
        out.append(_TypeInfo.from_address(type_info(ti)))
    return out


def _members(cls_name: str, infos: list[_TypeInfo]) -> dict[str, Any]:
    """Properties and methods of ``infos`` (nearest first: a subclass's member wins)."""
    out: dict[str, Any] = {}
    for info in infos:
        for j in range(info.num_fields):
            f = _FieldInfo.from_address(info.fields + j * ctypes.sizeof(_FieldInfo))
            name = f.name.text()
            if name not in out and f.getter:  # every field has a getter; never call NULL
                out[name] = _field_property(cls_name, f)
        for m in _iter_methods([info]):
            name = m.name.text()
            if name in out or name.startswith("__"):  # __ffi_init__, __ffi_repr__, ...: hooks
                continue
            meth = _method(m)
            if meth is not None:
                out[name] = meth
    return out


def _has_members(info: _TypeInfo) -> bool:
    return info.num_fields > 0 or info.num_methods > 0


def class_for(type_index: int, base: type, base_index: int) -> type:
    """The class for objects of ``type_index``, given the nearest registered class ``base``
    (registered at ``base_index``): ``base`` itself when nothing reflected lies between."""
    infos = _infos(type_index, base_index)
    if not any(_has_members(i) for i in infos):
        return base
    key = _object.type_key_of(type_index)
    module, _, name = key.rpartition(".")
    # As the official package's fallback classes: the class of an unregistered parent type is
    # the base, so objects of a derived type are instances of their parent type's class too.
    parent = _object._ancestors(type_index)[0]
    parent_cls = base if parent == base_index else _object.class_of(parent)
    own = infos[:1] if parent_cls is not base else infos
    members = {k: v for k, v in _members(name, own).items() if not hasattr(base, k)}
    init = _constructor(type_index, infos)
    if init is not None:
        members["__init__"] = init
    cls = type(name, (parent_cls,), {"__slots__": (), "__module__": module or "anyffi", **members})
    cls._type_key = key
    return cls


def add_members(cls: type, type_index: int) -> None:
    """Gives a class made with :func:`register_object` the reflected members of its type (and of
    unregistered ancestors) that it does not define or inherit."""
    base = next((c for c in cls.__mro__[1:] if getattr(c, "_type_key", None)), Object)
    base_index = _object.type_key_to_index(getattr(base, "_type_key", "ffi.Object")) or _capi.kObject
    infos = _infos(type_index, base_index)
    for k, v in _members(cls.__name__, infos).items():
        if not hasattr(cls, k):
            setattr(cls, k, v)
    if "__init__" not in cls.__dict__ and infos:
        init = _constructor(type_index, infos)
        if init is not None:
            cls.__init__ = init


def _repr_print(self) -> str:
    if not self._h:
        return f"<{type(self).__name__} (closed)>"
    return get_global_func("ffi.ReprPrint")(self)


def _install() -> None:
    _object._CLASS_HOOK.append((class_for, add_members))
    _object.Object.__repr__ = _repr_print
    _object._CLASS_CACHE.clear()


_install()
