/* cases_type.c: type keys, type info, type allocation, field/method/metadata/attr registration */
#include "common.h"

static void pr_tinfo(const char* what, const TVMFFITypeInfo* ti) {
  if (ti == NULL) {
    P("%s info=NULL", what);
    return;
  }
  char* k = esc(ti->type_key.data, ti->type_key.size);
  P("%s index=%d depth=%d key=%s nfields=%d nmethods=%d metadata=%s", what, ti->type_index,
    ti->type_depth, k, ti->num_fields, ti->num_methods, ti->metadata ? "set" : "NULL");
  free(k);
  P("~%s key_hash=%016llx", what, (unsigned long long)ti->type_key_hash);
  if (ti->type_ancestors) {
    for (int d = 0; d < ti->type_depth && d < 16; d++) {
      const TVMFFITypeInfo* a = ti->type_ancestors[d];
      P("%s ancestor[%d]=%d", what, d, a ? a->type_index : -999);
    }
  } else if (ti->type_depth > 0) {
    P("%s ancestors=NULL", what);
  }
  if (ti->metadata)
    P("%s md.total_size=%d md.kind=%d md.creator=%s", what, ti->metadata->total_size,
      (int)ti->metadata->structural_eq_hash_kind, ti->metadata->creator ? "set" : "NULL");
  for (int i = 0; i < ti->num_fields && i < 16; i++) {
    const TVMFFIFieldInfo* f = &ti->fields[i];
    char* n = esc(f->name.data, f->name.size);
    char* md = esc(f->metadata.data, f->metadata.size);
    P("%s field[%d] name=%s flags=%lld size=%lld align=%lld off=%lld md=%s sti=%d", what, i, n,
      (long long)f->flags, (long long)f->size, (long long)f->alignment, (long long)f->offset, md,
      f->field_static_type_index);
    free(n);
    free(md);
  }
  for (int i = 0; i < ti->num_methods && i < 16; i++) {
    const TVMFFIMethodInfo* m = &ti->methods[i];
    char* n = esc(m->name.data, m->name.size);
    P("%s method[%d] name=%s flags=%lld method.type=%d", what, i, n, (long long)m->flags,
      m->method.type_index);
    free(n);
  }
}

/* ---------------- TypeKeyToIndex ---------------- */
static void key2idx(const char* what, TVMFFIByteArray k) {
  int32_t idx = -12345;
  int rc = TVMFFITypeKeyToIndex(&k, &idx);
  pr_rc(what, rc);
  P("idx=%d", idx);
}
CASE(tkey_null_zero) { key2idx("{NULL,0}", ban(NULL, 0)); }
CASE(tkey_empty) { key2idx("''", ban("", 0)); }
CASE(tkey_embedded_nul) { key2idx("'ffi.String\\0junk'", ban("ffi.String\0junk", 15)); }
CASE(tkey_unterminated) { key2idx("'ffi.String' unterminated", ban("ffi.StringABCDEF", 10)); }
CASE(tkey_non_utf8) { key2idx("nonutf8", ba("\xff\xfe\x80")); }
CASE(tkey_huge) {
  size_t n = 1 << 20;
  char* s = (char*)malloc(n);
  memset(s, 'k', n);
  key2idx("1MiB", ban(s, n));
  free(s);
}
CASE(tkey_null_out) {
  TVMFFIByteArray k = ba("ffi.String");
  pr_rc("NULL out", TVMFFITypeKeyToIndex(&k, NULL));
}
CASE(tkey_known) {
  static const char* keys[] = {"ffi.Object", "ffi.String", "ffi.Bytes", "ffi.Error", "ffi.Function",
                               "ffi.Shape", "ffi.Tensor", "ffi.Array", "ffi.Map", "ffi.Module",
                               "ffi.OpaquePyObject", "ffi.List", "ffi.Dict", "ffi.VisitInterrupt",
                               "ffi.BigInt", "None", "int", "bool", "float", "void*", "DataType",
                               "Device", "DLTensor*", "const char*", "TVMFFIByteArray*",
                               "ObjectRValueRef", "ffi.SmallStr", "ffi.SmallBytes", "Unchanged",
                               "ffi.Any", "Any", "ffi.NDArray", "runtime.Module", "object.Object",
                               "ffi.Str", "str", "ffi.EnumState", "ffi.StructuralKey"};
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) key2idx(keys[i], ba(keys[i]));
}

/* ---------------- GetTypeInfo ---------------- */
static const int32_t kTinfoIdx[] = {-100, -2, -1, 0, 1, 8, 11, 12, 13, 14, 15, 63, 64, 65, 67, 70,
                                    73, 74, 77, 78, 79, 80, 100, 127, 128, 129, 137, 138, 139,
                                    150, 1000, 65535, INT32_MAX, INT32_MIN};
static void case_tinfo(long i) {
  char what[32];
  snprintf(what, sizeof what, "tinfo[%d]", kTinfoIdx[i]);
  pr_tinfo(what, TVMFFIGetTypeInfo(kTinfoIdx[i]));
}
__attribute__((constructor)) static void reg_tinfo(void) {
  for (long i = 0; i < (long)(sizeof(kTinfoIdx) / sizeof(kTinfoIdx[0])); i++) {
    char* n = (char*)malloc(64);
    snprintf(n, 64, "tinfo_%d", kTinfoIdx[i]);
    cf_register(n, case_tinfo, i, NULL);
  }
}

/* ---------------- TypeGetOrAllocIndex ---------------- */
static int32_t alloc_t(const char* what, TVMFFIByteArray k, int32_t st, int32_t depth, int32_t slots,
                       int32_t ovf, int32_t parent) {
  int32_t r = TVMFFITypeGetOrAllocIndex(&k, st, depth, slots, ovf, parent);
  P("%s -> %d", what, r);
  return r;
}
CASE(talloc_basic_and_query) {
  int32_t a = alloc_t("new A", ba("cdiff.A"), -1, 1, 0, 1, kTVMFFIObject);
  alloc_t("again A", ba("cdiff.A"), -1, 1, 0, 1, kTVMFFIObject);
  alloc_t("query A", ba("cdiff.A"), -1, 1, 0, 1, -2);
  alloc_t("query missing", ba("cdiff.Missing"), -1, 1, 0, 1, -2);
  alloc_t("query ffi.String", ba("ffi.String"), -1, 0, 0, 0, -2);
  alloc_t("query {NULL,0}", ban(NULL, 0), -1, 0, 0, 0, -2);
  pr_tinfo("A", TVMFFIGetTypeInfo(a));
  int32_t idx = -1;
  TVMFFIByteArray k = ba("cdiff.A");
  pr_rc("keytoindex", TVMFFITypeKeyToIndex(&k, &idx));
  P("idx==a %d", idx == a);
}
CASE(talloc_conflict_parent) {
  alloc_t("new B under Object", ba("cdiff.B"), -1, 1, 0, 1, kTVMFFIObject);
  alloc_t("B again under Str", ba("cdiff.B"), -1, 2, 0, 1, kTVMFFIStr);
  pr_err("slot");
}
CASE(talloc_conflict_static_index) {
  alloc_t("C static 90", ba("cdiff.C"), 90, 1, 0, 1, kTVMFFIObject);
  alloc_t("C again static 91", ba("cdiff.C"), 91, 1, 0, 1, kTVMFFIObject);
  pr_err("slot");
}
CASE(talloc_static_index_taken) {
  alloc_t("D static 65 (ffi.String's)", ba("cdiff.D"), 65, 1, 0, 1, kTVMFFIObject);
  pr_err("slot");
  pr_tinfo("65", TVMFFIGetTypeInfo(65));
}
CASE(talloc_static_index_free) {
  int32_t r = alloc_t("E static 100", ba("cdiff.E"), 100, 1, 0, 1, kTVMFFIObject);
  if (r >= 0) pr_tinfo("E", TVMFFIGetTypeInfo(r));
}
CASE(talloc_static_index_dynamic_range) {
  int32_t r = alloc_t("F static 5000", ba("cdiff.F"), 5000, 1, 0, 1, kTVMFFIObject);
  if (r >= 0) pr_tinfo("F", TVMFFIGetTypeInfo(r));
  int32_t r2 = alloc_t("G dynamic", ba("cdiff.G"), -1, 1, 0, 1, kTVMFFIObject);
  P("G>F %d", r2 > r);
}
CASE(talloc_static_index_negative_other) {
  alloc_t("H static -5", ba("cdiff.H"), -5, 1, 0, 1, kTVMFFIObject);
  pr_err("slot");
}
static void bad_parent(long parent) {
  char what[64];
  snprintf(what, sizeof what, "X under parent %ld", parent);
  int32_t r = alloc_t(what, ba("cdiff.X"), -1, 1, 0, 1, (int32_t)parent);
  pr_err("slot");
  if (r >= 0) pr_tinfo("X", TVMFFIGetTypeInfo(r));
}
__attribute__((constructor)) static void reg_bad_parent(void) {
  static const long ps[] = {-5, -3, 3, 13, 63, 65, 67, 79, 100, 127, 9999, INT32_MAX};
  for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
    char* n = (char*)malloc(64);
    snprintf(n, 64, "talloc_parent_%ld", ps[i]);
    cf_register(n, bad_parent, ps[i], NULL);
  }
}
CASE(talloc_root_parent_minus1) {
  int32_t r = alloc_t("root", ba("cdiff.Root"), -1, 0, 0, 1, -1);
  pr_err("slot");
  if (r >= 0) pr_tinfo("root", TVMFFIGetTypeInfo(r));
}
CASE(talloc_depth_mismatch) {
  int32_t r = alloc_t("depth 5 under Object", ba("cdiff.Deep"), -1, 5, 0, 1, kTVMFFIObject);
  pr_err("slot");
  if (r >= 0) pr_tinfo("deep", TVMFFIGetTypeInfo(r));
}
CASE(talloc_depth_zero_under_object) {
  int32_t r = alloc_t("depth 0 under Object", ba("cdiff.D0"), -1, 0, 0, 1, kTVMFFIObject);
  pr_err("slot");
  if (r >= 0) pr_tinfo("d0", TVMFFIGetTypeInfo(r));
}
CASE(talloc_depth_negative) {
  int32_t r = alloc_t("depth -1", ba("cdiff.Dn"), -1, -1, 0, 1, kTVMFFIObject);
  pr_err("slot");
  if (r >= 0) pr_tinfo("dn", TVMFFIGetTypeInfo(r));
}
CASE(talloc_negative_slots) {
  int32_t r = alloc_t("slots -1", ba("cdiff.NegSlots"), -1, 1, -1, 0, kTVMFFIObject);
  pr_err("slot");
  int32_t c = alloc_t("child of negslots", ba("cdiff.NegSlots.C"), -1, 2, 0, 1, r);
  pr_err("slot");
  (void)c;
}
/* (2^30 child slots: dropped, the official library spends more than 20 s reserving them) */
CASE(talloc_empty_key) {
  int32_t r = alloc_t("''", ban("", 0), -1, 1, 0, 1, kTVMFFIObject);
  pr_err("slot");
  if (r >= 0) pr_tinfo("empty", TVMFFIGetTypeInfo(r));
}
CASE(talloc_null_zero_key) {
  int32_t r = alloc_t("{NULL,0}", ban(NULL, 0), -1, 1, 0, 1, kTVMFFIObject);
  pr_err("slot");
  if (r >= 0) pr_tinfo("nullkey", TVMFFIGetTypeInfo(r));
}
CASE(talloc_embedded_nul_key) {
  int32_t r = alloc_t("'cdiff.N\\0x'", ban("cdiff.N\0x", 9), -1, 1, 0, 1, kTVMFFIObject);
  if (r >= 0) pr_tinfo("nul", TVMFFIGetTypeInfo(r));
  alloc_t("query 'cdiff.N'", ba("cdiff.N"), -1, 1, 0, 1, -2);
  alloc_t("query full", ban("cdiff.N\0x", 9), -1, 1, 0, 1, -2);
}
CASE(talloc_non_utf8_key) {
  int32_t r = alloc_t("nonutf8", ba("cdiff.\xff\xfe"), -1, 1, 0, 1, kTVMFFIObject);
  pr_err("slot");
  if (r >= 0) pr_tinfo("nonutf8", TVMFFIGetTypeInfo(r));
}
CASE(talloc_existing_builtin_key_different_parent) {
  alloc_t("ffi.String under Object depth1", ba("ffi.String"), -1, 1, 0, 1, kTVMFFIObject);
  alloc_t("ffi.String under Array", ba("ffi.String"), -1, 2, 0, 1, kTVMFFIArray);
  alloc_t("ffi.String static 65", ba("ffi.String"), 65, 1, 0, 0, kTVMFFIObject);
  pr_err("slot");
}
CASE(talloc_child_slots_exhaust) {
  int32_t p = alloc_t("parent 2 slots no ovf", ba("cdiff.P2"), -1, 1, 2, 0, kTVMFFIObject);
  alloc_t("c1", ba("cdiff.P2.c1"), -1, 2, 0, 1, p);
  alloc_t("c2", ba("cdiff.P2.c2"), -1, 2, 0, 1, p);
  alloc_t("c3", ba("cdiff.P2.c3"), -1, 2, 0, 1, p);
  pr_err("slot");
}
CASE(talloc_child_of_final_string) {
  /* ffi.String has no child slots; allocate a child */
  int32_t r = alloc_t("child of ffi.String", ba("cdiff.StrChild"), -1, 2, 0, 1, kTVMFFIStr);
  pr_err("slot");
  if (r >= 0) pr_tinfo("sc", TVMFFIGetTypeInfo(r));
}
CASE(talloc_many) {
  int32_t first = -1, last = -1;
  char name[64];
  for (int i = 0; i < 3000; i++) {
    snprintf(name, sizeof name, "cdiff.many.%d", i);
    int32_t r = TVMFFITypeGetOrAllocIndex(&(TVMFFIByteArray){name, strlen(name)}, -1, 1, 0, 1,
                                          kTVMFFIObject);
    if (i == 0) first = r;
    last = r;
  }
  P("first=%d last=%d diff=%d", first, last, last - first);
  pr_tinfo("last", TVMFFIGetTypeInfo(last));
}
CASE(talloc_null_key_ptr) {
  int32_t r = TVMFFITypeGetOrAllocIndex(NULL, -1, 1, 0, 1, kTVMFFIObject);
  P("-> %d", r);
}

/* ---------------- RegisterField / Method / Metadata ---------------- */
static int getter_i64(void* field, TVMFFIAny* result) {
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = *(int64_t*)field;
  return 0;
}
static TVMFFIFieldInfo mkfield(const char* name) {
  TVMFFIFieldInfo f;
  memset(&f, 0, sizeof(f));
  f.name = ba(name);
  f.doc = ba("");
  f.metadata = ba("{}");
  f.flags = 0;
  f.size = 8;
  f.alignment = 8;
  f.offset = 24;
  f.getter = getter_i64;
  f.setter = NULL;
  f.default_value_or_factory = a_none();
  f.field_static_type_index = kTVMFFIInt;
  return f;
}
static int32_t newtype(const char* key) {
  return TVMFFITypeGetOrAllocIndex(&(TVMFFIByteArray){key, strlen(key)}, -1, 1, 0, 1,
                                   kTVMFFIObject);
}
CASE(field_unknown_type) {
  TVMFFIFieldInfo f = mkfield("x");
  pr_rc("field on 9999", TVMFFITypeRegisterField(9999, &f));
  pr_rc("field on -1", TVMFFITypeRegisterField(-1, &f));
  pr_rc("field on 14", TVMFFITypeRegisterField(14, &f));
}
CASE(field_on_pod_type) {
  TVMFFIFieldInfo f = mkfield("x");
  pr_rc("field on 1 (int)", TVMFFITypeRegisterField(1, &f));
  pr_tinfo("int", TVMFFIGetTypeInfo(1));
}
CASE(field_on_builtin_string) {
  TVMFFIFieldInfo f = mkfield("extra");
  pr_rc("field on ffi.String", TVMFFITypeRegisterField(kTVMFFIStr, &f));
  pr_tinfo("str", TVMFFIGetTypeInfo(kTVMFFIStr));
}
CASE(field_duplicate_name) {
  int32_t t = newtype("cdiff.FD");
  TVMFFIFieldInfo f = mkfield("x");
  pr_rc("x", TVMFFITypeRegisterField(t, &f));
  f.offset = 32;
  pr_rc("x again", TVMFFITypeRegisterField(t, &f));
  pr_tinfo("FD", TVMFFIGetTypeInfo(t));
}
CASE(field_weird) {
  int32_t t = newtype("cdiff.FW");
  TVMFFIFieldInfo f = mkfield("");
  pr_rc("empty name", TVMFFITypeRegisterField(t, &f));
  f = mkfield("neg");
  f.offset = -8;
  f.size = -1;
  f.alignment = 3;
  f.flags = -1;
  pr_rc("negative offset/size, flags -1", TVMFFITypeRegisterField(t, &f));
  f = mkfield("nogetter");
  f.getter = NULL;
  pr_rc("NULL getter", TVMFFITypeRegisterField(t, &f));
  f = mkfield("n\0ul");
  f.name = ban("n\0ul", 4);
  f.metadata = ba("not json {");
  pr_rc("nul name bad md", TVMFFITypeRegisterField(t, &f));
  f = mkfield("sti");
  f.field_static_type_index = 99999;
  pr_rc("static type 99999", TVMFFITypeRegisterField(t, &f));
  pr_tinfo("FW", TVMFFIGetTypeInfo(t));
}
CASE(field_default_object_refcount) {
  int32_t t = newtype("cdiff.FDef");
  void* s = make_str_obj("default value string object");
  TVMFFIFieldInfo f = mkfield("d");
  f.flags = kTVMFFIFieldFlagBitMaskHasDefault;
  f.default_value_or_factory = a_obj(s);
  P("strong before=%u", strong_count(s));
  pr_rc("register", TVMFFITypeRegisterField(t, &f));
  P("strong after=%u", strong_count(s));
  const TVMFFITypeInfo* ti = TVMFFIGetTypeInfo(t);
  if (ti && ti->num_fields > 0) {
    P("stored default type=%d same_obj=%d", ti->fields[0].default_value_or_factory.type_index,
      ti->fields[0].default_value_or_factory.v_obj == s);
  }
  TVMFFIObjectDecRef(s);
}
CASE(field_default_rawstr) {
  int32_t t = newtype("cdiff.FRaw");
  TVMFFIFieldInfo f = mkfield("d");
  char buf[64];
  strcpy(buf, "raw default that will be overwritten");
  f.flags = kTVMFFIFieldFlagBitMaskHasDefault;
  f.default_value_or_factory = a_raw(buf);
  pr_rc("register rawstr default", TVMFFITypeRegisterField(t, &f));
  memset(buf, 'Z', 40);
  const TVMFFITypeInfo* ti = TVMFFIGetTypeInfo(t);
  if (ti && ti->num_fields > 0) pr_any("stored default", &ti->fields[0].default_value_or_factory);
}
CASE(field_null_info) {
  int32_t t = newtype("cdiff.FNull");
  pr_rc("NULL info", TVMFFITypeRegisterField(t, NULL));
}
CASE(method_variants) {
  int32_t t = newtype("cdiff.M");
  TVMFFIMethodInfo m;
  memset(&m, 0, sizeof(m));
  m.name = ba("m_int");
  m.method = a_int(3);
  pr_rc("method int", TVMFFITypeRegisterMethod(t, &m));
  m.name = ba("m_none");
  m.method = a_none();
  pr_rc("method None", TVMFFITypeRegisterMethod(t, &m));
  m.name = ba("m_raw");
  m.method = a_raw("raw string method");
  pr_rc("method rawstr", TVMFFITypeRegisterMethod(t, &m));
  m.name = ba("m_int");
  m.method = a_int(4);
  pr_rc("method int dup", TVMFFITypeRegisterMethod(t, &m));
  m.name = ba("m_static");
  m.flags = kTVMFFIFieldFlagBitMaskIsStaticMethod | (1LL << 40);
  pr_rc("method static weird flags", TVMFFITypeRegisterMethod(t, &m));
  pr_tinfo("M", TVMFFIGetTypeInfo(t));
  pr_rc("method on 9999", TVMFFITypeRegisterMethod(9999, &m));
  pr_rc("method on -7", TVMFFITypeRegisterMethod(-7, &m));
}
CASE(metadata_variants) {
  int32_t t = newtype("cdiff.MD");
  TVMFFITypeMetadata md;
  memset(&md, 0, sizeof(md));
  md.doc = ba("doc \xff\x00");
  md.total_size = -5;
  md.structural_eq_hash_kind = (TVMFFISEqHashKind)77;
  pr_rc("md 1", TVMFFITypeRegisterMetadata(t, &md));
  pr_tinfo("MD", TVMFFIGetTypeInfo(t));
  md.total_size = 64;
  md.structural_eq_hash_kind = kTVMFFISEqHashKindTreeNode;
  pr_rc("md 2", TVMFFITypeRegisterMetadata(t, &md));
  pr_tinfo("MD", TVMFFIGetTypeInfo(t));
  pr_rc("md on 9999", TVMFFITypeRegisterMetadata(9999, &md));
  pr_rc("md on -1", TVMFFITypeRegisterMetadata(-1, &md));
  pr_rc("md on 65 (ffi.String)", TVMFFITypeRegisterMetadata(65, &md));
  pr_tinfo("65", TVMFFIGetTypeInfo(65));
}
CASE(metadata_null) {
  int32_t t = newtype("cdiff.MDN");
  pr_rc("md NULL", TVMFFITypeRegisterMetadata(t, NULL));
}

/* ---------------- type attrs ---------------- */
static void pr_col(const char* what, const char* name, const int32_t* idx, int n) {
  TVMFFIByteArray k = ba(name);
  const TVMFFITypeAttrColumn* c = TVMFFIGetTypeAttrColumn(&k);
  if (!c) {
    P("%s column=NULL", what);
    return;
  }
  P("~%s column begin=%d size=%d", what, c->begin_index, c->size);
  for (int i = 0; i < n; i++) {
    int32_t t = idx[i];
    char w[128];
    snprintf(w, sizeof w, "%s[%d]", what, t);
    if (t >= c->begin_index && t < c->begin_index + c->size)
      pr_any(w, &c->data[t - c->begin_index]);
    else
      P("%s absent", w);
  }
}
CASE(attr_basic_column) {
  int32_t t = newtype("cdiff.AT");
  TVMFFIByteArray n = ba("cdiff_attr");
  TVMFFIAny v = a_int(11);
  pr_rc("attr on 65", TVMFFITypeRegisterAttr(65, &n, &v));
  v = a_int(22);
  pr_rc("attr on new", TVMFFITypeRegisterAttr(t, &n, &v));
  int32_t idx[] = {0, 64, 65, 66, t, t + 1};
  pr_col("col", "cdiff_attr", idx, 6);
}
CASE(attr_twice) {
  TVMFFIByteArray n = ba("cdiff_attr2");
  TVMFFIAny v = a_int(1);
  pr_rc("first", TVMFFITypeRegisterAttr(66, &n, &v));
  v = a_int(2);
  pr_rc("second", TVMFFITypeRegisterAttr(66, &n, &v));
  int32_t idx[] = {66};
  pr_col("col", "cdiff_attr2", idx, 1);
}
CASE(attr_none_then_value) {
  TVMFFIByteArray n = ba("cdiff_attr3");
  TVMFFIAny v = a_none();
  pr_rc("None", TVMFFITypeRegisterAttr(66, &n, &v));
  int32_t idx[] = {66};
  pr_col("col", "cdiff_attr3", idx, 1);
  v = a_int(2);
  pr_rc("value", TVMFFITypeRegisterAttr(66, &n, &v));
  pr_col("col", "cdiff_attr3", idx, 1);
}
CASE(attr_bad_type_index) {
  TVMFFIByteArray n = ba("cdiff_attr4");
  TVMFFIAny v = a_int(1);
  pr_rc("-1", TVMFFITypeRegisterAttr(-1, &n, &v));
  pr_rc("-100", TVMFFITypeRegisterAttr(-100, &n, &v));
  pr_rc("0 (None)", TVMFFITypeRegisterAttr(0, &n, &v));
  pr_rc("100000", TVMFFITypeRegisterAttr(100000, &n, &v));
  int32_t idx[] = {0, 100000};
  pr_col("col", "cdiff_attr4", idx, 2);
}
CASE(attr_empty_and_null_name) {
  TVMFFIByteArray n = ban("", 0);
  TVMFFIAny v = a_int(1);
  pr_rc("empty name", TVMFFITypeRegisterAttr(65, &n, &v));
  n = ban(NULL, 0);
  pr_rc("{NULL,0} name", TVMFFITypeRegisterAttr(66, &n, &v));
  int32_t idx[] = {65, 66};
  pr_col("col''", "", idx, 2);
}
CASE(attr_rawstr_value) {
  TVMFFIByteArray n = ba("cdiff_attr5");
  char buf[64];
  strcpy(buf, "raw attr value string, will be clobbered");
  TVMFFIAny v = a_raw(buf);
  pr_rc("rawstr", TVMFFITypeRegisterAttr(65, &n, &v));
  memset(buf, 'Q', 30);
  int32_t idx[] = {65};
  pr_col("col", "cdiff_attr5", idx, 1);
}
CASE(attr_object_value_refcount) {
  TVMFFIByteArray n = ba("cdiff_attr6");
  void* s = make_str_obj("attribute value held by the column");
  TVMFFIAny v = a_obj(s);
  P("strong=%u", strong_count(s));
  pr_rc("obj", TVMFFITypeRegisterAttr(65, &n, &v));
  P("strong=%u", strong_count(s));
  TVMFFIObjectDecRef(s);
  int32_t idx[] = {65};
  pr_col("col", "cdiff_attr6", idx, 1);
}
CASE(attr_column_unknown) {
  TVMFFIByteArray k = ba("cdiff_no_such_attr");
  P("col=%s", TVMFFIGetTypeAttrColumn(&k) ? "set" : "NULL");
  k = ban(NULL, 0);
  P("col {NULL,0}=%s", TVMFFIGetTypeAttrColumn(&k) ? "set" : "NULL");
}
CASE(attr_column_null_ptr) { P("col=%s", TVMFFIGetTypeAttrColumn(NULL) ? "set" : "NULL"); }
CASE(attr_null_value_ptr) {
  TVMFFIByteArray n = ba("cdiff_attr7");
  pr_rc("NULL value", TVMFFITypeRegisterAttr(65, &n, NULL));
}
CASE(attr_builtin_columns) {
  static const char* names[] = {"__ffi_repr__", "__s_equal__", "__s_hash__", "__ffi_convert__",
                                "__any_hash__", "__any_equal__", "__data_to_json__",
                                "__ffi_shallow_copy__", "__s_visit__", "__ffi_init__"};
  int32_t idx[] = {64, 65, 69, 70, 71, 72, 75, 76, 78};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    TVMFFIByteArray k = ba(names[i]);
    const TVMFFITypeAttrColumn* c = TVMFFIGetTypeAttrColumn(&k);
    if (!c) {
      P("%s NULL", names[i]);
      continue;
    }
    for (size_t j = 0; j < sizeof(idx) / sizeof(idx[0]); j++) {
      int32_t t = idx[j];
      int present = t >= c->begin_index && t < c->begin_index + c->size &&
                    c->data[t - c->begin_index].type_index != kTVMFFINone;
      P("%s[%d] present=%d type=%d", names[i], t, present,
        present ? c->data[t - c->begin_index].type_index : 0);
    }
  }
}
