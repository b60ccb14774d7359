/*
 * test_object.c: object header, reference counting and the deleter protocol
 * (spec §2.2), opaque objects and the custom allocator slot (spec §1.2, §2.3).
 */
#include <stdlib.h>

#include "tffi_test.h"

#define BOTH_ONE 0x0000000100000001ULL
#define WEAK_ONE 0x0000000100000000ULL

/* ---- objects created by the library ---------------------------------------- */

/* Common refcount sequence on a fresh library object (we own one reference). */
static void check_fresh_refcount(void* obj) {
  CHECK_EQ_HEX(tffi_refcount(obj), BOTH_ONE);
  CHECK_OK(TVMFFIObjectIncRef(obj));
  CHECK_EQ_HEX(tffi_refcount(obj), 0x0000000100000002ULL);
  CHECK_OK(TVMFFIObjectIncRef(obj));
  CHECK_EQ_HEX(tffi_refcount(obj), 0x0000000100000003ULL);
  CHECK_OK(TVMFFIObjectDecRef(obj));
  CHECK_OK(TVMFFIObjectDecRef(obj));
  CHECK_EQ_HEX(tffi_refcount(obj), BOTH_ONE);
  CHECK(((TVMFFIObject*)obj)->deleter != NULL);
}

TEST(refcount_library_string) {
  const char* s = "a string longer than 7";
  TVMFFIByteArray ba = tffi_ba(s);
  TVMFFIAny out = tffi_none();
  REQUIRE_OK(TVMFFIStringFromByteArray(&ba, &out));
  REQUIRE_EQ(out.type_index, kTVMFFIStr);
  CHECK_EQ(tffi_type_index(out.v_obj), kTVMFFIStr);
  check_fresh_refcount(out.v_obj);
  CHECK_OK(TVMFFIObjectDecRef(out.v_obj));
}

TEST(refcount_library_error) {
  TVMFFIByteArray kind = tffi_ba("ValueError"), msg = tffi_ba("m"), bt = tffi_ba("");
  void* err = NULL;
  REQUIRE_OK(TVMFFIErrorCreate(&kind, &msg, &bt, &err));
  REQUIRE(err != NULL);
  CHECK_EQ(tffi_type_index(err), kTVMFFIError);
  check_fresh_refcount(err);
  CHECK_OK(TVMFFIObjectDecRef(err));
}

static int noop_safe_call(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* rv) {
  return 0;
}

TEST(refcount_library_function) {
  void* f = NULL;
  REQUIRE_OK(TVMFFIFunctionCreate(NULL, noop_safe_call, NULL, &f));
  REQUIRE(f != NULL);
  CHECK_EQ(tffi_type_index(f), kTVMFFIFunction);
  check_fresh_refcount(f);
  CHECK_OK(TVMFFIObjectDecRef(f));
}

TEST(decref_null_is_noop) {
  CHECK_EQ(TVMFFIObjectDecRef(NULL), 0);
  CHECK_NO_PENDING_ERROR();
}

/* ---- objects created by the test ---------------------------------------- */

typedef struct {
  TVMFFIObject header;
  int64_t payload;
  /* Deleter log. */
  int num_calls;
  int flags[8];
  void* self_seen[8];
  /* When set, the Strong-flag deleter call drops one weak reference itself
   * (like a destructor releasing a weak pointer to its own object). */
  int drop_weak_in_strong;
} TestObj;

static void test_obj_deleter(void* self, int flags) {
  TestObj* obj = (TestObj*)self;
  if (obj->num_calls < 8) {
    obj->flags[obj->num_calls] = flags;
    obj->self_seen[obj->num_calls] = self;
  }
  ++obj->num_calls;
  if (flags == kTVMFFIObjectDeleterFlagBitMaskStrong && obj->drop_weak_in_strong) {
    __atomic_fetch_sub(&obj->header.combined_ref_count, WEAK_ONE, __ATOMIC_ACQ_REL);
  }
}

static void test_obj_init(TestObj* obj, uint64_t count) {
  memset(obj, 0, sizeof(*obj));
  obj->header.combined_ref_count = count;
  obj->header.type_index = kTVMFFIObject;
  obj->header.deleter = test_obj_deleter;
}

TEST(decref_test_object_both_flag) {
  TestObj obj;
  test_obj_init(&obj, BOTH_ONE);
  CHECK_OK(TVMFFIObjectIncRef(&obj));
  CHECK_EQ_HEX(obj.header.combined_ref_count, 0x0000000100000002ULL);
  CHECK_OK(TVMFFIObjectDecRef(&obj));
  CHECK_EQ(obj.num_calls, 0);
  CHECK_EQ_HEX(obj.header.combined_ref_count, BOTH_ONE);
  CHECK_OK(TVMFFIObjectDecRef(&obj));
  REQUIRE_EQ(obj.num_calls, 1);
  CHECK_EQ(obj.flags[0], kTVMFFIObjectDeleterFlagBitMaskBoth);
  CHECK_PTR_EQ(obj.self_seen[0], &obj);
  /* The count word is not inspected afterwards: a real deleter frees it. */
}

TEST(decref_test_object_many_strong) {
  TestObj obj;
  test_obj_init(&obj, 0x0000000100000003ULL);
  CHECK_OK(TVMFFIObjectDecRef(&obj));
  CHECK_EQ_HEX(obj.header.combined_ref_count, 0x0000000100000002ULL);
  CHECK_EQ(obj.num_calls, 0);
  /* Weak references alone never trigger anything while strong > 1. */
  obj.header.combined_ref_count = 0x0000000500000002ULL;
  CHECK_OK(TVMFFIObjectDecRef(&obj));
  CHECK_EQ_HEX(obj.header.combined_ref_count, 0x0000000500000001ULL);
  CHECK_EQ(obj.num_calls, 0);
}

TEST(decref_test_object_weak_held) {
  /* strong 1, weak 2: the extra weak reference is held by someone else, so
   * DecRef destroys (flag Strong) but must not free (no flag Weak). */
  TestObj obj;
  test_obj_init(&obj, BOTH_ONE + WEAK_ONE);
  CHECK_OK(TVMFFIObjectDecRef(&obj));
  REQUIRE_EQ(obj.num_calls, 1);
  CHECK_EQ(obj.flags[0], kTVMFFIObjectDeleterFlagBitMaskStrong);
  CHECK_PTR_EQ(obj.self_seen[0], &obj);
  /* strong 0, and the weak count lost the one owned by the strong refs. */
  CHECK_EQ_HEX(obj.header.combined_ref_count, WEAK_ONE);
}

TEST(decref_test_object_weak_released_during_destroy) {
  /* strong 1, weak 2, and the Strong-flag deleter releases the other weak
   * reference: the library's own weak release then reaches zero and must call
   * the deleter again with flag Weak. */
  TestObj obj;
  test_obj_init(&obj, BOTH_ONE + WEAK_ONE);
  obj.drop_weak_in_strong = 1;
  CHECK_OK(TVMFFIObjectDecRef(&obj));
  REQUIRE_EQ(obj.num_calls, 2);
  CHECK_EQ(obj.flags[0], kTVMFFIObjectDeleterFlagBitMaskStrong);
  CHECK_EQ(obj.flags[1], kTVMFFIObjectDeleterFlagBitMaskWeak);
  CHECK_PTR_EQ(obj.self_seen[1], &obj);
  CHECK_EQ_HEX(obj.header.combined_ref_count, 0);
}

TEST(decref_test_object_null_deleter) {
  /* A NULL deleter marks a static object that is never freed. */
  TestObj obj;
  test_obj_init(&obj, BOTH_ONE);
  obj.header.deleter = NULL;
  CHECK_OK(TVMFFIObjectDecRef(&obj));
  CHECK_EQ(obj.num_calls, 0);
  CHECK_EQ(obj.header.combined_ref_count & 0xFFFFFFFFu, 0); /* strong count reached 0 */
  CHECK_NO_PENDING_ERROR();
}

TEST(decref_null_deleter_still_drops_the_shared_weak_one) {
  /* As the official DecRef: the weak "1" the strong references share goes with the last of
   * them, deleter or not (a weak reference still holds the block). */
  TestObj obj;
  test_obj_init(&obj, BOTH_ONE + ((uint64_t)1 << 32)); /* strong 1, weak 2 */
  obj.header.deleter = NULL;
  CHECK_OK(TVMFFIObjectDecRef(&obj));
  CHECK_EQ(obj.num_calls, 0);
  CHECK_EQ_HEX(obj.header.combined_ref_count, (uint64_t)1 << 32);
}

/* A chain of C objects deeper than any release queue: each deleter releases its child, whose
 * deleter reads its parent, so every child must be gone when its parent's DecRef returns (ours
 * queued releases past 128 levels, and a child then read its freed parent). */
typedef struct ChainNode {
  TVMFFIObject header;
  struct ChainNode* child;
  struct ChainNode* parent;
  int inside; /* inside its own deleter */
} ChainNode;
static int g_chain_deleted, g_chain_parent_not_inside;
static void chain_deleter(void* self, int flags) {
  ChainNode* n = (ChainNode*)self;
  n->inside = 1;
  if (n->parent != NULL && !n->parent->inside) ++g_chain_parent_not_inside;
  if (n->child != NULL) TVMFFIObjectDecRef(n->child);
  ++g_chain_deleted;
  n->inside = 0;
  if (flags & kTVMFFIObjectDeleterFlagBitMaskWeak) free(n);
}

TEST(decref_deep_chain_of_c_objects_releases_each_child_in_its_parent) {
  enum { N = 400 };
  ChainNode* nodes[N];
  int i;
  g_chain_deleted = g_chain_parent_not_inside = 0;
  for (i = 0; i < N; ++i) {
    nodes[i] = (ChainNode*)calloc(1, sizeof(ChainNode));
    REQUIRE(nodes[i] != NULL);
    nodes[i]->header.combined_ref_count = BOTH_ONE;
    nodes[i]->header.type_index = kTVMFFIObject;
    nodes[i]->header.deleter = chain_deleter;
  }
  for (i = 0; i + 1 < N; ++i) {
    nodes[i]->child = nodes[i + 1];
    nodes[i + 1]->parent = nodes[i];
  }
  CHECK_OK(TVMFFIObjectDecRef(nodes[0]));
  CHECK_EQ(g_chain_deleted, N);
  CHECK_EQ(g_chain_parent_not_inside, 0);
}

static int g_heap_obj_deleter_calls = 0;
static void heap_obj_deleter(void* self, int flags) {
  ++g_heap_obj_deleter_calls;
  if (flags & kTVMFFIObjectDeleterFlagBitMaskWeak) free(self);
}

TEST(decref_heap_test_object_freed_by_deleter) {
  /* A heap object whose deleter frees it: valgrind checks it happens once. */
  typedef struct {
    TVMFFIObject header;
    char data[40];
  } HeapObj;
  HeapObj* obj = (HeapObj*)calloc(1, sizeof(HeapObj));
  g_heap_obj_deleter_calls = 0;
  REQUIRE(obj != NULL);
  obj->header.combined_ref_count = BOTH_ONE;
  obj->header.type_index = kTVMFFIObject;
  obj->header.deleter = heap_obj_deleter;
  CHECK_OK(TVMFFIObjectIncRef(obj));
  CHECK_OK(TVMFFIObjectDecRef(obj));
  CHECK_OK(TVMFFIObjectDecRef(obj));
  CHECK_EQ(g_heap_obj_deleter_calls, 1);
}

/* ---- opaque objects ------------------------------------------------------- */

static int g_opaque_deleter_calls = 0;
static void* g_opaque_deleter_arg = NULL;
static void opaque_deleter(void* handle) {
  ++g_opaque_deleter_calls;
  g_opaque_deleter_arg = handle;
}

TEST(object_create_opaque) {
  int token = 42;
  void* obj = NULL;
  g_opaque_deleter_calls = 0;
  REQUIRE_OK(TVMFFIObjectCreateOpaque(&token, kTVMFFIOpaquePyObject, opaque_deleter, &obj));
  REQUIRE(obj != NULL);
  CHECK_EQ(tffi_type_index(obj), kTVMFFIOpaquePyObject);
  CHECK_EQ_HEX(tffi_refcount(obj), BOTH_ONE);
  CHECK_PTR_EQ(((TVMFFIOpaqueObjectCell*)tffi_cell(obj))->handle, &token);
  CHECK_OK(TVMFFIObjectIncRef(obj));
  CHECK_OK(TVMFFIObjectDecRef(obj));
  CHECK_EQ(g_opaque_deleter_calls, 0);
  CHECK_OK(TVMFFIObjectDecRef(obj));
  CHECK_EQ(g_opaque_deleter_calls, 1);
  CHECK_PTR_EQ(g_opaque_deleter_arg, &token);
}

TEST(object_create_opaque_rejects_other_types) {
  int token = 1;
  void* obj = NULL;
  g_opaque_deleter_calls = 0;
  CHECK_RAISES(TVMFFIObjectCreateOpaque(&token, kTVMFFIObject, opaque_deleter, &obj),
               "RuntimeError", "kTVMFFIOpaquePyObject");
  CHECK_RAISES(TVMFFIObjectCreateOpaque(&token, 200, opaque_deleter, &obj), "RuntimeError",
               NULL);
  CHECK_EQ(g_opaque_deleter_calls, 0);
}

/* ---- custom allocator slot ------------------------------------------------- */

static void* my_allocate(size_t size, size_t align, int32_t type_index, void* ctx) {
  return NULL;
}

TEST(custom_allocator_store_and_restore) {
  TVMFFICustomAllocator* def = TVMFFIGetCustomAllocator();
  TVMFFICustomAllocator mine;
  REQUIRE(def != NULL);
  CHECK(def->allocate != NULL);
  mine.allocate = my_allocate;
  mine.context = &mine;
  CHECK_OK(TVMFFISetCustomAllocator(&mine));
  CHECK_PTR_EQ(TVMFFIGetCustomAllocator(), &mine);
  /* NULL restores the builtin default. */
  CHECK_OK(TVMFFISetCustomAllocator(NULL));
  CHECK_PTR_EQ(TVMFFIGetCustomAllocator(), def);
}

TEST(custom_allocator_builtin_default_allocates) {
  /* The default allocator returns a body preceded by an ObjectAllocHeader
   * whose delete_space(body) releases the block (spec §2.3). */
  TVMFFICustomAllocator* def = TVMFFIGetCustomAllocator();
  void* body;
  TVMFFIObjectAllocHeader* hdr;
  REQUIRE(def != NULL && def->allocate != NULL);
  body = def->allocate(64, 8, kTVMFFIObject, def->context);
  REQUIRE(body != NULL);
  CHECK_EQ((uintptr_t)body % 8, 0);
  memset(body, 0x5A, 64); /* the whole body is writable */
  hdr = (TVMFFIObjectAllocHeader*)body - 1;
  REQUIRE(hdr->delete_space != NULL);
  hdr->delete_space(body);
}

/* Ours: the builtin allocator aligns the body to any power of two (the official one returns
 * a block 16 bytes past malloc's for 32 and 64), and raises an error before returning NULL. */
TEST(custom_allocator_builtin_default_alignments) {
  TVMFFICustomAllocator* def = TVMFFIGetCustomAllocator();
  static const size_t aligns[] = {1, 8, 16, 32, 64, 256, 4096};
  size_t i;
  if (!tffi_is_anyffi()) SKIP("the official allocator misaligns above 16 bytes");
  REQUIRE(def != NULL && def->allocate != NULL);
  for (i = 0; i < sizeof(aligns) / sizeof(aligns[0]); ++i) {
    void* body = def->allocate(48, aligns[i], kTVMFFIObject, def->context);
    REQUIRE(body != NULL);
    CHECK_EQ((uintptr_t)body % aligns[i], 0);
    memset(body, 0x5A, 48);
    ((TVMFFIObjectAllocHeader*)body - 1)->delete_space(body);
  }
  CHECK(def->allocate(48, 24, kTVMFFIObject, def->context) == NULL);
  CHECK_RAISES(-1, "ValueError", "not a power of two");
  CHECK(def->allocate((size_t)-8, 16, kTVMFFIObject, def->context) == NULL);
  CHECK_RAISES(-1, "MemoryError", NULL);
}
