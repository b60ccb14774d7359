/* cases_fn.c: TVMFFIFunctionCreate/Call, global registry, re-entrancy */
#include "common.h"

static int sc_echo(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  P("  callee: n=%d args=%s result.type_in=%d", n, args ? "nonnull" : "NULL", result->type_index);
  if (n > 0 && args) return TVMFFIAnyViewToOwnedAny(&args[0], result);
  return 0;
}
static void* mk(TVMFFISafeCallType sc, void* self, void (*del)(void*)) {
  void* f = NULL;
  int rc = TVMFFIFunctionCreate(self, sc, del, &f);
  if (rc != 0) {
    pr_rc("FunctionCreate", rc);
    return NULL;
  }
  return f;
}

CASE(fn_create_null_safecall) {
  void* f = (void*)0x1;
  int rc = TVMFFIFunctionCreate(NULL, NULL, NULL, &f);
  pr_rc("create(NULL safe_call)", rc);
  if (rc == 0 && f) {
    P("type=%d", ((TVMFFIObject*)f)->type_index);
    TVMFFIObjectDecRef(f);
  }
}
CASE(fn_create_null_out) {
  int rc = TVMFFIFunctionCreate(NULL, sc_echo, NULL, NULL);
  pr_rc("create(out NULL)", rc);
}
CASE(fn_call_nargs_negative) {
  void* f = mk(sc_echo, NULL, NULL);
  TVMFFIAny rv;
  int rc = call(f, NULL, -1, &rv);
  pr_rc("call(-1)", rc);
  pr_any_release("rv", &rv);
  TVMFFIObjectDecRef(f);
}
CASE(fn_call_nargs0_args_null) {
  void* f = mk(sc_echo, NULL, NULL);
  TVMFFIAny rv;
  pr_rc("call(NULL,0)", call(f, NULL, 0, &rv));
  pr_any_release("rv", &rv);
  TVMFFIObjectDecRef(f);
}
CASE(fn_call_result_not_none) {
  void* f = mk(sc_echo, NULL, NULL);
  TVMFFIAny rv = a_int(42);
  pr_rc("call", TVMFFIFunctionCall(f, NULL, 0, &rv));
  pr_any_release("rv", &rv);
  TVMFFIObjectDecRef(f);
}
CASE(fn_call_builtin_result_not_none) {
  void* f = get_global("ffi.String");
  TVMFFIAny rv = a_int(42);
  TVMFFIAny args[1] = {a_raw("hello world string")};
  pr_rc("call", TVMFFIFunctionCall(f, args, 1, &rv));
  pr_any_release("rv", &rv);
  TVMFFIObjectDecRef(f);
}
static int sc_ret(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)args;
  (void)n;
  (void)result;
  return (int)(intptr_t)self;
}
static void ret_code_case(int code) {
  void* f = mk(sc_ret, (void*)(intptr_t)code, NULL);
  TVMFFIAny rv;
  int rc = call(f, NULL, 0, &rv);
  P("callee returned %d -> call rc=%d", code, rc);
  pr_err("slot");
  pr_any_release("rv", &rv);
  TVMFFIObjectDecRef(f);
}
CASE(fn_callee_minus1_no_error) { ret_code_case(-1); }
CASE(fn_callee_minus2_no_error) { ret_code_case(-2); }
CASE(fn_callee_returns_7) { ret_code_case(7); }
static int sc_set_err_ret0(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)n;
  (void)result;
  TVMFFIErrorSetRaisedFromCStr("ValueError", "set but returned 0");
  return 0;
}
CASE(fn_callee_sets_error_returns_0) {
  void* f = mk(sc_set_err_ret0, NULL, NULL);
  TVMFFIAny rv;
  pr_rc("call", call(f, NULL, 0, &rv));
  pr_err("slot");
  TVMFFIObjectDecRef(f);
}
static int sc_rawstr_result(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)n;
  result->type_index = kTVMFFIRawStr;
  result->v_c_str = "raw string result (not allowed in Any)";
  return 0;
}
CASE(fn_callee_rawstr_result) {
  void* f = mk(sc_rawstr_result, NULL, NULL);
  TVMFFIAny rv;
  pr_rc("call", call(f, NULL, 0, &rv));
  P("rv.type=%d", rv.type_index);
  if (rv.type_index != kTVMFFIRawStr) pr_any_release("rv", &rv);
  TVMFFIObjectDecRef(f);
}
CASE(fn_callee_rawstr_result_via_builtin) {
  /* the same function fetched back from the global registry and called */
  void* f = mk(sc_rawstr_result, NULL, NULL);
  TVMFFIByteArray name = ba("cdiff.rawstr_ret");
  pr_rc("setglobal", TVMFFIFunctionSetGlobal(&name, f, 0));
  void* g = get_global("cdiff.rawstr_ret");
  TVMFFIAny rv;
  pr_rc("call via registry", call(g, NULL, 0, &rv));
  P("rv.type=%d", rv.type_index);
  if (rv.type_index != kTVMFFIRawStr) pr_any_release("rv", &rv);
  TVMFFIObjectDecRef(g);
  TVMFFIObjectDecRef(f);
}
static int sc_raise(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)args;
  (void)n;
  (void)result;
  const char** km = (const char**)self;
  TVMFFIErrorSetRaisedFromCStr(km[0], km[1]);
  return -1;
}
CASE(fn_error_unusual_kind_propagates) {
  const char* km[2] = {"My Custom Error\n\t\xff", "line1\nline2 \xe2\x82\xac"};
  void* f = mk(sc_raise, km, NULL);
  TVMFFIByteArray name = ba("cdiff.raiser");
  TVMFFIFunctionSetGlobal(&name, f, 0);
  void* g = get_global("cdiff.raiser");
  TVMFFIAny rv;
  pr_rc("call", call(g, NULL, 0, &rv));
  P("rv.type=%d", rv.type_index);
  TVMFFIObjectDecRef(g);
  TVMFFIObjectDecRef(f);
}
CASE(fn_error_long_message_propagates) {
  size_t n = (size_t)2 << 20;
  char* s = (char*)malloc(n + 1);
  for (size_t i = 0; i < n; i++) s[i] = (char)('0' + i % 10);
  s[n] = 0;
  const char* km[2] = {"RuntimeError", s};
  void* f = mk(sc_raise, km, NULL);
  TVMFFIAny rv;
  pr_rc("call", call(f, NULL, 0, &rv));
  TVMFFIObjectDecRef(f);
  free(s);
}

/* recursion through the registry */
static int sc_fact(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  if (n != 1 || args[0].type_index != kTVMFFIInt) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "fact expects an int");
    return -1;
  }
  int64_t k = args[0].v_int64;
  if (k <= 1) {
    result->type_index = kTVMFFIInt;
    result->zero_padding = 0;
    result->v_int64 = 1;
    return 0;
  }
  TVMFFIByteArray name = ba("cdiff.fact");
  void* me = NULL;
  int rc = TVMFFIFunctionGetGlobal(&name, &me);
  if (rc) return rc;
  TVMFFIAny a = a_int(k - 1), r = a_none();
  rc = TVMFFIFunctionCall(me, &a, 1, &r);
  TVMFFIObjectDecRef(me);
  if (rc) return rc;
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = (k % 1000003) * r.v_int64 % 1000003;
  return 0;
}
static void fact_case(int64_t depth) {
  void* f = mk(sc_fact, NULL, NULL);
  TVMFFIByteArray name = ba("cdiff.fact");
  pr_rc("setglobal", TVMFFIFunctionSetGlobal(&name, f, 0));
  TVMFFIObjectDecRef(f);
  void* g = get_global("cdiff.fact");
  TVMFFIAny a = a_int(depth), rv;
  pr_rc("fact", call(g, &a, 1, &rv));
  pr_any_release("rv", &rv);
  TVMFFIObjectDecRef(g);
}
CASE(fn_reentrant_recursion_20) { fact_case(20); }
CASE(fn_reentrant_recursion_2000) { fact_case(2000); }
CASE(fn_reentrant_recursion_20000) { fact_case(20000); }
CASE(fn_reentrant_error_at_bottom) {
  void* f = mk(sc_fact, NULL, NULL);
  TVMFFIByteArray name = ba("cdiff.fact");
  TVMFFIFunctionSetGlobal(&name, f, 0);
  TVMFFIObjectDecRef(f);
  void* g = get_global("cdiff.fact");
  /* a non-int at the top raises immediately */
  TVMFFIAny a = a_raw("x"), rv;
  pr_rc("fact('x')", call(g, &a, 1, &rv));
  TVMFFIObjectDecRef(g);
}

/* callee re-registers itself while running */
static int sc_rereg(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)args;
  (void)n;
  TVMFFIByteArray name = ba("cdiff.rereg");
  void* nf = NULL;
  TVMFFIFunctionCreate((void*)((intptr_t)self + 1), sc_rereg, NULL, &nf);
  int rc = TVMFFIFunctionSetGlobal(&name, nf, 1);
  TVMFFIObjectDecRef(nf);
  result->type_index = kTVMFFIInt;
  result->v_int64 = (intptr_t)self;
  return rc;
}
CASE(fn_reentrant_set_global_inside_call) {
  void* f = mk(sc_rereg, (void*)100, NULL);
  TVMFFIByteArray name = ba("cdiff.rereg");
  TVMFFIFunctionSetGlobal(&name, f, 0);
  TVMFFIObjectDecRef(f);
  for (int i = 0; i < 3; i++) {
    void* g = get_global("cdiff.rereg");
    TVMFFIAny rv;
    pr_rc("call", call(g, NULL, 0, &rv));
    pr_any_release("rv", &rv);
    TVMFFIObjectDecRef(g); /* may drop the last ref of the old function */
  }
}

/* function deleter re-entering the registry (runs when an override drops it) */
static void del_reenter(void* self) {
  (void)self;
  P("  deleter: GetGlobal");
  TVMFFIByteArray name = ba("cdiff.reent");
  void* g = NULL;
  int rc = TVMFFIFunctionGetGlobal(&name, &g);
  /* informational only: the official library runs this deleter in the middle of erasing or
   * overwriting the map entry, and what a lookup then sees depends on its hash layout */
  P("  deleter: GetGlobal rc=%d", rc);
  P("~  deleter: found=%d", g != NULL);
  if (g) TVMFFIObjectDecRef(g);
  TVMFFIByteArray other = ba("cdiff.from_deleter");
  void* nf = NULL;
  TVMFFIFunctionCreate(NULL, sc_echo, NULL, &nf);
  rc = TVMFFIFunctionSetGlobal(&other, nf, 1);
  P("  deleter: SetGlobal rc=%d", rc);
  TVMFFIObjectDecRef(nf);
}
CASE(fn_deleter_reenters_registry_on_override) {
  void* f = mk(sc_echo, (void*)1, del_reenter);
  TVMFFIByteArray name = ba("cdiff.reent");
  pr_rc("set1", TVMFFIFunctionSetGlobal(&name, f, 0));
  TVMFFIObjectDecRef(f); /* registry holds the only ref */
  void* f2 = mk(sc_echo, NULL, NULL);
  P("overriding");
  pr_rc("set2 override", TVMFFIFunctionSetGlobal(&name, f2, 1));
  TVMFFIObjectDecRef(f2);
  void* g = get_global("cdiff.from_deleter");
  P("from_deleter registered=%d", g != NULL);
  if (g) TVMFFIObjectDecRef(g);
}
CASE(fn_deleter_reenters_registry_on_remove) {
  void* f = mk(sc_echo, (void*)1, del_reenter);
  TVMFFIByteArray name = ba("cdiff.reent");
  pr_rc("set1", TVMFFIFunctionSetGlobal(&name, f, 0));
  TVMFFIObjectDecRef(f);
  void* rm = get_global("ffi.FunctionRemoveGlobal");
  TVMFFIAny a = a_raw("cdiff.reent"), rv;
  P("removing");
  pr_rc("remove", call(rm, &a, 1, &rv));
  pr_any_release("rv", &rv);
  TVMFFIObjectDecRef(rm);
  void* g = get_global("cdiff.from_deleter");
  P("from_deleter registered=%d", g != NULL);
  if (g) TVMFFIObjectDecRef(g);
}
static void del_sets_error(void* self) {
  (void)self;
  TVMFFIErrorSetRaisedFromCStr("DeleterError", "raised in a deleter");
}
CASE(fn_deleter_sets_error) {
  void* f = mk(sc_echo, (void*)1, del_sets_error);
  TVMFFIObjectDecRef(f);
  pr_err("slot");
}
static int sc_remove_self(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)n;
  void* rm = NULL;
  TVMFFIByteArray rmn = ba("ffi.FunctionRemoveGlobal");
  TVMFFIFunctionGetGlobal(&rmn, &rm);
  TVMFFIAny a = a_raw("cdiff.selfremove");
  int rc = TVMFFIFunctionCall(rm, &a, 1, result);
  TVMFFIObjectDecRef(rm);
  return rc;
}
CASE(fn_remove_self_during_call) {
  void* f = mk(sc_remove_self, NULL, NULL);
  TVMFFIByteArray name = ba("cdiff.selfremove");
  TVMFFIFunctionSetGlobal(&name, f, 0);
  TVMFFIObjectDecRef(f);
  void* g = get_global("cdiff.selfremove");
  TVMFFIAny rv;
  pr_rc("call", call(g, NULL, 0, &rv));
  pr_any_release("rv", &rv);
  pr_rc("call again (handle still held)", call(g, NULL, 0, &rv));
  pr_any_release("rv", &rv);
  TVMFFIObjectDecRef(g);
  g = get_global("cdiff.selfremove");
  P("still registered=%d", g != NULL);
}

/* ---------------- SetGlobal / GetGlobal ---------------- */
CASE(reg_twice_no_override) {
  void* f = mk(sc_echo, NULL, NULL);
  TVMFFIByteArray name = ba("cdiff.dup");
  pr_rc("set1", TVMFFIFunctionSetGlobal(&name, f, 0));
  pr_rc("set2", TVMFFIFunctionSetGlobal(&name, f, 0));
  pr_rc("set3 override", TVMFFIFunctionSetGlobal(&name, f, 1));
  pr_rc("set4 override=2", TVMFFIFunctionSetGlobal(&name, f, 2));
  pr_rc("set5 override=-1", TVMFFIFunctionSetGlobal(&name, f, -1));
  P("strong=%u", strong_count(f));
  TVMFFIObjectDecRef(f);
}
CASE(reg_override_builtin) {
  void* f = mk(sc_echo, NULL, NULL);
  TVMFFIByteArray name = ba("ffi.String");
  pr_rc("set no override", TVMFFIFunctionSetGlobal(&name, f, 0));
  pr_rc("set override", TVMFFIFunctionSetGlobal(&name, f, 1));
  void* g = get_global("ffi.String");
  P("got ours=%d", g == f);
  if (g) TVMFFIObjectDecRef(g);
  TVMFFIObjectDecRef(f);
}
CASE(reg_null_f) {
  TVMFFIByteArray name = ba("cdiff.nullf");
  pr_rc("set NULL f", TVMFFIFunctionSetGlobal(&name, NULL, 0));
  void* g = (void*)0x1;
  int rc = TVMFFIFunctionGetGlobal(&name, &g);
  pr_rc("get", rc);
  P("g=%s", g == NULL ? "NULL" : (g == (void*)0x1 ? "untouched" : "set"));
}
CASE(reg_non_function_object) {
  void* s = make_str_obj("i am a string registered as a function");
  TVMFFIByteArray name = ba("cdiff.notfn");
  pr_rc("set string as f", TVMFFIFunctionSetGlobal(&name, s, 0));
  void* g = NULL;
  pr_rc("get", TVMFFIFunctionGetGlobal(&name, &g));
  if (g) {
    P("got type=%d same=%d", ((TVMFFIObject*)g)->type_index, g == s);
    TVMFFIObjectDecRef(g);
  } else {
    P("got NULL");
  }
  TVMFFIObjectDecRef(s);
}
static void reg_name_case(const char* what, TVMFFIByteArray name) {
  void* f = mk(sc_echo, NULL, NULL);
  pr_rc(what, TVMFFIFunctionSetGlobal(&name, f, 0));
  void* g = NULL;
  pr_rc("get", TVMFFIFunctionGetGlobal(&name, &g));
  P("found=%d same=%d", g != NULL, g == f);
  if (g) TVMFFIObjectDecRef(g);
  /* list names and check whether the name shows up (byte-exact) */
  void* lister = get_global("ffi.FunctionListGlobalNamesFunctor");
  TVMFFIAny rv;
  if (call(lister, NULL, 0, &rv) == 0) {
    void* fn = rv.v_obj;
    TVMFFIAny a = a_int(-1), cnt;
    call(fn, &a, 1, &cnt);
    int found = 0;
    for (int64_t i = 0; i < cnt.v_int64; i++) {
      TVMFFIAny ai = a_int(i), s;
      call(fn, &ai, 1, &s);
      const char* d;
      size_t n;
      if (s.type_index == kTVMFFISmallStr) {
        d = s.v_bytes;
        n = s.small_str_len;
      } else {
        TVMFFIByteArray* b = (TVMFFIByteArray*)((char*)s.v_obj + sizeof(TVMFFIObject));
        d = b->data;
        n = b->size;
      }
      if (n == name.size && (n == 0 || memcmp(d, name.data, n) == 0)) found++;
      any_release(&s);
    }
    P("listed=%d", found);
    TVMFFIObjectDecRef(fn);
  }
  TVMFFIObjectDecRef(lister);
  TVMFFIObjectDecRef(f);
}
CASE(reg_name_empty) { reg_name_case("set ''", ban("", 0)); }
CASE(reg_name_null_zero) { reg_name_case("set {NULL,0}", ban(NULL, 0)); }
CASE(reg_name_embedded_nul) {
  reg_name_case("set 'a\\0b'", ban("cdiff.a\0b", 9));
  void* g = get_global("cdiff.a");
  P("prefix found=%d", g != NULL);
  if (g) TVMFFIObjectDecRef(g);
}
CASE(reg_name_non_utf8) { reg_name_case("set nonutf8", ba("cdiff.\xff\xfe\x80")); }
CASE(reg_name_huge) {
  size_t n = 1 << 20;
  char* s = (char*)malloc(n);
  memset(s, 'n', n);
  reg_name_case("set 1MiB", ban(s, n));
  free(s);
}
CASE(getglobal_null_zero) {
  TVMFFIByteArray name = ban(NULL, 0);
  void* g = (void*)0x1;
  pr_rc("get {NULL,0}", TVMFFIFunctionGetGlobal(&name, &g));
  P("g=%s", g == NULL ? "NULL" : (g == (void*)0x1 ? "untouched" : "set"));
}
CASE(getglobal_missing_preset) {
  TVMFFIByteArray name = ba("cdiff.does.not.exist");
  void* g = (void*)0x1;
  pr_rc("get missing", TVMFFIFunctionGetGlobal(&name, &g));
  P("g=%s", g == NULL ? "NULL" : (g == (void*)0x1 ? "untouched" : "set"));
}
CASE(getglobal_null_name) {
  void* g = (void*)0x1;
  pr_rc("get NULL name", TVMFFIFunctionGetGlobal(NULL, &g));
}
CASE(getglobal_name_not_nul_terminated) {
  char buf[16];
  memcpy(buf, "ffi.StringXXXXXX", 16);
  TVMFFIByteArray name = ban(buf, 10);
  void* g = NULL;
  pr_rc("get 'ffi.String' unterminated", TVMFFIFunctionGetGlobal(&name, &g));
  P("found=%d", g != NULL);
  if (g) TVMFFIObjectDecRef(g);
}

/* ---------------- SetGlobalFromMethodInfo ---------------- */
static void mi_case(const char* what, TVMFFIMethodInfo* mi, int ov) {
  int rc = TVMFFIFunctionSetGlobalFromMethodInfo(mi, ov);
  pr_rc(what, rc);
  void* g = NULL;
  TVMFFIFunctionGetGlobal(&mi->name, &g);
  P("registered=%d", g != NULL);
  if (g) {
    P("type=%d", ((TVMFFIObject*)g)->type_index);
    TVMFFIObjectDecRef(g);
  }
  void* md = get_global("ffi.GetGlobalFuncMetadata");
  char nmbuf[256];
  snprintf(nmbuf, sizeof nmbuf, "%.*s", (int)mi->name.size, mi->name.data);
  TVMFFIAny a = a_raw(nmbuf), rv;
  int rc2 = call(md, &a, 1, &rv);
  pr_rc("metadata", rc2);
  if (rc2 == 0) pr_any_release("metadata", &rv);
  TVMFFIObjectDecRef(md);
}
CASE(mi_method_int) {
  TVMFFIMethodInfo mi;
  memset(&mi, 0, sizeof(mi));
  mi.name = ba("cdiff.mi_int");
  mi.method = a_int(5);
  mi_case("method=int", &mi, 0);
}
CASE(mi_method_none) {
  TVMFFIMethodInfo mi;
  memset(&mi, 0, sizeof(mi));
  mi.name = ba("cdiff.mi_none");
  mi_case("method=None", &mi, 0);
}
CASE(mi_method_string) {
  TVMFFIMethodInfo mi;
  memset(&mi, 0, sizeof(mi));
  void* s = make_str_obj("string object as a method");
  mi.name = ba("cdiff.mi_str");
  mi.method = a_obj(s);
  mi_case("method=Str", &mi, 0);
  TVMFFIObjectDecRef(s);
}
CASE(mi_bad_metadata_json) {
  TVMFFIMethodInfo mi;
  memset(&mi, 0, sizeof(mi));
  void* f = mk(sc_echo, NULL, NULL);
  mi.name = ba("cdiff.mi_badjson");
  mi.doc = ba("doc \xff");
  mi.metadata = ba("{{{ not json");
  mi.flags = -1;
  mi.method = a_obj(f);
  mi_case("bad metadata", &mi, 0);
  mi_case("again no override", &mi, 0);
  mi_case("again override", &mi, 1);
  TVMFFIObjectDecRef(f);
}
CASE(mi_empty_metadata) {
  TVMFFIMethodInfo mi;
  memset(&mi, 0, sizeof(mi));
  void* f = mk(sc_echo, NULL, NULL);
  mi.name = ba("cdiff.mi_empty");
  mi.method = a_obj(f);
  mi_case("empty metadata", &mi, 0);
  mi.metadata = ba("{\"type_schema\": 5, \"x\": [1,2]}");
  mi_case("override metadata", &mi, 1);
  TVMFFIObjectDecRef(f);
}
CASE(mi_null_info) {
  pr_rc("NULL info", TVMFFIFunctionSetGlobalFromMethodInfo(NULL, 0));
}

/* ---------------- calling builtins with odd AnyViews ---------------- */
static void odd_arg(const char* fname, const char* what, TVMFFIAny a) {
  void* f = get_global(fname);
  TVMFFIAny rv;
  int rc = call(f, &a, 1, &rv);
  char buf[256];
  snprintf(buf, sizeof buf, "%s(%s)", fname, what);
  pr_rc(buf, rc);
  pr_any_release("rv", &rv);
  TVMFFIObjectDecRef(f);
}
CASE(arg_rawstr_null_to_ffi_string) { odd_arg("ffi.String", "RawStr NULL", a_raw(NULL)); }
CASE(arg_smallstr_len200_to_ffi_string) {
  TVMFFIAny a = a_none();
  a.type_index = kTVMFFISmallStr;
  a.small_str_len = 200;
  memcpy(a.v_bytes, "abcdefgh", 8);
  odd_arg("ffi.String", "SmallStr len 200", a);
}
CASE(arg_bytearrayptr_null_to_ffi_bytes) {
  TVMFFIAny a = a_none();
  a.type_index = kTVMFFIByteArrayPtr;
  odd_arg("ffi.Bytes", "ByteArrayPtr NULL", a);
}
CASE(arg_bytearrayptr_to_ffi_string) {
  TVMFFIByteArray b = ba("bytes\xff given as string");
  TVMFFIAny a = a_none();
  a.type_index = kTVMFFIByteArrayPtr;
  a.v_ptr = &b;
  odd_arg("ffi.String", "ByteArrayPtr", a);
}
CASE(arg_rawstr_to_ffi_bytes) { odd_arg("ffi.Bytes", "RawStr", a_raw("raw string to bytes")); }
CASE(arg_unknown_type_to_ffi_string) {
  TVMFFIAny a = a_int(1);
  a.type_index = 50;
  odd_arg("ffi.String", "type 50", a);
  a.type_index = -3;
  odd_arg("ffi.String", "type -3", a);
  a.type_index = kTVMFFIUnchanged;
  odd_arg("ffi.String", "Unchanged", a);
}
CASE(arg_lying_object_type_to_ffi_string) {
  void* s = make_str_obj("a string whose view says type 200");
  TVMFFIAny a = a_obj(s);
  a.type_index = 200;
  odd_arg("ffi.String", "Str viewed as type 200", a);
  a.type_index = kTVMFFIBytes;
  odd_arg("ffi.String", "Str viewed as Bytes", a);
  TVMFFIObjectDecRef(s);
}
CASE(arg_rvalueref_to_ffi_string) {
  void* s = make_str_obj("moved into ffi.String call arg");
  void* slot = s;
  TVMFFIAny a = a_none();
  a.type_index = kTVMFFIObjectRValueRef;
  a.v_ptr = &slot;
  odd_arg("ffi.String", "RValueRef(Str)", a);
  P("slot=%s", slot ? "set" : "NULL");
  if (slot) TVMFFIObjectDecRef(slot);
}
CASE(arg_bool_to_ffi_shape) {
  void* f = get_global("ffi.Shape");
  TVMFFIAny args[3] = {a_int(2), a_int(3), a_int(1)};
  args[2].type_index = kTVMFFIBool;
  TVMFFIAny rv;
  pr_rc("Shape(2,3,True)", call(f, args, 3, &rv));
  pr_any_release("rv", &rv);
  args[2].type_index = kTVMFFIFloat;
  args[2].v_float64 = 4.0;
  pr_rc("Shape(2,3,4.0)", call(f, args, 3, &rv));
  pr_any_release("rv", &rv);
  args[0] = a_int(-7);
  pr_rc("Shape(-7,...)", call(f, args, 2, &rv));
  pr_any_release("rv", &rv);
  TVMFFIObjectDecRef(f);
}
CASE(arg_many_args_to_ffi_shape) {
  void* f = get_global("ffi.Shape");
  int n = 100000;
  TVMFFIAny* args = (TVMFFIAny*)malloc(sizeof(TVMFFIAny) * (size_t)n);
  for (int i = 0; i < n; i++) args[i] = a_int(i);
  TVMFFIAny rv;
  pr_rc("Shape(100000 args)", call(f, args, n, &rv));
  pr_any_release("rv", &rv);
  pr_rc("Shape(-1 args)", call(f, args, -1, &rv));
  pr_any_release("rv", &rv);
  free(args);
  TVMFFIObjectDecRef(f);
}
