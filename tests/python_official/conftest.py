"""Shared setup for the official-package suite (see README.md).

run.sh puts a copy of the official `tvm_ffi` package on PYTHONPATH and names the libtvm_ffi.so
that must be under test in TVMFFI_UNDER_TEST_LIB. Importing `tvm_ffi` loads that library (and the
official libtvm_ffi_testing.so, whose static initialisers run against it). Before any test runs,
the session checks /proc/self/maps: exactly one libtvm_ffi.so may be mapped, and it must be the
one under test; otherwise the run stops, since its results would say nothing about that library.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import traceback
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

# `import tvm_ffi` can fail on an incomplete library after the library itself is loaded (the
# package loads libtvm_ffi.so with ctypes first). Keep the error so the identity check still runs
# and the report says why every test module then fails to import.
IMPORT_ERROR: str | None = None
STUBBED: dict | None = None
if os.environ.get("TVMFFI_DIAGNOSTIC_STUBS") == "1" and os.environ.get("TVMFFI_UNDER_TEST_LIB"):
    import diagnostic_stubs

    STUBBED = diagnostic_stubs.install(os.environ["TVMFFI_UNDER_TEST_LIB"], HERE / "golden.json")
try:
    import tvm_ffi  # noqa: F401
    import tvm_ffi.testing  # noqa: F401
except Exception:  # noqa: BLE001
    IMPORT_ERROR = traceback.format_exc()


def partial_package() -> tuple:
    """(tvm_ffi.registry, tvm_ffi.core), usable even after a failed `import tvm_ffi` (the
    submodules imported before the failure stay in sys.modules); None when unavailable."""
    import sys

    registry, core = sys.modules.get("tvm_ffi.registry"), sys.modules.get("tvm_ffi.core")
    if registry is None or core is None:
        return None
    return registry, core


SURFACE_PREFIXES = ("ffi.", "testing.")


def library_surface() -> dict:
    """The global functions and types the library (plus the testing library) registered, with
    each type's index, ancestors, fields and methods; only `ffi.*` and `testing.*` names, so
    what the suite itself registers is left out."""
    pkg = partial_package()
    assert pkg is not None, "tvm_ffi.registry/tvm_ffi.core could not be imported"
    registry, core = pkg
    stubbed = STUBBED or {"functions": [], "types": []}  # diagnostic stubs count as missing
    names = sorted(
        str(n)
        for n in registry.list_global_func_names()
        if n.startswith(SURFACE_PREFIXES) and n not in stubbed["functions"]
    )
    keys = sorted(
        str(k)
        for k in registry.get_registered_type_keys()
        if k.startswith(SURFACE_PREFIXES) and k not in stubbed["types"]
    )
    key_of = {}
    infos = {}
    for k in keys:
        ti = core._lookup_or_register_type_info_from_type_key(k)
        key_of[ti.type_index] = k
        infos[k] = ti
    types = {}
    for k, ti in infos.items():
        types[k] = {
            "type_index": ti.type_index,
            "ancestors": [key_of.get(i, i) for i in ti.type_ancestors],
            "fields": [[f.name, f.offset, f.size, f.field_static_type_index, f.frozen] for f in ti.fields],
            "methods": [[m.name, m.is_static] for m in ti.methods],
        }
    return {"global_functions": names, "types": types}


def mapped_files(basename: str) -> list[str]:
    """Distinct real paths of the mapped files called `basename`."""
    paths = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and os.path.basename(parts[5].strip()) == basename:
                paths.add(os.path.realpath(parts[5].strip()))
    return sorted(paths)


def expected_library() -> str | None:
    lib = os.environ.get("TVMFFI_UNDER_TEST_LIB")
    return os.path.realpath(lib) if lib else None


def library_identity_problem() -> str | None:
    """None when exactly the library under test is mapped, else what is wrong."""
    expected = expected_library()
    if expected is None:
        return "TVMFFI_UNDER_TEST_LIB is not set: run the suite through tests/python_official/run.sh"
    mapped = mapped_files("libtvm_ffi.so")
    if mapped != [expected]:
        return f"expected exactly {expected} to be mapped, found {mapped}"
    return None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "issue4: structural equality/hash, serialization, JSON, deep copy, dataclasses/py_class, "
        "enums, access paths, reflection-generated dunders (select with -m issue4)",
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = [
        f"library under test ({os.environ.get('TVMFFI_UNDER_TEST_NAME', '?')}): {expected_library()}",
        f"mapped libtvm_ffi.so: {mapped_files('libtvm_ffi.so')}",
        f"mapped libtvm_ffi_testing.so: {mapped_files('libtvm_ffi_testing.so')}",
    ]
    if STUBBED is not None:
        lines.append(
            f"DIAGNOSTIC MODE (--stub-missing): stubbed {len(STUBBED['functions'])} global functions "
            f"{STUBBED['functions']} and {len(STUBBED['types'])} types {STUBBED['types']}; not a verdict"
        )
    if IMPORT_ERROR is not None:
        lines.append("`import tvm_ffi` FAILED; every test module will fail to import:")
        lines.extend("  " + s for s in IMPORT_ERROR.rstrip().splitlines())
    return lines


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """When `import tvm_ffi` failed, every other module would fail to import too, each with a
    misleading secondary error (a half-initialised package); run only the identity checks (whose
    test_import_succeeded reports the original traceback) and the surface comparison (which
    lists the global functions and types missing against the official library)."""
    if IMPORT_ERROR is not None and collection_path.suffix == ".py":
        return collection_path.name not in ("test_library_identity.py", "test_surface.py", "conftest.py")
    return None


def pytest_sessionstart(session: pytest.Session) -> None:
    problem = library_identity_problem()
    if problem is not None:
        pytest.exit(f"wrong library mapped: {problem}", returncode=3)


# --- a tiny C++ module built against the official headers -----------------------------------


def build_cxx_module(tmp_path_factory: pytest.TempPathFactory, source: Path) -> Path:
    """`source` built with g++ into a shared library against the package's headers; linked
    against the official library only to satisfy the linker (its NEEDED libtvm_ffi.so binds to
    the library already loaded, by SONAME)."""
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("g++ is not installed")
    include = os.environ.get("TVMFFI_OFFICIAL_INCLUDE") or str(Path(tvm_ffi.__file__).parent / "include")
    libdir = os.environ.get("TVMFFI_OFFICIAL_LIBDIR") or str(Path(tvm_ffi.__file__).parent / "lib")
    out = tmp_path_factory.mktemp(source.stem) / f"{source.stem}.so"
    cmd = [
        cxx, "-std=c++17", "-O1", "-shared", "-fPIC",
        "-DTVM_FFI_DLL_EXPORT_INCLUDE_METADATA=1",
        f"-I{include}", str(source),
        f"-L{libdir}", "-ltvm_ffi", "-o", str(out),
    ]  # fmt: skip
    subprocess.run(cmd, check=True)
    return out


@pytest.fixture(scope="session")
def tiny_module_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tiny_module.cc, a library of exported functions."""
    return build_cxx_module(tmp_path_factory, HERE / "tiny_module.cc")


@pytest.fixture(scope="session")
def custom_module_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/kernel_lib/custom_module.cc: a C++ subclass of ModuleObj, the documented way to
    write a custom module kind."""
    return build_cxx_module(tmp_path_factory, HERE.parent / "kernel_lib" / "custom_module.cc")


# Global functions that libraries built by these tests register (not part of either library).
TEST_LIBRARY_GLOBALS = {"ffi.Module.load_from_bytes.counter"}


def library_bin(tree: list[list[int]], nodes: list[tuple[str, bytes | None]]) -> bytes:
    """A `__tvm_ffi__library_bin` blob (the documented layout): `<nbytes: u64>`, the import tree
    as CSR `<indptr: vec<u64>> <child_indices: vec<u64>>`, then each module's `<kind: str>` and,
    unless it is `_lib`, its `<bytes>`."""
    import struct

    def vec(xs: list[int]) -> bytes:
        return struct.pack(f"<Q{len(xs)}Q", len(xs), *xs)

    def sized(b: bytes) -> bytes:
        return struct.pack("<Q", len(b)) + b

    indptr = [0]
    for children in tree:
        indptr.append(indptr[-1] + len(children))
    body = vec(indptr) + vec([c for children in tree for c in children])
    for kind, payload in nodes:
        body += sized(kind.encode())
        if payload is not None:
            body += sized(payload)
    return struct.pack("<Q", len(body)) + body


def build_composite(out: Path, blob: bytes) -> Path:
    """A C library exporting `answer()` (42) and embedding `blob` as its library binary."""
    cc = shutil.which("gcc")
    if cc is None:
        pytest.skip("gcc is not installed")
    src = out.with_suffix(".c")
    src.write_text(
        "#include <stdint.h>\n"
        "typedef struct { int32_t type_index; uint32_t pad; int64_t v; } Any;\n"
        "int __tvm_ffi_answer(void* self, const Any* args, int32_t n, Any* ret) {\n"
        "  ret->type_index = 1; ret->pad = 0; ret->v = 42; return 0;\n}\n"
        "const unsigned char __tvm_ffi__library_bin[] = {"
        + ",".join(str(b) for b in blob)
        + "};\n"
    )
    subprocess.run([cc, "-shared", "-fPIC", "-O1", str(src), "-o", str(out)], check=True)
    return out


@pytest.fixture(scope="session")
def broken_module_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A shared library that references an undefined data symbol: dlopen must fail."""
    cc = shutil.which("gcc")
    if cc is None:
        pytest.skip("gcc is not installed")
    d = tmp_path_factory.mktemp("broken_module")
    src = d / "broken.c"
    src.write_text(
        "extern int anyffi_symbol_that_does_not_exist;\n"
        "int __tvm_ffi_get(void) { return anyffi_symbol_that_does_not_exist; }\n"
    )
    out = d / "broken.so"
    subprocess.run([cc, "-shared", "-fPIC", str(src), "-o", str(out)], check=True)
    return out
