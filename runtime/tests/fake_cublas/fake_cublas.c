/* A stand-in for libcublas with the five functions anyffi calls, computing the GEMMs on host
 * memory in f32 exactly as cuBLAS defines them (column-major, op(A) and op(B), alpha and beta
 * read through host pointers, beta == 0 does not read C). runtime/tests/cublas_abi.rs loads it
 * through ANYFFI_CUBLAS_LIBRARY to check how the library marshals its calls (argument order,
 * leading dimensions, strides, enum values) without a GPU. Only f32 (CUDA_R_32F = 0) with
 * CUBLAS_COMPUTE_32F (68) and CUBLAS_GEMM_DEFAULT (-1) are accepted. */
#include <stddef.h>
#include <stdint.h>

static int g_calls_set_stream;
static void* g_last_stream;

int anyffi_fake_cublas_set_stream_calls(void) { return g_calls_set_stream; }
void* anyffi_fake_cublas_last_stream(void) { return g_last_stream; }

int cublasCreate_v2(void** handle) {
  *handle = (void*)0x5eed;
  return 0;
}

int cublasSetStream_v2(void* handle, void* stream) {
  if (handle != (void*)0x5eed) return 7; /* CUBLAS_STATUS_INVALID_VALUE */
  ++g_calls_set_stream;
  g_last_stream = stream;
  return 0;
}

const char* cublasGetStatusString(int status) {
  return status == 7 ? "CUBLAS_STATUS_INVALID_VALUE (fake)" : "fake status";
}

static float at(const float* x, int trans, int64_t ld, int64_t r, int64_t c) {
  return trans ? x[c + r * ld] : x[r + c * ld];
}

static int gemm1(int ta, int tb, int m, int n, int k, const float* alpha, const float* a,
                 int lda, const float* b, int ldb, const float* beta, float* c, int ldc) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      float s = 0;
      for (int64_t p = 0; p < k; ++p) s += at(a, ta, lda, i, p) * at(b, tb, ldb, p, j);
      float old = *beta == 0 ? 0 : *beta * c[i + j * ldc];
      c[i + j * ldc] = *alpha * s + old;
    }
  return 0;
}

static int check(void* h, int ta, int tb, int at_, int bt, int ct, int compute, int algo) {
  if (h != (void*)0x5eed || (ta != 0 && ta != 1) || (tb != 0 && tb != 1)) return 7;
  if (at_ != 0 || bt != 0 || ct != 0 || compute != 68 || algo != -1) return 7;
  return 0;
}

int cublasGemmEx(void* h, int ta, int tb, int m, int n, int k, const void* alpha, const void* a,
                 int at_, int lda, const void* b, int bt, int ldb, const void* beta, void* c,
                 int ct, int ldc, int compute, int algo) {
  int rc = check(h, ta, tb, at_, bt, ct, compute, algo);
  if (rc) return rc;
  return gemm1(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

int cublasGemmStridedBatchedEx(void* h, int ta, int tb, int m, int n, int k, const void* alpha,
                               const void* a, int at_, int lda, long long sa, const void* b,
                               int bt, int ldb, long long sb, const void* beta, void* c, int ct,
                               int ldc, long long sc, int batch, int compute, int algo) {
  int rc = check(h, ta, tb, at_, bt, ct, compute, algo);
  if (rc) return rc;
  for (int q = 0; q < batch; ++q)
    gemm1(ta, tb, m, n, k, alpha, (const float*)a + q * sa, lda, (const float*)b + q * sb, ldb,
          beta, (float*)c + q * sc, ldc);
  return 0;
}
