/* cases_tls.c: result slots pre-filled with objects; thread-exit / process-exit clean-up of
 * thread-local state with deleters that re-enter the library; concurrent init-once and
 * registry/type-table concurrency; init/deinit cross re-entrancy; non-ASCII UTF-8 names */
#include "common.h"

#include <pthread.h>
#include <unistd.h>

/* ---------------- pre-filled result / out slots holding a live object ---------------- */
/* prints the count of the caller's object, then drops every reference left to it */
static void report_and_free(void* mine) {
  P("caller object strong=%u", strong_count(mine));
  while (strong_count(mine) > 1) TVMFFIObjectDecRef(mine);
  TVMFFIObjectDecRef(mine);
}
CASE(result_slot_prefilled_object_builtin) {
  void* mine = make_str_obj("object owned by the caller, left in the result slot");
  TVMFFIObjectIncRef(mine); /* one ref for us, one "in" the slot */
  void* f = get_global("ffi.String");
  TVMFFIAny rv = a_obj(mine);
  TVMFFIAny args[1] = {a_raw("result of ffi.String call")};
  pr_rc("call", TVMFFIFunctionCall(f, args, 1, &rv));
  P("caller object strong=%u", strong_count(mine));
  pr_any_release("rv", &rv);
  TVMFFIObjectDecRef(f);
  report_and_free(mine);
}
CASE(result_slot_prefilled_object_builtin_error) {
  void* mine = make_str_obj("object owned by the caller, left in the result slot");
  TVMFFIObjectIncRef(mine);
  void* f = get_global("ffi.String");
  TVMFFIAny rv = a_obj(mine);
  TVMFFIAny args[1] = {a_int(5)};
  pr_rc("call (TypeError)", TVMFFIFunctionCall(f, args, 1, &rv));
  P("rv.type=%d same=%d", rv.type_index, rv.v_obj == (TVMFFIObject*)mine);
  report_and_free(mine);
}
CASE(out_prefilled_object_a2o) {
  void* mine = make_str_obj("object owned by the caller, left in the out slot");
  TVMFFIObjectIncRef(mine);
  TVMFFIAny out = a_obj(mine);
  TVMFFIAny v = a_int(3);
  pr_rc("a2o", TVMFFIAnyViewToOwnedAny(&v, &out));
  report_and_free(mine);
}
CASE(out_prefilled_object_string_from) {
  void* mine = make_str_obj("object owned by the caller, left in the out slot");
  TVMFFIObjectIncRef(mine);
  TVMFFIAny out = a_obj(mine);
  TVMFFIByteArray b = ba("new");
  pr_rc("string", TVMFFIStringFromByteArray(&b, &out));
  report_and_free(mine);
}
static int sc_result_then_fail(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)n;
  TVMFFIByteArray b = ba("partial result written before failing");
  TVMFFIStringFromByteArray(&b, result);
  TVMFFIErrorSetRaisedFromCStr("ValueError", "failed after writing result");
  return -1;
}
CASE(callee_writes_result_then_fails) {
  void* f = NULL;
  TVMFFIFunctionCreate(NULL, sc_result_then_fail, NULL, &f);
  TVMFFIAny rv;
  int rc = call(f, NULL, 0, &rv);
  pr_rc("direct", rc);
  P("rv.type=%d", rv.type_index);
  any_release(&rv);
  /* through a library function that calls it: ffi.Function -> via registry */
  TVMFFIByteArray name = ba("cdiff.rtf");
  TVMFFIFunctionSetGlobal(&name, f, 0);
  void* g = get_global("cdiff.rtf");
  rc = call(g, NULL, 0, &rv);
  pr_rc("via registry", rc);
  P("rv.type=%d", rv.type_index);
  any_release(&rv);
  TVMFFIObjectDecRef(g);
  TVMFFIObjectDecRef(f);
}

/* ---------------- thread exit with thread-local state ---------------- */
static void* th_pending_error(void* arg) {
  (void)arg;
  TVMFFIErrorSetRaisedFromCStr("ThreadError", "left pending at thread exit");
  return NULL;
}
CASE(thread_exit_pending_error) {
  pthread_t t;
  pthread_create(&t, NULL, th_pending_error, NULL);
  pthread_join(t, NULL);
  P("joined");
  pr_err("main slot");
}
static int g_tls_deleter_calls;
static void tls_reenter_deleter(void* h) {
  (void)h;
  g_tls_deleter_calls++;
  /* runs while the exiting thread's TLS is being destroyed */
  TVMFFIErrorSetRaisedFromCStr("FromTLSDtor", "set during thread-local destruction");
  void* e = NULL;
  TVMFFIErrorMoveFromRaised(&e);
  if (e) TVMFFIObjectDecRef(e);
  (void)TVMFFIEnvGetStream(2, 0);
  TVMFFIEnvSetStream(2, 0, (void*)0x5, NULL);
  (void)TVMFFIBacktrace("x.c", 1, "f", 0);
}
static void* th_backtrace_stream(void* arg) {
  (void)arg;
  const TVMFFIByteArray* b = TVMFFIBacktrace("t.c", 3, "tf", 0);
  (void)b;
  TVMFFIEnvSetStream(1, 0, (void*)0x9, NULL);
  TVMFFIEnvSetDLPackManagedTensorAllocator(NULL, 0, NULL);
  return NULL;
}
CASE(thread_exit_backtrace_stream) {
  for (int i = 0; i < 20; i++) {
    pthread_t t;
    pthread_create(&t, NULL, th_backtrace_stream, NULL);
    pthread_join(t, NULL);
  }
  P("joined 20");
}
/* process exit with a pending error whose deleter re-enters the library */
CASE(exit_pending_error_reentrant_deleter) {
  void* o = NULL;
  TVMFFIObjectCreateOpaque((void*)0x1, kTVMFFIOpaquePyObject, tls_reenter_deleter, &o);
  TVMFFIByteArray k = ba("E"), m = ba("m"), b = ba("");
  void* e = NULL;
  TVMFFIErrorCreateWithCauseAndExtraContext(&k, &m, &b, NULL, o, &e);
  TVMFFIObjectDecRef(o);
  TVMFFIErrorSetRaised(e);
  TVMFFIObjectDecRef(e);
  P("returning with the error pending");
}
static void fn_del_reenter_at_exit(void* self) {
  (void)self;
  TVMFFIByteArray n = ba("ffi.String");
  void* g = NULL;
  TVMFFIFunctionGetGlobal(&n, &g);
  if (g) TVMFFIObjectDecRef(g);
  TVMFFIByteArray s = ba("string made by a deleter at exit time");
  TVMFFIAny a = a_none();
  TVMFFIStringFromByteArray(&s, &a);
  any_release(&a);
}
static int sc_noop(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)n;
  (void)result;
  return 0;
}
CASE(exit_registry_function_deleter_reenters) {
  void* f = NULL;
  TVMFFIFunctionCreate((void*)1, sc_noop, fn_del_reenter_at_exit, &f);
  TVMFFIByteArray n = ba("cdiff.exitdel");
  TVMFFIFunctionSetGlobal(&n, f, 0);
  TVMFFIObjectDecRef(f);
  P("returning with the function registered");
}
CASE(exit_attr_value_deleter_reenters) {
  void* f = NULL;
  TVMFFIFunctionCreate((void*)1, sc_noop, fn_del_reenter_at_exit, &f);
  TVMFFIByteArray n = ba("cdiff_exit_attr");
  TVMFFIAny v = a_obj(f);
  TVMFFITypeRegisterAttr(65, &n, &v);
  TVMFFIObjectDecRef(f);
  P("returning with the attr registered");
}

/* ---------------- concurrent init-once ---------------- */
static void* g_once_h;
static int g_once_calls;
static int once_slow(void** r) {
  __atomic_add_fetch(&g_once_calls, 1, __ATOMIC_SEQ_CST);
  usleep(50000);
  *r = (void*)0x77;
  return 0;
}
static void* th_once(void* a) {
  (void)a;
  int rc = TVMFFIHandleInitOnce(&g_once_h, once_slow);
  return (void*)(intptr_t)rc;
}
CASE(conc_init_once) {
  pthread_t t[8];
  for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, th_once, NULL);
  int bad = 0;
  for (int i = 0; i < 8; i++) {
    void* r;
    pthread_join(t[i], &r);
    bad += r != NULL;
  }
  P("calls=%d bad=%d h=%lx", g_once_calls, bad, (unsigned long)(uintptr_t)g_once_h);
}

/* ---------------- concurrency: registry only / type table only ----------------
 * (a fixed number of iterations per thread; see the note in cases_more.c) */
enum { SPLIT_ITERS = 20000 };
static int sc_c(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)n;
  result->type_index = kTVMFFIInt;
  result->v_int64 = 1;
  return 0;
}
static void* w_setget(void* arg) {
  long id = (long)arg, bad = 0;
  for (long it = 0; it < SPLIT_ITERS; it++) {
    TVMFFIByteArray nm = ba(it % 2 ? "cdiff.c.a" : "cdiff.c.b");
    if (id % 2 == 0) {
      void* f = NULL;
      TVMFFIFunctionCreate(NULL, sc_c, NULL, &f);
      if (TVMFFIFunctionSetGlobal(&nm, f, 1)) bad++;
      TVMFFIObjectDecRef(f);
    } else {
      void* g = NULL;
      TVMFFIFunctionGetGlobal(&nm, &g);
      if (g) {
        TVMFFIAny rv = a_none();
        if (TVMFFIFunctionCall(g, NULL, 0, &rv)) bad++;
        TVMFFIObjectDecRef(g);
      }
    }
  }
  return (void*)bad;
}
static void* w_types(void* arg) {
  long id = (long)arg;
  char tk[64];
  for (long it = 0; it < SPLIT_ITERS; it++) {
    snprintf(tk, sizeof tk, "cdiff.ct.%ld.%ld", id, it % 200);
    TVMFFIByteArray k = ba(tk);
    int32_t t = TVMFFITypeGetOrAllocIndex(&k, -1, 1, 0, 1, kTVMFFIObject);
    const TVMFFITypeInfo* ti = TVMFFIGetTypeInfo(t);
    if (!ti || ti->type_index != t) return (void*)1;
  }
  return NULL;
}
static void run_conc(void* (*w)(void*), int n) {
  pthread_t t[8];
  for (long i = 0; i < n; i++) pthread_create(&t[i], NULL, w, (void*)i);
  long bad = 0;
  for (int i = 0; i < n; i++) {
    void* r;
    pthread_join(t[i], &r);
    bad += (long)r;
  }
  P("bad=%ld", bad);
}
CASE(conc_setget_only) { run_conc(w_setget, 4); }
CASE(conc_types_only) { run_conc(w_types, 4); }

/* ---------------- TLS destruction: one library call per case, from a deleter that runs while
 * the thread-local error slot is destroyed (thread exit or process exit) ---------------- */
static long g_action;
static void tls_action_deleter(void* h) {
  (void)h;
  switch (g_action) {
    case 0: break;
    case 1: TVMFFIErrorSetRaisedFromCStr("FromTLSDtor", "x"); break;
    case 2: { void* e = NULL; TVMFFIErrorMoveFromRaised(&e); if (e) TVMFFIObjectDecRef(e); break; }
    case 3: (void)TVMFFIEnvGetStream(2, 0); break;
    case 4: TVMFFIEnvSetStream(2, 0, (void*)0x5, NULL); break;
    case 5: (void)TVMFFIBacktrace("x.c", 1, "f", 0); break;
    case 6: { TVMFFIByteArray s = ba("a heap string from the deleter"); TVMFFIAny a = a_none();
              TVMFFIStringFromByteArray(&s, &a); any_release(&a); break; }
    case 7: { TVMFFIByteArray n = ba("ffi.String"); void* g = NULL; TVMFFIFunctionGetGlobal(&n, &g);
              if (g) { TVMFFIAny r = a_none(); TVMFFIAny a = a_raw("abc"); TVMFFIFunctionCall(g, &a, 1, &r);
                       any_release(&r); TVMFFIObjectDecRef(g); } break; }
    case 8: { void* g = NULL; TVMFFIByteArray n = ba("ffi.String"); TVMFFIFunctionGetGlobal(&n, &g);
              if (g) { TVMFFIAny r = a_none(); TVMFFIAny a = a_int(1); /* TypeError inside */
                       TVMFFIFunctionCall(g, &a, 1, &r); TVMFFIObjectDecRef(g); } break; }
    case 9: (void)TVMFFIEnvGetDLPackManagedTensorAllocator(); break;
    case 10: { DLDataType d; TVMFFIByteArray s = ba("notadtype"); TVMFFIDataTypeFromString(&s, &d); break; }
  }
}
static void make_pending(void) {
  void* o = NULL;
  TVMFFIObjectCreateOpaque((void*)0x1, kTVMFFIOpaquePyObject, tls_action_deleter, &o);
  TVMFFIByteArray k = ba("E"), m = ba("m"), b = ba("");
  void* e = NULL;
  TVMFFIErrorCreateWithCauseAndExtraContext(&k, &m, &b, NULL, o, &e);
  TVMFFIObjectDecRef(o);
  TVMFFIErrorSetRaised(e);
  TVMFFIObjectDecRef(e);
}
static void* th_action(void* a) { (void)a; make_pending(); return NULL; }
static void case_tls_thread(long action) {
  g_action = action;
  pthread_t t;
  pthread_create(&t, NULL, th_action, NULL);
  pthread_join(t, NULL);
  P("joined");
}
static void case_tls_exit(long action) {
  g_action = action;
  make_pending();
  P("returning");
}
/* TLS touched AFTER the error was raised (here: the stream table or the backtrace buffer). Thread
 * locals are destroyed in reverse order of first use, so that state is gone by the time the
 * error slot's destructor runs the deleter, which then calls into it. */
static const long kLateActions[] = {3, 4, 5}; /* GetStream, SetStream, Backtrace */
static void late_pending(long p) {
  g_action = kLateActions[p % 3];
  make_pending();
  if (p / 3 == 0)
    TVMFFIEnvSetStream(2, 0, (void*)0x7, NULL);
  else
    (void)TVMFFIBacktrace("late.c", 3, "late", 0);
}
static long g_late;
static void* th_late(void* a) {
  (void)a;
  late_pending(g_late);
  return NULL;
}
static void case_tls_late_thread(long p) {
  g_late = p;
  pthread_t t;
  pthread_create(&t, NULL, th_late, NULL);
  pthread_join(t, NULL);
  P("joined");
}
static void case_tls_late_exit(long p) {
  late_pending(p);
  P("returning");
}
__attribute__((constructor)) static void reg_tls_late(void) {
  static const char* late[] = {"stream", "backtrace"};
  for (long p = 0; p < 6; p++) {
    char* n = (char*)malloc(64);
    snprintf(n, 64, "tlsdtor_late_%s_thread_action%ld", late[p / 3], kLateActions[p % 3]);
    cf_register(n, case_tls_late_thread, p, NULL);
    n = (char*)malloc(64);
    snprintf(n, 64, "tlsdtor_late_%s_exit_action%ld", late[p / 3], kLateActions[p % 3]);
    cf_register(n, case_tls_late_exit, p, NULL);
  }
}
__attribute__((constructor)) static void reg_tls(void) {
  for (long i = 0; i <= 10; i++) {
    char* n = (char*)malloc(64);
    snprintf(n, 64, "tlsdtor_thread_action%ld", i);
    cf_register(n, case_tls_thread, i, NULL);
    n = (char*)malloc(64);
    snprintf(n, 64, "tlsdtor_exit_action%ld", i);
    cf_register(n, case_tls_exit, i, NULL);
  }
}

/* ---------------- init/deinit cross re-entrancy, valid non-ASCII UTF-8 names ---------------- */
static void* g_x;
int init_ok_x(void** r);
static int deinit_reinit(void* h) {
  (void)h;
  int rc = TVMFFIHandleInitOnce(&g_x, init_ok_x);
  P("  deinit: re-init rc=%d x=%lx", rc, (unsigned long)(uintptr_t)g_x);
  return 0;
}
int init_ok_x(void** r) {
  *r = (void*)0x31;
  return 0;
}
static int init_deinit_same(void** r) {
  int rc = TVMFFIHandleDeinitOnce(&g_x, deinit_reinit);
  P("  init: deinit same handle rc=%d", rc);
  *r = (void*)0x32;
  return 0;
}
CASE(deinit_calls_init_same_handle) {
  g_x = (void*)0x30;
  pr_rc("deinit", TVMFFIHandleDeinitOnce(&g_x, deinit_reinit));
  P("x=%lx", (unsigned long)(uintptr_t)g_x);
}
CASE(init_calls_deinit_same_handle) {
  g_x = NULL;
  pr_rc("init", TVMFFIHandleInitOnce(&g_x, init_deinit_same));
  P("x=%lx", (unsigned long)(uintptr_t)g_x);
}
CASE(utf8_names_multibyte) {
  TVMFFIByteArray k = ba("cdiff.\xc3\x9c" "n\xc3\xaf" "c\xc3\xb8" "d\xc3\xa9" ".\xf0\x9f\x98\x80");
  int32_t t = TVMFFITypeGetOrAllocIndex(&k, -1, 1, 0, 1, kTVMFFIObject);
  P("alloc -> %d", t);
  int32_t idx = -1;
  pr_rc("key2idx", TVMFFITypeKeyToIndex(&k, &idx));
  P("idx==t %d", idx == t);
  void* f = NULL;
  TVMFFIFunctionCreate(NULL, sc_noop, NULL, &f);
  pr_rc("setglobal", TVMFFIFunctionSetGlobal(&k, f, 0));
  void* g = NULL;
  pr_rc("getglobal", TVMFFIFunctionGetGlobal(&k, &g));
  P("found=%d", g == f);
  if (g) TVMFFIObjectDecRef(g);
  TVMFFIObjectDecRef(f);
  TVMFFIErrorSetRaisedFromCStr("\xc3\x9c" "berError", "m\xc3\xa9ssage \xf0\x9f\x98\x80");
  pr_err("slot");
}
