// ops.rope, split halves, following the spec §2.6 recipe as the CPU kernel does: the
// denominator theta^(2j/d) with the exponent (2j as f32) / (d as f32), the power taken in f64
// and rounded to f32 (a correctly rounded powf; CUDA's powf is up to 2 ulp off, which the f32
// tolerance does not allow), phi = (pos as f32) / den in f32 (IEEE division), sin/cos in f32,
// then a*cos - b*sin and b*cos + a*sin without FMA contraction. Grid (token, head); threads over
// the pairs j. In place is safe: each thread reads its pair before writing it.

template <typename T, typename P>
__device__ void rope(T* y, i64 ys0, i64 ys1, const T* x, i64 xs0, i64 xs1, const P* pos, int h,
                     float theta) {
    i64 tok = blockIdx.x, head = blockIdx.y;
    float p = (float)pos[tok];
    T* yr = y + tok * ys0 + head * ys1;
    const T* xr = x + tok * xs0 + head * xs1;
    for (int j = threadIdx.x; j < h; j += blockDim.x) {
        float e = (float)(2 * j) / (float)(2 * h);
        float den = (float)pow((double)theta, (double)e);
        float phi = p / den;
        float s, c;
        sincosf(phi, &s, &c);
        float a = to_f32(xr[j]), b = to_f32(xr[h + j]);
        yr[j] = from_f32<T>(__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
        yr[h + j] = from_f32<T>(__fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)));
    }
}

#define ROPE(name, T, P)                                                                   \
    extern "C" __global__ void __launch_bounds__(256) name(T* y, i64 ys0, i64 ys1, const T* x, i64 xs0, i64 xs1,  \
                                    const P* pos, int h, float theta) {                    \
        rope<T, P>(y, ys0, ys1, x, xs0, xs1, pos, h, theta);                               \
    }
ROPE(rope_f32_i64, float, i64)
ROPE(rope_f16_i64, f16_t, i64)
ROPE(rope_bf16_i64, bf16_t, i64)
ROPE(rope_f32_i32, float, int)
ROPE(rope_f16_i32, f16_t, int)
ROPE(rope_bf16_i32, bf16_t, int)
