/*
 * test_dtype.c: TVMFFIDataTypeFromString / TVMFFIDataTypeToString (spec §7.4).
 * Results of ToString are string Anys; both SmallStr and Str are accepted.
 */
#include "tffi_test.h"

typedef struct {
  const char* text;
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
  const char* canonical; /* what ToString prints for this dtype */
} DtypeCase;

static const DtypeCase kCases[] = {
    {"int8", 0, 8, 1, "int8"},
    {"int16", 0, 16, 1, "int16"},
    {"int32", 0, 32, 1, "int32"},
    {"int64", 0, 64, 1, "int64"},
    {"uint8", 1, 8, 1, "uint8"},
    {"uint16", 1, 16, 1, "uint16"},
    {"uint32", 1, 32, 1, "uint32"},
    {"uint64", 1, 64, 1, "uint64"},
    {"float16", 2, 16, 1, "float16"},
    {"float32", 2, 32, 1, "float32"},
    {"float64", 2, 64, 1, "float64"},
    {"bfloat16", 4, 16, 1, "bfloat16"},
    {"bool", 6, 8, 1, "bool"},
    {"handle", 3, 64, 1, "handle"},
    {"float8_e3m4", 7, 8, 1, "float8_e3m4"},
    {"float8_e4m3", 8, 8, 1, "float8_e4m3"},
    {"float8_e4m3b11fnuz", 9, 8, 1, "float8_e4m3b11fnuz"},
    {"float8_e4m3fn", 10, 8, 1, "float8_e4m3fn"},
    {"float8_e4m3fnuz", 11, 8, 1, "float8_e4m3fnuz"},
    {"float8_e5m2", 12, 8, 1, "float8_e5m2"},
    {"float8_e5m2fnuz", 13, 8, 1, "float8_e5m2fnuz"},
    {"float8_e8m0fnu", 14, 8, 1, "float8_e8m0fnu"},
    {"float6_e2m3fn", 15, 6, 1, "float6_e2m3fn"},
    {"float6_e3m2fn", 16, 6, 1, "float6_e3m2fn"},
    {"float4_e2m1fn", 17, 4, 1, "float4_e2m1fn"},
    /* lanes */
    {"float4_e2m1fnx2", 17, 4, 2, "float4_e2m1fnx2"},
    {"float32x4", 2, 32, 4, "float32x4"},
    {"int8x16", 0, 8, 16, "int8x16"},
    {"uint1", 1, 1, 1, "uint1"},
    {"boolx4", 6, 8, 4, "boolx4"},
    {"float8_e4m3fnx8", 10, 8, 8, "float8_e4m3fnx8"},
    {"float32xvscalex4", 2, 32, 65532, "float32xvscalex4"},
    /* default bits */
    {"int", 0, 32, 1, "int32"},
    {"uint", 1, 32, 1, "uint32"},
    {"float", 2, 32, 1, "float32"},
    {"bfloat", 4, 16, 1, "bfloat16"},
    {"float8", 2, 8, 1, "float8"}, /* plain float with 8 bits, not a float8_* variant */
    /* aliases */
    {"i32", 0, 32, 1, "int32"},
    {"i8x4", 0, 8, 4, "int8x4"},
    {"u8", 1, 8, 1, "uint8"},
    {"f16", 2, 16, 1, "float16"},
    {"f64", 2, 64, 1, "float64"},
    {"bf16", 4, 16, 1, "bfloat16"},
    {"fp8_e4m3fn", 10, 8, 1, "float8_e4m3fn"},
    {"fp8_e5m2", 12, 8, 1, "float8_e5m2"},
    {"f8_e5m2", 12, 8, 1, "float8_e5m2"},
    {"fp6_e2m3fn", 15, 6, 1, "float6_e2m3fn"},
    {"fp4_e2m1fn", 17, 4, 1, "float4_e2m1fn"},
    /* void */
    {"", 3, 0, 0, ""},
    {"void", 3, 0, 0, ""},
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static int parse(const char* s, DLDataType* out) {
  TVMFFIByteArray ba = tffi_ba(s);
  memset(out, 0xEE, sizeof(*out));
  return TVMFFIDataTypeFromString(&ba, out);
}

TEST(dtype_from_string_table) {
  size_t i;
  for (i = 0; i < NELEM(kCases); ++i) {
    DLDataType dt;
    if (!CHECK_OK(parse(kCases[i].text, &dt))) {
      printf("      (input was \"%s\")\n", kCases[i].text);
      continue;
    }
    if (dt.code != kCases[i].code || dt.bits != kCases[i].bits || dt.lanes != kCases[i].lanes) {
      tffi_fail(__FILE__, __LINE__, "FromString(\"%s\") = (%u,%u,%u), expected (%u,%u,%u)",
                kCases[i].text, dt.code, dt.bits, dt.lanes, kCases[i].code, kCases[i].bits,
                kCases[i].lanes);
    } else {
      tffi_pass();
    }
  }
}

TEST(dtype_from_string_not_nul_terminated) {
  /* The input is (data, size): the parser must not read past size. */
  const char buf[] = "float16x4garbage";
  TVMFFIByteArray ba;
  DLDataType dt;
  ba.data = buf;
  ba.size = 9; /* "float16x4" */
  REQUIRE_OK(TVMFFIDataTypeFromString(&ba, &dt));
  CHECK_EQ(dt.code, 2);
  CHECK_EQ(dt.bits, 16);
  CHECK_EQ(dt.lanes, 4);
  ba.size = 5; /* "float" */
  REQUIRE_OK(TVMFFIDataTypeFromString(&ba, &dt));
  CHECK_EQ(dt.bits, 32);
  CHECK_EQ(dt.lanes, 1);
}

TEST(dtype_to_string_round_trip) {
  size_t i;
  for (i = 0; i < NELEM(kCases); ++i) {
    DLDataType dt, back;
    TVMFFIAny out;
    TVMFFIByteArray view;
    dt.code = kCases[i].code;
    dt.bits = kCases[i].bits;
    dt.lanes = kCases[i].lanes;
    out = tffi_none();
    if (TVMFFIDataTypeToString(&dt, &out) != 0) {
      tffi_fail(__FILE__, __LINE__, "ToString(%u,%u,%u) failed", dt.code, dt.bits, dt.lanes);
      tffi_clear_error();
      continue;
    }
    if (!tffi_any_string_view(&out, &view, 0)) {
      tffi_fail(__FILE__, __LINE__, "ToString(%u,%u,%u) gave type_index %d, not a string",
                dt.code, dt.bits, dt.lanes, out.type_index);
      tffi_any_release(&out);
      continue;
    }
    CHECK_BYTES(view.data, view.size, kCases[i].canonical);
    /* Owned: a heap Str result must have exactly one reference. */
    if (out.type_index == kTVMFFIStr) CHECK_EQ(tffi_strong(out.v_obj), 1);
    /* Parsing the printed form gives the dtype back. */
    if (parse(kCases[i].canonical, &back) != 0) {
      tffi_fail(__FILE__, __LINE__, "re-parse of \"%s\" failed", kCases[i].canonical);
      tffi_clear_error();
    } else {
      CHECK(back.code == dt.code && back.bits == dt.bits && back.lanes == dt.lanes);
    }
    tffi_any_release(&out);
  }
}

TEST(dtype_from_string_invalid) {
  static const char* bad[] = {
      "abc",         "int8x",        "int8x0",          "int8xq",        "float32y",
      "int32 ",      " int32",       "int999",          "int8x70000",    "float8_e9m9",
      "float6_e2m3",  "float4_e2m1fnx",  "fp8_bogus",     "handlex",
      "boolean",     "uint8_t",      "float32x4x4",     "Int32",
  };
  size_t i;
  for (i = 0; i < NELEM(bad); ++i) {
    DLDataType dt;
    int rc = parse(bad[i], &dt);
    if (rc == 0) {
      tffi_fail(__FILE__, __LINE__, "FromString(\"%s\") succeeded with (%u,%u,%u)", bad[i],
                dt.code, dt.bits, dt.lanes);
      continue;
    }
    if (!CHECK_RAISES(rc, "ValueError", NULL)) {
      printf("      (input was \"%s\")\n", bad[i]);
    }
  }
}

TEST(dtype_to_string_invalid_code) {
  DLDataType dt;
  TVMFFIAny out = tffi_none();
  dt.code = 5; /* kDLComplex has no FFI spelling */
  dt.bits = 64;
  dt.lanes = 1;
  CHECK_RAISES(TVMFFIDataTypeToString(&dt, &out), "ValueError", NULL);
  dt.code = 100;
  out = tffi_none();
  CHECK_RAISES(TVMFFIDataTypeToString(&dt, &out), "ValueError", NULL);
}
