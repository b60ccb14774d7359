"""The testing-library comparison: each of the 59 `testing.*` functions, called with
representative (and bad) arguments, must do on the library under test exactly what it did on the
official library when golden.json was recorded (record_golden.py). See golden_cases.py."""

from __future__ import annotations

import json
from pathlib import Path

import golden_cases
import pytest

GOLDEN = json.loads((Path(__file__).resolve().parent / "golden.json").read_text())["cases"]
CASES = golden_cases.build_cases()


def test_every_testing_function_has_cases() -> None:
    covered = {c.function for c in CASES}
    expected = {f for names in golden_cases.FUNCTIONS.values() for f in names}
    assert len(expected) == 59
    assert covered == expected


def test_the_library_registers_exactly_these_testing_functions() -> None:
    import tvm_ffi

    names = {n.split(".", 1)[1] for n in tvm_ffi.registry.list_global_func_names() if n.startswith("testing.")}
    assert names == {f for fs in golden_cases.FUNCTIONS.values() for f in fs}


def test_golden_file_is_current() -> None:
    assert sorted(GOLDEN) == sorted(c.id for c in CASES), "re-run tests/python_official/run.sh --record-golden"


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c.id, marks=[pytest.mark.issue4] if c.issue4 else []) for c in CASES],
)
def test_matches_official(case: golden_cases.Case) -> None:
    expected = GOLDEN.get(case.id)
    assert expected is not None, f"no golden value for {case.id}"
    actual = golden_cases.run_case(case)
    assert actual == expected, (
        f"\n  official: {json.dumps(expected, ensure_ascii=False)}\n  ours:     {json.dumps(actual, ensure_ascii=False)}"
    )
