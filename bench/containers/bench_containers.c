// bench_containers.c: Map insert + lookup of 1000 string keys and Array build + index of 1000
// ints, through the C ABI only, for two libtvm_ffi.so builds loaded side by side (dlopen with
// RTLD_LOCAL, so each library resolves its own symbols). Prints per-operation times and the
// ratio ours/official (lower is better; the target is <= 1.0).
//
// Usage: bench_containers OURS.so OFFICIAL.so [ROUNDS]     (see bench/containers/run.sh)

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tvm/ffi/c_api.h>

#define N 1000

typedef int (*GetGlobalFn)(const TVMFFIByteArray*, TVMFFIObjectHandle*);
typedef int (*CallFn)(TVMFFIObjectHandle, TVMFFIAny*, int32_t, TVMFFIAny*);
typedef int (*StrFn)(const TVMFFIByteArray*, TVMFFIAny*);
typedef int (*DecRefFn)(TVMFFIObjectHandle);

typedef struct {
  const char* name;
  CallFn call;
  DecRefFn dec_ref;
  TVMFFIObjectHandle f_map, f_map_get, f_array, f_array_get;
  TVMFFIAny keys[N];  // owned strings made by this library
} Lib;

static void* sym(void* h, const char* name) {
  void* p = dlsym(h, name);
  if (!p) {
    fprintf(stderr, "missing symbol %s: %s\n", name, dlerror());
    exit(2);
  }
  return p;
}

static TVMFFIObjectHandle global(GetGlobalFn get, const char* name) {
  TVMFFIByteArray b = {name, strlen(name)};
  TVMFFIObjectHandle out = NULL;
  if (get(&b, &out) != 0 || out == NULL) {
    fprintf(stderr, "missing global %s\n", name);
    exit(2);
  }
  return out;
}

static void load(Lib* lib, const char* path, const char* name) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    exit(2);
  }
  lib->name = name;
  GetGlobalFn get = (GetGlobalFn)sym(h, "TVMFFIFunctionGetGlobal");
  StrFn str = (StrFn)sym(h, "TVMFFIStringFromByteArray");
  lib->call = (CallFn)sym(h, "TVMFFIFunctionCall");
  lib->dec_ref = (DecRefFn)sym(h, "TVMFFIObjectDecRef");
  lib->f_map = global(get, "ffi.Map");
  lib->f_map_get = global(get, "ffi.MapGetItem");
  lib->f_array = global(get, "ffi.Array");
  lib->f_array_get = global(get, "ffi.ArrayGetItem");
  for (int i = 0; i < N; ++i) {
    char buf[64];
    int n = snprintf(buf, sizeof buf, "benchmark-key-%04d", i);  // > 7 bytes: heap strings
    TVMFFIByteArray b = {buf, (size_t)n};
    if (str(&b, &lib->keys[i]) != 0) exit(2);
  }
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static TVMFFIAny int_any(int64_t v) {
  TVMFFIAny a;
  memset(&a, 0, sizeof a);
  a.type_index = kTVMFFIInt;
  a.v_int64 = v;
  return a;
}

static void release(Lib* lib, TVMFFIAny* v) {
  if (v->type_index >= kTVMFFIStaticObjectBegin) lib->dec_ref(v->v_obj);
  v->type_index = kTVMFFINone;
  v->v_int64 = 0;
}

static void check(int rc, const char* what) {
  if (rc != 0) {
    fprintf(stderr, "%s failed\n", what);
    exit(3);
  }
}

static TVMFFIAny map_args[2 * N];
static TVMFFIAny array_args[N];

// One round of each workload; returns nanoseconds per element in t[0..4).
static void round_once(Lib* lib, double t[4]) {
  TVMFFIAny map = {0}, arr = {0}, out = {0};
  int64_t sum = 0;
  double t0 = now_ns();
  check(lib->call(lib->f_map, map_args, 2 * N, &map), "ffi.Map");
  double t1 = now_ns();
  for (int i = 0; i < N; ++i) {
    TVMFFIAny a[2] = {map, lib->keys[i]};
    check(lib->call(lib->f_map_get, a, 2, &out), "ffi.MapGetItem");
    sum += out.v_int64;
  }
  double t2 = now_ns();
  check(lib->call(lib->f_array, array_args, N, &arr), "ffi.Array");
  double t3 = now_ns();
  for (int i = 0; i < N; ++i) {
    TVMFFIAny a[2] = {arr, int_any(i)};
    check(lib->call(lib->f_array_get, a, 2, &out), "ffi.ArrayGetItem");
    sum += out.v_int64;
  }
  double t4 = now_ns();
  if (sum != 2 * (int64_t)N * (N - 1) / 2) {
    fprintf(stderr, "%s: wrong checksum %lld\n", lib->name, (long long)sum);
    exit(3);
  }
  release(lib, &map);
  release(lib, &arr);
  t[0] = (t1 - t0) / N;
  t[1] = (t2 - t1) / N;
  t[2] = (t3 - t2) / N;
  t[3] = (t4 - t3) / N;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s OURS.so OFFICIAL.so [ROUNDS]\n", argv[0]);
    return 2;
  }
  int rounds = argc > 3 ? atoi(argv[3]) : 200;
  static Lib libs[2];
  load(&libs[0], argv[1], "ours");
  load(&libs[1], argv[2], "official");
  const char* names[4] = {"Map build (ffi.Map, 1000 str keys), per key", "Map lookup (ffi.MapGetItem), per call",
                          "Array build (ffi.Array, 1000 ints), per elem", "Array index (ffi.ArrayGetItem), per call"};
  double* samples[2][4];
  for (int l = 0; l < 2; ++l)
    for (int k = 0; k < 4; ++k) samples[l][k] = calloc(rounds, sizeof(double));
  for (int i = 0; i < N; ++i) array_args[i] = int_any(i);
  // Interleave the libraries round by round so both see the same machine state.
  for (int r = -10; r < rounds; ++r) {
    for (int l = 0; l < 2; ++l) {
      for (int i = 0; i < N; ++i) {
        map_args[2 * i] = libs[l].keys[i];
        map_args[2 * i + 1] = int_any(i);
      }
      double t[4];
      round_once(&libs[l], t);
      if (r >= 0)
        for (int k = 0; k < 4; ++k) samples[l][k][r] = t[k];
    }
  }
  printf("%-46s %12s %12s %8s\n", "median of rounds", "ours ns", "official ns", "ratio");
  for (int k = 0; k < 4; ++k) {
    double med[2];
    for (int l = 0; l < 2; ++l) {
      qsort(samples[l][k], rounds, sizeof(double), cmp_double);
      med[l] = samples[l][k][rounds / 2];
    }
    printf("%-46s %12.1f %12.1f %8.2f\n", names[k], med[0], med[1], med[0] / med[1]);
  }
  return 0;
}
