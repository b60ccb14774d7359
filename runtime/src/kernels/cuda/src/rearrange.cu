// ops.rearrange: out[idx] = in[idx] over up to 8 dimensions with any (element) strides, st[0]
// for out and st[1] for in; elements moved by size (1, 2, 4, 8 or 16 bytes). Grid-stride loop.

struct b16_t {
    unsigned long long lo, hi;
};

template <typename E>
__device__ void rearrange(E* out, const E* in, i64 n, const Lay& l) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        i64 o[3];
        lay_offsets(l, i, o);
        out[o[0]] = in[o[1]];
    }
}

#define REARRANGE(name, E)                                                      \
    extern "C" __global__ void __launch_bounds__(256) name(E* out, const E* in, i64 n, Lay l) {        \
        rearrange<E>(out, in, n, l);                                            \
    }
REARRANGE(rearrange_1, unsigned char)
REARRANGE(rearrange_2, u16)
REARRANGE(rearrange_4, unsigned)
REARRANGE(rearrange_8, unsigned long long)
REARRANGE(rearrange_16, b16_t)
