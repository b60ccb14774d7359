/* cases_dtype.c: TVMFFIDataTypeFromString / TVMFFIDataTypeToString */
#include "common.h"

typedef struct {
  const char* s;
  size_t n; /* 0: strlen */
} DS;
static const DS kStrs[] = {
    {"float32x4", 0}, {"int", 0}, {"bfloat16", 0}, {"e4m3_float8", 0}, {"custom[foo]64", 0},
    {"custom[foo]", 0}, {"custom[]32", 0}, {"custom[1]32x4", 0}, {"custom[129]8", 0},
    {"custom[abc", 0}, {"custom[", 0}, {"custom", 0}, {"custom[x]0", 0}, {"float32x0", 0},
    {"float32x-1", 0}, {"float32x65536", 0}, {"float32x65535", 0}, {"float32x1", 0},
    {"int0", 0}, {"int-8", 0}, {"int999", 0}, {"int256", 0}, {"int255", 0}, {"int65536", 0},
    {"uint1", 0}, {"bool1", 0}, {"bool8", 0}, {"boolx", 0}, {"bool16", 0},
    {"float8_e4m3fnx", 0}, {"float32x4x4", 0}, {"float32 ", 0}, {" float32", 0},
    {"FLOAT32", 0}, {"float32\0junk", 12}, {"handle32", 0}, {"handlex2", 0}, {"handle", 0},
    {"void", 0}, {"voidx4", 0}, {"void8", 0}, {"float16x", 0}, {"xvscale", 0},
    {"float32xvscalex", 0}, {"float32xvscalex0", 0}, {"int8xvscalex65536", 0},
    {"int8xvscalex16384", 0}, {"int8xvscalex16383", 0}, {"float", 0}, {"floatx4", 0},
    {"float4", 0}, {"float6", 0}, {"float8e4m3", 0}, {"float8_e4m3fn_foo", 0}, {"fp8", 0},
    {"f", 0}, {"i", 0}, {"u", 0}, {"b", 0}, {"bf", 0}, {"bf16x2", 0}, {"i64x", 0}, {"u1x8", 0},
    {"e4m3", 0}, {"\xff", 0}, {"int32x4294967297", 0}, {"int4294967304", 0},
    {"int18446744073709551624", 0}, {"uint8x08", 0}, {"int+8", 0}, {"int 8", 0},
    {"float32x+4", 0}, {"", 0}, {"custom[x]", 0}, {"float32\n", 0}, {"complex64", 0},
    {"complex", 0}, {"complex128x2", 0}, {"opaque", 0}, {"Int32", 0}, {"int32x", 0},
    {"x4", 0}, {"float8_e4m3", 0}, {"float8_e4m3x2", 0}, {"float4_e2m1fnx0", 0},
    {"float4_e2m1fn32", 0}, {"float8_e5m2x65535", 0}, {"bfloat", 0}, {"bfloat32", 0},
    {"bfloat8", 0}, {"uint", 0}, {"uint0", 0}, {"int8x1", 0}, {"int08", 0},
    {"int8x0004", 0}, {"float64x2xvscale", 0}, {"int32xvscalex-4", 0}, {"fp16", 0},
    {"fp32", 0}, {"i32x4", 0}, {"u64", 0}, {"f8_e4m3fn", 0}, {"f4_e2m1fn", 0}, {"handle64", 0},
    {"handle0", 0}, {"custom[ffi.String]32", 0}, {"custom[ ]8", 0}, {"custom[-1]8", 0},
    {"float8_e8m0fnu", 0}, {"float6_e3m2fnx4", 0}, {"int1", 0}, {"int2", 0}, {"float1", 0},
    {"float7", 0}, {"float32x00", 0}, {"float32x-0", 0}, {"int32x2147483648", 0},
    {"int2147483656", 0}, {"uint8\xff", 0}, {"float32x4\0", 10},
};

static void case_dt_from(long i) {
  const DS* d = &kStrs[i];
  size_t n = d->n ? d->n : strlen(d->s);
  TVMFFIByteArray b = ban(d->s, n);
  DLDataType dt;
  memset(&dt, 0xEE, sizeof(dt));
  int rc = TVMFFIDataTypeFromString(&b, &dt);
  char* e = esc(d->s, n);
  char what[512];
  snprintf(what, sizeof what, "from %s", e);
  free(e);
  pr_rc(what, rc);
  if (rc == 0) {
    P("dtype=(%u,%u,%u)", dt.code, dt.bits, dt.lanes);
    TVMFFIAny out = a_none();
    int rc2 = TVMFFIDataTypeToString(&dt, &out);
    pr_rc("back to string", rc2);
    if (rc2 == 0) pr_any_release("str", &out);
  }
}
__attribute__((constructor)) static void reg_dt_from(void) {
  for (long i = 0; i < (long)(sizeof(kStrs) / sizeof(kStrs[0])); i++) {
    char* n = (char*)malloc(64);
    snprintf(n, 64, "dtype_from_%03ld", i);
    cf_register(n, case_dt_from, i, NULL);
  }
}
CASE(dtype_from_long_digits) {
  size_t n = 100000;
  char* s = (char*)malloc(n + 8);
  strcpy(s, "int");
  memset(s + 3, '0', n);
  s[n + 3] = '8';
  s[n + 4] = 0;
  TVMFFIByteArray b = ban(s, n + 4);
  DLDataType dt;
  pr_rc("int000...08", TVMFFIDataTypeFromString(&b, &dt));
  free(s);
}
CASE(dtype_from_huge_garbage) {
  size_t n = 1 << 20;
  char* s = (char*)malloc(n);
  memset(s, 'z', n);
  TVMFFIByteArray b = ban(s, n);
  DLDataType dt;
  pr_rc("1MiB garbage", TVMFFIDataTypeFromString(&b, &dt));
  free(s);
}
CASE(dtype_from_null_zero) {
  TVMFFIByteArray b = ban(NULL, 0);
  DLDataType dt;
  memset(&dt, 0xEE, sizeof(dt));
  int rc = TVMFFIDataTypeFromString(&b, &dt);
  pr_rc("{NULL,0}", rc);
  if (rc == 0) P("dtype=(%u,%u,%u)", dt.code, dt.bits, dt.lanes);
}
CASE(dtype_from_null_ptr) {
  DLDataType dt;
  pr_rc("NULL str", TVMFFIDataTypeFromString(NULL, &dt));
}

typedef struct {
  uint8_t code, bits;
  uint16_t lanes;
} DT;
static const DT kDts[] = {
    {0, 0, 1}, {0, 8, 0}, {2, 32, 0}, {2, 32, 65535}, {2, 32, 65532}, {2, 32, 65534},
    {6, 1, 1}, {6, 8, 1}, {6, 8, 4}, {6, 16, 1}, {3, 64, 1}, {3, 0, 0}, {3, 32, 1}, {3, 64, 4},
    {3, 0, 1}, {4, 32, 1}, {4, 16, 2}, {5, 64, 1}, {5, 128, 1}, {5, 32, 1}, {7, 8, 1},
    {7, 16, 1}, {10, 8, 4}, {14, 8, 1}, {15, 6, 1}, {16, 8, 1}, {17, 4, 2}, {17, 8, 1},
    {18, 8, 1}, {19, 8, 1}, {20, 8, 1}, {64, 8, 1}, {127, 8, 1}, {128, 8, 1}, {129, 32, 1},
    {129, 32, 4}, {200, 16, 4}, {255, 8, 1}, {1, 1, 1}, {0, 255, 1}, {2, 8, 1}, {2, 0, 0},
    {1, 0, 0}, {0, 1, 32768}, {2, 64, 32769}, {0, 32, 65528},
};
static void case_dt_to(long i) {
  DLDataType dt;
  dt.code = kDts[i].code;
  dt.bits = kDts[i].bits;
  dt.lanes = kDts[i].lanes;
  TVMFFIAny out;
  memset(&out, 0x5A, sizeof(out));
  char what[64];
  snprintf(what, sizeof what, "to_string(%u,%u,%u)", dt.code, dt.bits, dt.lanes);
  int rc = TVMFFIDataTypeToString(&dt, &out);
  pr_rc(what, rc);
  if (rc == 0) {
    TVMFFIByteArray s;
    if (out.type_index == kTVMFFISmallStr) {
      s = ban(out.v_bytes, out.small_str_len);
    } else if (out.type_index == kTVMFFIStr) {
      s = *(TVMFFIByteArray*)((char*)out.v_obj + sizeof(TVMFFIObject));
    } else {
      s = ban(NULL, 0);
    }
    pr_any("str", &out);
    if (s.data) {
      DLDataType back;
      memset(&back, 0xEE, sizeof(back));
      int rc2 = TVMFFIDataTypeFromString(&s, &back);
      pr_rc("reparse", rc2);
      if (rc2 == 0) P("reparsed=(%u,%u,%u)", back.code, back.bits, back.lanes);
    }
    any_release(&out);
  }
}
__attribute__((constructor)) static void reg_dt_to(void) {
  for (long i = 0; i < (long)(sizeof(kDts) / sizeof(kDts[0])); i++) {
    char* n = (char*)malloc(64);
    snprintf(n, 64, "dtype_to_%u_%u_%u", kDts[i].code, kDts[i].bits, kDts[i].lanes);
    cf_register(n, case_dt_to, i, NULL);
  }
}
CASE(dtype_to_null_dtype) {
  TVMFFIAny out = a_none();
  pr_rc("NULL dtype", TVMFFIDataTypeToString(NULL, &out));
}
