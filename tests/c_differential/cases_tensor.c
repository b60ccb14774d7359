/* cases_tensor.c: DLPack import/export, unsafe views, env tensor allocation */
#include "common.h"

static int g_del_legacy, g_del_versioned;
static void del_legacy(DLManagedTensor* m) {
  g_del_legacy++;
  free(m);
}
static void del_versioned(DLManagedTensorVersioned* m) {
  g_del_versioned++;
  free(m);
}

static double g_buf[4096] __attribute__((aligned(256)));

typedef struct {
  int ndim;
  int64_t shape[8];
  int64_t strides[8];
  int has_shape, has_strides;
  uint8_t code, bits;
  uint16_t lanes;
  int dev_type, dev_id;
  uint64_t byte_offset;
  int data_off; /* offset in bytes from the aligned buffer; -1: NULL */
  int align, contig;
} TSpec;

static void fill_dl(DLTensor* t, TSpec* s) {
  memset(t, 0, sizeof(*t));
  if (s->data_off == -2) {
    /* smallest offset >= 1 that makes data aligned to s->align (deterministic across runs) */
    int off = 1;
    while (((uintptr_t)g_buf + (uintptr_t)off) % (uintptr_t)s->align != 0) off++;
    s->data_off = off;
  } else if (s->data_off == -3) {
    int off = 1;
    while (((uintptr_t)g_buf + (uintptr_t)off) % (uintptr_t)s->align == 0) off++;
    s->data_off = off;
  }
  t->data = s->data_off < 0 ? NULL : (void*)((char*)g_buf + s->data_off);
  t->device.device_type = (DLDeviceType)s->dev_type;
  t->device.device_id = s->dev_id;
  t->ndim = s->ndim;
  t->dtype.code = s->code;
  t->dtype.bits = s->bits;
  t->dtype.lanes = s->lanes;
  t->shape = s->has_shape ? s->shape : NULL;
  t->strides = s->has_strides ? s->strides : NULL;
  t->byte_offset = s->byte_offset;
}

static void roundtrip_out(void* t) {
  DLManagedTensor* m = NULL;
  int rc = TVMFFITensorToDLPack(t, &m);
  pr_rc("to_legacy", rc);
  if (rc == 0 && m) {
    pr_dltensor("legacy", &m->dl_tensor);
    P("legacy data_same=%d", m->dl_tensor.data == ((DLTensor*)((char*)t + sizeof(TVMFFIObject)))->data);
    if (m->deleter) m->deleter(m);
  }
  DLManagedTensorVersioned* v = NULL;
  rc = TVMFFITensorToDLPackVersioned(t, &v);
  pr_rc("to_versioned", rc);
  if (rc == 0 && v) {
    pr_dltensor("versioned", &v->dl_tensor);
    P("versioned version=%u.%u flags=%llu", v->version.major, v->version.minor,
      (unsigned long long)v->flags);
    if (v->deleter) v->deleter(v);
  }
}

static void from_legacy(const char* what, TSpec* s) {
  DLManagedTensor* m = (DLManagedTensor*)calloc(1, sizeof(DLManagedTensor));
  fill_dl(&m->dl_tensor, s);
  m->deleter = del_legacy;
  int before = g_del_legacy;
  void* out = (void*)0x1;
  int rc = TVMFFITensorFromDLPack(m, s->align, s->contig, &out);
  pr_rc(what, rc);
  P("deleter calls after import=%d", g_del_legacy);
  if (rc == 0) {
    pr_tensor("t", out);
    P("t data_same=%d", ((DLTensor*)((char*)out + sizeof(TVMFFIObject)))->data == m->dl_tensor.data);
    roundtrip_out(out);
    TVMFFIObjectDecRef(out);
    P("deleter calls after release=%d", g_del_legacy);
  } else {
    P("out=%s", out == (void*)0x1 ? "untouched" : (out ? "set" : "NULL"));
  }
  if (g_del_legacy == before) free(m);
}

static void from_versioned(const char* what, TSpec* s, uint32_t major, uint32_t minor,
                           uint64_t flags) {
  DLManagedTensorVersioned* m = (DLManagedTensorVersioned*)calloc(1, sizeof(*m));
  fill_dl(&m->dl_tensor, s);
  m->version.major = major;
  m->version.minor = minor;
  m->flags = flags;
  m->deleter = del_versioned;
  int before = g_del_versioned;
  void* out = (void*)0x1;
  int rc = TVMFFITensorFromDLPackVersioned(m, s->align, s->contig, &out);
  pr_rc(what, rc);
  P("deleter calls after import=%d", g_del_versioned);
  if (rc == 0) {
    pr_tensor("t", out);
    roundtrip_out(out);
    TVMFFIObjectDecRef(out);
    P("deleter calls after release=%d", g_del_versioned);
  } else {
    P("out=%s", out == (void*)0x1 ? "untouched" : (out ? "set" : "NULL"));
  }
  if (g_del_versioned == before) free(m);
}

static TSpec base_spec(void) {
  TSpec s;
  memset(&s, 0, sizeof(s));
  s.ndim = 2;
  s.shape[0] = 2;
  s.shape[1] = 3;
  s.strides[0] = 3;
  s.strides[1] = 1;
  s.has_shape = 1;
  s.has_strides = 1;
  s.code = kDLFloat;
  s.bits = 32;
  s.lanes = 1;
  s.dev_type = kDLCPU;
  s.align = 0;
  s.contig = 0;
  return s;
}

#define DLCASE(name) \
  static void dl_spec_##name(TSpec* s); \
  CASE(dl_##name) { TSpec s = base_spec(); dl_spec_##name(&s); from_legacy(#name, &s); } \
  CASE(dlv_##name) { TSpec s = base_spec(); dl_spec_##name(&s); from_versioned(#name, &s, 1, 3, 0); } \
  static void dl_spec_##name(TSpec* s)

DLCASE(plain) { (void)s; }
DLCASE(ndim0_shape_null) {
  s->ndim = 0;
  s->has_shape = 0;
  s->has_strides = 0;
}
DLCASE(ndim0_shape_nonnull) {
  s->ndim = 0;
}
DLCASE(ndim_neg1) {
  s->ndim = -1;
  s->has_shape = 0;
  s->has_strides = 0;
}
DLCASE(ndim_neg1_contig) {
  s->ndim = -1;
  s->has_shape = 0;
  s->has_strides = 0;
  s->contig = 1;
  s->align = 64;
}
DLCASE(ndim1_shape_null) {
  s->ndim = 1;
  s->has_shape = 0;
  s->has_strides = 0;
}
DLCASE(strides_null) { s->has_strides = 0; }
DLCASE(strides_null_contig_align) {
  s->has_strides = 0;
  s->contig = 1;
  s->align = 64;
}
DLCASE(zero_size_strides_null) {
  s->shape[0] = 0;
  s->has_strides = 0;
  s->contig = 1;
}
DLCASE(zero_size_weird_strides_contig) {
  s->shape[0] = 0;
  s->strides[0] = -7;
  s->strides[1] = 1000;
  s->contig = 1;
}
DLCASE(huge_shape_overflow) {
  s->shape[0] = (int64_t)1 << 40;
  s->shape[1] = (int64_t)1 << 40;
  s->has_strides = 0;
}
DLCASE(huge_shape_overflow_contig) {
  s->shape[0] = (int64_t)1 << 40;
  s->shape[1] = (int64_t)1 << 40;
  s->strides[0] = (int64_t)1 << 40;
  s->strides[1] = 1;
  s->contig = 1;
}
DLCASE(negative_shape) {
  s->shape[0] = -1;
  s->has_strides = 0;
}
DLCASE(negative_shape_contig) {
  s->shape[0] = -1;
  s->contig = 1;
}
DLCASE(negative_strides_contig) {
  s->strides[0] = -3;
  s->contig = 1;
}
DLCASE(noncontig_contig) {
  s->strides[0] = 1;
  s->strides[1] = 2;
  s->contig = 1;
}
DLCASE(size1_dim_any_stride_contig) {
  s->shape[0] = 1;
  s->strides[0] = 999;
  s->shape[1] = 4;
  s->contig = 1;
}
DLCASE(all_size1_zero_strides_contig) {
  s->shape[0] = 1;
  s->shape[1] = 1;
  s->strides[0] = 0;
  s->strides[1] = 0;
  s->contig = 1;
}
DLCASE(unaligned_data_align64) {
  s->data_off = 1;
  s->align = 64;
}
DLCASE(unaligned_data_align0) {
  s->data_off = 1;
  s->align = 0;
}
DLCASE(byte_offset_unaligned_align64) {
  s->byte_offset = 1;
  s->align = 64;
}
DLCASE(byte_offset_aligned_align64) {
  s->byte_offset = 64;
  s->align = 64;
}
DLCASE(align_minus1) {
  s->data_off = 8;
  s->align = -1;
}
DLCASE(align_3_aligned) {
  s->align = 3;
  s->data_off = -2;
}
DLCASE(align_3_unaligned) {
  s->align = 3;
  s->data_off = -3;
}
DLCASE(align_6_aligned) {
  s->align = 6;
  s->data_off = -2;
}
DLCASE(align_1g) {
  s->align = 1 << 30;
}
DLCASE(data_null_align64) {
  s->data_off = -1;
  s->align = 64;
}
DLCASE(data_null_zero_size) {
  s->data_off = -1;
  s->shape[0] = 0;
  s->align = 64;
  s->contig = 1;
}
DLCASE(dtype_bits0) { s->bits = 0; }
DLCASE(dtype_lanes0) { s->lanes = 0; }
DLCASE(dtype_lanes4) {
  s->lanes = 4;
  s->contig = 1;
}
DLCASE(dtype_code255) { s->code = 255; }
DLCASE(dtype_bool_bits1) {
  s->code = kDLBool;
  s->bits = 1;
  s->contig = 1;
}
DLCASE(dtype_float4_odd_shape) {
  s->code = 17;
  s->bits = 4;
  s->shape[1] = 3;
  s->contig = 1;
  s->align = 16;
}
DLCASE(dtype_bits_12) {
  s->code = kDLInt;
  s->bits = 12;
  s->contig = 1;
}
DLCASE(device_cuda_unaligned) {
  s->dev_type = kDLCUDA;
  s->data_off = 4;
  s->align = 64;
}
DLCASE(device_weird) {
  s->dev_type = 999;
  s->dev_id = -1;
  s->align = 64;
}
DLCASE(device_type0) { s->dev_type = 0; }
DLCASE(ndim_8_strides_null) {
  s->ndim = 8;
  for (int i = 0; i < 8; i++) s->shape[i] = 2;
  s->has_strides = 0;
  s->contig = 1;
}
DLCASE(ndim_large) {
  /* ndim 100000 with a big shape array */
  s->ndim = 100000;
  s->has_shape = 0;
  s->has_strides = 0;
}

/* hand-built: large ndim with real arrays */
CASE(dl_ndim_100000_real) {
  int nd = 100000;
  int64_t* shape = (int64_t*)malloc(sizeof(int64_t) * (size_t)nd);
  for (int i = 0; i < nd; i++) shape[i] = 1;
  DLManagedTensor* m = (DLManagedTensor*)calloc(1, sizeof(*m));
  m->dl_tensor.data = g_buf;
  m->dl_tensor.device.device_type = kDLCPU;
  m->dl_tensor.ndim = nd;
  m->dl_tensor.dtype.code = kDLFloat;
  m->dl_tensor.dtype.bits = 32;
  m->dl_tensor.dtype.lanes = 1;
  m->dl_tensor.shape = shape;
  m->deleter = del_legacy;
  void* out = NULL;
  int rc = TVMFFITensorFromDLPack(m, 0, 1, &out);
  pr_rc("ndim 100000", rc);
  if (rc == 0) {
    DLTensor* t = (DLTensor*)((char*)out + sizeof(TVMFFIObject));
    P("ndim=%d strides_set=%d last_stride=%lld", t->ndim, t->strides != NULL,
      t->strides ? (long long)t->strides[nd - 1] : -1LL);
    TVMFFIObjectDecRef(out);
  }
  P("deleter=%d", g_del_legacy);
  free(shape);
}

CASE(dlv_version_major0) {
  TSpec s = base_spec();
  from_versioned("major 0", &s, 0, 0, 0);
}
CASE(dlv_version_major2) {
  TSpec s = base_spec();
  from_versioned("major 2", &s, 2, 0, 0);
}
CASE(dlv_version_minor99) {
  TSpec s = base_spec();
  from_versioned("minor 99", &s, 1, 99, 0);
}
CASE(dlv_flags_readonly) {
  TSpec s = base_spec();
  from_versioned("read-only", &s, 1, 3, DLPACK_FLAG_BITMASK_READ_ONLY);
}
CASE(dlv_flags_all) {
  TSpec s = base_spec();
  from_versioned("flags ~0", &s, 1, 3, ~0ULL);
}
CASE(dl_deleter_null) {
  TSpec s = base_spec();
  DLManagedTensor m;
  memset(&m, 0, sizeof(m));
  fill_dl(&m.dl_tensor, &s);
  m.deleter = NULL;
  void* out = NULL;
  int rc = TVMFFITensorFromDLPack(&m, 0, 0, &out);
  pr_rc("deleter NULL", rc);
  if (rc == 0) {
    roundtrip_out(out);
    pr_rc("decref", TVMFFIObjectDecRef(out));
  }
}
CASE(dlv_deleter_null) {
  TSpec s = base_spec();
  DLManagedTensorVersioned m;
  memset(&m, 0, sizeof(m));
  fill_dl(&m.dl_tensor, &s);
  m.version.major = 1;
  m.deleter = NULL;
  void* out = NULL;
  int rc = TVMFFITensorFromDLPackVersioned(&m, 0, 0, &out);
  pr_rc("deleter NULL", rc);
  if (rc == 0) pr_rc("decref", TVMFFIObjectDecRef(out));
}
CASE(dl_from_null) {
  void* out = NULL;
  pr_rc("from NULL", TVMFFITensorFromDLPack(NULL, 0, 0, &out));
}
CASE(dlv_from_null) {
  void* out = NULL;
  pr_rc("from NULL", TVMFFITensorFromDLPackVersioned(NULL, 0, 0, &out));
}
CASE(dl_to_dlpack_non_tensor) {
  void* s = make_str_obj("this is a string, not a tensor!");
  DLManagedTensor* m = NULL;
  pr_rc("to_legacy(Str)", TVMFFITensorToDLPack(s, &m));
  TVMFFIObjectDecRef(s);
}
CASE(dl_to_dlpack_null) {
  DLManagedTensor* m = NULL;
  pr_rc("to_legacy(NULL)", TVMFFITensorToDLPack(NULL, &m));
}
CASE(dl_export_deleter_twice_order) {
  /* export legacy, drop tensor first, then call the exported deleter */
  TSpec s = base_spec();
  DLManagedTensor* m = (DLManagedTensor*)calloc(1, sizeof(*m));
  fill_dl(&m->dl_tensor, &s);
  m->deleter = del_legacy;
  void* t = NULL;
  TVMFFITensorFromDLPack(m, 0, 0, &t);
  DLManagedTensor* e1 = NULL;
  DLManagedTensorVersioned* e2 = NULL;
  TVMFFITensorToDLPack(t, &e1);
  TVMFFITensorToDLPackVersioned(t, &e2);
  P("strong=%u", strong_count(t));
  TVMFFIObjectDecRef(t);
  P("orig deleter=%d", g_del_legacy);
  e1->deleter(e1);
  P("orig deleter=%d", g_del_legacy);
  pr_dltensor("e2 still valid", &e2->dl_tensor);
  e2->deleter(e2);
  P("orig deleter=%d", g_del_legacy);
}
CASE(dl_reimport_exported) {
  /* import what we exported: chain of producers */
  TSpec s = base_spec();
  DLManagedTensor* m = (DLManagedTensor*)calloc(1, sizeof(*m));
  fill_dl(&m->dl_tensor, &s);
  m->deleter = del_legacy;
  void* t = NULL;
  TVMFFITensorFromDLPack(m, 0, 0, &t);
  DLManagedTensorVersioned* e = NULL;
  TVMFFITensorToDLPackVersioned(t, &e);
  void* t2 = NULL;
  pr_rc("reimport", TVMFFITensorFromDLPackVersioned(e, 64, 1, &t2));
  TVMFFIObjectDecRef(t);
  P("orig deleter=%d", g_del_legacy);
  if (t2) {
    pr_tensor("t2", t2);
    TVMFFIObjectDecRef(t2);
  }
  P("orig deleter=%d", g_del_legacy);
}

/* ---------------- TensorCreateUnsafeView ---------------- */
static void* mk_src(void) {
  TSpec s = base_spec();
  DLManagedTensor* m = (DLManagedTensor*)calloc(1, sizeof(*m));
  fill_dl(&m->dl_tensor, &s);
  m->deleter = del_legacy;
  void* t = NULL;
  TVMFFITensorFromDLPack(m, 0, 0, &t);
  return t;
}
static void view_case(const char* what, DLTensor* proto) {
  void* src = mk_src();
  void* v = (void*)0x1;
  int rc = TVMFFITensorCreateUnsafeView(src, proto, &v);
  pr_rc(what, rc);
  if (rc == 0) {
    pr_tensor("view", v);
    P("src strong=%u", strong_count(src));
    roundtrip_out(v);
    TVMFFIObjectDecRef(v);
  }
  TVMFFIObjectDecRef(src);
  P("deleter=%d", g_del_legacy);
}
CASE(view_ndim0) {
  DLTensor p = cpu_dl(g_buf, 0, NULL, kDLInt, 8);
  view_case("ndim0", &p);
}
CASE(view_strides_null) {
  int64_t shape[3] = {2, 0, 5};
  DLTensor p = cpu_dl((char*)g_buf + 3, 3, shape, kDLFloat, 16);
  p.byte_offset = 5;
  view_case("strides NULL", &p);
}
CASE(view_ndim_negative) {
  DLTensor p = cpu_dl(g_buf, -2, NULL, kDLFloat, 32);
  view_case("ndim -2", &p);
}
CASE(view_odd_dtype_device) {
  int64_t shape[1] = {4}, strides[1] = {-1};
  DLTensor p;
  memset(&p, 0, sizeof(p));
  p.data = g_buf;
  p.device.device_type = (DLDeviceType)77;
  p.device.device_id = 5;
  p.ndim = 1;
  p.shape = shape;
  p.strides = strides;
  p.dtype.code = 200;
  p.dtype.bits = 0;
  p.dtype.lanes = 0;
  view_case("odd", &p);
}
CASE(view_source_not_tensor) {
  void* s = make_str_obj("string as a view source, not a tensor");
  int64_t shape[1] = {4};
  DLTensor p = cpu_dl(g_buf, 1, shape, kDLFloat, 32);
  void* v = NULL;
  int rc = TVMFFITensorCreateUnsafeView(s, &p, &v);
  pr_rc("view of Str", rc);
  if (rc == 0) {
    P("strong=%u", strong_count(s));
    TVMFFIObjectDecRef(v);
  }
  TVMFFIObjectDecRef(s);
}
CASE(view_source_null) {
  int64_t shape[1] = {4};
  DLTensor p = cpu_dl(g_buf, 1, shape, kDLFloat, 32);
  void* v = NULL;
  int rc = TVMFFITensorCreateUnsafeView(NULL, &p, &v);
  pr_rc("view of NULL", rc);
  if (rc == 0) {
    pr_tensor("v", v);
    TVMFFIObjectDecRef(v);
  }
}
CASE(view_prototype_null) {
  void* src = mk_src();
  void* v = NULL;
  pr_rc("proto NULL", TVMFFITensorCreateUnsafeView(src, NULL, &v));
  TVMFFIObjectDecRef(src);
}
CASE(view_ndim_positive_shape_null) {
  DLTensor p = cpu_dl(g_buf, 2, NULL, kDLFloat, 32);
  view_case("ndim 2 shape NULL", &p);
}

/* ---------------- EnvTensorAlloc ---------------- */
static int g_alloc_mode;
static int g_alloc_deleted;
typedef struct {
  DLManagedTensorVersioned m;
  int64_t shape[8];
  int64_t strides[8];
} Box;
static void box_del(DLManagedTensorVersioned* m) {
  g_alloc_deleted++;
  free(m->dl_tensor.data);
  free(m);
}
static int my_alloc(DLTensor* proto, DLManagedTensorVersioned** out, void* ctx,
                    void (*SetError)(void*, const char*, const char*)) {
  P("  allocator: proto ndim=%d dtype=(%u,%u,%u) shape=%s", proto->ndim, proto->dtype.code,
    proto->dtype.bits, proto->dtype.lanes, proto->shape ? "set" : "NULL");
  if (g_alloc_mode == 1) {
    SetError(ctx, "MyAllocError", "allocator refused \xff");
    return -1;
  }
  if (g_alloc_mode == 2) return -1;
  if (g_alloc_mode == 3) {
    *out = NULL;
    return 0;
  }
  Box* b = (Box*)calloc(1, sizeof(Box));
  int nd = proto->ndim < 0 ? 0 : (proto->ndim > 8 ? 8 : proto->ndim);
  b->m.version.major = 1;
  b->m.version.minor = 3;
  b->m.dl_tensor = *proto;
  b->m.dl_tensor.data = malloc(64);
  for (int i = 0; i < nd; i++) b->shape[i] = proto->shape ? proto->shape[i] : 1;
  b->m.dl_tensor.shape = nd ? b->shape : NULL;
  if (g_alloc_mode == 4) {
    /* wrong shape and strides supplied */
    b->m.dl_tensor.ndim = 1;
    b->shape[0] = 999;
    b->strides[0] = 7;
    b->m.dl_tensor.shape = b->shape;
    b->m.dl_tensor.strides = b->strides;
  } else {
    b->m.dl_tensor.strides = NULL;
  }
  b->m.deleter = box_del;
  *out = &b->m;
  return 0;
}
static void env_alloc_case(int mode, DLTensor* proto, int set) {
  g_alloc_mode = mode;
  if (set) pr_rc("set allocator", TVMFFIEnvSetDLPackManagedTensorAllocator(my_alloc, 0, NULL));
  void* out = (void*)0x1;
  int rc = TVMFFIEnvTensorAlloc(proto, &out);
  pr_rc("alloc", rc);
  if (rc == 0) {
    pr_tensor("t", out);
    TVMFFIObjectDecRef(out);
    P("deleted=%d", g_alloc_deleted);
  } else {
    P("out=%s", out == (void*)0x1 ? "untouched" : (out ? "set" : "NULL"));
  }
}
static DLTensor proto2(int64_t* shape) {
  shape[0] = 2;
  shape[1] = 3;
  return cpu_dl(NULL, 2, shape, kDLFloat, 32);
}
CASE(envalloc_default_allocator_state) {
  DLPackManagedTensorAllocator a = TVMFFIEnvGetDLPackManagedTensorAllocator();
  P("default allocator=%s", a ? "set" : "NULL");
}
CASE(envalloc_no_allocator) {
  int64_t sh[2];
  DLTensor p = proto2(sh);
  env_alloc_case(0, &p, 0);
}
CASE(envalloc_ok) {
  int64_t sh[2];
  DLTensor p = proto2(sh);
  env_alloc_case(0, &p, 1);
}
CASE(envalloc_ndim0) {
  int64_t sh[2];
  DLTensor p = proto2(sh);
  p.ndim = 0;
  p.shape = NULL;
  env_alloc_case(0, &p, 1);
}
CASE(envalloc_zero_size_odd_dtype) {
  int64_t sh[2];
  DLTensor p = proto2(sh);
  sh[0] = 0;
  p.dtype.bits = 0;
  p.dtype.lanes = 0;
  p.dtype.code = 99;
  env_alloc_case(0, &p, 1);
}
CASE(envalloc_fail_with_error) {
  int64_t sh[2];
  DLTensor p = proto2(sh);
  env_alloc_case(1, &p, 1);
}
CASE(envalloc_fail_without_error) {
  int64_t sh[2];
  DLTensor p = proto2(sh);
  env_alloc_case(2, &p, 1);
}
CASE(envalloc_ok_but_null_out) {
  int64_t sh[2];
  DLTensor p = proto2(sh);
  env_alloc_case(3, &p, 1);
}
CASE(envalloc_output_mismatch) {
  int64_t sh[2];
  DLTensor p = proto2(sh);
  env_alloc_case(4, &p, 1);
}
CASE(envalloc_proto_null) { env_alloc_case(0, NULL, 1); }
CASE(envalloc_set_null_global_and_restore) {
  DLPackManagedTensorAllocator orig = (DLPackManagedTensorAllocator)0x1;
  pr_rc("set my (global)", TVMFFIEnvSetDLPackManagedTensorAllocator(my_alloc, 1, &orig));
  P("orig=%s", orig == NULL ? "NULL" : (orig == (DLPackManagedTensorAllocator)0x1 ? "untouched" : "set"));
  P("get is mine=%d", TVMFFIEnvGetDLPackManagedTensorAllocator() == my_alloc);
  pr_rc("set NULL (tls only)", TVMFFIEnvSetDLPackManagedTensorAllocator(NULL, 0, &orig));
  P("orig is mine=%d", orig == my_alloc);
  DLPackManagedTensorAllocator g = TVMFFIEnvGetDLPackManagedTensorAllocator();
  P("get after tls NULL=%s", g == my_alloc ? "mine" : (g ? "other" : "NULL"));
  pr_rc("set NULL (global)", TVMFFIEnvSetDLPackManagedTensorAllocator(NULL, 1, NULL));
  g = TVMFFIEnvGetDLPackManagedTensorAllocator();
  P("get after global NULL=%s", g == my_alloc ? "mine" : (g ? "other" : "NULL"));
  pr_rc("set write_to_global=7", TVMFFIEnvSetDLPackManagedTensorAllocator(my_alloc, 7, NULL));
  g = TVMFFIEnvGetDLPackManagedTensorAllocator();
  P("get=%s", g == my_alloc ? "mine" : (g ? "other" : "NULL"));
}
