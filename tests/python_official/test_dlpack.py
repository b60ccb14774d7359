"""numpy <-> tvm_ffi.Tensor through DLPack, zero copy both ways, and the testing library's
container-with-tensor helpers."""

from __future__ import annotations

import gc
import sys

import numpy as np
import pytest
import tvm_ffi
from tvm_ffi.testing import _ffi_api as T

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"]  # fmt: skip


def test_from_dlpack_shares_memory_both_ways() -> None:
    x = np.arange(12, dtype="float32").reshape(3, 4)
    t = tvm_ffi.from_dlpack(x)
    assert isinstance(t, tvm_ffi.Tensor)
    assert t.shape == (3, 4)
    assert t.strides == (4, 1)
    assert t.dtype == tvm_ffi.dtype("float32")
    assert t.device == tvm_ffi.device("cpu", 0)
    assert t.ndim == 2 and t.numel() == 12
    assert t.data_ptr() == x.ctypes.data
    y = np.from_dlpack(t)
    assert np.shares_memory(x, y)
    x[1, 2] = 100.0
    assert y[1, 2] == 100.0
    y[0, 0] = -1.0
    assert x[0, 0] == -1.0


def test_tensor_through_a_call_shares_memory() -> None:
    x = np.arange(5, dtype="int64")
    t = T.schema_id_tensor(x)
    y = np.from_dlpack(t)
    assert np.shares_memory(x, y)
    assert t.data_ptr() == x.ctypes.data


def test_tensor_identity_through_calls() -> None:
    t = tvm_ffi.from_dlpack(np.zeros(3))
    assert T.echo(t).same_as(t)
    assert T.schema_id_tensor(t).same_as(t)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtypes_round_trip(dtype: str) -> None:
    x = (np.arange(6) % 2).astype(dtype).reshape(2, 3)
    t = tvm_ffi.from_dlpack(x)
    assert str(t.dtype) == dtype
    y = np.from_dlpack(t)
    assert y.dtype == x.dtype
    assert np.array_equal(x, y)
    assert np.shares_memory(x, y)


def test_non_contiguous_views() -> None:
    x = np.arange(12, dtype="float32").reshape(3, 4)
    t = tvm_ffi.from_dlpack(x[:, ::2])
    assert t.shape == (3, 2) and t.strides == (4, 2)
    assert not t.is_contiguous()
    tt = tvm_ffi.from_dlpack(x.T)
    assert tt.shape == (4, 3) and tt.strides == (1, 4)
    assert np.array_equal(np.from_dlpack(tt), x.T)


def test_zero_dim_and_empty() -> None:
    t = tvm_ffi.from_dlpack(np.array(3.0))
    assert t.shape == () and t.numel() == 1
    e = tvm_ffi.from_dlpack(np.zeros((0, 3)))
    assert e.shape == (0, 3) and e.numel() == 0
    assert np.from_dlpack(e).shape == (0, 3)


def test_tensor_repr() -> None:
    t = tvm_ffi.from_dlpack(np.zeros((3, 4), dtype="float32"))
    assert repr(t) == "float32[3, 4]@cpu:0"
    assert t.__dlpack_device__() == (1, 0)


def test_complex_tensor_passes_but_has_no_dtype_string() -> None:
    x = np.zeros(3, dtype="complex64")
    t = tvm_ffi.from_dlpack(x)  # DLPack carries it (kDLComplex = 5) ...
    assert np.shares_memory(np.from_dlpack(t), x)
    with pytest.raises(ValueError, match="unknown type_code=5"):
        t.dtype  # ... but TVMFFIDataTypeToString has no name for it


def test_numpy_array_argument_is_converted() -> None:
    x = np.ones((2, 2), dtype="float64")
    t = T.echo(x)
    assert isinstance(t, tvm_ffi.Tensor)
    assert t.data_ptr() == x.ctypes.data


def test_tensor_keeps_numpy_buffer_alive() -> None:
    x = np.arange(1000, dtype="float64")
    base_refs = sys.getrefcount(x)
    t = tvm_ffi.from_dlpack(x)
    assert sys.getrefcount(x) > base_refs
    ptr = x.ctypes.data
    del x
    gc.collect()
    y = np.from_dlpack(t)
    assert y.ctypes.data == ptr
    assert y[999] == 999.0
    del t, y
    gc.collect()


def test_releasing_tensor_releases_numpy_reference() -> None:
    x = np.arange(10, dtype="int32")
    base = sys.getrefcount(x)
    for _ in range(100):
        t = tvm_ffi.from_dlpack(x)
        y = np.from_dlpack(t)
        del t, y
    gc.collect()
    assert sys.getrefcount(x) == base


def test_tensor_view_helpers() -> None:
    x = np.zeros(4, dtype="float32")
    assert T.optional_tensor_view_has_value(x) is True
    assert T.optional_tensor_view_has_value(None) is False
    assert T.schema_tensor_view_input(x) is None
    with pytest.raises(TypeError):
        T.schema_tensor_view_input(1)


# --- containers made by the C++ side holding tensors ---------------------------------------


def test_make_array_with_tensor() -> None:
    x = np.arange(6, dtype="float32").reshape(2, 3)
    a = T.make_array_with_tensor(x)
    assert isinstance(a, tvm_ffi.Array) and len(a) == 1
    assert np.shares_memory(np.from_dlpack(a[0]), x)
    assert repr(a) == "(float32[2, 3]@cpu:0,)"


def test_make_array_with_mixed() -> None:
    x = np.zeros(3, dtype="int32")
    a = T.make_array_with_mixed(x, 7)
    assert a[1] == 7 and a[2] == "hello"
    assert np.shares_memory(np.from_dlpack(a[0]), x)


def test_make_nested_array_with_tensor() -> None:
    x = np.zeros(2, dtype="float32")
    a = T.make_nested_array_with_tensor(x)
    assert a[0][1] == 42
    assert a[0][0].same_as(a[1])
    assert repr(a) == "((float32[2]@cpu:0, 42), float32[2]@cpu:0)"


def test_make_list_with_tensor() -> None:
    x = np.zeros(2, dtype="float32")
    lst = T.make_list_with_tensor(x, 5)
    assert isinstance(lst, tvm_ffi.List) and lst[1] == 5
    assert repr(lst) == "[float32[2]@cpu:0, 5]"


def test_make_map_and_dict_with_tensor() -> None:
    x = np.zeros((2, 3), dtype="float32")
    m = T.make_map_with_tensor(x)
    assert isinstance(m, tvm_ffi.Map)
    assert m["value"] == 42 and m["name"] == "test"
    assert np.shares_memory(np.from_dlpack(m["tensor"]), x)
    assert repr(m) == '{"tensor": float32[2, 3]@cpu:0, "value": 42, "name": "test"}'
    d = T.make_dict_with_tensor(x)
    assert isinstance(d, tvm_ffi.Dict) and d["value"] == 42
    assert repr(d) == '{"tensor": float32[2, 3]@cpu:0, "value": 42}'


def test_make_nested_map_with_tensor() -> None:
    x = np.zeros(2, dtype="float32")
    y = np.ones(3, dtype="float64")
    m = T.make_nested_map_with_tensor(x, y)
    assert m["scalar"] == 99
    assert np.shares_memory(np.from_dlpack(m["array"][1]), y)
    assert np.shares_memory(np.from_dlpack(m["map"]["t"]), x)
    assert repr(m) == (
        '{"array": (float32[2]@cpu:0, float64[3]@cpu:0), "map": {"t": float32[2]@cpu:0}, "scalar": 99}'
    )


def test_make_empty_array_with_tensor_input() -> None:
    a = T.make_empty_array_with_tensor_input(np.zeros(1))
    assert isinstance(a, tvm_ffi.Array) and len(a) == 0


def test_bfloat16_dtype_via_ml_dtypes() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert str(tvm_ffi.dtype(np.dtype(ml_dtypes.bfloat16))) == "bfloat16"
    assert str(tvm_ffi.dtype(np.dtype(ml_dtypes.float8_e4m3fn))) == "float8_e4m3fn"
