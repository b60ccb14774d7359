/*
 * test_dlpack.c: TVMFFITensorFromDLPack[Versioned], TVMFFITensorToDLPack[Versioned]
 * and TVMFFITensorCreateUnsafeView (spec §1.2, §2.4 Tensor, §7.1, §7.2).
 *
 * Producers are test-owned structs whose deleters only count calls, so the
 * ownership hand-over is observable: on success the Tensor owns the managed
 * tensor and calls its deleter exactly once when it dies; on failure the
 * library must not call it.
 */
#include <stdalign.h>

#include "tffi_test.h"

typedef struct {
  DLManagedTensor mt;
  DLManagedTensorVersioned mtv;
  int64_t shape[3];
  int64_t strides[3];
  alignas(64) float data[32];
  int deleter_calls;
  int versioned_deleter_calls;
} Producer;

static void legacy_deleter(DLManagedTensor* self) {
  ++((Producer*)self->manager_ctx)->deleter_calls;
}
static void versioned_deleter(DLManagedTensorVersioned* self) {
  ++((Producer*)self->manager_ctx)->versioned_deleter_calls;
}

/* A float32 CPU tensor of shape {2,3,4}; compact strides unless told otherwise. */
static void producer_init(Producer* p, int with_strides) {
  DLTensor t;
  memset(p, 0, sizeof(*p));
  p->shape[0] = 2;
  p->shape[1] = 3;
  p->shape[2] = 4;
  p->strides[0] = 12;
  p->strides[1] = 4;
  p->strides[2] = 1;
  memset(&t, 0, sizeof(t));
  t.data = p->data;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = 3;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = p->shape;
  t.strides = with_strides ? p->strides : NULL;
  t.byte_offset = 0;
  p->mt.dl_tensor = t;
  p->mt.manager_ctx = p;
  p->mt.deleter = legacy_deleter;
  p->mtv.version.major = DLPACK_MAJOR_VERSION;
  p->mtv.version.minor = DLPACK_MINOR_VERSION;
  p->mtv.manager_ctx = p;
  p->mtv.deleter = versioned_deleter;
  p->mtv.flags = 0;
  p->mtv.dl_tensor = t;
}

static DLTensor* tensor_dl(void* tensor) { return (DLTensor*)tffi_cell(tensor); }

TEST(dlpack_from_legacy_takes_ownership) {
  Producer p;
  void* t = NULL;
  DLTensor* dl;
  producer_init(&p, 1);
  REQUIRE_OK(TVMFFITensorFromDLPack(&p.mt, 0, 0, &t));
  REQUIRE(t != NULL);
  CHECK_EQ(tffi_type_index(t), kTVMFFITensor);
  CHECK_EQ_HEX(tffi_refcount(t), 0x0000000100000001ULL);
  CHECK_EQ(p.deleter_calls, 0);
  dl = tensor_dl(t);
  /* The DLTensor is copied bitwise. */
  CHECK_PTR_EQ(dl->data, p.data);
  CHECK_EQ(dl->device.device_type, kDLCPU);
  CHECK_EQ(dl->device.device_id, 0);
  CHECK_EQ(dl->ndim, 3);
  CHECK_EQ(dl->dtype.code, kDLFloat);
  CHECK_EQ(dl->dtype.bits, 32);
  CHECK_EQ(dl->dtype.lanes, 1);
  CHECK_PTR_EQ(dl->shape, p.shape);
  CHECK_PTR_EQ(dl->strides, p.strides);
  CHECK_EQ(dl->byte_offset, 0);

  CHECK_OK(TVMFFIObjectIncRef(t));
  CHECK_OK(TVMFFIObjectDecRef(t));
  CHECK_EQ(p.deleter_calls, 0);
  CHECK_OK(TVMFFIObjectDecRef(t));
  CHECK_EQ(p.deleter_calls, 1);
}

TEST(dlpack_from_legacy_synthesises_strides) {
  Producer p;
  void* t = NULL;
  DLTensor* dl;
  producer_init(&p, 0);
  REQUIRE_OK(TVMFFITensorFromDLPack(&p.mt, 0, 1, &t));
  dl = tensor_dl(t);
  CHECK_PTR_EQ(dl->shape, p.shape);
  REQUIRE(dl->strides != NULL);
  CHECK_EQ(dl->strides[0], 12);
  CHECK_EQ(dl->strides[1], 4);
  CHECK_EQ(dl->strides[2], 1);
  /* The producer's struct is not modified. */
  CHECK(p.mt.dl_tensor.strides == NULL);
  CHECK_OK(TVMFFIObjectDecRef(t));
  CHECK_EQ(p.deleter_calls, 1);
}

TEST(dlpack_from_legacy_scalar) {
  Producer p;
  void* t = NULL;
  producer_init(&p, 0);
  p.mt.dl_tensor.ndim = 0;
  REQUIRE_OK(TVMFFITensorFromDLPack(&p.mt, 16, 1, &t));
  CHECK_EQ(tensor_dl(t)->ndim, 0);
  CHECK_OK(TVMFFIObjectDecRef(t));
  CHECK_EQ(p.deleter_calls, 1);
}

TEST(dlpack_require_alignment) {
  Producer p;
  void* t = NULL;
  /* Misaligned data pointer. */
  producer_init(&p, 1);
  p.mt.dl_tensor.data = (char*)p.data + 4;
  CHECK_RAISES(TVMFFITensorFromDLPack(&p.mt, 64, 0, &t), "RuntimeError", "aligned");
  CHECK_EQ(p.deleter_calls, 0); /* ownership not taken on failure */
  /* Aligned pointer but misaligned byte_offset (CPU is direct-address). */
  producer_init(&p, 1);
  p.mt.dl_tensor.byte_offset = 8;
  CHECK_RAISES(TVMFFITensorFromDLPack(&p.mt, 64, 0, &t), "RuntimeError", "aligned");
  CHECK_EQ(p.deleter_calls, 0);
  /* data + byte_offset aligned: accepted. */
  producer_init(&p, 1);
  p.mt.dl_tensor.data = (char*)p.data + 32;
  p.mt.dl_tensor.byte_offset = 32;
  if (CHECK_OK(TVMFFITensorFromDLPack(&p.mt, 64, 0, &t))) {
    CHECK_OK(TVMFFIObjectDecRef(t));
  }
  CHECK_EQ(p.deleter_calls, 1);
  /* No alignment requirement: a misaligned pointer is fine. */
  producer_init(&p, 1);
  p.mt.dl_tensor.data = (char*)p.data + 4;
  if (CHECK_OK(TVMFFITensorFromDLPack(&p.mt, 0, 0, &t))) {
    CHECK_OK(TVMFFIObjectDecRef(t));
  }
  CHECK_EQ(p.deleter_calls, 1);
  /* A negative requirement is refused (the official library reads it as a huge unsigned
   * alignment and raises RuntimeError; anyffi names the argument in a ValueError). */
  producer_init(&p, 1);
  t = NULL;
  CHECK_EQ(TVMFFITensorFromDLPack(&p.mt, -1, 0, &t), -1);
  CHECK(t == NULL);
  {
    void* err = NULL;
    TVMFFIErrorMoveFromRaised(&err);
    CHECK(err != NULL);
    if (err) TVMFFIObjectDecRef(err);
  }
  CHECK_EQ(p.deleter_calls, 0);
}

TEST(dlpack_require_alignment_non_direct_device) {
  /* For devices whose data pointer is an opaque handle only byte_offset counts. */
  Producer p;
  void* t = NULL;
  producer_init(&p, 1);
  p.mt.dl_tensor.device.device_type = kDLVulkan;
  p.mt.dl_tensor.data = (void*)(uintptr_t)0x1001; /* never dereferenced */
  if (CHECK_OK(TVMFFITensorFromDLPack(&p.mt, 64, 0, &t))) {
    CHECK_OK(TVMFFIObjectDecRef(t));
  }
  CHECK_EQ(p.deleter_calls, 1);
  producer_init(&p, 1);
  p.mt.dl_tensor.device.device_type = kDLVulkan;
  p.mt.dl_tensor.byte_offset = 4;
  CHECK_RAISES(TVMFFITensorFromDLPack(&p.mt, 64, 0, &t), "RuntimeError", "aligned");
  CHECK_EQ(p.deleter_calls, 0);
}

/* Device type 0 (no valid DLPack device) counts as direct-address, as every type up to
 * kDLCUDAHost does upstream: the data pointer itself must be aligned. */
TEST(dlpack_require_alignment_device_type_zero) {
  Producer p;
  void* t = NULL;
  producer_init(&p, 1);
  p.mt.dl_tensor.device.device_type = 0;
  p.mt.dl_tensor.data = (void*)(uintptr_t)0x1004; /* never dereferenced */
  CHECK_RAISES(TVMFFITensorFromDLPack(&p.mt, 64, 0, &t), "RuntimeError", "aligned");
  CHECK_EQ(p.deleter_calls, 0);
  producer_init(&p, 1);
  p.mt.dl_tensor.device.device_type = 0;
  p.mt.dl_tensor.data = (void*)(uintptr_t)0x1000;
  if (CHECK_OK(TVMFFITensorFromDLPack(&p.mt, 64, 0, &t))) {
    CHECK_OK(TVMFFIObjectDecRef(t));
  }
  CHECK_EQ(p.deleter_calls, 1);
}

/* A producer without strides: the synthesised strides are the running product of the sizes as
 * they are (numpy's and the official library's), so dimensions left of an empty one get 0. */
TEST(dlpack_synthesised_strides_of_an_empty_tensor) {
  Producer p;
  void* t = NULL;
  producer_init(&p, 0);
  p.shape[1] = 0; /* (the producer's dl_tensor.shape points at p.shape) */
  if (CHECK_OK(TVMFFITensorFromDLPack(&p.mt, 0, 0, &t))) {
    DLTensor* dl = tensor_dl(t);
    REQUIRE(dl->strides != NULL);
    CHECK_EQ(dl->strides[0], 0);
    CHECK_EQ(dl->strides[1], 4);
    CHECK_EQ(dl->strides[2], 1);
    CHECK_OK(TVMFFIObjectDecRef(t));
  }
  CHECK_EQ(p.deleter_calls, 1);
}

/* A versioned import checks alignment and contiguity before the sub-byte flag, worded as upstream. */
TEST(dlpack_versioned_checks_in_order) {
  Producer p;
  void* t = NULL;
  producer_init(&p, 1);
  p.mtv.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  CHECK_RAISES(TVMFFITensorFromDLPackVersioned(&p.mtv, 0, 0, &t), "RuntimeError",
               "Subbyte type padded is not yet supported");
  producer_init(&p, 1);
  p.mtv.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  p.mtv.dl_tensor.byte_offset = 2;
  CHECK_RAISES(TVMFFITensorFromDLPackVersioned(&p.mtv, 4, 0, &t), "RuntimeError",
               "not aligned to 4 bytes");
  CHECK_EQ(p.versioned_deleter_calls, 0); /* a refused import leaves the tensor to the caller */
}

TEST(dlpack_require_contiguous) {
  Producer p;
  void* t = NULL;
  /* Column-major strides are not row-major contiguous. */
  producer_init(&p, 1);
  p.strides[0] = 1;
  p.strides[1] = 2;
  p.strides[2] = 6;
  CHECK_RAISES(TVMFFITensorFromDLPack(&p.mt, 0, 1, &t), "RuntimeError", "contiguous");
  CHECK_EQ(p.deleter_calls, 0);
  /* ... but accepted without the requirement, strides kept as given. */
  if (CHECK_OK(TVMFFITensorFromDLPack(&p.mt, 0, 0, &t))) {
    CHECK_EQ(tensor_dl(t)->strides[2], 6);
    CHECK_OK(TVMFFIObjectDecRef(t));
  }
  CHECK_EQ(p.deleter_calls, 1);
  /* Size-1 dimensions may carry any stride. */
  producer_init(&p, 1);
  p.shape[1] = 1;
  p.strides[0] = 4;
  p.strides[1] = 999;
  p.strides[2] = 1;
  if (CHECK_OK(TVMFFITensorFromDLPack(&p.mt, 0, 1, &t))) CHECK_OK(TVMFFIObjectDecRef(t));
  CHECK_EQ(p.deleter_calls, 1);
  /* A zero-size tensor is trivially contiguous. */
  producer_init(&p, 1);
  p.shape[0] = 0;
  p.strides[0] = 77;
  p.strides[1] = 5;
  if (CHECK_OK(TVMFFITensorFromDLPack(&p.mt, 0, 1, &t))) CHECK_OK(TVMFFIObjectDecRef(t));
  CHECK_EQ(p.deleter_calls, 1);
}

TEST(dlpack_from_versioned_takes_ownership) {
  Producer p;
  void* t = NULL;
  DLTensor* dl;
  producer_init(&p, 0);
  p.mtv.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  REQUIRE_OK(TVMFFITensorFromDLPackVersioned(&p.mtv, 64, 1, &t));
  CHECK_EQ(tffi_type_index(t), kTVMFFITensor);
  dl = tensor_dl(t);
  CHECK_PTR_EQ(dl->data, p.data);
  CHECK_PTR_EQ(dl->shape, p.shape);
  REQUIRE(dl->strides != NULL);
  CHECK_EQ(dl->strides[0], 12);
  CHECK_EQ(dl->strides[1], 4);
  CHECK_EQ(dl->strides[2], 1);
  CHECK_EQ(p.versioned_deleter_calls, 0);
  CHECK_OK(TVMFFIObjectDecRef(t));
  CHECK_EQ(p.versioned_deleter_calls, 1);
  CHECK_EQ(p.deleter_calls, 0);
}

TEST(dlpack_from_versioned_failures_keep_ownership) {
  Producer p;
  void* t = NULL;
  producer_init(&p, 1);
  p.mtv.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  CHECK_RAISES(TVMFFITensorFromDLPackVersioned(&p.mtv, 0, 0, &t), "RuntimeError", NULL);
  CHECK_EQ(p.versioned_deleter_calls, 0);
  producer_init(&p, 1);
  p.mtv.dl_tensor.data = (char*)p.data + 2;
  CHECK_RAISES(TVMFFITensorFromDLPackVersioned(&p.mtv, 16, 0, &t), "RuntimeError", "aligned");
  CHECK_EQ(p.versioned_deleter_calls, 0);
  producer_init(&p, 1);
  p.strides[2] = 2;
  CHECK_RAISES(TVMFFITensorFromDLPackVersioned(&p.mtv, 0, 1, &t), "RuntimeError",
               "contiguous");
  CHECK_EQ(p.versioned_deleter_calls, 0);
}

TEST(dlpack_to_legacy) {
  Producer p;
  void* t = NULL;
  DLManagedTensor* out = NULL;
  producer_init(&p, 0);
  REQUIRE_OK(TVMFFITensorFromDLPack(&p.mt, 0, 0, &t));
  REQUIRE_OK(TVMFFITensorToDLPack(t, &out));
  REQUIRE(out != NULL);
  CHECK(out != &p.mt);
  CHECK_PTR_EQ(out->manager_ctx, t);
  CHECK(out->deleter != NULL);
  CHECK_EQ(tffi_strong(t), 2); /* the managed tensor holds a reference */
  CHECK(memcmp(&out->dl_tensor, tensor_dl(t), sizeof(DLTensor)) == 0);
  out->deleter(out);
  CHECK_EQ(tffi_strong(t), 1);
  CHECK_EQ(p.deleter_calls, 0);
  CHECK_OK(TVMFFIObjectDecRef(t));
  CHECK_EQ(p.deleter_calls, 1);
}

TEST(dlpack_to_versioned) {
  Producer p;
  void* t = NULL;
  DLManagedTensorVersioned* out = NULL;
  producer_init(&p, 1);
  REQUIRE_OK(TVMFFITensorFromDLPack(&p.mt, 0, 0, &t));
  REQUIRE_OK(TVMFFITensorToDLPackVersioned(t, &out));
  REQUIRE(out != NULL);
  CHECK_EQ(out->version.major, 1);
  CHECK_EQ(out->version.minor, 3);
  CHECK_EQ_HEX(out->flags, 0);
  CHECK_PTR_EQ(out->manager_ctx, t);
  CHECK(memcmp(&out->dl_tensor, tensor_dl(t), sizeof(DLTensor)) == 0);
  CHECK_EQ(tffi_strong(t), 2);
  REQUIRE(out->deleter != NULL);
  out->deleter(out);
  CHECK_EQ(tffi_strong(t), 1);
  CHECK_OK(TVMFFIObjectDecRef(t));
  CHECK_EQ(p.deleter_calls, 1);
}

TEST(dlpack_round_trip_through_versioned) {
  /* Tensor -> DLManagedTensorVersioned -> Tensor: the second Tensor owns the
   * exported struct and releases the first Tensor when it dies. */
  Producer p;
  void* t1 = NULL;
  void* t2 = NULL;
  DLManagedTensorVersioned* mid = NULL;
  DLManagedTensor* mid_legacy = NULL;
  void* t3 = NULL;
  producer_init(&p, 1);
  REQUIRE_OK(TVMFFITensorFromDLPack(&p.mt, 0, 0, &t1));
  REQUIRE_OK(TVMFFITensorToDLPackVersioned(t1, &mid));
  REQUIRE_OK(TVMFFITensorFromDLPackVersioned(mid, 0, 1, &t2));
  CHECK(t2 != t1);
  CHECK_PTR_EQ(tensor_dl(t2)->data, p.data);
  CHECK_EQ(tensor_dl(t2)->shape[2], 4);
  CHECK_EQ(tffi_strong(t1), 2);
  CHECK_OK(TVMFFIObjectDecRef(t2));
  CHECK_EQ(tffi_strong(t1), 1);
  /* The same through the legacy struct. */
  REQUIRE_OK(TVMFFITensorToDLPack(t1, &mid_legacy));
  REQUIRE_OK(TVMFFITensorFromDLPack(mid_legacy, 0, 0, &t3));
  CHECK_EQ(tffi_strong(t1), 2);
  CHECK_OK(TVMFFIObjectDecRef(t3));
  CHECK_EQ(tffi_strong(t1), 1);
  CHECK_EQ(p.deleter_calls, 0);
  CHECK_OK(TVMFFIObjectDecRef(t1));
  CHECK_EQ(p.deleter_calls, 1);
}

TEST(dlpack_create_unsafe_view) {
  Producer p;
  void* src = NULL;
  void* view = NULL;
  DLTensor proto;
  int64_t vshape[2] = {3, 4};
  int64_t vstrides[2] = {4, 1};
  DLTensor* dl;
  producer_init(&p, 1);
  REQUIRE_OK(TVMFFITensorFromDLPack(&p.mt, 0, 0, &src));
  memset(&proto, 0, sizeof(proto));
  proto.data = (char*)p.data + 48;
  proto.byte_offset = 8;
  proto.device.device_type = kDLCPU;
  proto.ndim = 2;
  proto.dtype.code = kDLFloat;
  proto.dtype.bits = 16;
  proto.dtype.lanes = 2;
  proto.shape = vshape;
  proto.strides = vstrides;
  REQUIRE_OK(TVMFFITensorCreateUnsafeView(src, &proto, &view));
  REQUIRE(view != NULL);
  CHECK_EQ(tffi_type_index(view), kTVMFFITensor);
  CHECK_EQ_HEX(tffi_refcount(view), 0x0000000100000001ULL);
  CHECK_EQ(tffi_strong(src), 2); /* the view keeps its source alive */
  dl = tensor_dl(view);
  CHECK_PTR_EQ(dl->data, proto.data);
  CHECK_EQ(dl->byte_offset, 8);
  CHECK_EQ(dl->ndim, 2);
  CHECK_EQ(dl->dtype.bits, 16);
  CHECK_EQ(dl->dtype.lanes, 2);
  /* Shape and strides are copied into the view, not borrowed. */
  REQUIRE(dl->shape != NULL && dl->strides != NULL);
  CHECK(dl->shape != vshape);
  CHECK(dl->strides != vstrides);
  vshape[0] = 99;
  vstrides[0] = 99;
  CHECK_EQ(dl->shape[0], 3);
  CHECK_EQ(dl->shape[1], 4);
  CHECK_EQ(dl->strides[0], 4);
  CHECK_EQ(dl->strides[1], 1);
  CHECK_OK(TVMFFIObjectDecRef(view));
  CHECK_EQ(tffi_strong(src), 1);
  CHECK_EQ(p.deleter_calls, 0);
  CHECK_OK(TVMFFIObjectDecRef(src));
  CHECK_EQ(p.deleter_calls, 1);
}
