// A tiny library written against the official TVM FFI headers only, as a user of the Python
// package would write it. conftest.py builds it with g++; test_module.py loads it with
// tvm_ffi.load_module and calls every export.
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <string>

namespace ffi = tvm::ffi;

namespace {

int64_t AddOne(int64_t x) { return x + 1; }

ffi::String Concat(ffi::String a, ffi::String b) { return ffi::String(std::string(a) + std::string(b)); }

// Sums the values of the caller's map with inline C++ iteration (dense layout above 4 entries).
int64_t MapSum(ffi::Map<ffi::String, int64_t> m) {
  int64_t s = 0;
  for (const auto& kv : m) s += kv.second;
  return s;
}

ffi::Array<int64_t> MakeRange(int64_t n) {
  ffi::Array<int64_t> a;
  for (int64_t i = 0; i < n; ++i) a.push_back(i);
  return a;
}

// Doubles a contiguous float32 tensor in place (zero copy from numpy through DLPack).
void DoubleInplace(ffi::TensorView x) {
  if (x.dtype().code != kDLFloat || x.dtype().bits != 32) {
    TVM_FFI_THROW(TypeError) << "double_inplace: expected float32";
  }
  float* data = static_cast<float*>(x.data_ptr());
  for (int64_t i = 0; i < x.numel(); ++i) data[i] *= 2.0f;
}

void RaiseValueError(ffi::String msg) { TVM_FFI_THROW(ValueError) << msg; }

// Calls back into the caller's function.
ffi::Any CallTwice(ffi::Function f, int64_t x) { return f(f(x).cast<int64_t>()); }

int64_t AddWithDoc(int64_t a, int64_t b) { return a + b; }

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one, AddOne);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(concat, Concat);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(map_sum, MapSum);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(make_range, MakeRange);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(double_inplace, DoubleInplace);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(raise_value_error, RaiseValueError);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(call_twice, CallTwice);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_with_doc, AddWithDoc);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(add_with_doc, "Add two integers.");
