// Calls into C++ subclasses of tvm::ffi::ModuleObj (modules made by code built on the official
// headers) with their C++ exceptions caught, for the Rust side of anyffi (registry/src/
// cxx_module.rs). Rust cannot catch a C++ exception, so this one function does the virtual call
// inside a try block and turns an exception into a status code.
//
// This file is not compiled by the build: scripts/gen-cxx-module-calls.sh turns it into
// registry/src/cxx_module_calls.s, which the crate assembles with global_asm!, so that building
// anyffi needs no C++ compiler. Regenerate the .s after changing this file.
//
// It includes no TVM FFI header. The stand-in types below only reproduce the x86-64 Itanium
// calling convention of the real ones: a class with a user-provided destructor travels by
// reference and is returned through a hidden pointer, which is what String, Bytes, Optional<T>,
// Array<T> and Module are.

#include <cxxabi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <typeinfo>

// Types with external linkage: in an anonymous namespace, a class with only pure virtual
// functions and no subclass in this file lets the compiler replace every call by
// __cxa_pure_virtual.
namespace anyffi_cxx {

// TVMFFIAny: what a String, Bytes or Optional<String> holds.
struct Cell {
  int32_t type_index;
  uint32_t small_len;
  uint64_t value;
};

// String, Bytes, Optional<String>: one Cell, with a destructor (so: by reference, hidden result
// pointer). The destructor does nothing: ownership moves to the caller of module_call.
struct CellRef {
  Cell cell;
  ~CellRef() {}
};

// Optional<Function>, Array<String>, Module: one object pointer, with a destructor.
struct ObjRef {
  void* obj;
  ~ObjRef() {}
};

// The virtual functions of tvm::ffi::ModuleObj, in declaration order (no virtual destructor).
struct ModuleVtable {
  virtual const char* kind() const = 0;
  virtual int GetPropertyMask() const = 0;
  virtual ObjRef GetFunction(const CellRef& name) = 0;
  virtual bool ImplementsFunction(const CellRef& name) = 0;
  virtual CellRef GetFunctionDoc(const CellRef& name) = 0;
  virtual CellRef GetFunctionMetadata(const CellRef& name) = 0;
  virtual void WriteToFile(const CellRef& file_name, const CellRef& format) const = 0;
  virtual ObjRef GetWriteFormats() const = 0;
  virtual CellRef SaveToBytes() const = 0;
  virtual CellRef InspectSource(const CellRef& format) const = 0;
  virtual void ImportModule(const ObjRef& other) = 0;
  virtual void ClearImports() = 0;
};

}  // namespace anyffi_cxx

namespace {

using anyffi_cxx::Cell;
using anyffi_cxx::CellRef;
using anyffi_cxx::ModuleVtable;
using anyffi_cxx::ObjRef;

char* copy_text(const char* s) {
  size_t n = std::strlen(s);
  char* out = static_cast<char*>(std::malloc(n + 1));
  if (out != nullptr) std::memcpy(out, s, n + 1);
  return out;
}

}  // namespace

extern "C" int TVMFFIObjectIncRef(void* obj);

// Operation codes; keep in step with `Op` in registry/src/cxx_module.rs.
enum Op : int {
  kKind = 0,            // out: const char**
  kPropertyMask = 1,    // out: int*
  kGetFunction = 2,     // a: name; out: void** (owned Function or NULL)
  kImplements = 3,      // a: name; out: int*
  kFunctionDoc = 4,     // a: name; out: Cell* (owned)
  kFunctionMetadata = 5,
  kWriteToFile = 6,     // a: file name, b: format
  kWriteFormats = 7,    // out: void** (owned Array)
  kInspectSource = 9,   // a: format; out: Cell* (owned)
  kImportModule = 10,   // a: void** (a Module reference)
  kClearImports = 11,
};

// Runs operation `op` on the module whose C++ `this` is `self` (the object header - 8).
// Returns 0 on success. On a C++ exception: 1 with `*error` an owned ffi.Error object (the
// exception was a tvm::ffi::Error), 2 with `*what` a malloc'd copy of what() (another
// std::exception), 3 for anything else; -1 for an unknown op.
extern "C" int anyffi_cxx_module_call(int op, void* self, const void* a, const void* b, void* out,
                                      void** error, char** what) {
  ModuleVtable* m = static_cast<ModuleVtable*>(self);
  const CellRef* ca = static_cast<const CellRef*>(a);
  try {
    switch (op) {
      case kKind:
        *static_cast<const char**>(out) = m->kind();
        return 0;
      case kPropertyMask:
        *static_cast<int*>(out) = m->GetPropertyMask();
        return 0;
      case kGetFunction: {
        ObjRef r = m->GetFunction(*ca);
        *static_cast<void**>(out) = r.obj;
        return 0;
      }
      case kImplements:
        *static_cast<int*>(out) = m->ImplementsFunction(*ca) ? 1 : 0;
        return 0;
      case kFunctionDoc: {
        CellRef r = m->GetFunctionDoc(*ca);
        *static_cast<Cell*>(out) = r.cell;
        return 0;
      }
      case kFunctionMetadata: {
        CellRef r = m->GetFunctionMetadata(*ca);
        *static_cast<Cell*>(out) = r.cell;
        return 0;
      }
      case kWriteToFile:
        m->WriteToFile(*ca, *static_cast<const CellRef*>(b));
        return 0;
      case kWriteFormats: {
        ObjRef r = m->GetWriteFormats();
        *static_cast<void**>(out) = r.obj;
        return 0;
      }
      case kInspectSource: {
        CellRef r = m->InspectSource(*ca);
        *static_cast<Cell*>(out) = r.cell;
        return 0;
      }
      case kImportModule:
        m->ImportModule(*static_cast<const ObjRef*>(a));
        return 0;
      case kClearImports:
        m->ClearImports();
        return 0;
      default:
        return -1;
    }
  } catch (const std::exception& e) {
    const std::type_info* t = abi::__cxa_current_exception_type();
    const char* name = t != nullptr ? t->name() : "";
    if (*name == '*') ++name;
    // tvm::ffi::Error: std::exception is its primary base (offset 0), the ObjectRef's object
    // pointer follows at offset 8.
    if (std::strcmp(name, "N3tvm3ffi5ErrorE") == 0) {
      void* obj = *reinterpret_cast<void* const*>(reinterpret_cast<const char*>(&e) + 8);
      if (obj != nullptr) {
        TVMFFIObjectIncRef(obj);
        *error = obj;
        return 1;
      }
    }
    *what = copy_text(e.what());
    return 2;
  } catch (...) {
    return 3;
  }
}

// dlopen, with a C++ exception thrown by the library's static initialisers caught. Such an
// exception cannot reach Rust (Rust aborts with "Rust cannot catch foreign exceptions", and the
// message is lost), and the loader cannot be trusted after it (its lock may still be held), so
// this prints what was thrown and aborts, as the official library does (std::terminate). The
// call goes through a pointer without noexcept: glibc declares dlopen noexcept, which would let
// the compiler drop the handler.
extern "C" void* dlopen(const char* file, int mode);
extern "C" void* anyffi_cxx_dlopen(const char* path, int mode) {
  void* (*volatile open)(const char*, int) = dlopen;
  try {
    return open(path, mode);
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "anyffi: loading %s: a static initialiser of the library threw an exception: %s\n",
                 path, e.what());
  } catch (...) {
    std::fprintf(stderr,
                 "anyffi: loading %s: a static initialiser of the library threw an exception that "
                 "is not a std::exception\n",
                 path);
  }
  std::fflush(stderr);
  std::abort();
}
