// cases_visit.cc: ffi.StructuralWalk / ffi.StructuralVisit and the visitor methods: callback order,
// Advance/Skip/Interrupt, definition regions seen by callbacks, __s_visit__ hooks (a native one
// here, a Function one in the testing library), errors with their visit context.
#include <dlfcn.h>

#include "harness.h"
#include "types.h"

namespace {

using namespace tvm::ffi;
using harness::Call;
using namespace st;

const int32_t kAnyTi = -1;

void LoadTestingForVisit() {
  static bool loaded = [] {
    const char* path = std::getenv("TVM_FFI_TESTING_LIB");
    return path != nullptr && dlopen(path, RTLD_NOW | RTLD_GLOBAL) != nullptr;
  }();
  (void)loaded;
}

Array<Any> Entries(std::vector<std::pair<int32_t, Function>> fs) {
  Array<Any> out;
  for (auto& [ti, f] : fs) out.push_back(Array<Any>({ti, f}));
  return out;
}

// A walk logging every value (or its type key for objects) with the region kind.
Any LogWalk(const Any& root, int order, int32_t ti = kAnyTi, Any result = Any(nullptr)) {
  List<Any> log;
  Function cb = Function::FromTyped([plog = &log, result](AnyView v, int kind) -> Any {
    if (v.type_index() >= TypeIndex::kTVMFFIStaticObjectBegin && v.type_index() != TypeIndex::kTVMFFIStr) {
      plog->push_back(Array<Any>({String(harness::TypeKeyOf(v.type_index())), kind}));
    } else {
      plog->push_back(Array<Any>({Any(v), kind}));
    }
    return result;
  });
  Any r = Call("ffi.StructuralWalk", root, Array<Any>(), Entries({{ti, cb}}), order);
  return Array<Any>({r, log});
}

Any Tree() {
  return Array<Any>({1, Array<Any>({2, String("s")}), Map<Any, Any>({{String("k"), 3}}), List<Any>({4}), nullptr});
}

CASE("walk.pre_all") { return LogWalk(Tree(), 0); });
CASE("walk.post_all") { return LogWalk(Tree(), 1); });
CASE("walk.pre_ints_only") { return LogWalk(Tree(), 0, TypeIndex::kTVMFFIInt); });
CASE("walk.str_matches_small") { return LogWalk(Array<Any>({String("ab"), String("a long string!")}), 0, TypeIndex::kTVMFFIStr); });
CASE("walk.objects") {
  Any x = Var("x");
  return LogWalk(Array<Any>({Let(x, 1, Node("neg", {x})), Func({x}, x)}), 0, TypeIndex::kTVMFFIObject);
});
CASE("walk.regions_post") {
  Any x = Var("x");
  return LogWalk(Let(x, Array<Any>({1}), Func({TVar("t", Node("T", {x}))}, x)), 1);
});
CASE("walk.skip") {
  List<Any> log;
  Function skip_arrays = Function::FromTyped([plog = &log](AnyView v) -> Any {
    plog->push_back(v.type_index());
    return v.type_index() == TypeIndex::kTVMFFIArray && plog->size() > 1 ? Any(1) : Any(nullptr);
  });
  Any r = Call("ffi.StructuralWalk", Tree(), Entries({{kAnyTi, skip_arrays}}), Array<Any>(), 0);
  return Array<Any>({r, log});
});
CASE("walk.interrupt") {
  Function stop_at_3 = Function::FromTyped([](AnyView v) -> Any {
    if (v.type_index() == TypeIndex::kTVMFFIInt && v.cast<int64_t>() == 3) return VisitInterrupt(String("found 3"));
    return nullptr;
  });
  return Call("ffi.StructuralWalk", Tree(), Entries({{TypeIndex::kTVMFFIInt, stop_at_3}}), Array<Any>(), 0);
});
CASE("walk.interrupt_post") {
  Function stop = Function::FromTyped([](AnyView v) -> Any { return VisitInterrupt(v); });
  return Call("ffi.StructuralWalk", Tree(), Entries({{TypeIndex::kTVMFFIArray, stop}}), Array<Any>(), 1);
});
CASE("walk.first_link_wins") {
  List<Any> log;
  Function a = Function::FromTyped([plog = &log](AnyView v) -> Any { plog->push_back(String("a")); return nullptr; });
  Function b = Function::FromTyped([plog = &log](AnyView v) -> Any { plog->push_back(String("b")); return nullptr; });
  Call("ffi.StructuralWalk", Array<Any>({1}), Entries({{TypeIndex::kTVMFFIInt, a}, {kAnyTi, b}}), Array<Any>(), 0);
  return log;
});
CASE("walk.native_hook") { return LogWalk(RevPair(Var("x"), Array<Any>({5})), 0); });
CASE("walk.function_hook") {
  LoadTestingForVisit();
  return Array<Any>({LogWalk(Call("testing.make_visit_region_graph", true), 0),
                     LogWalk(Call("testing.make_visit_region_graph", false), 1)});
});
CASE("walk.err.callback") {
  Function bad = Function::FromTyped([](AnyView v) -> Any {
    TVM_FFI_THROW(ValueError) << "bad value";
  });
  Any n = Node("leaf", {7});
  return Call("ffi.StructuralWalk", Array<Any>({Node("root", {n})}), Entries({{TypeIndex::kTVMFFIInt, bad}}), Array<Any>(), 0);
});
CASE("walk.err.context") {
  Function bad = Function::FromTyped([](AnyView v) -> Any { TVM_FFI_THROW(ValueError) << "bad"; });
  Any leaf = Node("leaf", {7});
  Any root = Array<Any>({Node("root", {leaf})});
  try {
    Call("ffi.StructuralWalk", root, Entries({{TypeIndex::kTVMFFIInt, bad}}), Array<Any>(), 0);
  } catch (const Error& e) {
    auto ctx = VisitErrorContext::TryGetFromError(e);
    if (!ctx.has_value()) return String("no context");
    Array<Any> keys;
    for (const ObjectRef& o : (*ctx)->reverse_visit_pattern) keys.push_back(String(harness::TypeKeyOf(o->type_index())));
    return Array<Any>({keys, Call("ffi.VisitErrorContext.FindAccessPaths", root.cast<ObjectRef>(), *ctx, false)});
  }
  return String("no error");
});
CASE("walk.err.bad_result") {
  Function bad = Function::FromTyped([](AnyView v) -> Any { return String("nope"); });
  return Call("ffi.StructuralWalk", Array<Any>({1}), Entries({{TypeIndex::kTVMFFIInt, bad}}), Array<Any>(), 0);
});
CASE("walk.none_root") { return LogWalk(Any(nullptr), 0); });

// --- StructuralVisit: a matched callback owns the descent
CASE("visit.owns_descent") {
  List<Any> log;
  Function on_array = Function::FromTyped([plog = &log](AnyView v, ObjectRef visitor) -> Any {
    plog->push_back(String("array"));
    return nullptr;  // children not visited
  });
  Function on_int = Function::FromTyped([plog = &log](AnyView v, ObjectRef visitor) -> Any {
    plog->push_back(v);
    return nullptr;
  });
  Any r = Call("ffi.StructuralVisit", Map<Any, Any>({{String("a"), Array<Any>({1, 2})}, {String("b"), 3}}),
               Entries({{TypeIndex::kTVMFFIArray, on_array}, {TypeIndex::kTVMFFIInt, on_int}}));
  return Array<Any>({r, log});
});
CASE("visit.default_visit_from_callback") {
  List<Any> log;
  Function on_array = Function::FromTyped([plog = &log](AnyView v, ObjectRef visitor) -> Any {
    plog->push_back(String("array"));
    return Call("ffi.StructuralVisitorDefaultVisit", visitor, v);
  });
  Function on_int = Function::FromTyped([plog = &log](AnyView v, ObjectRef visitor) -> Any {
    plog->push_back(Array<Any>({v, Call("ffi.StructuralVisitorDefRegionKind", visitor)}));
    return v.cast<int64_t>() == 2 ? Any(VisitInterrupt(v)) : Any(nullptr);
  });
  Any r = Call("ffi.StructuralVisit", Array<Any>({1, Array<Any>({2, 3}), 4}),
               Entries({{TypeIndex::kTVMFFIArray, on_array}, {TypeIndex::kTVMFFIInt, on_int}}));
  return Array<Any>({r, log});
});
CASE("visit.with_region") {
  List<Any> log;
  Function on_node = Function::FromTyped([plog = &log](AnyView v, ObjectRef visitor) -> Any {
    Function inner = Function::FromTyped([visitor, v, plog]() -> Any {
      plog->push_back(Call("ffi.StructuralVisitorDefRegionKind", visitor));
      return Call("ffi.StructuralVisitorDefaultVisit", visitor, v);
    });
    return Call("ffi.StructuralVisitorWithDefRegionKind", visitor, 2, inner);
  });
  Function on_int = Function::FromTyped([plog = &log](AnyView v, ObjectRef visitor) -> Any {
    plog->push_back(Array<Any>({v, Call("ffi.StructuralVisitorDefRegionKind", visitor)}));
    return nullptr;
  });
  Any r = Call("ffi.StructuralVisit", Array<Any>({Node("n", {1}), 2}),
               Entries({{Node("x", {}).type_index(), on_node}, {TypeIndex::kTVMFFIInt, on_int}}));
  return Array<Any>({r, log});
});
CASE("visit.visitor_visit") {
  List<Any> log;
  Function on_node = Function::FromTyped([plog = &log](AnyView v, ObjectRef visitor) -> Any {
    const NodeObj* n = v.as<NodeObj>();
    for (const Any& a : n->args) {
      Any r = Call("ffi.StructuralVisitorVisit", visitor, a);
      if (r != nullptr) return r;
    }
    return nullptr;
  });
  Function on_int = Function::FromTyped([plog = &log](AnyView v, ObjectRef visitor) -> Any {
    plog->push_back(v);
    return nullptr;
  });
  Any r = Call("ffi.StructuralVisit", Node("n", {1, Node("m", {2}), 3}),
               Entries({{Node("x", {}).type_index(), on_node}, {TypeIndex::kTVMFFIInt, on_int}}));
  return Array<Any>({r, log});
});
CASE("visit.err.callback_type") {
  Function bad = Function::FromTyped([](AnyView v, ObjectRef visitor) -> Any { return 5; });
  return Call("ffi.StructuralVisit", Array<Any>({1}), Entries({{TypeIndex::kTVMFFIInt, bad}}));
});
CASE("visit.interrupt_object") { return Call("ffi.VisitInterrupt", Array<Any>({1, 2})); });
CASE("visit.err.not_a_visitor") { return Call("ffi.StructuralVisitorVisit", Array<Any>(), 1); });

// Cycles: the official library recurses until the stack overflows.
CASE("ours.walk.list_cycle") {
  List<Any> l({1});
  l.push_back(l);
  Function cb = Function::FromTyped([](AnyView v) -> Any { return nullptr; });
  return harness::ThenBreakCycle(
      [&] { return Call("ffi.StructuralWalk", l, Entries({{kAnyTi, cb}}), Array<Any>(), 0); },
      [&] { l.clear(); });
});

}  // namespace

namespace {
using namespace tvm::ffi;
using harness::Call;

CASE("visit.err.walk_bad_table") { return Call("ffi.StructuralWalk", 1, 5, Array<Any>(), 0); });
CASE("visit.err.walk_bad_entry") { return Call("ffi.StructuralWalk", 1, Array<Any>({1}), Array<Any>(), 0); });
CASE("visit.err.walk_bad_pair") {
  return Call("ffi.StructuralWalk", 1, Array<Any>({Array<Any>({String("x"), 1})}), Array<Any>(), 0);
});
CASE("visit.err.walk_bad_order") { return Call("ffi.StructuralWalk", 1, Array<Any>(), Array<Any>(), String("pre")); });
CASE("visit.err.walk_arg_count") { return Call("ffi.StructuralWalk", 1); });
CASE("visit.err.visit_bad_table") { return Call("ffi.StructuralVisit", 1, List<Any>({1})); });
CASE("visit.err.region_bad_kind") {
  Function cb = Function::FromTyped([](AnyView v, ObjectRef visitor) -> Any {
    return Call("ffi.StructuralVisitorWithDefRegionKind", visitor, String("x"), Function::FromTyped([]() {}));
  });
  return Call("ffi.StructuralVisit", 1, Array<Any>({Array<Any>({-1, cb})}));
});
CASE("visit.walk_order_other_int") {
  List<Any> log;
  Function cb = Function::FromTyped([plog = &log](AnyView v) -> Any {
    plog->push_back(v);
    return nullptr;
  });
  Call("ffi.StructuralWalk", Array<Any>({1}), Array<Any>({Array<Any>({-1, cb})}), Array<Any>(), 7);
  return log;
});
}  // namespace

namespace {
using namespace tvm::ffi;
using harness::Call;
using namespace st;

Any Find(const Any& root, std::vector<Any> pattern_innermost_first, bool prefix) {
  auto ctx = make_object<VisitErrorContextObj>();
  for (const Any& p : pattern_innermost_first) {
    ctx->reverse_visit_pattern.push_back(p.cast<Optional<ObjectRef>>().value_or(ObjectRef(nullptr)));
  }
  return Call("ffi.VisitErrorContext.FindAccessPaths", root.cast<ObjectRef>(), VisitErrorContext(ctx), prefix);
}

struct FindFixture {
  Any leaf = Node("leaf", {7});
  Any mid = Node("mid", {leaf, Map<Any, Any>({{String("k"), leaf}})});
  Any other = Node("other", {});
  Any root = Let(Var("x"), mid, Array<Any>({mid, other}));
};

CASE("find.full_match") {
  FindFixture f;
  return Find(f.root, {f.leaf, f.mid, f.root}, false);
});
CASE("find.duplicates_collapsed") {
  FindFixture f;
  return Find(f.root, {f.leaf, f.leaf, f.mid, f.mid, f.root}, false);
});
CASE("find.nulls_dropped") {
  FindFixture f;
  return Find(f.root, {f.leaf, Any(nullptr), f.mid, f.root}, false);
});
CASE("find.no_match") {
  FindFixture f;
  return Find(f.root, {f.other, f.mid, f.root}, false);
});
CASE("find.prefix") {
  FindFixture f;
  return Find(f.root, {f.other, f.mid, f.root}, true);
});
CASE("find.root_only") {
  FindFixture f;
  return Find(f.root, {f.root}, false);
});
CASE("find.inner_only") {
  FindFixture f;
  return Find(f.root, {f.leaf}, false);
});
CASE("find.empty_pattern") {
  FindFixture f;
  return Find(f.root, {}, true);
});
CASE("find.err.not_context") { return Call("ffi.VisitErrorContext.FindAccessPaths", Node("a", {}), Node("b", {}), false); });
CASE("walk.err.context_objects") {
  Function bad = Function::FromTyped([](AnyView v) -> Any { TVM_FFI_THROW(ValueError) << "bad int"; });
  FindFixture f;
  try {
    Call("ffi.StructuralWalk", f.root, Array<Any>({Array<Any>({TypeIndex::kTVMFFIInt, bad})}), Array<Any>(), 0);
  } catch (const Error& e) {
    auto ctx = VisitErrorContext::TryGetFromError(e);
    if (!ctx.has_value()) return String("no context");
    return Array<Any>({(*ctx)->reverse_visit_pattern.size(),
                       Call("ffi.VisitErrorContext.FindAccessPaths", f.root.cast<ObjectRef>(), *ctx, false),
                       Call("ffi.VisitErrorContext.FindAccessPaths", f.root.cast<ObjectRef>(), *ctx, true)});
  }
  return String("no error");
});
}  // namespace
