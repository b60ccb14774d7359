"""Shared fixtures: the test functions of whichever library is loaded.

Our library registers ``anyffi.testing.{nop,echo,add_one,apply,raise_error}``. With the official
library (``ANYFFI_LIBRARY=.../tvm_ffi/lib/libtvm_ffi.so``) the same functions come from its testing
library (``libtvm_ffi_testing.so`` beside it, or ``ANYFFI_TESTING_LIBRARY``) as ``testing.*``.
"""

from __future__ import annotations

import ctypes
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package under test, without installing it

import anyffi  # noqa: E402
import pytest  # noqa: E402


def official_testing_library() -> bool:
    """Loads the official ``libtvm_ffi_testing.so`` (its ``testing.*`` globals, typed C++
    functions) into this process, on whichever library is loaded: ``ANYFFI_TESTING_LIBRARY``,
    beside the library, or the checkout's official wheel. Whether it was found."""
    for path in (
        os.environ.get("ANYFFI_TESTING_LIBRARY"),
        os.path.join(os.path.dirname(anyffi.library_path), "libtvm_ffi_testing.so"),
        os.path.join(HERE, "..", "..", "..", ".cache", "wheel", "unpacked", "tvm_ffi", "lib", "libtvm_ffi_testing.so"),
    ):
        if path and os.path.isfile(path):
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            return True
    return False


def _load_testing_functions() -> types.SimpleNamespace:
    get = anyffi.get_global_func
    if get("anyffi.testing.nop", allow_missing=True) is not None:
        names = dict(nop="nop", echo="echo", add_one="add_one", apply="apply", raise_error="raise_error")
        prefix = "anyffi.testing."
    else:
        official_testing_library()
        names = dict(nop="nop", echo="echo", add_one="add_one", apply="apply", raise_error="test_raise_error")
        prefix = "testing."
    fns = {}
    for key, name in names.items():
        f = get(prefix + name, allow_missing=True)
        if f is None:
            raise RuntimeError(
                f"the loaded library {anyffi.library_path} has neither anyffi.testing.{key} nor {prefix}{name}; "
                "for the official library put libtvm_ffi_testing.so beside it or set ANYFFI_TESTING_LIBRARY"
            )
        fns[key] = f
    fns["official"] = prefix == "testing."
    return types.SimpleNamespace(**fns)


T = _load_testing_functions()


@pytest.fixture(scope="session")
def t() -> types.SimpleNamespace:
    """nop, echo, add_one, apply, raise_error(kind, message) of the loaded library; ``official``."""
    return T


def has_global(name: str) -> bool:
    return anyffi.get_global_func(name, allow_missing=True) is not None


def needs_global(*names: str):
    """Skips a test when the loaded library lacks one of these global functions."""
    missing = [n for n in names if not has_global(n)]
    return pytest.mark.skipif(
        bool(missing), reason=f"the loaded library has no global {', '.join(missing)} (not built yet?)"
    )


def pytest_report_header(config):
    kind = "official testing.*" if T.official else "anyffi.testing.*"
    return [f"anyffi library: {anyffi.library_path} (ABI {anyffi.abi_version}), test functions: {kind}"]
