"""Enums: C++-defined (testing.TestCxxIntEnum / TestCxxStrEnum / TestEnumVariant through
ffi.EnumState) and Python-defined ones registered in the library."""

from __future__ import annotations

import pytest
import tvm_ffi
from tvm_ffi import testing
from tvm_ffi.dataclasses import IntEnum, StrEnum, entry
from tvm_ffi.testing import _ffi_api as T

pytestmark = pytest.mark.issue4


def test_cxx_int_and_str_enums() -> None:
    E, S = testing._TestCxxIntEnum, testing._TestCxxStrEnum
    assert E.low.value == 10 and E.high.value == 20
    assert S.add.value == "+" and S.mul.value == "*"
    assert list(E) == [E.low, E.high]
    assert E(10).same_as(E.low)
    assert E.get("high").same_as(E.high)
    assert E.low.name == "low"
    assert repr(E.low) == "_TestCxxIntEnum.low"


def test_enum_holder() -> None:
    E, S = testing._TestCxxIntEnum, testing._TestCxxStrEnum
    h = testing._TestCxxEnumHolder(E.high, S.mul)
    assert h.priority.same_as(E.high) and h.opcode.same_as(S.mul)
    assert repr(h) == "testing.TestCxxEnumHolder(priority=testing.TestCxxIntEnum.high, opcode=testing.TestCxxStrEnum.*)"


def test_enum_variant_from_cpp() -> None:
    a = T.enum_variant_get("Alpha")
    b = T.enum_variant_get("Beta")
    assert repr(a) == "testing.TestEnumVariant.Alpha"
    assert repr(b) == "testing.TestEnumVariant.Beta"
    assert T.enum_variant_get("Alpha").same_as(a)  # singletons
    assert not a.same_as(b)


def test_python_enum() -> None:
    class Color(IntEnum, type_key="pyofficial.Color"):
        red = entry(value=1)
        green = entry(value=2)

    assert Color.red.value == 1
    assert Color(2).same_as(Color.green)
    assert Color.get("green").same_as(Color.green)
    assert [c.name for c in Color] == ["red", "green"]
    assert T.echo(Color.red).same_as(Color.red)
    with pytest.raises(KeyError):
        Color.get("blue")

    class Op(StrEnum, type_key="pyofficial.Op"):
        add = entry(value="+")

    assert Op.add.value == "+"
    assert "pyofficial.Color" in tvm_ffi.registry.get_registered_type_keys()
