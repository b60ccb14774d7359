/* cases_env.c: streams, env C API, module symbols, init-once, custom allocator, backtrace */
#include "common.h"

#include <pthread.h>

/* ---------------- streams ---------------- */
CASE(stream_odd_devices) {
  static const int32_t devs[][2] = {{-1, 0}, {0, 0}, {1, -1}, {2, 1 << 30}, {INT32_MAX, INT32_MIN},
                                    {999, 3}};
  for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
    void* orig = (void*)0x1;
    int rc = TVMFFIEnvSetStream(devs[i][0], devs[i][1], (void*)(0x1000 + i), &orig);
    char w[64];
    snprintf(w, sizeof w, "set(%d,%d)", devs[i][0], devs[i][1]);
    pr_rc(w, rc);
    P("orig=%s", orig == NULL ? "NULL" : (orig == (void*)0x1 ? "untouched" : "set"));
    void* g = TVMFFIEnvGetStream(devs[i][0], devs[i][1]);
    P("get=%lx", (unsigned long)(uintptr_t)g);
  }
  P("get(1,0) unset=%lx", (unsigned long)(uintptr_t)TVMFFIEnvGetStream(1, 0));
  P("get(2,0) unset=%lx", (unsigned long)(uintptr_t)TVMFFIEnvGetStream(2, 0));
}
CASE(stream_set_null_and_orig_null) {
  pr_rc("set", TVMFFIEnvSetStream(2, 0, (void*)0x55, NULL));
  void* orig = NULL;
  pr_rc("set NULL", TVMFFIEnvSetStream(2, 0, NULL, &orig));
  P("orig=%lx get=%lx", (unsigned long)(uintptr_t)orig,
    (unsigned long)(uintptr_t)TVMFFIEnvGetStream(2, 0));
}
static void* stream_thread(void* arg) {
  (void)arg;
  P("thread get(2,0)=%lx", (unsigned long)(uintptr_t)TVMFFIEnvGetStream(2, 0));
  return NULL;
}
CASE(stream_other_thread) {
  TVMFFIEnvSetStream(2, 0, (void*)0x77, NULL);
  pthread_t th;
  pthread_create(&th, NULL, stream_thread, NULL);
  pthread_join(th, NULL);
}

/* ---------------- env C API ---------------- */
CASE(capi_null_name) { pr_rc("RegisterCAPI(NULL)", TVMFFIEnvRegisterCAPI(NULL, NULL)); }
CASE(capi_empty_name) { pr_rc("RegisterCAPI('')", TVMFFIEnvRegisterCAPI("", NULL)); }
CASE(capi_unknown_name_unusual) {
  pr_rc("RegisterCAPI(weird)", TVMFFIEnvRegisterCAPI("PyErr_\xff\n\tX", (void*)1));
}
static int g_sig_calls;
static int sig_fail(void) {
  g_sig_calls++;
  TVMFFIErrorSetRaisedFromCStr("KeyboardInterrupt", "signal!");
  return -1;
}
static int sig_ok(void) {
  g_sig_calls++;
  return 0;
}
static int g_gil;
static void* gil_ensure(void) {
  g_gil++;
  return (void*)0x99;
}
static void gil_release(void* s) {
  (void)s;
  g_gil--;
}
CASE(capi_check_signals_default) { pr_rc("CheckSignals", TVMFFIEnvCheckSignals()); }
CASE(capi_check_signals_without_gil_fns) {
  pr_rc("register", TVMFFIEnvRegisterCAPI("PyErr_CheckSignals", (void*)sig_ok));
  pr_rc("CheckSignals", TVMFFIEnvCheckSignals());
  P("calls=%d", g_sig_calls);
}
CASE(capi_check_signals_fail) {
  TVMFFIEnvRegisterCAPI("PyGILState_Ensure", (void*)gil_ensure);
  TVMFFIEnvRegisterCAPI("PyGILState_Release", (void*)gil_release);
  pr_rc("register", TVMFFIEnvRegisterCAPI("PyErr_CheckSignals", (void*)sig_fail));
  pr_rc("CheckSignals", TVMFFIEnvCheckSignals());
  P("calls=%d gil=%d", g_sig_calls, g_gil);
  pr_rc("register NULL", TVMFFIEnvRegisterCAPI("PyErr_CheckSignals", NULL));
  pr_rc("CheckSignals", TVMFFIEnvCheckSignals());
  P("calls=%d", g_sig_calls);
}
static void* gil_ensure_null(void) { return NULL; }
CASE(capi_check_signals_gil_returns_null) {
  TVMFFIEnvRegisterCAPI("PyGILState_Ensure", (void*)gil_ensure_null);
  TVMFFIEnvRegisterCAPI("PyGILState_Release", (void*)gil_release);
  TVMFFIEnvRegisterCAPI("PyErr_CheckSignals", (void*)sig_ok);
  pr_rc("CheckSignals", TVMFFIEnvCheckSignals());
  P("gil=%d", g_gil);
}

/* ---------------- module symbols ---------------- */
CASE(modsym_context_symbol_variants) {
  pr_rc("ctx ''", TVMFFIEnvModRegisterContextSymbol("", (void*)1));
  pr_rc("ctx name", TVMFFIEnvModRegisterContextSymbol("__cdiff_ctx", (void*)1));
  pr_rc("ctx dup", TVMFFIEnvModRegisterContextSymbol("__cdiff_ctx", (void*)2));
  pr_rc("ctx NULL ptr", TVMFFIEnvModRegisterContextSymbol("__cdiff_ctx2", NULL));
}
CASE(modsym_context_null_name) {
  pr_rc("ctx NULL", TVMFFIEnvModRegisterContextSymbol(NULL, (void*)1));
}
CASE(modsym_syslib_variants) {
  pr_rc("sys ''", TVMFFIEnvModRegisterSystemLibSymbol("", (void*)1));
  pr_rc("sys name", TVMFFIEnvModRegisterSystemLibSymbol("__tvm_ffi_cdiff_f", (void*)1));
  pr_rc("sys dup", TVMFFIEnvModRegisterSystemLibSymbol("__tvm_ffi_cdiff_f", (void*)2));
  pr_rc("sys NULL ptr", TVMFFIEnvModRegisterSystemLibSymbol("__tvm_ffi_cdiff_g", NULL));
}
CASE(modsym_syslib_null_name) {
  pr_rc("sys NULL", TVMFFIEnvModRegisterSystemLibSymbol(NULL, (void*)1));
}
static int sc_sys(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)n;
  result->type_index = kTVMFFIInt;
  result->v_int64 = 4242;
  return 0;
}
CASE(modsym_syslib_lookup) {
  pr_rc("sys register fn", TVMFFIEnvModRegisterSystemLibSymbol("__tvm_ffi_cdiff_add", (void*)sc_sys));
  void* sl = get_global("ffi.SystemLib");
  if (!sl) {
    P("no ffi.SystemLib");
    return;
  }
  TVMFFIAny rv;
  int rc = call(sl, NULL, 0, &rv);
  pr_rc("SystemLib()", rc);
  if (rc != 0) return;
  void* mod = rv.v_obj;
  P("mod type=%d", rv.type_index);
  void* out = (void*)0x1;
  rc = TVMFFIEnvModLookupFromImports(mod, "cdiff_missing", &out);
  pr_rc("lookup missing", rc);
  P("out=%s", out == NULL ? "NULL" : (out == (void*)0x1 ? "untouched" : "set"));
  out = NULL;
  rc = TVMFFIEnvModLookupFromImports(mod, "cdiff_add", &out);
  pr_rc("lookup cdiff_add (not in imports)", rc);
  out = NULL;
  rc = TVMFFIEnvModLookupFromImports(mod, "ffi.String", &out);
  pr_rc("lookup ffi.String (global)", rc);
  P("found=%d", out != NULL);
  out = NULL;
  rc = TVMFFIEnvModLookupFromImports(mod, "", &out);
  pr_rc("lookup ''", rc);
  /* GetFunction through the module's method */
  void* gf = get_global("ffi.ModuleGetFunction");
  if (gf) {
    TVMFFIAny a[3] = {a_obj(mod), a_raw("cdiff_add"), a_int(1)};
    a[2].type_index = kTVMFFIBool;
    TVMFFIAny r2;
    rc = call(gf, a, 3, &r2);
    pr_rc("ModuleGetFunction(cdiff_add)", rc);
    if (rc == 0 && r2.type_index == kTVMFFIFunction) {
      TVMFFIAny r3;
      pr_rc("call", call(r2.v_obj, NULL, 0, &r3));
      pr_any_release("r3", &r3);
    }
    pr_any_release("r2", &r2);
    TVMFFIObjectDecRef(gf);
  }
  TVMFFIObjectDecRef(mod);
  TVMFFIObjectDecRef(sl);
}
CASE(modsym_lookup_null_ctx) {
  void* out = NULL;
  pr_rc("lookup(NULL ctx)", TVMFFIEnvModLookupFromImports(NULL, "ffi.String", &out));
}
CASE(modsym_lookup_null_name) {
  void* sl = get_global("ffi.SystemLib");
  TVMFFIAny rv;
  if (call(sl, NULL, 0, &rv) != 0) {
    pr_err("SystemLib");
    return;
  }
  void* out = NULL;
  pr_rc("lookup(NULL name)", TVMFFIEnvModLookupFromImports(rv.v_obj, NULL, &out));
}

/* ---------------- init once ---------------- */
static void* g_h;
static int g_init_calls;
static int init_ok(void** r) {
  g_init_calls++;
  *r = (void*)0x42;
  return 0;
}
static int init_null_ok(void** r) {
  g_init_calls++;
  *r = NULL;
  return 0;
}
static int init_fail_noerr(void** r) {
  (void)r;
  g_init_calls++;
  return -1;
}
static int init_fail_7(void** r) {
  *r = (void*)0x5;
  g_init_calls++;
  return 7;
}
static int g_deinit_calls;
static int deinit_ok(void* h) {
  (void)h;
  g_deinit_calls++;
  return 0;
}
static int deinit_fail(void* h) {
  (void)h;
  g_deinit_calls++;
  TVMFFIErrorSetRaisedFromCStr("DeinitError", "nope");
  return -1;
}
CASE(init_returns_null_result) {
  pr_rc("init", TVMFFIHandleInitOnce(&g_h, init_null_ok));
  P("h=%lx calls=%d", (unsigned long)(uintptr_t)g_h, g_init_calls);
}
CASE(init_fail_without_error) {
  pr_rc("init", TVMFFIHandleInitOnce(&g_h, init_fail_noerr));
  P("h=%lx calls=%d", (unsigned long)(uintptr_t)g_h, g_init_calls);
}
CASE(init_fail_rc7_sets_result) {
  pr_rc("init", TVMFFIHandleInitOnce(&g_h, init_fail_7));
  P("h=%lx calls=%d", (unsigned long)(uintptr_t)g_h, g_init_calls);
}
/* (InitOnce re-entered from its own init_func, on the same or another handle: dropped, both
 * libraries deadlock) */
CASE(init_already_set_null_fn) {
  g_h = (void*)0x1;
  pr_rc("init(set, NULL fn)", TVMFFIHandleInitOnce(&g_h, NULL));
}
CASE(init_null_fn) { pr_rc("init(NULL fn)", TVMFFIHandleInitOnce(&g_h, NULL)); }
CASE(init_null_handle_addr) { pr_rc("init(NULL addr)", TVMFFIHandleInitOnce(NULL, init_ok)); }
CASE(deinit_variants) {
  g_h = NULL;
  pr_rc("deinit NULL handle", TVMFFIHandleDeinitOnce(&g_h, deinit_ok));
  P("calls=%d", g_deinit_calls);
  pr_rc("deinit NULL handle NULL fn", TVMFFIHandleDeinitOnce(&g_h, NULL));
  g_h = (void*)0x9;
  pr_rc("deinit fail", TVMFFIHandleDeinitOnce(&g_h, deinit_fail));
  P("h=%lx calls=%d", (unsigned long)(uintptr_t)g_h, g_deinit_calls);
  g_h = (void*)0x9;
  pr_rc("deinit ok", TVMFFIHandleDeinitOnce(&g_h, deinit_ok));
  P("h=%lx calls=%d", (unsigned long)(uintptr_t)g_h, g_deinit_calls);
}
CASE(deinit_set_handle_null_fn) {
  g_h = (void*)0x9;
  pr_rc("deinit(set, NULL fn)", TVMFFIHandleDeinitOnce(&g_h, NULL));
}

/* ---------------- custom allocator ---------------- */
static int g_ca_calls;
static size_t g_ca_last_size, g_ca_last_align;
static int32_t g_ca_last_type;
static int g_ca_fail;
static int g_ds_calls;
static void my_delete_space(void* ptr) {
  g_ds_calls++;
  free((char*)ptr - 64);
}
static void* my_allocate(size_t size, size_t alignment, int32_t type_index, void* ctx) {
  g_ca_calls++;
  g_ca_last_size = size;
  g_ca_last_align = alignment;
  g_ca_last_type = type_index;
  if (ctx != (void*)0xC0) P("  allocate: wrong context");
  if (g_ca_fail) {
    TVMFFIErrorSetRaisedFromCStr("MemoryError", "custom allocator says no");
    return NULL;
  }
  void* base = NULL;
  if (posix_memalign(&base, alignment < 64 ? 64 : alignment, size + 64) != 0) return NULL;
  void* p = (char*)base + 64;
  ((TVMFFIObjectAllocHeader*)p)[-1].delete_space = my_delete_space;
  return p;
}
static TVMFFICustomAllocator g_ca = {my_allocate, (void*)0xC0};
CASE(calloc_default) {
  TVMFFICustomAllocator* a = TVMFFIGetCustomAllocator();
  P("default=%s allocate=%s ctx=%s", a ? "set" : "NULL", a && a->allocate ? "set" : "NULL",
    a && a->context ? "set" : "NULL");
  pr_rc("set NULL", TVMFFISetCustomAllocator(NULL));
  P("same after NULL=%d", TVMFFIGetCustomAllocator() == a);
}
static void calloc_exercise(void) {
  TVMFFIByteArray b = ba("a heap string of more than eight bytes");
  TVMFFIAny s = a_none();
  int rc = TVMFFIStringFromByteArray(&b, &s);
  pr_rc("string", rc);
  P("calls=%d last_type=%d", g_ca_calls, g_ca_calls ? g_ca_last_type : 0);
  P("~last_size=%zu last_align=%zu", g_ca_last_size, g_ca_last_align);
  any_release(&s);
  void* f = NULL;
  rc = TVMFFIErrorCreate(&b, &b, &b, &f);
  P("errorcreate rc=%d calls=%d", rc, g_ca_calls);
  if (rc == 0) TVMFFIObjectDecRef(f);
  void* o = NULL;
  rc = TVMFFIObjectCreateOpaque(NULL, kTVMFFIOpaquePyObject, NULL, &o);
  pr_rc("opaque", rc);
  P("calls=%d", g_ca_calls);
  if (rc == 0) TVMFFIObjectDecRef(o);
  P("delete_space calls=%d", g_ds_calls);
}
CASE(calloc_custom_used_by_library_objects) {
  pr_rc("set", TVMFFISetCustomAllocator(&g_ca));
  P("get is mine=%d", TVMFFIGetCustomAllocator() == &g_ca);
  calloc_exercise();
  TVMFFISetCustomAllocator(NULL);
}
CASE(calloc_custom_failing) {
  g_ca_fail = 1;
  pr_rc("set", TVMFFISetCustomAllocator(&g_ca));
  calloc_exercise();
  TVMFFISetCustomAllocator(NULL);
}
static TVMFFICustomAllocator g_ca_null = {NULL, NULL};
CASE(calloc_custom_null_allocate_fn) {
  pr_rc("set {NULL,NULL}", TVMFFISetCustomAllocator(&g_ca_null));
  TVMFFIByteArray b = ba("a heap string of more than eight bytes");
  TVMFFIAny s = a_none();
  pr_rc("string", TVMFFIStringFromByteArray(&b, &s));
  any_release(&s);
  TVMFFISetCustomAllocator(NULL);
}

/* ---------------- backtrace ---------------- */
static void bt_case(const char* what, const char* file, int line, const char* func, int cross) {
  const TVMFFIByteArray* b = TVMFFIBacktrace(file, line, func, cross);
  if (!b) {
    P("%s backtrace=NULL", what);
    return;
  }
  P("%s nonnull", what);
  P("~%s size=%zu", what, b->size);
  char linebuf[32];
  snprintf(linebuf, sizeof linebuf, ":%d", line);
  int has_file = file && b->data && memmem(b->data, b->size, file, strlen(file) > 64 ? 64 : strlen(file)) != NULL;
  int has_func = func && b->data && memmem(b->data, b->size, func, strlen(func) > 64 ? 64 : strlen(func)) != NULL;
  int has_line = b->data && memmem(b->data, b->size, linebuf, strlen(linebuf)) != NULL;
  P("%s has_file=%d has_func=%d has_line=%d", what, has_file, has_func, has_line);
  if (b->size < 2000) {
    char* e = esc(b->data, b->size);
    P("~%s text=%s", what, e);
    free(e);
  }
}
CASE(bt_nulls) { bt_case("nulls", NULL, 0, NULL, 0); }
CASE(bt_file_func) { bt_case("file/func", "cdiff_file.c", 4242, "cdiff_func", 0); }
CASE(bt_file_func_cross) { bt_case("file/func cross", "cdiff_file.c", 4242, "cdiff_func", 1); }
CASE(bt_negative_line) { bt_case("neg line", "f.c", -7, "fn", 0); }
CASE(bt_non_utf8) { bt_case("nonutf8", "\xff\xfe.c", 1, "\xc0\xaf", 0); }
CASE(bt_huge_names) {
  size_t n = 1 << 20;
  char* s = (char*)malloc(n + 1);
  memset(s, 'f', n);
  s[n] = 0;
  bt_case("huge", s, 1, s, 0);
  free(s);
}
CASE(bt_stable_pointer) {
  const TVMFFIByteArray* a = TVMFFIBacktrace("a.c", 1, "fa", 0);
  const TVMFFIByteArray* b = TVMFFIBacktrace("b.c", 2, "fb", 0);
  P("~same pointer=%d", a == b);
}

/* The system library is made as a loaded library is (the official CreateLibraryModule): the
 * context symbols and __tvm_ffi__library_ctx registered as system-library symbols are written,
 * so its functions can look up imports through the context. (Ours ignored both.) The value
 * written differs (the official library writes its C++ ModuleObj*, ours the object handle):
 * each library's own lookup accepts its own. */
static void* cdiff_sys_ctx = NULL;
static void* cdiff_sys_sym = NULL;
CASE(modsym_syslib_ctx_and_context_symbols) {
  pr_rc("ctx sym", TVMFFIEnvModRegisterContextSymbol("__cdiff_ctxsym", (void*)0x1234));
  pr_rc("sys ctx slot", TVMFFIEnvModRegisterSystemLibSymbol("__tvm_ffi__library_ctx", &cdiff_sys_ctx));
  pr_rc("sys ctxsym slot", TVMFFIEnvModRegisterSystemLibSymbol("__cdiff_ctxsym", &cdiff_sys_sym));
  void* sl = get_global("ffi.SystemLib");
  TVMFFIAny rv;
  int rc = call(sl, NULL, 0, &rv);
  pr_rc("SystemLib()", rc);
  if (rc == 0) {
    P("library_ctx written=%d", cdiff_sys_ctx != NULL);
    P("context symbol=%p", cdiff_sys_sym);
    if (cdiff_sys_ctx != NULL) {
      void* out = NULL;
      pr_rc("lookup through the ctx", TVMFFIEnvModLookupFromImports(cdiff_sys_ctx, "ffi.String", &out));
      P("found=%d", out != NULL);
    }
    any_release(&rv);
  }
  TVMFFIObjectDecRef(sl);
}

/* A registered loader whose result is not a module: a TypeError, as the official cast<Module>()
 * (ours returned the int). */
static int cdiff_loader_int(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)n;
  result->type_index = kTVMFFIInt;
  result->v_int64 = 7;
  return 0;
}
CASE(module_load_loader_returns_int) {
  void* f = NULL;
  pr_rc("create", TVMFFIFunctionCreate(NULL, cdiff_loader_int, NULL, &f));
  TVMFFIByteArray nm = ba("ffi.Module.load_from_file.cdiffx");
  pr_rc("set loader", TVMFFIFunctionSetGlobal(&nm, f, 0));
  void* load = get_global("ffi.ModuleLoadFromFile");
  TVMFFIAny a = a_raw("/nonexistent/x.cdiffx"), rv;
  int rc = call(load, &a, 1, &rv);
  pr_rc("ModuleLoadFromFile(x.cdiffx)", rc);
  if (rc == 0) pr_any_release("rv", &rv);
  TVMFFIObjectDecRef(load);
  TVMFFIObjectDecRef(f);
}
