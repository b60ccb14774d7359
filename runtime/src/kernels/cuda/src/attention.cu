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
    // no int overflow: S - L >= 0 and nk <= S; hi without forming lo + split_len past 2^31 - 1
    int nk = S - L + 1 + i;
    int lo = z * split_len, hi = nk - lo < split_len ? nk : lo + split_len;
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
            // a -inf score weighs 0 even while the running max is still -inf (exp(-inf - -inf)
            // would be NaN); NaN and +inf scores still make the row NaN
            float p = sc[jj] == NEG_INF ? 0.0f : expf(sc[jj] - mn);
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

// The decode kernel for split-KV (D and DV at most DEC_MAX * 32): block (i * splits + z, h) as
// above, but each warp streams its own keys (every nw-th of the split) with its own online
// softmax, the query and its share of the accumulator in registers (lane l holds elements
// l, l + 32, ...), so a key costs one warp reduction and no block barrier; the warps' parts are
// merged through shared memory at the end. Dynamic shared memory: nw * DV floats.
#define DEC_MAX 8

template <typename T>
__device__ void attention_decode(const T* q, const T* k, const T* v, int L, int H, int S, int HK,
                                 int D, int DV, float scale, int splits, int split_len, float* ws) {
    DYNAMIC_SHARED(float, wacc);
    __shared__ float wm[32], wt[32];
    int i = blockIdx.x / splits, z = blockIdx.x % splits, h = blockIdx.y, g = h / (H / HK);
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    const T* qp = q + ((i64)i * H + h) * D;
    float qr[DEC_MAX], acc[DEC_MAX];
    for (int u = 0; u < DEC_MAX; ++u) {
        int t = lane + 32 * u;
        qr[u] = t < D ? to_f32(qp[t]) * scale : 0.0f;
        acc[u] = 0.0f;
    }
    // no int overflow: S - L >= 0 and nk <= S; hi without forming lo + split_len past 2^31 - 1
    int nk = S - L + 1 + i;
    int lo = z * split_len, hi = nk - lo < split_len ? nk : lo + split_len;
    float m = NEG_INF, total = 0.0f;
#pragma unroll 4
    for (int j = lo + warp; j < hi; j += nw) {
        const T* kr = k + ((i64)j * HK + g) * D;
        const T* vr = v + ((i64)j * HK + g) * DV;
        float s = 0.0f;
        for (int u = 0; u < DEC_MAX; ++u) {
            int t = lane + 32 * u;
            if (t < D) s += qr[u] * to_f32(kr[t]);
        }
        s = warp_sum(s);
        float mn = fmaxf(m, s);
        float corr = (m == mn) ? 1.0f : expf(m - mn);
        // as in `attention`: a -inf score weighs 0 even before the warp has seen a finite one
        float p = s == NEG_INF ? 0.0f : expf(s - mn);
        total = total * corr + p;
        for (int u = 0; u < DEC_MAX; ++u) {
            int t = lane + 32 * u;
            if (t < DV) acc[u] = acc[u] * corr + p * to_f32(vr[t]);
        }
        m = mn;
    }
    // merge the warps: rescale each to the block's max (a warp without keys has sum 0, weight 0)
    if (lane == 0) {
        wm[warp] = m;
        wt[warp] = total;
    }
    __syncthreads();
    float mx = NEG_INF;
    for (int w = 0; w < nw; ++w)
        if (wt[w] != 0.0f) mx = fmaxf(mx, wm[w]);
    float mine = total != 0.0f ? expf(m - mx) : 0.0f;
    for (int u = 0; u < DEC_MAX; ++u) {
        int t = lane + 32 * u;
        if (t < DV) wacc[warp * DV + t] = acc[u] * mine;
    }
    __syncthreads();
    i64 row = (i64)i * H + h;
    float* part = ws + (row * splits + z) * DV;
    for (int t = tid; t < DV; t += blockDim.x) {
        float a = 0.0f;
        for (int w = 0; w < nw; ++w) a += wacc[w * DV + t];
        part[t] = a;
    }
    if (tid == 0) {
        float sum = 0.0f;
        for (int w = 0; w < nw; ++w)
            if (wt[w] != 0.0f) sum += wt[w] * expf(wm[w] - mx);
        float* ml = ws + (i64)L * H * splits * DV + (row * splits + z) * 2;
        ml[0] = mx;
        ml[1] = sum;
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
    for (int z = tid; z < splits; z += blockDim.x)
        if (ml[2 * z + 1] != 0.0f) mx = fmaxf(mx, ml[2 * z]);
    mx = block_max(mx);
    float total = 0.0f;
    for (int z = tid; z < splits; z += blockDim.x) {
        float w = ml[2 * z + 1] != 0.0f ? expf(ml[2 * z] - mx) : 0.0f;
        wz[z] = w;
        total += ml[2 * z + 1] * w;
    }
    total = block_sum(total);  // its barrier also publishes wz
    const float* part = ws + row * splits * DV;
    T* orow = out + row * DV;
    for (int t = tid; t < DV; t += blockDim.x) {
        // four independent sums keep four loads in flight
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        int z = 0;
        for (; z + 4 <= splits; z += 4) {
            a0 += wz[z] * part[(i64)z * DV + t];
            a1 += wz[z + 1] * part[(i64)(z + 1) * DV + t];
            a2 += wz[z + 2] * part[(i64)(z + 2) * DV + t];
            a3 += wz[z + 3] * part[(i64)(z + 3) * DV + t];
        }
        for (; z < splits; ++z) a0 += wz[z] * part[(i64)z * DV + t];
        orow[t] = from_f32<T>(((a0 + a1) + (a2 + a3)) / total);
    }
}

#define ATTENTION(name, cname, dname, T)                                                            \
    extern "C" __global__ void __launch_bounds__(ATT_THREADS) name(T* out, const T* q, const T* k, const T* v, int L, int H, \
                                    int S, int HK, int D, int DV, float scale, int splits,  \
                                    int split_len, float* ws) {                             \
        attention<T>(out, q, k, v, L, H, S, HK, D, DV, scale, splits, split_len, ws);       \
    }                                                                                       \
    extern "C" __global__ void __launch_bounds__(ATT_THREADS) cname(T* out, const float* ws, int L, int H, \
                                    int DV, int splits) {                                   \
        attention_combine<T>(out, ws, L, H, DV, splits);                                    \
    }                                                                                       \
    extern "C" __global__ void __launch_bounds__(ATT_THREADS) dname(const T* q, const T* k, const T* v, int L, int H, \
                                    int S, int HK, int D, int DV, float scale, int splits,  \
                                    int split_len, float* ws) {                             \
        attention_decode<T>(q, k, v, L, H, S, HK, D, DV, scale, splits, split_len, ws);     \
    }
ATTENTION(self_attention_f32, self_attention_combine_f32, self_attention_decode_f32, float)
ATTENTION(self_attention_f16, self_attention_combine_f16, self_attention_decode_f16, f16_t)
ATTENTION(self_attention_bf16, self_attention_combine_bf16, self_attention_decode_bf16, bf16_t)
