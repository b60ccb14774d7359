/* cases_core.c: version, refcounts, opaque objects, AnyViewToOwnedAny, strings, bigint, errors */
#include "common.h"

/* ---------------- version / refcount ---------------- */
CASE(version_basic) {
  TVMFFIVersion v;
  memset(&v, 0xAB, sizeof(v));
  TVMFFIGetVersion(&v);
  P("version %u.%u.%u", v.major, v.minor, v.patch);
}

CASE(version_null_out) {
  TVMFFIGetVersion(NULL);
  P("returned");
}

CASE(incref_null) { pr_rc("IncRef(NULL)", TVMFFIObjectIncRef(NULL)); }
CASE(decref_null) { pr_rc("DecRef(NULL)", TVMFFIObjectDecRef(NULL)); }

CASE(incref_decref_counts) {
  void* s = make_str_obj("a string longer than eight bytes");
  P("strong=%u", strong_count(s));
  for (int i = 0; i < 5; i++) TVMFFIObjectIncRef(s);
  P("strong=%u", strong_count(s));
  for (int i = 0; i < 5; i++) TVMFFIObjectDecRef(s);
  P("strong=%u", strong_count(s));
  TVMFFIObjectDecRef(s);
}

/* ---------------- opaque objects ---------------- */
static int g_opq_deleted;
static void opq_deleter(void* h) {
  g_opq_deleted++;
  P("opaque deleter called handle=%p", h);
}

CASE(opaque_null_handle_null_deleter) {
  void* o = NULL;
  int rc = TVMFFIObjectCreateOpaque(NULL, kTVMFFIOpaquePyObject, NULL, &o);
  pr_rc("create", rc);
  if (rc == 0) {
    P("type=%d strong=%u cellhandle=%p", ((TVMFFIObject*)o)->type_index, strong_count(o),
      ((TVMFFIOpaqueObjectCell*)((char*)o + sizeof(TVMFFIObject)))->handle);
    pr_rc("decref", TVMFFIObjectDecRef(o));
  }
}

CASE(opaque_null_handle_with_deleter) {
  void* o = NULL;
  int rc = TVMFFIObjectCreateOpaque(NULL, kTVMFFIOpaquePyObject, opq_deleter, &o);
  pr_rc("create", rc);
  if (rc == 0) {
    TVMFFIObjectDecRef(o);
    P("deleted=%d", g_opq_deleted);
  }
}

CASE(opaque_handle_deleter_count) {
  void* o = NULL;
  int rc = TVMFFIObjectCreateOpaque((void*)0x1234, kTVMFFIOpaquePyObject, opq_deleter, &o);
  pr_rc("create", rc);
  if (rc == 0) {
    TVMFFIObjectIncRef(o);
    TVMFFIObjectDecRef(o);
    P("deleted after 1 decref=%d", g_opq_deleted);
    TVMFFIObjectDecRef(o);
    P("deleted=%d", g_opq_deleted);
  }
}

static const int32_t kOpaqueTypes[] = {-100, -1, 0, 4, 13, 63, 64, 65, 70, 73, 75, 78, 79, 127,
                                       128, 1000, 100000, INT32_MAX, INT32_MIN};
static void case_opaque_type(long i) {
  void* o = (void*)0x77;
  int rc = TVMFFIObjectCreateOpaque((void*)0x1, kOpaqueTypes[i], opq_deleter, &o);
  pr_rc("create", rc);
  P("out=%s", o == (void*)0x77 ? "untouched" : (o ? "set" : "NULL"));
  if (rc == 0 && o && o != (void*)0x77) {
    P("type=%d", ((TVMFFIObject*)o)->type_index);
    TVMFFIObjectDecRef(o);
  }
  P("deleted=%d", g_opq_deleted);
}
__attribute__((constructor)) static void reg_opaque_types(void) {
  for (long i = 0; i < (long)(sizeof(kOpaqueTypes) / sizeof(kOpaqueTypes[0])); i++) {
    char* n = (char*)malloc(64);
    snprintf(n, 64, "opaque_type_%d", kOpaqueTypes[i]);
    cf_register(n, case_opaque_type, i, NULL);
  }
}

CASE(opaque_any_to_owned) {
  void* o = NULL;
  TVMFFIObjectCreateOpaque((void*)0x1, kTVMFFIOpaquePyObject, opq_deleter, &o);
  TVMFFIAny v = a_obj(o), out = a_none();
  pr_rc("to_owned", TVMFFIAnyViewToOwnedAny(&v, &out));
  P("strong=%u out.type=%d", strong_count(o), out.type_index);
  any_release(&out);
  TVMFFIObjectDecRef(o);
  P("deleted=%d", g_opq_deleted);
}

CASE(opaque_passed_to_ffi_string) {
  void* o = NULL;
  TVMFFIObjectCreateOpaque((void*)0x1, kTVMFFIOpaquePyObject, NULL, &o);
  void* f = get_global("ffi.String");
  TVMFFIAny args[1] = {a_obj(o)}, rv;
  int rc = call(f, args, 1, &rv);
  pr_rc("ffi.String(opaque)", rc);
  pr_any_release("rv", &rv);
  TVMFFIObjectDecRef(f);
  TVMFFIObjectDecRef(o);
}

/* an ffi.String holds any bytes: ffi.String takes non-UTF-8 content (small, raw, heap) as is */
CASE(ffi_string_non_utf8) {
  void* f = get_global("ffi.String");
  TVMFFIAny small = a_none();
  small.type_index = kTVMFFISmallStr;
  small.zero_padding = 3;
  memcpy(&small.v_int64, "x\xff\xfe", 3);
  TVMFFIAny args[3] = {small, a_raw("x\xc0\xaf long enough for a heap string"), a_none()};
  TVMFFIByteArray b = {"\xed\xa0\x80 surrogate, heap", 19};
  pr_rc("heap str", TVMFFIStringFromByteArray(&b, &args[2]));
  for (int i = 0; i < 3; i++) {
    TVMFFIAny rv;
    pr_rc("ffi.String(non-UTF-8)", call(f, &args[i], 1, &rv));
    pr_any_release("rv", &rv);
  }
  any_release(&args[2]);
  TVMFFIObjectDecRef(f);
}

/* ---------------- AnyViewToOwnedAny ---------------- */
static void a2o(const char* what, TVMFFIAny v) {
  TVMFFIAny out;
  memset(&out, 0x5A, sizeof(out));
  int rc = TVMFFIAnyViewToOwnedAny(&v, &out);
  pr_rc(what, rc);
  if (rc == 0)
    pr_any_release("out", &out);
  else
    P("out.type_index=%d", out.type_index);
}

CASE(a2o_rawstr_null) { a2o("rawstr NULL", a_raw(NULL)); }
CASE(a2o_rawstr_empty) { a2o("rawstr empty", a_raw("")); }
CASE(a2o_rawstr_7) { a2o("rawstr 7", a_raw("1234567")); }
CASE(a2o_rawstr_8) { a2o("rawstr 8", a_raw("12345678")); }
CASE(a2o_rawstr_non_utf8) { a2o("rawstr nonutf8", a_raw("\xff\xfe\xc0\x80 bad utf8 \xed\xa0\x80")); }
CASE(a2o_rawstr_long) {
  size_t n = 1 << 20;
  char* s = (char*)malloc(n + 1);
  for (size_t i = 0; i < n; i++) s[i] = (char)('a' + i % 26);
  s[n] = 0;
  a2o("rawstr 1MiB", a_raw(s));
  free(s);
}
CASE(a2o_bytearrayptr_null) {
  TVMFFIAny v = a_none();
  v.type_index = kTVMFFIByteArrayPtr;
  v.v_ptr = NULL;
  a2o("bytearrayptr NULL", v);
}
CASE(a2o_bytearrayptr_data_null_size0) {
  TVMFFIByteArray b = {NULL, 0};
  TVMFFIAny v = a_none();
  v.type_index = kTVMFFIByteArrayPtr;
  v.v_ptr = &b;
  a2o("bytearrayptr {NULL,0}", v);
}
CASE(a2o_bytearrayptr_embedded_nul) {
  TVMFFIByteArray b = {"ab\0cd\0\xff", 7};
  TVMFFIAny v = a_none();
  v.type_index = kTVMFFIByteArrayPtr;
  v.v_ptr = &b;
  a2o("bytearrayptr nul", v);
  b.size = 20;
  b.data = "0123456789\0abcdefghi";
  a2o("bytearrayptr nul heap", v);
}
CASE(a2o_rvalueref_null_slot) {
  void* slot = NULL;
  TVMFFIAny v = a_none();
  v.type_index = kTVMFFIObjectRValueRef;
  v.v_ptr = &slot;
  a2o("rvalueref -> NULL", v);
}
CASE(a2o_rvalueref_null_ptr) {
  TVMFFIAny v = a_none();
  v.type_index = kTVMFFIObjectRValueRef;
  v.v_ptr = NULL;
  a2o("rvalueref NULL", v);
}
CASE(a2o_rvalueref_string) {
  void* s = make_str_obj("moved string object here");
  void* slot = s;
  TVMFFIAny v = a_none(), out = a_none();
  v.type_index = kTVMFFIObjectRValueRef;
  v.v_ptr = &slot;
  pr_rc("to_owned", TVMFFIAnyViewToOwnedAny(&v, &out));
  P("slot_after=%s strong=%u", slot ? "set" : "NULL", strong_count(s));
  pr_any_release("out", &out);
  if (slot) TVMFFIObjectDecRef(slot);
}
CASE(a2o_dltensorptr) {
  int64_t shape[1] = {3};
  float data[3] = {1, 2, 3};
  DLTensor t;
  memset(&t, 0, sizeof(t));
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = 1;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  TVMFFIAny v = a_none();
  v.type_index = kTVMFFIDLTensorPtr;
  v.v_ptr = &t;
  TVMFFIAny out = a_none();
  int rc = TVMFFIAnyViewToOwnedAny(&v, &out);
  pr_rc("dltensorptr", rc);
  if (rc == 0) {
    P("out.type=%d same_ptr=%d", out.type_index, out.v_ptr == (void*)&t);
    if (out.type_index == kTVMFFITensor) pr_tensor("out", out.v_obj);
    any_release(&out);
  }
}
CASE(a2o_dltensorptr_null) {
  TVMFFIAny v = a_none();
  v.type_index = kTVMFFIDLTensorPtr;
  v.v_ptr = NULL;
  a2o("dltensorptr NULL", v);
}
static const int32_t kOddTypes[] = {13, 14, 20, 63, -1, -2, -7, INT32_MIN, 79, 100, 127, 200, 5000};
static void case_a2o_oddtype(long i) {
  int32_t ti = kOddTypes[i];
  TVMFFIAny v = a_none();
  void* s = NULL;
  v.type_index = ti;
  if (ti >= 64) {
    s = make_str_obj("object whose any view lies about its type");
    v.v_obj = (TVMFFIObject*)s;
  } else {
    v.v_int64 = 0x1122334455667788LL;
  }
  char what[64];
  snprintf(what, sizeof what, "type %d", ti);
  a2o(what, v);
  if (s) {
    P("strong=%u", strong_count(s));
    TVMFFIObjectDecRef(s);
  }
}
__attribute__((constructor)) static void reg_a2o_odd(void) {
  for (long i = 0; i < (long)(sizeof(kOddTypes) / sizeof(kOddTypes[0])); i++) {
    char* n = (char*)malloc(64);
    snprintf(n, 64, "a2o_type_%d", kOddTypes[i]);
    cf_register(n, case_a2o_oddtype, i, NULL);
  }
}
CASE(a2o_smallstr_len_gt7) {
  TVMFFIAny v = a_none();
  v.type_index = kTVMFFISmallStr;
  v.small_str_len = 100;
  memcpy(v.v_bytes, "abcdefgh", 8);
  a2o("smallstr len 100", v);
}
CASE(a2o_smallstr_len8) {
  TVMFFIAny v = a_none();
  v.type_index = kTVMFFISmallStr;
  v.small_str_len = 8;
  memcpy(v.v_bytes, "abcdefgh", 8);
  a2o("smallstr len 8", v);
}
CASE(a2o_smallbytes_nul) {
  TVMFFIAny v = a_none();
  v.type_index = kTVMFFISmallBytes;
  v.small_str_len = 3;
  memcpy(v.v_bytes, "a\0b", 3);
  a2o("smallbytes", v);
}
CASE(a2o_bool_5) {
  TVMFFIAny v = a_int(5);
  v.type_index = kTVMFFIBool;
  a2o("bool 5", v);
}
CASE(a2o_none_garbage_payload) {
  TVMFFIAny v = a_none();
  v.zero_padding = 77;
  v.v_uint64 = 0xdeadbeefcafeULL;
  a2o("none garbage", v);
}
CASE(a2o_int_garbage_padding) {
  TVMFFIAny v = a_int(-5);
  v.zero_padding = 123;
  a2o("int pad", v);
}
CASE(a2o_float_nan_payload) {
  TVMFFIAny v = a_none();
  v.type_index = kTVMFFIFloat;
  v.v_uint64 = 0x7ff4000000000123ULL;
  a2o("float snan", v);
}
CASE(a2o_opaqueptr_null) {
  TVMFFIAny v = a_none();
  v.type_index = kTVMFFIOpaquePtr;
  a2o("opaqueptr NULL", v);
}
CASE(a2o_dtype_device) {
  TVMFFIAny v = a_none();
  v.type_index = kTVMFFIDataType;
  v.v_dtype.code = 250;
  v.v_dtype.bits = 0;
  v.v_dtype.lanes = 0;
  a2o("dtype", v);
  v = a_none();
  v.type_index = kTVMFFIDevice;
  v.v_device.device_type = (DLDeviceType)-3;
  v.v_device.device_id = -9;
  a2o("device", v);
}
CASE(a2o_in_place) {
  TVMFFIAny v = a_raw("in place conversion of a raw string");
  int rc = TVMFFIAnyViewToOwnedAny(&v, &v);
  pr_rc("in-place", rc);
  if (rc == 0) pr_any_release("v", &v);
}
CASE(a2o_in_place_small) {
  TVMFFIAny v = a_raw("abc");
  int rc = TVMFFIAnyViewToOwnedAny(&v, &v);
  pr_rc("in-place", rc);
  if (rc == 0) pr_any_release("v", &v);
}
CASE(a2o_object_null_vobj) {
  TVMFFIAny v = a_none();
  v.type_index = kTVMFFIStr;
  v.v_obj = NULL;
  a2o("Str with NULL v_obj", v);
}

/* ---------------- strings / bytes ---------------- */
static void s2any(int bytes, const char* what, const char* d, size_t n) {
  TVMFFIByteArray b = ban(d, n);
  TVMFFIAny out;
  memset(&out, 0x5A, sizeof(out));
  int rc = bytes ? TVMFFIBytesFromByteArray(&b, &out) : TVMFFIStringFromByteArray(&b, &out);
  pr_rc(what, rc);
  if (rc == 0) pr_any_release("out", &out);
}
CASE(str_null_size0) { s2any(0, "str {NULL,0}", NULL, 0); }
CASE(bytes_null_size0) { s2any(1, "bytes {NULL,0}", NULL, 0); }
CASE(str_null_size5) { s2any(0, "str {NULL,5}", NULL, 5); }
CASE(str_lengths) {
  const char* s = "0123456789abcdef";
  for (size_t n = 0; n <= 16; n++) s2any(0, "str", s, n);
  for (size_t n = 0; n <= 16; n++) s2any(1, "bytes", s, n);
}
CASE(str_embedded_nul) {
  s2any(0, "str nul small", "a\0b\0", 4);
  s2any(0, "str nul heap", "abc\0def\0ghij\0", 13);
  s2any(1, "bytes nul heap", "\0\0\0\0\0\0\0\0\0", 9);
}
CASE(str_non_utf8) {
  s2any(0, "str bad utf8", "\xff\xfe\xfd", 3);
  s2any(0, "str surrogate", "\xed\xa0\x80\xed\xb0\x80 long tail", 17);
  s2any(0, "str overlong", "\xc0\xaf\xe0\x80\xaf", 5);
}
CASE(str_huge_16mib) {
  size_t n = (size_t)16 << 20;
  char* s = (char*)malloc(n);
  for (size_t i = 0; i < n; i++) s[i] = (char)(i * 7);
  s2any(0, "str 16MiB", s, n);
  s2any(1, "bytes 16MiB", s, n);
  free(s);
}
CASE(str_null_input_ptr) {
  TVMFFIAny out = a_none();
  pr_rc("str NULL input", TVMFFIStringFromByteArray(NULL, &out));
}
CASE(str_out_preset_garbage) {
  TVMFFIByteArray b = ba("garbage preset output slot");
  TVMFFIAny out;
  out.type_index = 12345;
  out.zero_padding = 99;
  out.v_uint64 = 0xffffffffffffffffULL;
  pr_rc("str", TVMFFIStringFromByteArray(&b, &out));
  pr_any_release("out", &out);
  b = ba("ab");
  out.type_index = 12345;
  out.zero_padding = 99;
  out.v_uint64 = 0xffffffffffffffffULL;
  pr_rc("str small", TVMFFIStringFromByteArray(&b, &out));
  pr_any("out", &out);
}

/* ---------------- bigint ---------------- */
static void bigint_case(const char* what, const void* d, size_t n) {
  TVMFFIByteArray b = ban((const char*)d, n);
  TVMFFIAny out;
  memset(&out, 0x5A, sizeof(out));
  int rc = TVMFFIBigIntFromByteArray(&b, &out);
  pr_rc(what, rc);
  if (rc == 0) {
    P("out.type=%d", out.type_index);
    TVMFFIByteArray c = TVMFFIBigIntGetContentByteArray(&out);
    char* e = esc(c.data, c.size);
    P("content size=%zu %s", c.size, e);
    free(e);
    any_release(&out);
  }
}
CASE(bigint_edges) {
  int64_t w[4];
  bigint_case("empty NULL", NULL, 0);
  w[0] = INT64_MIN;
  bigint_case("INT64_MIN", w, 8);
  w[0] = -1;
  w[1] = -1;
  bigint_case("-1 -1", w, 16);
  w[0] = 0;
  w[1] = 1;
  bigint_case("2^64", w, 16);
  w[0] = 5;
  w[1] = 0;
  w[2] = 0;
  bigint_case("5 0 0", w, 24);
  w[0] = INT64_MIN;
  w[1] = 0;
  bigint_case("2^63 (INT64_MIN,0)", w, 16);
  w[0] = INT64_MAX;
  w[1] = -1;
  bigint_case("(MAX,-1)", w, 16);
  w[0] = 0;
  w[1] = 0;
  w[2] = 0;
  w[3] = -1;
  bigint_case("(0,0,0,-1)", w, 32);
  bigint_case("size 7", w, 7);
  bigint_case("size 4", w, 4);
  bigint_case("size 9", w, 9);
}
CASE(bigint_null_data_size8) { bigint_case("NULL size 8", NULL, 8); }
CASE(bigint_huge) {
  size_t nw = 1 << 17;
  int64_t* w = (int64_t*)calloc(nw, 8);
  for (size_t i = 0; i < nw; i++) w[i] = (int64_t)(i * 0x9E3779B97F4A7C15ULL);
  bigint_case("1MiB", w, nw * 8);
  free(w);
}
CASE(bigint_content_of_pods) {
  TVMFFIAny v = a_int(-2);
  TVMFFIByteArray c = TVMFFIBigIntGetContentByteArray(&v);
  P("int: size=%zu data_is_payload=%d", c.size, c.data == (const char*)&v.v_int64);
  v.type_index = kTVMFFIBool;
  v.v_int64 = 1;
  c = TVMFFIBigIntGetContentByteArray(&v);
  P("bool: size=%zu", c.size);
}
CASE(bigint_content_of_none) {
  TVMFFIAny v = a_none();
  TVMFFIByteArray c = TVMFFIBigIntGetContentByteArray(&v);
  P("none: size=%zu", c.size);
}
CASE(bigint_content_of_string) {
  TVMFFIAny v = a_none();
  void* s = make_str_obj("not an integer at all!!");
  v = a_obj(s);
  TVMFFIByteArray c = TVMFFIBigIntGetContentByteArray(&v);
  /* informational only: the official library reads the String's cell as a BigInt's and returns
   * a size made of pointer bits (different every run); this case checks that nothing crashes */
  P("~str: size=%zu", c.size);
  TVMFFIObjectDecRef(s);
}

/* ---------------- errors ---------------- */
static void err_create(const char* what, TVMFFIByteArray k, TVMFFIByteArray m, TVMFFIByteArray bt) {
  void* e = (void*)0x1;
  int rc = TVMFFIErrorCreate(&k, &m, &bt, &e);
  P("%s rc=%d", what, rc);
  if (rc == 0) {
    TVMFFIErrorCell* c = (TVMFFIErrorCell*)((char*)e + sizeof(TVMFFIObject));
    char* bts = esc(c->backtrace.data, c->backtrace.size);
    pr_err_obj(what, e);
    P("%s backtrace=%s", what, bts);
    free(bts);
    TVMFFIObjectDecRef(e);
  }
}
CASE(errc_embedded_nul) {
  err_create("nul", ban("Val\0ueError", 11), ban("m\0sg", 4), ban("b\0t", 3));
}
CASE(errc_null_zero) { err_create("nullzero", ban(NULL, 0), ban(NULL, 0), ban(NULL, 0)); }
CASE(errc_non_utf8) {
  err_create("nonutf8", ba("\xff\xfeKind"), ba("msg \xc0\xaf"), ba("\x80"));
}
CASE(errc_unusual_kind) {
  err_create("unusual", ba("Value Error: \n\t<>\"'{}%s%n"), ba("line1\nline2\r\n\ttab"), ba(""));
}
CASE(errc_huge) {
  size_t n = (size_t)8 << 20;
  char* s = (char*)malloc(n);
  for (size_t i = 0; i < n; i++) s[i] = (char)('A' + i % 50);
  err_create("huge", ban(s, 4096), ban(s, n), ban(s, n / 2));
  free(s);
}
CASE(errc_null_kind_ptr) {
  TVMFFIByteArray m = ba("m"), b = ba("");
  void* e = NULL;
  int rc = TVMFFIErrorCreate(NULL, &m, &b, &e);
  P("rc=%d", rc);
  if (rc == 0 && e) {
    pr_err_obj("e", e);
    TVMFFIObjectDecRef(e);
  }
}
CASE(errc_cause_not_error) {
  void* s = make_str_obj("i am a string, not an error");
  TVMFFIByteArray k = ba("K"), m = ba("M"), b = ba("B");
  void* e = NULL;
  int rc = TVMFFIErrorCreateWithCauseAndExtraContext(&k, &m, &b, s, s, &e);
  P("rc=%d strong=%u", rc, strong_count(s));
  if (rc == 0) {
    pr_err_obj("e", e);
    TVMFFIErrorCell* c = (TVMFFIErrorCell*)((char*)e + sizeof(TVMFFIObject));
    P("cause_is_s=%d extra_is_s=%d", c->cause_chain == s, c->extra_context == s);
    TVMFFIObjectDecRef(e);
    P("strong after=%u", strong_count(s));
  } else {
    pr_err("e");
  }
  TVMFFIObjectDecRef(s);
}
CASE(errc_cause_chain_refcounts) {
  TVMFFIByteArray k = ba("K"), m = ba("M"), b = ba("");
  void* e1 = NULL;
  void* e2 = NULL;
  void* e3 = NULL;
  TVMFFIErrorCreate(&k, &m, &b, &e1);
  TVMFFIErrorCreateWithCauseAndExtraContext(&k, &m, &b, e1, NULL, &e2);
  TVMFFIErrorCreateWithCauseAndExtraContext(&k, &m, &b, e2, e1, &e3);
  P("e1=%u e2=%u e3=%u", strong_count(e1), strong_count(e2), strong_count(e3));
  TVMFFIObjectDecRef(e3);
  P("e1=%u e2=%u", strong_count(e1), strong_count(e2));
  TVMFFIObjectDecRef(e2);
  P("e1=%u", strong_count(e1));
  TVMFFIObjectDecRef(e1);
}
CASE(err_update_backtrace_edges) {
  TVMFFIByteArray k = ba("K"), m = ba("M"), b = ba("orig;");
  void* e = NULL;
  TVMFFIErrorCreate(&k, &m, &b, &e);
  TVMFFIErrorCell* c = (TVMFFIErrorCell*)((char*)e + sizeof(TVMFFIObject));
  TVMFFIByteArray x = ba("app;");
  c->update_backtrace(e, &x, kTVMFFIBacktraceUpdateModeAppend);
  char* s = esc(c->backtrace.data, c->backtrace.size);
  P("after append: %s", s);
  free(s);
  x = ban(NULL, 0);
  c->update_backtrace(e, &x, kTVMFFIBacktraceUpdateModeAppend);
  s = esc(c->backtrace.data, c->backtrace.size);
  P("after append {NULL,0}: %s", s);
  free(s);
  x = ba("rep\0x");
  x.size = 5;
  c->update_backtrace(e, &x, 7);
  s = esc(c->backtrace.data, c->backtrace.size);
  P("after mode 7: %s", s);
  free(s);
  c->update_backtrace(e, &x, -1);
  s = esc(c->backtrace.data, c->backtrace.size);
  P("after mode -1: %s", s);
  free(s);
  x = ban(NULL, 0);
  c->update_backtrace(e, &x, kTVMFFIBacktraceUpdateModeReplace);
  s = esc(c->backtrace.data, c->backtrace.size);
  P("after replace {NULL,0}: %s", s);
  free(s);
  TVMFFIObjectDecRef(e);
}
CASE(err_set_raised_null) {
  TVMFFIErrorSetRaised(NULL);
  P("set NULL returned");
  pr_err("slot");
}
CASE(err_set_raised_non_error) {
  void* s = make_str_obj("a string is not an error object");
  TVMFFIErrorSetRaised(s);
  P("strong=%u", strong_count(s));
  pr_err("slot");
  P("strong=%u", strong_count(s));
  TVMFFIObjectDecRef(s);
}
CASE(err_set_raised_same_twice) {
  TVMFFIByteArray k = ba("K"), m = ba("M"), b = ba("");
  void* e = NULL;
  TVMFFIErrorCreate(&k, &m, &b, &e);
  TVMFFIErrorSetRaised(e);
  TVMFFIErrorSetRaised(e);
  P("strong=%u", strong_count(e));
  pr_err("slot");
  P("strong=%u", strong_count(e));
  TVMFFIObjectDecRef(e);
}
CASE(err_cstr_null_kind) {
  TVMFFIErrorSetRaisedFromCStr(NULL, "message");
  pr_err("slot");
}
CASE(err_cstr_null_message) {
  TVMFFIErrorSetRaisedFromCStr("ValueError", NULL);
  pr_err("slot");
}
CASE(err_cstr_empty) {
  TVMFFIErrorSetRaisedFromCStr("", "");
  pr_err("slot");
}
CASE(err_cstr_unusual) {
  TVMFFIErrorSetRaisedFromCStr("Weird Kind\n\t\x01\xff\xfe", "msg\nwith\rcontrol\x7f and \xc3\xa9");
  pr_err("slot");
}
CASE(err_cstr_long) {
  size_t n = (size_t)4 << 20;
  char* s = (char*)malloc(n + 1);
  for (size_t i = 0; i < n; i++) s[i] = (char)('a' + i % 26);
  s[n] = 0;
  TVMFFIErrorSetRaisedFromCStr(s + n - 1000, s);
  pr_err("slot");
  free(s);
}
CASE(err_parts_null_entries) {
  const char* parts[5] = {"a", NULL, "b", NULL, "c"};
  TVMFFIErrorSetRaisedFromCStrParts("K", parts, 5);
  pr_err("slot");
}
CASE(err_parts_zero) {
  TVMFFIErrorSetRaisedFromCStrParts("K", NULL, 0);
  pr_err("slot");
}
CASE(err_parts_negative) {
  const char* parts[1] = {"x"};
  TVMFFIErrorSetRaisedFromCStrParts("K", parts, -1);
  pr_err("slot");
}
CASE(err_parts_all_null) {
  const char* parts[3] = {NULL, NULL, NULL};
  TVMFFIErrorSetRaisedFromCStrParts("K", parts, 3);
  pr_err("slot");
}
CASE(err_parts_null_kind) {
  const char* parts[1] = {"x"};
  TVMFFIErrorSetRaisedFromCStrParts(NULL, parts, 1);
  pr_err("slot");
}
CASE(err_parts_many) {
  enum { N = 100000 };
  const char** parts = (const char**)malloc(N * sizeof(char*));
  for (int i = 0; i < N; i++) parts[i] = (i % 3 == 0) ? NULL : "xy";
  TVMFFIErrorSetRaisedFromCStrParts("K", parts, N);
  pr_err("slot");
  free(parts);
}
CASE(err_move_from_empty_preset) {
  void* e = (void*)0xdead;
  TVMFFIErrorMoveFromRaised(&e);
  P("e=%s", e == NULL ? "NULL" : (e == (void*)0xdead ? "untouched" : "other"));
}
CASE(err_move_null_result) {
  TVMFFIErrorMoveFromRaised(NULL);
  P("returned (empty slot)");
}
CASE(err_move_null_result_with_error) {
  TVMFFIErrorSetRaisedFromCStr("K", "m");
  TVMFFIErrorMoveFromRaised(NULL);
  P("returned (full slot)");
}

/* deleter of an object kept alive by the raised error re-enters the error slot */
static void reenter_deleter(void* h) {
  (void)h;
  P("deleter: setting inner error");
  TVMFFIErrorSetRaisedFromCStr("InnerError", "from deleter");
  P("deleter: done");
}
CASE(err_slot_reentrant_deleter_on_replace) {
  void* o = NULL;
  TVMFFIObjectCreateOpaque((void*)0x1, kTVMFFIOpaquePyObject, reenter_deleter, &o);
  TVMFFIByteArray k = ba("FirstError"), m = ba("first"), b = ba("");
  void* e = NULL;
  TVMFFIErrorCreateWithCauseAndExtraContext(&k, &m, &b, NULL, o, &e);
  TVMFFIObjectDecRef(o);
  TVMFFIErrorSetRaised(e);
  TVMFFIObjectDecRef(e);
  P("replacing");
  TVMFFIErrorSetRaisedFromCStr("OuterError", "second");
  P("replaced");
  pr_err("slot1");
  pr_err("slot2");
}
CASE(err_slot_reentrant_deleter_on_decref_of_moved) {
  void* o = NULL;
  TVMFFIObjectCreateOpaque((void*)0x1, kTVMFFIOpaquePyObject, reenter_deleter, &o);
  TVMFFIByteArray k = ba("FirstError"), m = ba("first"), b = ba("");
  void* e = NULL;
  TVMFFIErrorCreateWithCauseAndExtraContext(&k, &m, &b, NULL, o, &e);
  TVMFFIObjectDecRef(o);
  TVMFFIErrorSetRaised(e);
  TVMFFIObjectDecRef(e);
  void* got = NULL;
  TVMFFIErrorMoveFromRaised(&got);
  TVMFFIObjectDecRef(got);
  pr_err("slot");
}
CASE(err_set_raised_self_replace_last_ref) {
  /* slot holds the only reference; setting the same object again */
  TVMFFIByteArray k = ba("K"), m = ba("M"), b = ba("");
  void* e = NULL;
  TVMFFIErrorCreate(&k, &m, &b, &e);
  TVMFFIErrorSetRaised(e);
  TVMFFIObjectDecRef(e); /* slot holds the only ref */
  TVMFFIErrorSetRaised(e);
  pr_err("slot");
}
