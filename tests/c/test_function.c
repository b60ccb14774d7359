/*
 * test_function.c: TVMFFIFunctionCreate / TVMFFIFunctionCall, the self and
 * deleter protocol, results and error propagation (spec §1.2, §5).
 */
#include "tffi_test.h"

typedef struct {
  int calls;
  void* handle_seen;
  int32_t num_args_seen;
  int deleter_calls;
  void* deleter_arg;
} FnState;

static FnState g_state;

/* Records its call, returns the sum of Int arguments (or None with 0 args). */
static int recording_safe_call(void* handle, const TVMFFIAny* args, int32_t n, TVMFFIAny* rv) {
  int64_t sum = 0;
  int32_t i;
  ++g_state.calls;
  g_state.handle_seen = handle;
  g_state.num_args_seen = n;
  if (n == 0) return 0; /* leave rv as None */
  for (i = 0; i < n; ++i) {
    if (args[i].type_index != kTVMFFIInt) {
      TVMFFIErrorSetRaisedFromCStr("TypeError", "recording_safe_call expects ints");
      return -1;
    }
    sum += args[i].v_int64;
  }
  rv->type_index = kTVMFFIInt;
  rv->zero_padding = 0;
  rv->v_int64 = sum;
  return 0;
}

static void recording_deleter(void* self) {
  ++g_state.deleter_calls;
  g_state.deleter_arg = self;
}

TEST(function_create_with_self_and_deleter) {
  int self_token = 7;
  void* f = NULL;
  TVMFFIFunctionCell* cell;
  TVMFFIAny args[2], rv;
  memset(&g_state, 0, sizeof(g_state));
  REQUIRE_OK(TVMFFIFunctionCreate(&self_token, recording_safe_call, recording_deleter, &f));
  REQUIRE(f != NULL);
  CHECK_EQ(tffi_type_index(f), kTVMFFIFunction);
  CHECK_EQ_HEX(tffi_refcount(f), 0x0000000100000001ULL);
  cell = (TVMFFIFunctionCell*)tffi_cell(f);
  CHECK(cell->safe_call != NULL);
  CHECK(cell->cpp_call == NULL);

  args[0] = tffi_int(40);
  args[1] = tffi_int(2);
  CHECK_OK(tffi_call(f, args, 2, &rv));
  CHECK_EQ(g_state.calls, 1);
  CHECK_PTR_EQ(g_state.handle_seen, &self_token); /* safe_call receives self */
  CHECK_EQ(g_state.num_args_seen, 2);
  CHECK_EQ(rv.type_index, kTVMFFIInt);
  CHECK_EQ(rv.v_int64, 42);

  /* Calling through the cell directly is the same thing (spec §5.1). */
  rv = tffi_none();
  CHECK_OK(cell->safe_call(f, args, 1, &rv));
  CHECK_EQ(g_state.calls, 2);
  CHECK_PTR_EQ(g_state.handle_seen, &self_token);
  CHECK_EQ(rv.v_int64, 40);

  /* The deleter runs exactly once, with self, on the last DecRef only. */
  CHECK_OK(TVMFFIObjectIncRef(f));
  CHECK_OK(TVMFFIObjectDecRef(f));
  CHECK_EQ(g_state.deleter_calls, 0);
  CHECK_OK(TVMFFIObjectDecRef(f));
  CHECK_EQ(g_state.deleter_calls, 1);
  CHECK_PTR_EQ(g_state.deleter_arg, &self_token);
}

TEST(function_create_null_self_null_deleter) {
  void* f = NULL;
  TVMFFIFunctionCell* cell;
  TVMFFIAny rv;
  memset(&g_state, 0, sizeof(g_state));
  REQUIRE_OK(TVMFFIFunctionCreate(NULL, recording_safe_call, NULL, &f));
  REQUIRE(f != NULL);
  cell = (TVMFFIFunctionCell*)tffi_cell(f);
  CHECK(cell->cpp_call == NULL);
  CHECK_OK(tffi_call(f, NULL, 0, &rv));
  CHECK_EQ(g_state.calls, 1);
  /* safe_call receives the function handle itself. */
  CHECK_PTR_EQ(g_state.handle_seen, f);
  CHECK_EQ(g_state.num_args_seen, 0);
  CHECK_EQ(rv.type_index, kTVMFFINone);
  CHECK_OK(TVMFFIObjectDecRef(f));
  CHECK_EQ(g_state.deleter_calls, 0);
}

TEST(function_create_self_without_deleter) {
  int self_token = 3;
  void* f = NULL;
  TVMFFIAny args[1], rv;
  memset(&g_state, 0, sizeof(g_state));
  REQUIRE_OK(TVMFFIFunctionCreate(&self_token, recording_safe_call, NULL, &f));
  REQUIRE(f != NULL);
  args[0] = tffi_int(5);
  CHECK_OK(tffi_call(f, args, 1, &rv));
  CHECK_PTR_EQ(g_state.handle_seen, &self_token);
  CHECK_EQ(rv.v_int64, 5);
  CHECK_OK(TVMFFIObjectDecRef(f));
}

TEST(function_create_null_self_with_deleter) {
  /* self == NULL but a deleter: the trampoline path, deleter(NULL) once. */
  void* f = NULL;
  TVMFFIAny rv;
  memset(&g_state, 0, sizeof(g_state));
  g_state.deleter_arg = (void*)0x1;
  REQUIRE_OK(TVMFFIFunctionCreate(NULL, recording_safe_call, recording_deleter, &f));
  REQUIRE(f != NULL);
  CHECK_OK(tffi_call(f, NULL, 0, &rv));
  CHECK(g_state.handle_seen == NULL);
  CHECK_OK(TVMFFIObjectDecRef(f));
  CHECK_EQ(g_state.deleter_calls, 1);
  CHECK(g_state.deleter_arg == NULL);
}

static int failing_safe_call(void* handle, const TVMFFIAny* args, int32_t n, TVMFFIAny* rv) {
  TVMFFIErrorSetRaisedFromCStr("IndexError", "index 9 out of range");
  return -1;
}

TEST(function_error_propagates) {
  void* f = NULL;
  TVMFFIAny args[1], rv;
  REQUIRE_OK(TVMFFIFunctionCreate(NULL, failing_safe_call, NULL, &f));
  CHECK_RAISES(tffi_call(f, NULL, 0, &rv), "IndexError", "index 9 out of range");
  CHECK_EQ(rv.type_index, kTVMFFINone);
  CHECK_OK(TVMFFIObjectDecRef(f));

  /* An error raised by the callee's own argument checking. */
  REQUIRE_OK(TVMFFIFunctionCreate(NULL, recording_safe_call, NULL, &f));
  args[0] = tffi_float(1.5);
  CHECK_RAISES(tffi_call(f, args, 1, &rv), "TypeError", "expects ints");
  CHECK_OK(TVMFFIObjectDecRef(f));
}

static int string_returning_safe_call(void* handle, const TVMFFIAny* args, int32_t n,
                                      TVMFFIAny* rv) {
  TVMFFIByteArray ba = tffi_ba("returned string object");
  return TVMFFIStringFromByteArray(&ba, rv);
}

TEST(function_returns_owned_object) {
  void* f = NULL;
  TVMFFIAny rv;
  REQUIRE_OK(TVMFFIFunctionCreate(NULL, string_returning_safe_call, NULL, &f));
  REQUIRE_OK(tffi_call(f, NULL, 0, &rv));
  CHECK_ANY_STR(&rv, "returned string object");
  if (rv.type_index == kTVMFFIStr) CHECK_EQ(tffi_strong(rv.v_obj), 1);
  tffi_any_release(&rv);
  CHECK_OK(TVMFFIObjectDecRef(f));
}

/* Calls the function passed as args[0] with the remaining arguments. */
static int apply_safe_call(void* handle, const TVMFFIAny* args, int32_t n, TVMFFIAny* rv) {
  if (n < 1 || args[0].type_index != kTVMFFIFunction) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "apply expects a function");
    return -1;
  }
  return TVMFFIFunctionCall(args[0].v_obj, (TVMFFIAny*)args + 1, n - 1, rv);
}

TEST(function_passed_as_argument) {
  void* apply = NULL;
  void* inner = NULL;
  TVMFFIAny args[3], rv;
  memset(&g_state, 0, sizeof(g_state));
  REQUIRE_OK(TVMFFIFunctionCreate(NULL, apply_safe_call, NULL, &apply));
  REQUIRE_OK(TVMFFIFunctionCreate(NULL, recording_safe_call, NULL, &inner));
  args[0] = tffi_obj_view(inner);
  args[1] = tffi_int(10);
  args[2] = tffi_int(-3);
  CHECK_OK(tffi_call(apply, args, 3, &rv));
  CHECK_EQ(rv.type_index, kTVMFFIInt);
  CHECK_EQ(rv.v_int64, 7);
  CHECK_PTR_EQ(g_state.handle_seen, inner);
  /* Errors travel back through the outer call. */
  REQUIRE_OK(TVMFFIObjectDecRef(inner));
  REQUIRE_OK(TVMFFIFunctionCreate(NULL, failing_safe_call, NULL, &inner));
  args[0] = tffi_obj_view(inner);
  CHECK_RAISES(tffi_call(apply, args, 1, &rv), "IndexError", NULL);
  CHECK_OK(TVMFFIObjectDecRef(inner));
  CHECK_OK(TVMFFIObjectDecRef(apply));
}
