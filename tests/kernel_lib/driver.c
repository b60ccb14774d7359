/*
 * Loads userlib.so (built from userlib.cc against the official headers) through
 * ffi.ModuleLoadFromFile and checks every export. The same program runs against the official
 * libtvm_ffi.so (which proves the checks) and against anyffi.
 * Usage: driver path/to/userlib.so     Prints "N passed, N failed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/ffi/c_api.h>
#include <tvm/ffi/extra/c_env_api.h>

static int passed = 0, failed = 0;
#define CHECK(cond, ...)                                        \
  do {                                                          \
    if (cond) {                                                 \
      passed++;                                                 \
    } else {                                                    \
      failed++;                                                 \
      printf("FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond);  \
      printf(__VA_ARGS__);                                      \
      printf("\n");                                             \
    }                                                           \
  } while (0)

static TVMFFIAny none(void) { TVMFFIAny a; memset(&a, 0, sizeof(a)); return a; }
static TVMFFIAny i64(int64_t v) { TVMFFIAny a = none(); a.type_index = kTVMFFIInt; a.v_int64 = v; return a; }
static TVMFFIAny f64(double v) { TVMFFIAny a = none(); a.type_index = kTVMFFIFloat; a.v_float64 = v; return a; }
static TVMFFIAny obj(void* o) { TVMFFIAny a = none(); a.type_index = ((TVMFFIObject*)o)->type_index; a.v_obj = (TVMFFIObject*)o; return a; }
static TVMFFIAny str(const char* s) {
  TVMFFIByteArray b = {s, strlen(s)};
  TVMFFIAny a = none();
  TVMFFIStringFromByteArray(&b, &a);
  return a;
}
static void release(TVMFFIAny* a) { if (a->type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(a->v_obj); *a = none(); }

/* The last error's kind and message, consumed. */
static char last_kind[64], last_msg[256];
static void take_error(void) {
  void* e = NULL;
  TVMFFIErrorMoveFromRaised(&e);
  last_kind[0] = last_msg[0] = 0;
  if (!e) return;
  TVMFFIErrorCell* c = (TVMFFIErrorCell*)((char*)e + sizeof(TVMFFIObject));
  snprintf(last_kind, sizeof last_kind, "%.*s", (int)c->kind.size, c->kind.data);
  snprintf(last_msg, sizeof last_msg, "%.*s", (int)c->message.size, c->message.data);
  TVMFFIObjectDecRef(e);
}

static void* global(const char* name) {
  TVMFFIByteArray b = {name, strlen(name)};
  void* f = NULL;
  TVMFFIFunctionGetGlobal(&b, &f);
  return f;
}

/* Calls f(args...); returns rc; *out owned on success. */
static int call(void* f, TVMFFIAny* args, int n, TVMFFIAny* out) {
  *out = none();
  int rc = TVMFFIFunctionCall(f, args, n, out);
  if (rc != 0) take_error();
  return rc;
}

static void* get_fn(void* mod, const char* name) {
  void* getf = global("ffi.ModuleGetFunction");
  TVMFFIAny args[3] = {obj(mod), str(name), none()};
  args[2].type_index = kTVMFFIBool;
  args[2].v_int64 = 1;
  TVMFFIAny out;
  int rc = call(getf, args, 3, &out);
  release(&args[1]);
  TVMFFIObjectDecRef(getf);
  CHECK(rc == 0 && out.type_index == kTVMFFIFunction, "ModuleGetFunction(%s): rc %d type %d %s", name, rc,
        out.type_index, last_msg);
  return rc == 0 ? out.v_obj : NULL;
}

static int double_it(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  if (n != 1 || args[0].type_index != kTVMFFIInt) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "double_it: expected one int");
    return -1;
  }
  *result = i64(args[0].v_int64 * 2);
  return 0;
}

static int g_alloc_calls = 0;
static void free_managed(DLManagedTensorVersioned* mt) {
  free(mt->dl_tensor.data);
  free(mt->dl_tensor.shape);
  free(mt);
}
static int driver_alloc(DLTensor* proto, DLManagedTensorVersioned** out, void* ctx,
                        void (*set_error)(void*, const char*, const char*)) {
  (void)ctx;
  (void)set_error;
  g_alloc_calls++;
  DLManagedTensorVersioned* mt = calloc(1, sizeof(*mt));
  mt->version.major = 1;
  mt->dl_tensor = *proto;
  mt->dl_tensor.shape = malloc(sizeof(int64_t) * (proto->ndim ? proto->ndim : 1));
  int64_t n = 1;
  for (int i = 0; i < proto->ndim; ++i) { mt->dl_tensor.shape[i] = proto->shape[i]; n *= proto->shape[i]; }
  mt->dl_tensor.strides = NULL;
  mt->dl_tensor.data = malloc((size_t)n * ((proto->dtype.bits * proto->dtype.lanes + 7) / 8) + 1);
  mt->deleter = free_managed;
  *out = mt;
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: driver userlib.so\n");
    return 2;
  }
  void* ours_marker = global("anyffi.testing.nop");
  int is_anyffi = ours_marker != NULL;
  if (ours_marker) TVMFFIObjectDecRef(ours_marker);

  /* Bad input: a missing file is an error, not a crash. */
  void* load = global("ffi.ModuleLoadFromFile");
  CHECK(load != NULL, "ffi.ModuleLoadFromFile is registered");
  if (!load) { printf("%d passed, %d failed\n", passed, failed); return 1; }
  TVMFFIAny path = str("/nonexistent/libnothing.so"), out;
  CHECK(call(load, &path, 1, &out) != 0, "loading a missing file fails");
  release(&path);

  path = str(argv[1]);
  int rc = call(load, &path, 1, &out);
  release(&path);
  CHECK(rc == 0 && out.type_index == kTVMFFIModule, "load: rc %d type %d: %s %s", rc, out.type_index, last_kind, last_msg);
  if (rc != 0) { printf("%d passed, %d failed\n", passed, failed); return 1; }
  void* mod = out.v_obj;

  /* A missing export gives None, and ImplementsFunction says so. */
  void* getf = global("ffi.ModuleGetFunction");
  TVMFFIAny gargs[3] = {obj(mod), str("no_such_function"), none()};
  gargs[2].type_index = kTVMFFIBool;
  CHECK(call(getf, gargs, 3, &out) == 0 && out.type_index == kTVMFFINone, "missing export is None (type %d)", out.type_index);
  release(&gargs[1]);
  TVMFFIObjectDecRef(getf);

  void* add_one = get_fn(mod, "add_one");
  TVMFFIAny a = i64(41);
  CHECK(call(add_one, &a, 1, &out) == 0 && out.v_int64 == 42, "add_one(41) = %lld", (long long)out.v_int64);
  TVMFFIAny bad = str("not an int, clearly");
  CHECK(call(add_one, &bad, 1, &out) != 0 && strcmp(last_kind, "TypeError") == 0, "add_one(str) raises TypeError, got %s", last_kind);
  release(&bad);
  CHECK(call(add_one, NULL, 0, &out) != 0 && strcmp(last_kind, "TypeError") == 0, "add_one() raises TypeError, got %s", last_kind);

  /* Metadata exported by TVM_FFI_DLL_EXPORT_TYPED_FUNC. */
  void* getmeta = global("ffi.ModuleGetFunctionMetadata");
  TVMFFIAny margs[3] = {obj(mod), str("add_one"), none()};
  margs[2].type_index = kTVMFFIBool;
  rc = call(getmeta, margs, 3, &out);
  CHECK(rc == 0 && (out.type_index == kTVMFFIStr || out.type_index == kTVMFFISmallStr), "metadata is a string (type %d)", out.type_index);
  if (rc == 0 && out.type_index == kTVMFFIStr) {
    TVMFFIByteArray* s = (TVMFFIByteArray*)((char*)out.v_obj + sizeof(TVMFFIObject));
    CHECK(strstr(s->data, "type_schema") != NULL, "metadata mentions type_schema: %.*s", (int)s->size, s->data);
  }
  release(&out);
  release(&margs[1]);
  TVMFFIObjectDecRef(getmeta);

  /* Tensor in place through TensorView. */
  float data[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 3};
  DLTensor dl;
  memset(&dl, 0, sizeof dl);
  dl.data = data;
  dl.device.device_type = kDLCPU;
  dl.ndim = 2;
  dl.dtype.code = kDLFloat;
  dl.dtype.bits = 32;
  dl.dtype.lanes = 1;
  dl.shape = shape;
  void* scale = get_fn(mod, "scale_inplace");
  TVMFFIAny sargs[2] = {none(), f64(2.0)};
  sargs[0].type_index = kTVMFFIDLTensorPtr;
  sargs[0].v_ptr = &dl;
  CHECK(call(scale, sargs, 2, &out) == 0, "scale_inplace: %s %s", last_kind, last_msg);
  CHECK(data[0] == 2 && data[5] == 12, "scaled in place: %g %g", data[0], data[5]);
  dl.dtype.bits = 64;
  CHECK(call(scale, sargs, 2, &out) != 0 && strcmp(last_kind, "TypeError") == 0, "wrong dtype raises TypeError, got %s", last_kind);

  /* Maps: ours to C++ (dense layout: 6 entries), C++ to ours. */
  void* ffi_map = global("ffi.Map");
  TVMFFIAny kv[12];
  char key[16];
  for (int i = 0; i < 6; ++i) {
    snprintf(key, sizeof key, "k%d", i);
    kv[2 * i] = str(key);
    kv[2 * i + 1] = i64(10 + i);
  }
  rc = call(ffi_map, kv, 12, &out);
  CHECK(rc == 0 && out.type_index == kTVMFFIMap, "ffi.Map of 6: %s", last_msg);
  TVMFFIAny map = out;
  void* map_sum = get_fn(mod, "map_sum");
  CHECK(call(map_sum, &map, 1, &out) == 0 && out.v_int64 == 75, "map_sum = %lld (%s)", (long long)out.v_int64, last_msg);
  void* map_lookup = get_fn(mod, "map_lookup");
  TVMFFIAny largs[2] = {map, str("k4")};
  CHECK(call(map_lookup, largs, 2, &out) == 0 && out.v_int64 == 14, "map_lookup(k4) = %lld", (long long)out.v_int64);
  release(&largs[1]);
  largs[1] = str("missing");
  CHECK(call(map_lookup, largs, 2, &out) != 0 && strcmp(last_kind, "KeyError") == 0, "missing key raises KeyError, got %s", last_kind);
  release(&largs[1]);
  release(&map);
  for (int i = 0; i < 12; ++i) release(&kv[i]);

  void* make_map = get_fn(mod, "make_map");
  a = i64(9);
  rc = call(make_map, &a, 1, &out);
  CHECK(rc == 0 && out.type_index == kTVMFFIMap, "make_map(9) type %d", out.type_index);
  map = out;
  void* map_size = global("ffi.MapSize");
  CHECK(call(map_size, &map, 1, &out) == 0 && out.v_int64 == 9, "size of C++ map = %lld", (long long)out.v_int64);
  void* map_get = global("ffi.MapGetItem");
  TVMFFIAny gi[2] = {map, str("key7")};
  CHECK(call(map_get, gi, 2, &out) == 0 && out.v_int64 == 49, "C++ map[key7] = %lld", (long long)out.v_int64);
  release(&gi[1]);
  release(&map);
  TVMFFIObjectDecRef(map_size);
  TVMFFIObjectDecRef(map_get);
  TVMFFIObjectDecRef(ffi_map);

  /* Arrays both ways. */
  void* make_range = get_fn(mod, "make_range");
  a = i64(10);
  rc = call(make_range, &a, 1, &out);
  CHECK(rc == 0 && out.type_index == kTVMFFIArray, "make_range type %d", out.type_index);
  TVMFFIAny arr = out;
  void* array_size = global("ffi.ArraySize");
  CHECK(call(array_size, &arr, 1, &out) == 0 && out.v_int64 == 10, "C++ array size %lld", (long long)out.v_int64);
  void* array_sum = get_fn(mod, "array_sum");
  CHECK(call(array_sum, &arr, 1, &out) == 0 && out.v_int64 == 45, "array_sum of C++ array %lld", (long long)out.v_int64);
  release(&arr);
  void* ffi_array = global("ffi.Array");
  TVMFFIAny items[4] = {i64(1), i64(2), i64(3), i64(4)};
  rc = call(ffi_array, items, 4, &arr);
  CHECK(rc == 0 && arr.type_index == kTVMFFIArray, "ffi.Array");
  CHECK(call(array_sum, &arr, 1, &out) == 0 && out.v_int64 == 10, "array_sum of our array %lld", (long long)out.v_int64);
  release(&arr);
  TVMFFIObjectDecRef(array_size);
  TVMFFIObjectDecRef(ffi_array);

  /* A callback: C++ calls a C function twice. */
  void* cb = NULL;
  TVMFFIFunctionCreate(NULL, double_it, NULL, &cb);
  void* call_twice = get_fn(mod, "call_twice");
  TVMFFIAny cargs[2] = {obj(cb), i64(5)};
  CHECK(call(call_twice, cargs, 2, &out) == 0 && out.v_int64 == 20, "call_twice = %lld", (long long)out.v_int64);
  cargs[1] = str("not a number");
  CHECK(call(call_twice, cargs, 2, &out) != 0, "wrong callback argument fails");
  release(&cargs[1]);
  TVMFFIObjectDecRef(cb);

  /* Errors with kinds thrown in C++. */
  void* raise_kind = get_fn(mod, "raise_kind");
  TVMFFIAny rargs[2] = {str("IndexError"), str("out of range here")};
  CHECK(call(raise_kind, rargs, 2, &out) != 0 && strcmp(last_kind, "IndexError") == 0 &&
            strcmp(last_msg, "out of range here") == 0,
        "raise_kind: %s: %s", last_kind, last_msg);
  release(&rargs[0]);
  release(&rargs[1]);

  /* Tensor::FromEnvAlloc: anyffi has a default CPU allocator, the official library has none. */
  void* alloc_iota = get_fn(mod, "alloc_iota");
  a = i64(5);
  rc = call(alloc_iota, &a, 1, &out);
  if (is_anyffi) {
    CHECK(rc == 0 && out.type_index == kTVMFFITensor, "default allocator: %s %s", last_kind, last_msg);
    if (rc == 0) {
      DLTensor* t = (DLTensor*)((char*)out.v_obj + sizeof(TVMFFIObject));
      CHECK(((float*)t->data)[4] == 4.0f && t->strides != NULL, "iota data and strides");
      release(&out);
    }
  } else {
    CHECK(rc != 0 && strcmp(last_kind, "RuntimeError") == 0, "official: no allocator -> RuntimeError, got %s", last_kind);
  }
  TVMFFIEnvSetDLPackManagedTensorAllocator(driver_alloc, 0, NULL);
  rc = call(alloc_iota, &a, 1, &out);
  CHECK(rc == 0 && g_alloc_calls == 1, "installed allocator used: rc %d calls %d %s", rc, g_alloc_calls, last_msg);
  if (rc == 0) {
    DLTensor* t = (DLTensor*)((char*)out.v_obj + sizeof(TVMFFIObject));
    CHECK(((float*)t->data)[3] == 3.0f && t->strides != NULL && t->strides[0] == 1, "data and synthesised strides");
    release(&out);
  }
  TVMFFIEnvSetDLPackManagedTensorAllocator(NULL, 0, NULL);

  void* fns[] = {add_one, scale, map_sum, map_lookup, make_map, make_range, array_sum, call_twice, raise_kind, alloc_iota};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; ++i) if (fns[i]) TVMFFIObjectDecRef(fns[i]);
  TVMFFIObjectDecRef(mod);
  TVMFFIObjectDecRef(load);
  printf("kernel library (%s): %d passed, %d failed\n", is_anyffi ? "anyffi" : "official", passed, failed);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
