// ops.add and ops.swiglu: c = a + b; out = up * (gate / (1 + exp(-gate))) with a = gate, b = up
// (the reference order: up * gate may overflow where the result does not).
// Grid-stride loops over the elements; `contig` = every tensor row-major contiguous, otherwise
// the offsets come from `l` (any strides; c may be exactly a or b). Contiguous tensors whose
// addresses are 16-byte aligned move 16 bytes per load and store (4 f32 or 8 f16/bf16; the
// launcher sizes the grid for that), the tail element by element.

template <int OP> __device__ __forceinline__ float binary_op(float x, float y) {
    return OP == 0 ? x + y : y * (x / (1.0f + expf(-x)));
}

// 16 bytes of elements, loaded and stored as one vector access.
template <typename T> struct alignas(16) Pack16 {
    T e[16 / sizeof(T)];
};

template <typename T, int OP>
__device__ void binary(T* c, const T* a, const T* b, i64 n, const Lay& l, int contig) {
    i64 first = blockIdx.x * (i64)blockDim.x + threadIdx.x, step = (i64)gridDim.x * blockDim.x;
    if (contig && ((((unsigned long long)c | (unsigned long long)a | (unsigned long long)b) & 15u) == 0)) {
        const int V = 16 / sizeof(T);
        i64 nv = n / V;
        for (i64 i = first; i < nv; i += step) {
            Pack16<T> x = ((const Pack16<T>*)a)[i], y = ((const Pack16<T>*)b)[i], r;
            for (int j = 0; j < V; ++j) r.e[j] = from_f32<T>(binary_op<OP>(to_f32(x.e[j]), to_f32(y.e[j])));
            ((Pack16<T>*)c)[i] = r;
        }
        for (i64 i = nv * V + first; i < n; i += step)
            c[i] = from_f32<T>(binary_op<OP>(to_f32(a[i]), to_f32(b[i])));
        return;
    }
    for (i64 i = first; i < n; i += step) {
        i64 o[3] = {i, i, i};
        if (!contig) lay_offsets(l, i, o);
        c[o[0]] = from_f32<T>(binary_op<OP>(to_f32(a[o[1]]), to_f32(b[o[2]])));
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
