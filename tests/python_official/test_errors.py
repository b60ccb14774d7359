"""Errors raised on the C++ side map to the right Python exception, with a backtrace naming the
C++ frame; bad input gives errors, not crashes."""

from __future__ import annotations

import traceback

import pytest
import tvm_ffi
from tvm_ffi.testing import _ffi_api as T

KINDS = {
    "ValueError": ValueError,
    "TypeError": TypeError,
    "KeyError": KeyError,
    "IndexError": IndexError,
    "RuntimeError": RuntimeError,
    "AttributeError": AttributeError,
    "AssertionError": AssertionError,
    "MemoryError": MemoryError,
    # kinds without a registered Python class become RuntimeError
    "InternalError": RuntimeError,
    "NotImplementedError": RuntimeError,
    "SomeCustomKind": RuntimeError,
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_cpp_error_kind_maps_to_python_type(kind: str) -> None:
    with pytest.raises(KINDS[kind]) as info:
        T.test_raise_error(kind, f"message for {kind}")
    e = info.value
    if kind == "KeyError":
        assert e.args[0] == f"message for {kind}"
    else:
        assert str(e) == f"message for {kind}"
    assert type(e) is KINDS[kind]


def test_cpp_error_backtrace_names_cpp_frame() -> None:
    with pytest.raises(ValueError) as info:
        T.test_raise_error("ValueError", "with backtrace")
    tb = "".join(traceback.format_exception(info.value))
    assert "TestRaiseError" in tb
    assert "testing.cc" in tb


def test_cpp_error_through_python_callback() -> None:
    apply = tvm_ffi.get_global_func("testing.apply")
    with pytest.raises(IndexError, match="inner") as info:
        apply(lambda: T.test_raise_error("IndexError", "inner"))
    tb = "".join(traceback.format_exception(info.value))
    assert "TestRaiseError" in tb and "TestApply" in tb


def test_error_message_with_unicode_and_long_text() -> None:
    msg = "ошибка ✗ " + "x" * 5000
    with pytest.raises(ValueError) as info:
        T.test_raise_error("ValueError", msg)
    assert str(info.value) == msg


def test_register_error_custom_class() -> None:
    @tvm_ffi.register_error("PyOfficialCustomError")
    class PyOfficialCustomError(Exception):
        pass

    with pytest.raises(PyOfficialCustomError, match="custom"):
        T.test_raise_error("PyOfficialCustomError", "custom")

    apply = tvm_ffi.get_global_func("testing.apply")

    def raiser():
        raise PyOfficialCustomError("back")

    with pytest.raises(PyOfficialCustomError, match="back"):
        apply(raiser)


def test_error_is_usable_after_many_raises() -> None:
    for i in range(200):
        with pytest.raises(TypeError):
            T.test_raise_error("TypeError", str(i))
    assert T.add_one(1) == 2


# --- bad input ------------------------------------------------------------------------------


def test_wrong_argument_type_is_type_error() -> None:
    with pytest.raises(TypeError) as info:
        T.add_one("x")
    assert str(info.value) == (
        "Mismatched type on argument #0 when calling: `testing.add_one(0: int) -> int`. "
        "Expected `int` but got `ffi.SmallStr`"
    )
    with pytest.raises(TypeError) as info:
        T.add_one(1.5)
    assert "Expected `int` but got `float`" in str(info.value)


def test_wrong_container_element_type_is_type_error() -> None:
    with pytest.raises(TypeError) as info:
        T.schema_id_arr_int([1, "x"])
    assert str(info.value) == (
        "Mismatched type on argument #0 when calling: "
        "`testing.schema_id_arr_int(0: Array<int>) -> Array<int>`. "
        "Expected `Array<int>` but got `Array[index 1: ffi.SmallStr]`"
    )


def test_wrong_argument_count() -> None:
    f = tvm_ffi.get_global_func("testing.add_one")
    with pytest.raises(TypeError) as info:
        f(1, 2)
    assert "Mismatched number of arguments" in str(info.value)
    with pytest.raises(TypeError):
        f()


def test_wrong_object_type_is_type_error() -> None:
    with pytest.raises(TypeError):
        T.TestIntPairSum(tvm_ffi.testing.TestObjectBase())
    with pytest.raises(TypeError):
        T.schema_id_tensor([1, 2])


def test_variant_mismatch() -> None:
    with pytest.raises(TypeError) as info:
        T.schema_id_variant_int_str(1.5)
    assert "Expected `Variant<int, str>` but got `float`" in str(info.value)


def test_opaque_python_object_round_trips_but_is_not_an_int() -> None:
    class Plain:
        pass

    p = Plain()
    assert T.echo(p) is p  # wrapped as ffi.OpaquePyObject and unwrapped again
    assert T.echo([p])[0] is p
    with pytest.raises(TypeError, match="got `ffi.OpaquePyObject`"):
        T.add_one(p)


def test_dltensor_result_cannot_be_held() -> None:
    import numpy as np

    with pytest.raises(RuntimeError, match="DLTensor\\* cannot be held in Any"):
        T.schema_id_dltensor(np.zeros(2, dtype="float32"))


def test_enum_variant_missing() -> None:
    with pytest.raises(ValueError, match="has no instance with index Gamma"):
        T.enum_variant_get("Gamma")


def test_run_check_signal_zero() -> None:
    assert T.run_check_signal(0) is None
