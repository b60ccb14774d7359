"""``anyffi.dtype``: a data type (``DLDataType``), a ``str`` subclass carrying ``code``/``bits``/``lanes``.

Parsing and printing go through the library (``TVMFFIDataTypeFromString``/``ToString``), so the
grammar is exactly the library's: ``float32``, ``int8x4``, ``bfloat16``, ``float8_e4m3fn``, ...
"""

from __future__ import annotations

import ctypes

from . import _capi, _mem
from .errors import check_call


def _owned_any_text(a: _capi.TVMFFIAny) -> str:
    """The text of an owned string Any (SmallStr or ffi.String), releasing it."""
    if a.type_index == _capi.kSmallStr:
        return _mem.read_str(ctypes.addressof(a) + 8, a.small_str_len)
    if a.type_index == _capi.kStr:
        h = a.v_int64
        try:
            i = _mem.qi(h + _capi.OBJ_CELL)
            return _mem.read_str(_mem.Q[i], _mem.Q[i + 1])
        finally:
            _capi.TVMFFIObjectDecRef(h)
    raise TypeError(f"expected a string, got type index {a.type_index}")


class dtype(str):
    """A data type. ``dtype("float32").bits == 32``; equal to its string form."""

    code: int
    bits: int
    lanes: int
    _packed: int

    def __new__(cls, s: "str | dtype") -> "dtype":
        if isinstance(s, dtype):
            return s
        if not isinstance(s, str):
            # numpy dtypes, torch dtypes, numpy scalar types: remembered by the object (numpy
            # builds a dtype's `name` anew each time, ~2 us; the ops wrappers ask per call)
            try:
                d = _BY_OBJECT.get(s)
            except Exception:  # unhashable, or an __eq__ that refuses a cached key's type
                d = None
            if d is not None:
                return d
            key = s
            if isinstance(s, type) and (s.__module__ == "numpy" or s.__module__.startswith("ml_dtypes")):
                # numpy scalar types (np.float32, np.int64, np.bool_) and ml_dtypes' (bfloat16):
                # their numpy dtype's name
                import numpy

                s = numpy.dtype(s)
            if all(hasattr(s, a) for a in ("isnative", "kind", "itemsize", "str")):
                _check_numpy_dtype(s)
            # numpy dtypes and other objects with a name; torch dtypes print as "torch.float32"
            s = str(getattr(s, "name", s))
            if s.startswith("torch."):
                s = s[6:]
            d = dtype(s)
            try:
                if len(_BY_OBJECT) < 1024:
                    _BY_OBJECT[key] = d
            except Exception:
                pass
            return d
        d = _BY_TEXT.get(s)
        if d is not None:
            return d
        b = s.encode()
        out = _capi.DLDataType()
        try:
            check_call(_capi.TVMFFIDataTypeFromString(_capi.byte_array(b), ctypes.byref(out)))
        except ValueError:
            # complex types: DLPack has them (code 5), the library's parser does not; the names
            # are the ones `_from_packed` gives them (and numpy's)
            packed = _NAMED_HERE.get(s)
            if packed is None:
                raise
            return _from_packed(packed)
        d = _from_packed(out.code | (out.bits << 8) | (out.lanes << 16))
        if str(d) != s:
            # spelled as the user wrote it ("int", "float"), as the official package keeps it;
            # the fields are the canonical type's
            canon = d
            d = str.__new__(dtype, s)
            d.code, d.bits, d.lanes, d._packed = canon.code, canon.bits, canon.lanes, canon._packed
        if len(_BY_TEXT) < 4096:
            _BY_TEXT[s] = d
        return d

    @property
    def itemsize(self) -> int:
        """Bytes per element (lanes included); sub-byte types round up."""
        return (self.bits * self.lanes + 7) // 8

    @property
    def type_code(self) -> int:
        """The DLDataType code (0 int, 1 uint, 2 float, 4 bfloat, 6 bool, ...), as ``code``."""
        return self.code

    def with_lanes(self, lanes: int) -> "dtype":
        """The same element type with ``lanes`` lanes (``dtype("float32").with_lanes(4)`` is
        ``float32x4``)."""
        lanes = int(lanes)
        if not 0 < lanes < 1 << 16:
            raise ValueError(f"dtype.with_lanes: lanes must be in [1, 65535], got {lanes}")
        return _from_packed(self.code | (self.bits << 8) | (lanes << 16))

    @staticmethod
    def from_dlpack_data_type(t: "tuple[int, int, int]") -> "dtype":
        """The dtype of a DLPack ``(code, bits, lanes)`` triple."""
        code, bits, lanes = (int(x) for x in t)
        if not (0 <= code < 256 and 0 <= bits < 256 and 0 <= lanes < 1 << 16):
            raise ValueError(f"dtype.from_dlpack_data_type: bad DLDataType {tuple(t)}")
        return _from_packed(code | (bits << 8) | (lanes << 16))

    def __repr__(self) -> str:
        return f"dtype('{str(self)}')"

    def __reduce__(self):
        return (_restore, (str(self), self._packed))


# Types the library's parser does not know but DLPack has, by the names `_from_packed` gives them.
_NAMED_HERE = {f"complex{b}" + (f"x{n}" if n != 1 else ""): 5 | (b << 8) | (n << 16)
               for b in (32, 64, 128) for n in (1, 2, 4, 8, 16)}


def _restore(s: str, packed: int) -> dtype:
    """Unpickles a dtype: by its text when that names the same type (which keeps a spelling such
    as "int"), else from its DLDataType."""
    try:
        d = dtype(s)
        if d._packed == packed:
            return d
    except (ValueError, TypeError):
        pass
    return _from_packed(packed)


def _is_long_double(dt) -> bool:
    """Whether a numpy dtype is the platform's long double (real or complex): wider than any
    IEEE type numpy has, and no DLPack type."""
    return (dt.kind == "f" and dt.itemsize > 8) or (dt.kind == "c" and dt.itemsize > 16)


def _check_numpy_dtype(dt) -> None:
    """ValueError for numpy dtypes with no DLPack type of the same name: non-native byte order
    (DLPack has none) and numpy's long double (x87 extended precision padded to 16 bytes, not
    IEEE binary128, whatever its name `float128` says)."""
    if not dt.isnative:
        raise ValueError(
            f"anyffi.dtype: numpy dtype {dt.str!r} has non-native byte order, which DLPack cannot "
            f"describe; use {dt.newbyteorder('=').name!r}"
        )
    if _is_long_double(dt):
        raise ValueError(
            f"anyffi.dtype: numpy dtype {dt.name!r} is the platform's long double, not an IEEE "
            f"type DLPack describes"
        )


_BY_TEXT: dict[str, dtype] = {}
_BY_OBJECT: dict = {}
_BY_PACKED: dict[int, dtype] = {}


def _from_packed(v: int) -> dtype:
    """The dtype for a packed DLDataType (code | bits << 8 | lanes << 16)."""
    d = _BY_PACKED.get(v)
    if d is None:
        dl = _capi.DLDataType(v & 0xFF, (v >> 8) & 0xFF, (v >> 16) & 0xFFFF)
        out = _capi.TVMFFIAny()
        try:
            check_call(_capi.TVMFFIDataTypeToString(ctypes.byref(dl), ctypes.addressof(out)))
            text = _owned_any_text(out)
        except ValueError:
            # codes the library has no name for (complex: DLPack code 5), named here so that a
            # tensor of them still has a dtype, a repr and a numpy view
            base = {5: "complex"}.get(dl.code, f"code{dl.code}_")
            text = f"{base}{dl.bits}" + (f"x{dl.lanes}" if dl.lanes != 1 else "")
        d = str.__new__(dtype, text)
        d.code, d.bits, d.lanes, d._packed = dl.code, dl.bits, dl.lanes, v
        if len(_BY_PACKED) < 4096:
            _BY_PACKED[v] = d
    return d
