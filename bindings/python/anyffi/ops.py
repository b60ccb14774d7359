"""``anyffi.ops``: the operator library (the ``ops.*`` global functions), out-of-place.

The globals write into a caller-allocated output given first (``ops.add(c, a, b)``). Each wrapper
here takes the inputs first and ``out=None``: without ``out`` it allocates the output with
``runtime.empty`` on the inputs' device and returns it (an :class:`anyffi.Tensor`; ``.numpy()``
views it). Inputs are anyffi Tensors, numpy arrays or any DLPack producer; numpy arrays and other
producers are passed as borrowed ``DLTensor*`` views, with no copy.
"""

from __future__ import annotations

import math
from typing import Any, Optional

from . import runtime
from .device import Device, cpu
from .dtype import dtype
from .function import GlobalFunctions
from .tensor import Tensor, check_writable, from_dlpack

api = GlobalFunctions("ops")


def _meta(x: Any) -> tuple[tuple[int, ...], dtype, Device, Any]:
    """(shape, dtype, device, the value to pass) of a tensor-like input."""
    if isinstance(x, Tensor):
        return x.shape, x.dtype, x.device, x
    mod = type(x).__module__
    if mod == "numpy":
        return tuple(x.shape), dtype(x.dtype.name), cpu, x
    t = from_dlpack(x)
    return t.shape, t.dtype, t.device, t


def _out(op: str, out: Optional[Any], shape, dt, dev) -> Any:
    if out is None:
        return runtime.empty(shape, dt, dev)
    check_writable(f"anyffi.ops.{op}", "out", out)
    return out


def _op(name: str):
    return api.require(name, "the operator library")


def add(a: Any, b: Any, out: Optional[Any] = None) -> Any:
    """``a + b`` element-wise (same shape and dtype)."""
    shape, dt, dev, a = _meta(a)
    out = _out("add", out, shape, dt, dev)
    _op("add")(out, a, b)
    return out


def argmax(vals: Any, out: Optional[tuple[Any, Any]] = None) -> tuple[Any, Any]:
    """``(max_idx, max_val)`` of a 1-D tensor: int64 ``[1]`` and ``[1]`` of its dtype."""
    _, dt, dev, vals = _meta(vals)
    if out is None:
        max_idx, max_val = runtime.empty((1,), "int64", dev), runtime.empty((1,), dt, dev)
    else:
        max_idx, max_val = out
        check_writable("anyffi.ops.argmax", "out[0]", max_idx)
        check_writable("anyffi.ops.argmax", "out[1]", max_val)
    _op("argmax")(max_idx, max_val, vals)
    return max_idx, max_val


def embedding(index: Any, weight: Any, out: Optional[Any] = None) -> Any:
    """Rows of ``weight`` [V, d] picked by ``index`` (int64 [n]) -> [n, d]."""
    ishape, _, _, index = _meta(index)
    wshape, dt, dev, weight = _meta(weight)
    out = _out("embedding", out, (ishape[0], wshape[1]), dt, dev)
    _op("embedding")(out, index, weight)
    return out


def linear(x: Any, weight: Any, bias: Any = None, out: Optional[Any] = None) -> Any:
    """``x @ weight.T + bias``: x [m, k], weight [n, k], bias [n] or None -> [m, n]."""
    xshape, dt, dev, x = _meta(x)
    wshape, _, _, weight = _meta(weight)
    out = _out("linear", out, (xshape[0], wshape[0]), dt, dev)
    _op("linear")(out, x, weight, bias)
    return out


def rearrange(x: Any, out: Optional[Any] = None) -> Any:
    """A contiguous copy of ``x`` (or a strided copy into ``out``)."""
    shape, dt, dev, x = _meta(x)
    out = _out("rearrange", out, shape, dt, dev)
    _op("rearrange")(out, x)
    return out


def rms_norm(x: Any, weight: Any, eps: float = 1e-5, out: Optional[Any] = None) -> Any:
    """Row-wise RMS normalisation over the last dimension, scaled by ``weight``."""
    shape, dt, dev, x = _meta(x)
    out = _out("rms_norm", out, shape, dt, dev)
    _op("rms_norm")(out, x, weight, float(eps))
    return out


def rope(x: Any, pos_ids: Any, theta: float = 10000.0, out: Optional[Any] = None) -> Any:
    """Rotary position embedding of ``x`` [seq, nhead, d] at positions ``pos_ids`` (int64 [seq])."""
    shape, dt, dev, x = _meta(x)
    out = _out("rope", out, shape, dt, dev)
    _op("rope")(out, x, pos_ids, float(theta))
    return out


def self_attention(q: Any, k: Any, v: Any, scale: Optional[float] = None, out: Optional[Any] = None) -> Any:
    """Causal attention: q [seq, nh, d], k [total, nkvh, d], v [total, nkvh, dv] -> [seq, nh, dv]."""
    qshape, dt, dev, q = _meta(q)
    _, _, _, k = _meta(k)
    vshape, _, _, v = _meta(v)
    if scale is None:
        scale = 1.0 / math.sqrt(qshape[-1])
    out = _out("self_attention", out, (qshape[0], qshape[1], vshape[-1]), dt, dev)
    _op("self_attention")(out, q, k, v, float(scale))
    return out


def swiglu(gate: Any, up: Any, out: Optional[Any] = None) -> Any:
    """``up * silu(gate)`` element-wise."""
    shape, dt, dev, gate = _meta(gate)
    out = _out("swiglu", out, shape, dt, dev)
    _op("swiglu")(out, gate, up)
    return out


def gemm(a: Any, b: Any, alpha: float = 1.0, beta: float = 0.0, out: Optional[Any] = None) -> Any:
    """``out = alpha * a @ b + beta * out``: a [..., m, k], b [..., k, n] -> [..., m, n]."""
    ashape, dt, dev, a = _meta(a)
    bshape, _, _, b = _meta(b)
    out = _out("gemm", out, ashape[:-1] + (bshape[-1],), dt, dev)
    _op("gemm")(out, a, b, float(alpha), float(beta))
    return out
