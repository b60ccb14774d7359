// Host emulation of the little of CUDA our kernels use, so their logic (indexing, reductions,
// online softmax, tie rules) runs on a CPU: each block's threads are real threads (one block at
// a time, so `__shared__` statics are that block's shared memory), __syncthreads is a barrier
// over the block, warp shuffles exchange through per-warp slots between two warp barriers.
// Math comes from the host libm, so results match the GPU only within rounding.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#define ANYFFI_EMU 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static

struct emu_dim3 {
    unsigned x = 0, y = 0, z = 0;
};
inline thread_local emu_dim3 threadIdx, blockIdx;
inline emu_dim3 blockDim, gridDim;

inline std::unique_ptr<std::barrier<>> emu_block_bar;
inline std::vector<std::unique_ptr<std::barrier<>>> emu_warp_bar;
inline float emu_slot_f[32][32];
inline long long emu_slot_l[32][32];
inline double emu_slot_d[32][32];
inline std::vector<unsigned char> emu_dynamic_shared;

#define DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(emu_dynamic_shared.data())

inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }

template <typename T> inline T (&emu_slots())[32][32];
template <> inline float (&emu_slots<float>())[32][32] { return emu_slot_f; }
template <> inline long long (&emu_slots<long long>())[32][32] { return emu_slot_l; }
template <> inline double (&emu_slots<double>())[32][32] { return emu_slot_d; }

template <typename T> inline T emu_shfl(T v, int src) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    auto& s = emu_slots<T>();
    s[w][lane] = v;
    emu_warp_bar[w]->arrive_and_wait();
    T r = (src >= 0 && src < 32) ? s[w][src] : v;
    emu_warp_bar[w]->arrive_and_wait();
    return r;
}
inline float __shfl_xor_sync(unsigned, float v, int o) { return emu_shfl(v, (int)(threadIdx.x & 31) ^ o); }
inline double __shfl_xor_sync(unsigned, double v, int o) { return emu_shfl(v, (int)(threadIdx.x & 31) ^ o); }
inline float __shfl_down_sync(unsigned, float v, int o) { return emu_shfl(v, (int)(threadIdx.x & 31) + o); }
inline long long __shfl_down_sync(unsigned, long long v, int o) {
    return emu_shfl(v, (int)(threadIdx.x & 31) + o);
}

inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline float __int_as_float(int u) { float f; std::memcpy(&f, &u, 4); return f; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
using std::min;
using std::isfinite;

inline float emu_f16_to_f32(unsigned short b) { _Float16 h; std::memcpy(&h, &b, 2); return (float)h; }
inline unsigned short emu_f32_to_f16(float f) {
    _Float16 h = (_Float16)f;
    unsigned short b;
    std::memcpy(&b, &h, 2);
    return b;
}

// Runs `kernel` over grid (gx, gy) with `threads` threads per block (a multiple of 32).
inline void emu_launch(unsigned gx, unsigned gy, unsigned threads, size_t shmem,
                       const std::function<void()>& kernel) {
    gridDim = {gx, gy, 1};
    blockDim = {threads, 1, 1};
    emu_dynamic_shared.assign(shmem + 16, 0xFF);
    for (unsigned by = 0; by < gy; ++by) {
        for (unsigned bx = 0; bx < gx; ++bx) {
            emu_block_bar = std::make_unique<std::barrier<>>(threads);
            emu_warp_bar.clear();
            for (unsigned w = 0; w < threads / 32; ++w) emu_warp_bar.push_back(std::make_unique<std::barrier<>>(32));
            std::vector<std::thread> ts;
            for (unsigned t = 0; t < threads; ++t) {
                ts.emplace_back([&, t] {
                    threadIdx = {t, 0, 0};
                    blockIdx = {bx, by, 0};
                    kernel();
                });
            }
            for (auto& t : ts) t.join();
        }
    }
}
