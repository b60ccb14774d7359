// ops.add and ops.swiglu: c = a + b; out = up * (gate / (1 + exp(-gate))) with a = gate, b = up
// (the reference order: up * gate may overflow where the result does not).
// Grid-stride loop over the elements; `contig` = every tensor row-major contiguous, otherwise
// the offsets come from `l` (any strides; c may be exactly a or b).

template <typename T, int OP>
__device__ void binary(T* c, const T* a, const T* b, i64 n, const Lay& l, int contig) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        i64 o[3] = {i, i, i};
        if (!contig) lay_offsets(l, i, o);
        float x = to_f32(a[o[1]]), y = to_f32(b[o[2]]);
        float r = OP == 0 ? x + y : y * (x / (1.0f + expf(-x)));
        c[o[0]] = from_f32<T>(r);
    }
}

#define BINARY(name, T, OP)                                                                  \
    extern "C" __global__ void __launch_bounds__(256) name(T* c, const T* a, const T* b, i64 n, Lay l, int contig) { \
        binary<T, OP>(c, a, b, n, l, contig);                                                \
    }
BINARY(add_f32, float, 0)
BINARY(add_f16, f16_t, 0)
BINARY(add_bf16, bf16_t, 0)
BINARY(swiglu_f32, float, 1)
BINARY(swiglu_f16, f16_t, 1)
BINARY(swiglu_bf16, bf16_t, 1)

// ops.linear's bias: y[r, :] = bias for m rows of n elements at row stride ys (elements), moved
// by element size; the GEMM then runs with beta = 1 (bias added in f32, rounded once).
template <typename E>
__device__ void bias_rows(E* y, i64 ys, const E* bias, i64 m, i64 n) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < m * n;
         i += (i64)gridDim.x * blockDim.x) {
        i64 r = i / n, j = i % n;
        y[r * ys + j] = bias[j];
    }
}
extern "C" __global__ void __launch_bounds__(256) bias_rows_2(u16* y, i64 ys, const u16* b, i64 m, i64 n) {
    bias_rows<u16>(y, ys, b, m, n);
}
extern "C" __global__ void __launch_bounds__(256) bias_rows_4(unsigned* y, i64 ys, const unsigned* b, i64 m, i64 n) {
    bias_rows<unsigned>(y, ys, b, m, n);
}
