/*
 * Reflection conformance: the type table the library registers itself (ffi.EnumState ...
 * ffi.StructuralKey at 128-137, ffi.Module, ffi.VisitInterrupt, ffi.BigInt), the types and
 * functions the official libtvm_ffi_testing.so registers when loaded against the library, and
 * the reflection / dataclass built-ins (ffi._RegisterFFIInit and the generated __ffi_init__,
 * ffi.MakeObjectFromPackedArgs, ffi.MakeFieldGetter/Setter, ffi._PyClassRegisterTypeAttrColumns,
 * ffi.ReprPrint, ffi.DeepCopy, ffi.Recursive*, ffi.FunctionFromExternC, AccessPath methods).
 *
 * Compiled against the OFFICIAL headers; the same binary runs on the official library and on
 * ours (tests/reflection/run.sh LIBDIR). Expected tables: expected_types.h (generated from the
 * spec's dump of the official build). Tests of inputs on which the official library exits the
 * process run on ours only.
 */
#include <dlfcn.h>
#include <stdlib.h>

#include "expected_types.h"
#include "tffi_test.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static int load_testing_library(void) {
  static void* handle = NULL;
  const char* path = getenv("TVM_FFI_TESTING_LIB");
  if (handle) return 1;
  if (!path || !*path) return 0;
  handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    fprintf(stderr, "dlopen(%s): %s\n", path, dlerror());
    return 0;
  }
  return 1;
}

#define REQUIRE_TESTING_LIB()                                                   \
  do {                                                                          \
    if (!load_testing_library()) {                                              \
      tffi_fail(__FILE__, __LINE__, "cannot load TVM_FFI_TESTING_LIB");         \
      return;                                                                   \
    }                                                                           \
  } while (0)

/* Whether the library under test is anyffi (it registers anyffi.testing.*). */
static int is_anyffi(void) {
  void* f = tffi_get_global("anyffi.testing.nop");
  if (f) TVMFFIObjectDecRef(f);
  return f != NULL;
}

static int32_t key_index(const char* key) {
  TVMFFIByteArray ba = tffi_ba(key);
  int32_t ti = -1;
  if (TVMFFITypeKeyToIndex(&ba, &ti) != 0) {
    tffi_clear_error();
    return -1;
  }
  return ti;
}

static int ba_eq(TVMFFIByteArray a, const char* s) {
  return a.size == strlen(s) && (a.size == 0 || memcmp(a.data, s, a.size) == 0);
}

/* A field of `ti` or of one of its ancestors, by name. */
static const TVMFFIFieldInfo* find_field(int32_t ti, const char* name) {
  const TVMFFITypeInfo* info = TVMFFIGetTypeInfo(ti);
  int d, i;
  for (d = info->type_depth; d >= 0; --d) {
    const TVMFFITypeInfo* t = d == info->type_depth ? info : info->type_ancestors[d];
    for (i = 0; i < t->num_fields; ++i) {
      if (ba_eq(t->fields[i].name, name)) return &t->fields[i];
    }
  }
  return NULL;
}

/* Reads field `name` of `obj` through its getter into *out (owned). */
static int get_field(void* obj, const char* name, TVMFFIAny* out) {
  const TVMFFIFieldInfo* f = find_field(tffi_type_index(obj), name);
  *out = tffi_none();
  if (!f) return -1;
  return f->getter((char*)obj + f->offset, out);
}

static int64_t field_int(void* obj, const char* name) {
  TVMFFIAny v;
  if (get_field(obj, name, &v) != 0 || (v.type_index != kTVMFFIInt && v.type_index != kTVMFFIBool)) {
    tffi_clear_error();
    tffi_any_release(&v);
    return -999999;
  }
  return v.v_int64;
}

/* Borrowed attribute value of type `ti` in column `attr` (None when absent). */
static TVMFFIAny attr_of(const char* attr, int32_t ti) {
  TVMFFIByteArray name = tffi_ba(attr);
  const TVMFFITypeAttrColumn* col = TVMFFIGetTypeAttrColumn(&name);
  int32_t off;
  if (!col) return tffi_none();
  off = ti - col->begin_index;
  if (off < 0 || off >= col->size) return tffi_none();
  return col->data[off];
}

/* Calls global `name`; returns rc (the function reference is released). */
static int call_global(const char* name, TVMFFIAny* args, int32_t n, TVMFFIAny* out) {
  void* f = tffi_get_global(name);
  int rc;
  *out = tffi_none();
  if (!f) {
    tffi_fail(__FILE__, __LINE__, "global %s is not registered", name);
    return -1;
  }
  rc = tffi_call(f, args, n, out);
  TVMFFIObjectDecRef(f);
  return rc;
}

static TVMFFIAny kwargs_marker(void) {
  TVMFFIAny out;
  if (call_global("ffi.GetKwargsObject", NULL, 0, &out) != 0) tffi_clear_error();
  return out; /* a static singleton; releasing it is harmless */
}

/* Calls the __ffi_init__ attribute of type `key`. */
static int call_init(const char* key, TVMFFIAny* args, int32_t n, TVMFFIAny* out) {
  int32_t ti = key_index(key);
  TVMFFIAny init = attr_of("__ffi_init__", ti);
  *out = tffi_none();
  if (init.type_index != kTVMFFIFunction) {
    tffi_fail(__FILE__, __LINE__, "%s has no __ffi_init__", key);
    return -1;
  }
  return tffi_call(init.v_obj, args, n, out);
}

/* rc must be -1 with a raised error (any kind) whose message contains `msg`; consumed. */
#define CHECK_RAISES_MSG(expr, msg) check_raises_msg(__FILE__, __LINE__, #expr, (expr), (msg))
static void check_raises_msg(const char* file, int line, const char* what, int rc,
                             const char* msg) {
  void* err = NULL;
  if (rc != -1) {
    tffi_fail(file, line, "%s returned %d, expected -1", what, rc);
    tffi_clear_error();
    return;
  }
  TVMFFIErrorMoveFromRaised(&err);
  if (!err) {
    tffi_fail(file, line, "%s raised no error", what);
    return;
  }
  {
    const TVMFFIErrorCell* cell = (const TVMFFIErrorCell*)tffi_cell(err);
    size_t n = strlen(msg), i;
    int found = 0;
    for (i = 0; i + n <= cell->message.size; ++i) {
      if (memcmp(cell->message.data + i, msg, n) == 0) found = 1;
    }
    if (found) {
      tffi_pass();
    } else {
      tffi_fail(file, line, "%s: message \"%.*s\" lacks \"%s\"", what, (int)cell->message.size,
                cell->message.data, msg);
    }
  }
  TVMFFIObjectDecRef(err);
}

/* The repr of a value through ffi.ReprPrint; checks it equals `expected`. */
#define CHECK_REPR(value, expected) check_repr(__FILE__, __LINE__, (value), (expected))
static void check_repr(const char* file, int line, TVMFFIAny value, const char* expected) {
  TVMFFIAny out;
  TVMFFIByteArray s;
  if (call_global("ffi.ReprPrint", &value, 1, &out) != 0) {
    tffi_clear_error();
    tffi_fail(file, line, "ffi.ReprPrint failed (expected %s)", expected);
    return;
  }
  if (!tffi_any_string_view(&out, &s, 0)) {
    tffi_fail(file, line, "ffi.ReprPrint did not return a str");
  } else {
    tffi_check_bytes(file, line, "repr", s.data, s.size, expected, strlen(expected));
  }
  tffi_any_release(&out);
}

/* ------------------------------------------------------------------------ */
/* The type table against the official dump                                 */
/* ------------------------------------------------------------------------ */

static void check_type(const exp_type* e) {
  const TVMFFITypeInfo* info;
  char anc[256] = "";
  size_t k, nf = 0, nm = 0;
  int i;
  REQUIRE_EQ(key_index(e->key), e->index);
  info = TVMFFIGetTypeInfo(e->index);
  REQUIRE(info != NULL);
  CHECK_BA(info->type_key, e->key);
  CHECK_EQ(info->type_depth, e->depth);
  for (i = 0; i < info->type_depth; ++i) {
    snprintf(anc + strlen(anc), sizeof(anc) - strlen(anc), "%s%d", i ? "," : "",
             info->type_ancestors[i]->type_index);
  }
  CHECK_BYTES(anc, strlen(anc), e->ancestors);
  if (e->has_metadata) {
    if (info->metadata == NULL) {
      tffi_fail(__FILE__, __LINE__, "%s: metadata missing", e->key);
    } else {
      CHECK_EQ(info->metadata->total_size, e->total_size);
      CHECK_EQ(info->metadata->structural_eq_hash_kind, e->seq_hash_kind);
      CHECK_EQ(info->metadata->creator != NULL, e->has_creator);
    }
  } else if (info->metadata != NULL) {
    tffi_fail(__FILE__, __LINE__, "%s: unexpected metadata", e->key);
  }
  for (k = 0; k < NELEM(kExpFields); ++k) {
    const exp_field* f = &kExpFields[k];
    const TVMFFIFieldInfo* got = NULL;
    if (strcmp(f->type_key, e->key) != 0) continue;
    ++nf;
    for (i = 0; i < info->num_fields; ++i) {
      if (ba_eq(info->fields[i].name, f->name)) got = &info->fields[i];
    }
    if (!got) {
      tffi_fail(__FILE__, __LINE__, "%s: field %s missing", e->key, f->name);
      continue;
    }
    CHECK_EQ(got->offset, f->offset);
    CHECK_EQ(got->size, f->size);
    CHECK_EQ_HEX(got->flags, f->flags);
    CHECK_EQ(got->field_static_type_index, f->static_type_index);
    CHECK(got->getter != NULL);
    CHECK(got->setter != NULL);
  }
  CHECK_EQ(info->num_fields, (int)nf);
  for (k = 0; k < NELEM(kExpMethods); ++k) {
    const exp_method* m = &kExpMethods[k];
    const TVMFFIMethodInfo* got = NULL;
    if (strcmp(m->type_key, e->key) != 0) continue;
    ++nm;
    for (i = 0; i < info->num_methods; ++i) {
      if (ba_eq(info->methods[i].name, m->name)) got = &info->methods[i];
    }
    if (!got) {
      tffi_fail(__FILE__, __LINE__, "%s: method %s missing", e->key, m->name);
      continue;
    }
    CHECK_EQ_HEX(got->flags, m->flags);
    CHECK_EQ(got->method.type_index, kTVMFFIFunction);
  }
  CHECK_EQ(info->num_methods, (int)nm);
}

TEST(library_types_match_official_table) {
  /* Everything below 138 is registered by the library itself, before any foreign library. */
  size_t i;
  for (i = 0; i < NELEM(kExpTypes); ++i) {
    if (kExpTypes[i].index < 138) check_type(&kExpTypes[i]);
  }
}

TEST(library_type_attributes) {
  static const struct {
    const char* key;
    const char* attr;
    int present;
  } cases[] = {
      {"ffi.EnumState", "__ffi_init__", 1},        {"ffi.EnumState", "__ffi_new__", 1},
      {"ffi.EnumState", "__ffi_shallow_copy__", 1}, {"ffi.Enum", "__ffi_init__", 0},
      {"ffi.Enum", "__ffi_new__", 1},              {"ffi.IntEnum", "__ffi_convert__", 1},
      {"ffi.StrEnum", "__ffi_convert__", 1},       {"ffi.reflection.AccessStep", "__ffi_repr__", 1},
      {"ffi.reflection.AccessPath", "__ffi_repr__", 1},
      {"ffi.reflection.AccessPath", "__ffi_init__", 0},
      {"ffi.StructuralVisitor", "__ffi_new__", 0}, {"ffi.VisitErrorContext", "__ffi_new__", 1},
      {"ffi.StructuralKey", "__ffi_init__", 1},    {"ffi.StructuralKey", "__any_hash__", 1},
      {"ffi.StructuralKey", "__any_equal__", 1},   {"ffi.VisitInterrupt", "__ffi_new__", 1},
      {"ffi.VisitInterrupt", "__ffi_init__", 0},   {"ffi.BigInt", "__ffi_hash__", 1},
      {"ffi.BigInt", "__ffi_eq__", 1},             {"ffi.BigInt", "__ffi_compare__", 1},
  };
  static const struct {
    const char* key;
    int is_final;
  } finals[] = {
      {"ffi.Module", 1},          {"ffi.VisitInterrupt", 1},   {"ffi.BigInt", 1},
      {"ffi.EnumState", 1},       {"ffi.Enum", 0},             {"ffi.IntEnum", 0},
      {"ffi.StrEnum", 0},         {"ffi.reflection.AccessStep", 1},
      {"ffi.reflection.AccessPath", 1},                        {"ffi.StructuralVisitor", 0},
      {"ffi.VisitErrorContext", 1}, {"ffi.StructuralMutator", 0}, {"ffi.StructuralKey", 1},
  };
  size_t i;
  for (i = 0; i < NELEM(cases); ++i) {
    TVMFFIAny v = attr_of(cases[i].attr, key_index(cases[i].key));
    if ((v.type_index != kTVMFFINone) != cases[i].present) {
      tffi_fail(__FILE__, __LINE__, "%s.%s: expected %s", cases[i].key, cases[i].attr,
                cases[i].present ? "present" : "absent");
    } else {
      tffi_pass();
    }
  }
  for (i = 0; i < NELEM(finals); ++i) {
    TVMFFIAny v = attr_of("__ffi_type_final__", key_index(finals[i].key));
    CHECK_EQ(v.type_index, kTVMFFIBool);
    CHECK_EQ(v.v_int64, finals[i].is_final);
  }
}

TEST(testing_library_types_match_official_table) {
  size_t i;
  REQUIRE_TESTING_LIB();
  for (i = 0; i < NELEM(kExpTypes); ++i) check_type(&kExpTypes[i]);
}

TEST(testing_library_functions_registered) {
  size_t i;
  REQUIRE_TESTING_LIB();
  for (i = 0; i < NELEM(kExpTestingFunctions); ++i) {
    void* f = tffi_get_global(kExpTestingFunctions[i]);
    if (!f) {
      tffi_fail(__FILE__, __LINE__, "%s is not registered", kExpTestingFunctions[i]);
      continue;
    }
    tffi_pass();
    TVMFFIObjectDecRef(f);
  }
  CHECK_EQ(NELEM(kExpTestingFunctions), 59);
}

TEST(testing_library_types_get_ffi_init) {
  /* The testing library calls ffi._RegisterFFIInit for types without an explicit init. */
  static const char* with_init[] = {
      "testing.TestObjectBase",   "testing.TestObjectDerived",      "testing.TestCxxClassBase",
      "testing.TestCxxKwOnly",    "testing.TestCxxAutoInit",        "testing.TestCxxAutoInitChild",
      "testing.TestIntPair",      "testing.TestCxxAutoInitAllInitOff", "testing.TestDeepCopyEdges"};
  static const char* without_init[] = {"testing.TestCxxNoAutoInit", "testing.TestVisitHook",
                                       "testing.TestCxxIntEnum", "testing.SchemaAllTypes"};
  size_t i;
  REQUIRE_TESTING_LIB();
  for (i = 0; i < NELEM(with_init); ++i) {
    CHECK_EQ(attr_of("__ffi_init__", key_index(with_init[i])).type_index, kTVMFFIFunction);
  }
  for (i = 0; i < NELEM(without_init); ++i) {
    CHECK_EQ(attr_of("__ffi_init__", key_index(without_init[i])).type_index, kTVMFFINone);
  }
}

/* ------------------------------------------------------------------------ */
/* ffi.MakeObjectFromPackedArgs                                             */
/* ------------------------------------------------------------------------ */

TEST(make_object_from_packed_args_sets_fields_and_defaults) {
  TVMFFIAny args[5], out, v;
  REQUIRE_TESTING_LIB();
  args[0] = tffi_raw_str("testing.TestObjectBase");
  args[1] = tffi_raw_str("v_i64");
  args[2] = tffi_int(5);
  args[3] = tffi_raw_str("v_str");
  args[4] = tffi_raw_str("a longer string value");
  REQUIRE_OK(call_global("ffi.MakeObjectFromPackedArgs", args, 5, &out));
  REQUIRE_EQ(out.type_index, key_index("testing.TestObjectBase"));
  CHECK_EQ(field_int(out.v_obj, "v_i64"), 5);
  REQUIRE_OK(get_field(out.v_obj, "v_f64", &v));
  CHECK_EQ(v.type_index, kTVMFFIFloat);
  CHECK(v.v_float64 == 10.0); /* the C++ default */
  REQUIRE_OK(get_field(out.v_obj, "v_str", &v));
  CHECK_ANY_STR(&v, "a longer string value");
  tffi_any_release(&v);
  CHECK_EQ(tffi_strong(out.v_obj), 1);
  tffi_any_release(&out);

  /* By type index, derived type with inherited fields. */
  {
    TVMFFIAny a[7], arr_args[2], arr;
    arr_args[0] = tffi_int(1);
    arr_args[1] = tffi_int(2);
    REQUIRE_OK(call_global("ffi.Array", arr_args, 2, &arr));
    a[0] = tffi_int(key_index("testing.TestObjectDerived"));
    a[1] = tffi_raw_str("v_array");
    a[2] = arr;
    a[3] = tffi_raw_str("v_map");
    REQUIRE_OK(call_global("ffi.Map", NULL, 0, &a[4]));
    a[5] = tffi_raw_str("v_i64");
    a[6] = tffi_int(-3);
    REQUIRE_OK(call_global("ffi.MakeObjectFromPackedArgs", a, 7, &out));
    CHECK_EQ(out.type_index, key_index("testing.TestObjectDerived"));
    CHECK_EQ(field_int(out.v_obj, "v_i64"), -3);
    REQUIRE_OK(get_field(out.v_obj, "v_array", &v));
    CHECK_PTR_EQ(v.v_obj, arr.v_obj);
    tffi_any_release(&v);
    CHECK_EQ(tffi_strong(arr.v_obj), 2);
    tffi_any_release(&out);
    CHECK_EQ(tffi_strong(arr.v_obj), 1);
    tffi_any_release(&arr);
    tffi_any_release(&a[4]);
  }
}

TEST(make_object_from_packed_args_errors) {
  TVMFFIAny args[3], out;
  REQUIRE_TESTING_LIB();
  args[0] = tffi_raw_str("testing.TestObjectDerived");
  args[1] = tffi_raw_str("v_i64");
  args[2] = tffi_int(1);
  CHECK_RAISES(call_global("ffi.MakeObjectFromPackedArgs", args, 3, &out), "TypeError",
               "Required field `v_map` not set in type `testing.TestObjectDerived`");
  args[0] = tffi_raw_str("testing.TestObjectBase");
  args[1] = tffi_raw_str("no_such_field");
  CHECK_RAISES(call_global("ffi.MakeObjectFromPackedArgs", args, 3, &out), "TypeError",
               "Type `testing.TestObjectBase` does not have field `no_such_field`");
  args[1] = tffi_raw_str("v_i64");
  args[2] = tffi_raw_str("not an int");
  CHECK_RAISES(call_global("ffi.MakeObjectFromPackedArgs", args, 3, &out), "TypeError",
               "Cannot convert from type");
  args[0] = tffi_raw_str("no.such.Type");
  args[2] = tffi_int(1);
  CHECK_RAISES_MSG(call_global("ffi.MakeObjectFromPackedArgs", args, 3, &out),
                   "Cannot find type `no.such.Type`");
  /* A type without a creator or __ffi_new__. */
  args[0] = tffi_raw_str("ffi.StructuralVisitor");
  CHECK_RAISES(call_global("ffi.MakeObjectFromPackedArgs", args, 1, &out), "RuntimeError",
               "does not support reflection creation");
  CHECK_NO_PENDING_ERROR();
}

TEST(make_object_from_packed_args_bad_input_anyffi) {
  /* The official library ICHECK-fails or exits on these; ours reports typed errors. */
  TVMFFIAny args[3], out;
  if (!is_anyffi()) SKIP("the official library aborts on these inputs");
  CHECK_RAISES(call_global("ffi.MakeObjectFromPackedArgs", NULL, 0, &out), "TypeError", NULL);
  args[0] = tffi_raw_str("ffi.VisitInterrupt");
  args[1] = tffi_raw_str("value");
  CHECK_RAISES(call_global("ffi.MakeObjectFromPackedArgs", args, 2, &out), "TypeError",
               "name/value pairs");
  args[0] = tffi_int(99999);
  CHECK_RAISES(call_global("ffi.MakeObjectFromPackedArgs", args, 1, &out), "ValueError",
               "unknown type index 99999");
  args[0] = tffi_raw_str("ffi.VisitInterrupt");
  args[1] = tffi_int(3);
  args[2] = tffi_int(4);
  CHECK_RAISES(call_global("ffi.MakeObjectFromPackedArgs", args, 3, &out), "TypeError",
               "field name");
}

/* ------------------------------------------------------------------------ */
/* __ffi_init__ generated by ffi._RegisterFFIInit (KWARGS protocol)           */
/* ------------------------------------------------------------------------ */

TEST(generated_init_positional_and_kwargs) {
  /* testing.TestCxxAutoInit: a (required), b (init off, default 42), c (kw-only), d (default 99). */
  TVMFFIAny a[8], out;
  REQUIRE_TESTING_LIB();
  a[0] = tffi_int(1);
  a[1] = kwargs_marker();
  a[2] = tffi_raw_str("c");
  a[3] = tffi_int(3);
  REQUIRE_OK(call_init("testing.TestCxxAutoInit", a, 4, &out));
  CHECK_EQ(field_int(out.v_obj, "a"), 1);
  CHECK_EQ(field_int(out.v_obj, "b"), 42);
  CHECK_EQ(field_int(out.v_obj, "c"), 3);
  CHECK_EQ(field_int(out.v_obj, "d"), 99);
  tffi_any_release(&out);
  /* Positional a, d; keywords in any order. */
  a[0] = tffi_int(7);
  a[1] = tffi_int(8);
  a[2] = kwargs_marker();
  a[3] = tffi_raw_str("c");
  a[4] = tffi_int(9);
  REQUIRE_OK(call_init("testing.TestCxxAutoInit", a, 5, &out));
  CHECK_EQ(field_int(out.v_obj, "a"), 7);
  CHECK_EQ(field_int(out.v_obj, "d"), 8);
  CHECK_EQ(field_int(out.v_obj, "c"), 9);
  tffi_any_release(&out);
  /* All by keyword. */
  a[0] = kwargs_marker();
  a[1] = tffi_raw_str("d");
  a[2] = tffi_int(4);
  a[3] = tffi_raw_str("c");
  a[4] = tffi_int(5);
  a[5] = tffi_raw_str("a");
  a[6] = tffi_int(6);
  REQUIRE_OK(call_init("testing.TestCxxAutoInit", a, 7, &out));
  CHECK_EQ(field_int(out.v_obj, "a"), 6);
  CHECK_EQ(field_int(out.v_obj, "c"), 5);
  CHECK_EQ(field_int(out.v_obj, "d"), 4);
  tffi_any_release(&out);
  /* Inherited fields first: parent_required, child_required, then parent_default. */
  a[0] = tffi_int(1);
  a[1] = tffi_int(2);
  a[2] = tffi_int(3);
  a[3] = kwargs_marker();
  a[4] = tffi_raw_str("child_kw_only");
  a[5] = tffi_int(4);
  REQUIRE_OK(call_init("testing.TestCxxAutoInitChild", a, 6, &out));
  CHECK_EQ(field_int(out.v_obj, "parent_required"), 1);
  CHECK_EQ(field_int(out.v_obj, "child_required"), 2);
  CHECK_EQ(field_int(out.v_obj, "parent_default"), 3);
  CHECK_EQ(field_int(out.v_obj, "child_kw_only"), 4);
  tffi_any_release(&out);
  /* Positional only (no KWARGS marker). */
  a[0] = tffi_int(5);
  a[1] = tffi_int(6);
  REQUIRE_OK(call_init("testing.TestCxxAutoInitSimple", a, 2, &out));
  CHECK_EQ(field_int(out.v_obj, "x"), 5);
  CHECK_EQ(field_int(out.v_obj, "y"), 6);
  tffi_any_release(&out);
}

TEST(generated_init_errors) {
  TVMFFIAny a[8], out;
  const char* k = "testing.TestCxxAutoInit";
  REQUIRE_TESTING_LIB();
  CHECK_RAISES(call_init(k, a, 0, &out), "TypeError",
               "testing.TestCxxAutoInit.__ffi_init__() missing required argument: 'a'");
  a[0] = tffi_int(1);
  CHECK_RAISES(call_init(k, a, 1, &out), "TypeError",
               "missing required keyword-only argument: 'c'");
  a[1] = tffi_int(2);
  a[2] = tffi_int(3);
  CHECK_RAISES(call_init(k, a, 3, &out), "TypeError",
               "takes at most 2 positional argument(s), but 3 were given");
  a[1] = kwargs_marker();
  a[2] = tffi_raw_str("c");
  a[3] = tffi_int(3);
  a[4] = tffi_raw_str("zz");
  a[5] = tffi_int(0);
  CHECK_RAISES(call_init(k, a, 6, &out), "TypeError", "got an unexpected keyword argument 'zz'");
  a[4] = tffi_raw_str("a");
  CHECK_RAISES(call_init(k, a, 6, &out), "TypeError", "got multiple values for argument 'a'");
  CHECK_RAISES(call_init(k, a, 3, &out), "TypeError", "even number of key-value arguments");
  a[4] = tffi_raw_str("b"); /* init=False fields are not keywords */
  CHECK_RAISES(call_init(k, a, 6, &out), "TypeError", "unexpected keyword argument 'b'");
  a[0] = tffi_raw_str("x");
  CHECK_RAISES(call_init(k, a, 4, &out), "TypeError",
               "testing.TestCxxAutoInit.__ffi_init__() field 'a'");
  CHECK_NO_PENDING_ERROR();
}

TEST(register_ffi_init_on_new_type) {
  /* testing.TestCxxNoAutoInit opted out of the generated init; registering one afterwards
   * gives it the same positional/KWARGS constructor. */
  TVMFFIAny arg, out;
  REQUIRE_TESTING_LIB();
  arg = tffi_int(key_index("testing.TestCxxNoAutoInit"));
  REQUIRE_OK(call_global("ffi._RegisterFFIInit", &arg, 1, &out));
  REQUIRE_EQ(attr_of("__ffi_init__", (int32_t)arg.v_int64).type_index, kTVMFFIFunction);
  {
    TVMFFIAny a[2] = {tffi_int(4), tffi_int(5)};
    REQUIRE_OK(call_init("testing.TestCxxNoAutoInit", a, 2, &out));
    CHECK_EQ(field_int(out.v_obj, "x"), 4);
    CHECK_EQ(field_int(out.v_obj, "y"), 5);
    tffi_any_release(&out);
  }
  /* A second registration of the attribute is an error, not a crash. */
  CHECK_RAISES_MSG(call_global("ffi._RegisterFFIInit", &arg, 1, &out), "__ffi_init__");
}

/* ------------------------------------------------------------------------ */
/* Python-defined classes: MakeFieldGetter/Setter + _PyClassRegisterTypeAttrColumns */
/* ------------------------------------------------------------------------ */

static int g_convert_calls;
/* Python's converter stand-in: copies the value; 666 raises ValueError. */
static int test_convert(void* converter, const TVMFFIAny* in, TVMFFIAny* out) {
  (void)converter;
  ++g_convert_calls;
  if (in->type_index == kTVMFFIInt && in->v_int64 == 666) {
    TVMFFIErrorSetRaisedFromCStr("ValueError", "666 is not allowed");
    return -1;
  }
  return TVMFFIAnyViewToOwnedAny(in, out);
}

static int32_t g_pylike = -1;

/* Registers reflect_test.PyLike {x: int = 7 @24, s: Any @32, o: Object @48}, total 56. */
static int32_t register_pylike(void) {
  static const struct {
    const char* name;
    int32_t sti;
    int64_t offset, size;
  } fields[] = {{"x", kTVMFFIInt, 24, 8}, {"s", -1, 32, 16}, {"o", kTVMFFIObject, 48, 8}};
  TVMFFIByteArray key = tffi_ba("reflect_test.PyLike");
  size_t i;
  if (g_pylike >= 0) return g_pylike;
  g_pylike = TVMFFITypeGetOrAllocIndex(&key, -1, 1, 0, 1, kTVMFFIObject);
  for (i = 0; i < NELEM(fields); ++i) {
    TVMFFIAny args[3], getter, setter;
    TVMFFIFieldInfo info;
    args[0] = tffi_int(fields[i].sti);
    if (call_global("ffi.MakeFieldGetter", args, 1, &getter) != 0) return -1;
    args[1] = tffi_int(0);
    args[2] = tffi_int((int64_t)(intptr_t)&test_convert);
    if (call_global("ffi.MakeFieldSetter", args, 3, &setter) != 0) return -1;
    memset(&info, 0, sizeof(info));
    info.name = tffi_ba(fields[i].name);
    info.flags = kTVMFFIFieldFlagBitMaskWritable | kTVMFFIFieldFlagBitSetterIsFunctionObj;
    info.size = fields[i].size;
    info.alignment = 8;
    info.offset = fields[i].offset;
    info.getter = (TVMFFIFieldGetter)(intptr_t)getter.v_int64;
    info.setter = setter.v_obj;
    info.default_value_or_factory = tffi_none();
    if (i == 0) {
      info.flags |= kTVMFFIFieldFlagBitMaskHasDefault;
      info.default_value_or_factory = tffi_int(7);
    }
    info.field_static_type_index = fields[i].sti;
    if (TVMFFITypeRegisterField(g_pylike, &info) != 0) return -1;
    tffi_any_release(&setter); /* the table keeps its own reference */
  }
  {
    TVMFFIAny args[2] = {tffi_int(g_pylike), tffi_int(56)}, out;
    if (call_global("ffi._PyClassRegisterTypeAttrColumns", args, 2, &out) != 0) return -1;
  }
  return g_pylike;
}

TEST(py_class_attr_columns_new_init_copy_and_release) {
  TVMFFIAny a[4], out, copy, v, holder, s;
  int32_t ti = register_pylike();
  REQUIRE(ti >= 128);
  CHECK_EQ(attr_of("__ffi_new__", ti).type_index, kTVMFFIFunction);
  CHECK_EQ(attr_of("__ffi_shallow_copy__", ti).type_index, kTVMFFIFunction);
  REQUIRE_OK(call_global("ffi.Array", NULL, 0, &holder));
  s = tffi_make_string("a string longer than seven bytes");
  a[0] = kwargs_marker();
  a[1] = tffi_raw_str("o");
  a[2] = holder;
  a[3] = tffi_raw_str("s");
  {
    TVMFFIAny kw[6];
    kw[0] = a[0];
    kw[1] = a[1];
    kw[2] = a[2];
    kw[3] = a[3];
    kw[4] = s;
    g_convert_calls = 0;
    REQUIRE_OK(call_init("reflect_test.PyLike", kw, 5, &out));
  }
  CHECK(g_convert_calls >= 2);
  CHECK_EQ(out.type_index, ti);
  CHECK_EQ(field_int(out.v_obj, "x"), 7); /* default, through the converting setter */
  REQUIRE_OK(get_field(out.v_obj, "s", &v));
  CHECK_ANY_STR(&v, "a string longer than seven bytes");
  tffi_any_release(&v);
  REQUIRE_OK(get_field(out.v_obj, "o", &v));
  CHECK_PTR_EQ(v.v_obj, holder.v_obj);
  tffi_any_release(&v);
  CHECK_EQ(tffi_strong(holder.v_obj), 2);
  /* Shallow copy shares the object field and the string. */
  REQUIRE_OK(tffi_call(attr_of("__ffi_shallow_copy__", ti).v_obj, &out, 1, &copy));
  CHECK_EQ(copy.type_index, ti);
  CHECK(copy.v_obj != out.v_obj);
  CHECK_EQ(tffi_strong(holder.v_obj), 3);
  CHECK_EQ(field_int(copy.v_obj, "x"), 7);
  tffi_any_release(&copy);
  CHECK_EQ(tffi_strong(holder.v_obj), 2);
  tffi_any_release(&out); /* the deleter releases the fields */
  CHECK_EQ(tffi_strong(holder.v_obj), 1);
  /* __ffi_new__: zero fields (None / NULL / 0). */
  REQUIRE_OK(tffi_call(attr_of("__ffi_new__", ti).v_obj, NULL, 0, &out));
  CHECK_EQ(field_int(out.v_obj, "x"), 0);
  REQUIRE_OK(get_field(out.v_obj, "o", &v));
  CHECK_EQ(v.type_index, kTVMFFINone);
  tffi_any_release(&out);
  /* A converter error keeps its kind, with the field named. Positional order puts the
   * required fields (s, o) before x, which has a default. */
  a[0] = tffi_int(666);
  CHECK_RAISES(call_init("reflect_test.PyLike", a, 1, &out), "ValueError", "field 's'");
  a[0] = kwargs_marker();
  a[1] = tffi_raw_str("x");
  a[2] = tffi_int(666);
  CHECK_RAISES(call_init("reflect_test.PyLike", a, 3, &out), "ValueError",
               "reflect_test.PyLike.__ffi_init__() field 'x':\n  666 is not allowed");
  tffi_any_release(&holder);
  tffi_any_release(&s);
}

TEST(make_field_getter_and_setter_kinds) {
  static const int32_t ok[] = {kTVMFFIInt, kTVMFFIFloat, kTVMFFIBool, kTVMFFIOpaquePtr,
                               kTVMFFIDataType, kTVMFFIDevice, -1, kTVMFFINone, kTVMFFIObject,
                               kTVMFFIArray, 300};
  TVMFFIAny arg, out;
  size_t i;
  for (i = 0; i < NELEM(ok); ++i) {
    arg = tffi_int(ok[i]);
    CHECK_OK(call_global("ffi.MakeFieldGetter", &arg, 1, &out));
    CHECK_EQ(out.type_index, kTVMFFIInt);
    CHECK(out.v_int64 != 0);
  }
  arg = tffi_int(kTVMFFIRawStr);
  CHECK_RAISES(call_global("ffi.MakeFieldGetter", &arg, 1, &out), "ValueError",
               "Unsupported field type index for getter: 8");
  {
    /* Setter writes through the converter, by kind. */
    TVMFFIAny args[3], setter, call[2];
    double d = 0;
    args[0] = tffi_int(kTVMFFIFloat);
    args[1] = tffi_int(0);
    args[2] = tffi_int((int64_t)(intptr_t)&test_convert);
    REQUIRE_OK(call_global("ffi.MakeFieldSetter", args, 3, &setter));
    call[0] = tffi_opaque_ptr(&d);
    call[1] = tffi_float(2.5);
    REQUIRE_OK(tffi_call(setter.v_obj, call, 2, &out));
    CHECK(d == 2.5);
    call[1] = tffi_int(3); /* an int converts to a float field */
    REQUIRE_OK(tffi_call(setter.v_obj, call, 2, &out));
    CHECK(d == 3.0);
    call[1] = tffi_raw_str("nope");
    CHECK_RAISES(tffi_call(setter.v_obj, call, 2, &out), "TypeError", NULL);
    tffi_any_release(&setter);
  }
}

/* ------------------------------------------------------------------------ */
/* ffi.ReprPrint                                                            */
/* ------------------------------------------------------------------------ */

TEST(repr_print_scalars_and_strings) {
  TVMFFIAny v;
  CHECK_REPR(tffi_none(), "None");
  CHECK_REPR(tffi_bool(1), "True");
  CHECK_REPR(tffi_bool(0), "False");
  CHECK_REPR(tffi_int(-42), "-42");
  CHECK_REPR(tffi_float(1.5), "1.5");
  CHECK_REPR(tffi_float(1e20), "1e+20");
  CHECK_REPR(tffi_float(0.1), "0.1");
  CHECK_REPR(tffi_float(3.0), "3");
  CHECK_REPR(tffi_float(1.0 / 3.0), "0.333333");
  v = tffi_none();
  v.type_index = kTVMFFIDataType;
  v.v_dtype.code = kDLFloat;
  v.v_dtype.bits = 32;
  v.v_dtype.lanes = 1;
  CHECK_REPR(v, "float32");
  v = tffi_none();
  v.type_index = kTVMFFIDevice;
  v.v_device.device_type = kDLCUDA;
  v.v_device.device_id = 1;
  CHECK_REPR(v, "cuda:1");
  CHECK_REPR(tffi_raw_str("ab"), "\"ab\"");
  CHECK_REPR(tffi_raw_str("quote\" back\\ nl\n tab\t"), "\"quote\\\" back\\\\ nl\\n tab\\t\"");
  CHECK_REPR(tffi_raw_str("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \x01"),
             "\"caf\\u00e9 \\u20ac \\U0001f600 \\x01\"");
  {
    TVMFFIByteArray b = {"a\0\"\xff", 4};
    TVMFFIAny bytes;
    REQUIRE_OK(TVMFFIBytesFromByteArray(&b, &bytes));
    CHECK_REPR(bytes, "b\"a\\x00\\x22\\xff\"");
    tffi_any_release(&bytes);
  }
  CHECK_REPR(tffi_opaque_ptr(NULL), "void*");
}

TEST(repr_print_containers_and_objects) {
  TVMFFIAny a[4], arr, one, lst, map, shape, missing, kw, big;
  a[0] = tffi_int(1);
  a[1] = tffi_raw_str("x");
  a[2] = tffi_none();
  REQUIRE_OK(call_global("ffi.Array", a, 3, &arr));
  CHECK_REPR(arr, "(1, \"x\", None)");
  REQUIRE_OK(call_global("ffi.Array", a, 1, &one));
  CHECK_REPR(one, "(1,)");
  a[0] = arr;
  a[1] = tffi_float(2.5);
  REQUIRE_OK(call_global("ffi.List", a, 2, &lst));
  CHECK_REPR(lst, "[(1, \"x\", None), 2.5]");
  a[0] = tffi_raw_str("k");
  a[1] = lst;
  a[2] = tffi_int(2);
  a[3] = tffi_bool(0);
  REQUIRE_OK(call_global("ffi.Map", a, 4, &map));
  CHECK_REPR(map, "{\"k\": [(1, \"x\", None), 2.5], 2: False}");
  a[0] = tffi_int(2);
  a[1] = tffi_int(3);
  REQUIRE_OK(call_global("ffi.Shape", a, 2, &shape));
  CHECK_REPR(shape, "Shape(2, 3)");
  REQUIRE_OK(call_global("ffi.GetInvalidObject", NULL, 0, &missing));
  CHECK_REPR(missing, "<MISSING>");
  kw = kwargs_marker();
  CHECK_REPR(kw, "<KWARGS>");
  {
    int64_t words[2] = {0, 1}; /* 2^64 */
    TVMFFIByteArray b = {(const char*)words, sizeof(words)};
    REQUIRE_OK(TVMFFIBigIntFromByteArray(&b, &big));
    CHECK_REPR(big, "18446744073709551616");
    tffi_any_release(&big);
    words[0] = 0;
    words[1] = -1; /* -2^64 */
    REQUIRE_OK(TVMFFIBigIntFromByteArray(&b, &big));
    CHECK_REPR(big, "-18446744073709551616");
    tffi_any_release(&big);
  }
  {
    /* A list that contains itself prints the inner occurrence as "...". */
    TVMFFIAny self_list, args[2];
    REQUIRE_OK(call_global("ffi.List", NULL, 0, &self_list));
    args[0] = self_list;
    args[1] = self_list;
    REQUIRE_OK(call_global("ffi.ListAppend", args, 2, &a[0]));
    CHECK_REPR(self_list, "[...]");
    REQUIRE_OK(call_global("ffi.ListClear", args, 1, &a[0]));
    tffi_any_release(&self_list);
  }
  {
    static float data[6];
    static int64_t dims[2] = {2, 3};
    DLManagedTensor mt;
    void* tensor = NULL;
    memset(&mt, 0, sizeof(mt));
    mt.dl_tensor.data = data;
    mt.dl_tensor.device.device_type = kDLCPU;
    mt.dl_tensor.ndim = 2;
    mt.dl_tensor.dtype.code = kDLFloat;
    mt.dl_tensor.dtype.bits = 32;
    mt.dl_tensor.dtype.lanes = 1;
    mt.dl_tensor.shape = dims;
    REQUIRE_OK(TVMFFITensorFromDLPack(&mt, 0, 0, &tensor));
    CHECK_REPR(tffi_obj_view(tensor), "float32[2, 3]@cpu:0");
    TVMFFIObjectDecRef(tensor);
  }
  tffi_any_release(&arr);
  tffi_any_release(&one);
  tffi_any_release(&lst);
  tffi_any_release(&map);
  tffi_any_release(&shape);
}

TEST(repr_print_reflected_objects) {
  TVMFFIAny a[4], pair, obj;
  REQUIRE_TESTING_LIB();
  a[0] = tffi_int(1);
  a[1] = tffi_int(2);
  REQUIRE_OK(call_init("testing.TestIntPair", a, 2, &pair));
  CHECK_REPR(pair, "testing.TestIntPair(a=1, b=2)");
  a[0] = tffi_raw_str("testing.TestObjectBase");
  a[1] = tffi_raw_str("v_str");
  a[2] = tffi_raw_str("s");
  REQUIRE_OK(call_global("ffi.MakeObjectFromPackedArgs", a, 3, &obj));
  CHECK_REPR(obj, "testing.TestObjectBase(v_i64=10, v_f64=10, v_str=\"s\")");
  {
    void* fn = tffi_get_global("testing.add_one");
    REQUIRE(fn != NULL);
    CHECK_REPR(tffi_obj_view(fn), "ffi.Function");
    TVMFFIObjectDecRef(fn);
  }
  tffi_any_release(&pair);
  tffi_any_release(&obj);
}

/* ------------------------------------------------------------------------ */
/* AccessPath / AccessStep                                                   */
/* ------------------------------------------------------------------------ */

static const TVMFFIMethodInfo* find_method(const char* type_key, const char* name) {
  const TVMFFITypeInfo* info = TVMFFIGetTypeInfo(key_index(type_key));
  int i;
  for (i = 0; i < info->num_methods; ++i) {
    if (ba_eq(info->methods[i].name, name)) return &info->methods[i];
  }
  return NULL;
}

static int call_method(const char* type_key, const char* name, TVMFFIAny* args, int32_t n,
                       TVMFFIAny* out) {
  const TVMFFIMethodInfo* m = find_method(type_key, name);
  *out = tffi_none();
  if (!m) {
    tffi_fail(__FILE__, __LINE__, "%s.%s missing", type_key, name);
    return -1;
  }
  return tffi_call(m->method.v_obj, args, n, out);
}

TEST(access_path_methods_and_repr) {
  const char* P = "ffi.reflection.AccessPath";
  TVMFFIAny root, p1, p2, p3, p4, args[2], out, steps;
  REQUIRE_OK(call_method(P, "_root", NULL, 0, &root));
  CHECK_EQ(root.type_index, key_index(P));
  CHECK_EQ(field_int(root.v_obj, "depth"), 0);
  CHECK_REPR(root, "<root>");
  args[0] = root;
  args[1] = tffi_raw_str("field");
  REQUIRE_OK(call_method(P, "_attr", args, 2, &p1));
  args[0] = p1;
  args[1] = tffi_int(3);
  REQUIRE_OK(call_method(P, "_array_item", args, 2, &p2));
  args[0] = p2;
  args[1] = tffi_raw_str("key");
  REQUIRE_OK(call_method(P, "_map_item", args, 2, &p3));
  CHECK_EQ(field_int(p3.v_obj, "depth"), 3);
  CHECK_REPR(p3, "<root>.field[3][\"key\"]");
  args[0] = p3;
  args[1] = tffi_int(7);
  REQUIRE_OK(call_method(P, "_map_item_missing", args, 2, &p4));
  CHECK_REPR(p4, "<root>.field[3][\"key\"][<missing:7>]");
  tffi_any_release(&p4);
  args[1] = tffi_raw_str("gone");
  REQUIRE_OK(call_method(P, "_attr_missing", args, 2, &p4));
  CHECK_REPR(p4, "<root>.field[3][\"key\"][<missing:\"gone\">]");
  tffi_any_release(&p4);
  args[1] = tffi_int(9);
  REQUIRE_OK(call_method(P, "_array_item_missing", args, 2, &p4));
  CHECK_REPR(p4, "<root>.field[3][\"key\"][<missing:9>]");
  /* Prefix and equality. */
  args[0] = p1;
  args[1] = p3;
  REQUIRE_OK(call_method(P, "_is_prefix_of", args, 2, &out));
  CHECK_EQ(out.type_index, kTVMFFIBool);
  CHECK_EQ(out.v_int64, 1);
  args[0] = p3;
  args[1] = p1;
  REQUIRE_OK(call_method(P, "_is_prefix_of", args, 2, &out));
  CHECK_EQ(out.v_int64, 0);
  {
    /* An equal path built separately. */
    TVMFFIAny q1, q2, q3;
    args[0] = root;
    args[1] = tffi_raw_str("field");
    REQUIRE_OK(call_method(P, "_attr", args, 2, &q1));
    args[0] = q1;
    args[1] = tffi_int(3);
    REQUIRE_OK(call_method(P, "_array_item", args, 2, &q2));
    args[0] = q2;
    args[1] = tffi_raw_str("key");
    REQUIRE_OK(call_method(P, "_map_item", args, 2, &q3));
    args[0] = p3;
    args[1] = q3;
    REQUIRE_OK(call_method(P, "_path_equal", args, 2, &out));
    CHECK_EQ(out.v_int64, 1);
    args[1] = p4;
    REQUIRE_OK(call_method(P, "_path_equal", args, 2, &out));
    CHECK_EQ(out.v_int64, 0);
    tffi_any_release(&q1);
    tffi_any_release(&q2);
    tffi_any_release(&q3);
  }
  args[0] = p3;
  REQUIRE_OK(call_method(P, "_to_steps", args, 1, &steps));
  CHECK_EQ(steps.type_index, kTVMFFIArray);
  CHECK_REPR(steps, "(.field, [3], [\"key\"])");
  {
    /* Steps carry kind and key fields. */
    TVMFFIAny idx[2], step;
    idx[0] = steps;
    idx[1] = tffi_int(1);
    REQUIRE_OK(call_global("ffi.ArrayGetItem", idx, 2, &step));
    CHECK_EQ(field_int(step.v_obj, "kind"), 1);
    CHECK_EQ(field_int(step.v_obj, "key"), 3);
    tffi_any_release(&step);
  }
  /* Type errors name the method. */
  args[0] = p3;
  args[1] = tffi_raw_str("not an int");
  CHECK_RAISES(call_method(P, "_array_item", args, 2, &out), "TypeError", "_array_item");
  tffi_any_release(&steps);
  tffi_any_release(&p4);
  tffi_any_release(&p3);
  tffi_any_release(&p2);
  tffi_any_release(&p1);
  tffi_any_release(&root);
}

TEST(enum_state_init_and_fields) {
  TVMFFIAny st, v;
  const TVMFFIMethodInfo* m = find_method("ffi.EnumState", "__ffi_init__");
  REQUIRE(m != NULL);
  REQUIRE_OK(tffi_call(m->method.v_obj, NULL, 0, &st));
  CHECK_EQ(st.type_index, key_index("ffi.EnumState"));
  REQUIRE_OK(get_field(st.v_obj, "entries", &v));
  CHECK_EQ(v.type_index, kTVMFFIList);
  tffi_any_release(&v);
  REQUIRE_OK(get_field(st.v_obj, "indexes", &v));
  CHECK_EQ(v.type_index, kTVMFFIDict);
  tffi_any_release(&v);
  REQUIRE_OK(get_field(st.v_obj, "attrs", &v));
  CHECK_EQ(v.type_index, kTVMFFIDict);
  tffi_any_release(&v);
  CHECK_REPR(st, "ffi.EnumState(entries=[], indexes={}, attrs={})");
  tffi_any_release(&st);
}

TEST(testing_enums_read_through_library_layouts) {
  /* testing.enum_variant_get builds enum singletons inline in the testing library. */
  TVMFFIAny arg, out, v;
  REQUIRE_TESTING_LIB();
  arg = tffi_raw_str("Alpha");
  if (call_global("testing.enum_variant_get", &arg, 1, &out) != 0) {
    tffi_clear_error();
    SKIP("testing.enum_variant_get has no variant Alpha");
  }
  REQUIRE(out.type_index >= 128);
  REQUIRE_OK(get_field(out.v_obj, "_str_index", &v));
  CHECK_ANY_STR(&v, "Alpha");
  tffi_any_release(&v);
  tffi_any_release(&out);
}

/* ------------------------------------------------------------------------ */
/* DeepCopy, RecursiveEq/Hash/order                                         */
/* ------------------------------------------------------------------------ */

TEST(deep_copy_and_recursive_compare) {
  TVMFFIAny a[7], obj, copy, out, arr, map, h1, h2;
  REQUIRE_TESTING_LIB();
  a[0] = tffi_int(1);
  a[1] = tffi_raw_str("x");
  REQUIRE_OK(call_global("ffi.Array", a, 2, &arr));
  a[0] = tffi_raw_str("k");
  a[1] = arr;
  REQUIRE_OK(call_global("ffi.Map", a, 2, &map));
  a[0] = tffi_raw_str("testing.TestObjectDerived");
  a[1] = tffi_raw_str("v_map");
  a[2] = map;
  a[3] = tffi_raw_str("v_array");
  a[4] = arr;
  REQUIRE_OK(call_global("ffi.MakeObjectFromPackedArgs", a, 5, &obj));
  REQUIRE_OK(call_global("ffi.DeepCopy", &obj, 1, &copy));
  CHECK_EQ(copy.type_index, obj.type_index);
  CHECK(copy.v_obj != obj.v_obj);
  {
    TVMFFIAny v1, v2;
    REQUIRE_OK(get_field(copy.v_obj, "v_array", &v1));
    CHECK(v1.v_obj != arr.v_obj); /* containers are copied */
    REQUIRE_OK(get_field(copy.v_obj, "v_map", &v2));
    CHECK(v2.v_obj != map.v_obj);
    tffi_any_release(&v1);
    tffi_any_release(&v2);
  }
  a[0] = obj;
  a[1] = copy;
  REQUIRE_OK(call_global("ffi.RecursiveEq", a, 2, &out));
  CHECK_EQ(out.type_index, kTVMFFIBool);
  CHECK_EQ(out.v_int64, 1);
  REQUIRE_OK(call_global("ffi.RecursiveHash", &obj, 1, &h1));
  REQUIRE_OK(call_global("ffi.RecursiveHash", &copy, 1, &h2));
  CHECK_EQ(h1.type_index, kTVMFFIInt);
  CHECK_EQ(h1.v_int64, h2.v_int64);
  /* Orders: Int pairs, arrays by element then length. */
  {
    TVMFFIAny p[2], q[2], x, y;
    p[0] = tffi_int(1);
    p[1] = tffi_int(2);
    q[0] = tffi_int(1);
    q[1] = tffi_int(3);
    REQUIRE_OK(call_global("ffi.Array", p, 2, &x));
    REQUIRE_OK(call_global("ffi.Array", q, 2, &y));
    a[0] = x;
    a[1] = y;
    REQUIRE_OK(call_global("ffi.RecursiveLt", a, 2, &out));
    CHECK_EQ(out.v_int64, 1);
    REQUIRE_OK(call_global("ffi.RecursiveGe", a, 2, &out));
    CHECK_EQ(out.v_int64, 0);
    REQUIRE_OK(call_global("ffi.RecursiveEq", a, 2, &out));
    CHECK_EQ(out.v_int64, 0);
    a[1] = tffi_raw_str("str");
    CHECK_RAISES(call_global("ffi.RecursiveLt", a, 2, &out), "TypeError",
                 "Cannot compare values of different types");
    tffi_any_release(&x);
    tffi_any_release(&y);
  }
  /* The same map is equal to itself even under an ordering comparison. */
  a[0] = map;
  a[1] = map;
  REQUIRE_OK(call_global("ffi.RecursiveLe", a, 2, &out));
  CHECK_EQ(out.v_int64, 1);
  tffi_any_release(&obj);
  tffi_any_release(&copy);
  tffi_any_release(&map);
  tffi_any_release(&arr);
}

/* ------------------------------------------------------------------------ */
/* ffi.FunctionFromExternC                                                  */
/* ------------------------------------------------------------------------ */

static int g_deleted;
static int extern_add(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  int64_t base = *(int64_t*)self;
  int32_t i;
  for (i = 0; i < n; ++i) base += args[i].v_int64;
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = base;
  return 0;
}
static void extern_deleter(void* self) {
  (void)self;
  ++g_deleted;
}

TEST(function_from_extern_c) {
  static int64_t base = 100;
  TVMFFIAny args[3], f, out;
  args[0] = tffi_opaque_ptr(&base);
  args[1] = tffi_opaque_ptr((void*)(intptr_t)&extern_add);
  args[2] = tffi_opaque_ptr((void*)(intptr_t)&extern_deleter);
  g_deleted = 0;
  REQUIRE_OK(call_global("ffi.FunctionFromExternC", args, 3, &f));
  REQUIRE_EQ(f.type_index, kTVMFFIFunction);
  args[0] = tffi_int(1);
  args[1] = tffi_int(2);
  REQUIRE_OK(tffi_call(f.v_obj, args, 2, &out));
  CHECK_EQ(out.v_int64, 103);
  CHECK_EQ(g_deleted, 0);
  tffi_any_release(&f);
  CHECK_EQ(g_deleted, 1);
}

/* ------------------------------------------------------------------------ */
/* Bad input on which the official library exits (ours: typed errors)       */
/* ------------------------------------------------------------------------ */

TEST(bad_registrations_report_errors_anyffi) {
  TVMFFIByteArray key = tffi_ba("reflect_test.Conflict");
  TVMFFIAny arg, out;
  if (!is_anyffi()) SKIP("the official library exits the process on these inputs");
  /* A static index already held by another key. */
  tffi_stderr_silence();
  CHECK_EQ(TVMFFITypeGetOrAllocIndex(&key, kTVMFFIStr, 1, 0, 0, kTVMFFIObject), -1);
  tffi_stderr_restore();
  CHECK_RAISES(-1, "RuntimeError", "conflicting static index 65");
  /* Unknown type indices in the reflection built-ins. */
  arg = tffi_int(-5);
  CHECK_RAISES(call_global("ffi._RegisterFFIInit", &arg, 1, &out), "ValueError",
               "unknown type index -5");
  {
    TVMFFIAny args[2] = {tffi_int(123456), tffi_int(48)};
    CHECK_RAISES(call_global("ffi._PyClassRegisterTypeAttrColumns", args, 2, &out),
                 "ValueError", "unknown type index 123456");
    args[0] = tffi_int(key_index("ffi.Object"));
    args[1] = tffi_int(8);
    CHECK_RAISES(call_global("ffi._PyClassRegisterTypeAttrColumns", args, 2, &out),
                 "ValueError", "smaller than the object header");
  }
  {
    TVMFFIAny args[3] = {tffi_int(kTVMFFIInt), tffi_int(0), tffi_int(0)};
    CHECK_RAISES(call_global("ffi.MakeFieldSetter", args, 3, &out), "ValueError", "NULL");
  }
  {
    TVMFFIAny args[3] = {tffi_opaque_ptr(NULL), tffi_opaque_ptr(NULL), tffi_opaque_ptr(NULL)};
    CHECK_RAISES(call_global("ffi.FunctionFromExternC", args, 3, &out), "ValueError",
                 "safe_call");
  }
  {
    /* A setter called with a NULL field address. */
    TVMFFIAny args[3], setter, call[2];
    args[0] = tffi_int(kTVMFFIInt);
    args[1] = tffi_int(0);
    args[2] = tffi_int((int64_t)(intptr_t)&test_convert);
    REQUIRE_OK(call_global("ffi.MakeFieldSetter", args, 3, &setter));
    call[0] = tffi_opaque_ptr(NULL);
    call[1] = tffi_int(1);
    CHECK_RAISES(tffi_call(setter.v_obj, call, 2, &out), "TypeError", "field address");
    tffi_any_release(&setter);
  }
  {
    /* StructuralKey needs the structural hash: a clear error when it is absent. */
    void* h = tffi_get_global("ffi.StructuralHash");
    const TVMFFIMethodInfo* m = find_method("ffi.StructuralKey", "__ffi_init__");
    REQUIRE(m != NULL);
    arg = tffi_int(1);
    if (h) {
      CHECK_OK(tffi_call(m->method.v_obj, &arg, 1, &out));
      tffi_any_release(&out);
      TVMFFIObjectDecRef(h);
    } else {
      CHECK_RAISES(tffi_call(m->method.v_obj, &arg, 1, &out), "RuntimeError",
                   "ffi.StructuralHash");
    }
  }
  CHECK_NO_PENDING_ERROR();
}
