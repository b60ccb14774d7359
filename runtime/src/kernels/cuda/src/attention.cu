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

// E consecutive elements as one aligned load (at most 16 bytes a load).
template <typename T, int E>
struct alignas(sizeof(T) * E < 16 ? sizeof(T) * E : 16) Pack {
    T x[E];
};

template <typename T, int E>
__device__ __forceinline__ void load_pack(const T* p, float* out) {
    Pack<T, E> pk = *reinterpret_cast<const Pack<T, E>*>(p);
    for (int u = 0; u < E; ++u) out[u] = to_f32(pk.x[u]);
}

// The grouped decode kernel for split-KV with head sizes D == DV == 32 * E (E = 2, 4 or 8, so
// D = 64, 128 or 256): the query heads that share a KV head (GQA) read each key and value row
// once. Block (i * splits + z, g * hb + c) serves query heads g * G + c * HB + r, r < min(HB,
// G - c * HB), of KV head g (G = H / HK, hb = ceil(G / HB)), over the keys of split z of row i.
// Each warp streams every nw-th key of the split, NB keys at a time (8; 4 at D = 256, for
// registers): their K and V rows are loaded first (lane l holds elements [l * E, l * E + E),
// one vector load per row; the launcher checks the alignment), then each head's scores, one
// online-softmax step per batch and the V update. Per warp and head: running max, sum and
// accumulator in registers, merged through shared memory at the end and written to the
// split-KV workspace as the other decode kernel does. Dynamic shared memory: nw * HB * DV
// floats.
template <typename T, int E, int HB>
__device__ void attention_decode_gqa(const T* q, const T* k, const T* v, int L, int H, int S,
                                     int HK, float scale, int splits, int split_len, float* ws) {
    const int D = 32 * E;
    constexpr int NB = E <= 4 ? 8 : 4;
    DYNAMIC_SHARED(float, wacc);
    __shared__ float wm[ATT_THREADS / 32 * HB], wt[ATT_THREADS / 32 * HB];
    int G = H / HK, hb = (G + HB - 1) / HB;
    int i = blockIdx.x / splits, z = blockIdx.x % splits, g = blockIdx.y / hb;
    int h0 = g * G + (blockIdx.y % hb) * HB, gc = min(HB, g * G + G - h0);
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    float qr[HB][E], acc[HB][E], m[HB], total[HB];
    for (int r = 0; r < HB; ++r) {
        if (r < gc) {
            load_pack<T, E>(q + ((i64)i * H + h0 + r) * D + lane * E, qr[r]);
        } else {
            for (int u = 0; u < E; ++u) qr[r][u] = 0.0f;
        }
        for (int u = 0; u < E; ++u) {
            qr[r][u] *= scale;
            acc[r][u] = 0.0f;
        }
        m[r] = NEG_INF;
        total[r] = 0.0f;
    }
    // no int overflow: S - L >= 0 and nk <= S; hi without forming lo + split_len past 2^31 - 1
    int nk = S - L + 1 + i;
    int lo = z * split_len, hi = nk - lo < split_len ? nk : lo + split_len;
    for (int j0 = lo + warp; j0 < hi; j0 += NB * nw) {
        float kf[NB][E], vf[NB][E];
        for (int b = 0; b < NB; ++b) {
            int j = j0 + b * nw;
            if (j < hi) {
                i64 off = ((i64)j * HK + g) * D + lane * E;
                load_pack<T, E>(k + off, kf[b]);
                load_pack<T, E>(v + off, vf[b]);
            } else {
                // keys past the split: score -inf (weight 0) and values 0, never garbage
                for (int u = 0; u < E; ++u) {
                    kf[b][u] = 0.0f;
                    vf[b][u] = 0.0f;
                }
            }
        }
        // register arrays: every loop over r, b and u has constant bounds (fully unrolled), and
        // heads past gc are skipped by a branch that is the same for the whole block
#pragma unroll
        for (int r = 0; r < HB; ++r) {
            if (r >= gc) continue;
            float s[NB];
            for (int b = 0; b < NB; ++b) {
                float a = 0.0f;
                for (int u = 0; u < E; ++u) a += qr[r][u] * kf[b][u];
                s[b] = a;
            }
            float mn = m[r];
            for (int b = 0; b < NB; ++b) {
                s[b] = warp_sum(s[b]);
                if (j0 + b * nw >= hi) s[b] = NEG_INF;
                mn = fmaxf(mn, s[b]);
            }
            float corr = (m[r] == mn) ? 1.0f : expf(m[r] - mn);
            float t = total[r] * corr;
            for (int u = 0; u < E; ++u) acc[r][u] *= corr;
            for (int b = 0; b < NB; ++b) {
                // as in `attention`: a -inf score weighs 0 even before a finite one was seen;
                // NaN and +inf scores still make the row NaN
                float p = s[b] == NEG_INF ? 0.0f : expf(s[b] - mn);
                t += p;
                for (int u = 0; u < E; ++u) acc[r][u] += p * vf[b][u];
            }
            total[r] = t;
            m[r] = mn;
        }
    }
    // merge the warps per head: rescale each to the block's max (a warp without keys: sum 0)
#pragma unroll
    for (int r = 0; r < HB; ++r) {
        if (r < gc && lane == 0) {
            wm[warp * HB + r] = m[r];
            wt[warp * HB + r] = total[r];
        }
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < HB; ++r) {
        if (r >= gc) continue;
        float mx = NEG_INF;
        for (int w = 0; w < nw; ++w)
            if (wt[w * HB + r] != 0.0f) mx = fmaxf(mx, wm[w * HB + r]);
        float mine = total[r] != 0.0f ? expf(m[r] - mx) : 0.0f;
        for (int u = 0; u < E; ++u) wacc[(warp * HB + r) * D + lane * E + u] = acc[r][u] * mine;
    }
    __syncthreads();
    for (int x = tid; x < gc * D; x += blockDim.x) {
        int r = x / D, t = x % D;
        float a = 0.0f;
        for (int w = 0; w < nw; ++w) a += wacc[(w * HB + r) * D + t];
        ws[(((i64)i * H + h0 + r) * splits + z) * D + t] = a;
    }
    if (tid < gc) {
        int r = tid;
        float mx = NEG_INF, sum = 0.0f;
        for (int w = 0; w < nw; ++w)
            if (wt[w * HB + r] != 0.0f) mx = fmaxf(mx, wm[w * HB + r]);
        for (int w = 0; w < nw; ++w)
            if (wt[w * HB + r] != 0.0f) sum += wt[w * HB + r] * expf(wm[w * HB + r] - mx);
        float* ml = ws + (i64)L * H * splits * D + (((i64)i * H + h0 + r) * splits + z) * 2;
        ml[0] = mx;
        ml[1] = sum;
    }
}

// Grid (L * ncb, H) with ncb = ceil(DV / 32): block (i * ncb + cb, h) writes columns
// [32 * cb, 32 * cb + 32) of row i, head h; lane l serves column 32 * cb + l and warp w the
// splits w, w + nw, ..., eight at a time: their (max, sum) and the lane's accumulator element
// are loaded together (no load waits for a block-wide max), each thread keeps its own running
// max (as the attention kernels do over keys), and the warps' parts are merged through shared
// memory. An empty split (no keys: sum 0) weighs nothing; a NaN sum makes the row NaN, as in
// the single-split kernel; a row whose splits are all empty is 0 / 0 = NaN.
template <typename T>
__device__ void attention_combine(T* out, const float* ws, int L, int H, int DV, int splits) {
    __shared__ float rm[ATT_THREADS], ra[ATT_THREADS], rt[ATT_THREADS];
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    int ncb = (DV + 31) / 32, i = blockIdx.x / ncb, t = (blockIdx.x % ncb) * 32 + lane;
    i64 row = (i64)i * H + blockIdx.y;
    const float* ml = ws + (i64)L * H * splits * DV + row * splits * 2;
    const float* part = ws + row * splits * DV + t;
    float m = NEG_INF, a = 0.0f, total = 0.0f;
    for (int z0 = warp; z0 < splits; z0 += 8 * nw) {
        float pm[8], pl[8], pv[8];
        for (int u = 0; u < 8; ++u) {
            int z = z0 + u * nw;
            bool in = z < splits;
            pm[u] = in ? ml[2 * z] : NEG_INF;
            pl[u] = in ? ml[2 * z + 1] : 0.0f;
            pv[u] = in && t < DV ? part[(i64)z * DV] : 0.0f;
        }
        float mn = m;
        for (int u = 0; u < 8; ++u)
            if (pl[u] != 0.0f) mn = fmaxf(mn, pm[u]);
        float corr = (m == mn) ? 1.0f : expf(m - mn);
        a *= corr;
        total *= corr;
        for (int u = 0; u < 8; ++u) {
            if (pl[u] != 0.0f) {
                float w = expf(pm[u] - mn);
                a += w * pv[u];
                total += w * pl[u];
            }
        }
        m = mn;
    }
    rm[tid] = m;
    ra[tid] = a;
    rt[tid] = total;
    __syncthreads();
    if (warp == 0 && t < DV) {
        float mx = NEG_INF, acc = 0.0f, sum = 0.0f;
        for (int w = 0; w < nw; ++w)
            if (rt[w * 32 + lane] != 0.0f) mx = fmaxf(mx, rm[w * 32 + lane]);
        for (int w = 0; w < nw; ++w) {
            float tw = rt[w * 32 + lane];
            if (tw != 0.0f) {
                float s = expf(rm[w * 32 + lane] - mx);
                acc += s * ra[w * 32 + lane];
                sum += s * tw;
            }
        }
        out[row * DV + t] = from_f32<T>(acc / sum);
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

// self_attention_decode_gqa_<type>_<D>: HB = 8 query heads a block for D = 64 and 128, 4 for 256
// (registers: 2 * HB * E floats of query and accumulator a lane)
#define ATTENTION_GQA(name, T, E, HB)                                                               \
    extern "C" __global__ void __launch_bounds__(ATT_THREADS) name(const T* q, const T* k, const T* v, int L, int H, \
                                    int S, int HK, float scale, int splits, int split_len, float* ws) { \
        attention_decode_gqa<T, E, HB>(q, k, v, L, H, S, HK, scale, splits, split_len, ws);         \
    }
ATTENTION_GQA(self_attention_decode_gqa_f32_64, float, 2, 8)
ATTENTION_GQA(self_attention_decode_gqa_f32_128, float, 4, 8)
ATTENTION_GQA(self_attention_decode_gqa_f32_256, float, 8, 4)
ATTENTION_GQA(self_attention_decode_gqa_f16_64, f16_t, 2, 8)
ATTENTION_GQA(self_attention_decode_gqa_f16_128, f16_t, 4, 8)
ATTENTION_GQA(self_attention_decode_gqa_f16_256, f16_t, 8, 4)
ATTENTION_GQA(self_attention_decode_gqa_bf16_64, bf16_t, 2, 8)
ATTENTION_GQA(self_attention_decode_gqa_bf16_128, bf16_t, 4, 8)
ATTENTION_GQA(self_attention_decode_gqa_bf16_256, bf16_t, 8, 4)
