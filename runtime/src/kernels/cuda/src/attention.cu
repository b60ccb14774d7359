// ops.self_attention, causal (bottom-right aligned: row i sees keys j <= i + S - L) with grouped
// KV heads (query head h reads KV head h / (H / HK)); q [L, H, D], k [S, HK, D], v [S, HK, DV],
// out [L, H, DV], contiguous. One block of ATT_THREADS threads per (query row, head, key split):
// the scaled query and the f32 accumulator live in shared memory; keys are processed in chunks
// of ATT_CHUNK with an online softmax (running max, rescaled sum and accumulator), scores in
// shared memory. Dynamic shared memory: (D + DV + ATT_CHUNK) floats (mod.rs limits D + DV).
//
// With splits == 1 (grid (L, H)) a block sees all of its row's keys and writes the output. With
// splits > 1 (decode: too few rows and heads to fill the GPU; grid (L * splits, H)) block
// (i * splits + z, h) sees keys [z * split_len, (z + 1) * split_len) of row i and writes its
// unnormalised accumulator, running max and sum to the f32 workspace `ws` ([L, H, splits, DV]
// accumulators, then [L, H, splits, 2] (max, sum)); attention_combine then rescales the parts
// to their common max and writes the output (split-KV, "flash decoding").
#define ATT_THREADS 128
#define ATT_CHUNK 256

template <typename T>
__device__ void attention(T* out, const T* q, const T* k, const T* v, int L, int H, int S, int HK,
                          int D, int DV, float scale, int splits, int split_len, float* ws) {
    DYNAMIC_SHARED(float, sm);
    float* qs = sm;
    float* acc = qs + D;
    float* sc = acc + DV;
    int i = blockIdx.x / splits, z = blockIdx.x % splits, h = blockIdx.y, g = h / (H / HK);
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    const T* qr = q + ((i64)i * H + h) * D;
    for (int t = tid; t < D; t += blockDim.x) qs[t] = to_f32(qr[t]) * scale;
    for (int t = tid; t < DV; t += blockDim.x) acc[t] = 0.0f;
    __syncthreads();
    int nk = i + S - L + 1;
    int lo = z * split_len, hi = min(nk, lo + split_len);
    float m = NEG_INF, total = 0.0f;
    for (int c0 = lo; c0 < hi; c0 += ATT_CHUNK) {
        int cn = min(ATT_CHUNK, hi - c0);
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
    i64 row = (i64)i * H + h;
    if (splits == 1) {
        T* orow = out + row * DV;
        for (int t = tid; t < DV; t += blockDim.x) orow[t] = from_f32<T>(acc[t] / total);
        return;
    }
    // each thread wrote acc[t] for its own t last: no barrier needed before reading them back
    float* part = ws + (row * splits + z) * DV;
    for (int t = tid; t < DV; t += blockDim.x) part[t] = acc[t];
    if (tid == 0) {
        float* ml = ws + (i64)L * H * splits * DV + (row * splits + z) * 2;
        ml[0] = m;
        ml[1] = total;
    }
}

// Grid (L, H); dynamic shared memory: `splits` floats. An empty split (no keys: sum 0) weighs
// nothing; a NaN sum makes the row NaN, as in the single-split kernel.
template <typename T>
__device__ void attention_combine(T* out, const float* ws, int L, int H, int DV, int splits) {
    DYNAMIC_SHARED(float, wz);
    int tid = threadIdx.x;
    i64 row = (i64)blockIdx.x * H + blockIdx.y;
    const float* ml = ws + (i64)L * H * splits * DV + row * splits * 2;
    float mx = NEG_INF;
    for (int z = 0; z < splits; ++z)
        if (ml[2 * z + 1] != 0.0f) mx = fmaxf(mx, ml[2 * z]);
    float total = 0.0f;
    for (int z = 0; z < splits; ++z)
        if (ml[2 * z + 1] != 0.0f) total += ml[2 * z + 1] * expf(ml[2 * z] - mx);
    for (int z = tid; z < splits; z += blockDim.x)
        wz[z] = ml[2 * z + 1] != 0.0f ? expf(ml[2 * z] - mx) / total : 0.0f;
    __syncthreads();
    const float* part = ws + row * splits * DV;
    T* orow = out + row * DV;
    for (int t = tid; t < DV; t += blockDim.x) {
        float a = 0.0f;
        for (int z = 0; z < splits; ++z) a += wz[z] * part[(i64)z * DV + t];
        orow[t] = from_f32<T>(a);
    }
}

#define ATTENTION(name, cname, T)                                                            \
    extern "C" __global__ void __launch_bounds__(ATT_THREADS) name(T* out, const T* q, const T* k, const T* v, int L, int H, \
                                    int S, int HK, int D, int DV, float scale, int splits,  \
                                    int split_len, float* ws) {                             \
        attention<T>(out, q, k, v, L, H, S, HK, D, DV, scale, splits, split_len, ws);       \
    }                                                                                       \
    extern "C" __global__ void __launch_bounds__(ATT_THREADS) cname(T* out, const float* ws, int L, int H, \
                                    int DV, int splits) {                                   \
        attention_combine<T>(out, ws, L, H, DV, splits);                                    \
    }
ATTENTION(self_attention_f32, self_attention_combine_f32, float)
ATTENTION(self_attention_f16, self_attention_combine_f16, f16_t)
ATTENTION(self_attention_bf16, self_attention_combine_bf16, bf16_t)
