// ops.argmax: one block; each thread scans a strided subset, then warp shuffles and one warp
// merge the candidates. Order: NaN beats every number (the first NaN wins, as torch.max
// propagates NaN); otherwise the larger value; equal values: the lower index (first wins).
// max_val is the element itself (bits copied).

// Does candidate (v, i) beat (bv, bi)? An index < 0 means "no candidate".
__device__ __forceinline__ bool beats(float v, i64 i, float bv, i64 bi) {
    if (i < 0) return false;
    if (bi < 0) return true;
    bool vn = v != v, bn = bv != bv;
    if (vn || bn) return (vn && bn) ? i < bi : vn;
    if (v != bv) return v > bv;
    return i < bi;
}

template <typename T>
__device__ void argmax(i64* out_idx, T* out_val, const T* x, i64 n) {
    __shared__ float sv[32];
    __shared__ i64 si[32];
    float bv = 0.0f;
    i64 bi = -1;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        float v = to_f32(x[i]);
        if (beats(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float v = __shfl_down_sync(0xffffffffu, bv, o);
        i64 i = __shfl_down_sync(0xffffffffu, bi, o);
        if (beats(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
    }
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) {
        sv[w] = bv;
        si[w] = bi;
    }
    __syncthreads();
    if (w == 0) {
        bv = lane < nw ? sv[lane] : 0.0f;
        bi = lane < nw ? si[lane] : -1;
        for (int o = 16; o > 0; o >>= 1) {
            float v = __shfl_down_sync(0xffffffffu, bv, o);
            i64 i = __shfl_down_sync(0xffffffffu, bi, o);
            if (beats(v, i, bv, bi)) {
                bv = v;
                bi = i;
            }
        }
        if (lane == 0) {
            *out_idx = bi;
            *out_val = x[bi];
        }
    }
}

#define ARGMAX(name, T)                                                          \
    extern "C" __global__ void __launch_bounds__(1024) name(i64* out_idx, T* out_val, const T* x, i64 n) { \
        argmax<T>(out_idx, out_val, x, n);                                       \
    }
ARGMAX(argmax_f32, float)
ARGMAX(argmax_f16, f16_t)
ARGMAX(argmax_bf16, bf16_t)
