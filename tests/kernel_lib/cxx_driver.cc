// A C++ program on the official headers that uses the library's non-inline C++ API (the
// `TVM_FFI_EXTRA_CXX_API` functions) and a module's virtual functions, as the official
// quickstart's C++ loader does. Run against each libtvm_ffi.so by tests/kernel_lib/run.sh; it
// must behave the same on both. Failures print a line and make the exit status non-zero.
//
//   cxx_driver USERLIB.so [CUSTOM_MODULE.so]
#include <tvm/ffi/extra/dataclass.h>
#include <tvm/ffi/extra/json.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/extra/serialization.h>
#include <tvm/ffi/extra/structural_equal.h>
#include <tvm/ffi/extra/structural_hash.h>
#include <tvm/ffi/tvm_ffi.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>

namespace ffi = tvm::ffi;

static int failures = 0;
static int checks = 0;

#define EXPECT(cond)                                                  \
  do {                                                               \
    ++checks;                                                        \
    if (!(cond)) {                                                   \
      ++failures;                                                    \
      std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);    \
    }                                                                \
  } while (0)

// Runs `f`, which must throw a tvm::ffi::Error that `ok` accepts.
template <typename F, typename Ok>
static void ExpectErrorThat(const char* what, F f, Ok ok) {
  ++checks;
  try {
    f();
    ++failures;
    std::printf("FAIL %s: no exception\n", what);
  } catch (const ffi::Error& e) {
    if (!ok(e)) {
      ++failures;
      std::printf("FAIL %s: got %s: %s\nbacktrace:\n%s\n", what, e.kind().c_str(),
                  e.message().c_str(), e.backtrace().c_str());
    }
  } catch (...) {
    ++failures;
    std::printf("FAIL %s: an exception that is not tvm::ffi::Error\n", what);
  }
}

// Runs `f`, which must throw tvm::ffi::Error of `kind` whose message contains `needle`.
template <typename F>
static void ExpectError(const char* what, const char* kind, const char* needle, F f) {
  ExpectErrorThat(what, f, [&](const ffi::Error& e) {
    return e.kind() == kind && e.message().find(needle) != std::string::npos &&
           std::strstr(e.what(), needle) != nullptr;
  });
}

static void TestModule(const char* path) {
  ffi::Module mod = ffi::Module::LoadFromFile(path);
  // virtual functions, through the module's vtable
  EXPECT(std::string(mod->kind()) == "library");
  EXPECT(mod->GetPropertyMask() == 0b011);
  ffi::Optional<ffi::Function> f = mod->GetFunction("add_one");
  EXPECT(f.has_value());
  EXPECT((*f)(41).cast<int64_t>() == 42);
  EXPECT(!mod->GetFunction("no_such_function").has_value());
  EXPECT(mod->ImplementsFunction("add_one"));
  EXPECT(!mod->ImplementsFunction("no_such_function"));
  EXPECT(mod->GetFunctionMetadata("add_one").has_value());
  EXPECT(!mod->GetFunctionMetadata("no_such_function").has_value());
  EXPECT(mod->InspectSource("asm").empty());
  EXPECT(mod->GetWriteFormats().empty());
  ExpectError("SaveToBytes", "RuntimeError", "does not support SaveToBytes",
              [&] { mod->SaveToBytes(); });
  // the non-virtual overloads that may search the imports
  ffi::Module other = ffi::Module::LoadFromFile(path);
  other->ImportModule(mod);
  EXPECT(other->imports().size() == 1);
  EXPECT(other->GetFunction("make_range", true).has_value());
  EXPECT(other->ImplementsFunction("make_range", true));
  ExpectError("cyclic import", "RuntimeError", "Cyclic dependency",
              [&] { mod->ImportModule(other); });
  other->ClearImports();
  EXPECT(other->imports().empty());
  // Module::operator-> calls the same functions
  ffi::Function range = mod->GetFunction("make_range", false).value();
  EXPECT(range(3).cast<ffi::Array<int64_t>>().size() == 3);
  // errors are tvm::ffi::Error, catchable as std::exception too
  ExpectError("LoadFromFile(missing)", "InternalError", "Failed to load dynamic shared library",
              [] { ffi::Module::LoadFromFile("/nonexistent/no_such_library.so"); });
  ExpectError("LoadFromFile(no extension)", "RuntimeError", "Failed to get file format",
              [] { ffi::Module::LoadFromFile("no_extension"); });
  // the whole message, as the official library words it (C++ callers may compare it)
  for (const char* path : {"no_extension", "/tmp/source.cc"}) {
    std::string want = std::string(path) == "no_extension"
                           ? "Failed to get file format from no_extension"
                           : "Loader for `.cc` files is not registered, resolved to "
                             "(ffi.Module.load_from_file.cc) in the global registry.";
    ExpectErrorThat(
        path, [path] { ffi::Module::LoadFromFile(path); },
        [&](const ffi::Error& e) { return e.message().rfind(want, 0) == 0; });
  }
  ++checks;
  try {
    ffi::Module::LoadFromFile("/nonexistent/no_such_library.so");
    ++failures;
  } catch (const std::exception& e) {
    if (std::strstr(e.what(), "no_such_library") == nullptr) {
      ++failures;
      std::printf("FAIL std::exception::what(): %s\n", e.what());
    }
  }
  ++checks;
  try {
    ffi::Module::LoadFromFile("/nonexistent/no_such_library.so");
    ++failures;
  } catch (const ffi::Error& e) {  // a copy of the thrown object
    ffi::Error copy = e;
    if (copy.kind() != "InternalError") ++failures;
  }
}

// An error raised inside the library, called from C++ (a global function called directly, and
// an exported C++ function): its backtrace goes on up to this caller, as the official trace
// does, and shows no Rust standard-library frames.
__attribute__((noinline)) static void TestErrorBacktraceReachesTheCaller() {
  auto check = [](const char* what, auto f) {
    ExpectErrorThat(what, f, [](const ffi::Error& e) {
      std::string bt = e.backtrace();
      return bt.find("TestErrorBacktraceReachesTheCaller") != std::string::npos &&
             bt.find("/rustc/") == std::string::npos;
    });
  };
  check("ffi.ArrayGetItem(-5)", [] {
    ffi::Function::GetGlobalRequired("ffi.ArrayGetItem")(ffi::Array<int>{1, 2}, -5);
  });
  check("json::Parse", [] { ffi::json::Parse(ffi::String("{bad")); });
}

static void TestExtraFunctions() {
  TestErrorBacktraceReachesTheCaller();
  ffi::Array<ffi::Any> a{1, 2, 3}, b{1, 2, 3}, c{1, 2, 4};
  EXPECT(ffi::StructuralEqual::Equal(a, b));
  EXPECT(!ffi::StructuralEqual::Equal(a, c));
  EXPECT(ffi::StructuralHash::Hash(a) == ffi::StructuralHash::Hash(b));
  EXPECT(ffi::StructuralHash::Hash(a) != ffi::StructuralHash::Hash(c));
  EXPECT(!ffi::StructuralEqual::GetFirstMismatch(a, b).has_value());
  auto mismatch = ffi::StructuralEqual::GetFirstMismatch(a, c);
  EXPECT(mismatch.has_value());

  EXPECT(ffi::RecursiveEq(a, b));
  EXPECT(ffi::RecursiveLt(a, c));
  EXPECT(ffi::RecursiveLe(a, b));
  EXPECT(ffi::RecursiveGt(c, a));
  EXPECT(ffi::RecursiveGe(c, a));
  EXPECT(!ffi::RecursiveGt(a, b));
  EXPECT(ffi::RecursiveHash(a) == ffi::RecursiveHash(b));
  EXPECT(ffi::ReprPrint(a) == "(1, 2, 3)");
  ffi::Any copy = ffi::DeepCopy(a);
  EXPECT(!copy.cast<ffi::Array<ffi::Any>>().same_as(a));
  EXPECT(ffi::RecursiveEq(copy, a));

  ffi::json::Value v = ffi::json::Parse("{\"k\": [1, 2.5, \"s\", null, true]}");
  EXPECT((v.cast<ffi::Map<ffi::Any, ffi::Any>>().size() == 1));
  EXPECT(ffi::json::Stringify(ffi::json::Parse("[1,2]")) == "[1,2]");
  EXPECT(ffi::json::Stringify(ffi::json::Parse("[1]"), 2) == "[\n  1\n]");
  ffi::String err("stale");
  ffi::json::Value bad = ffi::json::Parse("[1,", &err);
  EXPECT(bad == nullptr);
  EXPECT(!err.empty() && err != "stale");
  ffi::json::Value good = ffi::json::Parse("[1]", &err);
  EXPECT(err.empty());
  EXPECT(good != nullptr);
  ExpectError("json::Parse(bad)", "ValueError", "", [] { ffi::json::Parse("{"); });

  ffi::json::Value graph = ffi::ToJSONGraph(a);
  EXPECT(ffi::RecursiveEq(ffi::FromJSONGraph(graph), a));
  ExpectError("FromJSONGraph(bad)", "ValueError", "", [] { ffi::FromJSONGraph(ffi::Any(1)); });
}

// A module made by C++ code (custom_module.cc, a subclass of ModuleObj): the library reaches
// its methods through its vtable for the `ffi.Module*` globals (what the Python package calls),
// turns its C++ exceptions into errors, and serves the inherited ImportModule/ClearImports.
static void TestCustomModule(const char* userlib, const char* custom) {
  ffi::Module holder = ffi::Module::LoadFromFile(custom);
  ffi::Function create = *holder->GetFunction("create_counter");
  ffi::Module mod = create(5).cast<ffi::Module>();
  auto global = [](const char* name) { return ffi::Function::GetGlobalRequired(name); };
  EXPECT(global("ffi.ModuleGetKind")(mod).cast<ffi::String>() == "counter");
  EXPECT(global("ffi.ModuleGetPropertyMask")(mod).cast<int>() ==
         (ffi::Module::kRunnable | ffi::Module::kBinarySerializable));
  auto get = global("ffi.ModuleGetFunction");
  ffi::Optional<ffi::Function> add = get(mod, "add_base", false).cast<ffi::Optional<ffi::Function>>();
  EXPECT(add.has_value() && (*add)(3).cast<int64_t>() == 8);
  EXPECT(!get(mod, "missing", true).cast<ffi::Optional<ffi::Function>>().has_value());
  ExpectError("GetFunction throwing tvm::ffi::Error", "ValueError", "CounterModule refuses throw_ffi_error",
              [&] { get(mod, "throw_ffi_error", false); });
  // Another std::exception: the official library lets a C++ caller of its own (C++) function see
  // the std::runtime_error itself; through our (C ABI) function it is an InternalError. Both
  // carry the message in what().
  ++checks;
  try {
    get(mod, "throw_std_error", false);
    ++failures;
    std::printf("FAIL GetFunction throwing std::runtime_error: no exception\n");
  } catch (const std::exception& e) {
    const ffi::Error* err = dynamic_cast<const ffi::Error*>(&e);
    if (std::strstr(e.what(), "a std::runtime_error from CounterModule::GetFunction") == nullptr ||
        (err != nullptr && err->kind() != "InternalError")) {
      ++failures;
      std::printf("FAIL GetFunction throwing std::runtime_error: %s\n", e.what());
    }
  }
  EXPECT(global("ffi.ModuleImplementsFunction")(mod, "add_base", false).cast<bool>());
  EXPECT(!global("ffi.ModuleImplementsFunction")(mod, "nope", true).cast<bool>());
  EXPECT(global("ffi.ModuleGetFunctionDoc")(mod, "add_base", false).cast<ffi::Optional<ffi::String>>() ==
         "Adds the module's base to x.");
  EXPECT(!global("ffi.ModuleGetFunctionMetadata")(mod, "add_base", false).cast<ffi::Optional<ffi::String>>());
  EXPECT(global("ffi.ModuleInspectSource")(mod, "c").cast<ffi::String>() == "counter(base=5, format=c)");
  ffi::Array<ffi::String> formats = global("ffi.ModuleGetWriteFormats")(mod).cast<ffi::Array<ffi::String>>();
  EXPECT(formats.size() == 1 && formats[0] == "txt");
  std::string out = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/anyffi-counter.txt";
  global("ffi.ModuleWriteToFile")(mod, out, "txt");
  std::stringstream text;
  text << std::ifstream(out).rdbuf();
  EXPECT(text.str() == "counter 5\n");
  std::remove(out.c_str());
  ExpectError("WriteToFile(bad format)", "ValueError", "cannot write format bin",
              [&] { global("ffi.ModuleWriteToFile")(mod, out, "bin"); });

  // imports, both ways: the C++ module inherits ImportModule/ClearImports from the library
  ffi::Module lib = ffi::Module::LoadFromFile(userlib);
  global("ffi.ModuleImportModule")(mod, lib);
  EXPECT(mod->imports().size() == 1);  // the inline accessor reads imports_ itself
  EXPECT(get(mod, "add_one", true).cast<ffi::Optional<ffi::Function>>().has_value());
  EXPECT(!get(mod, "add_one", false).cast<ffi::Optional<ffi::Function>>().has_value());
  EXPECT(mod->GetFunction("add_one", true).has_value());
  EXPECT(mod->ImplementsFunction("add_one", true));
  ExpectError("import cycle", "RuntimeError", "Cyclic dependency",
              [&] { global("ffi.ModuleImportModule")(lib, mod); });
  global("ffi.ModuleClearImports")(mod);
  EXPECT(mod->imports().size() == 0);
  global("ffi.ModuleImportModule")(lib, mod);
  ffi::Optional<ffi::Function> via = get(lib, "add_base", true).cast<ffi::Optional<ffi::Function>>();
  EXPECT(via.has_value() && (*via)(1).cast<int64_t>() == 6);
  ExpectError("an import's GetFunction throwing", "ValueError", "refuses",
              [&] { get(lib, "throw_ffi_error", true); });
  ffi::Module other = create(7).cast<ffi::Module>();
  mod->ImportModule(other);  // a direct C++ call of the inherited function
  EXPECT(mod->imports().size() == 1);
  EXPECT(get(lib, "add_base", true).cast<ffi::Optional<ffi::Function>>().has_value());
  ExpectError("inherited ImportModule, cycle", "RuntimeError", "Cyclic dependency",
              [&] { global("ffi.ModuleImportModule")(other, lib); });
  ExpectError("inherited ImportModule called directly, cycle", "RuntimeError", "Cyclic dependency",
              [&] { other->ImportModule(lib); });
  mod->ClearImports();
  EXPECT(mod->imports().empty());
  global("ffi.ModuleClearImports")(lib);
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: %s USERLIB.so [CUSTOM_MODULE.so]\n", argv[0]);
    return 2;
  }
  try {
    TestModule(argv[1]);
    TestExtraFunctions();
    if (argc == 3) TestCustomModule(argv[1], argv[2]);
  } catch (const std::exception& e) {
    std::printf("FAIL uncaught: %s\n", e.what());
    ++failures;
  }
  std::printf("cxx_driver: %d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
