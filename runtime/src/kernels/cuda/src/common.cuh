// Shared by every kernel source: nvrtc.rs puts this text in front of each .cu file. It needs no
// CUDA header (NVRTC runs with no include path): element types, conversions and reductions are
// spelled out here.
//
// f16/bf16 values travel as 16-bit payloads; every kernel widens them to f32, computes in f32 and
// rounds once on store with round-to-nearest-even (f16 by the PTX cvt.rn instruction, bf16 by
// the bit recipe the `half` crate uses, NaN kept quiet), as the CPU kernels do.

typedef unsigned short u16;
typedef long long i64;

struct f16_t {
    u16 b;
};
struct bf16_t {
    u16 b;
};

__device__ __forceinline__ float to_f32(float x) { return x; }
// ANYFFI_EMU: the host emulation in tests/cuda/emu supplies the two f16 conversions.
__device__ __forceinline__ float to_f32(f16_t x) {
#ifdef ANYFFI_EMU
    return emu_f16_to_f32(x.b);
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.b));
    return f;
#endif
}
__device__ __forceinline__ float to_f32(bf16_t x) {
    return __uint_as_float(((unsigned)x.b) << 16);
}

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ f16_t from_f32<f16_t>(float x) {
    f16_t r;
#ifdef ANYFFI_EMU
    r.b = emu_f32_to_f16(x);
#else
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.b) : "f"(x));
#endif
    return r;
}
template <> __device__ __forceinline__ bf16_t from_f32<bf16_t>(float x) {
    unsigned u = __float_as_uint(x);
    bf16_t r;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        r.b = (u16)((u >> 16) | 0x40u);
        return r;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    r.b = (u16)(u >> 16);
    return r;
}

#define NEG_INF (-__int_as_float(0x7f800000))

// The dynamic shared memory array of a kernel (the host emulation defines its own).
#ifndef DYNAMIC_SHARED
#define DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#endif

// Every kernel declares the most threads per block its launcher uses (__launch_bounds__: 256,
// argmax 1024, attention ATT_THREADS), so the compiler keeps registers within what such a block
// may have.

// Up to 8 dimensions, element strides of up to 3 tensors (mirrors `Lay` in mod.rs).
#define MAX_DIMS 8
struct Lay {
    int nd;
    int pad;
    i64 shape[MAX_DIMS];
    i64 st[3][MAX_DIMS];
};

// Element offsets, in each of the 3 tensors, of the row-major linear index `idx`.
__device__ __forceinline__ void lay_offsets(const Lay& l, i64 idx, i64* o) {
    o[0] = 0;
    o[1] = 0;
    o[2] = 0;
    for (int d = l.nd - 1; d >= 0; --d) {
        i64 n = l.shape[d];
        i64 i = idx % n;
        idx /= n;
        o[0] += i * l.st[0][d];
        o[1] += i * l.st[1][d];
        o[2] += i * l.st[2][d];
    }
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Block-wide sum / max (blockDim.x a multiple of 32, at most 1024); every thread gets the
// result. Contains __syncthreads, so every thread of the block must call it.
__device__ float block_sum(float v) {
    __shared__ float part[32];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) part[w] = v;
    __syncthreads();
    v = lane < nw ? part[lane] : 0.0f;
    v = warp_sum(v);
    __syncthreads();
    return v;
}
// Sum in f64 over the block, for the rare rows whose f32 sum overflows or underflows.
__device__ double block_sum_f64(double v) {
    __shared__ double part[32];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) part[w] = v;
    __syncthreads();
    v = lane < nw ? part[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    return v;
}
__device__ float block_max(float v) {
    __shared__ float part[32];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    if (lane == 0) part[w] = v;
    __syncthreads();
    v = lane < nw ? part[lane] : NEG_INF;
    v = warp_max(v);
    __syncthreads();
    return v;
}
