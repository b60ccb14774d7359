/*
 * test_bigint.c: TVMFFIBigIntFromByteArray normalisation and
 * TVMFFIBigIntGetContentByteArray (spec §1.2, §2.4 BigInt).
 */
#include "tffi_test.h"

static int bigint_from_words(const int64_t* words, size_t n, TVMFFIAny* out) {
  TVMFFIByteArray ba;
  ba.data = (const char*)words;
  ba.size = n * sizeof(int64_t);
  memset(out, 0xAA, sizeof(*out));
  return TVMFFIBigIntFromByteArray(&ba, out);
}

/* Check the value normalised to a plain Int. */
static void check_int_result(const int64_t* words, size_t n, int64_t expected) {
  TVMFFIAny out;
  if (!CHECK_OK(bigint_from_words(words, n, &out))) return;
  CHECK_EQ(out.type_index, kTVMFFIInt);
  CHECK_EQ(out.zero_padding, 0);
  CHECK_EQ(out.v_int64, expected);
}

/* Check a BigInt object result with the given minimal words. */
static void check_bigint_result(const int64_t* words, size_t n, const int64_t* expected,
                                size_t expected_n) {
  TVMFFIAny out;
  void* obj;
  TVMFFIByteArray content;
  if (!CHECK_OK(bigint_from_words(words, n, &out))) return;
  REQUIRE_EQ(out.type_index, kTVMFFIBigInt);
  obj = out.v_obj;
  REQUIRE(obj != NULL);
  CHECK_EQ(tffi_type_index(obj), kTVMFFIBigInt);
  CHECK_EQ_HEX(tffi_refcount(obj), 0x0000000100000001ULL);
  /* Layout: size_t nwords at obj+24, words inline from obj+32. */
  CHECK_EQ(*(const size_t*)((char*)obj + 24), expected_n);
  CHECK(memcmp((char*)obj + 32, expected, expected_n * sizeof(int64_t)) == 0);
  content = TVMFFIBigIntGetContentByteArray(&out);
  CHECK_PTR_EQ(content.data, (char*)obj + 32);
  CHECK_EQ(content.size, expected_n * sizeof(int64_t));
  if (content.data != NULL && content.size == expected_n * sizeof(int64_t)) {
    CHECK(memcmp(content.data, expected, content.size) == 0);
  }
  tffi_any_release(&out);
}

TEST(bigint_fits_int64_normalised_to_int) {
  int64_t w1[1] = {42};
  int64_t w2[2] = {5, 0};
  int64_t w3[2] = {-1, -1};
  int64_t w4[3] = {-7, -1, -1};
  int64_t w5[1] = {INT64_MIN};
  int64_t w6[2] = {INT64_MAX, 0};
  int64_t w7[3] = {0, 0, 0};
  check_int_result(w1, 1, 42);
  check_int_result(w2, 2, 5);
  check_int_result(w3, 2, -1);
  check_int_result(w4, 3, -7);
  check_int_result(w5, 1, INT64_MIN);
  check_int_result(w6, 2, INT64_MAX);
  check_int_result(w7, 3, 0);
}

TEST(bigint_empty_is_zero) {
  TVMFFIByteArray ba;
  TVMFFIAny out;
  ba.data = NULL;
  ba.size = 0;
  memset(&out, 0xAA, sizeof(out));
  REQUIRE_OK(TVMFFIBigIntFromByteArray(&ba, &out));
  CHECK_EQ(out.type_index, kTVMFFIInt);
  CHECK_EQ(out.v_int64, 0);
}

TEST(bigint_two_pow_63_needs_two_words) {
  /* 2^63 = {0x8000000000000000, 0}: the sign-guard word must be kept. */
  int64_t w[2] = {INT64_MIN, 0};
  int64_t w_extra[4] = {INT64_MIN, 0, 0, 0};
  check_bigint_result(w, 2, w, 2);
  /* Redundant sign-extension words are dropped. */
  check_bigint_result(w_extra, 4, w, 2);
}

TEST(bigint_negative_and_multiword) {
  /* -2^64 = {0, -1}. */
  int64_t neg[3] = {0, -1, -1};
  int64_t neg_min[2] = {0, -1};
  /* 2^64 + 3 = {3, 1}. */
  int64_t big[2] = {3, 1};
  /* A 3-word value. */
  int64_t three[3] = {1, 2, 3};
  check_bigint_result(neg, 3, neg_min, 2);
  check_bigint_result(big, 2, big, 2);
  check_bigint_result(three, 3, three, 3);
}

TEST(bigint_size_not_multiple_of_8) {
  char data[12] = {0};
  TVMFFIByteArray ba;
  TVMFFIAny out = tffi_none();
  ba.data = data;
  ba.size = 12;
  CHECK_RAISES(TVMFFIBigIntFromByteArray(&ba, &out), "ValueError", "whole 64-bit words");
  ba.size = 3;
  CHECK_RAISES(TVMFFIBigIntFromByteArray(&ba, &out), "ValueError", "whole 64-bit words");
}

TEST(bigint_content_of_plain_int) {
  /* For an Int the content is the Any's own v_int64 word. */
  TVMFFIAny v = tffi_int(-99);
  TVMFFIByteArray content = TVMFFIBigIntGetContentByteArray(&v);
  CHECK_PTR_EQ(content.data, &v.v_int64);
  CHECK_EQ(content.size, 8);
}
