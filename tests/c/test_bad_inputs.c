/*
 * test_bad_inputs.c: wrong inputs to built-in functions and C entry points
 * must fail with -1 and an ffi.Error of the right kind, never crash, and leave
 * the result slot as None. (Malformed dtype strings and DLPack tensors are in
 * test_dtype.c and test_dlpack.c.)
 */
#include "tffi_test.h"

/* Call global `name` with args; expect -1 with `kind`; result must stay None. */
static void expect_call_raises(const char* file, int line, const char* name, TVMFFIAny* args,
                               int32_t n, const char* kind, const char* msg_substr) {
  void* f = tffi_get_global(name);
  TVMFFIAny rv;
  if (f == NULL) {
    tffi_fail(file, line, "global %s is missing", name);
    return;
  }
  if (!tffi_check_raises(file, line, name, tffi_call(f, args, n, &rv), kind, msg_substr)) {
    printf("      (calling %s with %d args)\n", name, n);
  }
  if (rv.type_index != kTVMFFINone) {
    tffi_fail(file, line, "%s: result is type %d after a failed call, expected None", name,
              rv.type_index);
    tffi_any_release(&rv);
  }
  TVMFFIObjectDecRef(f);
}
#define EXPECT_CALL_RAISES(name, args, n, kind, msg) \
  expect_call_raises(__FILE__, __LINE__, name, args, n, kind, msg)

TEST(bad_ffi_shape_arguments) {
  TVMFFIAny args[2];
  int64_t two_pow_63[2] = {INT64_MIN, 0};
  TVMFFIByteArray ba;
  TVMFFIAny big = tffi_none();
  args[0] = tffi_raw_str("not an int");
  EXPECT_CALL_RAISES("ffi.Shape", args, 1, "ValueError", NULL);
  args[0] = tffi_float(1.0);
  EXPECT_CALL_RAISES("ffi.Shape", args, 1, "ValueError", NULL);
  args[0] = tffi_int(1);
  args[1] = tffi_opaque_ptr(args);
  EXPECT_CALL_RAISES("ffi.Shape", args, 2, "ValueError", NULL);
  /* An integer beyond int64 does not fit a shape. */
  ba.data = (const char*)two_pow_63;
  ba.size = sizeof(two_pow_63);
  REQUIRE_OK(TVMFFIBigIntFromByteArray(&ba, &big));
  REQUIRE_EQ(big.type_index, kTVMFFIBigInt);
  args[1] = big;
  EXPECT_CALL_RAISES("ffi.Shape", args, 2, "ValueError", NULL);
  tffi_any_release(&big);
}

TEST(bad_typed_function_arguments) {
  TVMFFIAny args[2];
  /* Wrong argument type to typed built-ins: TypeError. */
  args[0] = tffi_int(3);
  EXPECT_CALL_RAISES("ffi.String", args, 1, "TypeError", NULL);
  EXPECT_CALL_RAISES("ffi.Bytes", args, 1, "TypeError", NULL);
  EXPECT_CALL_RAISES("ffi.FunctionRemoveGlobal", args, 1, "TypeError", NULL);
  EXPECT_CALL_RAISES("ffi.GetGlobalFuncMetadata", args, 1, "TypeError", NULL);
  args[0] = tffi_none();
  EXPECT_CALL_RAISES("ffi.String", args, 1, "TypeError", NULL);
  /* Wrong number of arguments: TypeError. */
  EXPECT_CALL_RAISES("ffi.String", args, 0, "TypeError", NULL);
  args[0] = tffi_raw_str("a");
  args[1] = tffi_raw_str("b");
  EXPECT_CALL_RAISES("ffi.String", args, 2, "TypeError", NULL);
  EXPECT_CALL_RAISES("ffi.FunctionListGlobalNamesFunctor", args, 1, "TypeError", NULL);
}

TEST(bad_list_global_names_functor_index) {
  void* lister = tffi_get_global("ffi.FunctionListGlobalNamesFunctor");
  TVMFFIAny rv, args[1];
  void* g;
  int64_t n;
  REQUIRE(lister != NULL);
  REQUIRE_OK(tffi_call(lister, NULL, 0, &rv));
  REQUIRE_EQ(rv.type_index, kTVMFFIFunction);
  g = rv.v_obj;
  args[0] = tffi_int(-1);
  if (CHECK_OK(tffi_call(g, args, 1, &rv))) {
    n = rv.v_int64;
    args[0] = tffi_int(n + 100);
    CHECK_RAISES(tffi_call(g, args, 1, &rv), "IndexError", NULL);
    CHECK_EQ(rv.type_index, kTVMFFINone);
  }
  args[0] = tffi_raw_str("zero");
  CHECK_RAISES(tffi_call(g, args, 1, &rv), "TypeError", NULL);
  TVMFFIObjectDecRef(g);
  TVMFFIObjectDecRef(lister);
}

TEST(bad_c_entry_points) {
  TVMFFIByteArray ba;
  TVMFFIAny out = tffi_none();
  DLDataType dt;
  char odd[5] = {1, 2, 3, 4, 5};
  /* Each of these must fail cleanly (covered in detail elsewhere). */
  ba.data = odd;
  ba.size = 5;
  CHECK_RAISES(TVMFFIBigIntFromByteArray(&ba, &out), "ValueError", NULL);
  ba = tffi_ba("notatype");
  CHECK_RAISES(TVMFFIDataTypeFromString(&ba, &dt), "ValueError", "notatype");
  CHECK_RAISES(TVMFFIEnvRegisterCAPI("PyErr_Bogus", NULL), "ValueError", NULL);
  {
    void* obj = NULL;
    CHECK_RAISES(TVMFFIObjectCreateOpaque(NULL, kTVMFFIStr, NULL, &obj), "RuntimeError", NULL);
  }
  {
    TVMFFIByteArray key = tffi_ba("anyffi_ctest.bad.NoSuchKey");
    int32_t ti;
    /* the official wording, on both libraries */
    CHECK_RAISES(TVMFFITypeKeyToIndex(&key, &ti), "InternalError",
                 "Check failed: (it != type_key2index_.end()) is false: Cannot find type `anyffi_ctest.bad.NoSuchKey`");
  }
}
