/*
 * test_registry.c: the global function table and the built-in registry
 * functions ffi.FunctionListGlobalNamesFunctor, ffi.FunctionRemoveGlobal,
 * ffi.GetGlobalFuncMetadata, plus ffi.Shape, ffi.String and ffi.Bytes
 * (spec §1.2, §6, §8).
 */
#include <stdlib.h>

#include "tffi_test.h"

static int const_safe_call(void* handle, const TVMFFIAny* args, int32_t n, TVMFFIAny* rv) {
  rv->type_index = kTVMFFIInt;
  rv->zero_padding = 0;
  rv->v_int64 = (int64_t)(intptr_t)handle;
  return 0;
}

/* A function whose result is its self pointer, to tell functions apart. */
static void* make_const_fn(intptr_t value) {
  void* f = NULL;
  if (TVMFFIFunctionCreate((void*)value, const_safe_call, NULL, &f) != 0) {
    tffi_clear_error();
    return NULL;
  }
  return f;
}

static int set_global(const char* name, void* f, int allow_override) {
  TVMFFIByteArray ba = tffi_ba(name);
  return TVMFFIFunctionSetGlobal(&ba, f, allow_override);
}

/* ffi.FunctionRemoveGlobal(name) -> bool; returns -1 on call failure. */
static int remove_global(const char* name) {
  void* rm = tffi_get_global("ffi.FunctionRemoveGlobal");
  TVMFFIAny args[1], rv;
  int result = -1;
  if (rm == NULL) return -1;
  args[0] = tffi_raw_str(name);
  if (tffi_call(rm, args, 1, &rv) == 0 && rv.type_index == kTVMFFIBool) {
    result = (int)rv.v_int64;
  } else {
    tffi_clear_error();
  }
  tffi_any_release(&rv);
  TVMFFIObjectDecRef(rm);
  return result;
}

TEST(registry_set_get_override_remove) {
  const char* name = "anyffi_ctest.registry.basic";
  void* f1 = make_const_fn(1);
  void* f2 = make_const_fn(2);
  void* got = NULL;
  TVMFFIByteArray ba = tffi_ba(name);
  TVMFFIAny rv;
  REQUIRE(f1 != NULL && f2 != NULL);

  REQUIRE_OK(set_global(name, f1, 0));
  /* The table takes its own reference; the caller keeps hers. */
  CHECK_EQ(tffi_strong(f1), 2);

  REQUIRE_OK(TVMFFIFunctionGetGlobal(&ba, &got));
  CHECK_PTR_EQ(got, f1);
  CHECK_EQ(tffi_strong(f1), 3); /* GetGlobal hands out +1 */
  if (got != NULL) TVMFFIObjectDecRef(got);

  /* Duplicate without override. */
  CHECK_RAISES(set_global(name, f2, 0), "RuntimeError", "already registered");
  CHECK_EQ(tffi_strong(f1), 2);
  CHECK_EQ(tffi_strong(f2), 1);

  /* Override replaces and releases the old entry. */
  CHECK_OK(set_global(name, f2, 1));
  CHECK_EQ(tffi_strong(f1), 1);
  CHECK_EQ(tffi_strong(f2), 2);
  got = NULL;
  REQUIRE_OK(TVMFFIFunctionGetGlobal(&ba, &got));
  CHECK_PTR_EQ(got, f2);
  if (got != NULL) {
    CHECK_OK(tffi_call(got, NULL, 0, &rv));
    CHECK_EQ(rv.v_int64, 2);
    TVMFFIObjectDecRef(got);
  }

  /* Remove: true, then false; the table's reference is released. */
  CHECK_EQ(remove_global(name), 1);
  CHECK_EQ(tffi_strong(f2), 1);
  CHECK_EQ(remove_global(name), 0);
  got = (void*)0x1;
  CHECK_OK(TVMFFIFunctionGetGlobal(&ba, &got));
  CHECK(got == NULL);

  CHECK_OK(TVMFFIObjectDecRef(f1));
  CHECK_OK(TVMFFIObjectDecRef(f2));
}

/* Moves the pending error out; writes its kind and message (NUL-terminated, truncated to the
   buffer sizes) and returns 1, or returns 0 when none is pending. */
static int take_error(char* kind, size_t kind_cap, char* msg, size_t cap) {
  void* err = NULL;
  TVMFFIErrorCell* cell;
  size_t n;
  TVMFFIErrorMoveFromRaised(&err);
  if (err == NULL) return 0;
  cell = (TVMFFIErrorCell*)tffi_cell(err);
  n = cell->kind.size < kind_cap - 1 ? cell->kind.size : kind_cap - 1;
  memcpy(kind, cell->kind.data, n);
  kind[n] = '\0';
  n = cell->message.size < cap - 1 ? cell->message.size : cap - 1;
  memcpy(msg, cell->message.data, n);
  msg[n] = '\0';
  TVMFFIObjectDecRef(err);
  return 1;
}

/* A duplicate through TVMFFIFunctionSetGlobalFromMethodInfo (every C++ GlobalDef().def and the
   official Rust binding register this way) raises a longer message than TVMFFIFunctionSetGlobal
   and is printed to stderr first: "Traceback (most recent call last):\n<frames><kind>: <msg>\n". */
TEST(registry_duplicate_from_method_info_message_and_log) {
  const char* name = "anyffi_ctest.registry.method_info_dup";
  const char* long_msg =
      "Global Function `anyffi_ctest.registry.method_info_dup` is already registered, possible "
      "causes:\n- Two GlobalDef().def registrations for the same function \nPlease remove the "
      "duplicate registration.";
  const char* short_msg =
      "Global Function `anyffi_ctest.registry.method_info_dup` is already registered";
  void* f1 = make_const_fn(1);
  void* f2 = make_const_fn(2);
  TVMFFIMethodInfo info;
  char kind[64], msg[512], expected_tail[600];
  char* logged;
  int rc;
  REQUIRE(f1 != NULL && f2 != NULL);
  memset(&info, 0, sizeof(info));
  info.name = tffi_ba(name);
  info.doc = tffi_ba("");
  info.metadata = tffi_ba("{}");
  info.method = tffi_obj_view(f1);
  REQUIRE_OK(TVMFFIFunctionSetGlobalFromMethodInfo(&info, 0));

  info.method = tffi_obj_view(f2);
  tffi_stderr_capture_begin();
  rc = TVMFFIFunctionSetGlobalFromMethodInfo(&info, 0);
  logged = tffi_stderr_capture_end();
  CHECK_EQ(rc, -1);
  REQUIRE(take_error(kind, sizeof(kind), msg, sizeof(msg)));
  CHECK_BYTES(kind, strlen(kind), "RuntimeError");
  CHECK_BYTES(msg, strlen(msg), long_msg);
  REQUIRE(logged != NULL);
  CHECK(strncmp(logged, "Traceback (most recent call last):\n", 35) == 0);
  snprintf(expected_tail, sizeof(expected_tail), "\nRuntimeError: %s\n", long_msg);
  CHECK(strlen(logged) >= strlen(expected_tail) &&
        strcmp(logged + strlen(logged) - strlen(expected_tail), expected_tail) == 0);
  free(logged);
  CHECK_EQ(tffi_strong(f2), 1); /* not kept */

  /* TVMFFIFunctionSetGlobal: the short message, nothing printed. */
  tffi_stderr_capture_begin();
  rc = set_global(name, f2, 0);
  logged = tffi_stderr_capture_end();
  CHECK_EQ(rc, -1);
  REQUIRE(take_error(kind, sizeof(kind), msg, sizeof(msg)));
  CHECK_BYTES(kind, strlen(kind), "RuntimeError");
  CHECK_BYTES(msg, strlen(msg), short_msg);
  REQUIRE(logged != NULL);
  CHECK_BYTES(logged, strlen(logged), "");
  free(logged);

  /* With override it replaces the entry. */
  CHECK_OK(TVMFFIFunctionSetGlobalFromMethodInfo(&info, 1));
  CHECK_EQ(tffi_strong(f1), 1);
  CHECK_EQ(remove_global(name), 1);
  CHECK_OK(TVMFFIObjectDecRef(f1));
  CHECK_OK(TVMFFIObjectDecRef(f2));
}

TEST(registry_get_global_missing_is_not_an_error) {
  TVMFFIByteArray ba = tffi_ba("anyffi_ctest.registry.does_not_exist");
  void* got = (void*)0x1;
  CHECK_EQ(TVMFFIFunctionGetGlobal(&ba, &got), 0);
  CHECK(got == NULL);
  CHECK_NO_PENDING_ERROR();
}

TEST(registry_builtin_globals_present) {
  static const char* names[] = {
      "ffi.FunctionListGlobalNamesFunctor", "ffi.FunctionRemoveGlobal",
      "ffi.GetGlobalFuncMetadata",          "ffi.Shape",
      "ffi.String",                         "ffi.Bytes",
      "ffi.GetInvalidObject",               "ffi.GetKwargsObject",
      "ffi.Array",                          "ffi.Map",
  };
  size_t i;
  for (i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
    void* f = tffi_get_global(names[i]);
    if (f == NULL) {
      tffi_fail(__FILE__, __LINE__, "global %s is missing", names[i]);
      continue;
    }
    CHECK_EQ(tffi_type_index(f), kTVMFFIFunction);
    TVMFFIObjectDecRef(f);
  }
}

TEST(registry_list_global_names) {
  const char* name = "anyffi_ctest.registry.listed";
  void* f = make_const_fn(5);
  void* lister = tffi_get_global("ffi.FunctionListGlobalNamesFunctor");
  TVMFFIAny rv, args[1];
  void* g = NULL;
  int64_t n, i;
  int found_mine = 0, found_shape = 0, all_strings = 1;
  REQUIRE(f != NULL);
  REQUIRE(lister != NULL);
  REQUIRE_OK(set_global(name, f, 0));

  REQUIRE_OK(tffi_call(lister, NULL, 0, &rv));
  REQUIRE_EQ(rv.type_index, kTVMFFIFunction);
  g = rv.v_obj;
  args[0] = tffi_int(-1);
  if (CHECK_OK(tffi_call(g, args, 1, &rv))) {
    CHECK_EQ(rv.type_index, kTVMFFIInt);
    n = rv.v_int64;
    CHECK(n >= 10);
    for (i = 0; i < n; ++i) {
      TVMFFIByteArray s;
      args[0] = tffi_int(i);
      if (!CHECK_OK(tffi_call(g, args, 1, &rv))) break;
      if (!tffi_any_string_view(&rv, &s, 0)) {
        all_strings = 0;
      } else {
        if (s.size == strlen(name) && memcmp(s.data, name, s.size) == 0) ++found_mine;
        if (s.size == 9 && memcmp(s.data, "ffi.Shape", 9) == 0) ++found_shape;
      }
      tffi_any_release(&rv);
    }
  }
  CHECK(all_strings);
  CHECK_EQ(found_mine, 1);
  CHECK_EQ(found_shape, 1);
  CHECK_OK(TVMFFIObjectDecRef(g));
  CHECK_OK(TVMFFIObjectDecRef(lister));
  CHECK_EQ(remove_global(name), 1);
  CHECK_OK(TVMFFIObjectDecRef(f));
}

TEST(registry_get_global_func_metadata) {
  const char* name = "anyffi_ctest.registry.meta";
  void* f = make_const_fn(6);
  void* meta = tffi_get_global("ffi.GetGlobalFuncMetadata");
  TVMFFIAny args[1], rv;
  REQUIRE(f != NULL);
  REQUIRE(meta != NULL);
  REQUIRE_OK(set_global(name, f, 0));
  args[0] = tffi_raw_str(name);
  if (CHECK_OK(tffi_call(meta, args, 1, &rv))) {
    /* Plain SetGlobal stores no metadata: the empty string. */
    CHECK_ANY_STR(&rv, "");
    tffi_any_release(&rv);
  }
  args[0] = tffi_raw_str("anyffi_ctest.registry.no_such_function");
  CHECK_RAISES(tffi_call(meta, args, 1, &rv), "RuntimeError", "not found");
  CHECK_EQ(remove_global(name), 1);
  CHECK_OK(TVMFFIObjectDecRef(meta));
  CHECK_OK(TVMFFIObjectDecRef(f));
}

TEST(registry_ffi_shape) {
  void* shape_fn = tffi_get_global("ffi.Shape");
  TVMFFIAny args[3], rv;
  const TVMFFIShapeCell* cell;
  REQUIRE(shape_fn != NULL);
  args[0] = tffi_int(1);
  args[1] = tffi_int(2);
  args[2] = tffi_int(3);
  if (CHECK_OK(tffi_call(shape_fn, args, 3, &rv))) {
    CHECK_EQ(rv.type_index, kTVMFFIShape);
    if (rv.type_index == kTVMFFIShape) {
      CHECK_EQ(tffi_type_index(rv.v_obj), kTVMFFIShape);
      CHECK_EQ(tffi_strong(rv.v_obj), 1);
      cell = (const TVMFFIShapeCell*)tffi_cell(rv.v_obj);
      CHECK_EQ(cell->size, 3);
      if (cell->size == 3 && cell->data != NULL) {
        CHECK_EQ(cell->data[0], 1);
        CHECK_EQ(cell->data[1], 2);
        CHECK_EQ(cell->data[2], 3);
      }
    }
    tffi_any_release(&rv);
  }
  /* Zero arguments: an empty shape. */
  if (CHECK_OK(tffi_call(shape_fn, NULL, 0, &rv))) {
    CHECK_EQ(rv.type_index, kTVMFFIShape);
    if (rv.type_index == kTVMFFIShape) {
      CHECK_EQ(((const TVMFFIShapeCell*)tffi_cell(rv.v_obj))->size, 0);
    }
    tffi_any_release(&rv);
  }
  CHECK_OK(TVMFFIObjectDecRef(shape_fn));
}

TEST(registry_ffi_shape_rejects_non_int) {
  void* shape_fn = tffi_get_global("ffi.Shape");
  TVMFFIAny args[2], rv;
  REQUIRE(shape_fn != NULL);
  args[0] = tffi_int(4);
  args[1] = tffi_raw_str("five");
  CHECK_RAISES(tffi_call(shape_fn, args, 2, &rv), "ValueError", NULL);
  CHECK_EQ(rv.type_index, kTVMFFINone);
  args[1] = tffi_float(2.5);
  CHECK_RAISES(tffi_call(shape_fn, args, 2, &rv), "ValueError", NULL);
  args[1] = tffi_none();
  CHECK_RAISES(tffi_call(shape_fn, args, 2, &rv), "ValueError", NULL);
  CHECK_OK(TVMFFIObjectDecRef(shape_fn));
}

TEST(registry_ffi_string_identity) {
  void* fn = tffi_get_global("ffi.String");
  TVMFFIAny str = tffi_make_string("identity of a heap string");
  TVMFFIAny args[1], rv;
  REQUIRE(fn != NULL);
  REQUIRE_EQ(str.type_index, kTVMFFIStr);
  args[0] = str;
  if (CHECK_OK(tffi_call(fn, args, 1, &rv))) {
    CHECK_EQ(rv.type_index, kTVMFFIStr);
    CHECK_PTR_EQ(rv.v_obj, str.v_obj); /* the same object, one more reference */
    CHECK_EQ(tffi_strong(str.v_obj), 2);
    tffi_any_release(&rv);
  }
  args[0] = tffi_raw_str("small");
  if (CHECK_OK(tffi_call(fn, args, 1, &rv))) {
    CHECK_ANY_STR(&rv, "small");
    tffi_any_release(&rv);
  }
  args[0] = tffi_raw_str("a raw string that needs the heap");
  if (CHECK_OK(tffi_call(fn, args, 1, &rv))) {
    CHECK_ANY_STR(&rv, "a raw string that needs the heap");
    tffi_any_release(&rv);
  }
  tffi_any_release(&str);
  CHECK_OK(TVMFFIObjectDecRef(fn));
}

TEST(registry_ffi_bytes_identity) {
  void* fn = tffi_get_global("ffi.Bytes");
  TVMFFIByteArray src = tffi_ba("bytes object for identity");
  TVMFFIAny bytes = tffi_none();
  TVMFFIAny args[1], rv;
  TVMFFIByteArray got;
  REQUIRE(fn != NULL);
  REQUIRE_OK(TVMFFIBytesFromByteArray(&src, &bytes));
  REQUIRE_EQ(bytes.type_index, kTVMFFIBytes);
  args[0] = bytes;
  if (CHECK_OK(tffi_call(fn, args, 1, &rv))) {
    CHECK_EQ(rv.type_index, kTVMFFIBytes);
    CHECK_PTR_EQ(rv.v_obj, bytes.v_obj);
    tffi_any_release(&rv);
  }
  /* A ByteArrayPtr view becomes owned bytes. */
  args[0] = tffi_none();
  args[0].type_index = kTVMFFIByteArrayPtr;
  args[0].v_ptr = &src;
  if (CHECK_OK(tffi_call(fn, args, 1, &rv))) {
    CHECK(tffi_any_string_view(&rv, &got, 1) &&
          (rv.type_index == kTVMFFIBytes || rv.type_index == kTVMFFISmallBytes));
    if (tffi_any_string_view(&rv, &got, 1)) CHECK_BYTES(got.data, got.size, src.data);
    tffi_any_release(&rv);
  }
  tffi_any_release(&bytes);
  CHECK_OK(TVMFFIObjectDecRef(fn));
}
