// cases_mutate.cc: ffi.StructuralMap / ffi.StructuralMutate and the mutator methods: pre/post
// rewriting, copy-on-write (the source is untouched, unchanged parts are shared), in-place
// mutation of uniquely owned values, variable remapping in definition regions, reflected field
// copies, errors with their visit context.
#include "harness.h"
#include "types.h"

namespace {

using namespace tvm::ffi;
using harness::Call;
using namespace st;

Array<Any> Table(std::vector<std::pair<int32_t, Function>> fs) {
  Array<Any> out;
  for (auto& [ti, f] : fs) out.push_back(Array<Any>({ti, f}));
  return out;
}

Function AddOne() {
  return Function::FromTyped([](int64_t v) -> Any { return v + 1; });
}

Any Sample() {
  return Array<Any>({1, Array<Any>({2, String("s")}), Map<Any, Any>({{String("k"), 3}}), List<Any>({4}), nullptr});
}

CASE("map.post_ints") { return Call("ffi.StructuralMap", Sample(), Table({{TypeIndex::kTVMFFIInt, AddOne()}}), Array<Any>(), 1); });
CASE("map.pre_ints") { return Call("ffi.StructuralMap", Sample(), Table({{TypeIndex::kTVMFFIInt, AddOne()}}), Array<Any>(), 0); });
CASE("map.source_untouched") {
  Any src = Sample();
  Any out = Call("ffi.StructuralMap", src, Table({{TypeIndex::kTVMFFIInt, AddOne()}}), Array<Any>(), 1);
  Array<Any> s = src.cast<Array<Any>>(), o = out.cast<Array<Any>>();
  return Array<Any>({src, out, out.same_as(src), s[4].same_as(o[4])});
});
CASE("map.unchanged_is_identity") {
  Any src = Sample();
  Function keep = Function::FromTyped([](AnyView v) -> Any { return v; });
  Any out = Call("ffi.StructuralMap", src, Table({{TypeIndex::kTVMFFIFloat, keep}}), Array<Any>(), 1);
  return Array<Any>({out.same_as(src)});
});
CASE("map.partial_sharing") {
  Any shared = Array<Any>({String("x"), String("y")});
  Any src = Array<Any>({shared, 1});
  Any out = Call("ffi.StructuralMap", src, Table({{TypeIndex::kTVMFFIInt, AddOne()}}), Array<Any>(), 1);
  return Array<Any>({out, out.cast<Array<Any>>()[0].same_as(shared)});
});
CASE("map.post_sees_children_done") {
  List<Any> log;
  Function on_array = Function::FromTyped([plog = &log](Array<Any> a) -> Any {
    plog->push_back(a);
    return Array<Any>({a.size()});
  });
  Any out = Call("ffi.StructuralMap", Array<Any>({Array<Any>({1, 2}), 3}), Table({{TypeIndex::kTVMFFIArray, on_array}}), Array<Any>(), 1);
  return Array<Any>({out, log});
});
CASE("map.pre_replacement_descended") {
  Function on_array = Function::FromTyped([](Array<Any> a) -> Any {
    if (a.size() == 1) return Array<Any>({10, 20});
    return a;
  });
  return Call("ffi.StructuralMap", Array<Any>({Array<Any>({1}), 2}),
              Table({{TypeIndex::kTVMFFIArray, on_array}, {TypeIndex::kTVMFFIInt, AddOne()}}), Array<Any>(), 0);
});
CASE("map.objects") {
  Any src = Node("add", {1, Node("mul", {2, 3}, "inner")}, "outer");
  Any out = Call("ffi.StructuralMap", src, Table({{TypeIndex::kTVMFFIInt, AddOne()}}), Array<Any>(), 1);
  return Array<Any>({src, out});
});
CASE("map.object_callback") {
  Function rename = Function::FromTyped([](ObjectRef n) -> Any {
    const NodeObj* p = n.as<NodeObj>();
    return Node((std::string(p->op) + "!").c_str(), p->args, p->note.c_str());
  });
  int32_t node_ti = Node("x", {}).type_index();
  return Array<Any>({Call("ffi.StructuralMap", Node("a", {Node("b", {1})}), Table({{node_ti, rename}}), Array<Any>(), 1),
                     Call("ffi.StructuralMap", Node("a", {Node("b", {1})}), Table({{node_ti, rename}}), Array<Any>(), 0)});
});
CASE("map.regions") {
  List<Any> log;
  Function on_var = Function::FromTyped([plog = &log](ObjectRef v, int kind) -> Any {
    plog->push_back(Array<Any>({v.as<VarObj>()->name, kind}));
    return Any(Unchanged());
  });
  Any x = Var("x"), y = Var("y");
  int32_t var_ti = x.type_index();
  Any out = Call("ffi.StructuralMap", Let(x, y, Func({x}, Node("f", {x, y}))), Array<Any>(), Table({{var_ti, on_var}}), 1);
  return Array<Any>({log, out});
});
CASE("map.rename_bound_var") {
  Any x = Var("x");
  Any fresh = Var("fresh");
  int32_t var_ti = x.type_index();
  Function rename = Function::FromTyped([fresh](ObjectRef v, int kind) -> Any {
    return kind == kTVMFFIDefRegionKindNone ? Any(Unchanged()) : fresh;
  });
  Any out = Call("ffi.StructuralMap", Let(x, 1, Node("neg", {x})), Array<Any>(), Table({{var_ti, rename}}), 1);
  const LetObj* let = out.as<LetObj>();
  const NodeObj* body = let->body.as<NodeObj>();
  return Array<Any>({let->var.same_as(fresh), body->args[0].same_as(fresh)});
});
CASE("map.inplace_unique_root") {
  List<Any> l({1, 2, List<Any>({3})});
  const Object* before = l.get();
  const Object* inner = l[2].cast<ObjectRef>().get();
  Any out = Call("ffi.StructuralMap", std::move(l), Table({{TypeIndex::kTVMFFIInt, AddOne()}}), Array<Any>(), 1);
  return Array<Any>({out, out.as<Object>() == before, out.cast<List<Any>>()[2].as<Object>() == inner});
});
CASE("map.shared_root_copied") {
  List<Any> l({1, 2});
  Any out = Call("ffi.StructuralMap", l, Table({{TypeIndex::kTVMFFIInt, AddOne()}}), Array<Any>(), 1);
  return Array<Any>({l, out, out.same_as(l)});
});
CASE("map.dict_and_map_values") {
  Dict<Any, Any> d({{String("a"), 1}, {String("b"), String("keep")}});
  Map<Any, Any> m({{1, 2}, {3, 4}});
  Any out = Call("ffi.StructuralMap", Array<Any>({d, m}), Table({{TypeIndex::kTVMFFIInt, AddOne()}}), Array<Any>(), 1);
  return Array<Any>({d, m, out});
});
CASE("map.err.callback") {
  Function bad = Function::FromTyped([](int64_t v) -> Any { TVM_FFI_THROW(RuntimeError) << "no " << v; });
  Any root = Node("r", {Node("leaf", {5})});
  try {
    Call("ffi.StructuralMap", root, Table({{TypeIndex::kTVMFFIInt, bad}}), Array<Any>(), 1);
  } catch (const Error& e) {
    auto ctx = VisitErrorContext::TryGetFromError(e);
    return Array<Any>({String(e.kind() + ": " + e.message()), ctx.has_value() ? Any((*ctx)->reverse_visit_pattern.size()) : Any(-1),
                       ctx.has_value() ? Call("ffi.VisitErrorContext.FindAccessPaths", root.cast<ObjectRef>(), *ctx, true) : Any()});
  }
  return String("no error");
});
CASE("map.err.post_callback_returns_error") {
  // An Error the post-order callback returns (not raises) fails the map like a raised one, and
  // the visit context names the descended node (children already mapped), not the source.
  Function fail = Function::FromTyped([](Array<Any> a) -> Any { return Error("ValueError", "returned", ""); });
  Array<Any> root({1});
  try {
    Call("ffi.StructuralMap", root, Table({{TypeIndex::kTVMFFIArray, fail}, {TypeIndex::kTVMFFIInt, AddOne()}}), Array<Any>(), 1);
  } catch (const Error& e) {
    auto ctx = VisitErrorContext::TryGetFromError(e);
    if (!ctx.has_value()) return Array<Any>({String(e.kind() + ": " + e.message()), String("no context")});
    List<ObjectRef> pattern = (*ctx)->reverse_visit_pattern;
    return Array<Any>({String(e.kind() + ": " + e.message()), pattern, pattern.size() > 0 && pattern[0].same_as(root), root});
  }
  return String("no error");
});
CASE("map.err.no_setter") {
  // Reflected objects whose type has no shallow copy can't be rebuilt.
  return Call("ffi.StructuralMap", ObjectRef(make_object<NoCreatorObj>(1)), Table({{TypeIndex::kTVMFFIInt, AddOne()}}), Array<Any>(), 1);
});
CASE("map.err.bad_table") { return Call("ffi.StructuralMap", 1, 2, Array<Any>(), 0); });
CASE("map.err.arg_count") { return Call("ffi.StructuralMap", 1); });

// --- StructuralMutate
CASE("mutate.callback_owns") {
  Function rev = Function::FromTyped([](Array<Any> a, ObjectRef m) -> Any {
    Array<Any> out;
    for (int64_t i = static_cast<int64_t>(a.size()) - 1; i >= 0; --i) out.push_back(a[i]);
    return out;
  });
  return Call("ffi.StructuralMutate", Array<Any>({1, Array<Any>({2, 3}), 4}),
              Array<Any>({Array<Any>({TypeIndex::kTVMFFIArray, rev, false})}));
});
CASE("mutate.recurse_through_mutator") {
  Function on_node = Function::FromTyped([](ObjectRef n, ObjectRef m) -> Any {
    const NodeObj* p = n.as<NodeObj>();
    Any args = Call("ffi.StructuralMutatorMutate", m, p->args);
    return Node(p->op.c_str(), args.cast<Array<Any>>(), "visited");
  });
  Function on_int = Function::FromTyped([](int64_t v, ObjectRef m) -> Any { return v * 10; });
  int32_t node_ti = Node("x", {}).type_index();
  return Call("ffi.StructuralMutate", Node("a", {1, Node("b", {2})}),
              Array<Any>({Array<Any>({node_ti, on_node, false}), Array<Any>({TypeIndex::kTVMFFIInt, on_int, false})}));
});
CASE("mutate.default_mutate") {
  Function on_node = Function::FromTyped([](ObjectRef n, ObjectRef m) -> Any {
    return Call("ffi.StructuralMutatorDefaultMutate", m, n);
  });
  Function on_int = Function::FromTyped([](int64_t v, ObjectRef m) -> Any { return -v; });
  int32_t node_ti = Node("x", {}).type_index();
  return Call("ffi.StructuralMutate", Node("a", {1, Node("b", {2})}),
              Array<Any>({Array<Any>({node_ti, on_node, false}), Array<Any>({TypeIndex::kTVMFFIInt, on_int, false})}));
});
// StructuralMutate of a shared container whose only Array child is lent to the callback: logs
// each Array's use count and in-place mode, increments the ints; returns (log, result). The
// container is passed as it is held (no Any of it, which would add a reference to the root).
template <typename Container>
static Array<Any> MutateLoggingArrayUse(const Container& outer) {
  List<Any> log;
  Function on_array = Function::FromTyped([plog = &log](AnyView a, ObjectRef m, int mode) -> Any {
    plog->push_back(Array<Any>({a.as<Object>()->use_count(), mode}));
    return Call("ffi.StructuralMutatorDefaultMutate", m, a);
  });
  Function on_int = Function::FromTyped([](int64_t v, ObjectRef m) -> Any { return v + 1; });
  Any out = Call("ffi.StructuralMutate", outer,
                 Array<Any>({Array<Any>({TypeIndex::kTVMFFIArray, on_array, true}), Array<Any>({TypeIndex::kTVMFFIInt, on_int, false})}));
  return Array<Any>({log, out});
}
CASE("mutate.shared_parent_lends_unique_child") {
  // The only reference to the inner array is the slot of a shared outer array: copy-on-write
  // mutation lends it to the callback without a reference of its own, so the callback sees it
  // unique, with the mode that forbids in-place mutation (its parent is shared).
  Array<Any> outer({Array<Any>({1})});
  Array<Any> alias = outer;
  Array<Any> r = MutateLoggingArrayUse(outer);
  return Array<Any>({r[0], r[1], alias});
});
CASE("mutate.shared_map_lends_unique_value") {
  // The same for a shared Map's value.
  Map<Any, Any> outer({{String("k"), Array<Any>({1})}});
  Map<Any, Any> alias = outer;
  Array<Any> r = MutateLoggingArrayUse(outer);
  return Array<Any>({r[0], r[1], alias});
});
CASE("mutate.inplace_modes") {
  List<Any> log;
  Function on_list = Function::FromTyped([plog = &log](AnyView l, ObjectRef m, int mode) -> Any {
    plog->push_back(mode);
    return Call("ffi.StructuralMutatorDefaultMutate", m, l);
  });
  List<Any> root({List<Any>({1}), 2});
  Call("ffi.StructuralMutate", std::move(root), Array<Any>({Array<Any>({TypeIndex::kTVMFFIList, on_list, true})}));
  List<Any> shared({List<Any>({1}), 2});
  Call("ffi.StructuralMutate", shared, Array<Any>({Array<Any>({TypeIndex::kTVMFFIList, on_list, true})}));
  return log;
});
CASE("mutate.remap_and_region") {
  List<Any> log;
  Function on_var = Function::FromTyped([plog = &log](ObjectRef v, ObjectRef m) -> Any {
    Any got = Call("ffi.StructuralMutatorVarRemapGet", m, v);
    plog->push_back(Array<Any>({v.as<VarObj>()->name, Call("ffi.StructuralMutatorDefRegionKind", m), got}));
    if (got == nullptr) {
      Any fresh = Var((std::string(v.as<VarObj>()->name) + "'").c_str());
      Call("ffi.StructuralMutatorVarRemapSet", m, v, fresh);
      return fresh;
    }
    return got;
  });
  Function on_let = Function::FromTyped([](ObjectRef l, ObjectRef m) -> Any {
    Function inner = Function::FromTyped([l, m]() -> Any { return Call("ffi.StructuralMutatorDefaultMutate", m, l); });
    return Call("ffi.StructuralMutatorWithDefRegionKind", m, 2, inner);
  });
  Any x = Var("x");
  int32_t var_ti = x.type_index(), let_ti = Let(1, 2, 3).type_index();
  Any out = Call("ffi.StructuralMutate", Let(x, 1, Node("neg", {x})),
                 Array<Any>({Array<Any>({var_ti, on_var, false}), Array<Any>({let_ti, on_let, false})}));
  return Array<Any>({log, out});
});
CASE("mutate.err.remap_key") {
  Function on_int = Function::FromTyped([](int64_t v, ObjectRef m) -> Any {
    return Call("ffi.StructuralMutatorVarRemapGet", m, v);
  });
  return Call("ffi.StructuralMutate", Array<Any>({1}), Array<Any>({Array<Any>({TypeIndex::kTVMFFIInt, on_int, false})}));
});
CASE("mutate.err.bad_table") {
  return Call("ffi.StructuralMutate", 1, Array<Any>({Array<Any>({1, AddOne()})}));
});
CASE("mutate.err.not_a_mutator") { return Call("ffi.StructuralMutatorMutate", Array<Any>(), 1); });

// Cycles: the official library recurses until the stack overflows.
CASE("ours.map.list_cycle") {
  List<Any> l({1});
  l.push_back(l);
  return harness::ThenBreakCycle(
      [&] { return Call("ffi.StructuralMap", l, Table({{TypeIndex::kTVMFFIInt, AddOne()}}), Array<Any>(), 1); },
      [&] { l.clear(); });
});

// A callback releasing the container whose element is being mutated: the official library
// reads the freed element on (a crash, or a new container at its address taken for a cycle).
// The containers are made by the library under test (its deleters keep a lent object until the
// walk leaves it); the callback releases them inline, through the C++ header's List/Dict.
// The callback clears the owner, mutates a fresh container of the same kind without ints (the
// allocator may place it at the freed address) and adds one.
static Any MapWhileTheOwnerIsCleared(const char* ctor, Any inner_arg, bool unique_root) {
  Any inner = Call(ctor, Call("ffi.Array", Call(ctor, inner_arg)));
  List<Any> owner = Call("ffi.List", inner).cast<List<Any>>();
  inner = nullptr;
  const Object* raw = owner.get();
  List<Any> log;
  Function on_int = Function::FromTyped([raw, ctor, plog = &log](int64_t v, ObjectRef m) -> Any {
    Any(GetRef<ObjectRef>(raw)).cast<List<Any>>().clear();
    Any fresh = Call(ctor, Call("ffi.Array", Call(ctor, String("s"))));
    plog->push_back(Call("ffi.StructuralMutatorMutate", m, fresh));
    return v + 1;
  });
  Array<Any> table({Array<Any>({TypeIndex::kTVMFFIInt, on_int, false})});
  Any out = unique_root ? Call("ffi.StructuralMutate", std::move(owner), table)
                        : Call("ffi.StructuralMutate", owner, table);
  return Array<Any>({out, log, unique_root ? Any(nullptr) : Any(owner)});
}
CASE("ours.mutate.callback_clears_the_list_walked") {
  return MapWhileTheOwnerIsCleared("ffi.List", 1, false);
});
CASE("ours.mutate.callback_clears_the_list_walked_in_place") {
  return MapWhileTheOwnerIsCleared("ffi.List", 1, true);
});
CASE("ours.mutate.callback_clears_the_dict_walked") {
  // ffi.Dict(k, v): an Array value under key 1, a Dict under key 0 inside it
  Any inner = Call("ffi.Dict", 0, Call("ffi.Array", Call("ffi.Dict", 1, 5)));
  List<Any> owner = Call("ffi.List", inner).cast<List<Any>>();
  inner = nullptr;
  const Object* raw = owner.get();
  Function on_int = Function::FromTyped([raw](int64_t v, ObjectRef m) -> Any {
    Any(GetRef<ObjectRef>(raw)).cast<List<Any>>().clear();
    Any fresh = Call("ffi.Dict", 0, Call("ffi.Array", Call("ffi.Dict", 1, String("s"))));
    if (!Call("ffi.StructuralMutatorMutate", m, fresh).same_as(fresh)) return -1;
    return v + 1;
  });
  Any out = Call("ffi.StructuralMutate", std::move(owner), Array<Any>({Array<Any>({TypeIndex::kTVMFFIInt, on_int, false})}));
  return out;
});

}  // namespace
