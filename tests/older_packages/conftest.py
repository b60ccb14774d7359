"""Stops the session unless the process maps exactly the library under test (an older package's
loader could otherwise pick another libtvm_ffi.so and the comparison would mean nothing)."""

import os

import pytest

try:  # the suite's own conftest, if it had one, moved aside by run.sh
    from conftest_upstream import *  # noqa: F401,F403
except ImportError:
    pass


def _mapped(base: str) -> list:
    found = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split(None, 5)
            if len(parts) == 6 and os.path.basename(parts[5].strip()) == base:
                found.add(os.path.realpath(parts[5].strip()))
    return sorted(found)


def pytest_sessionstart(session) -> None:
    expected = os.path.realpath(os.environ["TVMFFI_UNDER_TEST_LIB"])
    import tvm_ffi  # noqa: F401

    mapped = _mapped("libtvm_ffi.so")
    if mapped != [expected]:
        raise pytest.UsageError(f"expected only {expected} mapped, found {mapped}")


def pytest_report_header(config) -> list:
    return [f"library under test: {os.environ.get('TVMFFI_UNDER_TEST_LIB')}"]
