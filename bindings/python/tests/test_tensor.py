"""DLPack and tensors with numpy (and torch when installed): zero-copy both ways."""

from __future__ import annotations

import gc
import weakref

import anyffi
import pytest

np = pytest.importorskip("numpy")

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "int64", "float16", "float32", "float64"]


def test_numpy_argument_is_a_dltensor_view(t):
    x = np.arange(12, dtype="float32").reshape(3, 4)
    got = {}

    def f(v):
        got["v"] = (v.is_view, v.data_ptr, v.shape, v.strides, str(v.dtype), v.device)

    t.apply(f, x)
    assert got["v"] == (True, x.ctypes.data, (3, 4), (4, 1), "float32", anyffi.device("cpu"))


@pytest.mark.parametrize("dt", DTYPES)
def test_dtypes_as_views(t, dt):
    x = (np.arange(6) % 2).astype(dt).reshape(2, 3)
    got = {}

    def f(v):
        got["dtype"] = str(v.dtype)
        got["values"] = v.numpy().copy()

    t.apply(f, x)
    assert got["dtype"] == dt
    np.testing.assert_array_equal(got["values"], x)


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(24.0).reshape(2, 3, 4)[:, ::2, 1:],
        lambda: np.arange(12.0).reshape(3, 4).T,
        lambda: np.array(3.5),
        lambda: np.zeros((0, 3)),
        lambda: np.arange(10)[::-1],
    ],
    ids=["strided", "transposed", "0-d", "empty", "negative-stride"],
)
def test_layouts_as_views(t, make):
    x = make()
    got = {}

    def f(v):
        got["shape"], got["strides"] = v.shape, v.strides
        got["values"] = v.numpy().copy()

    t.apply(f, x)
    assert got["shape"] == x.shape
    if x.size:
        assert got["strides"] == tuple(s // x.itemsize for s in x.strides)
    np.testing.assert_array_equal(got["values"], x)


def test_readonly_array_passes(t):
    x = np.arange(4.0)
    x.setflags(write=False)
    got = {}
    t.apply(lambda v: got.update(shape=v.shape), x)
    assert got["shape"] == (4,)


def test_echo_returns_owning_tensor_sharing_memory(t):
    x = np.arange(6, dtype="int32")
    y = t.echo(x)
    assert isinstance(y, anyffi.Tensor) and not y.is_view
    assert y.data_ptr == x.ctypes.data
    y.numpy()[0] = 100
    assert x[0] == 100
    ref = weakref.ref(x) if hasattr(x, "__weakref__") else None
    del x
    gc.collect()
    if ref is not None:
        assert ref() is not None  # the tensor keeps the producer's memory alive
    assert y.numpy()[0] == 100


def test_from_dlpack_and_back_is_zero_copy():
    x = np.arange(10, dtype="float64")
    t = anyffi.from_dlpack(x)
    assert t.shape == (10,) and t.dtype == "float64" and t.device == anyffi.device("cpu")
    assert t.data_ptr == x.ctypes.data
    y = t.numpy()
    assert y.ctypes.data == x.ctypes.data
    y[3] = -1
    assert x[3] == -1
    z = np.from_dlpack(t)
    assert z.ctypes.data == x.ctypes.data


def test_tensor_keeps_count_while_exported():
    t = anyffi.from_dlpack(np.zeros(3))
    assert t.use_count == 1
    y = np.from_dlpack(t)
    assert t.use_count == 2  # the exported managed tensor holds a reference
    del y
    gc.collect()
    assert t.use_count == 1


def test_numpy_view_keeps_tensor_alive():
    t = anyffi.from_dlpack(np.arange(3.0))
    ref = weakref.ref(t)
    y = t.numpy()
    del t
    gc.collect()
    assert ref() is not None  # the array's base is the Tensor
    y[0] = 5.0  # writable, on every numpy version
    assert ref().numpy()[0] == 5.0


@pytest.mark.parametrize("max_version", [None, (1, 0), (1, 3)])
def test_dlpack_capsules(max_version):
    t = anyffi.from_dlpack(np.ones((2, 2), dtype="float32"))
    cap = t.__dlpack__() if max_version is None else t.__dlpack__(max_version=max_version)
    assert "dltensor_versioned" in repr(cap) if max_version else "dltensor" in repr(cap)
    u = anyffi.from_dlpack(cap)
    assert u.shape == (2, 2) and u.data_ptr == t.data_ptr
    assert t.use_count == 2
    del u, cap
    gc.collect()
    assert t.use_count == 1
    # an unconsumed capsule is freed by its destructor
    cap = t.__dlpack__()
    assert t.use_count == 2
    del cap
    gc.collect()
    assert t.use_count == 1


def test_consumed_capsule_cannot_be_reused():
    t = anyffi.from_dlpack(np.ones(2))
    cap = t.__dlpack__()
    anyffi.from_dlpack(cap)
    with pytest.raises(ValueError, match="consumed"):
        anyffi.from_dlpack(cap)


def test_tensor_properties():
    x = np.zeros((2, 3, 4), dtype="float16")[:, 1:, ::2]
    t = anyffi.from_dlpack(x)
    assert t.shape == (2, 2, 2) and t.ndim == 3 and t.size == 8
    assert t.strides == (12, 4, 2)
    assert not t.is_contiguous()
    assert anyffi.from_dlpack(np.zeros((2, 3))).is_contiguous()
    assert t.__dlpack_device__() == (1, 0)
    assert len(t) == 2
    assert "shape=(2, 2, 2)" in repr(t)


def test_tensor_object_argument(t):
    x = anyffi.from_dlpack(np.arange(3.0))
    assert t.echo(x).same_as(x)
    got = {}
    t.apply(lambda v: got.update(view=v.is_view), x)
    assert got["view"] is False  # an ffi.Tensor travels as the object itself


def test_callback_returning_numpy_gives_owned_tensor(t):
    r = t.apply(lambda: np.arange(5, dtype="int64"))
    assert isinstance(r, anyffi.Tensor) and not r.is_view
    np.testing.assert_array_equal(r.numpy(), np.arange(5))


def test_view_cannot_be_exported(t):
    def f(v):
        with pytest.raises(BufferError):
            v.__dlpack__()
        return True

    assert t.apply(f, np.zeros(2)) is True


def test_closed_tensor():
    t = anyffi.from_dlpack(np.zeros(2))
    t.close()
    with pytest.raises(ValueError, match="closed"):
        t.shape
    assert "closed" in repr(t)


def test_from_dlpack_rejects_non_producers():
    with pytest.raises(TypeError):
        anyffi.from_dlpack([1, 2, 3])


def test_from_dlpack_checks_contiguity():
    with pytest.raises(RuntimeError):
        anyffi.from_dlpack(np.zeros((4, 4))[:, ::2], require_contiguous=True)


def test_torch_roundtrip(t):
    torch = pytest.importorskip("torch")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    got = {}
    t.apply(lambda v: got.update(v=(v.shape, v.data_ptr)), x)
    assert got["v"] == ((2, 3), x.data_ptr())
    y = anyffi.from_dlpack(x)
    z = torch.from_dlpack(y)
    z[0, 0] = 42
    assert x[0, 0] == 42


def test_view_result_inside_callback(t):
    # echo of a DLTensor* view returns the same view (valid while the callback runs)
    x = np.arange(4.0)
    got = {}

    def f(v):
        w = t.echo(v)
        got["same"] = (w.is_view, w.data_ptr == v.data_ptr, w.shape)
        with pytest.raises(TypeError, match="borrowed tensor view"):
            t.apply(lambda: w)  # a borrowed view cannot become an owned result

    t.apply(f, x)
    assert got["same"] == (True, True, (4,))
