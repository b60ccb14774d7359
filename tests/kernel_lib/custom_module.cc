// A custom module kind written as the official documentation describes it: a C++ subclass of
// tvm::ffi::ModuleObj built on the official headers only. Loaded as a library module, it exports
// `create_counter(base)`, which makes a "counter" module whose function `add_base(x)` returns
// x + base. It is binary-serializable: `ffi.Module.load_from_bytes.counter` (registered when the
// library loads) rebuilds one from SaveToBytes, which libraries embedding a counter module in
// `__tvm_ffi__library_bin` rely on. cxx_driver.cc (and the Python suite) drive it on each
// libtvm_ffi.so; it needs the library's `typeinfo`/`vtable for tvm::ffi::ModuleObj` and its
// `ModuleObj::ImportModule`/`ClearImports` to link and run.
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/reflection/registry.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

namespace ffi = tvm::ffi;

class CounterModuleObj : public ffi::ModuleObj {
 public:
  explicit CounterModuleObj(int64_t base) : base_(base) {}

  const char* kind() const final { return "counter"; }

  int GetPropertyMask() const final {
    return ffi::Module::kRunnable | ffi::Module::kBinarySerializable;
  }

  // Eight little-endian bytes: the base.
  ffi::Bytes SaveToBytes() const final {
    return ffi::Bytes(reinterpret_cast<const char*>(&base_), sizeof(base_));
  }

  ffi::Optional<ffi::Function> GetFunction(const ffi::String& name) final {
    if (name == "add_base") {
      int64_t base = base_;
      return ffi::Function::FromTyped([base](int64_t x) { return x + base; });
    }
    if (name == "throw_ffi_error") {
      TVM_FFI_THROW(ValueError) << "CounterModule refuses " << name;
    }
    if (name == "throw_std_error") {
      throw std::runtime_error("a std::runtime_error from CounterModule::GetFunction");
    }
    return std::nullopt;
  }

  ffi::Optional<ffi::String> GetFunctionDoc(const ffi::String& name) final {
    if (name == "add_base") return ffi::String("Adds the module's base to x.");
    return std::nullopt;
  }

  ffi::Array<ffi::String> GetWriteFormats() const final { return {"txt"}; }

  void WriteToFile(const ffi::String& file_name, const ffi::String& format) const final {
    if (format != "txt") {
      TVM_FFI_THROW(ValueError) << "CounterModule cannot write format " << format;
    }
    std::ofstream(std::string(file_name)) << "counter " << base_ << "\n";
  }

  ffi::String InspectSource(const ffi::String& format) const final {
    return "counter(base=" + std::to_string(base_) + ", format=" + std::string(format) + ")";
  }

 private:
  int64_t base_;
};

static ffi::Module CreateCounter(int64_t base) {
  return ffi::Module(ffi::make_object<CounterModuleObj>(base));
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(create_counter, CreateCounter);

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = tvm::ffi::reflection;
  refl::GlobalDef().def("ffi.Module.load_from_bytes.counter", [](const ffi::Bytes& bytes) {
    int64_t base = 0;
    if (bytes.size() != sizeof(base)) {
      TVM_FFI_THROW(ValueError) << "a counter module is " << sizeof(base) << " bytes, got "
                                << bytes.size();
    }
    std::memcpy(&base, bytes.data(), sizeof(base));
    return CreateCounter(base);
  });
}
