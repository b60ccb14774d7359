/*
 * test_env.c: c_env_api.h (streams, DLPack allocator, env C API registry,
 * signal checks) and TVMFFIHandleInitOnce/DeinitOnce (spec §1.2, §7.3, §7.4),
 * plus per-thread state (streams, error slot).
 */
#include <pthread.h>
#include <stdlib.h>

#include "tffi_test.h"

/* ---- streams -------------------------------------------------------------- */

TEST(env_stream_set_get_per_device) {
  int a, b, c;
  void* prev = (void*)0x1;
  CHECK(TVMFFIEnvGetStream(kDLCUDA, 0) == NULL);
  CHECK(TVMFFIEnvGetStream(kDLCUDA, 5) == NULL);
  CHECK_OK(TVMFFIEnvSetStream(kDLCUDA, 0, &a, &prev));
  CHECK(prev == NULL);
  CHECK_PTR_EQ(TVMFFIEnvGetStream(kDLCUDA, 0), &a);
  CHECK_OK(TVMFFIEnvSetStream(kDLCUDA, 0, &b, &prev));
  CHECK_PTR_EQ(prev, &a);
  /* opt_out_prev may be NULL. */
  CHECK_OK(TVMFFIEnvSetStream(kDLCUDA, 3, &c, NULL));
  CHECK_PTR_EQ(TVMFFIEnvGetStream(kDLCUDA, 3), &c);
  CHECK_PTR_EQ(TVMFFIEnvGetStream(kDLCUDA, 0), &b);
  /* Keyed by (device type, device id). */
  CHECK(TVMFFIEnvGetStream(kDLCUDA, 1) == NULL);
  CHECK(TVMFFIEnvGetStream(kDLROCM, 0) == NULL);
  CHECK(TVMFFIEnvGetStream(kDLCPU, 0) == NULL);
  /* Restore. */
  CHECK_OK(TVMFFIEnvSetStream(kDLCUDA, 0, NULL, &prev));
  CHECK_PTR_EQ(prev, &b);
  CHECK_OK(TVMFFIEnvSetStream(kDLCUDA, 3, NULL, NULL));
  CHECK(TVMFFIEnvGetStream(kDLCUDA, 0) == NULL);
  CHECK(TVMFFIEnvGetStream(kDLCUDA, 3) == NULL);
}

typedef struct {
  void* seen_before;
  void* seen_after;
  void* prev;
  int set_rc;
  void* pending_error_seen;
  int own_error_ok;
} ThreadResult;

static int g_thread_stream_token;

static void* stream_thread_main(void* arg) {
  ThreadResult* r = (ThreadResult*)arg;
  void* err = NULL;
  r->seen_before = TVMFFIEnvGetStream(kDLCUDA, 0);
  r->set_rc = TVMFFIEnvSetStream(kDLCUDA, 0, &g_thread_stream_token, &r->prev);
  r->seen_after = TVMFFIEnvGetStream(kDLCUDA, 0);
  /* The error slot is per thread: the main thread's pending error is invisible. */
  TVMFFIErrorMoveFromRaised(&err);
  r->pending_error_seen = err;
  if (err != NULL) TVMFFIObjectDecRef(err);
  /* An error raised here stays here. */
  TVMFFIErrorSetRaisedFromCStr("ValueError", "thread-local");
  err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  if (err != NULL) {
    const TVMFFIErrorCell* cell = (const TVMFFIErrorCell*)tffi_cell(err);
    r->own_error_ok = cell->message.size == 12 && memcmp(cell->message.data, "thread-local", 12) == 0;
    TVMFFIObjectDecRef(err);
  }
  return NULL;
}

TEST(env_stream_and_error_slot_are_per_thread) {
  int mine;
  pthread_t th;
  ThreadResult r;
  void* err = NULL;
  memset(&r, 0, sizeof(r));
  REQUIRE_OK(TVMFFIEnvSetStream(kDLCUDA, 0, &mine, NULL));
  TVMFFIErrorSetRaisedFromCStr("RuntimeError", "main-thread error");
  REQUIRE_EQ(pthread_create(&th, NULL, stream_thread_main, &r), 0);
  pthread_join(th, NULL);
  CHECK(r.seen_before == NULL);
  CHECK_EQ(r.set_rc, 0);
  CHECK(r.prev == NULL);
  CHECK_PTR_EQ(r.seen_after, &g_thread_stream_token);
  CHECK(r.pending_error_seen == NULL);
  CHECK(r.own_error_ok);
  /* Main thread state untouched by the other thread. */
  CHECK_PTR_EQ(TVMFFIEnvGetStream(kDLCUDA, 0), &mine);
  TVMFFIErrorMoveFromRaised(&err);
  REQUIRE(err != NULL);
  CHECK_BA(((TVMFFIErrorCell*)tffi_cell(err))->message, "main-thread error");
  TVMFFIObjectDecRef(err);
  CHECK_OK(TVMFFIEnvSetStream(kDLCUDA, 0, NULL, NULL));
}

/* ---- InitOnce / DeinitOnce ------------------------------------------------ */

static int g_init_calls, g_deinit_calls;
static void* g_deinit_arg;
static int g_handle_token;

static int init_ok(void** out) {
  ++g_init_calls;
  *out = &g_handle_token;
  return 0;
}
static int init_null(void** out) {
  ++g_init_calls;
  *out = NULL;
  return 0;
}
static int init_fails(void** out) {
  ++g_init_calls;
  TVMFFIErrorSetRaisedFromCStr("TypeError", "init failed on purpose");
  return -1;
}
static int deinit_rc5(void* h) {
  ++g_deinit_calls;
  g_deinit_arg = h;
  return 5;
}
static int deinit_ok(void* h) {
  ++g_deinit_calls;
  g_deinit_arg = h;
  return 0;
}

TEST(handle_init_once_and_deinit_once) {
  void* handle = NULL;
  g_init_calls = g_deinit_calls = 0;
  CHECK_OK(TVMFFIHandleInitOnce(&handle, init_ok));
  CHECK_PTR_EQ(handle, &g_handle_token);
  CHECK_EQ(g_init_calls, 1);
  /* Already initialised: init is not called again. */
  CHECK_OK(TVMFFIHandleInitOnce(&handle, init_ok));
  CHECK_OK(TVMFFIHandleInitOnce(&handle, init_null));
  CHECK_EQ(g_init_calls, 1);
  CHECK_PTR_EQ(handle, &g_handle_token);

  /* Deinit returns deinit's rc, clears the handle; a second deinit is a no-op. */
  CHECK_EQ(TVMFFIHandleDeinitOnce(&handle, deinit_rc5), 5);
  CHECK_EQ(g_deinit_calls, 1);
  CHECK_PTR_EQ(g_deinit_arg, &g_handle_token);
  CHECK(handle == NULL);
  CHECK_EQ(TVMFFIHandleDeinitOnce(&handle, deinit_ok), 0);
  CHECK_EQ(g_deinit_calls, 1);

  /* Can be initialised again after deinit. */
  CHECK_OK(TVMFFIHandleInitOnce(&handle, init_ok));
  CHECK_EQ(g_init_calls, 2);
  CHECK_EQ(TVMFFIHandleDeinitOnce(&handle, deinit_ok), 0);
  CHECK_EQ(g_deinit_calls, 2);
}

TEST(handle_init_once_failures) {
  void* handle = NULL;
  g_init_calls = 0;
  /* init returning NULL with rc 0. */
  CHECK_RAISES(TVMFFIHandleInitOnce(&handle, init_null), "RuntimeError", "non-NULL");
  CHECK(handle == NULL);
  /* init's own failure is propagated as is. */
  CHECK_RAISES(TVMFFIHandleInitOnce(&handle, init_fails), "TypeError", "on purpose");
  CHECK(handle == NULL);
  CHECK_EQ(g_init_calls, 2);
}

/* ---- env C API registry and signals --------------------------------------- */

static int g_check_calls, g_ensure_calls, g_release_calls, g_check_rc;
static void* g_release_arg;
static int fake_check_signals(void) {
  ++g_check_calls;
  return g_check_rc;
}
/* Python's PyGILState_Ensure returns an int enum (PyGILState_UNLOCKED == 1);
 * the library stores it as an opaque value and hands it back to Release. */
static void* fake_gil_ensure(void) {
  ++g_ensure_calls;
  return (void*)(uintptr_t)1;
}
static void fake_gil_release(void* state) {
  ++g_release_calls;
  g_release_arg = state;
}

TEST(env_register_capi_unknown_name) {
  CHECK_RAISES(TVMFFIEnvRegisterCAPI("NotAnEnvApi", (void*)fake_check_signals), "ValueError",
               "NotAnEnvApi");
  CHECK_RAISES(TVMFFIEnvRegisterCAPI("", NULL), "ValueError", NULL);
}

TEST(env_check_signals) {
  /* Nothing registered: 0. */
  CHECK_EQ(TVMFFIEnvCheckSignals(), 0);
  g_check_calls = g_ensure_calls = g_release_calls = 0;
  REQUIRE_OK(TVMFFIEnvRegisterCAPI("PyGILState_Ensure", (void*)fake_gil_ensure));
  REQUIRE_OK(TVMFFIEnvRegisterCAPI("PyGILState_Release", (void*)fake_gil_release));
  REQUIRE_OK(TVMFFIEnvRegisterCAPI("PyErr_CheckSignals", (void*)fake_check_signals));
  g_check_rc = 0;
  CHECK_EQ(TVMFFIEnvCheckSignals(), 0);
  CHECK_EQ(g_check_calls, 1);
  CHECK_EQ(g_ensure_calls, 1);
  CHECK_EQ(g_release_calls, 1);
  CHECK_EQ((uintptr_t)g_release_arg & 0xFFFFFFFFu, 1); /* the state from Ensure */
  /* A pending signal: -1 without a TLS error. */
  g_check_rc = -1;
  CHECK_EQ(TVMFFIEnvCheckSignals(), -1);
  CHECK_EQ(g_check_calls, 2);
  CHECK_EQ(g_release_calls, 2);
  CHECK_NO_PENDING_ERROR();
  /* Registering NULL unregisters. */
  CHECK_OK(TVMFFIEnvRegisterCAPI("PyErr_CheckSignals", NULL));
  CHECK_OK(TVMFFIEnvRegisterCAPI("PyGILState_Ensure", NULL));
  CHECK_OK(TVMFFIEnvRegisterCAPI("PyGILState_Release", NULL));
  CHECK_EQ(TVMFFIEnvCheckSignals(), 0);
  CHECK_EQ(g_check_calls, 2);
}

/* ---- DLPack managed tensor allocator -------------------------------------- */

typedef struct {
  DLManagedTensorVersioned mt;
  int64_t shape[4];
  void* data;
} AllocBlock;

static int g_alloc_calls, g_alloc_frees;

static void alloc_block_deleter(DLManagedTensorVersioned* self) {
  AllocBlock* b = (AllocBlock*)self->manager_ctx;
  ++g_alloc_frees;
  free(b->data);
  free(b);
}

static int test_allocator(DLTensor* proto, DLManagedTensorVersioned** out, void* error_ctx,
                          void (*set_error)(void*, const char*, const char*)) {
  AllocBlock* b;
  int i;
  size_t n = 1;
  ++g_alloc_calls;
  if (proto->ndim > 4) {
    set_error(error_ctx, "ValueError", "test allocator supports ndim <= 4");
    return -1;
  }
  b = (AllocBlock*)calloc(1, sizeof(AllocBlock));
  if (b == NULL) return -1;
  for (i = 0; i < proto->ndim; ++i) {
    b->shape[i] = proto->shape[i];
    n *= (size_t)proto->shape[i];
  }
  b->data = calloc(n == 0 ? 1 : n, (proto->dtype.bits * proto->dtype.lanes + 7) / 8);
  b->mt.version.major = DLPACK_MAJOR_VERSION;
  b->mt.version.minor = DLPACK_MINOR_VERSION;
  b->mt.manager_ctx = b;
  b->mt.deleter = alloc_block_deleter;
  b->mt.dl_tensor.data = b->data;
  b->mt.dl_tensor.device = proto->device;
  b->mt.dl_tensor.ndim = proto->ndim;
  b->mt.dl_tensor.dtype = proto->dtype;
  b->mt.dl_tensor.shape = b->shape;
  b->mt.dl_tensor.strides = NULL;
  *out = &b->mt;
  return 0;
}

/* A CPU float32 prototype of `ndim` dimensions over `shape`. */
static void cpu_f32_proto(DLTensor* proto, int64_t* shape, int ndim) {
  memset(proto, 0, sizeof(*proto));
  proto->device.device_type = kDLCPU;
  proto->ndim = ndim;
  proto->dtype.code = kDLFloat;
  proto->dtype.bits = 32;
  proto->dtype.lanes = 1;
  proto->shape = shape;
}

/* Allocators that fail with their own codes, and one whose tensor this library refuses. */
static int alloc_raises_minus2(DLTensor* proto, DLManagedTensorVersioned** out, void* error_ctx,
                               void (*set_error)(void*, const char*, const char*)) {
  (void)proto;
  (void)out;
  set_error(error_ctx, "K2", "m2");
  return -2;
}

static int alloc_returns_7(DLTensor* proto, DLManagedTensorVersioned** out, void* error_ctx,
                           void (*set_error)(void*, const char*, const char*)) {
  (void)proto;
  (void)out;
  (void)error_ctx;
  (void)set_error;
  return 7;
}

static int alloc_version_2(DLTensor* proto, DLManagedTensorVersioned** out, void* error_ctx,
                           void (*set_error)(void*, const char*, const char*)) {
  int rc = test_allocator(proto, out, error_ctx, set_error);
  if (rc == 0) (*out)->version.major = 2;
  return rc;
}

/* The allocator's failure code comes back as it returned it (-2: the error is already raised),
 * as on the official library; a tensor the library refuses is released, not leaked (ours: the
 * official library takes any DLPack major version here). */
TEST(env_tensor_alloc_failure_codes) {
  DLTensor proto;
  int64_t shape[1] = {3};
  void* t = NULL;
  DLPackManagedTensorAllocator before = TVMFFIEnvGetDLPackManagedTensorAllocator();
  cpu_f32_proto(&proto, shape, 1);

  REQUIRE_OK(TVMFFIEnvSetDLPackManagedTensorAllocator(alloc_raises_minus2, 0, NULL));
  CHECK_EQ(TVMFFIEnvTensorAlloc(&proto, &t), -2);
  CHECK(t == NULL);
  CHECK_RAISES(-1, "K2", "m2");

  REQUIRE_OK(TVMFFIEnvSetDLPackManagedTensorAllocator(alloc_returns_7, 0, NULL));
  CHECK_EQ(TVMFFIEnvTensorAlloc(&proto, &t), 7);
  CHECK(t == NULL);
  tffi_clear_error(); /* ours raises an InternalError naming the code; upstream raises none */

  if (tffi_is_anyffi()) {
    g_alloc_calls = g_alloc_frees = 0;
    REQUIRE_OK(TVMFFIEnvSetDLPackManagedTensorAllocator(alloc_version_2, 0, NULL));
    CHECK_RAISES(TVMFFIEnvTensorAlloc(&proto, &t), "RuntimeError", "major version 2");
    CHECK(t == NULL);
    CHECK_EQ(g_alloc_calls, 1);
    CHECK_EQ(g_alloc_frees, 1);
  }
  REQUIRE_OK(TVMFFIEnvSetDLPackManagedTensorAllocator(before, 0, NULL));
}

TEST(env_tensor_alloc) {
  DLTensor proto;
  int64_t shape[2] = {5, 6};
  void* t = NULL;
  DLPackManagedTensorAllocator prev = (DLPackManagedTensorAllocator)0x1;
  cpu_f32_proto(&proto, shape, 2);

  /* What the getter reports is what a thread-local Set reports as the previous value (no
     library allocator shows through the getter). */
  {
    DLPackManagedTensorAllocator before = TVMFFIEnvGetDLPackManagedTensorAllocator();
    REQUIRE_OK(TVMFFIEnvSetDLPackManagedTensorAllocator(test_allocator, 0, &prev));
    CHECK(prev == before);
    REQUIRE_OK(TVMFFIEnvSetDLPackManagedTensorAllocator(before, 0, NULL));
  }
  /* Nothing installed by a host: the getter and the previous value report NULL on both
     libraries (the official C++ suite's CEnvAPI test compares the two). */
  CHECK_OK(TVMFFIEnvSetDLPackManagedTensorAllocator(NULL, 1, NULL));
  CHECK(TVMFFIEnvGetDLPackManagedTensorAllocator() == NULL);
  REQUIRE_OK(TVMFFIEnvSetDLPackManagedTensorAllocator(NULL, 0, &prev));
  CHECK(prev == NULL);
  CHECK(TVMFFIEnvGetDLPackManagedTensorAllocator() == NULL);
  /* anyffi goes beyond the official library with a fallback CPU allocator, so
     TVMFFIEnvTensorAlloc works with no host framework; the official library has none. */
  if (tffi_is_anyffi()) {
    if (CHECK_OK(TVMFFIEnvTensorAlloc(&proto, &t))) {
      DLTensor* dl = (DLTensor*)tffi_cell(t);
      CHECK_EQ(dl->shape[1], 6);
      REQUIRE(dl->strides != NULL);
      CHECK_EQ(dl->strides[0], 6);
      CHECK(dl->data != NULL);
      CHECK_EQ((uintptr_t)dl->data % 64, 0);
      CHECK_OK(TVMFFIObjectDecRef(t));
    }
  } else {
    CHECK_RAISES(TVMFFIEnvTensorAlloc(&proto, &t), "RuntimeError", "allocator");
  }

  g_alloc_calls = g_alloc_frees = 0;
  REQUIRE_OK(TVMFFIEnvSetDLPackManagedTensorAllocator(test_allocator, 0, &prev));
  CHECK(prev == NULL);
  CHECK(TVMFFIEnvGetDLPackManagedTensorAllocator() == test_allocator);
  if (CHECK_OK(TVMFFIEnvTensorAlloc(&proto, &t))) {
    DLTensor* dl = (DLTensor*)tffi_cell(t);
    CHECK_EQ(tffi_type_index(t), kTVMFFITensor);
    CHECK_EQ(g_alloc_calls, 1);
    CHECK_EQ(dl->ndim, 2);
    CHECK_EQ(dl->shape[0], 5);
    CHECK_EQ(dl->shape[1], 6);
    REQUIRE(dl->strides != NULL); /* synthesised */
    CHECK_EQ(dl->strides[0], 6);
    CHECK_EQ(dl->strides[1], 1);
    CHECK_EQ(g_alloc_frees, 0);
    CHECK_OK(TVMFFIObjectDecRef(t));
    CHECK_EQ(g_alloc_frees, 1);
  }
  /* Allocator errors come back through SetError. */
  proto.ndim = 5;
  CHECK_RAISES(TVMFFIEnvTensorAlloc(&proto, &t), "ValueError", "ndim <= 4");
  proto.ndim = 2;

  /* Restore; prev reports the thread-local value. */
  CHECK_OK(TVMFFIEnvSetDLPackManagedTensorAllocator(NULL, 0, &prev));
  CHECK(prev == test_allocator);
  CHECK(TVMFFIEnvGetDLPackManagedTensorAllocator() == NULL);
}

static void* allocator_thread_main(void* arg) {
  *(DLPackManagedTensorAllocator*)arg = TVMFFIEnvGetDLPackManagedTensorAllocator();
  return NULL;
}

TEST(env_tensor_allocator_global_vs_thread_local) {
  pthread_t th;
  DLPackManagedTensorAllocator seen = (DLPackManagedTensorAllocator)0x1;
  /* Start from no allocator at all. */
  REQUIRE_OK(TVMFFIEnvSetDLPackManagedTensorAllocator(NULL, 1, NULL));
  /* Thread-local only: another thread does not see it. */
  REQUIRE_OK(TVMFFIEnvSetDLPackManagedTensorAllocator(test_allocator, 0, NULL));
  REQUIRE_EQ(pthread_create(&th, NULL, allocator_thread_main, &seen), 0);
  pthread_join(th, NULL);
  CHECK(seen == NULL);
  /* Written to the global context too: another thread falls back to it. */
  REQUIRE_OK(TVMFFIEnvSetDLPackManagedTensorAllocator(test_allocator, 1, NULL));
  seen = (DLPackManagedTensorAllocator)0x1;
  REQUIRE_EQ(pthread_create(&th, NULL, allocator_thread_main, &seen), 0);
  pthread_join(th, NULL);
  CHECK(seen == test_allocator);
  /* Reset both. */
  CHECK_OK(TVMFFIEnvSetDLPackManagedTensorAllocator(NULL, 1, NULL));
  CHECK(TVMFFIEnvGetDLPackManagedTensorAllocator() == NULL);
}
