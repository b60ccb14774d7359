/*
 * test_type.c: the type table (spec §3): static entries, key lookup, the
 * index allocator with child slots and overflow, type info stability, and the
 * reflection registration entry points.
 *
 * Dynamic indices are never hard-coded: the library may have registered any
 * number of dynamic types before we run, so only relative positions are
 * checked.
 */
#include <stdlib.h>

#include "tffi_test.h"

static const TVMFFITypeInfo* info_of(int32_t ti) { return TVMFFIGetTypeInfo(ti); }

static int32_t get_or_alloc(const char* key, int32_t static_ti, int32_t depth,
                            int32_t child_slots, int32_t can_overflow, int32_t parent) {
  TVMFFIByteArray ba = tffi_ba(key);
  return TVMFFITypeGetOrAllocIndex(&ba, static_ti, depth, child_slots, can_overflow, parent);
}

typedef struct {
  int32_t index;
  const char* key;
} StaticType;

static const StaticType kPodTypes[] = {
    {0, "None"},          {1, "int"},
    {2, "bool"},          {3, "float"},
    {4, "void*"},         {5, "DataType"},
    {6, "Device"},        {7, "DLTensor*"},
    {8, "const char*"},   {9, "TVMFFIByteArray*"},
    {10, "ObjectRValueRef"}, {11, "ffi.SmallStr"},
    {12, "ffi.SmallBytes"}, {13, "ffi.Unchanged"},
};

static const StaticType kObjectTypes[] = {
    {65, "ffi.String"},   {66, "ffi.Bytes"},     {67, "ffi.Error"},
    {68, "ffi.Function"}, {69, "ffi.Shape"},     {70, "ffi.Tensor"},
    {71, "ffi.Array"},    {72, "ffi.Map"},       {73, "ffi.Module"},
    {74, "ffi.OpaquePyObject"}, {75, "ffi.List"}, {76, "ffi.Dict"},
    {77, "ffi.VisitInterrupt"}, {78, "ffi.BigInt"},
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

TEST(type_static_pod_entries) {
  size_t i;
  for (i = 0; i < NELEM(kPodTypes); ++i) {
    const TVMFFITypeInfo* info = info_of(kPodTypes[i].index);
    if (info == NULL) {
      tffi_fail(__FILE__, __LINE__, "no type info for %d", kPodTypes[i].index);
      continue;
    }
    CHECK_EQ(info->type_index, kPodTypes[i].index);
    CHECK_EQ(info->type_depth, 0);
    CHECK_BA(info->type_key, kPodTypes[i].key);
  }
}

TEST(type_static_object_entries) {
  const TVMFFITypeInfo* root = info_of(kTVMFFIObject);
  size_t i;
  REQUIRE(root != NULL);
  CHECK_EQ(root->type_index, 64);
  CHECK_EQ(root->type_depth, 0);
  CHECK_BA(root->type_key, "ffi.Object");
  REQUIRE(root->metadata != NULL);
  CHECK_EQ(root->metadata->total_size, 24);
  for (i = 0; i < NELEM(kObjectTypes); ++i) {
    const TVMFFITypeInfo* info = info_of(kObjectTypes[i].index);
    if (info == NULL) {
      tffi_fail(__FILE__, __LINE__, "no type info for %d", kObjectTypes[i].index);
      continue;
    }
    CHECK_EQ(info->type_index, kObjectTypes[i].index);
    CHECK_EQ(info->type_depth, 1);
    CHECK_BA(info->type_key, kObjectTypes[i].key);
    CHECK(info->type_ancestors != NULL);
    if (info->type_depth == 1 && info->type_ancestors != NULL) {
      CHECK_PTR_EQ(info->type_ancestors[0], root);
    }
  }
}

TEST(type_key_to_index_static) {
  size_t i;
  int32_t ti = -5;
  TVMFFIByteArray ba = tffi_ba("ffi.Object");
  CHECK_OK(TVMFFITypeKeyToIndex(&ba, &ti));
  CHECK_EQ(ti, 64);
  for (i = 0; i < NELEM(kPodTypes); ++i) {
    ba = tffi_ba(kPodTypes[i].key);
    ti = -5;
    if (CHECK_OK(TVMFFITypeKeyToIndex(&ba, &ti))) CHECK_EQ(ti, kPodTypes[i].index);
  }
  for (i = 0; i < NELEM(kObjectTypes); ++i) {
    ba = tffi_ba(kObjectTypes[i].key);
    ti = -5;
    if (CHECK_OK(TVMFFITypeKeyToIndex(&ba, &ti))) CHECK_EQ(ti, kObjectTypes[i].index);
  }
}

TEST(type_key_to_index_missing) {
  TVMFFIByteArray ba = tffi_ba("anyffi_ctest.NoSuchType");
  int32_t ti = 0;
  CHECK_RAISES(TVMFFITypeKeyToIndex(&ba, &ti), "InternalError", NULL);
}

TEST(type_keys_needed_by_python_import) {
  /* `import tvm_ffi` looks these up and aborts if any is missing (spec §8). */
  static const char* keys[] = {
      "ffi.Object",          "ffi.Error",           "DataType",
      "Device",              "ffi.String",          "ffi.Bytes",
      "ffi.Tensor",          "ffi.Function",        "ffi.Array",
      "ffi.List",            "ffi.Map",             "ffi.Dict",
      "ffi.Shape",           "ffi.Module",          "ffi.EnumState",
      "ffi.Enum",            "ffi.IntEnum",         "ffi.StrEnum",
      "ffi.StructuralKey",   "ffi.VisitInterrupt",  "ffi.StructuralVisitor",
      "ffi.StructuralMutator", "ffi.reflection.AccessStep", "ffi.reflection.AccessPath",
  };
  size_t i;
  for (i = 0; i < NELEM(keys); ++i) {
    TVMFFIByteArray ba = tffi_ba(keys[i]);
    int32_t ti = -5;
    if (TVMFFITypeKeyToIndex(&ba, &ti) != 0) {
      tffi_clear_error();
      tffi_fail(__FILE__, __LINE__, "type key %s is not registered", keys[i]);
      continue;
    }
    {
      const TVMFFITypeInfo* info = info_of(ti);
      REQUIRE(info != NULL);
      CHECK_EQ(info->type_index, ti);
      CHECK_BA(info->type_key, keys[i]);
    }
  }
}

TEST(type_key_hash_matches_std_hash) {
  /* type_key_hash = libstdc++ std::hash<string_view>, used by structural hashing. */
  const TVMFFITypeInfo* info = info_of(kTVMFFINone);
  REQUIRE(info != NULL);
  CHECK_EQ_HEX(info->type_key_hash, 18116513903021958570ULL);
}

TEST(type_get_or_alloc_existing_key) {
  /* All arguments but the key are ignored for an existing key. */
  CHECK_EQ(get_or_alloc("ffi.String", kTVMFFIStr, 1, 0, 0, kTVMFFIObject), kTVMFFIStr);
  CHECK_EQ(get_or_alloc("ffi.String", -1, 1, 0, 1, kTVMFFIObject), kTVMFFIStr);
  CHECK_EQ(get_or_alloc("ffi.Object", kTVMFFIObject, 0, 0, 1, -1), kTVMFFIObject);
  CHECK_EQ(get_or_alloc("ffi.Array", -1, 5, 7, 0, -2), kTVMFFIArray);
}

TEST(type_get_or_alloc_query_mode) {
  int32_t ti = 0;
  TVMFFIByteArray ba = tffi_ba("anyffi_ctest.QueryOnly");
  CHECK_EQ(get_or_alloc("anyffi_ctest.QueryOnly", -1, 1, 0, 1, -2), -2);
  /* Query mode must not register anything. */
  CHECK_RAISES(TVMFFITypeKeyToIndex(&ba, &ti), "InternalError", NULL);
  CHECK_EQ(get_or_alloc("ffi.Shape", -1, 1, 0, 1, -2), kTVMFFIShape);
}

static void check_ancestors(const TVMFFITypeInfo* info, const int32_t* expected, int n) {
  int i;
  REQUIRE_EQ(info->type_depth, n);
  REQUIRE(info->type_ancestors != NULL);
  for (i = 0; i < n; ++i) {
    REQUIRE(info->type_ancestors[i] != NULL);
    CHECK_EQ(info->type_ancestors[i]->type_index, expected[i]);
    CHECK_PTR_EQ(info->type_ancestors[i], info_of(expected[i]));
  }
}

TEST(type_alloc_child_slots_and_overflow) {
  int32_t base, c1, c2, c3, g1, again;
  const TVMFFITypeInfo* base_info;
  const TVMFFITypeInfo* info;
  int32_t anc[3];

  base = get_or_alloc("anyffi_ctest.abi.Base", -1, 1, 2, 1, kTVMFFIObject);
  REQUIRE(base >= kTVMFFIDynObjectBegin);
  base_info = info_of(base);
  REQUIRE(base_info != NULL);
  CHECK_EQ(base_info->type_index, base);
  CHECK_BA(base_info->type_key, "anyffi_ctest.abi.Base");
  anc[0] = kTVMFFIObject;
  check_ancestors(base_info, anc, 1);
  CHECK_EQ(base_info->num_fields, 0);
  CHECK_EQ(base_info->num_methods, 0);
  CHECK(base_info->metadata == NULL);

  /* The two reserved child slots are handed out in order. */
  c1 = get_or_alloc("anyffi_ctest.abi.Child1", -1, 2, 0, 1, base);
  c2 = get_or_alloc("anyffi_ctest.abi.Child2", -1, 2, 0, 1, base);
  CHECK_EQ(c1, base + 1);
  CHECK_EQ(c2, base + 2);
  /* The third child overflows to the global counter. */
  c3 = get_or_alloc("anyffi_ctest.abi.Child3", -1, 2, 0, 1, base);
  CHECK(c3 > base + 2);
  CHECK(c3 != c1 && c3 != c2);

  anc[1] = base;
  info = info_of(c1);
  REQUIRE(info != NULL);
  CHECK_BA(info->type_key, "anyffi_ctest.abi.Child1");
  check_ancestors(info, anc, 2);
  info = info_of(c3);
  REQUIRE(info != NULL);
  CHECK_EQ(info->type_index, c3);
  check_ancestors(info, anc, 2);

  /* A grandchild of a slot-less child overflows too, with a 3-deep chain. */
  g1 = get_or_alloc("anyffi_ctest.abi.Grandchild", -1, 3, 0, 1, c1);
  CHECK(g1 > c1);
  CHECK(g1 != c2 && g1 != c3);
  anc[2] = c1;
  info = info_of(g1);
  REQUIRE(info != NULL);
  check_ancestors(info, anc, 3);

  /* Existing keys return the same index; TypeKeyToIndex agrees. */
  again = get_or_alloc("anyffi_ctest.abi.Child2", -1, 2, 0, 1, base);
  CHECK_EQ(again, c2);
  {
    TVMFFIByteArray ba = tffi_ba("anyffi_ctest.abi.Child3");
    int32_t ti = -5;
    CHECK_OK(TVMFFITypeKeyToIndex(&ba, &ti));
    CHECK_EQ(ti, c3);
  }
  /* Type info pointers are stable across calls and later registrations. */
  CHECK_PTR_EQ(info_of(base), base_info);
  CHECK_PTR_EQ(info_of(c1)->type_ancestors[1], base_info);
}

TEST(type_alloc_nested_slots) {
  /* A child that itself reserves slots consumes child_slots+1 of the parent. */
  int32_t top, mid, leaf, next;
  top = get_or_alloc("anyffi_ctest.nest.Top", -1, 1, 5, 1, kTVMFFIObject);
  REQUIRE(top >= kTVMFFIDynObjectBegin);
  mid = get_or_alloc("anyffi_ctest.nest.Mid", -1, 2, 2, 1, top);
  CHECK_EQ(mid, top + 1);
  leaf = get_or_alloc("anyffi_ctest.nest.Leaf", -1, 3, 0, 1, mid);
  CHECK_EQ(leaf, mid + 1);
  /* Mid took top+1..top+3, so the next sibling starts at top+4. */
  next = get_or_alloc("anyffi_ctest.nest.Sibling", -1, 2, 0, 1, top);
  CHECK_EQ(next, top + 4);
}

static int tffi_type_test_noop(void* h, const TVMFFIAny* a, int32_t n, TVMFFIAny* rv) {
  return 0;
}

TEST(type_register_metadata_field_method) {
  int32_t ti = get_or_alloc("anyffi_ctest.reflect.Thing", -1, 1, 0, 1, kTVMFFIObject);
  const TVMFFITypeInfo* info;
  TVMFFITypeMetadata md;
  TVMFFIFieldInfo field;
  TVMFFIMethodInfo method;
  void* f = NULL;
  REQUIRE(ti >= kTVMFFIDynObjectBegin);
  info = info_of(ti);
  REQUIRE(info != NULL);

  memset(&md, 0, sizeof(md));
  md.doc = tffi_ba("a test type");
  md.total_size = 32;
  md.structural_eq_hash_kind = kTVMFFISEqHashKindTreeNode;
  CHECK_OK(TVMFFITypeRegisterMetadata(ti, &md));
  REQUIRE(info->metadata != NULL);
  CHECK_EQ(info->metadata->total_size, 32);
  CHECK_EQ(info->metadata->structural_eq_hash_kind, kTVMFFISEqHashKindTreeNode);
  CHECK_BA(info->metadata->doc, "a test type");
  CHECK(info->metadata->doc.data != md.doc.data); /* copied */
  /* A second registration is refused and logged (traceback, kind, message), worded alike. */
  {
    char* logged;
    int rc;
    tffi_stderr_capture_begin();
    rc = TVMFFITypeRegisterMetadata(ti, &md);
    logged = tffi_stderr_capture_end();
    CHECK_RAISES(rc, "RuntimeError",
                 "Overriding anyffi_ctest.reflect.Thing, possible causes:\n"
                 "- two ObjectDef<T>() calls for the same T \n");
    REQUIRE(logged != NULL);
    CHECK(strncmp(logged, "Traceback (most recent call last):\n", 35) == 0);
    CHECK(strstr(logged, "RuntimeError: Overriding anyffi_ctest.reflect.Thing, possible causes:") !=
          NULL);
    CHECK(strstr(logged, "Cross check the reflection registration.") != NULL);
    free(logged);
  }

  memset(&field, 0, sizeof(field));
  field.name = tffi_ba("x");
  field.doc = tffi_ba("");
  field.metadata = tffi_ba("{}");
  field.flags = kTVMFFIFieldFlagBitMaskWritable;
  field.size = 8;
  field.alignment = 8;
  field.offset = 24;
  field.field_static_type_index = kTVMFFIInt;
  field.default_value_or_factory = tffi_none();
  CHECK_OK(TVMFFITypeRegisterField(ti, &field));
  CHECK_EQ(info->num_fields, 1);
  if (info->num_fields == 1) {
    CHECK_BA(info->fields[0].name, "x");
    CHECK_EQ(info->fields[0].offset, 24);
    CHECK_EQ(info->fields[0].flags, kTVMFFIFieldFlagBitMaskWritable);
    CHECK_EQ(info->fields[0].field_static_type_index, kTVMFFIInt);
  }
  /* A duplicate field name within the same type is an error. */
  CHECK_EQ(TVMFFITypeRegisterField(ti, &field), -1);
  tffi_clear_error();
  CHECK_EQ(info->num_fields, 1);

  REQUIRE_OK(TVMFFIFunctionCreate(NULL, tffi_type_test_noop, NULL, &f));
  memset(&method, 0, sizeof(method));
  method.name = tffi_ba("do_nothing");
  method.doc = tffi_ba("");
  method.metadata = tffi_ba("");
  method.flags = kTVMFFIFieldFlagBitMaskIsStaticMethod;
  method.method = tffi_obj_view(f);
  CHECK_OK(TVMFFITypeRegisterMethod(ti, &method));
  CHECK_EQ(info->num_methods, 1);
  if (info->num_methods == 1) {
    CHECK_BA(info->methods[0].name, "do_nothing");
    CHECK_EQ(info->methods[0].method.type_index, kTVMFFIFunction);
    CHECK_PTR_EQ(info->methods[0].method.v_obj, f);
  }
  /* The table retains the method function. */
  CHECK_EQ(tffi_strong(f), 2);
  CHECK_OK(TVMFFIObjectDecRef(f));
}

/* A field that shadows an ancestor's registers (0), with one warning line on stderr per
 * ancestor that has it, in the official library's words. */
TEST(type_field_shadowing_an_ancestor_is_registered_with_a_warning) {
  int32_t base = get_or_alloc("anyffi_ctest.shadow.Base", -1, 1, 0, 1, kTVMFFIObject);
  int32_t child = get_or_alloc("anyffi_ctest.shadow.Child", -1, 2, 0, 1, base);
  const TVMFFITypeInfo* info;
  TVMFFIFieldInfo field;
  char* logged;
  int rc;
  REQUIRE(base >= kTVMFFIDynObjectBegin && child >= kTVMFFIDynObjectBegin);
  memset(&field, 0, sizeof(field));
  field.name = tffi_ba("v1");
  field.doc = tffi_ba("");
  field.metadata = tffi_ba("");
  field.size = 8;
  field.alignment = 8;
  field.offset = 24;
  field.field_static_type_index = kTVMFFIInt;
  field.default_value_or_factory = tffi_none();
  tffi_stderr_capture_begin();
  rc = TVMFFITypeRegisterField(base, &field);
  logged = tffi_stderr_capture_end();
  CHECK_EQ(rc, 0);
  REQUIRE(logged != NULL);
  CHECK_EQ((int)strlen(logged), 0);
  free(logged);
  tffi_stderr_capture_begin();
  rc = TVMFFITypeRegisterField(child, &field);
  logged = tffi_stderr_capture_end();
  CHECK_EQ(rc, 0);
  REQUIRE(logged != NULL);
  CHECK(strcmp(logged,
               "[WARNING] Field \"v1\" in type \"anyffi_ctest.shadow.Child\" duplicates an "
               "ancestor field in \"anyffi_ctest.shadow.Base\". Child types should not "
               "re-register inherited fields.\n") == 0);
  free(logged);
  info = info_of(child);
  REQUIRE(info != NULL);
  CHECK_EQ(info->num_fields, 1);
}

/* Every type key is NUL-terminated in place (C readers print it with %s), the empty one too. */
TEST(type_keys_are_nul_terminated) {
  int32_t ti = get_or_alloc("anyffi_ctest.nul.Key", -1, 1, 0, 1, kTVMFFIObject);
  int32_t empty = get_or_alloc("", -1, 1, 0, 1, kTVMFFIObject);
  const TVMFFITypeInfo* info;
  REQUIRE(ti >= kTVMFFIDynObjectBegin && empty >= kTVMFFIDynObjectBegin);
  info = info_of(ti);
  REQUIRE(info != NULL);
  CHECK_EQ((int)info->type_key.size, 20);
  CHECK_EQ(info->type_key.data[info->type_key.size], '\0');
  CHECK(strcmp(info->type_key.data, "anyffi_ctest.nul.Key") == 0);
  info = info_of(kTVMFFIStr);
  REQUIRE(info != NULL);
  CHECK(strcmp(info->type_key.data, "ffi.String") == 0);
  info = info_of(kTVMFFINone);
  REQUIRE(info != NULL);
  CHECK(strcmp(info->type_key.data, "None") == 0);
  info = info_of(empty);
  REQUIRE(info != NULL);
  CHECK_EQ((int)info->type_key.size, 0);
  REQUIRE(info->type_key.data != NULL);
  CHECK_EQ(info->type_key.data[0], '\0');
}

/* Ours only (the official library exits on the first, and gives the second's index to two
 * types): a static index at or past the next dynamic one is refused, and a dynamic child steps
 * past a parent's slot that a static registration took. */
TEST(type_static_indices_never_meet_dynamic_ones) {
  int32_t probe, parent, stat, child, next;
  TVMFFIByteArray k;
  if (!tffi_is_anyffi()) SKIP("the official library exits here");
  probe = get_or_alloc("anyffi_ctest.static.Probe", -1, 1, 0, 1, kTVMFFIObject);
  REQUIRE(probe >= kTVMFFIDynObjectBegin);
  /* probe took the last dynamic index: probe + 1 is the next one */
  tffi_stderr_silence();
  CHECK_EQ(get_or_alloc("anyffi_ctest.static.AtCounter", probe + 1, 1, 0, 1, kTVMFFIObject), -1);
  tffi_stderr_restore();
  CHECK_RAISES(-1, "RuntimeError", "is not below the next dynamic type index");
  next = get_or_alloc("anyffi_ctest.static.Next", -1, 1, 0, 1, kTVMFFIObject);
  CHECK_EQ(next, probe + 1);
  k = tffi_ba("anyffi_ctest.static.AtCounter");
  CHECK_EQ(TVMFFITypeKeyToIndex(&k, &stat), -1);
  tffi_clear_error();

  parent = get_or_alloc("anyffi_ctest.static.Parent", -1, 1, 3, 1, kTVMFFIObject);
  REQUIRE(parent >= kTVMFFIDynObjectBegin);
  stat = get_or_alloc("anyffi_ctest.static.InSlot", parent + 1, 2, 0, 1, parent);
  CHECK_EQ(stat, parent + 1);
  child = get_or_alloc("anyffi_ctest.static.Child", -1, 2, 0, 1, parent);
  CHECK_EQ(child, parent + 2);
  REQUIRE(info_of(parent + 1) != NULL);
  CHECK(strcmp(info_of(parent + 1)->type_key.data, "anyffi_ctest.static.InSlot") == 0);
}

/* An attribute may be registered for a type index no type has yet (as the official library
 * allows); a second value for it is refused. */
TEST(type_attr_on_an_index_without_a_type) {
  int32_t probe = get_or_alloc("anyffi_ctest.attr.Probe", -1, 1, 0, 1, kTVMFFIObject);
  int32_t free_ti = probe + 40;
  TVMFFIByteArray name = tffi_ba("anyffi_ctest_attr_free");
  TVMFFIAny value = tffi_int(77);
  const TVMFFITypeAttrColumn* col;
  REQUIRE(probe >= kTVMFFIDynObjectBegin);
  /* (TVMFFIGetTypeInfo of free_ti would make the official library exit) */
  CHECK_OK(TVMFFITypeRegisterAttr(free_ti, &name, &value));
  col = TVMFFIGetTypeAttrColumn(&name);
  REQUIRE(col != NULL);
  REQUIRE(free_ti - col->begin_index < col->size);
  CHECK_EQ(col->data[free_ti - col->begin_index].type_index, kTVMFFIInt);
  CHECK_EQ(col->data[free_ti - col->begin_index].v_int64, 77);
  CHECK_RAISES(TVMFFITypeRegisterAttr(free_ti, &name, &value), "RuntimeError", NULL);
}

TEST(type_attr_columns) {
  int32_t ti = get_or_alloc("anyffi_ctest.attr.Thing", -1, 1, 0, 1, kTVMFFIObject);
  TVMFFIByteArray name = tffi_ba("anyffi_ctest_attr");
  TVMFFIByteArray missing = tffi_ba("anyffi_ctest_attr_missing");
  TVMFFIAny value = tffi_int(1234);
  const TVMFFITypeAttrColumn* col;
  static const char* precreated[] = {"__any_hash__", "__any_equal__", "__ffi_repr__",
                                     "__ffi_init__", "__ffi_new__",   "__s_equal__",
                                     "__s_hash__",   "__ffi_enum__"};
  size_t i;
  REQUIRE(ti >= kTVMFFIDynObjectBegin);

  CHECK(TVMFFIGetTypeAttrColumn(&missing) == NULL);
  for (i = 0; i < NELEM(precreated); ++i) {
    TVMFFIByteArray ba = tffi_ba(precreated[i]);
    if (TVMFFIGetTypeAttrColumn(&ba) == NULL) {
      tffi_fail(__FILE__, __LINE__, "attr column %s is not pre-created", precreated[i]);
    }
  }

  CHECK_OK(TVMFFITypeRegisterAttr(ti, &name, &value));
  col = TVMFFIGetTypeAttrColumn(&name);
  REQUIRE(col != NULL);
  CHECK_EQ(col->begin_index, 0);
  REQUIRE(col->size > ti);
  CHECK_EQ(col->data[ti].type_index, kTVMFFIInt);
  CHECK_EQ(col->data[ti].v_int64, 1234);
  CHECK_EQ(col->data[kTVMFFIObject].type_index, kTVMFFINone);
  /* Registering a value twice for the same type is an error. */
  CHECK_RAISES(TVMFFITypeRegisterAttr(ti, &name, &value), "RuntimeError", NULL);
  /* The column struct's address is stable. */
  CHECK_PTR_EQ(TVMFFIGetTypeAttrColumn(&name), col);
}

/* The core object types publish `__ffi_convert__` (the official Python type converter calls
 * it): the value itself when it already is one, a converted copy where C++ TryCast would make
 * one (a sequence of ints to a Shape, a List to an Array), else a TypeError naming both types. */
static void* convert_fn(int32_t ti) {
  TVMFFIByteArray name = tffi_ba("__ffi_convert__");
  const TVMFFITypeAttrColumn* col = TVMFFIGetTypeAttrColumn(&name);
  if (col == NULL || ti < col->begin_index || ti - col->begin_index >= col->size) return NULL;
  if (col->data[ti - col->begin_index].type_index != kTVMFFIFunction) return NULL;
  return col->data[ti - col->begin_index].v_obj;
}

TEST(type_core_convert_attrs) {
  static const int32_t core[] = {kTVMFFIObject, kTVMFFIStr,   kTVMFFIBytes, kTVMFFIError,
                                 kTVMFFIFunction, kTVMFFIShape, kTVMFFITensor, kTVMFFIArray,
                                 kTVMFFIMap,    kTVMFFIList,  kTVMFFIDict};
  TVMFFIAny args[3], arr = tffi_none(), lst = tffi_none(), out = tffi_none(), view;
  void* make_array = tffi_get_global("ffi.Array");
  void* make_list = tffi_get_global("ffi.List");
  size_t i;
  for (i = 0; i < NELEM(core); ++i) {
    if (convert_fn(core[i]) == NULL) tffi_fail(__FILE__, __LINE__, "no __ffi_convert__ for %d", core[i]);
  }
  REQUIRE(convert_fn(kTVMFFIShape) != NULL && make_array != NULL && make_list != NULL);
  args[0] = tffi_int(2);
  args[1] = tffi_bool(1);
  args[2] = tffi_int(5);
  REQUIRE_OK(tffi_call(make_array, args, 3, &arr));
  REQUIRE_OK(tffi_call(make_list, args, 3, &lst));

  /* Array and List of int/bool become a Shape */
  view = arr;
  REQUIRE_OK(tffi_call(convert_fn(kTVMFFIShape), &view, 1, &out));
  REQUIRE(out.type_index == kTVMFFIShape);
  {
    TVMFFIShapeCell* cell = (TVMFFIShapeCell*)tffi_cell(out.v_obj);
    CHECK_EQ(cell->size, 3);
    CHECK_EQ(cell->data[0], 2);
    CHECK_EQ(cell->data[1], 1);
    CHECK_EQ(cell->data[2], 5);
  }
  tffi_any_release(&out);
  view = lst;
  REQUIRE_OK(tffi_call(convert_fn(kTVMFFIShape), &view, 1, &out));
  CHECK_EQ(out.type_index, kTVMFFIShape);
  tffi_any_release(&out);

  /* An Array converts to itself; a List converts to a new Array */
  view = arr;
  REQUIRE_OK(tffi_call(convert_fn(kTVMFFIArray), &view, 1, &out));
  CHECK_PTR_EQ(out.v_obj, arr.v_obj);
  tffi_any_release(&out);
  view = lst;
  REQUIRE_OK(tffi_call(convert_fn(kTVMFFIArray), &view, 1, &out));
  CHECK_EQ(out.type_index, kTVMFFIArray);
  CHECK(out.v_obj != lst.v_obj);
  tffi_any_release(&out);

  /* ffi.Object and ffi.Function accept None; ffi.Error does not */
  view = tffi_none();
  CHECK_OK(tffi_call(convert_fn(kTVMFFIObject), &view, 1, &out));
  CHECK_EQ(out.type_index, kTVMFFINone);
  CHECK_RAISES(tffi_call(convert_fn(kTVMFFIError), &view, 1, &out), "TypeError",
               "Cannot cast from `None` to `ffi.Error`");

  /* Failures name both types */
  view = tffi_int(7);
  CHECK_RAISES(tffi_call(convert_fn(kTVMFFIShape), &view, 1, &out), "TypeError",
               "Cannot cast from `int` to `ffi.Shape`");
  CHECK_RAISES(tffi_call(convert_fn(kTVMFFIArray), &view, 1, &out), "TypeError",
               "Cannot cast from `int` to `Array<Any>`");
  CHECK_RAISES(tffi_call(convert_fn(kTVMFFIStr), &view, 1, &out), "TypeError",
               "Cannot cast from `int` to `str`");

  tffi_any_release(&arr);
  tffi_any_release(&lst);
  TVMFFIObjectDecRef(make_array);
  TVMFFIObjectDecRef(make_list);
}
