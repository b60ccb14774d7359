// cases_serialization.cc: ffi.ToJSONGraph(String) / ffi.FromJSONGraph(String): the exact graph
// text for every value kind, sharing, metadata, reflected objects (types.h and the official
// testing library's), JSON hooks, enums, round trips, and malformed graphs.
#include <dlfcn.h>

#include <cmath>

#include "harness.h"
#include "types.h"

namespace {

using namespace tvm::ffi;
using harness::BigIntOf;
using harness::Call;
using harness::ThenBreakCycle;
using namespace st;

Any ToStr(const Any& v, const Any& meta = Any(nullptr)) { return Call("ffi.ToJSONGraphString", v, meta); }
Any FromStr(const std::string& s) { return Call("ffi.FromJSONGraphString", String(s)); }
// The graph text, then the value read back from it.
Any GraphRT(const Any& v) {
  Any text = ToStr(v);
  return Array<Any>({text, FromStr(text.cast<String>())});
}

// Loads the official testing library once (its types and enums register on load).
bool LoadTesting() {
  static bool loaded = [] {
    const char* path = std::getenv("TVM_FFI_TESTING_LIB");
    return path != nullptr && dlopen(path, RTLD_NOW | RTLD_GLOBAL) != nullptr;
  }();
  return loaded;
}

Any Create(const char* key, std::vector<Any> kv) {
  LoadTesting();
  std::vector<Any> keep;
  keep.push_back(String(key));
  for (const Any& a : kv) keep.push_back(a);
  std::vector<AnyView> args(keep.begin(), keep.end());
  Any out;
  Function::GetGlobalRequired("ffi.MakeObjectFromPackedArgs")
      .CallPacked(args.data(), static_cast<int32_t>(args.size()), &out);
  return out;
}

// --- exact text of every value kind
CASE("ser.int") { return GraphRT(5); });
CASE("ser.negative_int") { return GraphRT(-9223372036854775807LL - 1); });
CASE("ser.bool") { return GraphRT(true); });
CASE("ser.float") { return GraphRT(1.5); });
CASE("ser.float_int_valued") { return GraphRT(3.0); });
CASE("ser.float_special") { return GraphRT(Array<Any>({std::nan(""), INFINITY, -INFINITY, -0.0})); });
CASE("ser.none") { return GraphRT(nullptr); });
CASE("ser.str") { return GraphRT(String("str")); });
CASE("ser.str_escapes") { return GraphRT(String("a\"b\\c/d\n\x01\xc3\xa9")); });
CASE("ser.bytes") { return GraphRT(Bytes("bytes")); });
CASE("ser.bytes_lengths") {
  return GraphRT(Array<Any>({Bytes(""), Bytes("a"), Bytes("ab"), Bytes("abc"), Bytes(std::string("\x00\xff\x10", 3))}));
});
CASE("ser.device") { return GraphRT(DLDevice{kDLCUDA, 1}); });
CASE("ser.dtype") { return GraphRT(Array<Any>({DLDataType{kDLInt, 8, 1}, DLDataType{kDLFloat, 32, 4}, DLDataType{kDLBfloat, 16, 1}})); });
CASE("ser.shape") { return GraphRT(Shape({1, 2})); });
CASE("ser.empty_shape") { return GraphRT(Shape({})); });
CASE("ser.bigint") { return GraphRT(BigIntOf({0, 0, 65536})); });
CASE("ser.bigint_negative") { return GraphRT(BigIntOf({1, -2})); });
CASE("ser.array") { return GraphRT(Array<Any>({1, 2, 3})); });
CASE("ser.list") { return GraphRT(List<Any>({1, String("x"), List<Any>()})); });
CASE("ser.map") {
  return GraphRT(Map<Any, Any>({{String("a"), 1}, {String("b"), Array<Any>({1.5, String("x"), nullptr, true})}}));
});
CASE("ser.dict") { return GraphRT(Dict<Any, Any>({{1, String("one")}, {String("two"), 2}})); });
CASE("ser.map_object_keys") { return GraphRT(Map<Any, Any>({{Shape({1}), 1}, {DLDevice{kDLCPU, 0}, 2}})); });
CASE("ser.dedup") {
  Any shared = Array<Any>({1, 2});
  return GraphRT(Array<Any>({shared, shared, Array<Any>({1, 2}), String("s"), String("s"), 1, true, 1.0}));
});
CASE("ser.metadata") { return ToStr(Array<Any>({1}), Map<Any, Any>({{String("version"), String("1")}})); });
CASE("ser.metadata_scalar") { return ToStr(1, 7); });
CASE("ser.to_json_graph_object") { return Call("ffi.ToJSONGraph", Array<Any>({1, String("a")}), nullptr); });
CASE("ser.from_json_graph_object") {
  return Call("ffi.FromJSONGraph", Call("ffi.json.Parse", String(R"({"root_index":1,"nodes":[{"type":"int","data":4},{"type":"ffi.List","data":[0,0]}]})")));
});

// --- reflected objects
CASE("ser.obj.node") { return GraphRT(Node("add", {1, Node("x", {})}, "note")); });
CASE("ser.obj.derived") {
  return GraphRT(Derived(3, 2.5, true, "s", Map<Any, Any>({{String("k"), Array<Any>({1})}}), ObjectRef(Node("n", {}).cast<ObjectRef>())));
});
CASE("ser.obj.shared") {
  Any n = Node("leaf", {});
  return GraphRT(Array<Any>({n, Node("p", {n, n})}));
});
CASE("ser.obj.var_let") {
  Any x = Var("x");
  return GraphRT(Let(x, 1, Node("neg", {x})));
});
CASE("ser.obj.hook_point") { return GraphRT(Array<Any>({Point(3, -4), Point(3, -4)})); });
CASE("ser.obj.testing_pair") { return GraphRT(Create("testing.TestIntPair", {String("a"), 1, String("b"), 2})); });
CASE("ser.obj.testing_base") { return GraphRT(Create("testing.TestObjectBase", {String("v_i64"), 4})); });
CASE("ser.obj.testing_derived") {
  return GraphRT(Create("testing.TestObjectDerived",
                          {String("v_i64"), 1, String("v_map"), Map<Any, Any>({{String("a"), 1}}), String("v_array"),
                           Array<Any>({1, 2})}));
});
CASE("ser.obj.testing_schema_all") {
  return GraphRT(Create("testing.SchemaAllTypes", {}));
});
CASE("ser.enum.int") {
  LoadTesting();
  return GraphRT(Array<Any>({Call("testing.enum_variant_get", String("Alpha")),
                             Call("testing.enum_variant_get", String("Beta")),
                             Call("testing.enum_variant_get", String("Alpha"))}));
});
CASE("ser.enum.holder") {
  LoadTesting();
  return ToStr(Create("testing.TestCxxEnumHolder", {}));
});
CASE("ser.enum.from_int_index") {
  LoadTesting();
  return FromStr(R"({"root_index":0,"nodes":[{"type":"testing.TestCxxIntEnum","data":1}]})");
});
CASE("ser.enum.variant_from_str") {
  LoadTesting();
  Any v = FromStr(R"({"root_index":0,"nodes":[{"type":"testing.TestEnumVariant","data":"Beta"}]})");
  return Array<Any>({v, v.same_as(Call("testing.enum_variant_get", String("Beta")))});
});
CASE("ser.enum.from_str_index") {
  LoadTesting();
  return FromStr(R"({"root_index":0,"nodes":[{"type":"testing.TestCxxStrEnum","data":"beta"}]})");
});
CASE("ser.err.enum_unknown_index") {
  LoadTesting();
  return FromStr(R"({"root_index":0,"nodes":[{"type":"testing.TestCxxIntEnum","data":99}]})");
});
CASE("ser.err.enum_unknown_str") {
  LoadTesting();
  return FromStr(R"({"root_index":0,"nodes":[{"type":"testing.TestCxxStrEnum","data":"nope"}]})");
});

// --- values that cannot be written
CASE("ser.err.function") { return ToStr(Function::FromTyped([]() {})); });
CASE("ser.err.no_creator") { return ToStr(ObjectRef(make_object<NoCreatorObj>(1))); });
CASE("ser.err.opaque_ptr") { return ToStr(static_cast<void*>(nullptr)); });
CASE("ser.err.opaque_ptr_nonnull") { return ToStr(reinterpret_cast<void*>(0x10)); });
CASE("ser.err.nested_function") { return ToStr(Array<Any>({1, Function::FromTyped([]() {})})); });
CASE("ser.err.list_cycle") {
  List<Any> l({1});
  l.push_back(l);
  return ThenBreakCycle([&] { return ToStr(l); }, [&] { l.clear(); });
});
CASE("ser.err.dict_cycle") {
  Dict<Any, Any> d;
  d.Set(String("self"), d);
  return ThenBreakCycle([&] { return ToStr(d); }, [&] { d.clear(); });
});
// Cycles through an immutable container or an object: reported at the List or Dict on them,
// one loop in, as the official writer (which checks only those) reports them.
CASE("ser.err.array_list_cycle") {
  List<Any> l;
  Array<Any> a({l});
  l.push_back(a);
  return ThenBreakCycle([&] { return ToStr(a); }, [&] { l.clear(); });
});
CASE("ser.err.map_dict_cycle") {
  Dict<Any, Any> d;
  Map<Any, Any> m({{String("x"), d}});
  d.Set(String("y"), m);
  return ThenBreakCycle([&] { return ToStr(m); }, [&] { d.clear(); });
});
CASE("ser.err.object_list_cycle") {
  auto box = make_object<st::BoxObj>();
  ObjectRef b(box);
  List<Any> l({b});
  box->v = l;
  return ThenBreakCycle([&] { return ToStr(b); }, [&] { l.clear(); });
});
CASE("ser.shared_list_not_a_cycle") {
  List<Any> l({1});
  return ToStr(Array<Any>({l, l}));
});

// --- reading hand-written graphs
CASE("deser.int_from_bool_data") { return FromStr(R"({"root_index":0,"nodes":[{"type":"int","data":true}]})"); });
CASE("deser.float_from_int") { return FromStr(R"({"root_index":0,"nodes":[{"type":"float","data":3}]})"); });
CASE("deser.bigint_small") { return FromStr(R"({"root_index":0,"nodes":[{"type":"ffi.BigInt","data":"12"}]})"); });
CASE("deser.bigint_plus") { return FromStr(R"({"root_index":0,"nodes":[{"type":"ffi.BigInt","data":"+18446744073709551616"}]})"); });
CASE("deser.dict") { return FromStr(R"({"root_index":2,"nodes":[{"type":"int","data":1},{"type":"ffi.String","data":"v"},{"type":"ffi.Dict","data":[0,1]}]})"); });
CASE("deser.shared_nodes") {
  Any v = FromStr(R"({"root_index":1,"nodes":[{"type":"ffi.Array","data":[]},{"type":"ffi.Array","data":[0,0]}]})");
  Array<Any> a = v.cast<Array<Any>>();
  return Array<Any>({v, a[0].same_as(a[1])});
});
CASE("deser.null_node_reused") {
  return FromStr(R"({"root_index":1,"nodes":[{"type":"None"},{"type":"ffi.Array","data":[0,0]}]})");
});
CASE("deser.extra_keys_ignored") {
  return FromStr(R"({"root_index":0,"nodes":[{"type":"int","data":1,"extra":2}],"metadata":{"x":1},"other":3})");
});
CASE("deser.field_default") { return FromStr(R"({"root_index":0,"nodes":[{"type":"st.Derived","data":{"i":1,"f":2.0,"b":false,"dt":"int8","s":1,"any":1}}]})"); });
CASE("deser.missing_default_field") {
  return FromStr(R"({"root_index":1,"nodes":[{"type":"ffi.String","data":"s"},{"type":"st.Derived","data":{"i":1,"f":2.0,"b":false,"dt":"int8","s":0,"any":0}}]})");
});
CASE("deser.testing_defaults") {
  LoadTesting();
  return FromStr(R"({"root_index":0,"nodes":[{"type":"testing.TestObjectBase","data":{"v_i64":9}}]})");
});

// --- malformed graphs
CASE("deser.err.not_json") { return FromStr("{not json"); });
CASE("deser.err.not_object") { return FromStr("[1, 2]"); });
CASE("deser.err.no_root") { return FromStr(R"({"nodes":[]})"); });
CASE("deser.err.root_not_int") { return FromStr(R"({"root_index":"0","nodes":[]})"); });
CASE("deser.err.no_nodes") { return FromStr(R"({"root_index":0})"); });
CASE("deser.err.nodes_not_array") { return FromStr(R"({"root_index":0,"nodes":{}})"); });
CASE("deser.err.root_out_of_range") { return FromStr(R"({"root_index":3,"nodes":[{"type":"None"}]})"); });
CASE("deser.err.root_negative") { return FromStr(R"({"root_index":-1,"nodes":[{"type":"None"}]})"); });
CASE("deser.err.child_out_of_range") { return FromStr(R"({"root_index":0,"nodes":[{"type":"ffi.Array","data":[5]}]})"); });
CASE("deser.err.child_not_int") { return FromStr(R"({"root_index":0,"nodes":[{"type":"ffi.Array","data":["x"]}]})"); });
CASE("deser.err.node_not_object") { return FromStr(R"({"root_index":0,"nodes":[3]})"); });
CASE("deser.err.node_no_type") { return FromStr(R"({"root_index":0,"nodes":[{"data":3}]})"); });
CASE("deser.err.type_not_str") { return FromStr(R"({"root_index":0,"nodes":[{"type":1,"data":3}]})"); });
CASE("deser.err.unknown_type") { return FromStr(R"({"root_index":0,"nodes":[{"type":"no.such.Type","data":{}}]})"); });
CASE("deser.err.no_data") { return FromStr(R"({"root_index":0,"nodes":[{"type":"int"}]})"); });
CASE("deser.err.int_data_str") { return FromStr(R"({"root_index":0,"nodes":[{"type":"int","data":"1"}]})"); });
CASE("deser.err.bool_data_str") { return FromStr(R"({"root_index":0,"nodes":[{"type":"bool","data":"x"}]})"); });
CASE("deser.err.float_data_str") { return FromStr(R"({"root_index":0,"nodes":[{"type":"float","data":"x"}]})"); });
CASE("deser.err.str_data_int") { return FromStr(R"({"root_index":0,"nodes":[{"type":"ffi.String","data":1}]})"); });
CASE("deser.err.device_short") { return FromStr(R"({"root_index":0,"nodes":[{"type":"Device","data":[1]}]})"); });
CASE("deser.err.device_not_array") { return FromStr(R"({"root_index":0,"nodes":[{"type":"Device","data":1}]})"); });
CASE("deser.err.device_bad_elem") { return FromStr(R"({"root_index":0,"nodes":[{"type":"Device","data":[1,"x"]}]})"); });
CASE("deser.err.bad_dtype") { return FromStr(R"({"root_index":0,"nodes":[{"type":"DataType","data":"notadtype"}]})"); });
CASE("deser.err.shape_bad") { return FromStr(R"({"root_index":0,"nodes":[{"type":"ffi.Shape","data":[1,2.5]}]})"); });
CASE("deser.err.map_odd") { return FromStr(R"({"root_index":1,"nodes":[{"type":"int","data":1},{"type":"ffi.Map","data":[0]}]})"); });
CASE("deser.err.bigint_bad") { return FromStr(R"({"root_index":0,"nodes":[{"type":"ffi.BigInt","data":"12a"}]})"); });
CASE("deser.err.bigint_space") { return FromStr(R"({"root_index":0,"nodes":[{"type":"ffi.BigInt","data":" 12"}]})"); });
CASE("deser.err.bigint_empty") { return FromStr(R"({"root_index":0,"nodes":[{"type":"ffi.BigInt","data":""}]})"); });
CASE("deser.err.bigint_not_str") { return FromStr(R"({"root_index":0,"nodes":[{"type":"ffi.BigInt","data":12}]})"); });
CASE("deser.err.object_data_not_map") { return FromStr(R"({"root_index":0,"nodes":[{"type":"st.Node","data":[]}]})"); });
CASE("deser.err.required_field") { return FromStr(R"({"root_index":0,"nodes":[{"type":"st.Node","data":{}}]})"); });
CASE("deser.err.missing_field") {
  return FromStr(R"({"root_index":1,"nodes":[{"type":"ffi.String","data":"op"},{"type":"st.Node","data":{"op":0}}]})");
});
CASE("deser.err.field_wrong_type") {
  return FromStr(R"({"root_index":1,"nodes":[{"type":"int","data":1},{"type":"st.Node","data":{"op":0,"args":0,"note":0}}]})");
});
CASE("deser.err.pod_field_wrong_type") {
  LoadTesting();
  return FromStr(R"({"root_index":0,"nodes":[{"type":"testing.TestIntPair","data":{"a":"x","b":2}}]})");
});
CASE("deser.err.no_creator") { return FromStr(R"({"root_index":0,"nodes":[{"type":"st.NoCreator","data":{"v":1}}]})"); });
CASE("deser.err.hook_error") { return FromStr(R"({"root_index":0,"nodes":[{"type":"st.Point","data":"nocomma"}]})"); });
CASE("deser.err.function_type") { return FromStr(R"({"root_index":0,"nodes":[{"type":"ffi.Function","data":{}}]})"); });
CASE("deser.err.bad_base64_len") { return FromStr(R"({"root_index":0,"nodes":[{"type":"ffi.Bytes","data":"abc"}]})"); });
CASE("deser.err.top_not_map") { return Call("ffi.FromJSONGraph", Array<Any>({1})); });
CASE("deser.err.top_not_map_str") { return Call("ffi.FromJSONGraph", String("{}")); });

// Self-referencing graphs: the official reader recurses until its stack overflows.
CASE("ours.deser.self_array") { return FromStr(R"({"root_index":0,"nodes":[{"type":"ffi.Array","data":[0]}]})"); });
CASE("ours.deser.cycle_two") {
  return FromStr(R"({"root_index":0,"nodes":[{"type":"ffi.List","data":[1]},{"type":"ffi.Map","data":[0,0]}]})");
});
CASE("ours.deser.object_cycle") {
  return FromStr(R"({"root_index":0,"nodes":[{"type":"st.Box","data":{"v":0}}]})");
});
CASE("ours.ser.object_cycle") {
  auto box = make_object<st::BoxObj>();
  ObjectRef b(box);
  box->v = Array<Any>({b});
  return ThenBreakCycle([&] { return ToStr(b); }, [&] { box->v = nullptr; });
});

}  // namespace

namespace {
using namespace tvm::ffi;
using harness::Call;

CASE("ser.err.tensor") {
  struct Alloc {
    void AllocData(DLTensor* t) { t->data = std::calloc(16, 1); }
    void FreeData(DLTensor* t) { std::free(t->data); }
  };
  Tensor t = Tensor::FromNDAlloc(Alloc(), Shape({4}), DLDataType{kDLFloat, 32, 1}, DLDevice{kDLCPU, 0});
  return Call("ffi.ToJSONGraphString", Array<Any>({1, t}), nullptr);
});
CASE("ser.err.error_object") { return Call("ffi.ToJSONGraphString", Error("ValueError", "m", ""), nullptr); });
}  // namespace
