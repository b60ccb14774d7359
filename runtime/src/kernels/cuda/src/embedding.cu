// ops.embedding: out[r, :] = weight[index[r], :], one block per output row, elements moved by
// size (2 or 4 bytes). The indices were checked on the host before the launch.

template <typename E, typename I>
__device__ void embedding(E* out, const I* index, const E* weight, i64 d) {
    i64 r = blockIdx.x;
    const E* src = weight + (i64)index[r] * d;
    E* dst = out + r * d;
    for (i64 j = threadIdx.x; j < d; j += blockDim.x) dst[j] = src[j];
}

#define EMBEDDING(name, E, I)                                                         \
    extern "C" __global__ void __launch_bounds__(256) name(E* out, const I* index, const E* weight, i64 d) { \
        embedding<E, I>(out, index, weight, d);                                       \
    }
EMBEDDING(embedding_2_i64, u16, i64)
EMBEDDING(embedding_2_i32, u16, int)
EMBEDDING(embedding_4_i64, unsigned, i64)
EMBEDDING(embedding_4_i32, unsigned, int)
