// types.h: reflected object types registered by this program (through the C ABI of the library
// under test, with the official reflection headers), covering every structural kind, definition
// regions, ignored fields, inheritance, custom __s_equal__/__s_hash__ hooks and JSON hooks.
#ifndef ANYFFI_TESTS_STRUCTURAL_TYPES_H_
#define ANYFFI_TESTS_STRUCTURAL_TYPES_H_

#include <tvm/ffi/extra/serialization.h>
#include <tvm/ffi/extra/structural_mutate.h>
#include <tvm/ffi/extra/structural_visit.h>
#include <tvm/ffi/extra/structural_equal.h>
#include <tvm/ffi/extra/structural_hash.h>
#include <tvm/ffi/reflection/registry.h>

#include "harness.h"

namespace st {

using namespace tvm::ffi;
namespace refl = tvm::ffi::reflection;

/*! \brief A free variable; its name never takes part in the comparison. */
class VarObj : public Object {
 public:
  String name;
  VarObj() = default;
  explicit VarObj(String n) : name(std::move(n)) {}
  static constexpr TVMFFISEqHashKind _type_s_eq_hash_kind = kTVMFFISEqHashKindFreeVar;
  static constexpr bool _type_mutable = true;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("st.Var", VarObj, Object);
};

/*! \brief A free variable with a structural type annotation (itself maybe holding vars). */
class TypedVarObj : public Object {
 public:
  String name;
  Any ty;
  TypedVarObj() = default;
  TypedVarObj(String n, Any t) : name(std::move(n)), ty(std::move(t)) {}
  static constexpr TVMFFISEqHashKind _type_s_eq_hash_kind = kTVMFFISEqHashKindFreeVar;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("st.TypedVar", TypedVarObj, Object);
};

/*! \brief A tree node: an operator name and arguments. */
class NodeObj : public Object {
 public:
  String op;
  Array<Any> args;
  String note;
  NodeObj() = default;
  NodeObj(String o, Array<Any> a, String n = "") : op(std::move(o)), args(std::move(a)), note(std::move(n)) {}
  static constexpr TVMFFISEqHashKind _type_s_eq_hash_kind = kTVMFFISEqHashKindTreeNode;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("st.Node", NodeObj, Object);
};

/*! \brief `let var = value in body`: var is a pattern definition. */
class LetObj : public Object {
 public:
  Any var;
  Any value;
  Any body;
  LetObj() = default;
  LetObj(Any v, Any val, Any b) : var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
  static constexpr TVMFFISEqHashKind _type_s_eq_hash_kind = kTVMFFISEqHashKindTreeNode;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("st.Let", LetObj, Object);
};

/*! \brief `fn(params) body`: params are simple definitions. */
class FuncObj : public Object {
 public:
  Array<Any> params;
  Any body;
  FuncObj() = default;
  FuncObj(Array<Any> p, Any b) : params(std::move(p)), body(std::move(b)) {}
  static constexpr TVMFFISEqHashKind _type_s_eq_hash_kind = kTVMFFISEqHashKindTreeNode;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("st.Func", FuncObj, Object);
};

/*! \brief A DAG node: sharing is part of the structure. */
class DagObj : public Object {
 public:
  Any a;
  Any b;
  DagObj() = default;
  DagObj(Any x, Any y) : a(std::move(x)), b(std::move(y)) {}
  static constexpr TVMFFISEqHashKind _type_s_eq_hash_kind = kTVMFFISEqHashKindDAGNode;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("st.Dag", DagObj, Object);
};

class ConstObj : public Object {
 public:
  int64_t v = 0;
  ConstObj() = default;
  explicit ConstObj(int64_t x) : v(x) {}
  static constexpr TVMFFISEqHashKind _type_s_eq_hash_kind = kTVMFFISEqHashKindConstTreeNode;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("st.Const", ConstObj, Object);
};

class UniqueObj : public Object {
 public:
  int64_t v = 0;
  UniqueObj() = default;
  explicit UniqueObj(int64_t x) : v(x) {}
  static constexpr TVMFFISEqHashKind _type_s_eq_hash_kind = kTVMFFISEqHashKindUniqueInstance;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("st.Unique", UniqueObj, Object);
};

/*! \brief A base tree node with fields of every POD kind; Derived adds more. */
class BaseObj : public Object {
 public:
  int64_t i = 0;
  double f = 0;
  bool b = false;
  DLDataType dt{kDLFloat, 32, 1};
  static constexpr TVMFFISEqHashKind _type_s_eq_hash_kind = kTVMFFISEqHashKindTreeNode;
  static constexpr uint32_t _type_child_slots = 2;
  TVM_FFI_DECLARE_OBJECT_INFO("st.Base", BaseObj, Object);
};

class DerivedObj : public BaseObj {
 public:
  String s;
  Any any;
  Optional<ObjectRef> opt;
  static constexpr TVMFFISEqHashKind _type_s_eq_hash_kind = kTVMFFISEqHashKindTreeNode;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("st.Derived", DerivedObj, BaseObj);
};

/*! \brief A tree node with custom hooks: compares/hashes `a` (as a definition) and `b`. */
class HookedObj : public Object {
 public:
  Any a;
  Any b;
  int64_t c = 0;
  HookedObj() = default;
  HookedObj(Any x, Any y, int64_t z) : a(std::move(x)), b(std::move(y)), c(z) {}
  static constexpr TVMFFISEqHashKind _type_s_eq_hash_kind = kTVMFFISEqHashKindTreeNode;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("st.Hooked", HookedObj, Object);
};

/*! \brief When set, the `st.Hooked` hash hook keeps the callback it was handed in
 * `kept_hash_callback` (the `ours.sh.kept_callback` case calls it after the walk ended). */
inline bool keep_hash_callback = false;
inline Function kept_hash_callback;

/*! \brief No structural kind at all. */
class PlainObj : public Object {
 public:
  int64_t v = 0;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("st.Plain", PlainObj, Object);
};

/*! \brief An object whose JSON form comes from __data_to_json__ / __data_from_json__. */
class PointObj : public Object {
 public:
  int64_t x = 0;
  int64_t y = 0;
  PointObj() = default;
  PointObj(int64_t a, int64_t b) : x(a), y(b) {}
  static constexpr TVMFFISEqHashKind _type_s_eq_hash_kind = kTVMFFISEqHashKindTreeNode;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("st.Point", PointObj, Object);
};

/*! \brief A mutable holder (lets a cycle through an object be built). */
class BoxObj : public Object {
 public:
  Any v;
  static constexpr TVMFFISEqHashKind _type_s_eq_hash_kind = kTVMFFISEqHashKindTreeNode;
  static constexpr bool _type_mutable = true;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("st.Box", BoxObj, Object);
};

/*! \brief Has no creator (not default constructible): cannot be rebuilt from JSON. */
class NoCreatorObj : public Object {
 public:
  int64_t v;
  explicit NoCreatorObj(int64_t x) : v(x) {}
  static constexpr TVMFFISEqHashKind _type_s_eq_hash_kind = kTVMFFISEqHashKindTreeNode;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("st.NoCreator", NoCreatorObj, Object);
};

/*! \brief A pair whose native __s_visit__ hook visits `b` before `a`, `a` as a definition. */
class RevPairObj : public Object {
 public:
  Any a;
  Any b;
  RevPairObj() = default;
  RevPairObj(Any x, Any y) : a(std::move(x)), b(std::move(y)) {}
  static constexpr TVMFFISEqHashKind _type_s_eq_hash_kind = kTVMFFISEqHashKindTreeNode;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("st.RevPair", RevPairObj, Object);
};

inline Expected<Optional<VisitInterrupt>> RevPairVisit(StructuralVisitorObj* visitor,
                                                      AnyView value) noexcept {
  const RevPairObj* self = detail::AnyUnsafe::RawObjectPtrFromAnyViewAfterCheck<const RevPairObj>(value);
  TVM_FFI_S_VISIT_MAYBE_EARLY_RETURN(visitor->VisitExpected(self->b));
  TVM_FFI_S_VISIT_MAYBE_EARLY_RETURN(visitor->WithDefRegionKind(
      kTVMFFIDefRegionKindSimple, [&] { return visitor->VisitExpected(self->a); }));
  return Optional<VisitInterrupt>(std::nullopt);
}

inline Any RevPair(Any a, Any b) { return ObjectRef(make_object<RevPairObj>(a, b)); }

inline Any Var(const char* n) { return ObjectRef(make_object<VarObj>(n)); }
inline Any TVar(const char* n, Any t) { return ObjectRef(make_object<TypedVarObj>(n, std::move(t))); }
inline Any Node(const char* op, Array<Any> args, const char* note = "") {
  return ObjectRef(make_object<NodeObj>(op, std::move(args), note));
}
inline Any Let(Any v, Any val, Any body) { return ObjectRef(make_object<LetObj>(v, val, body)); }
inline Any Func(Array<Any> params, Any body) { return ObjectRef(make_object<FuncObj>(params, body)); }
inline Any Dag(Any a, Any b) { return ObjectRef(make_object<DagObj>(a, b)); }
inline Any Const(int64_t v) { return ObjectRef(make_object<ConstObj>(v)); }
inline Any Unique(int64_t v) { return ObjectRef(make_object<UniqueObj>(v)); }
inline Any Hooked(Any a, Any b, int64_t c) { return ObjectRef(make_object<HookedObj>(a, b, c)); }
inline Any Point(int64_t x, int64_t y) { return ObjectRef(make_object<PointObj>(x, y)); }
inline Any Derived(int64_t i, double f, bool b, String s, Any any, Optional<ObjectRef> opt = std::nullopt) {
  auto p = make_object<DerivedObj>();
  p->i = i;
  p->f = f;
  p->b = b;
  p->s = std::move(s);
  p->any = std::move(any);
  p->opt = std::move(opt);
  return ObjectRef(p);
}

inline void RegisterTypes() {
  refl::ObjectDef<VarObj>().def_rw("name", &VarObj::name, refl::AttachFieldFlag::SEqHashIgnore());
  refl::ObjectDef<TypedVarObj>()
      .def_ro("name", &TypedVarObj::name, refl::AttachFieldFlag::SEqHashIgnore())
      .def_ro("ty", &TypedVarObj::ty);
  refl::ObjectDef<NodeObj>()
      .def_ro("op", &NodeObj::op)
      .def_ro("args", &NodeObj::args)
      .def_ro("note", &NodeObj::note, refl::AttachFieldFlag::SEqHashIgnore());
  refl::ObjectDef<LetObj>()
      .def_ro("var", &LetObj::var, refl::AttachFieldFlag::SEqHashDefPattern())
      .def_ro("value", &LetObj::value)
      .def_ro("body", &LetObj::body);
  refl::ObjectDef<FuncObj>()
      .def_ro("params", &FuncObj::params, refl::AttachFieldFlag::SEqHashDefSimple())
      .def_ro("body", &FuncObj::body);
  refl::ObjectDef<DagObj>().def_ro("a", &DagObj::a).def_ro("b", &DagObj::b);
  refl::ObjectDef<ConstObj>().def_ro("v", &ConstObj::v);
  refl::ObjectDef<UniqueObj>().def_ro("v", &UniqueObj::v);
  refl::ObjectDef<BaseObj>()
      .def_ro("i", &BaseObj::i)
      .def_ro("f", &BaseObj::f)
      .def_ro("b", &BaseObj::b)
      .def_ro("dt", &BaseObj::dt);
  refl::ObjectDef<DerivedObj>()
      .def_ro("s", &DerivedObj::s)
      .def_ro("any", &DerivedObj::any)
      .def_ro("opt", &DerivedObj::opt, refl::DefaultValue(Any(nullptr)));
  refl::ObjectDef<HookedObj>()
      .def_ro("a", &HookedObj::a)
      .def_ro("b", &HookedObj::b)
      .def_ro("c", &HookedObj::c);
  refl::TypeAttrDef<HookedObj>()
      .def(type_attr::kSEqual.name,
           [](const HookedObj* lhs, const HookedObj* rhs,
              TypedFunction<bool(AnyView, AnyView, int, AnyView)> eq) -> bool {
             if (!eq(lhs->a, rhs->a, kTVMFFIDefRegionKindPattern, String("a"))) return false;
             return eq(lhs->b, rhs->b, kTVMFFIDefRegionKindNone, String("b"));
           })
      .def(type_attr::kSHash.name,
           [](const HookedObj* self, int64_t init, TypedFunction<int64_t(AnyView, int64_t, int)> hash)
               -> int64_t {
             if (keep_hash_callback) kept_hash_callback = hash.packed();
             int64_t h = hash(self->a, init, kTVMFFIDefRegionKindPattern);
             return hash(self->b, h, kTVMFFIDefRegionKindNone);
           });
  refl::ObjectDef<PlainObj>().def_ro("v", &PlainObj::v);
  refl::ObjectDef<PointObj>().def_ro("x", &PointObj::x).def_ro("y", &PointObj::y);
  refl::TypeAttrDef<PointObj>()
      .def(type_attr::kDataToJson.name,
           [](AnyView v) -> Any {
             const PointObj* p = v.as_or_throw<const PointObj*>();
             return String(std::to_string(p->x) + "," + std::to_string(p->y));
           })
      .def(type_attr::kDataFromJson.name, [](AnyView v) -> Any {
        std::string s = v.as_or_throw<String>();
        size_t comma = s.find(',');
        if (comma == std::string::npos) TVM_FFI_THROW(ValueError) << "bad point `" << s << "`";
        return Point(std::stoll(s.substr(0, comma)), std::stoll(s.substr(comma + 1)));
      });
  refl::ObjectDef<BoxObj>().def_rw("v", &BoxObj::v);
  refl::ObjectDef<NoCreatorObj>().def_ro("v", &NoCreatorObj::v);
  refl::ObjectDef<RevPairObj>().def_ro("a", &RevPairObj::a).def_ro("b", &RevPairObj::b);
  refl::TypeAttrDef<RevPairObj>().native_fn_attr<&RevPairVisit>(type_attr::kStructuralVisit);
}

}  // namespace st

#endif  // ANYFFI_TESTS_STRUCTURAL_TYPES_H_
