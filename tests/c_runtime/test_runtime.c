/* The runtime.* packed functions from C, through TVMFFIFunctionGetGlobal / TVMFFIFunctionCall
 * on libtvm_ffi.so: the LLAISYS runtime vector (1 MiB H2D/D2D/D2H round trip on every device
 * id), the (3,4,5) tensor vector (view/permute/slice), the default DLPack allocator behind
 * TVMFFIEnvTensorAlloc, and bad inputs (each must come back as an error of the right kind).
 *
 * Standalone: the few ABI declarations needed are written out below (layouts as in c_api.h and
 * dlpack.h), so this builds with nothing but a C compiler. Prints "N passed, N failed" last
 * (", N skipped" appended when CUDA parts are skipped); exit status 1 when anything failed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- ABI declarations (c_api.h, dlpack.h) ------------------------------------------------- */
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct {
  int32_t type_index;
  uint32_t small_str_len;
  union {
    int64_t v_int64;
    double v_float64;
    void* v_ptr;
    const char* v_c_str;
    void* v_obj;
    DLDataType v_dtype;
    DLDevice v_device;
    uint64_t v_uint64;
  };
} TVMFFIAny;
typedef struct { const char* data; size_t size; } TVMFFIByteArray;
/* Object header: combined refcount, type index, padding, deleter: 24 bytes. */
#define TFFI_HEADER_BYTES 24

enum {
  kTVMFFINone = 0, kTVMFFIInt = 1, kTVMFFIBool = 2, kTVMFFIFloat = 3, kTVMFFIOpaquePtr = 4,
  kTVMFFIDataType = 5, kTVMFFIDevice = 6, kTVMFFIDLTensorPtr = 7, kTVMFFIRawStr = 8,
  kTVMFFIStaticObjectBegin = 64, kTVMFFIError = 67, kTVMFFIShape = 69, kTVMFFITensor = 70
};

int TVMFFIFunctionGetGlobal(const TVMFFIByteArray* name, void** out);
int TVMFFIFunctionCall(void* func, TVMFFIAny* args, int32_t num_args, TVMFFIAny* result);
int TVMFFIObjectDecRef(void* obj);
void TVMFFIErrorMoveFromRaised(void** result);
int TVMFFIEnvTensorAlloc(DLTensor* prototype, void** out);

/* ---- harness ------------------------------------------------------------------------------ */
static int g_passed, g_failed, g_skipped, g_case_failed;

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      g_case_failed = 1;                                                         \
    }                                                                            \
  } while (0)

static void run_case(const char* name, void (*fn)(void)) {
  g_case_failed = 0;
  fn();
  printf("%s %s\n", g_case_failed ? "FAIL" : "ok  ", name);
  if (g_case_failed) ++g_failed; else ++g_passed;
}

/* ---- values ------------------------------------------------------------------------------- */
static TVMFFIAny none_(void) { TVMFFIAny a; memset(&a, 0, sizeof(a)); return a; }
static TVMFFIAny int_(int64_t v) { TVMFFIAny a = none_(); a.type_index = kTVMFFIInt; a.v_int64 = v; return a; }
static TVMFFIAny float_(double v) { TVMFFIAny a = none_(); a.type_index = kTVMFFIFloat; a.v_float64 = v; return a; }
static TVMFFIAny ptr_(void* p) { TVMFFIAny a = none_(); a.type_index = kTVMFFIOpaquePtr; a.v_ptr = p; return a; }
static TVMFFIAny str_(const char* s) { TVMFFIAny a = none_(); a.type_index = kTVMFFIRawStr; a.v_c_str = s; return a; }
static TVMFFIAny dev_(int32_t type, int32_t id) {
  TVMFFIAny a = none_(); a.type_index = kTVMFFIDevice; a.v_device.device_type = type; a.v_device.device_id = id; return a;
}
static TVMFFIAny dtype_(uint8_t code, uint8_t bits) {
  TVMFFIAny a = none_(); a.type_index = kTVMFFIDataType; a.v_dtype.code = code; a.v_dtype.bits = bits; a.v_dtype.lanes = 1; return a;
}
static DLTensor* dl_of(void* tensor) { return (DLTensor*)((char*)tensor + TFFI_HEADER_BYTES); }

static void release(TVMFFIAny* v) {
  if (v->type_index >= kTVMFFIStaticObjectBegin && v->v_obj) TVMFFIObjectDecRef(v->v_obj);
  *v = none_();
}

static void* get_global(const char* name) {
  TVMFFIByteArray n = {name, strlen(name)};
  void* f = NULL;
  if (TVMFFIFunctionGetGlobal(&n, &f) != 0 || f == NULL) {
    fprintf(stderr, "  global function %s is missing\n", name);
    exit(2);
  }
  return f;
}

/* Calls `name`; returns the rc, the result in *out (None on error). */
static int call(const char* name, TVMFFIAny* args, int n, TVMFFIAny* out) {
  void* f = get_global(name);
  int rc;
  *out = none_();
  rc = TVMFFIFunctionCall(f, args, n, out);
  TVMFFIObjectDecRef(f);
  return rc;
}

/* A call that must succeed; prints the error otherwise. */
static TVMFFIAny ok(const char* name, TVMFFIAny* args, int n) {
  TVMFFIAny out;
  if (call(name, args, n, &out) != 0) {
    void* err = NULL;
    TVMFFIErrorMoveFromRaised(&err);
    if (err) {
      TVMFFIByteArray* cell = (TVMFFIByteArray*)((char*)err + TFFI_HEADER_BYTES);
      fprintf(stderr, "  %s failed: %.*s: %.*s\n", name, (int)cell[0].size, cell[0].data, (int)cell[1].size, cell[1].data);
      TVMFFIObjectDecRef(err);
    }
    g_case_failed = 1;
  }
  return out;
}

/* A call that must fail with `kind` and a message containing `needle`; returns 1 if it did. */
static int fails(const char* name, TVMFFIAny* args, int n, const char* kind, const char* needle) {
  TVMFFIAny out;
  void* err = NULL;
  int good = 0;
  if (call(name, args, n, &out) == 0) {
    fprintf(stderr, "  %s should fail with %s but succeeded\n", name, kind);
    release(&out);
    g_case_failed = 1;
    return 0;
  }
  TVMFFIErrorMoveFromRaised(&err);
  if (err) {
    TVMFFIByteArray* cell = (TVMFFIByteArray*)((char*)err + TFFI_HEADER_BYTES);
    char msg[1024];
    size_t len = cell[1].size < sizeof(msg) - 1 ? cell[1].size : sizeof(msg) - 1;
    memcpy(msg, cell[1].data, len);
    msg[len] = 0;
    good = cell[0].size == strlen(kind) && memcmp(cell[0].data, kind, cell[0].size) == 0 && strstr(msg, needle) != NULL;
    if (!good)
      fprintf(stderr, "  %s: expected %s containing \"%s\", got %.*s: %s\n", name, kind, needle, (int)cell[0].size, cell[0].data, msg);
    TVMFFIObjectDecRef(err);
  } else {
    fprintf(stderr, "  %s returned an error code but raised no error\n", name);
  }
  if (!good) g_case_failed = 1;
  return good;
}

static TVMFFIAny make_shape(int n, const int64_t* dims) {
  TVMFFIAny args[8];
  int i;
  for (i = 0; i < n; ++i) args[i] = int_(dims[i]);
  return ok("ffi.Shape", args, n);
}

/* ---- runtime table ------------------------------------------------------------------------ */
#define MIB (1 << 20)

static void round_trip_on(int32_t type, int32_t id) {
  TVMFFIAny d = dev_(type, id), n = int_(MIB), a[5], hs, hd, da, db, st, r;
  unsigned char *src, *dst;
  int i, async_;
  a[0] = d;
  r = ok("runtime.set_device", a, 1);
  a[1] = n;
  hs = ok("runtime.malloc_host", a, 2);
  hd = ok("runtime.malloc_host", a, 2);
  da = ok("runtime.malloc_device", a, 2);
  db = ok("runtime.malloc_device", a, 2);
  if (g_case_failed) return;
  src = (unsigned char*)hs.v_ptr;
  dst = (unsigned char*)hd.v_ptr;
  for (i = 0; i < MIB; ++i) src[i] = (unsigned char)(i * 7 % 251);
  for (async_ = 0; async_ < 2; ++async_) {
    const char* f = async_ ? "runtime.memcpy_async" : "runtime.memcpy";
    memset(dst, 0, MIB);
    a[0] = d;
    st = ok("runtime.stream_create", a, 1);
    a[2] = n; a[4] = st;
    a[0] = da; a[1] = hs; a[3] = int_(1); r = ok(f, a, async_ ? 5 : 4);
    a[0] = db; a[1] = da; a[3] = int_(3); r = ok(f, a, async_ ? 5 : 4);
    a[0] = hd; a[1] = db; a[3] = int_(2); r = ok(f, a, async_ ? 5 : 4);
    a[0] = d; a[1] = st;
    r = ok("runtime.stream_synchronize", a, 2);
    r = ok("runtime.device_synchronize", a, 1);
    CHECK(memcmp(src, dst, MIB) == 0);
    r = ok("runtime.stream_destroy", a, 2);
  }
  a[0] = d;
  a[1] = da; r = ok("runtime.free_device", a, 2);
  a[1] = db; r = ok("runtime.free_device", a, 2);
  a[1] = hs; r = ok("runtime.free_host", a, 2);
  a[1] = hd; r = ok("runtime.free_host", a, 2);
  (void)r;
}

static void test_round_trip_every_device(void) {
  TVMFFIAny a[1], r;
  int64_t i, n;
  a[0] = int_(1);
  r = ok("runtime.device_count", a, 1);
  CHECK(r.type_index == kTVMFFIInt && r.v_int64 == 1);
  round_trip_on(1, 0);
  a[0] = int_(2);
  r = ok("runtime.device_count", a, 1);
  n = r.v_int64;
  if (n == 0) {
    a[0] = dev_(2, 0);
    fails("runtime.set_device", a, 1, "RuntimeError", "libcuda.so");
    printf("skip CUDA round trip: libcuda.so not found (no CUDA driver)\n");
    ++g_skipped;
  }
  for (i = 0; i < n; ++i) round_trip_on(2, (int32_t)i);
}

static void test_device_and_memory_bad_inputs(void) {
  TVMFFIAny a[5], p, r;
  char local[64];
  a[0] = int_(99);
  fails("runtime.device_count", a, 1, "ValueError", "unknown device type 99");
  a[0] = str_("cuda");
  fails("runtime.device_count", a, 1, "TypeError", "expected int");
  a[0] = dev_(1, 1);
  fails("runtime.set_device", a, 1, "ValueError", "device id 1");
  a[0] = int_(1);
  fails("runtime.set_device", a, 1, "TypeError", "expected Device");
  a[0] = dev_(1, 0); a[1] = int_(-1);
  fails("runtime.malloc_device", a, 2, "ValueError", "`nbytes` must be >= 0");
  a[1] = float_(2.0);
  fails("runtime.malloc_device", a, 2, "TypeError", "`nbytes`");
  fails("runtime.malloc_device", a, 1, "TypeError", "expects 2 arguments, got 1");
  a[1] = int_(100);
  p = ok("runtime.malloc_device", a, 2);
  CHECK(p.type_index == kTVMFFIOpaquePtr && ((uintptr_t)p.v_ptr % 64) == 0);
  a[1] = p;
  r = ok("runtime.free_device", a, 2);
  fails("runtime.free_device", a, 2, "ValueError", "already freed");
  a[1] = ptr_(local);
  fails("runtime.free_device", a, 2, "ValueError", "not allocated by the CPU allocator");
  fails("runtime.free_host", a, 2, "ValueError", "runtime.free_host");
  a[0] = dev_(1, 0); a[1] = ptr_((void*)0x40);
  fails("runtime.stream_destroy", a, 2, "ValueError", "not a live CPU stream");
  a[0] = dev_(1, 0);
  r = ok("runtime.set_device", a, 1);
  a[0] = ptr_(local); a[1] = ptr_(local + 32); a[2] = int_(16); a[3] = int_(9);
  fails("runtime.memcpy", a, 4, "ValueError", "`kind` must be 0 (H2H)");
  a[0] = none_(); a[3] = int_(0);
  fails("runtime.memcpy", a, 4, "ValueError", "NULL dst");
  (void)r;
}

/* ---- tensors ------------------------------------------------------------------------------ */
static int64_t at(DLTensor* t, const int64_t* idx) {
  int64_t off = 0;
  int i;
  for (i = 0; i < t->ndim; ++i) off += idx[i] * t->strides[i];
  return ((int64_t*)((char*)t->data + t->byte_offset))[off];
}

/* ops from C on runtime tensors, big enough for the worker threads and the plan cache (run under
   valgrind by ./test: the pool, the cache and the tensors must leave nothing lost) */
static void test_ops_from_c(void) {
  static const int64_t xd[2] = {64, 256}, wd[2] = {512, 256}, yd[2] = {64, 512};
  TVMFFIAny a[5], x, w, y, r;
  DLTensor *dx, *dw, *dy;
  int64_t i, j, k, rep;
  int bad = 0;
  TVMFFIAny xs = make_shape(2, xd), ws = make_shape(2, wd), ys = make_shape(2, yd);
  a[1] = dtype_(2, 32); a[2] = dev_(1, 0);
  a[0] = xs; x = ok("runtime.empty", a, 3);
  a[0] = ws; w = ok("runtime.empty", a, 3);
  a[0] = ys; y = ok("runtime.empty", a, 3);
  if (g_case_failed) return;
  dx = dl_of(x.v_obj); dw = dl_of(w.v_obj); dy = dl_of(y.v_obj);
  for (i = 0; i < 64 * 256; ++i) ((float*)dx->data)[i] = (float)(i % 7) - 3.0f;
  for (i = 0; i < 512 * 256; ++i) ((float*)dw->data)[i] = (float)(i % 5) * 0.25f;
  for (rep = 0; rep < 3; ++rep) { /* the second and third calls reuse the cached plan */
    a[0] = y; a[1] = x; a[2] = w; a[3] = none_();
    r = ok("ops.linear", a, 4);
    release(&r);
  }
  for (i = 0; i < 64; i += 9)
    for (j = 0; j < 512; j += 37) {
      double want = 0;
      for (k = 0; k < 256; ++k)
        want += (double)((float*)dx->data)[i * 256 + k] * ((float*)dw->data)[j * 256 + k];
      if (((float*)dy->data)[i * 512 + j] != (float)want) bad = 1;
    }
  CHECK(!bad);
  a[0] = y; a[1] = y; a[2] = y;
  r = ok("ops.add", a, 3);
  release(&r);
  release(&x); release(&w); release(&y);
  release(&xs); release(&ws); release(&ys);
}

static void test_tensor_vector(void) {
  static const int64_t dims[3] = {3, 4, 5}, vdims[2] = {6, 10}, order[3] = {2, 0, 1};
  TVMFFIAny shape = make_shape(3, dims), vshape = make_shape(2, vdims), oshape = make_shape(3, order);
  TVMFFIAny a[4], t, v, p, s;
  DLTensor *dt, *dv, *dp, *ds;
  int64_t i, j, k, idx[3];
  a[0] = shape; a[1] = dtype_(0, 64); a[2] = dev_(1, 0);
  t = ok("runtime.empty", a, 3);
  if (g_case_failed) return;
  CHECK(t.type_index == kTVMFFITensor);
  dt = dl_of(t.v_obj);
  CHECK(dt->ndim == 3 && dt->strides[0] == 20 && dt->strides[1] == 5 && dt->strides[2] == 1);
  CHECK((uintptr_t)dt->data % 64 == 0);
  for (i = 0; i < 60; ++i) ((int64_t*)dt->data)[i] = i;

  a[0] = t; a[1] = vshape;
  v = ok("runtime.view", a, 2);
  dv = dl_of(v.v_obj);
  CHECK(dv->ndim == 2 && dv->shape[0] == 6 && dv->shape[1] == 10 && dv->strides[0] == 10 && dv->strides[1] == 1);
  idx[0] = 4; idx[1] = 7;
  CHECK(at(dv, idx) == 47);

  a[1] = oshape;
  p = ok("runtime.permute", a, 2);
  dp = dl_of(p.v_obj);
  CHECK(dp->shape[0] == 5 && dp->shape[1] == 3 && dp->shape[2] == 4);
  CHECK(dp->strides[0] == 1 && dp->strides[1] == 20 && dp->strides[2] == 5);
  for (i = 0; i < 5; ++i)
    for (j = 0; j < 3; ++j)
      for (k = 0; k < 4; ++k) {
        idx[0] = i; idx[1] = j; idx[2] = k;
        CHECK(at(dp, idx) == j * 20 + k * 5 + i);
      }

  a[1] = int_(2); a[2] = int_(1); a[3] = int_(4);
  s = ok("runtime.slice", a, 4);
  ds = dl_of(s.v_obj);
  CHECK(ds->shape[0] == 3 && ds->shape[1] == 4 && ds->shape[2] == 3);
  CHECK(ds->strides[0] == 20 && ds->strides[1] == 5 && ds->strides[2] == 1);
  CHECK(ds->byte_offset == 8);
  idx[0] = 0; idx[1] = 0; idx[2] = 0;
  CHECK(at(ds, idx) == 1);

  /* The views keep the storage alive after the source is released. */
  release(&t);
  idx[0] = 2; idx[1] = 3; idx[2] = 2;
  CHECK(at(ds, idx) == 40 + 15 + 3);
  release(&v); release(&p); release(&s);
  release(&shape); release(&vshape); release(&oshape);
}

static void test_tensor_bad_inputs(void) {
  static const int64_t base_dims[3] = {2, 3, 10}, bad_view[2] = {2, 15}, neg[2] = {2, -1}, perm_bad[3] = {0, 0, 1};
  TVMFFIAny bshape = make_shape(3, base_dims), vshape = make_shape(2, bad_view), nshape = make_shape(2, neg),
            pshape = make_shape(3, perm_bad);
  TVMFFIAny a[4], b, s, other;
  a[0] = bshape; a[1] = dtype_(0, 64); a[2] = dev_(1, 0);
  b = ok("runtime.empty", a, 3);
  a[0] = b; a[1] = int_(2); a[2] = int_(0); a[3] = int_(5);
  s = ok("runtime.slice", a, 4); /* (2,3,5) with strides (30,10,1) */
  if (g_case_failed) return;
  a[0] = s; a[1] = vshape;
  fails("runtime.view", a, 2, "ValueError", "incompatible");
  a[0] = b; a[1] = pshape;
  fails("runtime.permute", a, 2, "ValueError", "not a permutation");
  a[1] = int_(2); a[2] = int_(4); a[3] = int_(11);
  fails("runtime.slice", a, 4, "IndexError", "out of bounds");
  a[1] = int_(3); a[2] = int_(0); a[3] = int_(1);
  fails("runtime.slice", a, 4, "IndexError", "dim 3");
  a[0] = nshape; a[1] = dtype_(2, 32); a[2] = dev_(1, 0);
  fails("runtime.empty", a, 3, "ValueError", "negative");
  a[0] = bshape; a[1] = str_("flaot32");
  fails("runtime.empty", a, 3, "ValueError", "unknown dtype");
  a[1] = str_("float32"); a[2] = dev_(77, 0);
  fails("runtime.empty", a, 3, "ValueError", "unknown device type 77");
  a[0] = int_(5); a[2] = dev_(1, 0);
  fails("runtime.empty", a, 3, "TypeError", "expected ffi.Shape");
  a[0] = bshape; a[1] = str_("float32");
  other = ok("runtime.empty", a, 3);
  a[0] = other; a[1] = b;
  fails("runtime.copy_", a, 2, "TypeError", "`src` must have the dtype of `dst`");
  a[0] = s;
  fails("runtime.copy_", a, 2, "ValueError", "`src` must have the shape of `dst`");
  a[1] = int_(0);
  fails("runtime.copy_", a, 2, "TypeError", "`src`");
  release(&b); release(&s); release(&other);
  release(&bshape); release(&vshape); release(&nshape); release(&pshape);
}

static void test_env_tensor_alloc_default(void) {
  int64_t shape[2] = {5, 6};
  DLTensor proto;
  void* t = NULL;
  memset(&proto, 0, sizeof(proto));
  proto.device.device_type = 1;
  proto.ndim = 2;
  proto.dtype.code = 2; proto.dtype.bits = 32; proto.dtype.lanes = 1;
  proto.shape = shape;
  CHECK(TVMFFIEnvTensorAlloc(&proto, &t) == 0);
  if (t) {
    DLTensor* dl = dl_of(t);
    CHECK(dl->ndim == 2 && dl->shape[0] == 5 && dl->strides[0] == 6 && dl->strides[1] == 1);
    CHECK((uintptr_t)dl->data % 64 == 0);
    ((float*)dl->data)[29] = 1.0f;
    TVMFFIObjectDecRef(t);
  }
  shape[0] = -1;
  CHECK(TVMFFIEnvTensorAlloc(&proto, &t) == -1);
  {
    void* err = NULL;
    TVMFFIErrorMoveFromRaised(&err);
    CHECK(err != NULL);
    if (err) TVMFFIObjectDecRef(err);
  }
}

int main(void) {
  run_case("round_trip_every_device", test_round_trip_every_device);
  run_case("device_and_memory_bad_inputs", test_device_and_memory_bad_inputs);
  run_case("tensor_vector", test_tensor_vector);
  run_case("ops_from_c", test_ops_from_c);
  run_case("tensor_bad_inputs", test_tensor_bad_inputs);
  run_case("env_tensor_alloc_default", test_env_tensor_alloc_default);
  if (g_skipped)
    printf("%d passed, %d failed, %d skipped\n", g_passed, g_failed, g_skipped);
  else
    printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
