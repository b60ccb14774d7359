"""The process maps exactly one libtvm_ffi.so, the one under test, and the official testing
library bound to it (conftest.py also stops the session before any test if this is wrong).
These tests run even when `import tvm_ffi` fails (conftest.py then collects only this file)."""

import os

import conftest
import pytest


def test_exactly_the_library_under_test_is_mapped() -> None:
    assert conftest.library_identity_problem() is None
    assert conftest.mapped_files("libtvm_ffi.so") == [conftest.expected_library()]


def test_import_succeeded() -> None:
    assert conftest.IMPORT_ERROR is None, conftest.IMPORT_ERROR


def test_official_testing_library_is_loaded() -> None:
    testing_libs = conftest.mapped_files("libtvm_ffi_testing.so")
    assert len(testing_libs) == 1
    # the one shipped in the package under test: <copy>/tvm_ffi/lib/libtvm_ffi_testing.so
    lib = conftest.expected_library()
    pkg = os.path.dirname(os.path.dirname(lib))
    if os.path.basename(pkg) == "build":  # the library under test sits in tvm_ffi/build/lib
        pkg = os.path.dirname(pkg)
    assert testing_libs[0] == os.path.realpath(os.path.join(pkg, "lib", "libtvm_ffi_testing.so"))


def test_testing_library_registered_its_functions() -> None:
    if conftest.IMPORT_ERROR is not None:
        pytest.skip("import tvm_ffi failed (see test_import_succeeded)")
    import tvm_ffi

    testing_names = sorted(n for n in tvm_ffi.registry.list_global_func_names() if n.startswith("testing."))
    assert len(testing_names) == 59, testing_names
