"""The library's registered surface against the official one (golden.json "surface"): global
functions, type keys, and each type's index, ancestors, fields (name, offset, size, static type
index, frozen) and methods. Runs even when `import tvm_ffi` fails, so the list of what is missing
is available from the first day."""

from __future__ import annotations

import json
from pathlib import Path

import conftest
import pytest

OFFICIAL = json.loads((Path(__file__).resolve().parent / "golden.json").read_text())["surface"]


@pytest.fixture(scope="module")
def ours() -> dict:
    if conftest.partial_package() is None:
        pytest.fail("tvm_ffi.registry/tvm_ffi.core are not importable at all")
    return conftest.library_surface()


# The complete list includes the structural/serialization built-ins of issue 4.
@pytest.mark.issue4
def test_global_functions(ours) -> None:
    missing = sorted(set(OFFICIAL["global_functions"]) - set(ours["global_functions"]))
    extra = sorted(set(ours["global_functions"]) - set(OFFICIAL["global_functions"]) - conftest.TEST_LIBRARY_GLOBALS)
    assert not missing and not extra, f"missing: {missing}\nextra: {extra}"


def test_type_keys(ours) -> None:
    missing = sorted(set(OFFICIAL["types"]) - set(ours["types"]))
    extra = sorted(set(ours["types"]) - set(OFFICIAL["types"]))
    assert not missing and not extra, f"missing: {missing}\nextra: {extra}"


@pytest.mark.parametrize("key", sorted(OFFICIAL["types"]))
def test_type_layout(ours, key: str) -> None:
    if key not in ours["types"]:
        pytest.fail(f"type {key} is not registered")
    assert ours["types"][key] == OFFICIAL["types"][key], (
        f"\n  official: {json.dumps(OFFICIAL['types'][key])}\n  ours:     {json.dumps(ours['types'][key])}"
    )
