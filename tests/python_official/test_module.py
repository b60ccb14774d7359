"""Module loading: a tiny C++ library built against the package's headers, loaded with
`tvm_ffi.load_module`; its exports called with every kind; errors (missing function, missing
file, broken library) are Python exceptions, not crashes."""

from __future__ import annotations

import numpy as np
import pytest
import tvm_ffi
from tvm_ffi.testing import _ffi_api as T


@pytest.fixture(scope="module")
def mod(tiny_module_path):
    return tvm_ffi.load_module(str(tiny_module_path))


def test_module_kind_and_repr(mod) -> None:
    assert isinstance(mod, tvm_ffi.Module)
    assert mod.kind == "library"
    assert repr(mod) == "ffi.Module(imports_=())"
    assert list(mod.imports) == []


def test_call_exports(mod) -> None:
    assert mod.add_one(41) == 42
    assert mod["add_one"](1) == 2
    assert mod.get_function("add_one")(2) == 3
    assert mod.concat("ab", "cd" * 20) == "ab" + "cd" * 20
    assert mod.map_sum({f"k{i}": i for i in range(10)}) == 45
    assert mod.map_sum({"a": 1, "b": 2}) == 3
    r = mod.make_range(5)
    assert isinstance(r, tvm_ffi.Array) and list(r) == [0, 1, 2, 3, 4]


def test_zero_copy_tensor_argument(mod) -> None:
    x = np.ones(4, dtype="float32")
    mod.double_inplace(x)
    assert x.tolist() == [2.0, 2.0, 2.0, 2.0]
    with pytest.raises(TypeError, match="expected float32"):
        mod.double_inplace(np.ones(2))


def test_errors_and_callbacks(mod) -> None:
    with pytest.raises(ValueError, match="bad thing"):
        mod.raise_value_error("bad thing")
    assert mod.call_twice(lambda v: v * 3, 2) == 18

    def bad(v):
        raise KeyError("from callback")

    with pytest.raises(KeyError):
        mod.call_twice(bad, 1)
    with pytest.raises(TypeError):
        mod.add_one("x")


def test_module_function_through_apply(mod) -> None:
    assert T.apply(mod.add_one, 5) == 6


def test_missing_function(mod) -> None:
    with pytest.raises(AttributeError, match="Module has no function 'no_such_function'"):
        mod.no_such_function
    with pytest.raises(AttributeError):
        mod.get_function("no_such_function")
    assert mod.implements_function("add_one") is True
    assert mod.implements_function("no_such_function") is False


def test_metadata_and_doc(mod) -> None:
    md = mod.get_function_metadata("add_one")
    assert md == {
        "type_schema": '{"type":"ffi.Function","named_args":{"return":[{"type":"int"}],"params":[{"type":"int"}]}}'
    }
    assert mod.get_function_metadata("no_such_function") is None
    assert mod.get_function_doc("add_with_doc") == "Add two integers."
    assert mod.get_function_doc("add_one") is None


def test_property_mask(mod) -> None:
    assert mod.get_property_mask() == 3
    assert mod.is_binary_serializable() and mod.is_runnable()
    assert list(mod.get_write_formats()) == []


def test_load_missing_file_is_an_error(tmp_path) -> None:
    with pytest.raises(RuntimeError, match="cannot open shared object file"):
        tvm_ffi.load_module(str(tmp_path / "does_not_exist.so"))


def test_load_unknown_extension_is_an_error(tmp_path) -> None:
    p = tmp_path / "x.unknownext"
    p.write_text("")
    with pytest.raises(RuntimeError, match="Loader for `.unknownext` files is not registered"):
        tvm_ffi.load_module(str(p))


def test_load_library_with_unresolved_symbol_is_an_error(broken_module_path) -> None:
    with pytest.raises(RuntimeError, match="undefined symbol"):
        tvm_ffi.load_module(str(broken_module_path))


def test_system_lib() -> None:
    lib = tvm_ffi.system_lib()
    assert isinstance(lib, tvm_ffi.Module)
    assert lib.get_function("testing.add_one")(3) == 4
    assert tvm_ffi.system_lib("testing.")["add_one"](4) == 5


def test_load_same_module_twice(tiny_module_path) -> None:
    a = tvm_ffi.load_module(str(tiny_module_path))
    b = tvm_ffi.load_module(str(tiny_module_path))
    assert a.add_one(1) == b.add_one(1) == 2


# --- a custom module kind: a C++ subclass of ModuleObj (tests/kernel_lib/custom_module.cc) --------


@pytest.fixture(scope="module")
def custom_lib(custom_module_path):
    return tvm_ffi.load_module(str(custom_module_path))


@pytest.fixture(scope="module")
def counter(custom_lib):
    return custom_lib.create_counter(5)


def test_custom_module_methods(counter, tmp_path) -> None:
    mod = counter
    assert isinstance(mod, tvm_ffi.Module)
    assert mod.kind == "counter"
    assert mod.is_runnable() and mod.is_binary_serializable()
    assert mod.add_base(3) == 8
    assert mod["add_base"](-5) == 0
    assert mod.implements_function("add_base") and not mod.implements_function("nope")
    assert mod.get_function_doc("add_base") == "Adds the module's base to x."
    assert mod.get_function_metadata("add_base") is None
    assert mod.inspect_source("c") == "counter(base=5, format=c)"
    assert list(mod.get_write_formats()) == ["txt"]
    out = tmp_path / "counter.txt"
    mod.write_to_file(str(out), "txt")
    assert out.read_text() == "counter 5\n"
    with pytest.raises(ValueError, match="cannot write format bin"):
        mod.write_to_file(str(out), "bin")
    with pytest.raises(AttributeError, match="Module has no function 'nope'"):
        mod.nope


def test_custom_module_exceptions_become_python_errors(counter) -> None:
    with pytest.raises(ValueError, match="CounterModule refuses throw_ffi_error"):
        counter.get_function("throw_ffi_error")
    # a std::exception thrown by the module: InternalError (a RuntimeError) with what()
    with pytest.raises(RuntimeError, match="a std::runtime_error from CounterModule::GetFunction"):
        counter.get_function("throw_std_error")


def test_custom_module_imports(counter, custom_lib, tiny_module_path) -> None:
    lib = tvm_ffi.load_module(str(tiny_module_path))
    other = custom_lib.create_counter(7)
    counter.import_module(lib)
    try:
        assert [m.kind for m in counter.imports] == ["library"]
        assert counter.get_function("add_one", query_imports=True)(1) == 2
        with pytest.raises(AttributeError):
            counter.get_function("add_one")
        with pytest.raises(RuntimeError, match="Cyclic dependency"):
            lib.import_module(counter)
        lib2 = tvm_ffi.load_module(str(tiny_module_path))
        lib2.import_module(other)
        assert lib2.get_function("add_base", query_imports=True)(1) == 8
        assert lib2.implements_function("add_base", query_imports=True)
        # the C++ module's inherited ImportModule (the library's) throws; the error comes back
        with pytest.raises(RuntimeError, match="Cyclic dependency"):
            other.import_module(lib2)
    finally:
        counter.clear_imports()
    assert list(counter.imports) == []


# --- libraries embedding serialized modules (`__tvm_ffi__library_bin`) ---------------------------


def test_library_bin_with_the_library_as_root(custom_lib, tmp_path) -> None:
    from conftest import build_composite, library_bin

    base9 = (9).to_bytes(8, "little")
    path = build_composite(tmp_path / "lib_root.so", library_bin([[1], []], [("_lib", None), ("counter", base9)]))
    m = tvm_ffi.load_module(str(path))
    assert m.kind == "library"
    assert m.answer() == 42
    assert [i.kind for i in m.imports] == ["counter"]
    assert m.get_function("add_base", query_imports=True)(1) == 10
    with pytest.raises(AttributeError):
        m.get_function("add_base")


def test_library_bin_with_a_custom_module_as_root(custom_lib, tmp_path) -> None:
    from conftest import build_composite, library_bin

    blob = library_bin([[1, 2], [], []], [("counter", (2).to_bytes(8, "little")), ("_lib", None), ("counter", (3).to_bytes(8, "little"))])
    m = tvm_ffi.load_module(str(build_composite(tmp_path / "counter_root.so", blob)))
    assert m.kind == "counter"
    assert m.add_base(1) == 3
    assert [i.kind for i in m.imports] == ["library", "counter"]
    assert m.get_function("answer", query_imports=True)() == 42
    assert m.imports[1].add_base(1) == 4


def test_library_bin_errors(custom_lib, tmp_path) -> None:
    from conftest import build_composite, library_bin

    no_loader = library_bin([[1], []], [("_lib", None), ("nokind", b"x")])
    with pytest.raises(RuntimeError, match="ffi.Module.load_from_bytes.nokind"):
        tvm_ffi.load_module(str(build_composite(tmp_path / "no_loader.so", no_loader)))
    # the loader's own error comes back
    bad_bytes = library_bin([[1], []], [("_lib", None), ("counter", b"short")])
    with pytest.raises(ValueError, match="a counter module is 8 bytes, got 5"):
        tvm_ffi.load_module(str(build_composite(tmp_path / "bad_bytes.so", bad_bytes)))
