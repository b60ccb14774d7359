"""load_module: a kernel library written in C against the C ABI only, compiled here with cc."""

from __future__ import annotations

import os
import shutil
import subprocess

import anyffi
import pytest
from conftest import needs_global

np = pytest.importorskip("numpy")

SOURCE = r"""
#include <stdint.h>
#include <string.h>

typedef struct { int32_t type_index; uint32_t pad; union { int64_t v_int64; double v_float64; void* v_ptr; }; } Any;
typedef struct { void* data; int32_t device_type, device_id; int32_t ndim; uint8_t code, bits; uint16_t lanes;
                 int64_t* shape; int64_t* strides; uint64_t byte_offset; } DLTensor;
void TVMFFIErrorSetRaisedFromCStr(const char* kind, const char* message);

int __tvm_ffi_add_one(void* self, const Any* args, int32_t n, Any* result) {
  if (n != 1 || args[0].type_index != 1) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "add_one: expected one int");
    return -1;
  }
  result->type_index = 1; result->pad = 0; result->v_int64 = args[0].v_int64 + 1;
  return 0;
}

/* sum of a contiguous float32 tensor, given as a DLTensor* view (7) or an ffi.Tensor (70) */
int __tvm_ffi_sum_f32(void* self, const Any* args, int32_t n, Any* result) {
  const DLTensor* t;
  if (n == 1 && args[0].type_index == 7) t = (const DLTensor*)args[0].v_ptr;
  else if (n == 1 && args[0].type_index == 70) t = (const DLTensor*)((char*)args[0].v_ptr + 24);
  else { TVMFFIErrorSetRaisedFromCStr("TypeError", "sum_f32: expected a tensor"); return -1; }
  if (t->code != 2 || t->bits != 32) { TVMFFIErrorSetRaisedFromCStr("ValueError", "sum_f32: not float32"); return -1; }
  int64_t count = 1;
  for (int i = 0; i < t->ndim; ++i) count *= t->shape[i];
  const float* p = (const float*)((char*)t->data + t->byte_offset);
  double s = 0;
  for (int64_t i = 0; i < count; ++i) s += p[i];
  result->type_index = 3; result->pad = 0; result->v_float64 = s;
  return 0;
}

/* the entry function: calling the module calls it */
int __tvm_ffi_main(void* self, const Any* args, int32_t n, Any* result) {
  result->type_index = 1; result->pad = 0; result->v_int64 = 100 + n;
  return 0;
}

/* doubles a float32 tensor in place */
int __tvm_ffi_scale2_f32(void* self, const Any* args, int32_t n, Any* result) {
  const DLTensor* t = (const DLTensor*)args[0].v_ptr;
  if (args[0].type_index == 70) t = (const DLTensor*)((char*)args[0].v_ptr + 24);
  int64_t count = 1;
  for (int i = 0; i < t->ndim; ++i) count *= t->shape[i];
  float* p = (float*)((char*)t->data + t->byte_offset);
  for (int64_t i = 0; i < count; ++i) p[i] *= 2;
  return 0;
}
"""


@pytest.fixture(scope="module")
def kernel_lib(tmp_path_factory) -> str:
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("kernel")
    src, so = d / "kernels.c", d / "libkernels.so"
    src.write_text(SOURCE)
    subprocess.run([cc, "-O2", "-shared", "-fPIC", str(src), "-o", str(so)], check=True)
    return str(so)


modules = needs_global("ffi.ModuleLoadFromFile", "ffi.ModuleGetFunction")


@modules
def test_load_and_call(kernel_lib):
    m = anyffi.load_module(kernel_lib)
    assert isinstance(m, anyffi.Module) and m.type_key == "ffi.Module"
    assert m.add_one(41) == 42
    assert m["add_one"](1) == 2
    assert "add_one" in m and "nope" not in m
    assert m.get_function("nope") is None
    with pytest.raises(AttributeError):
        m.nope
    with pytest.raises(KeyError):
        m["nope"]


@modules
def test_module_errors_have_their_kind(kernel_lib):
    m = anyffi.load_module(kernel_lib)
    with pytest.raises(TypeError, match="expected one int"):
        m.add_one("x")


@modules
def test_numpy_into_module_zero_copy(kernel_lib):
    m = anyffi.load_module(kernel_lib)
    x = np.arange(10, dtype="float32")
    assert m.sum_f32(x) == 45.0
    m.scale2_f32(x)
    assert x[9] == 18.0
    with pytest.raises(ValueError, match="not float32"):
        m.sum_f32(np.arange(3.0))
    assert m.sum_f32(anyffi.from_dlpack(x)) == 90.0


@modules
def test_function_outlives_module_object(kernel_lib):
    import gc

    f = anyffi.load_module(kernel_lib).add_one
    gc.collect()
    assert f(1) == 2


@modules
def test_module_methods_and_imports(kernel_lib, tmp_path):
    a, b = anyffi.load_module(kernel_lib), anyffi.load_module(kernel_lib)
    assert a.kind == "library"
    assert a.is_runnable() and a.is_binary_serializable() and not a.is_compilation_exportable()
    assert a.inspect_source() == "" and a.get_write_formats() == []
    assert a.get_function_doc("add_one") is None and a.get_function_metadata("add_one") is None
    with pytest.raises(RuntimeError, match=r"Module\[library\] does not support WriteToFile"):
        a.write_to_file(tmp_path / "x.o")
    assert a.imports == []
    a.import_module(b)
    assert [m.same_as(b) for m in a.imports] == [True]
    with pytest.raises(RuntimeError, match="Cyclic dependency"):
        b.import_module(a)
    assert a.get_function("add_one", query_imports=True)(1) == 2
    assert a() == 100 and a(1, 2) == 102  # calling a module calls its `main`
    a.clear_imports()
    assert a.imports == []


def test_missing_file():
    with pytest.raises(FileNotFoundError):
        anyffi.load_module("/no/such/lib.so")


def test_a_library_whose_static_initialiser_throws(tmp_path):
    # the process aborts (as the official library's does, by std::terminate), but says what was
    # thrown: on our library the exception reached Rust frames, whose abort lost the message
    import sys

    cxx = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    src, so = tmp_path / "boom.cc", tmp_path / "libboom.so"
    src.write_text(
        "#include <stdexcept>\n"
        "struct Boom { Boom() { throw std::runtime_error(\"boom from a static initialiser\"); } };\n"
        "static Boom boom;\n"
    )
    subprocess.run([cxx, "-O1", "-shared", "-fPIC", str(src), "-o", str(so)], check=True)
    code = f"import anyffi; anyffi.load_module({str(so)!r}); print('returned')"
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(anyffi.__file__)))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode != 0 and "returned" not in r.stdout, (r.returncode, r.stdout, r.stderr)
    assert "boom from a static initialiser" in r.stderr, r.stderr
