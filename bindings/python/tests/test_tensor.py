"""DLPack and tensors with numpy (and torch when installed): zero-copy both ways."""

from __future__ import annotations

import gc
import sys
import weakref

import anyffi
import pytest
from conftest import needs_global

np = pytest.importorskip("numpy")

# numpy >= 2.1: versioned DLPack capsules (read-only flag, writable imports) and from_dlpack keywords
NUMPY_DLPACK_1 = tuple(int(p) for p in np.__version__.split(".")[:2]) >= (2, 1)

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
        # a callback may return a view it holds: it goes back as the same DLTensor*
        back = t.apply(lambda: w)
        got["back"] = (back.is_view, back.data_ptr == v.data_ptr)

    t.apply(f, x)
    assert got["same"] == (True, True, (4,))
    assert got["back"] == (True, True)


def _churn():
    # reuse freed DLPack memory: a dangling pointer would now read these
    gc.collect()
    return [np.full(50, 7.0).__dlpack__() for _ in range(50)]


def test_numpy_arrays_kept_by_containers_are_owned(t):
    # a container keeps its elements after the call: numpy arrays go in as owned tensors that
    # share their memory, not as the call's borrowed DLTensor* views
    x = np.arange(6.0).reshape(2, 3)
    a = anyffi.Array([x])
    m = anyffi.Map({"k": np.arange(3.0)})
    lst = anyffi.List()
    lst.append(np.arange(4.0))
    lst.insert(0, np.arange(2.0))
    lst[1] = np.arange(5.0)
    d = anyffi.Dict()
    d["x"] = np.arange(3.0)
    echoed = t.echo([np.arange(3.0)])
    returned = t.apply(lambda: [np.arange(3.0)])
    junk = _churn()
    np.testing.assert_array_equal(a[0].numpy(), x)
    assert np.shares_memory(a[0].numpy(), x)
    for got, want in [(m["k"], 3), (lst[0], 2), (lst[1], 5), (d["x"], 3), (echoed[0], 3), (returned[0], 3)]:
        assert not got.is_view
        np.testing.assert_array_equal(got.numpy(), np.arange(float(want)))
    del junk


def test_views_kept_by_a_callback_are_closed_after_it(t):
    saved = []
    t.apply(lambda v: saved.append(v), np.arange(12.0).reshape(3, 4))
    with pytest.raises(ValueError, match="closed"):
        saved[0].shape
    # the argument object seen inside the callback was usable there
    seen = []
    t.apply(lambda v: seen.append(v.numpy().sum()), np.arange(4.0))
    assert seen == [6.0]


def test_a_callbacks_views_export_as_dlpack_and_into_containers(t):
    import gc

    from anyffi import tensor as tensor_mod

    x = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]  # strided: (3, 2), strides (4, 2)
    kept = {}

    def cb(v):
        a = np.from_dlpack(v)  # versioned capsule (numpy >= 2.1)
        kept["np_same"] = a.ctypes.data == x.ctypes.data and a.strides == x.strides
        (a if NUMPY_DLPACK_1 else v.numpy())[0, 0] = 100.0
        legacy = v.__dlpack__()
        kept["legacy"] = anyffi.from_dlpack(legacy)
        kept["owned"] = anyffi.from_dlpack(v)
        kept["array"] = anyffi.Array([v, 1])
        kept["map"] = anyffi.Map({"t": v})
        kept["unused"] = v.__dlpack__(max_version=(1, 0))  # dropped unconsumed below

    n0 = len(tensor_mod._VIEW_EXPORTS)
    t.apply(cb, x)
    assert kept.pop("np_same") is True
    assert x[0, 0] == 100.0
    del kept["unused"]
    gc.collect()
    _ = [np.ones(64) for _ in range(2000)]  # reuse whatever the caller's DLTensor was
    for r in (kept["legacy"], kept["owned"]):  # explicit exports share the caller's memory
        assert isinstance(r, anyffi.Tensor) and not r.is_view
        assert r.shape == (3, 2) and r.strides == (4, 2)
        assert r.data_ptr == x.ctypes.data
        np.testing.assert_array_equal(r.numpy(), x)
    for r in (kept["array"][0], kept["map"]["t"]):  # what containers keep is a compact copy
        assert isinstance(r, anyffi.Tensor) and not r.is_view
        assert r.shape == (3, 2) and r.strides == (2, 1)
        assert r.data_ptr != x.ctypes.data
        np.testing.assert_array_equal(r.numpy(), x)
    # the two explicit exports; the containers' copies are allocated by the library where it
    # has runtime.empty (ours), else they are Python-side exports too
    copies_exported = anyffi.get_global_func("runtime.empty", allow_missing=True) is None
    assert len(tensor_mod._VIEW_EXPORTS) == n0 + 2 + 2 * copies_exported
    del r
    kept.clear()
    gc.collect()
    assert len(tensor_mod._VIEW_EXPORTS) == n0  # every export's deleter ran


@pytest.mark.parametrize("derive", ["numpy", "np.from_dlpack", "anyffi.from_dlpack"])
def test_what_a_callback_keeps_of_its_argument_keeps_the_callers_array_alive(t, derive):
    import gc

    kept = []
    get = {
        "numpy": lambda v: v.numpy(),
        "np.from_dlpack": lambda v: np.from_dlpack(v),
        "anyffi.from_dlpack": lambda v: anyffi.from_dlpack(v).numpy(),
    }[derive]
    n = 1 << 18  # big enough to be unmapped when freed
    t.apply(lambda v: kept.append(get(v)), np.arange(n, dtype=np.float64))  # a temporary
    f = anyffi.Function(lambda v: kept.append(get(v)))
    f(np.arange(n, dtype=np.float64)[::-1])  # the inline numpy path of Function.__call__
    gc.collect()
    _ = np.full(2 * n, 7.0)
    assert kept[0].sum() == kept[1].sum() == n * (n - 1) / 2


def test_np_from_dlpack_copy_of_an_unsupported_dtype_raises_numpys_error():
    torch = pytest.importorskip("torch")
    v = anyffi.from_dlpack(torch.ones(3, dtype=torch.bfloat16))
    for copy in (None, True):
        with pytest.raises(RuntimeError, match="Unsupported dtype"):
            np.from_dlpack(v, copy=copy)


def test_a_read_only_view_exports_read_only(t):
    ro = anyffi.from_dlpack(np.frombuffer(b"\x01\x02\x03\x04", np.uint8))
    got = {}

    def cb(v):
        v._ro = True  # as a view of read-only memory would be
        if NUMPY_DLPACK_1:
            got["w"] = np.from_dlpack(v).flags.writeable
        else:  # older numpy asks for a legacy capsule, which cannot say read-only
            with pytest.raises(BufferError, match="read-only"):
                np.from_dlpack(v)
            got["w"] = v.numpy().flags.writeable
        with pytest.raises(BufferError):
            v.__dlpack__()

    t.apply(cb, np.zeros(3, np.uint8))
    assert got == {"w": False}
    assert ro.read_only


def test_callbacks_may_return_their_tensor_argument(t):
    x = np.arange(3.0)
    anyffi.register_global_func("testing.py_identity", lambda v: v, override=True)
    for r in (
        anyffi.get_global_func("testing.py_identity")(x),
        anyffi.Function(lambda *a: a[-1])(x),
        t.apply(lambda v: v, x),
    ):
        assert isinstance(r, anyffi.Tensor) and not r.is_view
        assert np.shares_memory(r.numpy(), x)
    anyffi.remove_global_func("testing.py_identity")


def test_read_only_memory_stays_read_only():
    b = b"\x01\x02\x03\x04"
    ro = anyffi.from_dlpack(np.frombuffer(b, np.uint8))
    assert ro.read_only and not ro.numpy().flags.writeable
    # numpy >= 2.1 imports it read-only; older numpy asks for a legacy capsule, refused
    with pytest.raises(ValueError if NUMPY_DLPACK_1 else BufferError):
        np.from_dlpack(ro)[0] = 99
    with pytest.raises(BufferError):
        ro.__dlpack__()  # the legacy capsule has no read-only flag
    assert b == b"\x01\x02\x03\x04"
    assert not anyffi.from_dlpack(np.arange(3.0)).read_only


needs_read_only_record = pytest.mark.skipif(
    anyffi._capi.AnyFFITensorIsReadOnly is None,
    reason="the library keeps no read-only record of its tensors (AnyFFITensorIsReadOnly)",
)


@needs_read_only_record
def test_read_only_stays_with_the_ffi_tensor_through_every_wrapper(t, tmp_path):
    # the flag lives with the ffi.Tensor in the library: a function's result, a container's
    # element and a callback's argument are read-only too (each was a writable wrapper before,
    # and an op or numpy view wrote into the read-only memory; a memory map segfaulted)
    b = bytes(range(8))
    src = np.frombuffer(b, np.uint8)
    ro = anyffi.from_dlpack(src)
    assert ro.read_only
    r = t.echo(ro)
    assert r.same_as(ro) and r.read_only and not r.numpy().flags.writeable
    e = anyffi.Array([ro])[0]
    assert e.read_only and not e.numpy().flags.writeable
    seen = []
    t.apply(lambda v: seen.append((v.read_only, v.numpy().flags.writeable)), ro)
    assert seen == [(True, False)]
    f32 = np.arange(4, dtype=np.float32)
    f32.flags.writeable = False
    rof = t.echo(anyffi.from_dlpack(f32))
    with pytest.raises(ValueError, match="read-only"):
        anyffi.ops.add(f32, f32, out=rof)
    with pytest.raises(ValueError, match="read-only"):
        anyffi.ops.add(f32, f32, out=anyffi.Array([rof])[0])
    np.testing.assert_array_equal(f32, [0, 1, 2, 3])
    if NUMPY_DLPACK_1:  # exports of any wrapper carry the flag
        with pytest.raises(ValueError):
            np.from_dlpack(r)[0] = 9
    assert b == bytes(range(8))
    # a read-only memory map inside a container: its element stays read-only (writing it
    # through numpy segfaulted)
    path = tmp_path / "mm.bin"
    np.arange(16, dtype=np.float32).tofile(path)
    m = np.memmap(path, dtype=np.float32, mode="r")
    el = anyffi.Array([m])[0]
    assert el.read_only
    with pytest.raises(ValueError):
        el.numpy()[0] = 1.0
    # writable tensors stay writable through the same paths
    w = t.echo(anyffi.from_dlpack(np.arange(3.0)))
    assert not w.read_only and w.numpy().flags.writeable


@needs_read_only_record
@needs_global("ops.add", "runtime.copy_")
def test_the_library_refuses_read_only_outputs_for_every_binding(t):
    # the ops and runtime.copy_ check the ffi.Tensor itself, so callers other than this package
    # (C, Julia, the official tvm_ffi package) are refused too: call the globals directly
    ro_np = np.arange(4, dtype=np.float32)
    ro_np.flags.writeable = False
    ro = anyffi.from_dlpack(ro_np)
    add = anyffi.get_global_func("ops.add")
    with pytest.raises(ValueError, match=r"ops.add: output `c` is read-only memory"):
        add(ro, ro, ro)
    copy_ = anyffi.get_global_func("runtime.copy_")
    with pytest.raises(ValueError, match=r"runtime.copy_: output `dst` is read-only memory"):
        copy_(ro, anyffi.from_dlpack(np.zeros(4, np.float32)))
    view = anyffi.runtime.view(ro, (2, 2))  # a view of a read-only tensor is one too
    with pytest.raises(ValueError, match="read-only memory"):
        add(view, view, view)
    np.testing.assert_array_equal(ro_np, [0, 1, 2, 3])


def test_complex_tensors_have_a_dtype_repr_and_numpy_view():
    x = np.arange(3).astype(np.complex64) * (1 + 2j)
    tc = anyffi.from_dlpack(x)
    assert str(tc.dtype) == "complex64" and "complex64" in repr(tc)
    np.testing.assert_array_equal(tc.numpy(), x)


def test_views_kept_by_a_callback_outlive_the_callers_array(t):
    import gc

    # a temporary array: its memory is unmapped after the call (8 MiB)
    r = t.apply(lambda v: [v], np.full(1 << 20, 7.0))
    gc.collect()
    np.testing.assert_array_equal(r[0].numpy()[:3], [7.0, 7.0, 7.0])
    kept = []
    t.apply(lambda v: kept.append(t.echo(v)), np.full(1 << 20, 7.0))  # a view of a view
    with pytest.raises(ValueError, match="closed"):
        kept[0].shape


def test_a_read_only_argument_is_a_read_only_view_in_a_callback(t):
    b = bytes(8)
    a = np.frombuffer(b, dtype=np.uint8)
    seen = []
    t.apply(lambda v: seen.append((v.read_only, v.numpy().flags.writeable)), a)
    assert seen == [(True, False)]
    with pytest.raises(ValueError):
        t.apply(lambda v: v.numpy().__setitem__(0, 65), a)
    assert b == bytes(8)


def test_a_consumer_failing_after_taking_the_capsule_leaks_nothing():
    # numpy takes the capsule, then refuses bfloat16: the capsule dies unconsumed with numpy's
    # exception pending. The ctypes destructor could not run then (the tensor leaked, numpy's
    # error became a SystemError); the library's destructor runs without Python.
    from anyffi import _capi

    if not anyffi.get_global_func("runtime.empty", allow_missing=True):
        pytest.skip("runtime.empty is not available")
    bf = anyffi.runtime.empty((6,), "bfloat16")
    for _ in range(3):
        with pytest.raises(Exception) as info:
            np.from_dlpack(bf)
        if hasattr(_capi.LIB, "AnyFFIDLPackCapsuleDestructor"):
            assert type(info.value) is not SystemError, info.value
    gc.collect()
    assert bf.use_count == 1


def test_dlpack_copy_and_stream_keywords_on_cpu():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = anyffi.from_dlpack(a)
    v = None
    if NUMPY_DLPACK_1:  # numpy < 2.1's from_dlpack takes no keywords and gives read-only arrays
        c = np.from_dlpack(t, copy=True)  # the array API: copy=True always copies
        np.testing.assert_array_equal(c, a)
        c[0, 0] = 99
        assert a[0, 0] == 0
        v = np.from_dlpack(t)  # the default shares
        v[0, 1] = 7
        assert a[0, 1] == 7
    with pytest.raises(BufferError, match="stream must be None"):
        t.__dlpack__(stream=1)
    cap = t.__dlpack__(max_version=(1, 0), copy=True)
    assert "dltensor_versioned" in repr(cap)
    del cap, v
    gc.collect()
    assert t.use_count == 1


class _OldNumpyArray:
    """A producer as numpy < 2.1 is: no versioned capsules, read-only arrays refused by
    ``__dlpack__`` (BufferError), ``__array_interface__`` present."""

    def __init__(self, a):
        self.a = a
        self.__array_interface__ = a.__array_interface__

    def __dlpack__(self, stream=None):
        if not self.a.flags.writeable:
            raise BufferError("Cannot export readonly array since signalling readonly is unsupported by DLPack.")
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_read_only_arrays_of_an_old_numpy_are_shared_read_only(t):
    b = b"\x01\x02\x03\x04\x05\x06"
    base = np.frombuffer(b, np.uint8).reshape(2, 3)
    for src in (base, base.T, base[:, ::2]):
        x = _OldNumpyArray(src)
        r = anyffi.from_dlpack(x)
        assert r.read_only and r.shape == src.shape and r.data_ptr == src.ctypes.data
        assert r.strides == tuple(s // src.itemsize for s in src.strides)
        np.testing.assert_array_equal(r.numpy(), src)
        assert not r.numpy().flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            anyffi.runtime.copy_(r, src)
        del x, src, r
    if anyffi.get_global_func("runtime.view", allow_missing=True) is not None:  # ours only
        assert anyffi.runtime.view(_OldNumpyArray(base), (6,)).read_only
    gc.collect()
    assert b == b"\x01\x02\x03\x04\x05\x06"
    # byte strides that are not whole elements cannot be described
    odd = _OldNumpyArray(np.lib.stride_tricks.as_strided(np.frombuffer(b, np.uint16)[:2], shape=(2,), strides=(3,)))
    with pytest.raises(BufferError, match="multiples of its item size"):
        anyffi.from_dlpack(odd)
    # a writable one is still an ordinary shared tensor
    w = np.arange(3.0)
    assert not anyffi.from_dlpack(_OldNumpyArray(w)).read_only


def test_what_a_nested_callback_keeps_keeps_the_callers_array_alive(t):
    # the view is passed on to a second callback, and the array comes through
    # __array_interface__ (a read-only array of numpy < 2.1): still kept alive
    kept = []
    inner = anyffi.Function(lambda v: kept.append(v.numpy()))
    outer = anyffi.Function(lambda v: inner(v))
    n = 1 << 18
    outer(np.arange(n, dtype=np.float64))
    ro = np.arange(n, dtype=np.float64)
    ro.flags.writeable = False
    t.apply(lambda v: kept.append(np.asarray(v)), _OldNumpyArray(ro))
    del ro
    gc.collect()
    _ = np.full(2 * n, 7.0)
    assert [k.sum() for k in kept] == [n * (n - 1) / 2] * 2
    assert not kept[1].flags.writeable
    # an argument is not kept past the call when nothing derived from its view is
    import sys

    w = np.arange(3.0)
    before = sys.getrefcount(w)
    t.apply(lambda v: v.shape, w)
    gc.collect()
    assert sys.getrefcount(w) == before


def test_a_callback_returning_its_argument_view_keeps_what_it_derived_valid():
    # the caller consumes its numpy capsule into the result Tensor; what the callback derived
    # must keep the caller's array itself alive, not only that capsule
    kept = []

    def cb(v):
        kept.append(v.numpy())
        return v

    n = 1 << 18
    r = anyffi.Function(cb)(np.arange(n, dtype=np.float64))  # a temporary
    del r
    gc.collect()
    _ = np.full(2 * n, 7.0)
    assert kept[0].sum() == n * (n - 1) / 2


def test_old_numpy_fallback_is_for_read_only_arrays_only():
    class Refuses(_OldNumpyArray):
        def __dlpack__(self, stream=None):
            raise BufferError("numpy cannot export this dtype")

    w = np.zeros(3)  # writable: numpy's refusal stands
    with pytest.raises(BufferError, match="cannot export this dtype"):
        anyffi.from_dlpack(Refuses(w))
    if hasattr(np, "longdouble") and np.dtype(np.longdouble).itemsize > 8:
        ld = np.zeros(3, np.longdouble)
        ld.flags.writeable = False
        with pytest.raises(TypeError, match="no DLPack equivalent"):
            anyffi.from_dlpack(_OldNumpyArray(ld))


@needs_global("runtime.empty")
def test_numpy_of_bfloat16_without_ml_dtypes_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # `import ml_dtypes` now fails
    t = anyffi.runtime.empty((2,), "bfloat16")
    with pytest.raises(TypeError, match=r"numpy has no dtype for bfloat16 \(install ml_dtypes"):
        t.numpy()


def test_a_function_returning_its_read_only_argument_gives_an_owned_read_only_tensor():
    # numpy >= 2.1 passes a read-only array as a versioned capsule, older numpy through its array
    # interface: either way the returned argument is an owned tensor, not a view of the frame
    anyffi.register_global_func("testing.ro_identity", lambda t: t, override=True)
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    r = anyffi.get_global_func("testing.ro_identity")(a)
    assert not r.is_view and r.read_only
    del a
    gc.collect()
    assert r.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]


@needs_global("runtime.empty")
def test_arrays_made_from_a_tensor_outlive_its_close():
    # np.asarray(t) has `t` as its base; close() must not free the memory under it (it did: the
    # next tensor got the same block, and writes through the array changed it)
    t = anyffi.runtime.empty((1 << 20,), "float32")
    a = np.asarray(t)
    a[:] = 1.0
    t.close()
    with pytest.raises(ValueError, match="closed"):
        t.data_ptr
    c = anyffi.runtime.empty((1 << 20,), "float32")
    c.numpy()[:] = 7.0
    a[:] = 3.0
    assert float(c.numpy()[0]) == 7.0 and float(a[-1]) == 3.0
    with anyffi.runtime.empty((8,), "float32") as w:
        b = np.asarray(w)
        b[:] = 5.0
    assert float(b.sum()) == 40.0
