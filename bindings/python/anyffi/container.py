"""Containers: ``Array``/``List`` (sequences), ``Map``/``Dict`` (mappings) and ``Shape``.

Reading an Array, List or Shape goes straight through the C ABI cells (``TVMFFISeqCell`` and
``TVMFFIShapeCell`` of ``c_api.h``), so it needs no global function. Construction, mutation and
every Map/Dict operation call the documented ``ffi.*`` globals (``ffi.Array``, ``ffi.MapGetItem``,
...); when the loaded library lacks one, the operation raises NotImplementedError naming it.

As arguments, Python lists and tuples become ``ffi.Array`` and dicts ``ffi.Map`` (built for the
call and released after it).
"""

from __future__ import annotations

import copy
import operator
import threading
import weakref
from collections.abc import ItemsView, KeysView, Mapping, MutableMapping, MutableSequence, Sequence, ValuesView
from typing import Any, Iterable, Iterator

from . import _capi, _marshal, _mem
from .errors import Error
from .function import ffi_api
from .object import Object, register_object

Q, q = _mem.Q, _mem.q
_from_view = _marshal.from_view
# (the constructors and mutators below are `function._StoringFunction`s: they pass DLPack
# producers as owned tensors themselves)

# TVMFFISeqCell at header+24: data@0, size@8, capacity@16; TVMFFIShapeCell: data@0, size@8.


def _seq_cell(h: int) -> tuple[int, int]:
    j = (h >> 3) + 2
    return Q[j], Q[j + 1]


def _norm_index(i: Any, n: int, what: str) -> int:
    try:
        j = operator.index(i)
    except TypeError:
        raise TypeError(f"{what} indices must be integers or slices, not {type(i).__name__}") from None
    k = j + n if j < 0 else j
    if not 0 <= k < n:
        raise IndexError(f"{what} index {j} out of range for size {n}")
    return k


# Per thread, during one top-level == or hash of containers: the pairs of handles found equal
# and the hashes computed so far. Containers that share parts (a DAG: x = Array([x, x]) n deep)
# then compare and hash in time linear in their distinct parts, not in 2^n.
_WALK = threading.local()


def _memo(name: str):
    """(this thread's memo for the ``name`` walk, whether this call made it: the outermost)."""
    m = getattr(_WALK, name, None)
    if m is None:
        m = {}
        setattr(_WALK, name, m)
        return m, True
    return m, False


class _Container(Object):
    """Equality by content (with containers of the same family, Array/List or Map/Dict, and
    with plain Python values), a hash that agrees with it, and repr, through ``_plain()``
    (a list or a dict) and ``_frozen()`` (a tuple or a frozenset)."""

    __slots__ = ()
    _plain_types: tuple = ()
    _family: type = object

    def _plain(self):
        raise NotImplementedError

    def _frozen(self):
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Container):
            if self.same_as(other):
                return True
            if isinstance(self, other._family) and isinstance(other, self._family):
                memo, outer = _memo("eq")
                key = (self._h, other._h)  # both alive until the outermost call returns
                try:
                    if key in memo:
                        return True
                    eq = self._content_eq(other)
                    if eq:
                        memo[key] = (self, other)  # alive: no other pair reuses these handles
                    return eq
                finally:
                    if outer:
                        _WALK.eq = None
            return False
        if isinstance(other, Object):
            return False
        if isinstance(other, self._plain_types):
            return self._plain_eq(other)
        return NotImplemented

    def _content_eq(self, other: "_Container") -> bool:
        return self._plain() == other._plain()

    def _plain_eq(self, other: Any) -> bool:
        plain = self._plain()
        return plain == type(plain)(other)

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        # equal contents, equal hashes (an Array hashes as the tuple it equals)
        memo, outer = _memo("hash")
        try:
            m = memo.get(self._h)
            if m is None:
                m = memo[self._h] = (hash(self._frozen()), self)  # alive: the handle is not reused
            return m[0]
        finally:
            if outer:
                _WALK.hash = None

    def __repr__(self) -> str:
        if not self._h:
            return f"<anyffi.{type(self).__name__} (closed)>"
        # a container that holds itself prints `...` where it recurs, as a list does `[...]`
        # (element wrappers are new objects, so the ones being printed are kept by handle)
        showing = getattr(_WALK, "repr", None)
        if showing is None:
            showing = _WALK.repr = set()
        if self._h in showing:
            return f"{type(self).__name__}(...)"
        showing.add(self._h)
        try:
            return f"{type(self).__name__}({self._plain()!r})"
        finally:
            showing.discard(self._h)

    def __reduce_ex__(self, protocol):
        # a new container of the same contents (copy.copy: shallow; deepcopy/pickle: recursive)
        p = self._plain()
        if isinstance(p, dict):
            p = {_canonical(k): _canonical(v) for k, v in p.items()}
        else:
            p = [_canonical(v) for v in p]
        return (type(self), (p,))

    def __deepcopy__(self, memo=None):
        # as the official package: one native pass that copies each shared sub-object once
        # (the generic __reduce_ex__ path rebuilds a DAG as a tree: exponential, sharing lost)
        f = ffi_api.get("DeepCopy")
        if f is not None:
            try:
                return f(self)
            except Error:  # elements ffi.DeepCopy cannot copy (Python objects): as before
                pass
        return type(self)(copy.deepcopy(self._plain(), memo))


# pickle memoizes by identity, and each read of a container makes new wrappers: a sub-object
# reached twice was written twice (a DAG became a tree, exponential in its depth, the sharing
# lost on load). Reductions hand out one wrapper per handle instead. A live wrapper holds its
# handle, so that handle cannot name another object while the entry exists; pickle's memo keeps
# the wrappers alive until the dump ends.
_CANON: "weakref.WeakValueDictionary[int, Object]" = weakref.WeakValueDictionary()


def _canonical(v: Any) -> Any:
    if isinstance(v, Object):
        h = v._h
        if h:
            w = _CANON.get(h)
            if w is not None and w._h == h and type(w) is type(v):
                return w
            _CANON[h] = v
    return v


class _SeqBase(_Container):
    """Shared read access of Array and List."""

    __slots__ = ()
    _ctor = ""
    _plain_types = (list, tuple)

    def __new__(cls, items: Iterable = ()):
        if not isinstance(items, (list, tuple)):
            items = tuple(items)
        return ffi_api.require(cls._ctor, f"constructing an {cls.__name__}")(*items)

    def __init__(self, items: Iterable = ()):
        pass

    def __len__(self) -> int:
        return _seq_cell(self.handle)[1]

    def __getitem__(self, i):
        data, n = _seq_cell(self.handle)
        if isinstance(i, slice):
            return [_from_view(_mem.qi(data) + 2 * j) for j in range(*i.indices(n))]
        j = _norm_index(i, n, type(self).__name__)
        # re-read the cell: the list may have been resized by a conversion callback meanwhile
        data, n = _seq_cell(self.handle)
        if j >= n:
            raise IndexError(f"{type(self).__name__} index {i} out of range for size {n}")
        return _from_view(_mem.qi(data) + 2 * j)

    def __iter__(self) -> Iterator:
        for j in range(len(self)):
            yield self[j]

    def __contains__(self, v: Any) -> bool:
        # as a list (identity, then ==); a float read back is a new object, so NaN matches NaN
        # (as the official package's)
        if isinstance(v, float) and v != v:
            return any(isinstance(x, float) and x != x for x in self)
        return any(x is v or x == v for x in self)

    def _plain(self) -> list:
        return list(self)

    def _frozen(self) -> tuple:
        return tuple(self)

    def __add__(self, other: Any):
        """A new container of this kind: this one's items, then ``other``'s (any iterable but a
        str, as the official package)."""
        if isinstance(other, (str, bytes)) or not hasattr(other, "__iter__"):
            return NotImplemented
        return type(self)([*self, *other])

    def __radd__(self, other: Any):
        if isinstance(other, (str, bytes)) or not hasattr(other, "__iter__"):
            return NotImplemented
        return type(self)([*other, *self])


_SeqBase._family = _SeqBase


@register_object("ffi.Array", _capi.kArray)
class Array(_SeqBase, Sequence):
    """An immutable ``ffi.Array``. ``Array([1, "a", obj])``."""

    __slots__ = ()
    _ctor = "Array"


@register_object("ffi.List", _capi.kList)
class List(_SeqBase, MutableSequence):
    """A mutable ``ffi.List`` (changes are shared with every holder of the same object); the
    ``list`` methods (slices too) through ``MutableSequence``."""

    __slots__ = ()
    _ctor = "List"

    def _api(self, name: str):
        return ffi_api.require(name, "mutating a List")

    # Another thread may resize or clear a List at any time: raw reads of its cell (the Array
    # path) can see a freed buffer or an element whose last reference is being dropped. Reads
    # go through ffi.ListGetItem, which copies the element under the container lock.
    def __getitem__(self, i):
        get = ffi_api.require("ListGetItem", "reading a List")
        if isinstance(i, slice):
            out = []
            for j in range(*i.indices(len(self))):
                try:
                    out.append(get(self, j))
                except IndexError:  # shrunk meanwhile
                    break
            return out
        return get(self, _norm_index(i, len(self), "List"))

    def __iter__(self) -> Iterator:
        # like list: stops when the List has shrunk below the next index
        get = ffi_api.require("ListGetItem", "reading a List")
        j = 0
        while j < len(self):
            try:
                yield get(self, j)
            except IndexError:
                return
            j += 1

    def __setitem__(self, i: Any, v: Any) -> None:
        if isinstance(i, slice):
            items = list(self)
            items[i] = v  # list's own rules (lengths of extended slices, iterables)
            # every item converted before the List changes (a failing one left it cleared),
            # then one replacement under the List's lock
            new = List(items)
            self._api("ListReplaceSlice")(self, 0, len(self), new)
            return
        self._api("ListSetItem")(self, _norm_index(i, len(self), "List"), v)

    def __delitem__(self, i: Any) -> None:
        if isinstance(i, slice):
            for j in sorted(range(*i.indices(len(self))), reverse=True):
                self._api("ListErase")(self, j)
            return
        self._api("ListErase")(self, _norm_index(i, len(self), "List"))

    def __iadd__(self, vs: Iterable) -> "List":
        self.extend(list(vs))
        return self

    def append(self, v: Any) -> None:
        self._api("ListAppend")(self, v)

    def extend(self, vs: Iterable) -> None:
        if isinstance(vs, _SeqBase):
            vs = list(vs)  # this List itself (or another wrapper of it) would grow forever
        for v in vs:
            self.append(v)

    def __reduce_ex__(self, protocol):
        # made empty, then filled: pickle memoizes it first, so a List that holds itself
        # (directly or through other containers) round-trips instead of recursing forever
        _CANON[self._h] = self  # the wrapper pickle memoizes: the List's own handle inside is it
        return (type(self), (), None, iter([_canonical(v) for v in self._plain()]))

    def copy(self) -> "List":
        """A new List of the same items (a shallow copy, as ``list.copy``)."""
        return List(list(self))

    def sort(self, *, key: Any = None, reverse: bool = False) -> None:
        """Sorts in place (``list.sort``'s rules: a stable sort, ``key`` and ``reverse``)."""
        items = sorted(self, key=key, reverse=reverse)
        self._api("ListReplaceSlice")(self, 0, len(self), List(items))

    def __mul__(self, n: Any) -> "List":
        return List(list(self) * n)

    __rmul__ = __mul__

    def __imul__(self, n: Any) -> "List":
        items = list(self) * n
        self._api("ListReplaceSlice")(self, 0, len(self), List(items))
        return self

    def insert(self, i: int, v: Any) -> None:
        n = len(self)
        i = max(0, min(n, i + n if i < 0 else i))
        self._api("ListInsert")(self, i, v)

    def pop(self, i: int = -1) -> Any:
        return self._api("ListPop")(self, _norm_index(i, len(self), "List"))

    def clear(self) -> None:
        self._api("ListClear")(self)

    def reverse(self) -> None:
        self._api("ListReverse")(self)


@register_object("ffi.Shape", _capi.kShape)
class Shape(Object, Sequence):
    """An immutable ``ffi.Shape`` (a tuple of int64). ``Shape((2, 3))``."""

    __slots__ = ()

    def __new__(cls, dims: Iterable[int] = ()):
        dims = iter(dims)  # TypeError for a non-iterable, as tuple() and the official Shape
        try:
            ds = [operator.index(d) for d in dims]
        except TypeError as e:
            raise ValueError(f"Shape: dimensions must be integers ({e})") from None
        return ffi_api.require("Shape", "constructing a Shape")(*ds)

    def __init__(self, dims: Iterable[int] = ()):
        pass

    def _dims(self) -> tuple[int, ...]:
        data, n = _seq_cell(self.handle)
        j = _mem.qi(data) if n else 0
        return tuple(q[j + i] for i in range(n))

    def __len__(self) -> int:
        return _seq_cell(self.handle)[1]

    def __getitem__(self, i):
        return self._dims()[i]

    def __iter__(self) -> Iterator[int]:
        return iter(self._dims())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Shape):
            return self._dims() == other._dims()
        if isinstance(other, (tuple, list)):
            return self._dims() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._dims())

    # The tuple operations of the official package's Shape (a tuple subclass there): + and *
    # give plain tuples, and shapes order as tuples do.
    def _tuple_of(self, other: Any):
        if isinstance(other, Shape):
            return other._dims()
        return other if isinstance(other, tuple) else None

    def __add__(self, other: Any):
        o = self._tuple_of(other)
        return NotImplemented if o is None else self._dims() + o

    def __radd__(self, other: Any):
        return other + self._dims() if isinstance(other, tuple) else NotImplemented

    def __mul__(self, n: Any):
        return self._dims() * n if isinstance(n, int) else NotImplemented

    __rmul__ = __mul__

    def __lt__(self, other: Any):
        o = self._tuple_of(other)
        return NotImplemented if o is None else self._dims() < o

    def __le__(self, other: Any):
        o = self._tuple_of(other)
        return NotImplemented if o is None else self._dims() <= o

    def __gt__(self, other: Any):
        o = self._tuple_of(other)
        return NotImplemented if o is None else self._dims() > o

    def __ge__(self, other: Any):
        o = self._tuple_of(other)
        return NotImplemented if o is None else self._dims() >= o

    def __repr__(self) -> str:
        return f"Shape({self._dims()!r})" if self._h else "<anyffi.Shape (closed)>"

    def __reduce_ex__(self, protocol):
        return (Shape, (self._dims(),))


class _MapBase(_Container):
    """Shared read access of Map and Dict through the ``ffi.<Prefix>*`` globals."""

    __slots__ = ()
    _prefix = ""
    _plain_types = (dict,)

    def __new__(cls, items: Any = ()):
        pairs = items.items() if isinstance(items, Mapping) else items
        flat = []
        for k, v in pairs:
            flat.append(k)
            flat.append(v)
        return ffi_api.require(cls._prefix, f"constructing a {cls.__name__}")(*flat)

    def __init__(self, items: Any = ()):
        pass

    def _api(self, suffix: str):
        return ffi_api.require(self._prefix + suffix, f"{type(self).__name__} access")

    def __len__(self) -> int:
        return self._api("Size")(self)

    def __getitem__(self, key: Any) -> Any:
        try:
            return self._api("GetItem")(self, key)
        except KeyError:
            raise KeyError(key) from None

    def __contains__(self, key: Any) -> bool:
        return self._api("Count")(self, key) != 0

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default

    def _walk(self) -> Iterator[tuple[Any, Any]]:
        if len(self) == 0:
            return
        it = self._api("ForwardIterFunctor")(self)
        if not isinstance(self, MutableMapping):  # a Map never changes
            while True:
                yield it(0), it(1)
                if not it(2):
                    return
        # A Dict is walked from a copy of its items: the library's iterator ends early when the
        # loop sets a key's value (a set moves the key to the end, as in the official library),
        # and a loop that adds or removes keys raises as for a dict.
        n = len(self)
        items = []
        try:
            while True:
                items.append((it(0), it(1)))
                if not it(2):
                    break
        except IndexError:  # another thread changed it meanwhile
            raise RuntimeError(f"{type(self).__name__} changed size during iteration") from None
        for kv in items:
            yield kv
            if len(self) != n:
                raise RuntimeError(f"{type(self).__name__} changed size during iteration")

    def __iter__(self) -> Iterator:
        return (k for k, _ in self._walk())

    def keys(self) -> KeysView:
        return KeysView(self)

    def values(self) -> "_ValuesView":
        return _ValuesView(self)

    def items(self) -> "_ItemsView":
        return _ItemsView(self)

    def _plain(self) -> dict:
        return dict(self._walk())

    # Maps compare entry by entry, each key looked up by the other side's own rules: a dict
    # rebuilt from the entries merges keys the library keeps apart (1, True and 1.0; separately
    # built Arrays), and a 3-entry Dict equalled a 1-entry dict.
    def _content_eq(self, other: "_Container") -> bool:
        if len(self) != len(other):
            return False
        for k, v in self._walk():
            if k not in other:
                return False
            w = other[k]
            if not (w is v or w == v):
                return False
        return True

    def _plain_eq(self, other: Any) -> bool:
        other = dict(other)
        if len(self) != len(other):
            return False
        _missing = object()
        seen = set()
        for k, v in self._walk():
            w = other.get(k, _missing)
            if w is _missing or not (w is v or w == v):
                return False
            seen.add(k)
        return len(seen) == len(other)  # (two of our keys found one of the dict's)

    def _frozen(self) -> frozenset:
        return frozenset(self._walk())


_MapBase._family = _MapBase


class _ValuesView(ValuesView):
    """``values()``: one pass over the map (not a lookup per key)."""

    def __iter__(self) -> Iterator:
        return (v for _, v in self._mapping._walk())


class _ItemsView(ItemsView):
    """``items()``: one pass over the map (not a lookup per key)."""

    def __iter__(self) -> Iterator:
        return self._mapping._walk()


@register_object("ffi.Map", _capi.kMap)
class Map(_MapBase, Mapping):
    """An immutable ``ffi.Map``. ``Map({"a": 1})``."""

    __slots__ = ()
    _prefix = "Map"


@register_object("ffi.Dict", _capi.kDict)
class Dict(_MapBase, MutableMapping):
    """A mutable ``ffi.Dict`` (changes are shared with every holder of the same object); the
    ``dict`` methods (``setdefault``, ``popitem``, ...) through ``MutableMapping``."""

    __slots__ = ()
    _prefix = "Dict"

    def __setitem__(self, key: Any, value: Any) -> None:
        self._api("SetItem")(self, key, value)

    def __delitem__(self, key: Any) -> None:
        if key not in self:
            raise KeyError(key)
        self._api("Erase")(self, key)

    def pop(self, key: Any, *default: Any) -> Any:
        if key in self:
            v = self[key]
            self._api("Erase")(self, key)
            return v
        if default:
            return default[0]
        raise KeyError(key)

    def clear(self) -> None:
        self._api("Clear")(self)

    def popitem(self) -> tuple:
        # one item from the library's iterator (MutableMapping's goes through __iter__, which
        # copies every item first: draining a Dict was quadratic)
        if len(self) == 0:
            raise KeyError("popitem(): dictionary is empty")
        it = self._api("ForwardIterFunctor")(self)
        try:
            k, v = it(0), it(1)
        except IndexError:
            raise KeyError("popitem(): dictionary is empty") from None
        self._api("Erase")(self, k)
        return k, v

    def update(self, other: Any = (), **kw: Any) -> None:
        if isinstance(other, Mapping):
            pairs = list(other.items())  # (a snapshot: `other` may be this Dict)
        elif hasattr(other, "keys"):  # as dict.update: anything with keys() and []
            pairs = [(k, other[k]) for k in other.keys()]
        else:
            pairs = other
        for k, v in pairs:
            self[k] = v
        for k, v in kw.items():
            self[k] = v

    def __reduce_ex__(self, protocol):
        # made empty, then filled (see List.__reduce_ex__)
        _CANON[self._h] = self
        return (type(self), (), None, None, iter([(_canonical(k), _canonical(v)) for k, v in self._walk()]))

    def copy(self) -> "Dict":
        """A new Dict of the same items (a shallow copy, as ``dict.copy``)."""
        return Dict(list(self._walk()))

    @classmethod
    def fromkeys(cls, keys: Iterable, value: Any = None) -> "Dict":
        return cls([(k, value) for k in keys])

    def __or__(self, other: Any) -> "Dict":
        if not isinstance(other, Mapping):
            return NotImplemented
        d = self.copy()
        d.update(other)
        return d

    def __ror__(self, other: Any) -> "Dict":
        if not isinstance(other, Mapping):
            return NotImplemented
        d = Dict(other)
        d.update(self)
        return d

    def __ior__(self, other: Any) -> "Dict":
        self.update(other)
        return self

    def __reversed__(self) -> Iterator:
        return reversed([k for k, _ in self._walk()])


# -- Python containers as arguments --------------------------------------------------------------


_NESTED = (list, tuple, dict)


def _nested_items(x) -> list:
    """The items of a list/tuple, or the flattened key, value pairs of a dict."""
    if isinstance(x, dict):  # (subclasses too: OrderedDict, defaultdict, Counter)
        out = []
        for kv in x.items():
            out.extend(kv)
        return out
    return list(x)


def _build_nested(a) -> Object:
    """The Array (list/tuple) or Map (dict) of ``a`` whose items include lists, tuples or
    dicts: built bottom-up with an explicit stack, so that the depth of nesting is not bound by
    Python's recursion limit (each level cost ~3 frames: ~300 levels). A container that
    contains itself is a ValueError."""
    root = [None]
    on_path = {id(a)}
    stack = [[a, _nested_items(a), 0, root, 0]]  # source, items, next index, parent items, slot
    while stack:
        top = stack[-1]
        items, i = top[1], top[2]
        n = len(items)
        while i < n and type(items[i]) not in _NESTED:
            i += 1
        if i < n:
            top[2] = i + 1
            child = items[i]
            if id(child) in on_path:
                raise ValueError(f"cannot pass a {type(child).__name__} that contains itself")
            on_path.add(id(child))
            stack.append([child, _nested_items(child), 0, items, i])
            continue
        stack.pop()
        src = top[0]
        on_path.discard(id(src))
        if isinstance(src, dict):
            obj = ffi_api.require("Map", "passing a dict")(*items)
        else:
            obj = ffi_api.require("Array", "passing a list or tuple")(*items)
        top[3][top[4]] = obj
    return root[0]


def _has_nested(a) -> bool:
    for x in a:
        if type(x) in _NESTED:
            return True
    return False


def _conv_list(a, k: int, fr) -> None:
    if _has_nested(a):
        arr = _build_nested(a)
    else:
        arr = ffi_api.require("Array", "passing a list or tuple")(*a)
    h = arr._h
    arr._h = 0  # the frame releases the reference after the call
    fr.owned.append(h)
    fr.Q[k] = _capi.kArray
    fr.Q[k + 1] = h


def _conv_dict(a: dict, k: int, fr) -> None:
    flat = _nested_items(a)
    m = _build_nested(a) if _has_nested(flat) else ffi_api.require("Map", "passing a dict")(*flat)
    h = m._h
    m._h = 0
    fr.owned.append(h)
    fr.Q[k] = _capi.kMap
    fr.Q[k + 1] = h


_marshal.CONVERTERS[list] = _conv_list
_marshal.CONVERTERS[tuple] = _conv_list
_marshal.CONVERTERS[dict] = _conv_dict
