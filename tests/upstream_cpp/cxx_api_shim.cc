// Test-only shim: the official headers' "extra" C++ API functions (declared with
// TVM_FFI_EXTRA_CXX_API and defined inside the official libtvm_ffi.so as C++-mangled symbols)
// implemented on top of the global functions the library registers under the same names.
//
// anyffi exports the C ABI only; it has no C++-mangled symbols. The official gtest suite calls
// these C++ functions directly, so tests/upstream_cpp/run.sh LD_PRELOADs this shim when it runs
// the suite on anyffi. Each function forwards its arguments unchanged to the global function
// and converts the result; errors travel as the tvm::ffi::Error the header's call path throws.
// The suite also runs with this shim on the OFFICIAL library, where it must pass exactly as the
// library's own C++ exports do: that is what shows the forwarding is faithful. There the
// library's global functions call its own exported C++ functions, which the preloaded shim
// interposes; a call that re-enters the shim on the same thread therefore goes to the next
// definition (the library's, found with dlsym(RTLD_NEXT)) instead of looping. anyffi has no
// such definition, and its global functions never call back into C++ symbols.
#include <dlfcn.h>
#include <tvm/ffi/extra/dataclass.h>
#include <tvm/ffi/extra/json.h>
#include <tvm/ffi/extra/serialization.h>
#include <tvm/ffi/extra/structural_equal.h>
#include <tvm/ffi/extra/structural_hash.h>
#include <tvm/ffi/extra/visit_error_context.h>
#include <tvm/ffi/function.h>

namespace tvm {
namespace ffi {
namespace {

Function Global(const char* name) { return Function::GetGlobalRequired(name);
}

thread_local int shim_depth = 0;

// Marks the thread as inside the shim for the duration of one forwarded call.
struct InShim {
  InShim() { ++shim_depth; }
  ~InShim() { --shim_depth; }
};

// The library's own definition of a C++ API function, when the shim is re-entered from inside
// a forwarded call and the library has one; nullptr otherwise.
template <typename Fn>
Fn* Reentered(const char* mangled) {
  if (shim_depth == 0) return nullptr;
  return reinterpret_cast<Fn*>(dlsym(RTLD_NEXT, mangled));
}

}  // namespace

#define SHIM_REENTRY(type, mangled, ...)                               \
  if (auto* real = Reentered<type>(mangled)) return real(__VA_ARGS__); \
  InShim in_shim_guard

Any DeepCopy(const Any& value) {
  SHIM_REENTRY(Any(const Any&), "_ZN3tvm3ffi8DeepCopyERKNS0_3AnyE", value);
  return Global("ffi.DeepCopy")(value);
}
String ReprPrint(const Any& value) {
  SHIM_REENTRY(String(const Any&), "_ZN3tvm3ffi9ReprPrintERKNS0_3AnyE", value);
  return Global("ffi.ReprPrint")(value).cast<String>();
}
int64_t RecursiveHash(const Any& value) {
  SHIM_REENTRY(int64_t(const Any&), "_ZN3tvm3ffi13RecursiveHashERKNS0_3AnyE", value);
  return Global("ffi.RecursiveHash")(value).cast<int64_t>();
}
bool RecursiveEq(const Any& lhs, const Any& rhs) {
  SHIM_REENTRY(bool(const Any&, const Any&), "_ZN3tvm3ffi11RecursiveEqERKNS0_3AnyES3_", lhs, rhs);
  return Global("ffi.RecursiveEq")(lhs, rhs).cast<bool>();
}
bool RecursiveLt(const Any& lhs, const Any& rhs) {
  SHIM_REENTRY(bool(const Any&, const Any&), "_ZN3tvm3ffi11RecursiveLtERKNS0_3AnyES3_", lhs, rhs);
  return Global("ffi.RecursiveLt")(lhs, rhs).cast<bool>();
}
bool RecursiveLe(const Any& lhs, const Any& rhs) {
  SHIM_REENTRY(bool(const Any&, const Any&), "_ZN3tvm3ffi11RecursiveLeERKNS0_3AnyES3_", lhs, rhs);
  return Global("ffi.RecursiveLe")(lhs, rhs).cast<bool>();
}
bool RecursiveGt(const Any& lhs, const Any& rhs) {
  SHIM_REENTRY(bool(const Any&, const Any&), "_ZN3tvm3ffi11RecursiveGtERKNS0_3AnyES3_", lhs, rhs);
  return Global("ffi.RecursiveGt")(lhs, rhs).cast<bool>();
}
bool RecursiveGe(const Any& lhs, const Any& rhs) {
  SHIM_REENTRY(bool(const Any&, const Any&), "_ZN3tvm3ffi11RecursiveGeERKNS0_3AnyES3_", lhs, rhs);
  return Global("ffi.RecursiveGe")(lhs, rhs).cast<bool>();
}

json::Value ToJSONGraph(const Any& value, const Any& metadata) {
  SHIM_REENTRY(Any(const Any&, const Any&), "_ZN3tvm3ffi11ToJSONGraphERKNS0_3AnyES3_", value, metadata);
  return Global("ffi.ToJSONGraph")(value, metadata);
}
Any FromJSONGraph(const json::Value& value) {
  SHIM_REENTRY(Any(const Any&), "_ZN3tvm3ffi13FromJSONGraphERKNS0_3AnyE", value);
  return Global("ffi.FromJSONGraph")(value);
}

namespace json {
Value Parse(const String& json_str, String* error_msg) {
  SHIM_REENTRY(Value(const String&, String*), "_ZN3tvm3ffi4json5ParseERKNS0_6StringEPS2_", json_str, error_msg);
  if (error_msg == nullptr) return Global("ffi.json.Parse")(json_str);
  try {
    Value result = Global("ffi.json.Parse")(json_str);
    *error_msg = String("");
    return result;
  } catch (const Error& err) {
    // with an out-parameter the C++ API reports the parse error there instead of throwing
    if (err.kind() != "ValueError") throw;
    *error_msg = err.message();
    return nullptr;
  }
}
String Stringify(const Value& value, const Optional<int>& indent) {
  SHIM_REENTRY(String(const Value&, const Optional<int>&), "_ZN3tvm3ffi4json9StringifyERKNS0_3AnyERKNS0_8OptionalIivEE", value, indent);
  return Global("ffi.json.Stringify")(value, indent).cast<String>();
}
}  // namespace json

bool StructuralEqual::Equal(const Any& lhs, const Any& rhs, bool map_free_vars,
                            bool skip_tensor_content) {
  SHIM_REENTRY(bool(const Any&, const Any&, bool, bool), "_ZN3tvm3ffi15StructuralEqual5EqualERKNS0_3AnyES4_bb",
               lhs, rhs, map_free_vars, skip_tensor_content);
  return Global("ffi.StructuralEqual")(lhs, rhs, map_free_vars, skip_tensor_content).cast<bool>();
}
Optional<reflection::AccessPathPair> StructuralEqual::GetFirstMismatch(const Any& lhs,
                                                                      const Any& rhs,
                                                                      bool map_free_vars,
                                                                      bool skip_tensor_content) {
  SHIM_REENTRY(Optional<reflection::AccessPathPair>(const Any&, const Any&, bool, bool),
               "_ZN3tvm3ffi15StructuralEqual16GetFirstMismatchERKNS0_3AnyES4_bb", lhs, rhs,
               map_free_vars, skip_tensor_content);
  return Global("ffi.GetFirstStructuralMismatch")(lhs, rhs, map_free_vars, skip_tensor_content)
      .cast<Optional<reflection::AccessPathPair>>();
}
uint64_t StructuralHash::Hash(const Any& value, bool map_free_vars, bool skip_tensor_content) {
  SHIM_REENTRY(uint64_t(const Any&, bool, bool), "_ZN3tvm3ffi14StructuralHash4HashERKNS0_3AnyEbb", value,
               map_free_vars, skip_tensor_content);
  return static_cast<uint64_t>(
      Global("ffi.StructuralHash")(value, map_free_vars, skip_tensor_content).cast<int64_t>());
}
Array<reflection::AccessPath> VisitErrorContext::FindAccessPaths(
    const ObjectRef& root, const VisitErrorContext& visit_context, bool allow_prefix_match) {
  SHIM_REENTRY(Array<reflection::AccessPath>(const ObjectRef&, const VisitErrorContext&, bool),
               "_ZN3tvm3ffi17VisitErrorContext15FindAccessPathsERKNS0_9ObjectRefERKS1_b", root,
               visit_context, allow_prefix_match);
  return Global("ffi.VisitErrorContext.FindAccessPaths")(root, visit_context, allow_prefix_match)
      .cast<Array<reflection::AccessPath>>();
}

}  // namespace ffi
}  // namespace tvm
