"""``anyffi.ops``: the operator library (the ``ops.*`` global functions), out-of-place.

The globals write into a caller-allocated output given first (``ops.add(c, a, b)``). Each wrapper
here takes the inputs first and ``out=None``: without ``out`` it allocates the output with
``runtime.empty`` on the inputs' device and returns it (an :class:`anyffi.Tensor`; ``.numpy()``
views it). Inputs are anyffi Tensors, numpy arrays or any DLPack producer; numpy arrays and other
producers are passed as borrowed ``DLTensor*`` views, with no copy.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Optional

from . import runtime
from .device import Device, cpu
from .dtype import dtype
from .function import GlobalFunctions
from .tensor import Tensor, check_tensor_like, check_writable, from_dlpack

api = GlobalFunctions("ops")


def _check(op: str, name: str, x: Any) -> Any:
    """TypeError naming the op and the argument unless ``x`` is tensor-like; what to pass (a
    capsule's Tensor)."""
    return check_tensor_like(f"anyffi.ops.{op}", name, x)


def _meta(op: str, name: str, x: Any) -> tuple[tuple[int, ...], dtype, Device, Any]:
    """(shape, dtype, device, the value to pass) of the tensor-like argument ``name``."""
    if isinstance(x, Tensor):
        return x.shape, x.dtype, x.device, x
    x = _check(op, name, x)
    if isinstance(x, Tensor):  # a capsule's
        return x.shape, x.dtype, x.device, x
    if type(x).__module__ == "numpy":
        try:
            return tuple(x.shape), dtype(x.dtype), cpu, x
        except ValueError:  # a dtype the library has no name for (complex64): as a DLPack producer
            pass
    t = from_dlpack(x)
    return t.shape, t.dtype, t.device, t


def _ndim(op: str, name: str, shape: tuple[int, ...], *allowed: int) -> None:
    """ValueError unless ``shape`` has one of the ``allowed`` ranks."""
    if len(shape) not in allowed:
        want = " or ".join(f"{n}-D" for n in allowed)
        raise ValueError(f"anyffi.ops.{op}: `{name}` must be {want}, got shape {shape}")


def _number(op: str, name: str, x: Any) -> float:
    """``x`` as a Python float, or a TypeError naming the argument."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) and not hasattr(x, "__float__"):
        raise TypeError(f"anyffi.ops.{op}: `{name}` must be a number, got {type(x).__name__}")
    try:
        return float(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"anyffi.ops.{op}: `{name}` must be a number, got {type(x).__name__}") from e


def _device_of(x: Any) -> Optional[Device]:
    """The device of a tensor-like (None for a bare capsule, which says nothing until used)."""
    if isinstance(x, Tensor):
        return x.device
    if type(x).__module__ == "numpy":
        return cpu
    d = getattr(x, "__dlpack_device__", None)
    return Device(*d()) if d is not None else None


def _out(op: str, out: Optional[Any], shape, dt, dev) -> Any:
    """``out`` checked, or a new output of ``shape``/``dt`` on ``dev``."""
    if out is None:
        return runtime.empty(shape, dt, dev)
    out = _check(op, "out", out)
    check_writable(f"anyffi.ops.{op}", "out", out)
    return out


# The library's names for the arguments that this module names otherwise (its outputs come
# first; here they are `out`, and its `in` is `x`): its messages are rewritten to these names.
_RENAMES: dict[str, dict[str, str]] = {
    "add": {"c": "out"},
    "argmax": {"max_idx": "out[0]", "max_val": "out[1]"},
    "linear": {"in": "x"},
    "rearrange": {"in": "x"},
    "rms_norm": {"in": "x"},
    "rope": {"in": "x"},
    "self_attention": {"attn_val": "out"},
    "gemm": {"c": "out"},
}


def _op(name: str):
    return api.require(name, "the operator library")


def _call(op: str, *args: Any, made: bool = False, first: str = "", dev: Any = None, inputs: tuple = ()) -> None:
    """Calls the global ``ops.<op>``; its errors name this module's function and arguments.
    ``made``: the output was allocated by the wrapper (the caller gave no ``out``) on ``dev``,
    the device of the input named ``first``; when the library refuses the call for a device,
    an input of ``inputs`` ((name, value) pairs) on another device is named against ``first``,
    not against the output the user never saw. Only on failure: the success path pays nothing,
    and what the library accepts is never refused here."""
    try:
        _op(op)(*args)
        return
    except Exception as e:
        new = _reworded(op, e, made, first, dev, inputs)
        if new is None:
            raise
    # raised outside the handler, so that it keeps the original's own context
    raise new


def _reworded(op: str, e: Exception, made: bool, first: str, dev: Any, inputs: tuple) -> Optional[Exception]:
    """The exception ``_call`` raises for the library's ``e``, or None to raise ``e`` itself."""
    msg = e.args[0] if len(e.args) == 1 and isinstance(e.args[0], str) else None
    if made and isinstance(e, ValueError) and msg is not None and " is on " in msg:
        for name, x in inputs:
            d = _device_of(x)
            if d is not None and d != dev:
                new = ValueError(f"anyffi.ops.{op}: `{name}` is on {d} but `{first}` is on {dev}")
                new.__suppress_context__ = True
                return new
    if msg is None or not msg.startswith(f"ops.{op}: "):
        return None
    msg = "anyffi." + msg
    for raw, mine in _RENAMES.get(op, {}).items():
        msg = msg.replace(f"`{raw}`", f"`{mine}`")
    if made and first:
        # an output made here has the shape of `first`: a rank the library refuses is that input's
        msg = msg.replace(f"anyffi.ops.{op}: `out` has ndim", f"anyffi.ops.{op}: `{first}` has ndim")
    # a copy: `e` may be the very object a Python callback raised (errors._Sent), which its owner
    # keeps; copy.copy keeps kind, backtrace and notes (its own list of them), and the chain
    # (cause, context) is the original's
    try:
        new = copy.copy(e)
        new.args = (msg,)
    except Exception:  # an exception class that cannot be copied: raised as it came
        return None
    notes = getattr(e, "__notes__", None)
    if isinstance(notes, list):
        new.__notes__ = list(notes)
    new.__cause__, new.__context__ = e.__cause__, e.__context__
    new.__suppress_context__ = e.__suppress_context__
    return new.with_traceback(e.__traceback__)


def add(a: Any, b: Any, out: Optional[Any] = None) -> Any:
    """``a + b`` element-wise (same shape and dtype)."""
    shape, dt, dev, a = _meta("add", "a", a)
    b = _check("add", "b", b)
    made = out is None
    out = _out("add", out, shape, dt, dev)
    _call("add", out, a, b, made=made, first="a", dev=dev, inputs=(("b", b),))
    return out


def argmax(vals: Any, out: Optional[tuple[Any, Any]] = None) -> tuple[Any, Any]:
    """``(max_idx, max_val)`` of a 1-D tensor: int64 ``[1]`` and ``[1]`` of its dtype."""
    _, dt, dev, vals = _meta("argmax", "vals", vals)
    if out is None:
        max_idx, max_val = runtime.empty((1,), "int64", dev), runtime.empty((1,), dt, dev)
    else:
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError(
                f"anyffi.ops.argmax: `out` must be a pair (max_idx, max_val), got {type(out).__name__}"
            )
        max_idx, max_val = out
        max_idx = _check("argmax", "out[0]", max_idx)
        max_val = _check("argmax", "out[1]", max_val)
        check_writable("anyffi.ops.argmax", "out[0]", max_idx)
        check_writable("anyffi.ops.argmax", "out[1]", max_val)
    _call("argmax", max_idx, max_val, vals)
    return max_idx, max_val


def embedding(index: Any, weight: Any, out: Optional[Any] = None) -> Any:
    """Rows of ``weight`` [V, d] picked by ``index`` (int64 [n]) -> [n, d]."""
    ishape, _, _, index = _meta("embedding", "index", index)
    wshape, dt, dev, weight = _meta("embedding", "weight", weight)
    _ndim("embedding", "index", ishape, 1)
    _ndim("embedding", "weight", wshape, 2)
    made = out is None
    out = _out("embedding", out, (ishape[0], wshape[1]), dt, dev)
    _call("embedding", out, index, weight, made=made, first="weight", dev=dev, inputs=(("index", index),))
    return out


def linear(x: Any, weight: Any, bias: Any = None, out: Optional[Any] = None) -> Any:
    """``x @ weight.T + bias``: x [..., k], weight [n, k], bias [n] or None -> [..., n]."""
    xshape, dt, dev, x = _meta("linear", "x", x)
    wshape, _, _, weight = _meta("linear", "weight", weight)
    if bias is not None:
        bias = _check("linear", "bias", bias)
    if not xshape:
        raise ValueError(f"anyffi.ops.linear: `x` must have at least 1 dimension, got shape {xshape}")
    _ndim("linear", "weight", wshape, 2)
    made = out is None
    out = _out("linear", out, xshape[:-1] + (wshape[0],), dt, dev)
    ctx = dict(made=made, first="x", dev=dev, inputs=(("weight", weight), ("bias", bias)))
    if len(xshape) == 1:
        # the library takes [M, K] rows: a vector runs as one row, as torch's F.linear
        _call("linear", _as_row("linear", "out", out), _as_row("linear", "x", x), weight, bias, **ctx)
        return out
    _call("linear", out, x, weight, bias, **ctx)
    return out


def _as_row(op: str, name: str, t: Any) -> Any:
    """A 1-D tensor-like as a [1, n] view of the same memory (no copy)."""
    if not isinstance(t, Tensor):
        if hasattr(t, "reshape") and getattr(t, "ndim", None) == 1:
            return t.reshape(1, -1)  # numpy: always a view for a 1-D array
        t = from_dlpack(t)  # other producers and capsules (checked by the caller to be ones)
    if len(t.shape) != 1:
        raise ValueError(f"anyffi.ops.{op}: `{name}` must be 1-D when `x` is, got shape {tuple(t.shape)}")
    return runtime.view(t, (1,) + tuple(t.shape))


def rearrange(x: Any, out: Optional[Any] = None) -> Any:
    """A contiguous copy of ``x`` (or a strided copy into ``out``)."""
    shape, dt, dev, x = _meta("rearrange", "x", x)
    made = out is None
    out = _out("rearrange", out, shape, dt, dev)
    _call("rearrange", out, x, made=made, first="x", dev=dev)
    return out


def rms_norm(x: Any, weight: Any, eps: float = 1e-5, out: Optional[Any] = None) -> Any:
    """Row-wise RMS normalisation over the last dimension, scaled by ``weight``."""
    shape, dt, dev, x = _meta("rms_norm", "x", x)
    weight = _check("rms_norm", "weight", weight)
    eps = _number("rms_norm", "eps", eps)
    made = out is None
    out = _out("rms_norm", out, shape, dt, dev)
    _call("rms_norm", out, x, weight, eps, made=made, first="x", dev=dev, inputs=(("weight", weight),))
    return out


def rope(x: Any, pos_ids: Any, theta: float = 10000.0, out: Optional[Any] = None) -> Any:
    """Rotary position embedding of ``x`` [seq, nhead, d] at positions ``pos_ids`` (int64 [seq])."""
    shape, dt, dev, x = _meta("rope", "x", x)
    pos_ids = _check("rope", "pos_ids", pos_ids)
    theta = _number("rope", "theta", theta)
    made = out is None
    out = _out("rope", out, shape, dt, dev)
    _call("rope", out, x, pos_ids, theta, made=made, first="x", dev=dev, inputs=(("pos_ids", pos_ids),))
    return out


def self_attention(q: Any, k: Any, v: Any, scale: Optional[float] = None, out: Optional[Any] = None) -> Any:
    """Causal attention: q [seq, nh, d], k [total, nkvh, d], v [total, nkvh, dv] -> [seq, nh, dv]."""
    qshape, dt, dev, q = _meta("self_attention", "q", q)
    kshape, _, _, k = _meta("self_attention", "k", k)
    vshape, _, _, v = _meta("self_attention", "v", v)
    for name, shape in (("q", qshape), ("k", kshape), ("v", vshape)):
        _ndim("self_attention", name, shape, 3)
    if scale is None:
        scale = 1.0 / math.sqrt(qshape[-1]) if qshape[-1] > 0 else 1.0
    scale = _number("self_attention", "scale", scale)
    made = out is None
    out = _out("self_attention", out, (qshape[0], qshape[1], vshape[-1]), dt, dev)
    _call("self_attention", out, q, k, v, scale, made=made, first="q", dev=dev, inputs=(("k", k), ("v", v)))
    return out


def swiglu(gate: Any, up: Any, out: Optional[Any] = None) -> Any:
    """``up * silu(gate)`` element-wise."""
    shape, dt, dev, gate = _meta("swiglu", "gate", gate)
    up = _check("swiglu", "up", up)
    made = out is None
    out = _out("swiglu", out, shape, dt, dev)
    _call("swiglu", out, gate, up, made=made, first="gate", dev=dev, inputs=(("up", up),))
    return out


def gemm(a: Any, b: Any, alpha: float = 1.0, beta: float = 0.0, out: Optional[Any] = None) -> Any:
    """``out = alpha * a @ b + beta * out``: a [m, k] or [batch, m, k], b [k, n] or
    [batch, k, n] -> [m, n] or [batch, m, n]; a batch of 1, or a 2-D operand, is broadcast
    against the other's batch, as in ``numpy.matmul``. ``beta`` other than 0 needs ``out`` (the
    C it scales): without it the output is newly allocated and uninitialised."""
    ashape, dt, dev, a = _meta("gemm", "a", a)
    bshape, _, _, b = _meta("gemm", "b", b)
    _ndim("gemm", "a", ashape, 2, 3)
    _ndim("gemm", "b", bshape, 2, 3)
    alpha = _number("gemm", "alpha", alpha)
    beta = _number("gemm", "beta", beta)
    if out is None and beta != 0.0:
        # the output is allocated uninitialised: beta * out would read garbage
        raise ValueError(
            f"anyffi.ops.gemm: `beta` = {beta} needs `out` (the C that beta scales); "
            "without `out` pass beta=0"
        )
    batches = [s[0] for s in (ashape, bshape) if len(s) == 3]
    mn = (ashape[-2], bshape[-1])
    if not batches:
        shape = mn
    else:
        big = [n for n in batches if n != 1]
        if len(set(big)) > 1:
            raise ValueError(
                f"anyffi.ops.gemm: the batch dimensions of `a` {ashape} and `b` {bshape} do not broadcast"
            )
        shape = (big[0] if big else 1,) + mn
    made = out is None
    out = _out("gemm", out, shape, dt, dev)
    _call("gemm", out, a, b, alpha, beta, made=made, first="a", dev=dev, inputs=(("b", b),))
    return out
