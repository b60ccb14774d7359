"""anyffi.runtime and anyffi.ops on the CPU, against numpy references.

Each test needs the ``runtime.*``/``ops.*`` globals it names and is skipped (naming them) when the
loaded library lacks them.
"""

from __future__ import annotations

import ctypes
import math

import anyffi
import pytest
from anyffi import ops, runtime
from conftest import needs_global

np = pytest.importorskip("numpy")
# numpy >= 2.1: versioned DLPack capsules (with the read-only flag)
NUMPY_DLPACK_1 = tuple(int(p) for p in np.__version__.split(".")[:2]) >= (2, 1)

rng = np.random.default_rng(0)


def rand(*shape, dtype="float32"):
    return rng.random(shape, dtype=np.float64).astype(dtype)


@needs_global("runtime.device_count")
def test_device_count():
    assert runtime.device_count("cpu") == 1
    assert runtime.device_count(2) >= 0
    with pytest.raises(TypeError, match=r"anyffi\.runtime\.device_count: `device_type` must be an int, got float"):
        runtime.device_count(2.5)


@needs_global("runtime.free_device", "runtime.memcpy")
def test_pointer_arguments_are_checked_and_named():
    with pytest.raises(ValueError, match=r"anyffi\.runtime\.free_device: `ptr` = 18446744073709551616 is not an address"):
        runtime.free_device("cpu", 2**64)
    with pytest.raises(ValueError, match=r"`ptr` = -1 is not an address"):
        runtime.free_device("cpu", -1)
    with pytest.raises(TypeError, match=r"anyffi\.runtime\.memcpy: `src` must be a pointer \(int, ctypes\.c_void_p or None\), got str"):
        runtime.memcpy(0, "x", 0, 0)
    with pytest.raises(TypeError, match=r"`dst` must be a pointer"):
        runtime.memcpy(True, 0, 0, 0)
    runtime.free_device("cpu", None)  # NULL: nothing to free


@needs_global("runtime.malloc_host", "runtime.free_host", "runtime.memcpy")
def test_malloc_memcpy_free():
    src = np.arange(16, dtype="uint8")
    dst = np.zeros(16, dtype="uint8")
    p = runtime.malloc_host("cpu", 16)
    assert isinstance(p, ctypes.c_void_p) and p.value
    runtime.memcpy(p, src.ctypes.data, 16, runtime.H2H)
    runtime.memcpy(dst.ctypes.data, p, 16, runtime.H2H)
    runtime.free_host("cpu", p)
    np.testing.assert_array_equal(src, dst)


@needs_global("runtime.stream_create", "runtime.stream_synchronize", "runtime.stream_destroy")
def test_streams_on_cpu():
    s = runtime.stream_create("cpu")
    runtime.stream_synchronize("cpu", s)
    runtime.stream_destroy("cpu", s)


@needs_global("runtime.empty")
def test_empty():
    t = runtime.empty((3, 4), "float32", "cpu")
    assert isinstance(t, anyffi.Tensor)
    assert t.shape == (3, 4) and t.dtype == "float32" and t.device == anyffi.device("cpu")
    assert t.strides == (4, 1) and t.is_contiguous()
    a = t.numpy()
    a[:] = 7
    assert (t.numpy() == 7).all()


@needs_global("runtime.empty", "runtime.view", "runtime.permute", "runtime.slice")
def test_views_follow_llaisys_semantics():
    t = runtime.empty((3, 4, 5), "int64", "cpu")
    t.numpy()[:] = np.arange(60).reshape(3, 4, 5)
    v = runtime.view(t, (6, 10))
    assert v.shape == (6, 10) and v.strides == (10, 1)
    p = runtime.permute(t, (2, 0, 1))
    assert p.shape == (5, 3, 4) and p.strides == (1, 20, 5)
    s = runtime.slice(t, 2, 1, 4)
    assert s.shape == (3, 4, 3) and s.strides == (20, 5, 1)
    np.testing.assert_array_equal(s.numpy(), np.arange(60).reshape(3, 4, 5)[:, :, 1:4])
    with pytest.raises(Exception):
        runtime.view(runtime.permute(t, (1, 0, 2)), (12, 5))


@needs_global("runtime.empty", "runtime.contiguous")
def test_contiguous():
    x = np.arange(12.0, dtype="float32").reshape(3, 4).T
    c = runtime.contiguous(x)
    assert c.is_contiguous()
    np.testing.assert_array_equal(c.numpy(), x)


@needs_global("runtime.empty", "runtime.copy_")
def test_copy_():
    dst = runtime.empty((4,), "float32", "cpu")
    runtime.copy_(dst, np.arange(4, dtype="float32"))
    np.testing.assert_array_equal(dst.numpy(), np.arange(4))


@needs_global("runtime.empty", "ops.add", "ops.argmax", "runtime.copy_")
def test_read_only_numpy_outputs_are_refused():
    # A DLTensor* view has no read-only flag: without the check the op would write through a
    # broadcast view into the one element behind it.
    a, b = rand(2, 3), rand(2, 3)
    scalar = np.zeros((), np.float32)
    ro = np.broadcast_to(scalar, (2, 3))
    with pytest.raises(ValueError, match=r"anyffi\.ops\.add: `out` is a read-only numpy array"):
        ops.add(a, b, out=ro)
    frozen = np.zeros(1, np.int64)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match=r"anyffi\.ops\.argmax: `out\[0\]`"):
        ops.argmax(rand(5), out=(frozen, np.zeros(1, np.float32)))
    with pytest.raises(ValueError, match=r"anyffi\.runtime\.copy_: `dst`"):
        runtime.copy_(ro, a)
    assert scalar == 0
    # read-only inputs are fine
    a.flags.writeable = False
    np.testing.assert_allclose(ops.add(a, b).numpy(), a + b, rtol=1e-6)


@needs_global("runtime.empty", "ops.add")
def test_add():
    a, b = rand(2, 3), rand(2, 3)
    np.testing.assert_allclose(ops.add(a, b).numpy(), a + b, rtol=1e-5, atol=1e-5)
    out = np.empty_like(a)
    assert ops.add(a, b, out=out) is out
    np.testing.assert_allclose(out, a + b, rtol=1e-5, atol=1e-5)


@needs_global("runtime.empty", "ops.argmax")
def test_argmax():
    v = np.array([1, 3, 3, 2], dtype="float32")
    idx, val = ops.argmax(v)
    assert idx.numpy()[0] == 1 and val.numpy()[0] == 3


@needs_global("runtime.empty", "ops.embedding")
def test_embedding():
    w = rand(5, 3)
    idx = np.array([4, 0, 4], dtype="int64")
    np.testing.assert_array_equal(ops.embedding(idx, w).numpy(), w[idx])


@needs_global("runtime.empty", "ops.linear")
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear(with_bias):
    x, w, b = rand(2, 4) * 0.1, rand(3, 4) * 0.01, rand(3)
    ref = x @ w.T + (b if with_bias else 0)
    got = ops.linear(x, w, b if with_bias else None).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@needs_global("runtime.empty", "ops.rms_norm")
def test_rms_norm():
    x, w = rand(3, 8), rand(8)
    ref = w * x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(ops.rms_norm(x, w, 1e-5).numpy(), ref, rtol=1e-5, atol=1e-5)


@needs_global("runtime.empty", "ops.rope")
def test_rope():
    x = rand(2, 1, 4)
    pos = np.array([0, 1], dtype="int64")
    d = 4
    j = np.arange(d // 2, dtype="float32")
    phi = pos[:, None, None].astype("float32") / (10000.0 ** (2 * j / d))
    a, b = x[..., : d // 2], x[..., d // 2 :]
    ref = np.concatenate([a * np.cos(phi) - b * np.sin(phi), b * np.cos(phi) + a * np.sin(phi)], -1)
    np.testing.assert_allclose(ops.rope(x, pos, 10000.0).numpy(), ref, rtol=1e-4, atol=1e-4)


@needs_global("runtime.empty", "ops.swiglu")
def test_swiglu():
    g, u = rand(2, 3), rand(2, 3)
    np.testing.assert_allclose(ops.swiglu(g, u).numpy(), u * g / (1 + np.exp(-g)), rtol=1e-5, atol=1e-5)


@needs_global("runtime.empty", "ops.self_attention")
def test_self_attention_causal_gqa():
    qlen, kvlen, nh, nkvh, d = 5, 11, 4, 2, 8
    q, k, v = rand(qlen, nh, d), rand(kvlen, nkvh, d), rand(kvlen, nkvh, d)
    scale = 1 / math.sqrt(d)
    ref = np.zeros((qlen, nh, d), dtype="float64")
    for h in range(nh):
        g = h // (nh // nkvh)
        s = (q[:, h, :] @ k[:, g, :].T) * scale
        mask = np.tril(np.ones((qlen, kvlen)), k=kvlen - qlen) == 0
        s[mask] = -np.inf
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        ref[:, h, :] = p @ v[:, g, :]
    np.testing.assert_allclose(ops.self_attention(q, k, v, scale).numpy(), ref, rtol=1e-5, atol=1e-5)


@needs_global("runtime.empty", "ops.rearrange")
def test_rearrange():
    x = np.arange(24.0, dtype="float32").reshape(2, 3, 4).transpose(2, 0, 1)
    np.testing.assert_array_equal(ops.rearrange(x).numpy(), x)


@needs_global("runtime.empty", "ops.gemm")
def test_gemm():
    a, b = rand(3, 4), rand(4, 5)
    np.testing.assert_allclose(ops.gemm(a, b).numpy(), a @ b, rtol=1e-5, atol=1e-5)
    c = np.ones((3, 5), dtype="float32")
    ops.gemm(a, b, 2.0, 1.0, out=c)
    np.testing.assert_allclose(c, 2 * (a @ b) + 1, rtol=1e-5, atol=1e-5)


def test_missing_runtime_global_names_itself():
    if anyffi.get_global_func("runtime.empty", allow_missing=True) is not None:
        pytest.skip("the runtime is present")
    with pytest.raises(NotImplementedError, match="runtime.empty"):
        runtime.empty((2,), "float32")


@needs_global("runtime.empty", "ops.linear", "ops.gemm")
def test_wrappers_allocate_outputs_of_every_supported_rank():
    # linear on [..., k] inputs, gemm broadcasting a 2-D or batch-1 operand as numpy.matmul does
    x, w = rand(2, 3, 4), rand(5, 4)
    np.testing.assert_allclose(ops.linear(x, w).numpy(), x @ w.T, rtol=1e-5, atol=1e-5)
    a2, a1, b = rand(2, 3), rand(1, 2, 3), rand(4, 3, 5)
    for a in (a2, a1):
        got = ops.gemm(a, b).numpy()
        assert got.shape == (4, 2, 5)
        np.testing.assert_allclose(got, np.matmul(a, b), rtol=1e-5, atol=1e-5)
    got = ops.gemm(rand(4, 2, 3), rand(3, 5)).numpy()
    assert got.shape == (4, 2, 5)
    with pytest.raises(ValueError, match=r"ops\.gemm.*do not broadcast"):
        ops.gemm(rand(3, 2, 3), b)


@needs_global("runtime.empty", "ops.linear", "ops.rms_norm", "ops.rope", "ops.add")
def test_empty_numpy_arrays():
    # numpy gives empty arrays zero strides; there is nothing to read, so they are accepted
    z = np.zeros((0, 8), dtype="float32")
    assert z.strides == (0, 0) or z.size == 0
    assert ops.rms_norm(z, rand(8)).shape == (0, 8)
    assert ops.linear(np.zeros((0, 4), "float32"), rand(3, 4)).shape == (0, 3)
    assert ops.linear(rand(2, 4), np.zeros((0, 4), "float32")).shape == (2, 0)
    assert ops.rope(np.zeros((0, 2, 4), "float32"), np.zeros(0, "int64")).shape == (0, 2, 4)
    assert ops.add(z, z).shape == (0, 8)


@needs_global("runtime.empty", "ops.add", "ops.argmax", "ops.embedding", "ops.linear",
              "ops.self_attention", "ops.gemm", "ops.rms_norm", "ops.rope", "ops.swiglu")
def test_wrapper_errors_name_the_op_and_the_argument():
    x, w = rand(2, 3, 4), rand(5, 4)
    cases = [
        (TypeError, lambda: ops.add(None, x), r"ops\.add: `a`.*NoneType"),
        (TypeError, lambda: ops.add(x, [1.0]), r"ops\.add: `b`.*list"),
        (TypeError, lambda: ops.argmax([1.0, 2.0]), r"ops\.argmax: `vals`"),
        (TypeError, lambda: ops.swiglu(x, None), r"ops\.swiglu: `up`"),
        (TypeError, lambda: ops.rope(x, None), r"ops\.rope: `pos_ids`"),
        (ValueError, lambda: ops.embedding(np.zeros((), "int64"), w), r"ops\.embedding: `index` must be 1-D"),
        (ValueError, lambda: ops.embedding(np.zeros(2, "int64"), rand(5)), r"ops\.embedding: `weight` must be 2-D"),
        (ValueError, lambda: ops.linear(np.zeros((), "float32"), w), r"ops\.linear: `x`"),
        (ValueError, lambda: ops.self_attention(np.zeros((), "float32"), x, x), r"ops\.self_attention: `q` must be 3-D"),
        (ValueError, lambda: ops.gemm(rand(2, 3), np.zeros((), "float32")), r"ops\.gemm: `b` must be 2-D or 3-D"),
        (TypeError, lambda: ops.self_attention(x, x, x, scale="a"), r"ops\.self_attention: `scale` must be a number"),
        (TypeError, lambda: ops.rms_norm(x, rand(4), eps=None), r"ops\.rms_norm: `eps` must be a number"),
        (TypeError, lambda: ops.gemm(rand(2, 3), rand(3, 2), alpha="x"), r"ops\.gemm: `alpha`"),
    ]
    for kind, call, pattern in cases:
        with pytest.raises(kind, match=pattern):
            call()


@needs_global("runtime.empty", "ops.add", "ops.argmax", "ops.linear", "ops.self_attention", "ops.gemm", "ops.rms_norm")
def test_library_errors_through_the_wrappers_use_the_wrappers_names():
    # the library names its arguments in its own order (`c`, `in`, `attn_val`); through the
    # wrappers a message names the wrapper (`anyffi.ops.X`) and the argument the user passed
    f32 = lambda *s: np.zeros(s, np.float32)  # noqa: E731
    cases = [
        (ValueError, lambda: ops.add(f32(2, 3), f32(2, 3), out=f32(3, 2)), r"^anyffi\.ops\.add: `out` must have the shape of `a`"),
        (ValueError, lambda: ops.linear(np.asfortranarray(f32(3, 4)), f32(5, 4)), r"^anyffi\.ops\.linear: `x` must have stride 1"),
        (ValueError, lambda: ops.self_attention(f32(1, 2, 4), f32(3, 2, 4), f32(3, 2, 4), out=f32(1, 2, 5)),
         r"^anyffi\.ops\.self_attention: `out` must have shape"),
        (TypeError, lambda: ops.argmax(f32(4), out=(f32(1), f32(1))), r"^anyffi\.ops\.argmax: `out\[0\]` must have dtype int64"),
        (ValueError, lambda: ops.gemm(f32(2, 3), f32(3, 4), out=f32(2, 3)), r"^anyffi\.ops\.gemm: `out` must have shape"),
        # the dtype is written once when the input is float32 itself
        (TypeError, lambda: ops.rms_norm(f32(2, 4), np.ones(4)), r"`weight` must have the dtype of `x` \(float32\), got float64(\n|$)"),
        (TypeError, lambda: ops.add(f32(2), f32(2), out=[1.0, 2.0]), r"^anyffi\.ops\.add: `out` must be an anyffi\.Tensor.*got list"),
        (TypeError, lambda: ops.argmax(f32(4), out=(None, f32(1))), r"^anyffi\.ops\.argmax: `out\[0\]` must be"),
        # a rank past 8: the input's, not that of the output the wrapper made from it
        (ValueError, lambda: ops.add(f32(*[1] * 9), f32(*[1] * 9)), r"^anyffi\.ops\.add: `a` has ndim 9"),
        (ValueError, lambda: ops.rearrange(f32(*[1] * 9)), r"^anyffi\.ops\.rearrange: `x` has ndim 9"),
        (ValueError, lambda: ops.add(f32(*[1] * 9), f32(*[1] * 9), out=f32(*[1] * 9)), r"^anyffi\.ops\.add: `out` has ndim 9"),
    ]
    for kind, call, pattern in cases:
        with pytest.raises(kind, match=pattern):
            call()


class _OnDevice:
    """A DLPack producer that says it lives on cuda:0 (the stubbed op below never exports it)."""

    def __dlpack__(self, **kw):
        raise AssertionError("not reached: the op is a stub")

    def __dlpack_device__(self):
        return (2, 0)


@needs_global("runtime.empty")
def test_an_input_on_another_device_is_named_against_the_first_input(monkeypatch):
    # without `out` the wrapper allocates on the first input's device; when the library then
    # refuses another input for its device, the message names that input and the first one,
    # not the output the user never saw. Only after the library refused: a device read from
    # __dlpack_device__ (torch reports pinned CPU memory as cuda_host, and exports it as cpu)
    # never refuses what the library accepts.
    seen = []

    def refuse(*args):
        seen.append(args)
        raise ValueError("ops.add: `b` is on cuda:0 but `c` is on cpu:0")

    monkeypatch.setattr(ops, "_op", lambda name: refuse)
    with pytest.raises(ValueError, match=r"^anyffi\.ops\.add: `b` is on cuda:0 but `a` is on cpu:0") as e:
        ops.add(rand(3), _OnDevice())
    assert e.value.__cause__ is None and e.value.__suppress_context__
    # with `out` given, the library's message stands (renamed): the user passed that output
    with pytest.raises(ValueError, match=r"^anyffi\.ops\.add: `b` is on cuda:0 but `out` is on cpu:0"):
        ops.add(rand(3), _OnDevice(), out=np.zeros(3, np.float32))
    # another ValueError is never turned into a device message
    monkeypatch.setattr(ops, "_op", lambda name: lambda *a: (_ for _ in ()).throw(ValueError("ops.add: `c` must have the shape of `a` (3,), got (4,)")))
    with pytest.raises(ValueError, match=r"^anyffi\.ops\.add: `out` must have the shape"):
        ops.add(rand(3), _OnDevice())


@needs_global("runtime.empty", "ops.add")
def test_a_callbacks_exception_is_not_rewritten_in_place(monkeypatch):
    # an `ops.add` that is a Python function behind the ABI: its exception comes back as the
    # very object it raised; the wrapper's renamed message goes on a copy, the user's object
    # stays as it was
    kept = []

    def fake(c, a, b):
        try:
            {}["missing-key"]
        except KeyError:
            err = ValueError("ops.add: `c` is not what I wanted")
            if hasattr(err, "add_note"):  # Python 3.11+
                err.add_note("a note from the callback")
            kept.append(err)
            raise err

    monkeypatch.setitem(ops.api._cache, "add", anyffi.Function(fake))
    with pytest.raises(ValueError, match=r"^anyffi\.ops\.add: `out` is not what I wanted") as e:
        ops.add(rand(2), rand(2))
    assert e.value is not kept[0]
    assert kept[0].args == ("ops.add: `c` is not what I wanted",)
    # the copy has the original's chain (the KeyError it was raised while handling) and notes of
    # its own: a note the caller adds does not reach the callback's object
    assert isinstance(e.value.__context__, KeyError) and not e.value.__suppress_context__
    if hasattr(e.value, "add_note"):
        e.value.add_note("a note the caller adds")
        assert "a note from the callback" in e.value.__notes__
        assert kept[0].__notes__.count("a note the caller adds") == 0


@needs_global("runtime.empty", "runtime.malloc_device", "runtime.set_device", "runtime.view", "runtime.copy_",
              "runtime.device_count")
def test_runtime_wrapper_errors_name_the_function_and_the_argument():
    f32 = np.zeros(2, np.float32)
    cases = [
        (ValueError, lambda: runtime.malloc_device("cpu", 1 << 70), r"anyffi\.runtime\.malloc_device: `nbytes` = \d+ does not fit in int64"),
        (ValueError, lambda: runtime.empty((2, 1 << 70)), r"anyffi\.runtime\.empty: `shape`\[1\] = \d+ does not fit in int64"),
        (ValueError, lambda: runtime.empty((2,), "flot32"), r"anyffi\.runtime\.empty: `dt`: unknown dtype `flot32`"),
        (TypeError, lambda: runtime.set_device(None), r"anyffi\.runtime\.set_device: `d`: .*got NoneType"),
        (ValueError, lambda: runtime.device_count("tpu"), r"anyffi\.runtime\.device_count: `device_type`: .*'tpu'"),
        (TypeError, lambda: runtime.view([1, 2], (2,)), r"anyffi\.runtime\.view: `t` must be an anyffi\.Tensor.*got list"),
        (TypeError, lambda: runtime.copy_(f32, [1.0, 2.0]), r"anyffi\.runtime\.copy_: `src` must be an anyffi\.Tensor.*got list"),
        # the library's own wording, as the ops word the same checks
        (TypeError, lambda: runtime.copy_(f32, np.zeros(2)), r"runtime\.copy_: `src` must have the dtype of `dst` \(float32\), got float64"),
        (ValueError, lambda: runtime.copy_(f32, np.zeros(3, np.float32)), r"runtime\.copy_: `src` must have the shape of `dst` \(2,\), got \(3,\)"),
        # the one CPU device: "valid ids: 0", not a Rust range
        (ValueError, lambda: runtime.set_device("cpu:1"), r"device id 1 is out of range for cpu \(valid ids: 0\)(\n|$)"),
        (ValueError, lambda: anyffi.device("cuda", -1), r"anyffi\.Device: device index must be 0 to 2\*\*31 - 1, got -1"),
    ]
    for kind, call, pattern in cases:
        with pytest.raises(kind, match=pattern):
            call()
    # the raw global: an integer past int64 is a value out of range, not a wrong type
    with pytest.raises(ValueError, match=r"runtime\.device_count: argument `device_type` is an integer that does not fit in int64"):
        anyffi.get_global_func("runtime.device_count")(1 << 70)
    with pytest.raises(ValueError, match=r"runtime\.empty: argument `shape`: element 0 of the Array does not fit in int64"):
        anyffi.get_global_func("runtime.empty")(anyffi.Array([1 << 70]), "float32", anyffi.device("cpu"))


@needs_global("runtime.empty", "runtime.view", "runtime.permute", "runtime.slice", "runtime.contiguous", "runtime.copy_")
def test_read_only_memory_stays_read_only_through_views():
    x = np.arange(8, dtype="int64")
    x.flags.writeable = False
    t = anyffi.from_dlpack(x)
    derived = [
        runtime.slice(t, 0, 0, 4),
        runtime.view(t, (2, 4)),
        runtime.permute(runtime.view(t, (2, 4)), (1, 0)),
        runtime.contiguous(t),
    ]
    for v in derived:
        assert v.read_only and not v.numpy().flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        runtime.copy_(runtime.view(t, (2, 4)), np.zeros((2, 4), "int64"))
    assert (x == np.arange(8)).all()


@needs_global("runtime.empty", "runtime.slice", "runtime.permute", "runtime.copy_", "runtime.stream_destroy")
def test_runtime_layout_edges():
    # slices of negative-stride tensors (reversed numpy views) move the data pointer
    r = anyffi.from_dlpack(np.arange(12)[::-1])
    np.testing.assert_array_equal(runtime.slice(r, 0, 2, 5).numpy(), [9, 8, 7])
    m = np.arange(12).reshape(3, 4)[::-1, ::-1]
    np.testing.assert_array_equal(runtime.slice(anyffi.from_dlpack(m), 1, 1, 3).numpy(), m[:, 1:3])
    # overlapping copies read the source first; a destination writing an element twice is refused
    t = runtime.empty((4, 4), "int64")
    a = t.numpy()
    a[:] = np.arange(16).reshape(4, 4)
    runtime.copy_(t, runtime.permute(t, (1, 0)))
    np.testing.assert_array_equal(a, np.arange(16).reshape(4, 4).T)
    c = np.zeros(4, "int64")
    wide = np.lib.stride_tricks.as_strided(c, (3, 4), (0, 8), writeable=True)
    with pytest.raises(ValueError, match="zero stride"):
        runtime.copy_(wide, np.arange(12).reshape(3, 4))
    # the NULL stream can be destroyed (a no-op, as in LLAISYS on the CPU)
    runtime.stream_destroy("cpu", None)


@needs_global("runtime.empty", "runtime.slice", "runtime.malloc_device")
def test_runtime_wrappers_refuse_non_integers():
    t = runtime.empty((4, 4))
    with pytest.raises(TypeError, match=r"runtime\.slice: `start` must be an int"):
        runtime.slice(t, 0, 0.9, 2)
    with pytest.raises(TypeError, match=r"runtime\.malloc_device: `nbytes`"):
        runtime.malloc_device("cpu", 10.5)
    with pytest.raises(TypeError, match=r"runtime\.empty: `shape`"):
        runtime.empty((2.0, 3))
    with pytest.raises(TypeError, match=r"runtime\.empty: `shape`"):
        runtime.empty(5)
    with pytest.raises(TypeError, match="numpy has no dtype for int4"):
        runtime.empty((4,), "int4").numpy()


# --- fixes from the session 9 audit of the wrappers --------------------------------------------


@needs_global("ops.gemm", "runtime.empty")
def test_gemm_beta_without_out_is_refused():
    # the output would be allocated uninitialised and beta * C would read it
    a = rand(4, 4)
    with pytest.raises(ValueError, match=r"ops\.gemm: `beta`.*`out`"):
        ops.gemm(a, a, beta=1.0)
    np.testing.assert_allclose(ops.gemm(a, a, alpha=2.0).numpy(), 2 * a @ a, rtol=1e-5)


@needs_global("runtime.empty")
def test_numpy_view_outlives_a_closed_tensor():
    with runtime.empty((4, 4)) as t:
        n = t.numpy()
        n[:] = 7
    # the tensor's Python object is closed; the array keeps its own reference to the memory,
    # which a new tensor therefore cannot be given
    others = [runtime.empty((4, 4)) for _ in range(8)]
    for o in others:
        o.numpy()[:] = -1
    assert all(o.data_ptr != n.ctypes.data for o in others)
    np.testing.assert_array_equal(n, np.full((4, 4), 7, np.float32))


@needs_global("runtime.view", "runtime.permute", "runtime.slice")
def test_view_functions_take_numpy_arrays():
    import gc

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = runtime.view(a, (4, 3))
    p = runtime.permute(a, (1, 0))
    s = runtime.slice(a, 1, 1, 3)
    del a
    gc.collect()
    _ = [np.ones(12, np.float32) for _ in range(50)]
    np.testing.assert_array_equal(v.numpy(), np.arange(12).reshape(4, 3))
    np.testing.assert_array_equal(p.numpy(), np.arange(12).reshape(3, 4).T)
    np.testing.assert_array_equal(s.numpy(), np.arange(12).reshape(3, 4)[:, 1:3])
    ro = np.arange(4, dtype=np.float32)
    ro.flags.writeable = False
    rv = runtime.view(ro, (2, 2))  # stays read-only
    with pytest.raises(ValueError, match="read-only"):
        ops.add(rv, rv, out=rv)


@needs_global("ops.linear", "runtime.view")
@pytest.mark.parametrize("with_bias", [False, True])
def test_linear_of_a_vector(with_bias):
    x, w, b = rand(6), rand(5, 6), rand(5)
    want = w @ x + (b if with_bias else 0)
    got = ops.linear(x, w, b if with_bias else None)
    assert got.shape == (5,)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)
    out = np.zeros(5, np.float32)
    ops.linear(anyffi.from_dlpack(x), w, b if with_bias else None, out=out)
    np.testing.assert_allclose(out, want, rtol=1e-5)
    t = anyffi.from_dlpack(np.zeros(5, np.float32))
    ops.linear(x, w, b if with_bias else None, out=t)
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-5)
    # an out of another rank is named as the user made it, whatever its kind
    for bad in (np.zeros((1, 5), np.float32), anyffi.from_dlpack(np.zeros((1, 5), np.float32))):
        with pytest.raises(ValueError, match=r"anyffi\.ops\.linear: `out` must be 1-D when `x` is, got shape \(1, 5\)"):
            ops.linear(x, w, out=bad)
    # a wrong N is blamed on out, not on the weight that agrees with x
    with pytest.raises(ValueError, match=r"ops\.linear: `out` must have shape \(M, N\) = \(1, 5\), got \(1, 4\)"):
        ops.linear(x, w, out=np.zeros(4, np.float32))


def test_numpy_dtypes_without_a_dlpack_type_are_refused_by_dtype():
    # byte order was dropped (">f4" became float32, and memory copied under it read swapped)
    # and numpy's long double became float128 (it is x87 extended precision, padded)
    with pytest.raises(ValueError, match=r"non-native byte order"):
        anyffi.dtype(np.dtype(">f4"))
    if np.dtype(np.longdouble).itemsize > 8:  # (not a platform whose long double is a double)
        with pytest.raises(ValueError, match=r"long double"):
            anyffi.dtype(np.longdouble)
    assert anyffi.dtype(np.dtype("<f4")) == "float32" and anyffi.dtype(np.dtype(">i1")) == "int8"


def test_complex_dtypes_parse_pickle_and_copy():
    import copy
    import pickle

    for name, bits in (("complex64", 64), ("complex128", 128)):
        d = anyffi.dtype(name)
        assert (d.code, d.bits, d.lanes) == (5, bits, 1) and d == anyffi.dtype(getattr(np, name))
        assert pickle.loads(pickle.dumps(d)) == d and copy.deepcopy(d) == d
        got = anyffi.from_dlpack(np.zeros(2, name)).dtype
        assert pickle.loads(pickle.dumps(got)) == got == d
    # a spelling the library keeps ("int") survives a pickle as written
    assert str(pickle.loads(pickle.dumps(anyffi.dtype("int")))) == "int"


@needs_global("ops.add", "ops.swiglu", "ops.rms_norm", "runtime.copy_", "runtime.contiguous")
def test_dlpack_capsules_pass_in_every_tensor_position():
    # only the first argument of an op took a capsule (converted while reading its shape);
    # others reached the library as an opaque Python object
    a = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(ops.add(a, a.__dlpack__()).numpy(), 2 * a)
    np.testing.assert_array_equal(ops.add(a.__dlpack__(), a).numpy(), 2 * a)
    out = np.zeros(4, np.float32)
    ops.add(a, a, out=out.__dlpack__())
    np.testing.assert_array_equal(out, 2 * a)
    ops.swiglu(a, a.__dlpack__())
    ops.rms_norm(a.reshape(1, 4), weight=np.ones(4, np.float32).__dlpack__())
    dst = np.zeros(4, np.float32)
    runtime.copy_(dst.__dlpack__(), a.__dlpack__())
    np.testing.assert_array_equal(dst, a)
    np.testing.assert_array_equal(runtime.contiguous(a.__dlpack__()).numpy(), a)
    if NUMPY_DLPACK_1:
        ro = np.arange(4, dtype=np.float32)
        ro.flags.writeable = False
        with pytest.raises(ValueError, match="read-only"):
            ops.add(a, a, out=ro.__dlpack__(max_version=(1, 0)))


@needs_global("ops.add", "ops.rearrange", "runtime.contiguous", "runtime.copy_")
def test_byte_order_and_unnamed_dtypes_are_named():
    a = rand(3)
    swapped = a.astype(">f4")
    with pytest.raises(TypeError, match=r"anyffi\.ops\.add: `b` has non-native byte order"):
        ops.add(a, swapped)
    with pytest.raises(TypeError, match=r"anyffi\.runtime\.contiguous: `t` has non-native byte order"):
        runtime.contiguous(swapped)
    with pytest.raises(TypeError, match=r"anyffi\.runtime\.copy_: `src` has non-native byte order"):
        runtime.copy_(np.zeros(3, np.float32), swapped)
    c = (np.arange(4) + 1j).astype(np.complex64)
    np.testing.assert_array_equal(ops.rearrange(c).numpy(), c)
    # dtypes DLPack cannot describe: numpy's own BufferError named neither op nor argument
    for dt in ("O", "V8", "U3", "S3", "M8[s]", "m8[s]", np.longdouble, np.clongdouble):
        x = np.zeros(2, dt)
        if np.dtype(dt).kind in "fc" and np.dtype(dt).itemsize <= {"f": 8, "c": 16}[np.dtype(dt).kind]:
            continue  # a platform whose long double is a double
        with pytest.raises(TypeError, match=r"anyffi\.ops\.add: `b` has dtype .* no DLPack equivalent"):
            ops.add(a, x)
        with pytest.raises(TypeError, match=r"anyffi\.runtime\.contiguous: `t` has dtype"):
            runtime.contiguous(x)
    with pytest.raises(TypeError, match=r"anyffi\.ops\.argmax: `out` must be a pair"):
        ops.argmax(a, out=np.zeros(2))


@needs_global("ops.gemm", "ops.linear")
def test_half_precision_workspace_of_broadcast_operands_is_an_error():
    # zero-stride operands make a huge product from tiny arrays; the f16/bf16 paths widen the
    # operands into an f32 workspace of m*k + k*n + m*n elements, whose allocation aborted the
    # process ("memory allocation of 8796093022212 bytes failed") or panicked on overflow
    from numpy.lib.stride_tricks import as_strided

    one = np.ones(1, np.float16)
    a = as_strided(one, shape=(1, 2**40), strides=(0, 0))
    b = as_strided(one, shape=(2**40, 1), strides=(0, 0))
    with pytest.raises(MemoryError, match=r"ops\.gemm: .*workspace"):
        ops.gemm(a, b, out=np.zeros((1, 1), np.float16))
    a = as_strided(one, shape=(1, 2**61), strides=(0, 0))
    b = as_strided(one, shape=(2**61, 1), strides=(0, 0))
    with pytest.raises(MemoryError, match=r"ops\.gemm: .*workspace"):  # past isize::MAX bytes
        ops.gemm(a, b, out=np.zeros((1, 1), np.float16))
    row = np.ones(2**20, np.float16)
    x = as_strided(row, shape=(2**20, 2**20), strides=(0, 2))
    with pytest.raises(MemoryError, match=r"ops\.linear: .*workspace"):
        ops.linear(x, row.reshape(1, -1), out=np.zeros((2**20, 1), np.float16))


@needs_global("ops.add", "ops.rearrange")
def test_dlpack_producers_that_lie():
    class NotACapsule:
        def __init__(self, ret):
            self.ret = ret

        def __dlpack__(self, **kw):
            return self.ret

        def __dlpack_device__(self):
            return (1, 0)

    x = np.ones(3, np.float32)
    for ret in (5, object(), "dltensor"):
        # the capsule's fields were read at raw offsets of whatever came back: a segfault
        with pytest.raises(TypeError, match="not a .*capsule"):
            ops.add(NotACapsule(ret), x)
        with pytest.raises(TypeError, match="not a capsule"):
            anyffi.from_dlpack(NotACapsule(ret))

    class Wrapper:  # exports what it wraps, read-only flag included
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    frozen = bytes(16)
    ro = np.frombuffer(frozen, np.float32)
    if np.lib.NumpyVersion(np.__version__) >= "2.1.0":  # read-only exports need DLPack 1.x
        with pytest.raises(ValueError, match=r"`out` is exported read-only"):
            ops.rearrange(np.arange(4, dtype=np.float32), out=Wrapper(ro))
        assert frozen == bytes(16)
    out = np.zeros(4, np.float32)
    ops.rearrange(np.arange(4, dtype=np.float32), out=Wrapper(out))
    np.testing.assert_array_equal(out, np.arange(4))


@needs_global("ops.rope", "ops.self_attention", "ops.gemm")
def test_scalars_that_do_not_survive_float32_are_refused():
    # the kernels run in f32: theta = 1e-46 passed `theta > 0` in f64 and became 0 (NaN
    # angles); scale = 1e39 became inf (NaN rows) while the float64 result is finite
    x = rand(2, 1, 4)
    with pytest.raises(ValueError, match=r"ops\.rope: `theta` .*float32"):
        ops.rope(x, np.arange(2), 1e-46)
    q, k, v = rand(2, 1, 4), rand(3, 1, 4), rand(3, 1, 4)
    with pytest.raises(ValueError, match=r"ops\.self_attention: `scale` .*float32"):
        ops.self_attention(q, k, v, 1e39)
    assert np.isfinite(ops.self_attention(q, k, v, 1e38).numpy()).all()
    # gemm's alpha and beta: a finite value that would be inf or 0 in float32 (BLAS's NaN and
    # inf go through)
    a, b = rand(2, 3), rand(3, 2)
    for name, args in (("alpha", (1e39, 0.0)), ("alpha", (1e-50, 0.0)), ("beta", (1.0, -1e39))):
        with pytest.raises(ValueError, match=rf"ops\.gemm: `{name}` .*float32"):
            ops.gemm(a, b, *args, out=np.ones((2, 2), np.float32))
    assert np.isinf(ops.gemm(a, b, np.inf).numpy()).all()


@needs_global("ops.add", "ops.swiglu", "ops.rearrange", "ops.gemm", "ops.linear", "ops.rms_norm")
def test_outputs_that_overlap_themselves_are_refused():
    # shape (2, 3) with element strides (1, 1): out[0, 1] and out[1, 0] are one element, and
    # the threads writing them raced (every op accepted it)
    from numpy.lib.stride_tricks import as_strided

    def overlapping():
        buf = np.zeros(16, np.float32)
        return as_strided(buf, shape=(2, 3), strides=(4, 4), writeable=True)

    a, b = rand(2, 3), rand(2, 3)
    for name, call in [
        ("add", lambda o: ops.add(a, b, out=o)),
        ("swiglu", lambda o: ops.swiglu(a, b, out=o)),
        ("rearrange", lambda o: ops.rearrange(a, out=o)),
        ("gemm", lambda o: ops.gemm(rand(2, 4), rand(4, 3), out=o)),
        ("linear", lambda o: ops.linear(rand(2, 4), rand(3, 4), out=o)),
        ("rms_norm", lambda o: ops.rms_norm(a, rand(3), out=o)),
    ]:
        with pytest.raises(ValueError, match=rf"ops\.{name}: output `.*` may overlap itself"):
            call(overlapping())
    # layouts made by slicing, transposing and reversing stay accepted
    big = np.zeros((4, 6), np.float32)
    for out in (big[::2, ::2], big[:3, :2].T[:, ::-1].T, big.T[:3, :2]):
        ops.add(np.ones(out.shape, np.float32), np.ones(out.shape, np.float32), out=out)
        assert (out == 2).all()


@needs_global("runtime.empty")
def test_remembered_shapes_devices_and_dtypes_stay_correct():
    # runtime._dims/_dev and dtype() remember what they made (a call into the library, a parse,
    # numpy's dtype name); past the bound they go on making new ones
    for n in range(1, 1100):
        t = runtime.empty((n % 7 + 1, n), "float32", "cpu")
        assert t.shape == (n % 7 + 1, n) and t.device == anyffi.device("cpu")
    assert runtime.empty((2, 3), np.float16).dtype == anyffi.dtype("float16")
    assert anyffi.dtype(np.dtype("float32")) is anyffi.dtype(np.dtype("float32"))
    for _ in range(2):  # a failure is not remembered as anything (">f4" after "<f4" included)
        with pytest.raises(ValueError):
            anyffi.dtype(np.dtype("U3"))
        with pytest.raises(ValueError, match="byte order"):
            anyffi.dtype(np.dtype(">f4"))


@needs_global("ops.self_attention")
def test_attention_at_the_edges_of_float32():
    f32 = np.float32
    # a key 100 below the maximum weighs e^-100, not e^-87 (the exp's clamp), against a huge value
    q, k = np.ones((1, 1, 1), f32), np.array([0.0, -100.0], f32).reshape(2, 1, 1)
    v = np.array([0.0, 1e38], f32).reshape(2, 1, 1)
    assert abs(ops.self_attention(q, k, v, 1.0).numpy().item()) < 1e-4
    # values near the top of float32: the weighted mean, not an overflowed sum (one chunk of
    # keys, and decode-length rows that the kernel splits into chunks and merges)
    for s in (100, 4096):
        q, k = np.zeros((1, 1, 4), f32), np.zeros((s, 1, 4), f32)
        v = np.full((s, 1, 4), 3e37, f32)
        np.testing.assert_allclose(ops.self_attention(q, k, v, 1.0).numpy(), 3e37, rtol=1e-5)
    s = 1024
    q, k, v = np.ones((1, 1, 1), f32), np.full((s, 1, 1), -200.0, f32), np.full((s, 1, 1), 1e37, f32)
    k[0], v[0] = 0.0, 0.0
    got = ops.self_attention(q, k, v, 1.0).numpy().item()
    assert np.isfinite(got) and abs(got) < 1e-4
    # inf and NaN values still give inf and NaN
    v = np.zeros((3, 1, 2), f32)
    v[1, 0, 0], v[2, 0, 1] = np.inf, np.nan
    got = ops.self_attention(np.zeros((1, 1, 2), f32), np.zeros((3, 1, 2), f32), v, 1.0).numpy()
    assert np.isinf(got[0, 0, 0]) and np.isnan(got[0, 0, 1])
    # ... also at a key whose weight is 0 (numpy's p @ v: 0 * NaN), in one chunk of keys or
    # in a chunk of a split decode row whose share of the softmax underflows
    k, v = np.array([0.0, -1000.0], f32).reshape(2, 1, 1), np.array([1.0, np.nan], f32).reshape(2, 1, 1)
    assert np.isnan(ops.self_attention(np.ones((1, 1, 1), f32), k, v, 1.0).numpy()).all()
    for s in (500, 1024, 4096):
        k, v = np.full((s, 1, 1), -200.0, f32), np.zeros((s, 1, 1), f32)
        k[0], v[s - 10] = 0.0, np.nan
        assert np.isnan(ops.self_attention(np.ones((1, 1, 1), f32), k, v, 1.0).numpy()).all(), s


@needs_global("ops.linear", "ops.self_attention")
def test_bf16_subnormal_activations_count():
    ml = pytest.importorskip("ml_dtypes")
    bf, f32 = ml.bfloat16, np.float32
    # 1e-39 is subnormal in bf16; the bf16 dot-product instruction would take it as 0
    x, w = np.full((2, 64), 1e-39, bf), np.full((3, 64), 1e38, bf)
    want = 64 * float(bf(1e-39)) * float(bf(1e38))
    for rows in (x[:1], x):
        np.testing.assert_allclose(ops.linear(rows, w).numpy().astype(f32), want, rtol=1e-2)
    # and the mirror image: subnormal weights against a huge x (rows of 1e38, weights of 1e-39)
    for rows in (w[:1], w):
        np.testing.assert_allclose(ops.linear(rows, x).numpy().astype(f32), want, rtol=1e-2)
    for qv, kv in ((1e-39, 1e38), (1e38, 1e-39)):
        q, k = np.full((1, 1, 64), qv, bf), np.zeros((2, 1, 64), bf)
        k[1] = kv
        v = np.zeros((2, 1, 1), bf)
        v[1] = 1
        got = ops.self_attention(q, k, v, 1.0).numpy().astype(f32).item()
        assert got > 0.99, (qv, kv)


@needs_global("ops.rms_norm")
def test_rms_norm_of_rows_below_f32_squares_with_tiny_eps():
    ml = pytest.importorskip("ml_dtypes")
    bf = ml.bfloat16
    # squares of 1e-19 are below the smallest normal f32: the bf16 dot-product instruction
    # flushes them to 0, and with an eps this small the row was normalised by 1/sqrt(eps)
    # (22% off at eps 2e-38)
    for d in (100, 128, 256, 4096):
        for eps in (2e-38, 1e-37, 1e-36, 1e-33, 0.0):
            for dt in (bf, np.float32):
                x = np.full((3, d), 1e-19, dt)
                x[1] *= 3
                w = np.ones(d, dt)
                xs = x.astype(np.float64)
                ref = xs / np.sqrt((xs**2).mean(-1, keepdims=True) + float(np.float32(eps)))
                got = ops.rms_norm(x, w, eps).numpy().astype(np.float64)
                np.testing.assert_allclose(got, ref, rtol=4e-3 if dt is bf else 1e-5, err_msg=f"{d} {eps} {dt}")


@needs_global("ops.gemm")
def test_gemm_of_one_row_keeps_its_accuracy_over_long_k():
    # one row against a row-major B went through a single f32 chain per output (1.8e-5 at this K)
    r = np.random.default_rng(1)
    k = 262147
    a = (r.random((1, k)) * 0.1).astype(np.float32)
    b = (r.random((k, 3)) * 0.01).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    c = np.full((1, 3), 2.0, np.float32)
    ops.gemm(a, b, 1.0, 0.5, out=c)
    np.testing.assert_allclose(c, want + 1.0, rtol=2e-6)
    np.testing.assert_allclose(ops.gemm(a, b, 2.0).numpy(), 2 * want, rtol=2e-6)
