"""``anyffi.Object``: a Python owner of one strong reference to an FFI object.

An ``Object`` holds the handle (the object header address) in ``_h``. It releases its reference
when collected (``__del__``) or when ``close()`` is called; ``close()`` is idempotent, and a closed
object raises ValueError when used. ``_from_owned`` adopts a reference the caller already owns;
``_from_borrowed`` takes a new one.

Python classes are chosen by type index: :func:`register_object` maps a type key to a class, and
objects of an unregistered type get the class of their nearest registered ancestor.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Callable, Optional, TypeVar

from . import _capi, _mem
from .errors import check_call, discard_raised

_Q, _I = _mem.Q, _mem.I
_IncRef = _capi.TVMFFIObjectIncRef
_DecRef = _capi.TVMFFIObjectDecRef


def handle_type_index(h: int) -> int:
    """The type index in the header of object ``h`` (``type_index`` sits at header+8)."""
    return _I[h >> 2]


class Object:
    """A reference-counted FFI object (type ``ffi.Object`` and every object type below it)."""

    __slots__ = ("_h", "__weakref__")

    def __init__(self, *args, **kwargs):
        raise TypeError(f"{type(self).__name__} objects come from FFI calls; they cannot be constructed directly")

    @classmethod
    def _from_owned(cls, h: int):
        """Wraps ``h``, adopting the strong reference the caller owns."""
        o = object.__new__(cls)
        o._h = h
        return o

    @classmethod
    def _from_borrowed(cls, h: int):
        """Wraps ``h``, taking a new strong reference."""
        _IncRef(h)
        return cls._from_owned(h)

    def __del__(self, _dec=_DecRef):
        h = getattr(self, "_h", 0)
        if h:
            self._h = 0
            _dec(h)

    def _conv_without_handle(self, k: int, fr) -> None:
        """Writes this handle-less object as argument cell ``k`` of frame ``fr`` (closed: an error)."""
        raise ValueError(f"cannot pass a closed {type(self).__name__}")

    def close(self) -> None:
        """Releases the reference now; later uses raise ValueError. Idempotent."""
        h = self._h
        if h:
            self._h = 0
            _DecRef(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def handle(self) -> int:
        """The object address (borrowed). ValueError when closed."""
        h = self._h
        if not h:
            raise ValueError(f"{type(self).__name__}: the handle is closed")
        return h

    @property
    def type_index(self) -> int:
        return handle_type_index(self.handle)

    @property
    def type_key(self) -> str:
        return type_key_of(self.type_index)

    @property
    def use_count(self) -> int:
        """The strong reference count (low 32 bits of the header's first word)."""
        return _Q[_mem.qi(self.handle)] & 0xFFFFFFFF

    def same_as(self, other: object) -> bool:
        """Whether ``other`` refers to the very same FFI object."""
        return isinstance(other, Object) and other._h == self._h and self._h != 0

    def __eq__(self, other: object) -> bool:
        return self.same_as(other)

    def __hash__(self) -> int:
        return hash(self._h)

    def __repr__(self) -> str:
        if not self._h:
            return f"<{type(self).__name__} (closed)>"
        return f"<{type(self).__name__} {self.type_key} at 0x{self._h:x}>"

    def __reduce_ex__(self, protocol):
        # Without this, copy/deepcopy/pickle fall back to object.__reduce_ex__, which copies the
        # `_h` slot: a second owner of the same reference without an IncRef (a double DecRef,
        # then a use-after-free), or a raw address in a pickle. Containers and Shape rebuild
        # from their contents instead (as the official package, which also refuses the rest).
        raise TypeError(f"cannot pickle or copy an anyffi.{type(self).__name__} ({self.type_key if self._h else 'closed'})")


# -- the type table --------------------------------------------------------------------------------

_KEY_BY_INDEX: dict[int, str] = {}


def type_info(type_index: int) -> int:
    """The address of the ``TVMFFITypeInfo`` of a type index known to exist."""
    p = _capi.TVMFFIGetTypeInfo(type_index)
    if not p:
        raise ValueError(f"no type registered at index {type_index}")
    return p


def type_key_of(type_index: int) -> str:
    """The type key of a registered type index."""
    key = _KEY_BY_INDEX.get(type_index)
    if key is None:
        i = _mem.qi(type_info(type_index) + _capi.TYPEINFO_KEY)
        key = _KEY_BY_INDEX[type_index] = _mem.read_str(_Q[i], _Q[i + 1])
    return key


def type_key_to_index(type_key: str) -> Optional[int]:
    """The type index registered for ``type_key``, or None."""
    b = type_key.encode()
    out = ctypes.c_int32()
    if _capi.TVMFFITypeKeyToIndex(_capi.byte_array(b), ctypes.byref(out)) != 0:
        discard_raised()  # a missing key leaves an error in the slot
        return None
    return out.value


def _ancestors(type_index: int) -> list[int]:
    """Type indices of the ancestors of ``type_index``, nearest first."""
    info = type_info(type_index)
    depth = _I[((info + _capi.TYPEINFO_DEPTH) >> 2) - 2]
    arr = _Q[_mem.qi(info + _capi.TYPEINFO_ANCESTORS)]
    out = []
    for d in range(depth - 1, -1, -1):
        anc = _Q[_mem.qi(arr + 8 * d)]
        out.append(_I[(anc >> 2) - 2])
    return out


_CLASS_BY_INDEX: dict[int, type] = {_capi.kObject: Object}
_PENDING_KEYS: dict[str, type] = {}

T = TypeVar("T", bound=type)


def register_object(type_key: str, type_index: Optional[int] = None) -> Callable[[T], T]:
    """Class decorator: objects of ``type_key`` (and its unregistered descendants) get this class."""

    def register(cls: T) -> T:
        with _CLASS_LOCK:
            return _register_locked(cls)

    def _register_locked(cls: T) -> T:
        ti = type_index if type_index is not None else type_key_to_index(type_key)
        if ti is None:
            _PENDING_KEYS[type_key] = cls  # registered later by the library (modules, plugins)
        else:
            _CLASS_BY_INDEX[ti] = cls
            _CLASS_CACHE.clear()
        cls._type_key = type_key
        if ti is not None and _CLASS_HOOK:
            _CLASS_HOOK[0][1](cls, ti)
        return cls

    return register


_CLASS_CACHE: dict[int, type] = {}
# (class_for, add_members) of the reflection module: a class per type with reflected fields or
# methods, and those members on registered classes (filled in by reflection.py)
_CLASS_HOOK: list = []


# Class creation calls into the library through ctypes, which releases the GIL: without this
# lock, threads meeting a new type at once each make a class of their own for it.
_CLASS_LOCK = threading.RLock()


def class_of(type_index: int) -> type:
    """The Python class for objects of ``type_index``."""
    cls = _CLASS_CACHE.get(type_index)
    if cls is not None:
        return cls
    with _CLASS_LOCK:
        cls = _CLASS_CACHE.get(type_index)
        if cls is not None:
            return cls
        return _class_of_locked(type_index)


def _class_of_locked(type_index: int) -> type:
    cls = _CLASS_BY_INDEX.get(type_index)
    if cls is None and _PENDING_KEYS:
        cls = _PENDING_KEYS.pop(type_key_of(type_index), None)
        if cls is not None:
            _CLASS_BY_INDEX[type_index] = cls
            if _CLASS_HOOK:
                _CLASS_HOOK[0][1](cls, type_index)
    if cls is None:
        cls, base_index = Object, _capi.kObject
        for anc in _ancestors(type_index):
            c = _CLASS_BY_INDEX.get(anc)
            if c is not None:
                cls, base_index = c, anc
                break
        if _CLASS_HOOK:
            cls = _CLASS_HOOK[0][0](type_index, cls, base_index)
    _CLASS_CACHE[type_index] = cls
    return cls


def wrap_object(h: int) -> Object:
    """An owner of ``h`` (a new reference the caller gives away) as the class of its type."""
    return class_of(_I[h >> 2])._from_owned(h)


__all__ = ["Object", "register_object", "type_key_of", "type_key_to_index", "check_call"]
