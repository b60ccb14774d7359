// Runs every NVRTC kernel source on the CPU through emu.h and checks it against naive
// references (double precision where the op computes): indexing, strided layouts, block and
// warp reductions, argmax tie/NaN rules, online softmax across key chunks, GQA head mapping.
// Built and run by tests/cuda/run.sh. Exit status 0 when every check passes.
#include "emu.h"

#include "../../../runtime/src/kernels/cuda/src/common.cuh"
#include "../../../runtime/src/kernels/cuda/src/elementwise.cu"
#include "../../../runtime/src/kernels/cuda/src/norm.cu"
#include "../../../runtime/src/kernels/cuda/src/rope.cu"
#include "../../../runtime/src/kernels/cuda/src/argmax.cu"
#include "../../../runtime/src/kernels/cuda/src/embedding.cu"
#include "../../../runtime/src/kernels/cuda/src/rearrange.cu"
#include "../../../runtime/src/kernels/cuda/src/attention.cu"

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>

static int failures = 0;
static std::mt19937_64 rng(7);
static double uni(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }

static void expect(bool ok, const std::string& what) {
    if (!ok) {
        std::printf("FAIL: %s\n", what.c_str());
        ++failures;
    }
}
// |got - want| <= tol * (1 + |want|), reporting the first miss.
static void close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const std::string& what) {
    for (size_t i = 0; i < want.size(); ++i) {
        if (!(std::fabs(got[i] - want[i]) <= tol * (1 + std::fabs(want[i])))) {
            std::printf("FAIL: %s: element %zu: got %.9g want %.9g\n", what.c_str(), i, got[i], want[i]);
            ++failures;
            return;
        }
    }
}

template <typename T> const char* dname();
template <> const char* dname<float>() { return "f32"; }
template <> const char* dname<f16_t>() { return "f16"; }
template <> const char* dname<bf16_t>() { return "bf16"; }
template <typename T> double tol_of() { return sizeof(T) == 4 ? 1e-5 : (std::is_same<T, f16_t>::value ? 1e-3 : 1e-2); }

template <typename T> std::vector<T> rand_vec(size_t n, double lo, double hi) {
    std::vector<T> v(n);
    for (auto& x : v) x = from_f32<T>((float)uni(lo, hi));
    return v;
}
template <typename T> std::vector<double> widen(const std::vector<T>& v) {
    std::vector<double> r;
    for (auto x : v) r.push_back(to_f32(x));
    return r;
}

Lay make_lay(std::vector<i64> shape, std::vector<std::vector<i64>> st) {
    Lay l{};
    l.nd = (int)shape.size();
    for (int d = 0; d < l.nd; ++d) {
        l.shape[d] = shape[d];
        for (size_t t = 0; t < st.size(); ++t) l.st[t][d] = st[t][d];
    }
    return l;
}

template <typename T>
void test_binary(void (*add)(T*, const T*, const T*, i64, Lay, int),
                 void (*swiglu)(T*, const T*, const T*, i64, Lay, int)) {
    // contiguous, 2 blocks of 64 threads (grid-stride): 16-byte aligned (vector path) with and
    // without a tail, and misaligned by one element (element path)
    Lay none{};
    for (auto [n, off] : {std::pair<i64, int>{1000, 0}, {1003, 0}, {1003, 1}}) {
        auto a = rand_vec<T>(n + 1, -3, 3), b = rand_vec<T>(n + 1, -3, 3);
        std::vector<T> c(n + 1);
        const T *pa = a.data() + off, *pb = b.data() + off;
        for (int op = 0; op < 2; ++op) {
            emu_launch(2, 1, 64, 0, [&] { (op ? swiglu : add)(c.data() + off, pa, pb, n, none, 1); });
            std::vector<double> got, want;
            for (i64 i = 0; i < n; ++i) {
                float x = to_f32(pa[i]), y = to_f32(pb[i]);
                want.push_back(to_f32(from_f32<T>(op ? y * (x / (1.0f + std::exp(-x))) : x + y)));
                got.push_back(to_f32(c[off + i]));
            }
            close(got, want, 0, std::string(op ? "swiglu " : "add ") + dname<T>() + " n=" + std::to_string(n) + " off=" + std::to_string(off));
        }
    }
    // strided: c row-padded [5,7] (9,1), a transposed (1,5), b contiguous
    auto as = rand_vec<T>(35, -2, 2), bs = rand_vec<T>(35, -2, 2);
    std::vector<T> cs(45, from_f32<T>(NAN));
    Lay l = make_lay({5, 7}, {{9, 1}, {1, 5}, {7, 1}});
    emu_launch(1, 1, 32, 0, [&] { add(cs.data(), as.data(), bs.data(), 35, l, 0); });
    std::vector<double> got, want;
    for (int i = 0; i < 5; ++i)
        for (int j = 0; j < 7; ++j) {
            got.push_back(to_f32(cs[i * 9 + j]));
            want.push_back(to_f32(from_f32<T>(to_f32(as[i + j * 5]) + to_f32(bs[i * 7 + j]))));
        }
    close(got, want, 0, std::string("add strided ") + dname<T>());
}

template <typename T, typename W>
void test_rms(void (*k)(T*, const T*, const W*, Lay, i64, float)) {
    // rows [2, 3] of a [2, 3, d] tensor with padded rows (in) and contiguous out
    i64 d = 1000;
    std::vector<T> x = rand_vec<T>(2 * 3500, -2, 2), y(6 * d);
    auto w = rand_vec<W>(d, 0.5, 1.5);
    Lay rows = make_lay({2, 3}, {{3 * d, d}, {3500, 1100}});
    float eps = 1e-5f;
    emu_launch(6, 1, 256, 0, [&] { k(y.data(), x.data(), w.data(), rows, d, eps); });
    std::vector<double> got, want;
    for (int r0 = 0; r0 < 2; ++r0)
        for (int r1 = 0; r1 < 3; ++r1) {
            const T* xr = x.data() + r0 * 3500 + r1 * 1100;
            double ss = 0;
            for (i64 i = 0; i < d; ++i) ss += (double)to_f32(xr[i]) * to_f32(xr[i]);
            double r = 1 / std::sqrt(ss / d + eps);
            for (i64 i = 0; i < d; ++i) {
                want.push_back(to_f32(xr[i]) * r * to_f32(w[i]));
                got.push_back(to_f32(y[(r0 * 3 + r1) * d + i]));
            }
        }
    close(got, want, tol_of<T>(), std::string("rms_norm ") + dname<T>());
    // rows whose f32 sum of squares overflows or underflows (eps 0) still come out normalised,
    // subnormal ones too (1 / rms past f32)
    if (sizeof(T) == 4) {
        for (double scale : {1e19, 3e38, 1e-30, 1e-41}) {
            i64 n = 300;
            std::vector<T> xs(n), ys(n);
            std::vector<W> ws(n, from_f32<W>(1.0f));
            for (i64 i = 0; i < n; ++i) xs[i] = from_f32<T>((float)(scale * (i % 3 == 0 ? -1.0 : 0.5 + i / 600.0)));
            Lay one = make_lay({1}, {{n, n}});
            emu_launch(1, 1, 256, 0, [&] { k(ys.data(), xs.data(), ws.data(), one, n, 0.0f); });
            double ss = 0;
            for (i64 i = 0; i < n; ++i) ss += (double)to_f32(xs[i]) * to_f32(xs[i]);
            std::vector<double> g2, w2;
            for (i64 i = 0; i < n; ++i) {
                w2.push_back(to_f32(xs[i]) / std::sqrt(ss / n));
                g2.push_back(to_f32(ys[i]));
            }
            close(g2, w2, tol_of<T>(), std::string("rms_norm extreme rows ") + dname<T>());
        }
    }
}

template <typename T>
void test_rope(void (*k)(T*, i64, i64, const T*, i64, i64, const i64*, int, float)) {
    // x: [seq 3, nhead 2, d 64] inside a fused [3, 6, 64] buffer; out contiguous
    int seq = 3, nh = 2, d = 64, h = d / 2;
    auto x = rand_vec<T>(3 * 6 * 64, -1, 1);
    std::vector<T> y(seq * nh * d);
    std::vector<i64> pos = {5, 900, 1023};
    float theta = 10000.0f;
    emu_launch(seq, nh, 32, 0, [&] {
        k(y.data(), nh * d, d, x.data(), 6 * 64, 64, pos.data(), h, theta);
    });
    std::vector<double> got, want;
    for (int t = 0; t < seq; ++t)
        for (int hd = 0; hd < nh; ++hd)
            for (int j = 0; j < h; ++j) {
                // spec §2.6: f32 powf with exponent (2j as f32)/(d as f32), f32 division
                float den = std::pow(theta, (float)(2 * j) / (float)d);
                float phi = (float)pos[t] / den;
                double a = to_f32(x[t * 384 + hd * 64 + j]), b = to_f32(x[t * 384 + hd * 64 + h + j]);
                want.push_back(a * std::cos((double)phi) - b * std::sin((double)phi));
                got.push_back(to_f32(y[(t * nh + hd) * d + j]));
                want.push_back(b * std::cos((double)phi) + a * std::sin((double)phi));
                got.push_back(to_f32(y[(t * nh + hd) * d + h + j]));
            }
    close(got, want, sizeof(T) == 4 ? 2e-6 : tol_of<T>(), std::string("rope ") + dname<T>());
}

template <typename T> void test_argmax(void (*k)(i64*, T*, const T*, i64)) {
    std::vector<std::vector<float>> cases = {{1, 3, 3, 2}, std::vector<float>(3000, 0.5f)};
    std::vector<float> r(151936);
    for (auto& v : r) v = (float)uni(0, 1);
    cases.push_back(r);
    std::vector<float> nan(5000, 0.25f);
    nan[10] = 9;
    nan[4000] = NAN;
    nan[4500] = NAN;
    cases.push_back(nan);
    std::vector<float> late(70000);
    for (int i = 0; i < 70000; ++i) late[i] = (float)(i % 97) / 97.0f;
    late[69999] = 2;
    late[40001] = 2;
    cases.push_back(late);
    for (auto& c : cases) {
        std::vector<T> x;
        for (float v : c) x.push_back(from_f32<T>(v));
        i64 want = 0;
        for (size_t i = 1; i < x.size(); ++i) {
            float v = to_f32(x[i]), b = to_f32(x[want]);
            if (b != b) break;
            if (v != v || v > b) want = i;
        }
        i64 idx = -7;
        T val = from_f32<T>(-1);
        emu_launch(1, 1, 1024, 0, [&] { k(&idx, &val, x.data(), (i64)x.size()); });
        expect(idx == want, std::string("argmax ") + dname<T>() + " n " + std::to_string(x.size()) +
                                ": got " + std::to_string(idx) + " want " + std::to_string(want));
        expect(std::memcmp(&val, &x[want], sizeof(T)) == 0, std::string("argmax value ") + dname<T>());
    }
}

template <typename E, typename I> void test_embedding(void (*k)(E*, const I*, const E*, i64)) {
    i64 v = 50, d = 300;
    std::vector<E> w(v * d);
    for (auto& x : w) x = (E)rng();
    std::vector<I> idx = {3, 49, 0, 3, 17};
    std::vector<E> out(idx.size() * d);
    emu_launch((unsigned)idx.size(), 1, 256, 0, [&] { k(out.data(), idx.data(), w.data(), d); });
    bool ok = true;
    for (size_t r = 0; r < idx.size(); ++r)
        for (i64 j = 0; j < d; ++j) ok &= out[r * d + j] == w[idx[r] * d + j];
    expect(ok, "embedding " + std::to_string(sizeof(E)) + "/" + std::to_string(sizeof(I)));
}

template <typename E> void test_rearrange(void (*k)(E*, const E*, i64, Lay)) {
    // in: [4, 5, 6] seen as [6, 4, 5] (strides 1, 30, 6); out row-padded (24, 6, 1)
    std::vector<E> in(120), out(6 * 24);
    for (auto& x : in) std::memset(&x, (int)(rng() & 0xff), sizeof(E)), *(unsigned char*)&x ^= (unsigned char)rng();
    Lay l = make_lay({6, 4, 5}, {{24, 6, 1}, {1, 30, 6}});
    emu_launch(1, 1, 64, 0, [&] { k(out.data(), in.data(), 120, l); });
    bool ok = true;
    for (int a = 0; a < 6; ++a)
        for (int b = 0; b < 4; ++b)
            for (int c = 0; c < 5; ++c)
                ok &= std::memcmp(&out[a * 24 + b * 6 + c], &in[a + b * 30 + c * 6], sizeof(E)) == 0;
    expect(ok, "rearrange " + std::to_string(sizeof(E)));
}

// Causal attention in f64 (bottom-right aligned, GQA), out [L, H, DV] row-major.
template <typename T>
std::vector<double> attention_reference(const std::vector<T>& q, const std::vector<T>& kk, const std::vector<T>& v, int L,
                                        int S, int H, int HK, int D, int DV, float scale) {
    std::vector<double> want;
    for (int i = 0; i < L; ++i)
        for (int h = 0; h < H; ++h) {
            int g = h / (H / HK), nk = i + S - L + 1;
            std::vector<double> s(nk);
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < nk; ++j) {
                double acc = 0;
                for (int t = 0; t < D; ++t)
                    acc += (double)to_f32(q[((size_t)i * H + h) * D + t]) * to_f32(kk[((size_t)j * HK + g) * D + t]);
                s[j] = acc * scale;
                mx = std::max(mx, s[j]);
            }
            for (auto& x : s) sum += (x = std::exp(x - mx));
            for (int t = 0; t < DV; ++t) {
                double acc = 0;
                for (int j = 0; j < nk; ++j) acc += s[j] * to_f32(v[((size_t)j * HK + g) * DV + t]);
                want.push_back(acc / sum);
            }
        }
    return want;
}

template <typename T>
void test_attention(void (*k)(T*, const T*, const T*, const T*, int, int, int, int, int, int, float, int, int, float*),
                    void (*combine)(T*, const float*, int, int, int, int),
                    void (*decode)(const T*, const T*, const T*, int, int, int, int, int, int, float, int, int, float*)) {
    // decode GQA 6:1 and a prefill spanning 3 key chunks (ATT_CHUNK 256), small head sizes so the
    // emulation stays quick; each also split over keys (split-KV with the combine kernel), with
    // splits that are empty for the early causal rows and splits spanning two key chunks
    int shapes[][6] = {{2, 2, 1, 1, 4, 1},   {5, 11, 4, 2, 8, 1},  {1, 300, 6, 1, 32, 1}, {2, 600, 2, 1, 16, 1},
                       {5, 11, 2, 1, 8, 4},  {1, 300, 2, 1, 32, 5}, {1, 600, 1, 1, 16, 2}, {2, 12, 1, 1, 8, 12},
                       {1, 70, 3, 1, 40, 3},  {1, 600, 1, 1, 16, 37}};
    // split shapes run twice: the general kernel, then the decode kernel (dec = 1)
    for (int run = 0; run < 2 * (int)(sizeof shapes / sizeof shapes[0]); ++run) {
        auto& sh = shapes[run / 2];
        int dec = run % 2;
        if (dec && sh[5] == 1) continue;
        int L = sh[0], S = sh[1], H = sh[2], HK = sh[3], D = sh[4], DV = D, splits = sh[5];
        int split_len = (S + splits - 1) / splits;
        auto q = rand_vec<T>((size_t)L * H * D, 0, 1), kk = rand_vec<T>((size_t)S * HK * D, 0, 1),
             v = rand_vec<T>((size_t)S * HK * DV, 0, 1);
        std::vector<T> o((size_t)L * H * DV);
        float scale = 1.0f / std::sqrt((float)D);
        std::vector<float> ws(splits > 1 ? (size_t)L * H * splits * (DV + 2) : 0, NAN);
        if (dec)
            emu_launch(L * splits, H, 128, 4 * DV * 4, [&] {
                decode(q.data(), kk.data(), v.data(), L, H, S, HK, D, DV, scale, splits, split_len, ws.data());
            });
        else
            emu_launch(L * splits, H, 128, (D + DV + 256) * 4, [&] {
                k(o.data(), q.data(), kk.data(), v.data(), L, H, S, HK, D, DV, scale, splits, split_len, ws.data());
            });
        if (splits > 1) emu_launch(L * ((DV + 31) / 32), H, 128, 0, [&] { combine(o.data(), ws.data(), L, H, DV, splits); });
        std::vector<double> got, want = attention_reference(q, kk, v, L, S, H, HK, D, DV, scale);
        for (auto x : o) got.push_back(to_f32(x));
        char what[128];
        std::snprintf(what, sizeof what, "attention %s (%d,%d,%d,%d,%d) %d splits%s", dname<T>(), L, S, H, HK, D, splits,
                      dec ? " decode kernel" : "");
        close(got, want, tol_of<T>(), what);
    }
}

// The grouped decode kernels (D = 64, 128, 256; HB query heads a block), then the combine:
// groups of 1, 2, 6 and 12 heads (12 > HB: two blocks a KV head, the second partly used), rows
// whose early splits are empty, splits that end inside a batch of a warp's keys, and 45
// splits (the combine's eight-at-a-time loop).
template <typename T>
void test_attention_gqa(void (*const kernels[3])(const T*, const T*, const T*, int, int, int, int, float, int, int, float*),
                        void (*combine)(T*, const float*, int, int, int, int)) {
    // L, S, H, HK, D, splits
    int shapes[][6] = {{1, 300, 6, 1, 64, 5},  {3, 70, 4, 2, 128, 3}, {1, 100, 12, 1, 64, 4},
                       {2, 45, 2, 2, 256, 2},  {1, 37, 8, 2, 128, 2}, {4, 9, 6, 3, 64, 3}, {1, 300, 6, 1, 64, 45}};
    for (auto& sh : shapes) {
        int L = sh[0], S = sh[1], H = sh[2], HK = sh[3], D = sh[4], splits = sh[5];
        int hb_max = D == 256 ? 4 : 8, G = H / HK, hb = (G + hb_max - 1) / hb_max;
        int split_len = (S + splits - 1) / splits;
        auto q = rand_vec<T>((size_t)L * H * D, -1, 1), kk = rand_vec<T>((size_t)S * HK * D, -1, 1),
             v = rand_vec<T>((size_t)S * HK * D, -1, 1);
        std::vector<T> o((size_t)L * H * D);
        float scale = 1.0f / std::sqrt((float)D);
        std::vector<float> ws((size_t)L * H * splits * (D + 2), NAN);
        auto kern = kernels[D == 64 ? 0 : D == 128 ? 1 : 2];
        emu_launch(L * splits, HK * hb, 128, 4 * hb_max * D * 4, [&] {
            kern(q.data(), kk.data(), v.data(), L, H, S, HK, scale, splits, split_len, ws.data());
        });
        emu_launch(L * ((D + 31) / 32), H, 128, 0, [&] { combine(o.data(), ws.data(), L, H, D, splits); });
        std::vector<double> got, want = attention_reference(q, kk, v, L, S, H, HK, D, D, scale);
        for (auto x : o) got.push_back(to_f32(x));
        char what[128];
        std::snprintf(what, sizeof what, "attention %s (%d,%d,%d,%d,%d) %d splits, grouped decode kernel", dname<T>(), L,
                      S, H, HK, D, splits);
        close(got, want, tol_of<T>(), what);
    }
}

// One query row `q` (D elements, scale 1) attending to S keys of one KV head, keys [k0, k1)
// left out (they score -inf, weight 0), in f64: DV outputs.
std::vector<double> attention_without_keys(const float* q, const std::vector<float>& kk, const std::vector<float>& v, int S,
                                           int D, int DV, int k0, int k1) {
    double mx = -INFINITY, sum = 0;
    std::vector<double> p(S, 0.0), want(DV);
    for (int j = 0; j < S; ++j) {
        if (j >= k0 && j < k1) continue;
        double a = 0;
        for (int t = 0; t < D; ++t) a += (double)q[t] * kk[(size_t)j * D + t];
        p[j] = a;
        mx = std::max(mx, a);
    }
    for (int j = 0; j < S; ++j) sum += (p[j] = (j >= k0 && j < k1) ? 0.0 : std::exp(p[j] - mx));
    for (int t = 0; t < DV; ++t) {
        double a = 0;
        for (int j = 0; j < S; ++j) a += p[j] * v[(size_t)j * DV + t];
        want[t] = a / sum;
    }
    return want;
}

// The grouped decode kernel and the combine on special scores (2 heads of one KV head, d 64):
// -inf keys weigh 0 as a warp's first key, its last, a whole split and the first 256 keys; a row
// whose keys are all -inf is NaN, and so is one with a NaN or +inf score anywhere, first included.
void test_attention_gqa_special() {
    const float inf = INFINITY;
    const int D = 64, H = 2;
    enum Kind { NEG, ALL_NEG, NAN_SCORE, POS_INF };
    struct Case { int S, k0, k1, splits, split_len; Kind kind; } cases[] = {
        {100, 0, 1, 4, 32, NEG},       {100, 99, 100, 4, 32, NEG},     {100, 0, 32, 4, 32, NEG},
        {300, 0, 256, 10, 32, NEG},    {100, 0, 100, 4, 32, ALL_NEG},  {100, 50, 51, 4, 32, NAN_SCORE},
        {100, 0, 1, 4, 32, NAN_SCORE}, {100, 50, 51, 4, 32, POS_INF},  {100, 0, 1, 4, 32, POS_INF}};
    for (auto c : cases) {
        int S = c.S;
        auto q = rand_vec<float>((size_t)H * D, 0.01, 0.1), kk = rand_vec<float>((size_t)S * D, 0.1, 1),
             v = rand_vec<float>((size_t)S * D, 0, 1);
        float bad = c.kind == NEG || c.kind == ALL_NEG ? -inf : c.kind == NAN_SCORE ? NAN : inf;
        for (int j = c.k0; j < c.k1; ++j) kk[(size_t)j * D] = bad;  // q > 0: the score is `bad`
        std::vector<double> want((size_t)H * D, NAN);
        if (c.kind == NEG)
            for (int h = 0; h < H; ++h) {
                auto w = attention_without_keys(&q[(size_t)h * D], kk, v, S, D, D, c.k0, c.k1);
                std::copy(w.begin(), w.end(), want.begin() + (size_t)h * D);
            }
        std::vector<float> o((size_t)H * D, 12345.0f), ws((size_t)H * c.splits * (D + 2), NAN);
        emu_launch(c.splits, 1, 128, 4 * 8 * D * 4, [&] {
            self_attention_decode_gqa_f32_64(q.data(), kk.data(), v.data(), 1, H, S, 1, 1.0f, c.splits, c.split_len, ws.data());
        });
        emu_launch(2, H, 128, 0, [&] { self_attention_combine_f32(o.data(), ws.data(), 1, H, D, c.splits); });
        bool ok = true;
        for (int t = 0; t < H * D; ++t)
            ok &= c.kind != NEG ? std::isnan(o[t]) : std::fabs(o[t] - want[t]) <= 1e-5 * (1 + std::fabs(want[t]));
        char what[128];
        std::snprintf(what, sizeof what, "attention grouped decode kernel, %s keys [%d,%d) of %d",
                      c.kind == NEG ? "-inf" : c.kind == ALL_NEG ? "all -inf" : c.kind == NAN_SCORE ? "NaN" : "+inf",
                      c.k0, c.k1, S);
        expect(ok, what);
    }
}

// Keys whose scores are -inf weigh 0 (softmax over the finite ones), in every path: the first
// key of a decode warp's stream, a whole 32-key split, the whole first 256-key chunk; and a row
// whose keys are all -inf is NaN in every path.
void test_attention_neginf() {
    const float inf = INFINITY;
    struct Case { int S, k0, k1, splits, split_len; bool all; } cases[] = {
        {100, 0, 1, 4, 32, false}, {100, 99, 100, 4, 32, false}, {100, 0, 32, 4, 32, false},
        {300, 0, 256, 10, 32, false}, {100, 0, 100, 4, 32, true}};
    for (auto c : cases) {
        int S = c.S, D = 4, DV = 8;
        auto q = rand_vec<float>(D, 0.1, 1), kk = rand_vec<float>((size_t)S * D, 0.1, 1), v = rand_vec<float>((size_t)S * DV, 0, 1);
        for (int j = c.k0; j < c.k1; ++j)
            for (int t = 0; t < D; ++t) kk[(size_t)j * D + t] = -inf;
        std::vector<double> want = c.all ? std::vector<double>(DV, NAN) : attention_without_keys(q.data(), kk, v, S, D, DV, c.k0, c.k1);
        for (int mode = 0; mode < 3; ++mode) {
            int splits = mode ? c.splits : 1, len = mode ? c.split_len : S;
            std::vector<float> o(DV), ws((size_t)splits * (DV + 2), NAN);
            if (mode == 2)
                emu_launch(splits, 1, 128, 4 * DV * 4, [&] {
                    self_attention_decode_f32(q.data(), kk.data(), v.data(), 1, 1, S, 1, D, DV, 1.0f, splits, len, ws.data());
                });
            else
                emu_launch(splits, 1, 128, (D + DV + 256) * 4, [&] {
                    self_attention_f32(o.data(), q.data(), kk.data(), v.data(), 1, 1, S, 1, D, DV, 1.0f, splits, len, ws.data());
                });
            if (splits > 1) emu_launch((DV + 31) / 32, 1, 128, 0, [&] { self_attention_combine_f32(o.data(), ws.data(), 1, 1, DV, splits); });
            bool ok = true;
            for (int t = 0; t < DV; ++t)
                ok &= c.all ? std::isnan(o[t]) : std::fabs(o[t] - want[t]) <= 1e-5 * (1 + std::fabs(want[t]));
            char what[128];
            std::snprintf(what, sizeof what, "attention -inf keys [%d,%d) of %d, %s", c.k0, c.k1, S,
                          mode == 0 ? "one split" : mode == 1 ? "split-KV general kernel" : "split-KV decode kernel");
            expect(ok, what);
        }
    }
}

void test_bias() {
    std::vector<unsigned> b = {1, 2, 3, 4, 5}, y(3 * 8, 0xdead);
    emu_launch(1, 1, 32, 0, [&] { bias_rows_4(y.data(), 8, b.data(), 3, 5); });
    bool ok = true;
    for (int r = 0; r < 3; ++r)
        for (int j = 0; j < 8; ++j) ok &= y[r * 8 + j] == (j < 5 ? b[j] : 0xdeadu);
    expect(ok, "bias_rows_4");
}

#include <chrono>
static void timed(const char* what, void (*f)()) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%-10s %7.0f ms\n", what, ms);
}

int main() {
    timed("binary", [] {
        test_binary<float>(add_f32, swiglu_f32);
        test_binary<f16_t>(add_f16, swiglu_f16);
        test_binary<bf16_t>(add_bf16, swiglu_bf16);
    });
    timed("rms_norm", [] {
        test_rms<float, float>(rms_norm_f32);
        test_rms<f16_t, f16_t>(rms_norm_f16);
        test_rms<f16_t, float>(rms_norm_f16_w32);
        test_rms<bf16_t, bf16_t>(rms_norm_bf16);
        test_rms<bf16_t, float>(rms_norm_bf16_w32);
    });
    timed("rope", [] {
        test_rope<float>(rope_f32_i64);
        test_rope<f16_t>(rope_f16_i64);
        test_rope<bf16_t>(rope_bf16_i64);
    });
    timed("argmax", [] {
        test_argmax<float>(argmax_f32);
        test_argmax<f16_t>(argmax_f16);
        test_argmax<bf16_t>(argmax_bf16);
    });
    timed("embedding", [] {
        test_embedding<u16, i64>(embedding_2_i64);
        test_embedding<unsigned, int>(embedding_4_i32);
    });
    timed("rearrange", [] {
        test_rearrange<unsigned char>(rearrange_1);
        test_rearrange<u16>(rearrange_2);
        test_rearrange<unsigned>(rearrange_4);
        test_rearrange<unsigned long long>(rearrange_8);
        test_rearrange<b16_t>(rearrange_16);
    });
    timed("attention", [] {
        test_attention<float>(self_attention_f32, self_attention_combine_f32, self_attention_decode_f32);
        test_attention<f16_t>(self_attention_f16, self_attention_combine_f16, self_attention_decode_f16);
        test_attention<bf16_t>(self_attention_bf16, self_attention_combine_bf16, self_attention_decode_bf16);
        test_attention_neginf();
        static void (*const gf32[3])(const float*, const float*, const float*, int, int, int, int, float, int, int, float*) = {
            self_attention_decode_gqa_f32_64, self_attention_decode_gqa_f32_128, self_attention_decode_gqa_f32_256};
        static void (*const gf16[3])(const f16_t*, const f16_t*, const f16_t*, int, int, int, int, float, int, int, float*) = {
            self_attention_decode_gqa_f16_64, self_attention_decode_gqa_f16_128, self_attention_decode_gqa_f16_256};
        static void (*const gbf16[3])(const bf16_t*, const bf16_t*, const bf16_t*, int, int, int, int, float, int, int,
                                      float*) = {self_attention_decode_gqa_bf16_64, self_attention_decode_gqa_bf16_128,
                                                 self_attention_decode_gqa_bf16_256};
        test_attention_gqa<float>(gf32, self_attention_combine_f32);
        test_attention_gqa<f16_t>(gf16, self_attention_combine_f16);
        test_attention_gqa<bf16_t>(gbf16, self_attention_combine_bf16);
        test_attention_gqa_special();
    });
    timed("bias", [] {
        test_bias();
    });
    std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
