"""Integers beyond int64 travel as ffi.BigInt objects and come back as Python ints."""

from __future__ import annotations

import pytest
import tvm_ffi
from tvm_ffi.testing import _ffi_api as T

echo = tvm_ffi.get_global_func("testing.echo")

BIG = [
    2**63,
    -(2**63) - 1,
    2**64,
    2**64 - 1,
    2**70,
    -(2**100),
    3**200,
    -(7**333) + 1,
    2**4096 + 12345,
]


@pytest.mark.parametrize("value", BIG)
def test_big_int_round_trip(value: int) -> None:
    r = echo(value)
    assert type(r) is int
    assert r == value


@pytest.mark.parametrize("value", BIG[:4])
def test_big_int_in_containers(value: int) -> None:
    a = echo([value, 1, -value])
    assert list(a) == [value, 1, -value]
    m = echo({"big": value})
    assert m["big"] == value


def test_big_int_through_callback() -> None:
    apply = tvm_ffi.get_global_func("testing.apply")
    assert apply(lambda x: x * 2, 2**80) == 2**81
    assert apply(lambda: -(2**90)) == -(2**90)


def test_big_int_as_any() -> None:
    assert T.schema_id_any(2**65) == 2**65


def test_big_int_where_int64_expected_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        T.schema_id_int(2**64)


def test_int64_boundaries_stay_plain_ints() -> None:
    assert T.schema_id_int(2**63 - 1) == 2**63 - 1
    assert T.schema_id_int(-(2**63)) == -(2**63)
