/*
 * bench_abi.c: micro-benchmarks of the TVM FFI C ABI, official libtvm_ffi.so
 * versus ours, in one process.
 *
 * Usage: bench_abi [--reps N] [--ms MS] OFFICIAL_SO [OURS_SO]
 *
 * Both libraries are dlopen'ed with RTLD_LOCAL|RTLD_NOW (they export the same
 * symbols, so every entry point is looked up with dlsym on its own handle) and
 * measured interleaved: for every repetition each library runs the same
 * number of iterations, alternating which goes first. The reported number is
 * the median ns/op over the repetitions.
 *
 * Compiled against the official headers only for the struct and typedef
 * definitions; nothing is linked from libtvm_ffi.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <tvm/ffi/c_api.h>
#include <unistd.h>

/* ---- the subset of the C ABI we call, resolved per library ---------------- */

typedef struct {
  const char* name;
  const char* path;
  void* handle;
  void (*GetVersion)(TVMFFIVersion*);
  int (*ObjectIncRef)(void*);
  int (*ObjectDecRef)(void*);
  int (*FunctionCreate)(void*, TVMFFISafeCallType, void (*)(void*), void**);
  int (*FunctionCall)(void*, TVMFFIAny*, int32_t, TVMFFIAny*);
  int (*FunctionGetGlobal)(const TVMFFIByteArray*, void**);
  int (*StringFromByteArray)(const TVMFFIByteArray*, TVMFFIAny*);
  void (*ErrorMoveFromRaised)(void**);
} Lib;

static int lib_open(Lib* lib, const char* name, const char* path) {
  memset(lib, 0, sizeof(*lib));
  lib->name = name;
  lib->path = path;
  lib->handle = dlopen(path, RTLD_LOCAL | RTLD_NOW);
  if (lib->handle == NULL) {
    fprintf(stderr, "bench_abi: cannot dlopen %s: %s\n", path, dlerror());
    return -1;
  }
#define RESOLVE(field, sym)                                                             \
  do {                                                                                  \
    *(void**)(&lib->field) = dlsym(lib->handle, sym);                                   \
    if (lib->field == NULL) {                                                           \
      fprintf(stderr, "bench_abi: %s has no symbol %s\n", path, sym);                   \
      return -1;                                                                        \
    }                                                                                   \
  } while (0)
  RESOLVE(GetVersion, "TVMFFIGetVersion");
  RESOLVE(ObjectIncRef, "TVMFFIObjectIncRef");
  RESOLVE(ObjectDecRef, "TVMFFIObjectDecRef");
  RESOLVE(FunctionCreate, "TVMFFIFunctionCreate");
  RESOLVE(FunctionCall, "TVMFFIFunctionCall");
  RESOLVE(FunctionGetGlobal, "TVMFFIFunctionGetGlobal");
  RESOLVE(StringFromByteArray, "TVMFFIStringFromByteArray");
  RESOLVE(ErrorMoveFromRaised, "TVMFFIErrorMoveFromRaised");
#undef RESOLVE
  return 0;
}

/* ---- C callees ------------------------------------------------------------- */

static int noop_safe_call(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* rv) {
  return 0;
}

static int add_safe_call(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* rv) {
  rv->type_index = kTVMFFIInt;
  rv->zero_padding = 0;
  rv->v_int64 = args[0].v_int64 + args[1].v_int64;
  return 0;
}

static void noop_deleter(void* self) {}

/* ---- benchmark cases ------------------------------------------------------- */

typedef struct {
  Lib* lib;
  void* f;     /* a function object */
  void* obj;   /* some other object */
  int64_t sink;
} Ctx;

typedef struct {
  const char* name;
  const char* what;
  int (*setup)(Ctx*);        /* returns 0 on success */
  int (*run)(Ctx*, long n);  /* returns 0 on success */
  void (*teardown)(Ctx*);
} Case;

static void release_any(Lib* lib, TVMFFIAny* a) {
  if (a->type_index >= kTVMFFIStaticObjectBegin) lib->ObjectDecRef(a->v_obj);
  a->type_index = kTVMFFINone;
}

static void drop_error(Lib* lib) {
  void* err = NULL;
  lib->ErrorMoveFromRaised(&err);
  if (err != NULL) lib->ObjectDecRef(err);
}

static void teardown_f(Ctx* c) {
  if (c->f) c->lib->ObjectDecRef(c->f);
  if (c->obj) c->lib->ObjectDecRef(c->obj);
  c->f = c->obj = NULL;
}

static int setup_noop(Ctx* c) { return c->lib->FunctionCreate(NULL, noop_safe_call, NULL, &c->f); }
static int setup_noop_self(Ctx* c) {
  static int self_token;
  return c->lib->FunctionCreate(&self_token, noop_safe_call, noop_deleter, &c->f);
}
static int run_call0(Ctx* c, long n) {
  Lib* lib = c->lib;
  void* f = c->f;
  TVMFFIAny rv;
  long i;
  for (i = 0; i < n; ++i) {
    rv.type_index = kTVMFFINone;
    rv.zero_padding = 0;
    rv.v_int64 = 0;
    if (lib->FunctionCall(f, NULL, 0, &rv) != 0) return -1;
  }
  return 0;
}

static int setup_add(Ctx* c) { return c->lib->FunctionCreate(NULL, add_safe_call, NULL, &c->f); }
static int run_call2(Ctx* c, long n) {
  Lib* lib = c->lib;
  void* f = c->f;
  TVMFFIAny args[2], rv;
  int64_t acc = 0;
  long i;
  memset(args, 0, sizeof(args));
  args[0].type_index = kTVMFFIInt;
  args[1].type_index = kTVMFFIInt;
  for (i = 0; i < n; ++i) {
    args[0].v_int64 = i;
    args[1].v_int64 = 1;
    rv.type_index = kTVMFFINone;
    rv.zero_padding = 0;
    rv.v_int64 = 0;
    if (lib->FunctionCall(f, args, 2, &rv) != 0) return -1;
    acc += rv.v_int64;
  }
  c->sink += acc;
  return (n > 0 && acc != (int64_t)n * (n - 1) / 2 + n) ? -1 : 0;
}

static int setup_string_obj(Ctx* c) {
  TVMFFIByteArray ba = {"an object for refcounting", 25};
  TVMFFIAny out;
  out.type_index = kTVMFFINone;
  if (c->lib->StringFromByteArray(&ba, &out) != 0) return -1;
  if (out.type_index < kTVMFFIStaticObjectBegin) return -1;
  c->obj = out.v_obj;
  return 0;
}
static int run_incdec(Ctx* c, long n) {
  Lib* lib = c->lib;
  void* o = c->obj;
  long i;
  for (i = 0; i < n; ++i) {
    lib->ObjectIncRef(o);
    lib->ObjectDecRef(o);
  }
  return ((TVMFFIObject*)o)->combined_ref_count == 0x0000000100000001ULL ? 0 : -1;
}

static int setup_nothing(Ctx* c) { return 0; }
static int run_get_global(Ctx* c, long n) {
  Lib* lib = c->lib;
  TVMFFIByteArray name = {"ffi.Shape", 9};
  long i;
  for (i = 0; i < n; ++i) {
    void* f = NULL;
    if (lib->FunctionGetGlobal(&name, &f) != 0 || f == NULL) return -1;
    lib->ObjectDecRef(f);
  }
  return 0;
}

static int run_string20(Ctx* c, long n) {
  Lib* lib = c->lib;
  TVMFFIByteArray ba = {"twenty byte string!!", 20};
  long i;
  for (i = 0; i < n; ++i) {
    TVMFFIAny out;
    out.type_index = kTVMFFINone;
    if (lib->StringFromByteArray(&ba, &out) != 0) return -1;
    release_any(lib, &out);
  }
  return 0;
}

static int setup_shape(Ctx* c) {
  TVMFFIByteArray name = {"ffi.Shape", 9};
  if (c->lib->FunctionGetGlobal(&name, &c->f) != 0 || c->f == NULL) return -1;
  return 0;
}
static int run_shape3(Ctx* c, long n) {
  Lib* lib = c->lib;
  void* f = c->f;
  TVMFFIAny args[3], rv;
  long i;
  memset(args, 0, sizeof(args));
  for (i = 0; i < 3; ++i) {
    args[i].type_index = kTVMFFIInt;
    args[i].v_int64 = i + 1;
  }
  for (i = 0; i < n; ++i) {
    rv.type_index = kTVMFFINone;
    rv.zero_padding = 0;
    rv.v_int64 = 0;
    if (lib->FunctionCall(f, args, 3, &rv) != 0) return -1;
    if (rv.type_index != kTVMFFIShape) return -1;
    release_any(lib, &rv);
  }
  return 0;
}

static const Case kCases[] = {
    {"call_noop_0args", "FunctionCall, C safe_call, self=NULL, 0 args", setup_noop, run_call0,
     teardown_f},
    {"call_noop_0args_self", "FunctionCall, C safe_call with self+deleter, 0 args",
     setup_noop_self, run_call0, teardown_f},
    {"call_add_2ints", "FunctionCall, C safe_call, 2 int args -> int", setup_add, run_call2,
     teardown_f},
    {"incref_decref", "ObjectIncRef + ObjectDecRef on a Str", setup_string_obj, run_incdec,
     teardown_f},
    {"get_global_shape", "FunctionGetGlobal(\"ffi.Shape\") + DecRef", setup_nothing,
     run_get_global, teardown_f},
    {"string_from_20B", "StringFromByteArray(20 bytes) + DecRef", setup_nothing, run_string20,
     teardown_f},
    {"call_ffi_shape_3", "FunctionCall(ffi.Shape, 1, 2, 3) + DecRef result", setup_shape,
     run_shape3, teardown_f},
};
#define NUM_CASES ((int)(sizeof(kCases) / sizeof(kCases[0])))

/* ---- timing ---------------------------------------------------------------- */

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ns/op of one batch of n iterations; negative on failure. */
static double time_batch(const Case* cs, Ctx* c, long n) {
  double t0, t1;
  t0 = now_ns();
  if (cs->run(c, n) != 0) return -1.0;
  t1 = now_ns();
  return (t1 - t0) / (double)n;
}

/* Run setup+run+teardown in a child first so a crashing library is reported
 * instead of taking the whole benchmark down. */
static int case_works(const Case* cs, Lib* lib) {
  pid_t pid;
  int status = 0;
  fflush(stdout);
  fflush(stderr);
  pid = fork();
  if (pid < 0) return 1; /* cannot check: assume it works */
  if (pid == 0) {
    Ctx c;
    int ok;
    memset(&c, 0, sizeof(c));
    c.lib = lib;
    alarm(20);
    ok = cs->setup(&c) == 0 && cs->run(&c, 1000) == 0;
    if (!ok) drop_error(lib);
    cs->teardown(&c);
    _exit(ok ? 0 : 1);
  }
  if (waitpid(pid, &status, 0) < 0) return 0;
  if (WIFSIGNALED(status)) {
    fprintf(stderr, "bench_abi: %s: case %s crashed (signal %d)\n", lib->name, cs->name,
            WTERMSIG(status));
    return 0;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "bench_abi: %s: case %s failed its sanity run\n", lib->name, cs->name);
    return 0;
  }
  return 1;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

#define MAX_LIBS 2
#define MAX_REPS 101

int main(int argc, char** argv) {
  Lib libs[MAX_LIBS];
  int num_libs = 0;
  int reps = 11;
  double batch_ms = 20.0;
  const char* paths[MAX_LIBS];
  int num_paths = 0;
  int i, k, r;
  double results[NUM_CASES][MAX_LIBS];
  double spread[NUM_CASES][MAX_LIBS]; /* interquartile range / median, in % */

  for (i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--ms") == 0 && i + 1 < argc) {
      batch_ms = atof(argv[++i]);
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "usage: %s [--reps N] [--ms MS] OFFICIAL_SO [OURS_SO]\n", argv[0]);
      return 2;
    } else if (num_paths < MAX_LIBS) {
      paths[num_paths++] = argv[i];
    }
  }
  if (num_paths == 0) {
    fprintf(stderr, "usage: %s [--reps N] [--ms MS] OFFICIAL_SO [OURS_SO]\n", argv[0]);
    return 2;
  }
  if (reps < 1) reps = 1;
  if (reps > MAX_REPS) reps = MAX_REPS;

  for (i = 0; i < num_paths; ++i) {
    if (lib_open(&libs[i], i == 0 ? "official" : "ours", paths[i]) != 0) return 1;
    ++num_libs;
  }
  for (i = 0; i < num_libs; ++i) {
    TVMFFIVersion v;
    libs[i].GetVersion(&v);
    printf("%-8s %s (C ABI %u.%u.%u)\n", libs[i].name, libs[i].path, v.major, v.minor, v.patch);
  }
  if (num_libs == 1) printf("ours     not present: reporting official numbers only\n");
  printf("method: median of %d reps x ~%.0f ms batches per library, interleaved, "
         "CLOCK_MONOTONIC\n\n",
         reps, batch_ms);
  fflush(stdout);

  for (k = 0; k < NUM_CASES; ++k) {
    const Case* cs = &kCases[k];
    Ctx ctx[MAX_LIBS];
    int ok[MAX_LIBS];
    double samples[MAX_LIBS][MAX_REPS];
    long n = 1000;
    for (i = 0; i < num_libs; ++i) {
      results[k][i] = -1.0;
      spread[k][i] = 0.0;
      ok[i] = case_works(cs, &libs[i]);
      memset(&ctx[i], 0, sizeof(ctx[i]));
      ctx[i].lib = &libs[i];
      if (ok[i] && cs->setup(&ctx[i]) != 0) {
        drop_error(&libs[i]);
        ok[i] = 0;
      }
    }
    /* Warm up and calibrate n on the first working library. */
    for (i = 0; i < num_libs; ++i) {
      if (!ok[i]) continue;
      {
        double per = time_batch(cs, &ctx[i], n);
        while (per >= 0 && per * (double)n < batch_ms * 1e6 / 4) {
          n *= 2;
          per = time_batch(cs, &ctx[i], n);
        }
        if (per > 0) n = (long)(batch_ms * 1e6 / per) + 1;
      }
      break;
    }
    for (i = 0; i < num_libs; ++i) {
      if (ok[i]) time_batch(cs, &ctx[i], n / 4 + 1); /* warm-up for every library */
    }
    for (r = 0; r < reps; ++r) {
      for (i = 0; i < num_libs; ++i) {
        int li = (r % 2 == 0) ? i : num_libs - 1 - i; /* alternate who goes first */
        if (!ok[li]) continue;
        samples[li][r] = time_batch(cs, &ctx[li], n);
        if (samples[li][r] < 0) {
          drop_error(&libs[li]);
          ok[li] = 0;
        }
      }
    }
    for (i = 0; i < num_libs; ++i) {
      if (ok[i]) {
        qsort(samples[i], (size_t)reps, sizeof(double), cmp_double);
        results[k][i] = samples[i][reps / 2];
        if (results[k][i] > 0) {
          spread[k][i] =
              100.0 * (samples[i][(3 * reps) / 4] - samples[i][reps / 4]) / results[k][i];
        }
      }
      cs->teardown(&ctx[i]);
    }
    fprintf(stderr, "  done: %s\n", cs->name);
  }

  /* ---- table ---- */
  if (num_libs == 2) {
    int slower = 0, within_noise = 0;
    printf("%-22s %13s %10s %14s %8s  %s\n", "op", "official ns", "ours ns", "ours/official",
           "IQR%", "target<=1.0");
    for (k = 0; k < NUM_CASES; ++k) {
      double a = results[k][0], b = results[k][1];
      double noise = spread[k][0] > spread[k][1] ? spread[k][0] : spread[k][1];
      printf("%-22s ", kCases[k].name);
      if (a >= 0) printf("%13.2f ", a); else printf("%13s ", "error");
      if (b >= 0) printf("%10.2f ", b); else printf("%10s ", "error");
      if (a > 0 && b >= 0) {
        double ratio = b / a;
        const char* verdict = "ok";
        if (ratio > 1.0) {
          if ((ratio - 1.0) * 100.0 <= noise) {
            verdict = "~ (within noise)";
            ++within_noise;
          } else {
            verdict = "SLOWER";
            ++slower;
          }
        }
        printf("%14.2f %7.1f%%  %s\n", ratio, noise, verdict);
      } else {
        printf("%14s %8s  %s\n", "-", "-", "n/a");
      }
    }
    printf("\n%d of %d ops slower than official beyond noise, %d slower within noise\n", slower,
           NUM_CASES, within_noise);
    printf("(IQR%%: interquartile range of the repetitions over the median, worse of the two)\n");
  } else {
    printf("%-22s %13s\n", "op", "official ns");
    for (k = 0; k < NUM_CASES; ++k) {
      if (results[k][0] >= 0) {
        printf("%-22s %13.2f\n", kCases[k].name, results[k][0]);
      } else {
        printf("%-22s %13s\n", kCases[k].name, "error");
      }
    }
  }
  printf("\nops:\n");
  for (k = 0; k < NUM_CASES; ++k) printf("  %-22s %s\n", kCases[k].name, kCases[k].what);
  /* Libraries are intentionally not dlclose'd: unloading C++ runtimes with
   * live static state at exit is not worth the risk in a benchmark. */
  return 0;
}
