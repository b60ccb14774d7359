"""The process maps exactly one libtvm_ffi.so, the one under test, and the official testing
library bound to it (conftest.py also stops the session before any test if this is wrong)."""

import os

import conftest


def test_exactly_the_library_under_test_is_mapped() -> None:
    assert conftest.library_identity_problem() is None
    assert conftest.mapped_files("libtvm_ffi.so") == [conftest.expected_library()]


def test_import_succeeded() -> None:
    assert conftest.IMPORT_ERROR is None, conftest.IMPORT_ERROR


def test_official_testing_library_is_loaded() -> None:
    testing_libs = conftest.mapped_files("libtvm_ffi_testing.so")
    assert len(testing_libs) == 1
    # The testing library is the one shipped in the package under test (tvm_ffi/lib).
    import tvm_ffi

    pkg_lib = os.path.realpath(os.path.join(os.path.dirname(tvm_ffi.__file__), "lib"))
    assert os.path.dirname(testing_libs[0]) == pkg_lib


def test_testing_library_registered_its_functions() -> None:
    import tvm_ffi

    names = set(tvm_ffi.registry.list_global_func_names())
    testing_names = sorted(n for n in names if n.startswith("testing."))
    assert len(testing_names) == 59, testing_names
