"""``anyffi.runtime``: the device runtime (the ``runtime.*`` global functions).

Devices are :class:`anyffi.Device` values (``anyffi.device("cuda", 0)``, or a name), pointers and
streams ``ctypes.c_void_p``, memcpy kinds 0..3 = H2H, H2D, D2H, D2D. Each wrapper calls the global
of the same name; a library built without the runtime raises NotImplementedError naming it.
"""

from __future__ import annotations

import ctypes
import operator
from typing import Any, Iterable, Union

from .container import Shape
from .device import Device, device
from .dtype import dtype
from .function import GlobalFunctions
from .tensor import Tensor, _read_only, check_tensor_like, check_writable, from_dlpack

api = GlobalFunctions("runtime")

H2H, H2D, D2H, D2D = 0, 1, 2, 3

DeviceLike = Union[Device, str, int]


def _dev(func: str, d: DeviceLike, name: str = "d") -> Device:
    """``d`` (the argument ``name``) as a Device; its errors name the function and the
    argument."""
    if isinstance(d, Device):
        return d
    if type(d) is str:
        got = _DEVICES.get(d)
        if got is not None:
            return got
    try:
        got = device(d)
    except (TypeError, ValueError) as e:
        raise type(e)(f"anyffi.runtime.{func}: `{name}`: {e}") from None
    if type(d) is str and len(_DEVICES) < 256:
        _DEVICES[d] = got  # Device objects are immutable
    return got


_DEVICES: dict[str, Device] = {}


def _dtype(func: str, name: str, dt: Any) -> dtype:
    """``dt`` as a dtype; its errors name the function and the argument."""
    try:
        return dtype(dt)
    except (TypeError, ValueError) as e:
        raise type(e)(f"anyffi.runtime.{func}: `{name}`: {e}") from None


def _ptr(func: str, name: str, p: Any) -> ctypes.c_void_p:
    """``p`` as a pointer, or an error naming the function and argument."""
    if isinstance(p, ctypes.c_void_p):
        return p
    if isinstance(p, Tensor):
        return ctypes.c_void_p(p.data_ptr)
    if p is None:
        return ctypes.c_void_p(None)
    if isinstance(p, int) and not isinstance(p, bool):
        if not 0 <= p < 1 << 64:  # ctypes would wrap it silently
            raise ValueError(f"anyffi.runtime.{func}: `{name}` = {p} is not an address (0 to 2**64 - 1)")
        return ctypes.c_void_p(p)
    raise TypeError(
        f"anyffi.runtime.{func}: `{name}` must be a pointer (int, ctypes.c_void_p or None), got {type(p).__name__}"
    )


def _call(name: str, *args: Any) -> Any:
    return api.require(name, "the device runtime")(*args)


def _int(func: str, name: str, v: Any) -> int:
    """``v`` as an int (integers and ``__index__`` types only: 2.7 is not silently 2)."""
    try:
        v = operator.index(v)
    except TypeError:
        raise TypeError(f"anyffi.runtime.{func}: `{name}` must be an int, got {type(v).__name__}") from None
    if not -(1 << 63) <= v < 1 << 63:
        raise ValueError(f"anyffi.runtime.{func}: `{name}` = {v} does not fit in int64")
    return v


def _dims(func: str, name: str, dims: Any) -> Shape:
    """A shape or an order as an ffi.Shape, or a TypeError naming the function and argument."""
    try:
        ds = [operator.index(x) for x in dims]
    except TypeError:
        raise TypeError(f"anyffi.runtime.{func}: `{name}` must be a sequence of ints, got {dims!r}") from None
    key = tuple(ds)
    got = _SHAPES.get(key)
    if got is not None:
        return got
    for i, x in enumerate(ds):
        if not -(1 << 63) <= x < 1 << 63:
            raise ValueError(f"anyffi.runtime.{func}: `{name}`[{i}] = {x} does not fit in int64")
    got = Shape(ds)
    if len(_SHAPES) < 1024:
        _SHAPES[key] = got  # an ffi.Shape is immutable: one object serves every call
    return got


# shapes made by _dims, by their dimensions (making an ffi.Shape is a call into the library)
_SHAPES: dict[tuple, Shape] = {}


def _same_ro(src: Any, out: Tensor) -> Tensor:
    """``out`` (a view of, or ``src`` itself moved/copied) read-only when ``src`` is. Our
    library keeps the flag with its views itself; on the official library it lives on the Python
    object only (`Tensor.read_only`), so every derived view must carry it."""
    if isinstance(src, Tensor) and _read_only(src) and isinstance(out, Tensor) and not _read_only(out):
        out._ro = True
    return out


def device_count(device_type: Union[str, int]) -> int:
    """How many devices of this type exist (0 when the backend is missing)."""
    if isinstance(device_type, str):
        dt = _dev("device_count", device_type, "device_type").device_type
    else:
        dt = _int("device_count", "device_type", device_type)
    return _call("device_count", dt)


def set_device(d: DeviceLike) -> None:
    _call("set_device", _dev("set_device", d))


def device_synchronize(d: DeviceLike) -> None:
    _call("device_synchronize", _dev("device_synchronize", d))


def stream_create(d: DeviceLike) -> ctypes.c_void_p:
    return _call("stream_create", _dev("stream_create", d))


def stream_destroy(d: DeviceLike, stream: Any) -> None:
    _call("stream_destroy", _dev("stream_destroy", d), _ptr("stream_destroy", "stream", stream))


def stream_synchronize(d: DeviceLike, stream: Any) -> None:
    _call("stream_synchronize", _dev("stream_synchronize", d), _ptr("stream_synchronize", "stream", stream))


def malloc_device(d: DeviceLike, nbytes: int) -> ctypes.c_void_p:
    return _call("malloc_device", _dev("malloc_device", d), _int("malloc_device", "nbytes", nbytes))


def free_device(d: DeviceLike, ptr: Any) -> None:
    _call("free_device", _dev("free_device", d), _ptr("free_device", "ptr", ptr))


def malloc_host(d: DeviceLike, nbytes: int) -> ctypes.c_void_p:
    return _call("malloc_host", _dev("malloc_host", d), _int("malloc_host", "nbytes", nbytes))


def free_host(d: DeviceLike, ptr: Any) -> None:
    _call("free_host", _dev("free_host", d), _ptr("free_host", "ptr", ptr))


def _copy_args(func: str, dst: Any, src: Any, nbytes: int, kind: int) -> tuple:
    """The (dst, src, nbytes, kind) arguments of memcpy and memcpy_async, checked."""
    return (_ptr(func, "dst", dst), _ptr(func, "src", src), _int(func, "nbytes", nbytes), _int(func, "kind", kind))


def memcpy(dst: Any, src: Any, nbytes: int, kind: int) -> None:
    _call("memcpy", *_copy_args("memcpy", dst, src, nbytes, kind))


def memcpy_async(dst: Any, src: Any, nbytes: int, kind: int, stream: Any) -> None:
    args = _copy_args("memcpy_async", dst, src, nbytes, kind)
    _call("memcpy_async", *args, _ptr("memcpy_async", "stream", stream))


# -- tensors ------------------------------------------------------------------------------------


def empty(shape: Iterable[int], dt: Union[str, dtype] = "float32", d: DeviceLike = "cpu") -> Tensor:
    """A new uninitialised contiguous tensor."""
    return _call("empty", _dims("empty", "shape", shape), _dtype("empty", "dt", dt), _dev("empty", d))


def _owned(func: str, t: Any) -> Any:
    """A numpy array or other DLPack producer as an owning ffi.Tensor (keeping the producer's
    memory alive), as the view functions need: a borrowed DLTensor* cannot back a view."""
    t = check_tensor_like(f"anyffi.runtime.{func}", "t", t)
    return t if isinstance(t, Tensor) else from_dlpack(t)


def view(t: Any, shape: Iterable[int]) -> Tensor:
    """The same memory with another shape (no copy; an error when the strides do not allow it)."""
    t = _owned("view", t)
    return _same_ro(t, _call("view", t, _dims("view", "shape", shape)))


def permute(t: Any, order: Iterable[int]) -> Tensor:
    t = _owned("permute", t)
    return _same_ro(t, _call("permute", t, _dims("permute", "order", order)))


def slice(t: Any, dim: int, start: int, end: int) -> Tensor:  # noqa: A001 - the runtime's name
    t = _owned("slice", t)
    return _same_ro(
        t,
        _call("slice", t, _int("slice", "dim", dim), _int("slice", "start", start), _int("slice", "end", end)),
    )


def contiguous(t: Any) -> Tensor:
    t = check_tensor_like("anyffi.runtime.contiguous", "t", t)
    out = _call("contiguous", t)
    if isinstance(t, Tensor) and isinstance(out, Tensor) and out.same_as(t):
        return t  # already contiguous: the tensor itself (its read-only flag with it)
    return out


def to_device(t: Any, d: DeviceLike) -> Tensor:
    t = check_tensor_like("anyffi.runtime.to_device", "t", t)
    out = _call("to_device", t, _dev("to_device", d))
    if isinstance(t, Tensor) and isinstance(out, Tensor) and out.same_as(t):
        return t  # already there: the tensor itself
    return out


def copy_(dst: Any, src: Any) -> None:
    """Copies ``src`` into ``dst`` (same shape and dtype), across devices when needed."""
    dst = check_tensor_like("anyffi.runtime.copy_", "dst", dst)
    src = check_tensor_like("anyffi.runtime.copy_", "src", src)
    check_writable("anyffi.runtime.copy_", "dst", dst)
    _call("copy_", dst, src)
