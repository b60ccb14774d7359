/*
 * test_string.c: String/Bytes encodings (spec §4.2) and
 * TVMFFIAnyViewToOwnedAny (spec §1.2).
 */
#include <stdlib.h>

#include "tffi_test.h"

/* Fill an Any with garbage so that we see whether the library writes every byte. */
static TVMFFIAny garbage_any(void) {
  TVMFFIAny a;
  memset(&a, 0xAA, sizeof(a));
  return a;
}

/* Check the exact 16 bytes of a small string/bytes Any. */
static void check_small_encoding(const TVMFFIAny* a, int32_t type_index, const char* data,
                                 size_t len) {
  const unsigned char* raw = (const unsigned char*)a;
  size_t i;
  int32_t ti;
  uint32_t slen;
  memcpy(&ti, raw, 4);
  memcpy(&slen, raw + 4, 4);
  CHECK_EQ(ti, type_index);
  CHECK_EQ(slen, len);
  CHECK_BYTES_N(raw + 8, len, data, len);
  for (i = 8 + len; i < 16; ++i) {
    if (raw[i] != 0) {
      tffi_fail(__FILE__, __LINE__, "small str/bytes of length %zu: byte %zu is 0x%02x, not 0", len,
                i, raw[i]);
    }
  }
}

/* Check a heap Str/Bytes in the in-place form: data at obj+40, NUL after. */
static void check_heap_inplace(const TVMFFIAny* a, int32_t type_index, const char* data,
                               size_t len) {
  void* obj;
  const TVMFFIByteArray* cell;
  REQUIRE_EQ(a->type_index, type_index);
  CHECK_EQ(a->zero_padding, 0);
  obj = a->v_obj;
  REQUIRE(obj != NULL);
  CHECK_EQ(tffi_type_index(obj), type_index);
  CHECK_EQ_HEX(tffi_refcount(obj), 0x0000000100000001ULL);
  cell = (const TVMFFIByteArray*)tffi_cell(obj);
  CHECK_EQ(cell->size, len);
  CHECK_PTR_EQ(cell->data, (char*)obj + 40);
  REQUIRE(cell->data != NULL);
  CHECK(memcmp(cell->data, data, len) == 0);
  CHECK_EQ(cell->data[len], '\0');
}

TEST(string_small_encoding_all_lengths) {
  const char* full = "abcdefg";
  size_t len;
  for (len = 0; len <= 7; ++len) {
    char buf[8];
    TVMFFIByteArray ba;
    TVMFFIAny out = garbage_any();
    memcpy(buf, full, len);
    buf[len] = '\0';
    ba.data = buf;
    ba.size = len;
    REQUIRE_OK(TVMFFIStringFromByteArray(&ba, &out));
    check_small_encoding(&out, kTVMFFISmallStr, buf, len);
  }
}

TEST(string_small_encoding_examples) {
  /* The examples from spec §4.2. */
  TVMFFIByteArray ba = tffi_ba("abcdef");
  TVMFFIAny out = garbage_any();
  REQUIRE_OK(TVMFFIStringFromByteArray(&ba, &out));
  CHECK_EQ_HEX(out.v_uint64, 0x0000666564636261ULL);
  ba = tffi_ba("abcdefg");
  out = garbage_any();
  REQUIRE_OK(TVMFFIStringFromByteArray(&ba, &out));
  CHECK_EQ_HEX(out.v_uint64, 0x0067666564636261ULL);
}

TEST(string_heap_encoding) {
  static const char* cases[] = {"abcdefgh", "a somewhat longer string of text",
                                "0123456789012345678901234567890123456789012345678901234567890123"
                                "4567890123456789"};
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    TVMFFIByteArray ba = tffi_ba(cases[i]);
    TVMFFIAny out = garbage_any();
    REQUIRE_OK(TVMFFIStringFromByteArray(&ba, &out));
    check_heap_inplace(&out, kTVMFFIStr, cases[i], strlen(cases[i]));
    tffi_any_release(&out);
  }
}

TEST(string_with_embedded_nul) {
  static const char data[] = {'a', '\0', 'b', '\0', 'c', 'd', 'e', 'f', 'g', 'h'};
  TVMFFIByteArray ba;
  TVMFFIAny out = garbage_any();
  ba.data = data;
  ba.size = 3;
  REQUIRE_OK(TVMFFIStringFromByteArray(&ba, &out));
  check_small_encoding(&out, kTVMFFISmallStr, data, 3);
  ba.size = sizeof(data);
  out = garbage_any();
  REQUIRE_OK(TVMFFIStringFromByteArray(&ba, &out));
  check_heap_inplace(&out, kTVMFFIStr, data, sizeof(data));
  tffi_any_release(&out);
}

TEST(bytes_small_and_heap_encoding) {
  static const char data[] = {'\x01', '\xff', '\0', 'x', '\x80', 'y', 'z', 'w', 'v',
                              'u',    't',    's',  'r', 'q',    'p', 'o', 'n'};
  size_t len;
  for (len = 0; len <= sizeof(data); ++len) {
    TVMFFIByteArray ba;
    TVMFFIAny out = garbage_any();
    ba.data = data;
    ba.size = len;
    REQUIRE_OK(TVMFFIBytesFromByteArray(&ba, &out));
    if (len <= 7) {
      check_small_encoding(&out, kTVMFFISmallBytes, data, len);
    } else {
      check_heap_inplace(&out, kTVMFFIBytes, data, len);
      tffi_any_release(&out);
    }
  }
}

/* ---- TVMFFIAnyViewToOwnedAny ---------------------------------------------- */

TEST(any_view_to_owned_raw_str) {
  TVMFFIAny view = tffi_raw_str("hi");
  TVMFFIAny out = garbage_any();
  REQUIRE_OK(TVMFFIAnyViewToOwnedAny(&view, &out));
  check_small_encoding(&out, kTVMFFISmallStr, "hi", 2);

  view = tffi_raw_str("a raw C string that is long");
  out = garbage_any();
  REQUIRE_OK(TVMFFIAnyViewToOwnedAny(&view, &out));
  REQUIRE_EQ(out.type_index, kTVMFFIStr);
  CHECK_ANY_STR(&out, "a raw C string that is long");
  {
    const TVMFFIByteArray* cell = (const TVMFFIByteArray*)tffi_cell(out.v_obj);
    CHECK(cell->data != view.v_c_str); /* a copy, not a view */
    CHECK_EQ(cell->data[cell->size], '\0');
  }
  CHECK_EQ_HEX(tffi_refcount(out.v_obj), 0x0000000100000001ULL);
  tffi_any_release(&out);
}

TEST(any_view_to_owned_byte_array_ptr) {
  TVMFFIByteArray small = tffi_ba("xyz");
  TVMFFIByteArray big = tffi_ba("bytes that are not small");
  TVMFFIAny view = tffi_none();
  TVMFFIAny out = garbage_any();
  view.type_index = kTVMFFIByteArrayPtr;
  view.v_ptr = &small;
  REQUIRE_OK(TVMFFIAnyViewToOwnedAny(&view, &out));
  check_small_encoding(&out, kTVMFFISmallBytes, "xyz", 3);

  view.v_ptr = &big;
  out = garbage_any();
  REQUIRE_OK(TVMFFIAnyViewToOwnedAny(&view, &out));
  REQUIRE_EQ(out.type_index, kTVMFFIBytes);
  {
    TVMFFIByteArray got;
    REQUIRE(tffi_any_string_view(&out, &got, 1));
    CHECK_BYTES(got.data, got.size, "bytes that are not small");
    CHECK(got.data != big.data);
  }
  tffi_any_release(&out);
}

TEST(any_view_to_owned_rvalue_ref_moves) {
  TVMFFIAny str = tffi_make_string("an object to be moved out");
  void* slot;
  TVMFFIAny view = tffi_none();
  TVMFFIAny out = garbage_any();
  REQUIRE_EQ(str.type_index, kTVMFFIStr);
  slot = str.v_obj;
  view.type_index = kTVMFFIObjectRValueRef;
  view.v_ptr = &slot;
  REQUIRE_OK(TVMFFIAnyViewToOwnedAny(&view, &out));
  CHECK(slot == NULL); /* moved out of the caller's slot */
  CHECK_EQ(out.type_index, kTVMFFIStr);
  CHECK_PTR_EQ(out.v_obj, str.v_obj);
  /* Moved, not copied: still exactly one strong reference. */
  CHECK_EQ_HEX(tffi_refcount(str.v_obj), 0x0000000100000001ULL);
  if (slot != NULL) {
    TVMFFIObjectDecRef(slot); /* a non-moving implementation added a ref */
  }
  tffi_any_release(&out);
}

static int noop_safe_call(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* rv) {
  return 0;
}

TEST(any_view_to_owned_object_increfs) {
  TVMFFIAny str = tffi_make_string("shared string object");
  void* f = NULL;
  TVMFFIAny view, out;
  REQUIRE_EQ(str.type_index, kTVMFFIStr);
  view = tffi_obj_view(str.v_obj);
  out = garbage_any();
  REQUIRE_OK(TVMFFIAnyViewToOwnedAny(&view, &out));
  CHECK_EQ(out.type_index, kTVMFFIStr);
  CHECK_PTR_EQ(out.v_obj, str.v_obj);
  CHECK_EQ(out.zero_padding, 0);
  CHECK_EQ_HEX(tffi_refcount(str.v_obj), 0x0000000100000002ULL);
  tffi_any_release(&out);
  CHECK_EQ_HEX(tffi_refcount(str.v_obj), 0x0000000100000001ULL);
  tffi_any_release(&str);

  REQUIRE_OK(TVMFFIFunctionCreate(NULL, noop_safe_call, NULL, &f));
  view = tffi_obj_view(f);
  out = garbage_any();
  REQUIRE_OK(TVMFFIAnyViewToOwnedAny(&view, &out));
  CHECK_EQ(out.type_index, kTVMFFIFunction);
  CHECK_PTR_EQ(out.v_obj, f);
  CHECK_EQ_HEX(tffi_refcount(f), 0x0000000100000002ULL);
  tffi_any_release(&out);
  CHECK_OK(TVMFFIObjectDecRef(f));
}

TEST(any_view_to_owned_pod_copied) {
  DLTensor t;
  TVMFFIAny views[9];
  int i;
  memset(&t, 0, sizeof(t));
  views[0] = tffi_none();
  views[1] = tffi_int(-1234567890123LL);
  views[2] = tffi_bool(1);
  views[3] = tffi_float(3.25);
  views[4] = tffi_opaque_ptr(&t);
  views[5] = tffi_none();
  views[5].type_index = kTVMFFIDataType;
  views[5].v_dtype.code = kDLFloat;
  views[5].v_dtype.bits = 16;
  views[5].v_dtype.lanes = 4;
  views[6] = tffi_none();
  views[6].type_index = kTVMFFIDevice;
  views[6].v_device.device_type = kDLCUDA;
  views[6].v_device.device_id = 3;
  views[7] = tffi_none();
  views[7].type_index = kTVMFFIDLTensorPtr;
  views[7].v_ptr = &t;
  /* A SmallStr view is already owned-compatible. */
  views[8] = tffi_make_string("tiny");
  for (i = 0; i < 9; ++i) {
    TVMFFIAny out = garbage_any();
    if (!CHECK_OK(TVMFFIAnyViewToOwnedAny(&views[i], &out))) continue;
    if (memcmp(&out, &views[i], sizeof(TVMFFIAny)) != 0) {
      tffi_fail(__FILE__, __LINE__, "POD view with type_index %d not copied bitwise",
                views[i].type_index);
    }
  }
}
