// ops.self_attention, causal (bottom-right aligned: row i sees keys j <= i + S - L) with grouped
// KV heads (query head h reads KV head h / (H / HK)); q [L, H, D], k [S, HK, D], v [S, HK, DV],
// out [L, H, DV], contiguous. One block of ATT_THREADS threads per (query row, head): the scaled
// query and the f32 accumulator live in shared memory; keys are processed in chunks of ATT_CHUNK
// with an online softmax (running max, rescaled sum and accumulator), scores in shared memory.
// Dynamic shared memory: (D + DV + ATT_CHUNK) floats (mod.rs limits D + DV).

#define ATT_THREADS 128
#define ATT_CHUNK 256

template <typename T>
__device__ void attention(T* out, const T* q, const T* k, const T* v, int L, int H, int S, int HK,
                          int D, int DV, float scale) {
    DYNAMIC_SHARED(float, sm);
    float* qs = sm;
    float* acc = qs + D;
    float* sc = acc + DV;
    int i = blockIdx.x, h = blockIdx.y, g = h / (H / HK);
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    const T* qr = q + ((i64)i * H + h) * D;
    for (int t = tid; t < D; t += blockDim.x) qs[t] = to_f32(qr[t]) * scale;
    for (int t = tid; t < DV; t += blockDim.x) acc[t] = 0.0f;
    __syncthreads();
    int nk = i + S - L + 1;
    float m = NEG_INF, total = 0.0f;
    for (int c0 = 0; c0 < nk; c0 += ATT_CHUNK) {
        int cn = min(ATT_CHUNK, nk - c0);
        for (int jj = warp; jj < cn; jj += nw) {
            const T* kr = k + ((i64)(c0 + jj) * HK + g) * D;
            float s = 0.0f;
            for (int t = lane; t < D; t += 32) s += qs[t] * to_f32(kr[t]);
            s = warp_sum(s);
            if (lane == 0) sc[jj] = s;
        }
        __syncthreads();
        float cm = NEG_INF;
        for (int jj = tid; jj < cn; jj += blockDim.x) cm = fmaxf(cm, sc[jj]);
        cm = block_max(cm);
        float mn = fmaxf(m, cm);
        float corr = (m == mn) ? 1.0f : expf(m - mn);
        float ps = 0.0f;
        for (int jj = tid; jj < cn; jj += blockDim.x) {
            float p = expf(sc[jj] - mn);
            sc[jj] = p;
            ps += p;
        }
        ps = block_sum(ps);
        total = total * corr + ps;
        for (int t = tid; t < DV; t += blockDim.x) {
            float a = acc[t] * corr;
            const T* vc = v + ((i64)c0 * HK + g) * DV + t;
            for (int jj = 0; jj < cn; ++jj) a += sc[jj] * to_f32(vc[(i64)jj * HK * DV]);
            acc[t] = a;
        }
        m = mn;
        __syncthreads();
    }
    T* orow = out + ((i64)i * H + h) * DV;
    for (int t = tid; t < DV; t += blockDim.x) orow[t] = from_f32<T>(acc[t] / total);
}

#define ATTENTION(name, T)                                                                  \
    extern "C" __global__ void __launch_bounds__(ATT_THREADS) name(T* out, const T* q, const T* k, const T* v, int L, int H, \
                                    int S, int HK, int D, int DV, float scale) {            \
        attention<T>(out, q, k, v, L, H, S, HK, D, DV, scale);                              \
    }
ATTENTION(self_attention_f32, float)
ATTENTION(self_attention_f16, f16_t)
ATTENTION(self_attention_bf16, bf16_t)
