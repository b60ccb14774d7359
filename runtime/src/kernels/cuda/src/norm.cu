// ops.rms_norm: one block per row; y = x * (1 / sqrt(mean(x^2) + eps)) * w in f32, rounded once.
// `rows` holds the leading dimensions with out's row strides in st[0] and in's in st[1]; the
// last dimension has unit stride. In place (y == x) is safe: every sum is complete (block_sum
// synchronises) before the first store.

template <typename T, typename W>
__device__ void rms_norm(T* y, const T* x, const W* w, Lay rows, i64 d, float eps) {
    i64 o[3];
    lay_offsets(rows, blockIdx.x, o);
    T* yr = y + o[0];
    const T* xr = x + o[1];
    float ss = 0.0f;
    for (i64 i = threadIdx.x; i < d; i += blockDim.x) {
        float v = to_f32(xr[i]);
        ss += v * v;
    }
    ss = block_sum(ss);  // every thread gets the total, so the branch below is uniform
    float r;
    if (!isfinite(ss) || (ss < 1e-28f && ss / (float)d >= eps * 6e-8f)) {
        // the f32 sum overflowed (|x| past ~1e19) or underflowed while it matters against eps:
        // again in f64, as the CPU kernel does
        double s64 = 0.0;
        for (i64 i = threadIdx.x; i < d; i += blockDim.x) {
            double v = (double)to_f32(xr[i]);
            s64 += v * v;
        }
        s64 = block_sum_f64(s64);
        double r64 = 1.0 / sqrt(s64 / (double)d + (double)eps);
        if (r64 > 3.4028234663852886e38) {
            // 1 / rms past f32 (subnormal rows with eps 0): the whole row in f64; an all-zero
            // row gives NaN (0 * inf), as the reference does
            for (i64 i = threadIdx.x; i < d; i += blockDim.x) {
                yr[i] = from_f32<T>((float)((double)to_f32(xr[i]) * r64 * (double)to_f32(w[i])));
            }
            return;
        }
        r = (float)r64;
    } else {
        r = 1.0f / sqrtf(ss / (float)d + eps);
    }
    for (i64 i = threadIdx.x; i < d; i += blockDim.x) {
        yr[i] = from_f32<T>(to_f32(xr[i]) * r * to_f32(w[i]));
    }
}

#define RMS(name, T, W)                                                                     \
    extern "C" __global__ void __launch_bounds__(256) name(T* y, const T* x, const W* w, Lay rows, i64 d, float eps) { \
        rms_norm<T, W>(y, x, w, rows, d, eps);                                              \
    }
RMS(rms_norm_f32, float, float)
RMS(rms_norm_f16, f16_t, f16_t)
RMS(rms_norm_f16_w32, f16_t, float)
RMS(rms_norm_bf16, bf16_t, bf16_t)
RMS(rms_norm_bf16_w32, bf16_t, float)
