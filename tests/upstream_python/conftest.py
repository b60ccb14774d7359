"""Identity check for the official project's own Python suite (see run.sh).

run.sh copies the official tests/python into a scratch directory together with this file. Before
any test runs, the session checks /proc/self/maps after `import tvm_ffi`: exactly one
libtvm_ffi.so may be mapped, and it must be the one named by TVMFFI_UNDER_TEST_LIB; otherwise the
run stops, since its results would say nothing about that library. Under pytest-xdist every
worker checks itself.
"""

from __future__ import annotations

import os

import pytest


def _mapped(basename: str) -> list[str]:
    paths = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and os.path.basename(parts[5].strip()) == basename:
                paths.add(os.path.realpath(parts[5].strip()))
    return sorted(paths)


def pytest_sessionstart(session: pytest.Session) -> None:
    expected = os.environ.get("TVMFFI_UNDER_TEST_LIB")
    if not expected:
        raise pytest.UsageError("TVMFFI_UNDER_TEST_LIB is not set: run tests/upstream_python/run.sh")
    import tvm_ffi  # noqa: F401  (loads the library)

    mapped = _mapped("libtvm_ffi.so")
    if mapped != [os.path.realpath(expected)]:
        raise pytest.UsageError(f"expected exactly {expected} to be mapped, found {mapped}")


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"library under test: {os.environ.get('TVMFFI_UNDER_TEST_LIB')}"]
