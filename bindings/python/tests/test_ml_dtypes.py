"""bfloat16 and float8 numpy arrays (the ``ml_dtypes`` package, as JAX and the official package
name them): numpy cannot export them through DLPack, so they pass from their array interface,
and ``Tensor.numpy()`` returns them as arrays of those types."""

from __future__ import annotations

import gc

import anyffi
import pytest
from conftest import needs_global

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")
bf16 = ml_dtypes.bfloat16


def test_ml_dtypes_name_the_same_dtypes():
    for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
        assert anyffi.dtype(np.dtype(getattr(ml_dtypes, name))) == anyffi.dtype(name)


@needs_global("runtime.empty", "ops.add", "ops.linear", "ops.rms_norm")
def test_bfloat16_arrays_in_and_out_of_the_ops():
    rng = np.random.default_rng(0)
    a, b = rng.random((4, 8)).astype(bf16), rng.random((4, 8)).astype(bf16)
    c = anyffi.ops.add(a, b)
    assert c.dtype == anyffi.dtype("bfloat16")
    got = c.numpy()
    assert got.dtype == np.dtype(bf16)
    # each sum rounded once to bfloat16, as ml_dtypes rounds the float32 sum
    np.testing.assert_array_equal(got, (a.astype(np.float32) + b.astype(np.float32)).astype(bf16))
    out = np.zeros((4, 8), bf16)
    assert anyffi.ops.add(a, b, out=out) is out
    np.testing.assert_array_equal(out, got)
    w = rng.random((5, 8)).astype(bf16)
    y = anyffi.ops.linear(a, w).numpy().astype(np.float64)
    ref = a.astype(np.float64) @ w.astype(np.float64).T
    assert np.abs(y - ref).max() <= 1e-2 * (1 + np.abs(ref).max())
    # a row-strided bfloat16 input (a column slice of a wider array)
    wide = np.zeros((4, 16), bf16)
    wide[:, :8] = a
    z = anyffi.ops.rms_norm(wide[:, :8], np.ones(8, bf16), 1e-6).numpy().astype(np.float64)
    x = a.astype(np.float64)
    np.testing.assert_allclose(z, x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6), rtol=1e-2, atol=1e-2)


@needs_global("runtime.empty", "ops.add")
def test_a_read_only_bfloat16_array_is_not_an_output():
    ro = np.ones(3, bf16)
    ro.flags.writeable = False
    assert anyffi.ops.add(ro, ro).numpy().astype(np.float32).tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(ValueError, match="read-only"):
        anyffi.ops.add(ro, ro, out=ro)


@needs_global("runtime.view", "runtime.permute", "runtime.empty")
def test_from_dlpack_and_views_of_bfloat16_arrays_keep_the_memory():
    a = np.arange(6, dtype=np.float32).reshape(2, 3).astype(bf16)
    t = anyffi.from_dlpack(a)
    assert (t.dtype, t.shape, t.strides) == (anyffi.dtype("bfloat16"), (2, 3), (3, 1))
    v = anyffi.runtime.view(a, (3, 2))
    p = anyffi.runtime.permute(a, (1, 0))
    del a, t
    gc.collect()
    assert v.numpy().astype(np.float32).tolist() == [[0, 1], [2, 3], [4, 5]]
    assert p.numpy().astype(np.float32).tolist() == [[0, 3], [1, 4], [2, 5]]
    ro = np.ones(2, bf16)
    ro.flags.writeable = False
    assert anyffi.from_dlpack(ro).read_only


@needs_global("runtime.empty")
def test_numpy_of_every_float8_the_library_has():
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz"):
        t = anyffi.runtime.empty((3,), name)
        arr = t.numpy()
        assert arr.dtype == np.dtype(getattr(ml_dtypes, name)) and arr.shape == (3,)
        arr[:] = np.array([1.0, -2.0, 0.5], np.float32).astype(arr.dtype)  # writes the tensor
        assert t.numpy().astype(np.float32).tolist() == [1.0, -2.0, 0.5]
    # float4 packs two elements a byte in DLPack but one a byte in ml_dtypes: refused
    with pytest.raises(TypeError, match="numpy has no dtype for float4_e2m1fn"):
        anyffi.runtime.empty((2,), "float4_e2m1fn").numpy()


@needs_global("runtime.empty")
def test_numpy_of_a_bfloat16_tensor_off_the_cpu_is_refused(monkeypatch):
    # the ml_dtypes path checks the device as the plain one does (GPU memory as a numpy array
    # would crash on first touch)
    t = anyffi.runtime.empty((2,), "bfloat16")
    monkeypatch.setattr(anyffi.Tensor, "device", property(lambda self: anyffi.device("cuda", 0)))
    with pytest.raises(BufferError, match=r"on cuda:0, not the CPU"):
        t.numpy()


def test_a_function_returning_its_bfloat16_argument_gives_an_owned_tensor():
    # the argument went as a DLTensor built from the array interface; the result pointing at it
    # becomes an owned tensor of the array (it was a view of the call's frame: freed memory)
    anyffi.register_global_func("testing.ml_identity", lambda t: t, override=True)
    f = anyffi.get_global_func("testing.ml_identity")
    for name in ("bfloat16", "float8_e4m3fn"):
        a = np.arange(4, dtype=np.float32).astype(getattr(ml_dtypes, name))
        r = f(a)
        assert not r.is_view and r.dtype == anyffi.dtype(name)
        del a
        gc.collect()
        assert r.numpy().astype(np.float32).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_byte_swapped_bfloat16_is_refused():
    a = np.array([1.0, 2.0, 3.0], np.float32).astype(bf16)
    swapped = a.view(a.dtype.newbyteorder(">"))
    assert anyffi.tensor.ml_dtype_of(swapped.dtype) is None
    with pytest.raises(BufferError):
        anyffi.from_dlpack(swapped)
    anyffi.register_global_func("testing.ml_identity", lambda t: t, override=True)
    with pytest.raises((BufferError, TypeError)):  # numpy's refusal, or ours on numpy < 2.1
        anyffi.get_global_func("testing.ml_identity")(swapped)
    with pytest.raises(TypeError, match="non-native byte order"):
        anyffi.ops.add(swapped, swapped)


def test_ml_dtypes_scalar_types_are_dtypes():
    assert anyffi.dtype(ml_dtypes.bfloat16) == "bfloat16"
    assert anyffi.dtype(ml_dtypes.float8_e5m2) == "float8_e5m2"


@needs_global("anyffi.testing.apply")
def test_numpy_refusing_a_bfloat16_view_is_its_own_error(capfd):
    # numpy takes a callback view's capsule, then refuses bfloat16 and releases the capsule with
    # its exception pending: the release must run no Python code (a Python deleter there turned
    # numpy's error into a SystemError and printed "Exception ignored")
    apply = anyffi.get_global_func("anyffi.testing.apply")

    def cb(x):
        try:
            np.from_dlpack(x)
        except BaseException as e:  # noqa: BLE001 - whatever numpy raises is the result
            return f"{type(e).__name__}: {e}"
        return "imported"

    got = apply(anyffi.Function(cb), np.arange(4, dtype=bf16))
    # numpy 2 raises RuntimeError, numpy 1 BufferError (both "Unsupported dtype")
    assert got == "imported" or got.split(":")[0] in ("RuntimeError", "BufferError"), got
    gc.collect()
    assert "Exception ignored" not in capfd.readouterr().err
    # a float32 view still exports, and what numpy keeps outlives the call and the caller's array
    kept = []
    big = np.arange(1 << 18, dtype=np.float32)
    apply(anyffi.Function(lambda x: kept.append(np.from_dlpack(x))), big)
    del big
    gc.collect()
    assert kept[0][1] == 1.0 and kept[0][-1] == (1 << 18) - 1
