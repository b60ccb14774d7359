// A kernel library written against the official TVM FFI headers only, as a user would write it.
// tests/kernel_lib/run.sh builds it with g++, loads it through ffi.ModuleLoadFromFile and calls
// every export from driver.c, against the official library and against anyffi.
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <cstring>

namespace ffi = tvm::ffi;

namespace {

int64_t AddOne(int64_t x) { return x + 1; }

// Scales a contiguous float32 tensor in place.
void ScaleInplace(ffi::TensorView x, double factor) {
  if (x.dtype().code != kDLFloat || x.dtype().bits != 32) {
    TVM_FFI_THROW(TypeError) << "scale_inplace: expected float32, got code " << int(x.dtype().code);
  }
  if (!x.IsContiguous()) {
    TVM_FFI_THROW(ValueError) << "scale_inplace: tensor must be contiguous";
  }
  float* data = static_cast<float*>(x.data_ptr());
  for (int64_t i = 0; i < x.numel(); ++i) data[i] = static_cast<float>(data[i] * factor);
}

// Sums the values of a map built by the caller (more than 4 entries: the dense layout).
int64_t MapSum(ffi::Map<ffi::String, int64_t> m) {
  int64_t s = 0;
  for (const auto& kv : m) s += kv.second;
  return s;
}

// Looks a key up with inline C++ (hashing and probing of the caller's map).
int64_t MapLookup(ffi::Map<ffi::String, int64_t> m, ffi::String key) {
  auto it = m.find(key);
  if (it == m.end()) TVM_FFI_THROW(KeyError) << "map_lookup: no key " << key;
  return (*it).second;
}

// Builds a map in C++ for the caller to read.
ffi::Map<ffi::String, int64_t> MakeMap(int64_t n) {
  ffi::Map<ffi::String, int64_t> m;
  for (int64_t i = 0; i < n; ++i) m.Set("key" + std::to_string(i), i * i);
  return m;
}

ffi::Array<int64_t> MakeRange(int64_t n) {
  ffi::Array<int64_t> a;
  for (int64_t i = 0; i < n; ++i) a.push_back(i);
  return a;
}

int64_t ArraySum(ffi::Array<int64_t> a) {
  int64_t s = 0;
  for (int64_t v : a) s += v;
  return s;
}

// Calls back into the caller: f(f(x)).
int64_t CallTwice(ffi::Function f, int64_t x) {
  int64_t y = f(x).cast<int64_t>();
  return f(y).cast<int64_t>();
}

void RaiseKind(ffi::String kind, ffi::String msg) {
  throw ffi::Error(std::string(kind), std::string(msg), TVMFFIBacktrace(__FILE__, __LINE__, __func__, 0));
}

// Allocates through the environment's DLPack allocator and fills with 0, 1, 2, ...
ffi::Tensor AllocIota(int64_t n) {
  ffi::Tensor t = ffi::Tensor::FromEnvAlloc(TVMFFIEnvTensorAlloc, ffi::Shape({n}),
                                            DLDataType{kDLFloat, 32, 1}, DLDevice{kDLCPU, 0});
  float* data = static_cast<float*>(t.data_ptr());
  for (int64_t i = 0; i < n; ++i) data[i] = static_cast<float>(i);
  return t;
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one, AddOne);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(scale_inplace, ScaleInplace);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(map_sum, MapSum);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(map_lookup, MapLookup);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(make_map, MakeMap);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(make_range, MakeRange);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(array_sum, ArraySum);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(call_twice, CallTwice);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(raise_kind, RaiseKind);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(alloc_iota, AllocIota);
