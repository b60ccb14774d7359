"""Bad inputs get clear errors of the right kind, never a crash."""

from __future__ import annotations

import ctypes
import importlib
import os
import subprocess
import sys

import anyffi
import pytest

PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_wrong_argument_type(t):
    with pytest.raises(TypeError):
        t.add_one("not an int")
    with pytest.raises(TypeError):
        t.add_one(1.5)
    with pytest.raises(TypeError):
        t.add_one(None)


def test_wrong_argument_count(t):
    with pytest.raises(TypeError):
        t.add_one()
    with pytest.raises(TypeError):
        t.add_one(1, 2)


def test_apply_of_non_function(t):
    with pytest.raises(TypeError):
        t.apply(5)


def test_missing_function():
    with pytest.raises(ValueError, match="Cannot find global function"):
        anyffi.get_global_func("does.not.exist")


def test_bad_names():
    with pytest.raises(TypeError):
        anyffi.get_global_func(123)
    with pytest.raises(TypeError):
        anyffi.register_global_func(None, lambda: 1)


def test_function_of_non_callable():
    with pytest.raises(TypeError):
        anyffi.Function(42)


def test_null_pointer_and_closed_handles(t):
    assert t.echo(ctypes.c_void_p(None)).value is None
    f = anyffi.Function(lambda: 0)
    f.close()
    with pytest.raises(ValueError):
        f()
    with pytest.raises(ValueError):
        t.echo(f)
    with pytest.raises(ValueError):
        f.type_key
    f.close()  # still idempotent


def test_unregistered_result_dtype_string():
    with pytest.raises(ValueError):
        anyffi.dtype("float32x")


def test_bad_library_path_is_import_error(tmp_path):
    env = dict(os.environ, ANYFFI_LIBRARY=str(tmp_path / "missing.so"), PYTHONPATH=PKG_DIR)
    r = subprocess.run([sys.executable, "-c", "import anyffi"], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "ImportError" in r.stderr and "missing.so" in r.stderr


def test_not_a_library_is_import_error(tmp_path):
    bogus = tmp_path / "libtvm_ffi.so"
    bogus.write_text("not an ELF file")
    env = dict(os.environ, ANYFFI_LIBRARY=str(bogus), PYTHONPATH=PKG_DIR)
    r = subprocess.run([sys.executable, "-c", "import anyffi"], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "failed to load" in r.stderr


def test_search_order_lists_every_candidate(monkeypatch):
    from anyffi import _lib

    monkeypatch.setenv("ANYFFI_LIBRARY", "/x/libtvm_ffi.so")
    paths = _lib.candidate_paths()
    assert paths[0] == "/x/libtvm_ffi.so"
    assert paths[1] == os.path.join(PKG_DIR, "anyffi", "libtvm_ffi.so")
    assert any(p.endswith(os.path.join("target", "release", "libtvm_ffi.so")) for p in paths[2:])


def test_callback_returning_unconvertible_value(t):
    # a generator has no FFI form but is an opaque object: fine; a closed object is not
    f = anyffi.Function(lambda: None)
    f.close()
    with pytest.raises(ValueError, match="closed"):
        t.apply(lambda: f)


def test_rvalue_and_view_results_are_rejected():
    from anyffi import _marshal, _capi

    buf = (_capi.TVMFFIAny * 1)()
    buf[0].type_index = _capi.kRawStr
    with pytest.raises(ValueError, match="borrowed view"):
        _marshal.from_owned(_marshal.qi(ctypes.addressof(buf)))


def test_error_in_argument_conversion_leaves_no_leak(t):
    class Bad:
        def __index__(self):
            raise OverflowError("cannot")

    f = anyffi.Function(lambda *a: None)
    with pytest.raises(OverflowError):
        t.nop(f, Bad())
    assert f.use_count == 1
    assert t.echo(3) == 3  # the frame went back to the pool clean


def test_list_reserve_beyond_memory_is_an_error_not_an_abort(t):
    lst = anyffi.get_global_func("ffi.List")(1, 2)
    for n in (1 << 40, 1 << 44):
        with pytest.raises(Exception) as e:
            anyffi.get_global_func("ffi.ListReserve")(lst, n)
        if not t.official:  # the official library raises InternalError (std::bad_alloc)
            assert isinstance(e.value, MemoryError)
    assert list(lst) == [1, 2]
