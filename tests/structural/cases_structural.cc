// cases_structural.cc: ffi.StructuralEqual / ffi.StructuralHash on every value kind and every
// structural kind of object (types.h); hash values are compared exactly with the official ones.
#include <cmath>
#include <limits>

#include "harness.h"
#include "types.h"

namespace {

using namespace tvm::ffi;
using harness::BigIntOf;
using harness::Call;
using namespace st;

Any SE(const Any& a, const Any& b, bool mfv = false, bool skip = false) {
  return Call("ffi.StructuralEqual", a, b, mfv, skip);
}
Any SH(const Any& a, bool mfv = false, bool skip = false) { return Call("ffi.StructuralHash", a, mfv, skip); }
// Equality, hash equality and both hashes, in one line.
Any Both(const Any& a, const Any& b, bool mfv = false, bool skip = false) {
  Any ha = SH(a, mfv, skip), hb = SH(b, mfv, skip);
  return Array<Any>({SE(a, b, mfv, skip), ha.cast<int64_t>() == hb.cast<int64_t>(), ha, hb});
}
// Equality and whether the hashes agree (for values hashed by address).
Any EqOnly(const Any& a, const Any& b, bool mfv = false) {
  return Array<Any>({SE(a, b, mfv), SH(a, mfv).cast<int64_t>() == SH(b, mfv).cast<int64_t>()});
}

Any HeapStr(const std::string& s) { return String(std::string(s)); }

Tensor CpuTensor(std::vector<int64_t> shape, DLDataType dtype, const void* data, size_t nbytes) {
  struct Alloc {
    void AllocData(DLTensor* t) {
      size_t n = 1;
      for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
      t->data = std::calloc(std::max<size_t>(1, (n * t->dtype.bits * t->dtype.lanes + 7) / 8), 1);
    }
    void FreeData(DLTensor* t) { std::free(t->data); }
  };
  Tensor t = Tensor::FromNDAlloc(Alloc(), Shape(shape), dtype, DLDevice{kDLCPU, 0});
  if (nbytes) std::memcpy(const_cast<DLTensor*>(t.GetDLTensorPtr())->data, data, nbytes);
  return t;
}

const float kF4[4] = {0, 1, 2, 3};
const float kZ4[4] = {0, 0, 0, 0};
const DLDataType kF32{kDLFloat, 32, 1};

// --- POD values and strings
CASE("se.pod.ints") { return Both(1, 1); });
CASE("se.pod.int_vs_float") { return Both(1, 1.0); });
CASE("se.pod.int_vs_bool") { return Both(1, true); });
CASE("se.pod.floats") { return Both(2.5, 2.5); });
CASE("se.pod.neg_zero") { return Both(0.0, -0.0); });
CASE("se.pod.nan") { return Both(std::nan(""), -std::nan("1")); });
CASE("se.pod.nan_vs_num") { return Both(std::nan(""), 1.0); });
CASE("se.pod.none") { return Both(nullptr, nullptr); });
CASE("se.pod.none_vs_int") { return Both(nullptr, 0); });
CASE("se.pod.device") { return Both(DLDevice{kDLCUDA, 1}, DLDevice{kDLCUDA, 1}); });
CASE("se.pod.device_ne") { return Both(DLDevice{kDLCUDA, 1}, DLDevice{kDLCUDA, 2}); });
CASE("se.pod.dtype") { return Both(DLDataType{kDLInt, 8, 1}, DLDataType{kDLInt, 8, 1}); });
CASE("se.pod.dtype_ne") { return Both(DLDataType{kDLInt, 8, 1}, DLDataType{kDLInt, 8, 2}); });
CASE("se.str.small") { return Both(String("abc"), String("abc")); });
CASE("se.str.small_vs_heap") { return Both(String("abc"), HeapStr("abc")); });
CASE("se.str.heap_vs_small") { return Both(HeapStr("abc"), String("abc")); });
CASE("se.str.long") { return Both(String(std::string(100, 'x')), String(std::string(100, 'x'))); });
CASE("se.str.ne") { return Both(String("abc"), String("abd")); });
CASE("se.str.empty") { return Both(String(""), String("")); });
CASE("se.str.vs_bytes") { return Both(String("a"), Bytes("a")); });
CASE("se.bytes.small") { return Both(Bytes("xy"), Bytes("xy")); });
CASE("se.bytes.long") { return Both(Bytes(std::string(20, 'q')), Bytes(std::string(20, 'q'))); });
CASE("se.bytes.small_vs_heap") { return Both(Bytes("xy"), Bytes(std::string("xy"))); });
CASE("se.bigint") { return Both(BigIntOf({0, 1}), BigIntOf({0, 1})); });
CASE("se.bigint_ne") { return Both(BigIntOf({0, 1}), BigIntOf({1, 1})); });
CASE("se.bigint_neg") { return Both(BigIntOf({5, -3}), BigIntOf({5, -3})); });
CASE("sh.values") {
  return Array<Any>({SH(1), SH(-1), SH(0), SH(true), SH(2.5), SH(-0.0), SH(std::nan("")), SH(nullptr),
                     SH(String("abc")), SH(String("")), SH(String("abcdefgh")), SH(Bytes("ab")),
                     SH(Bytes(std::string(9, 'b'))), SH(DLDevice{kDLCPU, 0}),
                     SH(DLDataType{kDLBfloat, 16, 1}), SH(BigIntOf({0, 1})), SH(BigIntOf({7, -1, 9}))});
});

// --- containers
CASE("se.array") { return Both(Array<Any>({1, 2, 3}), Array<Any>({1, 2, 3})); });
CASE("se.array_ne") { return Both(Array<Any>({1, 2}), Array<Any>({1, 3})); });
CASE("se.array_len") { return Both(Array<Any>({1, 2}), Array<Any>({1, 2, 3})); });
CASE("se.array_empty") { return Both(Array<Any>(), Array<Any>()); });
CASE("se.array_vs_list") { return Both(Array<Any>({1}), List<Any>({1})); });
CASE("se.list") { return Both(List<Any>({1, String("x")}), List<Any>({1, String("x")})); });
CASE("se.list_same") {
  List<Any> l({1, 2});
  return Both(l, l);
});
CASE("se.nested") {
  return Both(Array<Any>({Array<Any>({1, 2}), List<Any>({Map<Any, Any>({{String("k"), 1}})})}),
              Array<Any>({Array<Any>({1, 2}), List<Any>({Map<Any, Any>({{String("k"), 1}})})}));
});
CASE("se.map") { return Both(Map<Any, Any>({{String("a"), 1}, {String("b"), 2}}), Map<Any, Any>({{String("b"), 2}, {String("a"), 1}})); });
CASE("se.map_value_ne") { return Both(Map<Any, Any>({{String("a"), 1}}), Map<Any, Any>({{String("a"), 2}})); });
CASE("se.map_key_ne") { return Both(Map<Any, Any>({{String("a"), 1}}), Map<Any, Any>({{String("b"), 1}})); });
CASE("se.map_size") { return Both(Map<Any, Any>({{String("a"), 1}}), Map<Any, Any>({{String("a"), 1}, {String("b"), 1}})); });
CASE("se.map_int_keys") { return Both(Map<Any, Any>({{1, 2}, {3, 4}}), Map<Any, Any>({{3, 4}, {1, 2}})); });
CASE("se.map_dense") {
  Map<Any, Any> a, b;
  for (int i = 0; i < 20; ++i) a.Set(String("k" + std::to_string(i)), i);
  for (int i = 19; i >= 0; --i) b.Set(String("k" + std::to_string(i)), i);
  return Both(a, b);
});
CASE("se.map_mixed_keys") {
  return Both(Map<Any, Any>({{String("s"), 1}, {2, 3}, {2.5, String("f")}, {Bytes("b"), nullptr}, {true, 0}}),
              Map<Any, Any>({{true, 0}, {Bytes("b"), nullptr}, {2.5, String("f")}, {2, 3}, {String("s"), 1}}));
});
CASE("se.map_vs_dict") { return Both(Map<Any, Any>({{1, 2}}), Dict<Any, Any>({{1, 2}})); });
CASE("se.dict") { return Both(Dict<Any, Any>({{1, 2}, {String("x"), List<Any>()}}), Dict<Any, Any>({{String("x"), List<Any>()}, {1, 2}})); });
CASE("se.shape") { return Both(Shape({1, 2, 3}), Shape({1, 2, 3})); });
CASE("se.shape_ne") { return Both(Shape({1, 2}), Shape({1, 2, 3})); });
CASE("sh.containers") {
  return Array<Any>({SH(Array<Any>({1, 2, 3})), SH(List<Any>({1, 2, 3})), SH(Array<Any>()),
                     SH(Map<Any, Any>({{String("a"), 1}, {String("b"), Array<Any>({1, 2})}})),
                     SH(Dict<Any, Any>({{String("a"), 1}})), SH(Map<Any, Any>()), SH(Shape({4, 5})),
                     SH(Shape({})), SH(Array<Any>({Array<Any>({Array<Any>({nullptr})})}))});
});
CASE("sh.map_key_kinds") {
  return SH(Map<Any, Any>({{String("s"), 1}, {HeapStr("heap-key-long"), 2}, {3, 4}, {2.5, 5}, {Bytes("b"), 6},
                           {Bytes(std::string(10, 'z')), 7}, {BigIntOf({0, 1}), 8}, {DLDevice{kDLCPU, 1}, 9}}));
});
CASE("sh.map_ties") {
  // Object keys not hashed before the map are left out of its hash.
  Map<Any, Any> m;
  m.Set(Node("a", {}), 1);
  m.Set(Node("b", {}), 2);
  m.Set(String("x"), 3);
  return SH(m);
});

// --- tensors
CASE("se.tensor_same_content") {
  return Both(CpuTensor({4}, kF32, kF4, 16), CpuTensor({4}, kF32, kF4, 16));
});
CASE("se.tensor_content_ne") { return Both(CpuTensor({4}, kF32, kF4, 16), CpuTensor({4}, kF32, kZ4, 16)); });
CASE("se.tensor_skip_content") {
  return Both(CpuTensor({4}, kF32, kF4, 16), CpuTensor({4}, kF32, kZ4, 16), false, true);
});
CASE("se.tensor_shape_ne") { return Both(CpuTensor({4}, kF32, kF4, 16), CpuTensor({2, 2}, kF32, kF4, 16)); });
CASE("se.tensor_dtype_ne") {
  return Both(CpuTensor({4}, kF32, kF4, 16), CpuTensor({4}, DLDataType{kDLInt, 32, 1}, kF4, 16));
});
CASE("se.tensor_empty") { return Both(CpuTensor({0, 3}, kF32, nullptr, 0), CpuTensor({0, 3}, kF32, nullptr, 0)); });
CASE("se.tensor_scalar") { return Both(CpuTensor({}, kF32, kF4 + 2, 4), CpuTensor({}, kF32, kF4 + 2, 4)); });
CASE("se.tensor_subbyte") {
  uint8_t a[2] = {0x12, 0x3}, b[2] = {0x12, 0x3};
  return Both(CpuTensor({3}, DLDataType{kDLInt, 4, 1}, a, 2), CpuTensor({3}, DLDataType{kDLInt, 4, 1}, b, 2));
});
CASE("se.tensor_in_containers") {
  return Both(Map<Any, Any>({{String("w"), CpuTensor({2}, kF32, kF4, 8)}}),
              Map<Any, Any>({{String("w"), CpuTensor({2}, kF32, kF4, 8)}}));
});

// --- objects: errors
CASE("se.err.no_kind") {
  return SE(ObjectRef(make_object<PlainObj>()), ObjectRef(make_object<PlainObj>()));
});
CASE("sh.err.no_kind") { return SH(ObjectRef(make_object<PlainObj>())); });
CASE("se.err.function") {
  Function f = Function::FromTyped([]() {});
  return SE(f, f);
});
CASE("sh.err.function") { return SH(Function::FromTyped([]() {})); });
CASE("sh.err.nested_no_kind") { return SH(Array<Any>({1, ObjectRef(make_object<PlainObj>())})); });
CASE("se.err.error_object") {
  Error e("ValueError", "m", "");
  return SE(e, e);
});
CASE("se.type_mismatch_objects") { return Both(Node("a", {}), Const(1)); });

// --- tree nodes
CASE("se.tree.equal") { return Both(Node("add", {1, 2}, "first"), Node("add", {1, 2}, "second")); });
CASE("se.tree.ne") { return Both(Node("add", {1, 2}), Node("add", {1, 3})); });
CASE("se.tree.op_ne") { return Both(Node("add", {1}), Node("sub", {1})); });
CASE("se.tree.nested") {
  return Both(Node("f", {Node("g", {1}), Node("h", {String("x")})}), Node("f", {Node("g", {1}), Node("h", {String("x")})}));
});
CASE("se.tree.shared_vs_copies") {
  Any n = Node("g", {1});
  return Both(Node("f", {n, n}), Node("f", {Node("g", {1}), Node("g", {1})}));
});
CASE("sh.tree") {
  return Array<Any>({SH(Node("add", {1, 2})), SH(Node("add", {1, 2}, "noted")), SH(Node("x", {})),
                     SH(Node("f", {Node("g", {1}), Array<Any>({Node("h", {})})}))});
});
CASE("se.derived") {
  return Both(Derived(1, 2.5, true, "s", Array<Any>({1}), ObjectRef(Node("n", {}).cast<ObjectRef>())),
              Derived(1, 2.5, true, "s", Array<Any>({1}), ObjectRef(Node("n", {}).cast<ObjectRef>())));
});
CASE("se.derived_base_field_ne") {
  return Both(Derived(1, 2.5, true, "s", nullptr), Derived(1, 2.5, false, "s", nullptr));
});
CASE("sh.derived") { return SH(Derived(7, -1.5, false, "str", Map<Any, Any>({{String("k"), 1}}))); });

// --- DAG nodes
CASE("se.dag.sharing_matters") {
  Any x = Node("x", {});
  Any v0 = Dag(x, 1), v1 = Dag(x, 1);
  return Both(Dag(v0, v0), Dag(v1, v0));
});
CASE("se.dag.same_sharing") {
  Any a0 = Dag(1, 2), b0 = Dag(1, 2);
  return Both(Dag(a0, a0), Dag(b0, b0));
});
CASE("se.dag.copies") {
  return Both(Dag(Dag(1, 2), Dag(1, 2)), Dag(Dag(1, 2), Dag(1, 2)));
});
CASE("sh.dag") {
  Any a0 = Dag(1, 2);
  return Array<Any>({SH(Dag(a0, a0)), SH(Dag(Dag(1, 2), Dag(1, 2))), SH(Array<Any>({a0, a0, Dag(3, 4)}))});
});
CASE("sh.dag.shared_past_the_inline_memo") {
  // The walk keeps its first finished objects in place and the rest in a map: a node shared
  // across that switch, and one shared after it.
  Any a0 = Dag(1, 2), b0 = Dag(7, 8);
  Array<Any> items({a0});
  for (int i = 0; i < 12; ++i) items.push_back(Dag(i, i + 1));
  items.push_back(a0);
  items.push_back(b0);
  items.push_back(Dag(b0, a0));
  return SH(items);
});
CASE("se.const_tree") { return Both(Const(3), Const(3)); });
CASE("se.const_tree_ne") { return Both(Const(3), Const(4)); });
CASE("se.unique") { return Both(Unique(3), Unique(3)); });
CASE("se.unique_same") {
  Any u = Unique(3);
  return Both(u, u);
});
CASE("sh.unique_const") { return Array<Any>({SH(Unique(3)), SH(Const(3))}); });

// --- free variables and definition regions
CASE("se.var.same") {
  Any x = Var("x");
  return EqOnly(x, x);
});
CASE("se.var.distinct") { return EqOnly(Var("x"), Var("y")); });
CASE("se.var.map_free_vars") { return Both(Var("x"), Var("y"), true); });
CASE("se.var.in_array_mapped") {
  Any x = Var("x"), y = Var("y");
  return Both(Array<Any>({x, x}), Array<Any>({y, y}), true);
});
CASE("se.var.inconsistent_mapping") {
  Any x = Var("x"), y = Var("y"), z = Var("z");
  return Both(Array<Any>({x, x}), Array<Any>({y, z}), true);
});
CASE("se.var.reverse_mapping") {
  Any x = Var("x"), y = Var("y"), z = Var("z");
  return Both(Array<Any>({x, z}), Array<Any>({y, y}), true);
});
CASE("se.let.bound") {
  Any x = Var("x"), y = Var("y");
  return Both(Let(x, 1, Node("neg", {x})), Let(y, 1, Node("neg", {y})));
});
CASE("se.let.wrong_use") {
  Any x = Var("x"), y = Var("y");
  return EqOnly(Let(x, 1, Node("neg", {x})), Let(y, 1, Node("neg", {x})));
});
CASE("se.let.free_in_body") {
  Any x = Var("x"), y = Var("y"), f = Var("f");
  return EqOnly(Let(x, 1, Node("add", {x, f})), Let(y, 1, Node("add", {y, f})));
});
CASE("se.let.free_in_body_distinct") {
  Any x = Var("x"), y = Var("y");
  return EqOnly(Let(x, 1, Node("add", {x, Var("f")})), Let(y, 1, Node("add", {y, Var("g")})));
});
CASE("se.let.nested_shadow") {
  Any x = Var("x"), y = Var("y"), a = Var("a"), b = Var("b");
  return Both(Let(x, 1, Let(a, x, Node("p", {a, x}))), Let(y, 1, Let(b, y, Node("p", {b, y}))));
});
CASE("se.func.simple_params") {
  Any x = Var("x"), y = Var("y"), a = Var("a"), b = Var("b");
  return Both(Func({x, y}, Node("add", {x, y})), Func({a, b}, Node("add", {a, b})));
});
CASE("se.func.swapped_use") {
  Any x = Var("x"), y = Var("y"), a = Var("a"), b = Var("b");
  return EqOnly(Func({x, y}, Node("add", {x, y})), Func({a, b}, Node("add", {b, a})));
});
CASE("se.func.typed_params_simple") {
  // In a simple region the var's own type is a use: vars inside the type must already match.
  Any n = Var("n"), m = Var("m");
  Any x = TVar("x", Node("T", {n})), y = TVar("y", Node("T", {m}));
  return EqOnly(Func({x}, x), Func({y}, y));
});
CASE("se.func.typed_params_simple_same_type_var") {
  Any n = Var("n");
  Any x = TVar("x", Node("T", {n})), y = TVar("y", Node("T", {n}));
  return EqOnly(Func({x}, Node("use", {x, n})), Func({y}, Node("use", {y, n})));
});
CASE("se.let.typed_var_pattern") {
  // In a pattern region the var's type defines too.
  Any n = Var("n"), m = Var("m");
  Any x = TVar("x", Node("T", {n})), y = TVar("y", Node("T", {m}));
  return Both(Let(x, 0, Node("use", {x, n})), Let(y, 0, Node("use", {y, m})));
});
CASE("se.func.map_free_vars_overrides") {
  Any n = Var("n"), m = Var("m");
  Any x = TVar("x", Node("T", {n})), y = TVar("y", Node("T", {m}));
  return Both(Func({x}, x), Func({y}, y), true);
});
CASE("sh.var_regions") {
  Any x = Var("x"), y = Var("y");
  return Array<Any>({SH(x, true), SH(Array<Any>({x, y, x}), true), SH(Let(x, 1, Node("neg", {x}))),
                     SH(Func({x, y}, Node("add", {y, x}))), SH(Func({TVar("t", Node("T", {x}))}, 1), true),
                     SH(Let(TVar("t", Node("T", {x})), 0, x))});
});
CASE("se.map_var_keys") {
  Any x = Var("x"), y = Var("y");
  return Both(Array<Any>({x, Map<Any, Any>({{x, 1}})}), Array<Any>({y, Map<Any, Any>({{y, 1}})}), true);
});
// Equality finds its first bindings by a search and later ones through maps: variables bound
// before and after the switch, used again after it (and a map keyed by one of each).
static Any ManyVars(const char* prefix, int use_a, int use_b) {
  std::vector<Any> vars;
  Array<Any> items;
  for (int i = 0; i < 12; ++i) {
    vars.push_back(Var((std::string(prefix) + std::to_string(i)).c_str()));
    items.push_back(vars.back());
  }
  items.push_back(vars[use_a]);
  items.push_back(vars[use_b]);
  items.push_back(Map<Any, Any>({{vars[use_a], 1}, {vars[use_b], 2}}));
  return items;
}
CASE("se.vars_past_the_searched_bindings") {
  return Array<Any>({Both(ManyVars("x", 0, 11), ManyVars("y", 0, 11), true),
                     Both(ManyVars("x", 0, 11), ManyVars("y", 0, 10), true),
                     Both(ManyVars("x", 3, 9), ManyVars("y", 9, 3), true),
                     Both(ManyVars("x", 3, 9), ManyVars("y", 3, 9), true)});
});
CASE("se.map_var_keys_unbound") {
  Any x = Var("x"), y = Var("y");
  return Both(Map<Any, Any>({{x, 1}}), Map<Any, Any>({{y, 1}}), true);
});
CASE("sh.map_var_keys") {
  Any x = Var("x");
  return Array<Any>({SH(Array<Any>({x, Map<Any, Any>({{x, 1}, {String("k"), 2}})}), true)});
});

// --- custom hooks
CASE("se.hook.equal") {
  Any x = Var("x"), y = Var("y");
  return Both(Hooked(x, Node("u", {x}), 1), Hooked(y, Node("u", {y}), 2));
});
CASE("se.hook.ne") {
  Any x = Var("x"), y = Var("y");
  return EqOnly(Hooked(x, Node("u", {1}), 1), Hooked(y, Node("u", {2}), 1));
});
CASE("sh.hook") {
  return Array<Any>({SH(Hooked(Var("x"), 5, 1)), SH(Hooked(1, Array<Any>({2}), 9))});
});

// --- cycles and depth
CASE("ours.se.list_cycle") {
  List<Any> l({1});
  l.push_back(l);
  return harness::ThenBreakCycle([&] { return SE(l, l); }, [&] { l.clear(); });
});
CASE("sh.deep") {
  Any v = 1;
  for (int i = 0; i < 3000; ++i) v = Array<Any>({v});
  return SH(v);
});
CASE("se.deep") {
  Any a = 1, b = 1;
  for (int i = 0; i < 3000; ++i) {
    a = Array<Any>({a});
    b = Array<Any>({b});
  }
  return SE(a, b);
});

}  // namespace

namespace {
using namespace tvm::ffi;
using harness::Call;

// Cycles: the official library recurses until its stack overflows; these run on ours only.
CASE("ours.sh.list_cycle") {
  List<Any> l({1});
  l.push_back(Array<Any>({l}));
  return harness::ThenBreakCycle([&] { return Call("ffi.StructuralHash", l, false, false); },
                                 [&] { l.clear(); });
});
CASE("ours.se.dict_cycle") {
  Dict<Any, Any> d;
  d.Set(1, d);
  return harness::ThenBreakCycle(
      [&] { return Call("ffi.StructuralEqual", d, d, false, false); },
      [&] { d.clear(); });
});
CASE("ours.sh.object_cycle") {
  auto box = make_object<st::BoxObj>();
  ObjectRef b(box);
  box->v = Array<Any>({b});
  return harness::ThenBreakCycle(
      [&] { return Call("ffi.StructuralHash", b, false, false); },
      [&] { box->v = nullptr; });
});
CASE("ours.se.object_cycle_two_boxes") {
  auto b1 = make_object<st::BoxObj>();
  auto b2 = make_object<st::BoxObj>();
  ObjectRef r1(b1), r2(b2);
  b1->v = r1;
  b2->v = r2;
  return harness::ThenBreakCycle(
      [&] { return Call("ffi.StructuralEqual", r1, r2, false, false); },
      [&] { b1->v = nullptr; b2->v = nullptr; });
});
CASE("ours.sh.kept_callback") {
  // A hook that keeps its callback and calls it after the walk gets an error, not a dangling walk.
  st::keep_hash_callback = true;
  Any h = Call("ffi.StructuralHash", st::Hooked(1, 2, 0), false, false);
  st::keep_hash_callback = false;
  Function cb = std::move(st::kept_hash_callback);
  st::kept_hash_callback = Function(nullptr);
  return cb(1, int64_t{0}, 0);
});
CASE("ours.sh.hooked_cycle") {
  // A custom hook re-enters the walk through its callback; the cycle is still found.
  auto box = make_object<st::BoxObj>();
  ObjectRef b(box);
  box->v = st::Hooked(b, 1, 0);
  return harness::ThenBreakCycle(
      [&] { return Call("ffi.StructuralHash", b, false, false); },
      [&] { box->v = nullptr; });
});
}  // namespace

namespace {
using namespace tvm::ffi;
using harness::Call;
using namespace st;

Any MM(const Any& a, const Any& b, bool mfv = false, bool skip = false) {
  return Call("ffi.GetFirstStructuralMismatch", a, b, mfv, skip);
}

CASE("mm.equal") { return MM(Array<Any>({1, 2}), Array<Any>({1, 2})); });
CASE("mm.array_item") { return MM(Array<Any>({1, 2, 3}), Array<Any>({1, 2, 4})); });
CASE("mm.array_longer_lhs") { return MM(Array<Any>({1, 2, 3}), Array<Any>({1, 2})); });
CASE("mm.array_longer_rhs") { return MM(Array<Any>({1, 2}), Array<Any>({1, 2, 3})); });
CASE("mm.nested") {
  return MM(Array<Any>({1, List<Any>({Map<Any, Any>({{String("k"), Array<Any>({1, 2})}})})}),
            Array<Any>({1, List<Any>({Map<Any, Any>({{String("k"), Array<Any>({1, 3})}})})}));
});
CASE("mm.map_value") { return MM(Map<Any, Any>({{String("a"), 1}}), Map<Any, Any>({{String("a"), 2}})); });
CASE("mm.map_missing_in_rhs") {
  return MM(Map<Any, Any>({{String("a"), 1}, {String("b"), 2}}), Map<Any, Any>({{String("a"), 1}, {String("c"), 2}}));
});
CASE("mm.map_extra_in_rhs") {
  return MM(Map<Any, Any>({{String("a"), 1}}), Map<Any, Any>({{String("a"), 1}, {String("b"), 2}}));
});
CASE("mm.map_int_keys") { return MM(Map<Any, Any>({{1, 1}, {2, 2}}), Map<Any, Any>({{2, 2}, {1, 5}})); });
CASE("mm.type") { return MM(Array<Any>({1}), Array<Any>({1.0})); });
CASE("mm.root") { return MM(1, 2); });
CASE("mm.object_attr") { return MM(Node("add", {1, Node("x", {2})}), Node("add", {1, Node("x", {3})})); });
CASE("mm.object_op") { return MM(Node("add", {1}), Node("sub", {1})); });
CASE("mm.derived_base_field") { return MM(Derived(1, 2.0, true, "s", nullptr), Derived(1, 2.5, true, "s", nullptr)); });
CASE("mm.let_var_use") {
  Any x = Var("x"), y = Var("y");
  return MM(Let(x, 1, Node("neg", {x})), Let(y, 1, Node("neg", {x})));
});
CASE("mm.free_var") { return MM(Array<Any>({Var("x")}), Array<Any>({Var("y")})); });
CASE("mm.free_var_mapped") { return MM(Array<Any>({Var("x")}), Array<Any>({Var("y")}), true); });
CASE("mm.hook_field") {
  Any x = Var("x"), y = Var("y");
  return MM(Hooked(x, Node("u", {1}), 1), Hooked(y, Node("u", {2}), 1));
});
CASE("mm.tensor_skip") {
  return Array<Any>({MM(Array<Any>({Shape({1})}), Array<Any>({Shape({2})})), MM(Shape({1}), Shape({1}))});
});
CASE("mm.err.no_kind") { return MM(Array<Any>({ObjectRef(make_object<PlainObj>())}), Array<Any>({ObjectRef(make_object<PlainObj>())})); });

// --- StructuralKey
CASE("key.hash_is_structural_hash") {
  Any k = Call("ffi.StructuralKey", Array<Any>({1, 2}));
  return Array<Any>({harness::FieldOf(k.cast<const Object*>(), "hash_i64"), Call("ffi.StructuralHash", Array<Any>({1, 2}), false, false)});
});
CASE("key.equal") {
  Any a = Call("ffi.StructuralKey", Array<Any>({1, Map<Any, Any>({{String("a"), String("b")}})}));
  Any b = Call("ffi.StructuralKey", Array<Any>({1, Map<Any, Any>({{String("a"), String("b")}})}));
  Any c = Call("ffi.StructuralKey", Array<Any>({1}));
  return Array<Any>({Call("ffi.StructuralKeyEqual", a, b), Call("ffi.StructuralKeyEqual", a, c), Call("ffi.StructuralKeyEqual", a, a),
                     Call("ffi.StructuralKeyEqual", 1, 1)});
});
CASE("key.as_map_key") {
  Any a = Call("ffi.StructuralKey", Array<Any>({1, 2}));
  Any b = Call("ffi.StructuralKey", Array<Any>({1, 2}));
  Map<Any, Any> m;
  m.Set(a, String("first"));
  m.Set(b, String("second"));
  return Array<Any>({m.size(), m[a]});
});
CASE("key.free_vars_hash_by_pointer_not_equal") {
  Any a = Call("ffi.StructuralKey", Var("x"));
  Any b = Call("ffi.StructuralKey", Var("x"));
  return Call("ffi.StructuralKeyEqual", a, b);
});
CASE("key.err.not_keys") { return Call("ffi.StructuralKeyEqual", 1, 2); });
CASE("key.err.unsupported") { return Call("ffi.StructuralKey", ObjectRef(make_object<PlainObj>())); });
}  // namespace

namespace {
using namespace tvm::ffi;
using harness::Call;

CASE("sig.err.equal_bool") { return Call("ffi.StructuralEqual", 1, 1, String("x"), false); });
CASE("sig.err.equal_count") { return Call("ffi.StructuralEqual", 1, 1); });
CASE("sig.err.hash_bool") { return Call("ffi.StructuralHash", 1, 1.5, false); });
CASE("sig.err.mismatch_bool") { return Call("ffi.GetFirstStructuralMismatch", 1, 1, false, nullptr); });
CASE("sig.err.key_count") { return Call("ffi.StructuralKey"); });
CASE("sig.err.key_equal_count") { return Call("ffi.StructuralKeyEqual", 1); });
CASE("sig.err.to_graph_count") { return Call("ffi.ToJSONGraph", 1); });
CASE("sig.err.to_graph_string_count") { return Call("ffi.ToJSONGraphString", 1, 2, 3); });
CASE("sig.err.from_graph_string_type") { return Call("ffi.FromJSONGraphString", 1); });
CASE("sig.err.from_graph_count") { return Call("ffi.FromJSONGraph"); });
CASE("sig.err.parse_count") { return Call("ffi.json.Parse"); });
CASE("sig.err.stringify_count") { return Call("ffi.json.Stringify", 1); });
CASE("sig.err.interrupt_count") { return Call("ffi.VisitInterrupt"); });
CASE("sig.bool_from_int") { return Call("ffi.StructuralEqual", 1, 1, 1, 0); });
}  // namespace
