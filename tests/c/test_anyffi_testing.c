/*
 * test_anyffi_testing.c: our own test helpers registered as global functions
 * `anyffi.testing.*`. The official library does not have them, so each test
 * is SKIPPED when its function is not registered.
 *
 *   anyffi.testing.nop(*args) -> None
 *   anyffi.testing.echo(x) -> x
 *   anyffi.testing.add_one(int) -> int
 *   anyffi.testing.apply(f, *args) -> f(*args)
 *   anyffi.testing.raise_error(kind: str, message: str) -> raises Error(kind, message)
 */
#include "tffi_test.h"

#define GET_OR_SKIP(var, name)                                   \
  void* var = tffi_get_global(name);                             \
  do {                                                           \
    if (var == NULL) SKIP(name " is not registered");            \
  } while (0)

TEST(anyffi_testing_nop) {
  TVMFFIAny args[3], rv;
  GET_OR_SKIP(f, "anyffi.testing.nop");
  CHECK_OK(tffi_call(f, NULL, 0, &rv));
  CHECK_EQ(rv.type_index, kTVMFFINone);
  args[0] = tffi_int(1);
  args[1] = tffi_raw_str("two");
  args[2] = tffi_float(3.0);
  CHECK_OK(tffi_call(f, args, 3, &rv));
  CHECK_EQ(rv.type_index, kTVMFFINone);
  TVMFFIObjectDecRef(f);
}

TEST(anyffi_testing_echo) {
  TVMFFIAny args[1], rv;
  TVMFFIAny str;
  GET_OR_SKIP(f, "anyffi.testing.echo");
  args[0] = tffi_int(-77);
  if (CHECK_OK(tffi_call(f, args, 1, &rv))) {
    CHECK_EQ(rv.type_index, kTVMFFIInt);
    CHECK_EQ(rv.v_int64, -77);
  }
  args[0] = tffi_float(2.5);
  if (CHECK_OK(tffi_call(f, args, 1, &rv))) {
    CHECK_EQ(rv.type_index, kTVMFFIFloat);
    CHECK(rv.v_float64 == 2.5);
  }
  args[0] = tffi_bool(1);
  if (CHECK_OK(tffi_call(f, args, 1, &rv))) {
    CHECK_EQ(rv.type_index, kTVMFFIBool);
    CHECK_EQ(rv.v_int64, 1);
  }
  args[0] = tffi_none();
  if (CHECK_OK(tffi_call(f, args, 1, &rv))) CHECK_EQ(rv.type_index, kTVMFFINone);
  /* A RawStr view comes back as an owned string. */
  args[0] = tffi_raw_str("echo me, I am long");
  if (CHECK_OK(tffi_call(f, args, 1, &rv))) {
    CHECK_ANY_STR(&rv, "echo me, I am long");
    tffi_any_release(&rv);
  }
  /* An object comes back as the same object with one more reference. */
  str = tffi_make_string("the very same object");
  REQUIRE_EQ(str.type_index, kTVMFFIStr);
  args[0] = str;
  if (CHECK_OK(tffi_call(f, args, 1, &rv))) {
    CHECK_EQ(rv.type_index, kTVMFFIStr);
    CHECK_PTR_EQ(rv.v_obj, str.v_obj);
    CHECK_EQ(tffi_strong(str.v_obj), 2);
    tffi_any_release(&rv);
  }
  CHECK_EQ(tffi_strong(str.v_obj), 1);
  tffi_any_release(&str);
  TVMFFIObjectDecRef(f);
}

TEST(anyffi_testing_add_one) {
  TVMFFIAny args[1], rv;
  GET_OR_SKIP(f, "anyffi.testing.add_one");
  args[0] = tffi_int(41);
  if (CHECK_OK(tffi_call(f, args, 1, &rv))) {
    CHECK_EQ(rv.type_index, kTVMFFIInt);
    CHECK_EQ(rv.v_int64, 42);
  }
  args[0] = tffi_int(-1);
  if (CHECK_OK(tffi_call(f, args, 1, &rv))) CHECK_EQ(rv.v_int64, 0);
  args[0] = tffi_raw_str("not an int");
  CHECK_RAISES(tffi_call(f, args, 1, &rv), "TypeError", NULL);
  CHECK_EQ(rv.type_index, kTVMFFINone);
  CHECK_RAISES(tffi_call(f, NULL, 0, &rv), "TypeError", NULL);
  TVMFFIObjectDecRef(f);
}

static int sum_safe_call(void* handle, const TVMFFIAny* args, int32_t n, TVMFFIAny* rv) {
  int64_t s = 0;
  int32_t i;
  for (i = 0; i < n; ++i) {
    if (args[i].type_index != kTVMFFIInt) {
      TVMFFIErrorSetRaisedFromCStr("TypeError", "sum expects ints");
      return -1;
    }
    s += args[i].v_int64;
  }
  rv->type_index = kTVMFFIInt;
  rv->zero_padding = 0;
  rv->v_int64 = s;
  return 0;
}

TEST(anyffi_testing_apply) {
  TVMFFIAny args[4], rv;
  void* sum = NULL;
  GET_OR_SKIP(f, "anyffi.testing.apply");
  REQUIRE_OK(TVMFFIFunctionCreate(NULL, sum_safe_call, NULL, &sum));
  args[0] = tffi_obj_view(sum);
  args[1] = tffi_int(1);
  args[2] = tffi_int(2);
  args[3] = tffi_int(39);
  if (CHECK_OK(tffi_call(f, args, 4, &rv))) {
    CHECK_EQ(rv.type_index, kTVMFFIInt);
    CHECK_EQ(rv.v_int64, 42);
  }
  if (CHECK_OK(tffi_call(f, args, 1, &rv))) CHECK_EQ(rv.v_int64, 0);
  /* Errors raised by the applied function propagate with their kind. */
  args[2] = tffi_raw_str("x");
  CHECK_RAISES(tffi_call(f, args, 3, &rv), "TypeError", "sum expects ints");
  /* apply(apply, sum, 5) nests. */
  args[0] = tffi_obj_view(f);
  args[1] = tffi_obj_view(sum);
  args[2] = tffi_int(5);
  if (CHECK_OK(tffi_call(f, args, 3, &rv))) CHECK_EQ(rv.v_int64, 5);
  CHECK_EQ(tffi_strong(sum), 1);
  TVMFFIObjectDecRef(sum);
  TVMFFIObjectDecRef(f);
}

TEST(anyffi_testing_raise_error) {
  TVMFFIAny args[2], rv;
  GET_OR_SKIP(f, "anyffi.testing.raise_error");
  args[0] = tffi_raw_str("ValueError");
  args[1] = tffi_raw_str("this is the message");
  CHECK_RAISES(tffi_call(f, args, 2, &rv), "ValueError", "this is the message");
  CHECK_EQ(rv.type_index, kTVMFFINone);
  args[0] = tffi_raw_str("SomeCustomError");
  args[1] = tffi_raw_str("");
  CHECK_RAISES(tffi_call(f, args, 2, &rv), "SomeCustomError", NULL);
  TVMFFIObjectDecRef(f);
}
