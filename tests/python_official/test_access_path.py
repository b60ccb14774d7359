"""ffi.reflection.AccessPath / AccessStep, as built from Python and as reported by
get_first_structural_mismatch."""

from __future__ import annotations

import pytest
import tvm_ffi
from tvm_ffi.access_path import AccessKind, AccessPath

pytestmark = pytest.mark.issue4


def test_build_and_print() -> None:
    p = AccessPath.root().attr("x").array_item(3).map_item("k")
    assert repr(p) == '<root>.x[3]["k"]'
    assert repr(AccessPath.root()) == "<root>"
    assert repr(AccessPath.root().array_item_missing(2)) == "<root>[<missing:2>]"


def test_steps() -> None:
    p = AccessPath.root().attr("x").array_item(3)
    steps = p.to_steps()
    assert len(steps) == 2
    assert repr(steps[0]) == ".x" and repr(steps[1]) == "[3]"
    assert steps[0].kind == AccessKind.ATTR
    assert steps[1].kind == AccessKind.ARRAY_ITEM


def test_equality_and_prefix() -> None:
    a = AccessPath.root().attr("x")
    assert a == AccessPath.root().attr("x")
    assert a != AccessPath.root().attr("y")
    assert a.is_prefix_of(a.array_item(0))
    assert not a.array_item(0).is_prefix_of(a)


def test_mismatch_paths_are_access_paths() -> None:
    lhs, rhs = tvm_ffi.get_first_structural_mismatch({"a": [1, 2]}, {"a": [1, 3]})
    assert isinstance(lhs, AccessPath)
    assert lhs == AccessPath.root().map_item("a").array_item(1)
    assert rhs == lhs
