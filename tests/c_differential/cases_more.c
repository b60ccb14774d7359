/* cases_more.c: non-UTF-8 text in errors, pointer stability of type info / attr columns,
 * re-entrant callbacks (allocators, signal checks, DLPack deleters), the default tensor
 * allocator (TVMFFIEnvTensorAlloc with none installed), unsafe views, containers holding odd
 * AnyViews, concurrency */
#include "common.h"

#include <pthread.h>
#include <unistd.h>

/* ---------------- non-UTF-8 in error paths ---------------- */
CASE(err_cstr_nonutf8_message) {
  TVMFFIErrorSetRaisedFromCStr("ValueError", "bad \xff\xfe bytes \xc0\xaf end");
  pr_err("slot");
}
CASE(err_parts_nonutf8) {
  const char* parts[3] = {"a\xff", "\xfe", "b"};
  TVMFFIErrorSetRaisedFromCStrParts("K\x80", parts, 3);
  pr_err("slot");
}
static int sc_raise_bytes(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)n;
  (void)result;
  TVMFFIByteArray k = ba("Bin\xffKind"), m = ba("\x01\x02\xff\xfe\x00"), b = ba("");
  void* e = NULL;
  TVMFFIErrorCreate(&k, &m, &b, &e);
  TVMFFIErrorSetRaised(e);
  TVMFFIObjectDecRef(e);
  return -1;
}
CASE(err_nonutf8_errorcreate_through_call) {
  void* f = NULL;
  TVMFFIFunctionCreate(NULL, sc_raise_bytes, NULL, &f);
  TVMFFIByteArray name = ba("cdiff.rb");
  TVMFFIFunctionSetGlobal(&name, f, 0);
  void* g = get_global("cdiff.rb");
  TVMFFIAny rv;
  pr_rc("call", call(g, NULL, 0, &rv));
  TVMFFIObjectDecRef(g);
  TVMFFIObjectDecRef(f);
}

/* nested error identity */
static void* g_inner_err;
static int sc_inner(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)n;
  (void)result;
  TVMFFIByteArray k = ba("InnerError"), m = ba("inner"), b = ba("inner_bt;");
  TVMFFIErrorCreate(&k, &m, &b, &g_inner_err);
  TVMFFIErrorSetRaised(g_inner_err);
  return -1;
}
static int sc_outer(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)args;
  (void)n;
  return TVMFFIFunctionCall(self, NULL, 0, result);
}
CASE(err_nested_identity) {
  void* in = NULL;
  TVMFFIFunctionCreate(NULL, sc_inner, NULL, &in);
  void* out = NULL;
  TVMFFIFunctionCreate(in, sc_outer, NULL, &out);
  TVMFFIAny rv;
  int rc = call(out, NULL, 0, &rv);
  P("rc=%d", rc);
  void* e = NULL;
  TVMFFIErrorMoveFromRaised(&e);
  P("same object=%d", e == g_inner_err);
  if (e) {
    TVMFFIErrorCell* c = (TVMFFIErrorCell*)((char*)e + sizeof(TVMFFIObject));
    char* s = esc(c->backtrace.data, c->backtrace.size);
    P("~backtrace=%s", s);
    free(s);
    P("strong=%u", strong_count(e));
    TVMFFIObjectDecRef(e);
  }
  TVMFFIObjectDecRef(g_inner_err);
  TVMFFIObjectDecRef(out);
  TVMFFIObjectDecRef(in);
}

/* ---------------- pointer stability ---------------- */
CASE(tinfo_pointer_stable_after_many_allocs) {
  TVMFFIByteArray k = ba("cdiff.Stable");
  int32_t a = TVMFFITypeGetOrAllocIndex(&k, -1, 1, 0, 1, kTVMFFIObject);
  const TVMFFITypeInfo* ia = TVMFFIGetTypeInfo(a);
  const TVMFFITypeInfo* i65 = TVMFFIGetTypeInfo(65);
  const TVMFFITypeInfo** anc = ia->type_ancestors;
  char name[64];
  for (int i = 0; i < 5000; i++) {
    snprintf(name, sizeof name, "cdiff.stable.%d", i);
    TVMFFIByteArray kk = ba(name);
    int32_t p = i < 10 ? a : kTVMFFIObject;
    TVMFFITypeGetOrAllocIndex(&kk, -1, i < 10 ? 2 : 1, 0, 1, p);
  }
  char* s = esc(ia->type_key.data, ia->type_key.size);
  P("old ptr key=%s index=%d same_ptr=%d", s, ia->type_index, ia == TVMFFIGetTypeInfo(a));
  free(s);
  s = esc(i65->type_key.data, i65->type_key.size);
  P("old 65 key=%s same_ptr=%d", s, i65 == TVMFFIGetTypeInfo(65));
  free(s);
  P("old ancestors[0]=%d", anc[0]->type_index);
}
CASE(tinfo_fields_pointer_stable) {
  /* 200 fields on one type: the TypeInfo pointer must stay valid; its `fields` array may move
   * (read it again through the TypeInfo, never through the old array) */
  static char names[200][8];
  TVMFFIByteArray k = ba("cdiff.FS");
  int32_t t = TVMFFITypeGetOrAllocIndex(&k, -1, 1, 0, 1, kTVMFFIObject);
  TVMFFIFieldInfo f;
  memset(&f, 0, sizeof(f));
  f.size = 8;
  f.alignment = 8;
  f.field_static_type_index = kTVMFFIInt;
  const TVMFFITypeInfo* ti = NULL;
  const TVMFFIFieldInfo* f0 = NULL;
  for (int i = 0; i < 200; i++) {
    snprintf(names[i], sizeof names[i], "f%d", i);
    f.name = ba(names[i]);
    f.offset = 24 + 8 * i;
    int rc = TVMFFITypeRegisterField(t, &f);
    if (rc) pr_rc("register", rc);
    if (i == 0) {
      ti = TVMFFIGetTypeInfo(t);
      f0 = ti->fields;
    }
  }
  P("same info ptr=%d nfields=%d", ti == TVMFFIGetTypeInfo(t), ti->num_fields);
  P("~fields array moved=%d", f0 != ti->fields);
  for (int i = 0; i < ti->num_fields; i += 199) {
    char* s = esc(ti->fields[i].name.data, ti->fields[i].name.size);
    P("fields[%d]=%s off=%lld", i, s, (long long)ti->fields[i].offset);
    free(s);
  }
}
CASE(attr_column_pointer_stable) {
  TVMFFIByteArray n = ba("cdiff_col");
  TVMFFIAny v = a_int(5);
  TVMFFITypeRegisterAttr(66, &n, &v);
  const TVMFFITypeAttrColumn* c = TVMFFIGetTypeAttrColumn(&n);
  const TVMFFIAny* d0 = c->data;
  /* register at a much higher index and on many more columns */
  TVMFFIByteArray k = ba("cdiff.ColT");
  int32_t t = TVMFFITypeGetOrAllocIndex(&k, -1, 1, 0, 1, kTVMFFIObject);
  v = a_int(6);
  TVMFFITypeRegisterAttr(t, &n, &v);
  static char nm[300][16];
  for (int i = 0; i < 300; i++) {
    snprintf(nm[i], sizeof nm[i], "cdiff_col_%d", i);
    TVMFFIByteArray ni = ba(nm[i]);
    v = a_int(i);
    TVMFFITypeRegisterAttr(65, &ni, &v);
  }
  P("same column ptr=%d", c == TVMFFIGetTypeAttrColumn(&n));
  P("via old column: [66]=%lld [t]=%lld", (long long)c->data[66 - c->begin_index].v_int64,
    (long long)c->data[t - c->begin_index].v_int64);
  P("~data ptr changed=%d", d0 != c->data);
}
static int sc_dummy_noop(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)n;
  (void)result;
  return 0;
}
static void* g_setter_fn;
CASE(field_setter_function_obj_retained) {
  TVMFFIByteArray k = ba("cdiff.SF");
  int32_t t = TVMFFITypeGetOrAllocIndex(&k, -1, 1, 0, 1, kTVMFFIObject);
  TVMFFIFunctionCreate(NULL, sc_dummy_noop, NULL, &g_setter_fn);
  TVMFFIFieldInfo f;
  memset(&f, 0, sizeof(f));
  f.name = ba("x");
  f.size = 8;
  f.alignment = 8;
  f.offset = 24;
  f.flags = kTVMFFIFieldFlagBitSetterIsFunctionObj;
  f.setter = g_setter_fn;
  P("strong before=%u", strong_count(g_setter_fn));
  pr_rc("register", TVMFFITypeRegisterField(t, &f));
  P("strong after=%u", strong_count(g_setter_fn));
}
CASE(method_function_retained) {
  TVMFFIByteArray k = ba("cdiff.MR");
  int32_t t = TVMFFITypeGetOrAllocIndex(&k, -1, 1, 0, 1, kTVMFFIObject);
  void* f = NULL;
  TVMFFIFunctionCreate(NULL, sc_dummy_noop, NULL, &f);
  TVMFFIMethodInfo m;
  memset(&m, 0, sizeof(m));
  m.name = ba("m");
  m.method = a_obj(f);
  P("strong before=%u", strong_count(f));
  pr_rc("register", TVMFFITypeRegisterMethod(t, &m));
  P("strong after=%u", strong_count(f));
  TVMFFIObjectDecRef(f);
  const TVMFFITypeInfo* ti = TVMFFIGetTypeInfo(t);
  P("stored method type=%d hdr=%d", ti->methods[0].method.type_index,
    ti->methods[0].method.v_obj->type_index);
}

/* ---------------- re-entrant callbacks ---------------- */
static int g_depth;
static int reent_alloc(DLTensor* proto, DLManagedTensorVersioned** out, void* ctx,
                       void (*SetError)(void*, const char*, const char*));
static void reent_box_del(DLManagedTensorVersioned* m) { free(m); }
static int reent_alloc(DLTensor* proto, DLManagedTensorVersioned** out, void* ctx,
                       void (*SetError)(void*, const char*, const char*)) {
  g_depth++;
  P("  alloc depth=%d get_is_self=%d", g_depth, TVMFFIEnvGetDLPackManagedTensorAllocator() == reent_alloc);
  if (g_depth == 1) {
    /* swap the allocator and allocate recursively from inside the allocator */
    DLPackManagedTensorAllocator orig = NULL;
    int rc = TVMFFIEnvSetDLPackManagedTensorAllocator(reent_alloc, 0, &orig);
    P("  inner set rc=%d", rc);
    void* inner = NULL;
    rc = TVMFFIEnvTensorAlloc(proto, &inner);
    P("  inner alloc rc=%d", rc);
    if (rc) pr_err("  inner");
    if (inner) TVMFFIObjectDecRef(inner);
    SetError(ctx, "FirstKind", "first");
    SetError(ctx, "SecondKind", "second overrides");
    g_depth--;
    return -1;
  }
  DLManagedTensorVersioned* m = (DLManagedTensorVersioned*)calloc(1, sizeof(*m) + 64);
  m->version.major = 1;
  m->dl_tensor = *proto;
  m->dl_tensor.ndim = 0;
  m->dl_tensor.shape = NULL;
  m->dl_tensor.strides = NULL;
  m->dl_tensor.data = (char*)(m + 1);
  m->deleter = reent_box_del;
  *out = m;
  g_depth--;
  return 0;
}
CASE(envalloc_reentrant_allocator) {
  int64_t shape[1] = {4};
  DLTensor p = cpu_dl(NULL, 1, shape, kDLFloat, 32);
  TVMFFIEnvSetDLPackManagedTensorAllocator(reent_alloc, 0, NULL);
  void* out = NULL;
  int rc = TVMFFIEnvTensorAlloc(&p, &out);
  pr_rc("outer alloc", rc);
  if (out) TVMFFIObjectDecRef(out);
}
static int sig_reenter(void) {
  P("  signals: re-registering from inside");
  int rc = TVMFFIEnvRegisterCAPI("PyErr_CheckSignals", NULL);
  P("  signals: register rc=%d", rc);
  int rc2 = TVMFFIEnvCheckSignals();
  P("  signals: nested check rc=%d", rc2);
  return 0;
}
static void* gil_e(void) { return (void*)0x1; }
static void gil_r(void* s) { (void)s; }
CASE(capi_check_signals_reentrant) {
  TVMFFIEnvRegisterCAPI("PyGILState_Ensure", (void*)gil_e);
  TVMFFIEnvRegisterCAPI("PyGILState_Release", (void*)gil_r);
  TVMFFIEnvRegisterCAPI("PyErr_CheckSignals", (void*)sig_reenter);
  pr_rc("check", TVMFFIEnvCheckSignals());
  pr_rc("check again", TVMFFIEnvCheckSignals());
}
/* DLPack deleter that re-enters the library */
static int g_dl_reent;
static void dl_reent_deleter(DLManagedTensor* m) {
  g_dl_reent++;
  P("  dl deleter: creating a string and a global from inside");
  TVMFFIByteArray b = ba("string created inside a DLPack deleter");
  TVMFFIAny s = a_none();
  TVMFFIStringFromByteArray(&b, &s);
  any_release(&s);
  TVMFFIErrorSetRaisedFromCStr("DeleterError", "from dlpack deleter");
  free(m);
}
CASE(dl_deleter_reenters) {
  static float data[4];
  static int64_t shape[1] = {4};
  DLManagedTensor* m = (DLManagedTensor*)calloc(1, sizeof(*m));
  m->dl_tensor.data = data;
  m->dl_tensor.device.device_type = kDLCPU;
  m->dl_tensor.ndim = 1;
  m->dl_tensor.shape = shape;
  m->dl_tensor.dtype.code = kDLFloat;
  m->dl_tensor.dtype.bits = 32;
  m->dl_tensor.dtype.lanes = 1;
  m->deleter = dl_reent_deleter;
  void* t = NULL;
  pr_rc("import", TVMFFITensorFromDLPack(m, 0, 0, &t));
  pr_rc("decref", TVMFFIObjectDecRef(t));
  P("deleter calls=%d", g_dl_reent);
  pr_err("slot");
}
/* failing import must not call the deleter; then the caller calls it */
CASE(dl_failed_import_deleter_not_called) {
  static float data[4];
  static int64_t shape[1] = {4}, strides[1] = {2};
  DLManagedTensor* m = (DLManagedTensor*)calloc(1, sizeof(*m));
  m->dl_tensor.data = data;
  m->dl_tensor.device.device_type = kDLCPU;
  m->dl_tensor.ndim = 1;
  m->dl_tensor.shape = shape;
  m->dl_tensor.strides = strides;
  m->dl_tensor.dtype.code = kDLFloat;
  m->dl_tensor.dtype.bits = 32;
  m->dl_tensor.dtype.lanes = 1;
  m->deleter = dl_reent_deleter;
  void* t = NULL;
  pr_rc("import noncontig with require_contiguous", TVMFFITensorFromDLPack(m, 0, 1, &t));
  P("deleter calls=%d", g_dl_reent);
  if (g_dl_reent == 0) free(m);
}

/* ---------------- default (library) tensor allocator, no allocator installed -------------- */
static void env_default(const char* what, int ndim, int64_t* shape, uint8_t code, uint8_t bits,
                        uint16_t lanes, int dev) {
  DLTensor p;
  memset(&p, 0, sizeof(p));
  p.device.device_type = (DLDeviceType)dev;
  p.ndim = ndim;
  p.shape = shape;
  p.dtype.code = code;
  p.dtype.bits = bits;
  p.dtype.lanes = lanes;
  void* out = (void*)0x1;
  int rc = TVMFFIEnvTensorAlloc(&p, &out);
  pr_rc(what, rc);
  if (rc == 0) {
    pr_tensor("t", out);
    DLTensor* t = (DLTensor*)((char*)out + sizeof(TVMFFIObject));
    P("~data=%s aligned64=%d", t->data ? "set" : "NULL", ((uintptr_t)t->data % 64) == 0);
    TVMFFIObjectDecRef(out);
  }
}
CASE(envdef_huge) {
  int64_t s[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
  env_default("huge", 2, s, kDLFloat, 32, 1, kDLCPU);
}
CASE(envdef_128tib) {
  /* 2^47 bytes: more than a 47-bit user address space holds, so no machine can satisfy it
   * (a smaller "too large" size would succeed where memory is overcommitted) */
  int64_t s[1] = {(int64_t)1 << 45};
  env_default("128TiB", 1, s, kDLFloat, 32, 1, kDLCPU);
}
CASE(envdef_negative) {
  int64_t s[2] = {-1, 4};
  env_default("negative", 2, s, kDLFloat, 32, 1, kDLCPU);
}
CASE(envdef_bits0_lanes0) {
  int64_t s[1] = {4};
  env_default("bits0", 1, s, kDLFloat, 0, 1, kDLCPU);
  env_default("lanes0", 1, s, kDLFloat, 32, 0, kDLCPU);
  env_default("code 200", 1, s, 200, 32, 1, kDLCPU);
  env_default("bits 4 odd", 1, s, 17, 4, 1, kDLCPU);
}
CASE(envdef_ndim0_ndim_neg) {
  env_default("ndim0", 0, NULL, kDLFloat, 32, 1, kDLCPU);
  env_default("ndim -1", -1, NULL, kDLFloat, 32, 1, kDLCPU);
}
CASE(envdef_shape_null) { env_default("ndim2 shape NULL", 2, NULL, kDLFloat, 32, 1, kDLCPU); }
CASE(envdef_cuda) {
  int64_t s[1] = {4};
  env_default("cuda", 1, s, kDLFloat, 32, 1, kDLCUDA);
  env_default("dev 999", 1, s, kDLFloat, 32, 1, 999);
}
CASE(envdef_overflow_product) {
  int64_t s[3] = {(int64_t)1 << 31, (int64_t)1 << 31, (int64_t)1 << 31};
  env_default("overflow", 3, s, kDLFloat, 64, 1, kDLCPU);
}

/* ---------------- unsafe views with strides ---------------- */
static void* mk_src2(void) {
  static float data[64];
  static int64_t shape[1] = {64};
  DLManagedTensor* m = (DLManagedTensor*)calloc(1, sizeof(*m));
  m->dl_tensor.data = data;
  m->dl_tensor.device.device_type = kDLCPU;
  m->dl_tensor.ndim = 1;
  m->dl_tensor.shape = shape;
  m->dl_tensor.dtype.code = kDLFloat;
  m->dl_tensor.dtype.bits = 32;
  m->dl_tensor.dtype.lanes = 1;
  m->deleter = (void (*)(DLManagedTensor*))free;
  void* t = NULL;
  TVMFFITensorFromDLPack(m, 0, 0, &t);
  return t;
}
static void viewS(const char* what, void* src, int ndim, int64_t* shape, int64_t* strides) {
  void* data = src ? ((DLTensor*)((char*)src + sizeof(TVMFFIObject)))->data : NULL;
  DLTensor p = cpu_dl(data, ndim, shape, kDLFloat, 32);
  p.strides = strides;
  void* v = (void*)0x1;
  int rc = TVMFFITensorCreateUnsafeView(src, &p, &v);
  pr_rc(what, rc);
  if (rc == 0) {
    pr_tensor("v", v);
    /* the view must own its shape/strides: the prototype's arrays belong to the caller */
    DLTensor* t = (DLTensor*)((char*)v + sizeof(TVMFFIObject));
    P("v shape_is_caller_array=%d strides_is_caller_array=%d", shape && t->shape == shape,
      strides && t->strides == strides);
    if (src) P("src strong=%u", strong_count(src));
    TVMFFIObjectDecRef(v);
  }
}
CASE(viewS_ndim0_strides_nonnull) {
  void* src = mk_src2();
  int64_t dummy = 7;
  viewS("ndim0 strides nonnull", src, 0, &dummy, &dummy);
  TVMFFIObjectDecRef(src);
}
CASE(viewS_basic) {
  void* src = mk_src2();
  int64_t shape[2] = {4, 8}, strides[2] = {8, 1};
  viewS("4x8", src, 2, shape, strides);
  TVMFFIObjectDecRef(src);
}
CASE(viewS_source_string) {
  void* s = make_str_obj("string object as the view source!");
  int64_t shape[2] = {4, 8}, strides[2] = {8, 1};
  viewS("source Str", s, 0, shape, strides);
  P("str strong=%u", strong_count(s));
  TVMFFIObjectDecRef(s);
}
CASE(viewS_source_null) {
  int64_t shape[2] = {4, 8}, strides[2] = {8, 1};
  viewS("source NULL", NULL, 2, shape, strides);
}
CASE(viewS_negative_shape_strides) {
  void* src = mk_src2();
  int64_t shape[2] = {-4, 8}, strides[2] = {-8, 0};
  viewS("neg", src, 2, shape, strides);
  TVMFFIObjectDecRef(src);
}
CASE(viewS_ndim_negative) {
  void* src = mk_src2();
  int64_t shape[2] = {4, 8}, strides[2] = {8, 1};
  viewS("ndim -1", src, -1, shape, strides);
  TVMFFIObjectDecRef(src);
}
CASE(viewS_shape_null_strides_set) {
  void* src = mk_src2();
  int64_t strides[2] = {8, 1};
  viewS("shape NULL", src, 2, NULL, strides);
  TVMFFIObjectDecRef(src);
}
CASE(viewS_of_view_chain) {
  void* src = mk_src2();
  int64_t shape[2] = {4, 8}, strides[2] = {8, 1};
  void* data = ((DLTensor*)((char*)src + sizeof(TVMFFIObject)))->data;
  DLTensor p = cpu_dl(data, 2, shape, kDLFloat, 32);
  p.strides = strides;
  void* v1 = NULL;
  void* v2 = NULL;
  TVMFFITensorCreateUnsafeView(src, &p, &v1);
  TVMFFIObjectDecRef(src);
  shape[0] = 32;
  shape[1] = 1;
  strides[0] = 1;
  strides[1] = 1;
  pr_rc("view of view", TVMFFITensorCreateUnsafeView(v1, &p, &v2));
  TVMFFIObjectDecRef(v1);
  pr_tensor("v2", v2);
  DLManagedTensorVersioned* e = NULL;
  pr_rc("export", TVMFFITensorToDLPackVersioned(v2, &e));
  TVMFFIObjectDecRef(v2);
  pr_dltensor("exported", &e->dl_tensor);
  e->deleter(e);
}

/* ---------------- containers storing odd AnyViews ---------------- */
static void array_of(const char* what, TVMFFIAny a) {
  void* arr = get_global("ffi.Array");
  void* getitem = get_global("ffi.ArrayGetItem");
  TVMFFIAny rv;
  int rc = call(arr, &a, 1, &rv);
  pr_rc(what, rc);
  if (rc == 0 && getitem) {
    TVMFFIAny args[2] = {rv, a_int(0)}, it;
    int rc2 = call(getitem, args, 2, &it);
    pr_rc("getitem", rc2);
    if (rc2 == 0) pr_any_release("item", &it);
  }
  if (rc == 0) any_release(&rv);
  if (getitem) TVMFFIObjectDecRef(getitem);
  TVMFFIObjectDecRef(arr);
}
CASE(array_of_rawstr) { array_of("Array(RawStr)", a_raw("raw string in array")); }
CASE(array_of_rawstr_null) { array_of("Array(RawStr NULL)", a_raw(NULL)); }
CASE(array_of_bytearrayptr) {
  TVMFFIByteArray b = ban("by\0tes", 6);
  TVMFFIAny a = a_none();
  a.type_index = kTVMFFIByteArrayPtr;
  a.v_ptr = &b;
  array_of("Array(ByteArrayPtr)", a);
}
CASE(array_of_dltensorptr) {
  static float data[2];
  static int64_t shape[1] = {2};
  DLTensor t;
  memset(&t, 0, sizeof(t));
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = 1;
  t.shape = shape;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  TVMFFIAny a = a_none();
  a.type_index = kTVMFFIDLTensorPtr;
  a.v_ptr = &t;
  array_of("Array(DLTensorPtr)", a);
}
CASE(array_of_rvalueref) {
  void* s = make_str_obj("moved into an array element");
  void* slot = s;
  TVMFFIAny a = a_none();
  a.type_index = kTVMFFIObjectRValueRef;
  a.v_ptr = &slot;
  array_of("Array(RValueRef)", a);
  P("slot=%s", slot ? "set" : "NULL");
  if (slot) TVMFFIObjectDecRef(slot);
}
CASE(array_of_unknown_pod) {
  TVMFFIAny a = a_int(3);
  a.type_index = 40;
  array_of("Array(type 40)", a);
}
CASE(array_of_smallstr_bad_len) {
  TVMFFIAny a = a_none();
  a.type_index = kTVMFFISmallStr;
  a.small_str_len = 9;
  memcpy(a.v_bytes, "12345678", 8);
  array_of("Array(SmallStr len 9)", a);
}

/* ---------------- concurrency ----------------
 * A fixed amount of work per thread (not a time budget), so that a correct library always
 * prints the same thing. The official library races in its registries and usually crashes on
 * these (counted as official-crash); they are here to catch a crash or hang of ours. */
static int sc_conc(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)args;
  (void)n;
  result->type_index = kTVMFFIInt;
  result->v_int64 = (intptr_t)self;
  return 0;
}
enum { CONC_ITERS = 3000 };
static void* conc_worker(void* arg) {
  long id = (long)arg;
  long bad = 0;
  char name[32];
  for (long iters = 0; iters < CONC_ITERS; iters++) {
    snprintf(name, sizeof name, "cdiff.conc.%ld", iters % 4);
    TVMFFIByteArray nm = ba(name);
    if (id % 2 == 0) {
      void* f = NULL;
      TVMFFIFunctionCreate((void*)id, sc_conc, NULL, &f);
      if (TVMFFIFunctionSetGlobal(&nm, f, 1) != 0) bad++;
      TVMFFIObjectDecRef(f);
    } else {
      void* g = NULL;
      TVMFFIFunctionGetGlobal(&nm, &g);
      if (g) {
        TVMFFIAny rv = a_none();
        if (TVMFFIFunctionCall(g, NULL, 0, &rv) != 0) bad++;
        TVMFFIObjectDecRef(g);
      }
      TVMFFIByteArray b = ba("concurrent string object creation");
      TVMFFIAny s = a_none();
      TVMFFIStringFromByteArray(&b, &s);
      any_release(&s);
      char tk[48];
      snprintf(tk, sizeof tk, "cdiff.conc.T%ld.%ld", id, iters % 50);
      TVMFFIByteArray tkb = ba(tk);
      TVMFFITypeGetOrAllocIndex(&tkb, -1, 1, 0, 1, kTVMFFIObject);
      TVMFFIErrorSetRaisedFromCStr("ThreadError", tk);
      void* e = NULL;
      TVMFFIErrorMoveFromRaised(&e);
      if (!e) bad++;
      else TVMFFIObjectDecRef(e);
    }
  }
  return (void*)bad;
}
CASE(conc_registry_stress) {
  pthread_t th[6];
  for (long i = 0; i < 6; i++) pthread_create(&th[i], NULL, conc_worker, (void*)i);
  long bad = 0;
  for (int i = 0; i < 6; i++) {
    void* r;
    pthread_join(th[i], &r);
    bad += (long)r;
  }
  P("bad=%ld", bad);
}
static void* conc_refcount_worker(void* obj) {
  for (int i = 0; i < 200000; i++) {
    TVMFFIObjectIncRef(obj);
    TVMFFIObjectDecRef(obj);
  }
  return NULL;
}
CASE(conc_refcount) {
  void* s = make_str_obj("shared object for refcount stress");
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, conc_refcount_worker, s);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  P("strong=%u", strong_count(s));
  TVMFFIObjectDecRef(s);
}
