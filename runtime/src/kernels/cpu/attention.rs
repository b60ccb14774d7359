//! Causal self-attention with grouped KV heads (spec §2.7), in f32:
//! `out[i, h] = softmax_j(scale * q[i, h] . k[j, g]) v[j, g]` over `j <= i + (S - L)`,
//! `g = h / (H / HK)`.
//!
//! Work items are (KV head, query row, key chunk): each item streams its keys once for all the
//! query heads of the group (so K and V are read once per group, not once per head). Decoding
//! (few query rows) splits the keys into chunks across threads and merges the partial softmaxes
//! (max, sum, weighted values) afterwards, as flash-decoding does. The split depends on the
//! shape alone, so results are the same bits whatever the thread count.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use half::{bf16, f16};

use super::simd::{is_bf16, multiversion, Elem, Scalar, Simd};
use super::{threads, SendPtr};

/// Shapes of one call (all tensors contiguous).
#[derive(Clone, Copy, Debug)]
pub struct AttnDims {
    /// Query rows L, query heads H, key rows S, KV heads HK, head size D, value size DV.
    pub l: usize,
    pub h: usize,
    pub s: usize,
    pub hk: usize,
    pub d: usize,
    pub dv: usize,
    pub scale: f32,
}

#[inline(always)]
unsafe fn dot<S: Simd, T: Elem>(s: S, q: *const f32, k: *const T, d: usize) -> f32 {
    let l = S::LANES;
    let mut i = 0;
    // SAFETY: d elements each.
    unsafe {
        let mut a0 = s.splat(0.0);
        let mut a1 = s.splat(0.0);
        while i + 2 * l <= d {
            a0 = s.fma(s.load(q.add(i)), T::load(s, k.add(i)), a0);
            a1 = s.fma(s.load(q.add(i + l)), T::load(s, k.add(i + l)), a1);
            i += 2 * l;
        }
        while i + l <= d {
            a0 = s.fma(s.load(q.add(i)), T::load(s, k.add(i)), a0);
            i += l;
        }
        let mut t = s.reduce_sum(s.add(a0, a1));
        while i < d {
            t += *q.add(i) * T::load(Scalar, k.add(i));
            i += 1;
        }
        t
    }
}

/// `acc[0..n] = sum_j p[j] * v[j * vs + 0..n]` for `nk` keys: the accumulators stay in
/// registers (8 vectors per tile) while the value rows stream from cache.
#[inline(always)]
unsafe fn weighted_sum<S: Simd, T: Elem>(
    s: S,
    acc: *mut f32,
    p: *const f32,
    v: *const T,
    vs: usize,
    nk: usize,
    n: usize,
) {
    let l = S::LANES;
    let tile = 8 * l;
    let mut t0 = 0;
    // SAFETY: nk rows of n elements at stride vs, nk weights, n outputs.
    unsafe {
        while t0 + tile <= n {
            let z = s.splat(0.0);
            let mut a = [z; 8];
            for j in 0..nk {
                let pj = s.splat(*p.add(j));
                let row = v.add(j * vs + t0);
                for (u, au) in a.iter_mut().enumerate() {
                    *au = s.fma(pj, T::load(s, row.add(u * l)), *au);
                }
            }
            for (u, au) in a.iter().enumerate() {
                s.store(acc.add(t0 + u * l), *au);
            }
            t0 += tile;
        }
        while t0 + l <= n {
            let mut a = s.splat(0.0);
            for j in 0..nk {
                a = s.fma(s.splat(*p.add(j)), T::load(s, v.add(j * vs + t0)), a);
            }
            s.store(acc.add(t0), a);
            t0 += l;
        }
        while t0 < n {
            let mut a = 0.0f32;
            for j in 0..nk {
                a += *p.add(j) * T::load(Scalar, v.add(j * vs + t0));
            }
            *acc.add(t0) = a;
            t0 += 1;
        }
    }
}

/// Scores of `nb <= LANES` keys starting at `k` (row stride `ks`) against one query row `q`
/// (`d % LANES == 0`): per-key partial vectors, then one lane-reduction for the block.
#[inline(always)]
unsafe fn score_block<S: Simd, T: Elem>(
    s: S,
    q: *const f32,
    k: *const T,
    ks: usize,
    nb: usize,
    d: usize,
    out: *mut f32,
) {
    let l = S::LANES;
    let z = s.splat(0.0);
    let mut acc = [z; 16];
    // SAFETY: nb key rows of d elements, d query values, nb outputs.
    unsafe {
        for (t, a) in acc.iter_mut().enumerate().take(nb) {
            let row = k.add(t * ks);
            let mut a0 = z;
            let mut a1 = z;
            let mut i = 0;
            while i + 2 * l <= d {
                a0 = s.fma(s.load(q.add(i)), T::load(s, row.add(i)), a0);
                a1 = s.fma(s.load(q.add(i + l)), T::load(s, row.add(i + l)), a1);
                i += 2 * l;
            }
            if i < d {
                a0 = s.fma(s.load(q.add(i)), T::load(s, row.add(i)), a0);
            }
            *a = s.add(a0, a1);
        }
        let r = s.reduce_lanes(&acc[..l]);
        if nb == l {
            s.store(out, r);
        } else {
            let mut tmp = [0f32; 16];
            s.store(tmp.as_mut_ptr(), r);
            for (t, x) in tmp.iter().enumerate().take(nb) {
                *out.add(t) = *x;
            }
        }
    }
}

/// Scores of 4 keys from `k` (row stride `ks`) against `HT` query rows (`q`, row stride `d`;
/// `d % LANES == 0`), `out[h * os + t]`: 4 * HT independent accumulator chains (one per
/// query-key pair) so the FMAs overlap instead of waiting on each other, each key vector
/// loaded once for the HT heads and each query vector once for the 4 keys. For levels with
/// 8 lanes (two heads: the 8 sums reduce in one transpose).
#[inline(always)]
// register tiles: indexed loops over the tile's rows and keys read clearest
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn score_tile<S: Simd, T: Elem, const HT: usize, const PAIRS: bool>(
    s: S,
    q: *const f32,
    k: *const T,
    ks: usize,
    d: usize,
    out: *mut f32,
    os: usize,
) {
    let l = S::LANES;
    let z = s.splat(0.0);
    let mut acc = [[z; 4]; HT];
    // SAFETY: 4 key rows and HT query rows of d elements; HT rows of 4 outputs.
    unsafe {
        let mut i = 0;
        if PAIRS {
            // bf16 keys, 2 LANES at a time as (even, odd) pairs; q rows are in pair order.
            while i < d {
                let qe: [S::V; HT] = std::array::from_fn(|h| s.load(q.add(h * d + i)));
                let qo: [S::V; HT] = std::array::from_fn(|h| s.load(q.add(h * d + i + l)));
                for t in 0..4 {
                    let (ke, ko) = s.load_bf16_pairs(k.add(t * ks + i) as *const u16);
                    for h in 0..HT {
                        acc[h][t] = s.fma(qe[h], ke, acc[h][t]);
                        acc[h][t] = s.fma(qo[h], ko, acc[h][t]);
                    }
                }
                i += 2 * l;
            }
        } else {
            while i < d {
                let kv = [
                    T::load(s, k.add(i)),
                    T::load(s, k.add(ks + i)),
                    T::load(s, k.add(2 * ks + i)),
                    T::load(s, k.add(3 * ks + i)),
                ];
                for (h, ah) in acc.iter_mut().enumerate() {
                    let qv = s.load(q.add(h * d + i));
                    for t in 0..4 {
                        ah[t] = s.fma(qv, kv[t], ah[t]);
                    }
                }
                i += l;
            }
        }
        if HT * 4 == l {
            let flat: [S::V; 8] =
                std::array::from_fn(|x| if x / 4 < HT { acc[x / 4][x % 4] } else { z });
            let mut r = [0f32; 16];
            s.store(r.as_mut_ptr(), s.reduce_lanes(&flat[..l]));
            for h in 0..HT {
                for t in 0..4 {
                    *out.add(h * os + t) = r[h * 4 + t];
                }
            }
        } else {
            for (h, ah) in acc.iter().enumerate() {
                for (t, a) in ah.iter().enumerate() {
                    *out.add(h * os + t) = s.reduce_sum(*a);
                }
            }
        }
    }
}

/// `acc[h][t0 .. t0 + W LANES] = sum_j p[h][j] v[j][t0 ..]` for `HC` heads at once: each value
/// row tile is loaded once for all the heads of the group. `HC * W` accumulators stay in
/// registers (W = 4 with 32 vector registers, 2 with 16). `first`: start from zero, else add
/// to what `acc` holds. bf16 values load as pairs (`load_bf16_pairs`), so the tile's
/// accumulators are in pair order (`pair_order` per 2 LANES) until the caller restores it.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn pv_tile<S: Simd, T: Elem, const HC: usize, const W: usize>(
    s: S,
    acc: *mut f32,
    acc_stride: usize,
    p: *const f32,
    p_stride: usize,
    v: *const T,
    vs: usize,
    nk: usize,
    t0: usize,
    first: bool,
) {
    let l = S::LANES;
    let z = s.splat(0.0);
    let mut a = [[z; W]; HC];
    // SAFETY: nk value rows (stride vs) with W LANES values from t0; HC weight rows.
    unsafe {
        if !first {
            for (h, ah) in a.iter_mut().enumerate() {
                for (u, au) in ah.iter_mut().enumerate() {
                    *au = s.load(acc.add(h * acc_stride + t0 + u * l));
                }
            }
        }
        for j in 0..nk {
            let row = v.add(j * vs + t0);
            let vv: [S::V; W] = if is_bf16::<T>() {
                // (even, odd) pairs of each 2 LANES block: `acc` ends up in pair order.
                let mut vv = [z; W];
                for u in (0..W).step_by(2) {
                    (vv[u], vv[u + 1]) = s.load_bf16_pairs(row.add(u * l) as *const u16);
                }
                vv
            } else {
                std::array::from_fn(|u| T::load(s, row.add(u * l)))
            };
            for (h, ah) in a.iter_mut().enumerate() {
                let ph = s.splat(*p.add(h * p_stride + j));
                for u in 0..W {
                    ah[u] = s.fma(ph, vv[u], ah[u]);
                }
            }
        }
        for (h, ah) in a.iter().enumerate() {
            for (u, au) in ah.iter().enumerate() {
                s.store(acc.add(h * acc_stride + t0 + u * l), *au);
            }
        }
    }
}

/// Softmax weights `exp(x)` (x = score - max <= 0) below `e^WEIGHT_FLOOR` are taken as 0.
/// `Simd::exp` clamps its argument at -87 (the scalar level at -86.95): a key 100 below the
/// maximum weighed e^-87 instead of e^-100, which against a value of 1e38 gave 1.7 where the
/// answer is 4e-6 (session 17's audit). The weights dropped are below 1.7e-38 of the largest.
const WEIGHT_FLOOR: f32 = -86.95;

/// `exp(x)`, or 0 where `x < WEIGHT_FLOOR` (NaN stays NaN): a 0/1 factor from arithmetic
/// alone (the step `(x - floor) * 2^99 + 1` clamped to [0, 1]), so every level shares it.
#[inline(always)]
fn weight<S: Simd>(s: S, x: S::V) -> S::V {
    let step = s.fma(
        s.sub(x, s.splat(WEIGHT_FLOOR)),
        s.splat(f32::from_bits(0x7100_0000)), // 2^99
        s.splat(1.0),
    );
    // x second in max/min: x86 max/min return their second operand when one is NaN
    let keep = s.min(s.splat(1.0), s.max(s.splat(0.0), step));
    s.mul(s.exp(x), keep)
}

/// `row[j] = exp(row[j] - m)`, by `weight` where `floor` (a score of the row is more than
/// -WEIGHT_FLOOR below `m`); returns the sum.
#[inline(always)]
unsafe fn exp_sum<S: Simd>(s: S, row: *mut f32, n: usize, m: f32, floor: bool) -> f32 {
    let l = S::LANES;
    let mut i = 0;
    // SAFETY: n elements.
    unsafe {
        let mv = s.splat(m);
        let mut acc = s.splat(0.0);
        while i + l <= n {
            let x = s.sub(s.load(row.add(i)), mv);
            let e = if floor { weight(s, x) } else { s.exp(x) };
            s.store(row.add(i), e);
            acc = s.add(acc, e);
            i += l;
        }
        let mut t = s.reduce_sum(acc);
        while i < n {
            let e = if floor {
                weight(Scalar, *row.add(i) - m)
            } else {
                Scalar.exp(*row.add(i) - m)
            };
            *row.add(i) = e;
            t += e;
            i += 1;
        }
        t
    }
}

/// Scores of `grp` bf16 query rows (contiguous, `d` each) against `n` bf16 keys (row stride
/// `ks`) with `vdpbf16ps`: each instruction multiplies 32 bf16 pairs exactly in f32 and adds
/// them into 16 f32 lanes, so nothing is rounded to bf16 and no key is widened. The query rows
/// of up to three heads stay in registers (`dp_block`); 16 keys at a time are reduced by one
/// lane transpose per head, then scaled: `out[h * ldo + j] = scale * (q_h . k_j)`.
///
/// # Safety
/// AVX-512 F/BW and AVX512_BF16 present; `d <= 256`; the rows are readable; `out` holds
/// `grp` rows of `n` floats, `ldo` apart.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn scores_bf16_dp(
    q: *const bf16,
    k: *const bf16,
    ks: usize,
    n: usize,
    d: usize,
    grp: usize,
    scale: f32,
    out: *mut f32,
    ldo: usize,
) {
    // SAFETY: forwarded contract; the const-size bodies unroll fully (a dynamic count left
    // the 4-instruction chains per key unrolled and cost 2.7 cycles per instruction).
    unsafe {
        match (d.div_ceil(32), d % 32 == 0) {
            (4, true) => scores_dp_body::<4, false>(q, k, ks, n, d, grp, scale, out, ldo),
            (2, true) => scores_dp_body::<2, false>(q, k, ks, n, d, grp, scale, out, ldo),
            (8, true) => scores_dp_body::<8, false>(q, k, ks, n, d, grp, scale, out, ldo),
            (1, _) => scores_dp_body::<1, true>(q, k, ks, n, d, grp, scale, out, ldo),
            (2, _) => scores_dp_body::<2, true>(q, k, ks, n, d, grp, scale, out, ldo),
            (3, _) => scores_dp_body::<3, true>(q, k, ks, n, d, grp, scale, out, ldo),
            (4, _) => scores_dp_body::<4, true>(q, k, ks, n, d, grp, scale, out, ldo),
            (5, _) => scores_dp_body::<5, true>(q, k, ks, n, d, grp, scale, out, ldo),
            (6, _) => scores_dp_body::<6, true>(q, k, ks, n, d, grp, scale, out, ldo),
            (7, _) => scores_dp_body::<7, true>(q, k, ks, n, d, grp, scale, out, ldo),
            _ => scores_dp_body::<8, true>(q, k, ks, n, d, grp, scale, out, ldo),
        }
    }
}

/// `scores_bf16_dp` for `NV = ceil(d / 32)` vectors per row; `MASKED`: the last one partial.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]
#[allow(clippy::too_many_arguments)]
unsafe fn scores_dp_body<const NV: usize, const MASKED: bool>(
    q: *const bf16,
    k: *const bf16,
    ks: usize,
    n: usize,
    d: usize,
    grp: usize,
    scale: f32,
    out: *mut f32,
    ldo: usize,
) {
    use std::arch::x86_64::{
        __m512, __mmask16, __mmask32, _mm512_mask_storeu_ps, _mm512_mul_ps, _mm512_set1_ps,
    };
    let rem = d % 32;
    let tail: __mmask32 = if rem == 0 { !0 } else { (1u32 << rem) - 1 };
    // SAFETY: per the contract (`dp_block` reads only the d elements of each row).
    unsafe {
        let sv = _mm512_set1_ps(scale);
        // Heads in threes (the query vectors of three heads and the twelve sums of a 3 x 4
        // tile fit the 32 registers for d <= 128), keys in blocks of 16 (one lane transpose
        // per head): each key vector is loaded once per three heads instead of once per head.
        let ht = if NV <= 4 { 3 } else { 1 };
        // Not zeroed here (a 3 KiB memset per call was 6% of hot decode): `dp_block` writes
        // all 16 vectors of each row it fills.
        let mut acc = std::mem::MaybeUninit::<[[__m512; 16]; 3]>::uninit();
        let a = acc.as_mut_ptr() as *mut __m512;
        let mut jb = 0;
        while jb < n {
            let nb = (n - jb).min(16);
            let kb = k.add(jb * ks);
            let mut h0 = 0;
            while h0 < grp {
                let hc = (grp - h0).min(ht);
                let qh = q.add(h0 * d);
                match hc {
                    3 => dp_block::<NV, MASKED, 3>(qh, kb, ks, d, nb, tail, a),
                    2 => dp_block::<NV, MASKED, 2>(qh, kb, ks, d, nb, tail, a),
                    _ => dp_block::<NV, MASKED, 1>(qh, kb, ks, d, nb, tail, a),
                }
                for h in 0..hc {
                    // row h was written in full by `dp_block`
                    let sums = &*(a.add(h * 16) as *const [__m512; 16]);
                    let r = _mm512_mul_ps(crate::kernels::cpu::sgemm_nt::reduce16(sums), sv);
                    let o = out.add((h0 + h) * ldo + jb);
                    _mm512_mask_storeu_ps(o, ((1u32 << nb) - 1) as __mmask16, r);
                }
                h0 += hc;
            }
            jb += nb;
        }
    }
}

/// For `HT` query rows (`q`, `d` apart) and `nb <= 16` keys (`k`, `ks` apart): key `t`'s
/// partial dot-product vector with row `h` into `acc[h * 16 + t]` (lanes still to be summed;
/// zeros for `t >= nb`, so that all `HT * 16` vectors are written),
/// keys in tiles of 4 so that `HT * 4` sums stay in registers while each key vector is loaded
/// once for the `HT` rows. Not inlined: inside its caller the sums were spilled to the stack.
///
/// # Safety
/// As `scores_bf16_dp`; `acc` holds `HT * 16` vectors.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]
#[inline(never)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn dp_block<const NV: usize, const MASKED: bool, const HT: usize>(
    q: *const bf16,
    k: *const bf16,
    ks: usize,
    d: usize,
    nb: usize,
    tail: std::arch::x86_64::__mmask32,
    acc: *mut std::arch::x86_64::__m512,
) {
    use std::arch::x86_64::{
        __m512bh, _mm512_dpbf16_ps, _mm512_loadu_si512, _mm512_maskz_loadu_epi16, _mm512_setzero_ps,
    };
    // SAFETY: per the contract; masked loads read only the d elements of each row.
    unsafe {
        let ld = |p: *const bf16, v: usize| -> __m512bh {
            std::mem::transmute(if MASKED && v + 1 == NV {
                _mm512_maskz_loadu_epi16(tail, p.add(32 * v) as *const i16)
            } else {
                _mm512_loadu_si512(p.add(32 * v) as *const _)
            })
        };
        let qv: [[__m512bh; NV]; HT] =
            std::array::from_fn(|h| std::array::from_fn(|v| ld(q.add(h * d), v)));
        let mut t0 = 0;
        while t0 < nb {
            let nt = (nb - t0).min(4);
            let mut a = [[_mm512_setzero_ps(); 4]; HT];
            for t in 0..4 {
                if t < nt {
                    let row = k.add((t0 + t) * ks);
                    for v in 0..NV {
                        let kv = ld(row, v);
                        for h in 0..HT {
                            a[h][t] = _mm512_dpbf16_ps(a[h][t], qv[h][v], kv);
                        }
                    }
                }
            }
            for (h, ah) in a.iter().enumerate() {
                for (t, x) in ah.iter().enumerate() {
                    *acc.add(h * 16 + t0 + t) = *x;
                }
            }
            t0 += 4;
        }
        for h in 0..HT {
            for t in t0..16 {
                *acc.add(h * 16 + t) = _mm512_setzero_ps();
            }
        }
    }
}

/// `out[j] = bf16(exp(row[j] - m))` for `j < n` and `out[n] = 0` when `n` is odd (the pair
/// partner of the last key); returns the sum of the rounded values, so that the weights the
/// value pass uses and the denominator agree. The rounding (relative error below 2^-9 per
/// weight) is what lets `pv_dp_tile` multiply two keys per instruction; the reduced-precision
/// attention kernels of PyTorch (CPU flash attention) and of the GPU libraries round the
/// probabilities to the input type before the value product in the same way.
///
/// # Safety
/// AVX-512 F/BW/DQ and AVX512_BF16 present; `row` holds `n` floats, `out` `n + 1` bf16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]
unsafe fn exp_round_bf16(row: *const f32, n: usize, m: f32, out: *mut u16, floor: bool) -> f32 {
    use std::arch::x86_64::{
        __m256i, __mmask16, _mm256_mask_storeu_epi16, _mm512_castsi512_ps, _mm512_cvtepu16_epi32,
        _mm512_cvtneps_pbh, _mm512_mask_add_ps, _mm512_maskz_loadu_ps, _mm512_reduce_add_ps,
        _mm512_set1_ps, _mm512_setzero_ps, _mm512_slli_epi32, _mm512_sub_ps,
    };
    // SAFETY: per the contract; the masked loads and stores touch only the first n elements.
    unsafe {
        let s = super::simd::Avx512::<true>::new_unchecked();
        let mv = _mm512_set1_ps(m);
        let mut acc = _mm512_setzero_ps();
        let mut j = 0;
        while j < n {
            let k: __mmask16 = if n - j >= 16 {
                !0
            } else {
                (1u16 << (n - j)) - 1
            };
            let x = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, row.add(j)), mv);
            let e = if floor { weight(s, x) } else { s.exp(x) };
            // exp(x - m) <= 1; the instruction flushes results below 2^-126 to zero, and the
            // sum below adds the values as rounded.
            let b: __m256i = std::mem::transmute(_mm512_cvtneps_pbh(e));
            _mm256_mask_storeu_epi16(out.add(j) as *mut i16, k, b);
            let back = _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(b)));
            acc = _mm512_mask_add_ps(acc, k, acc, back);
            j += 16;
        }
        if n % 2 == 1 {
            *out.add(n) = 0;
        }
        _mm512_reduce_add_ps(acc)
    }
}

/// Keys per block of the bf16 weighted-value pass (even: pairs never straddle two blocks).
const PV_DP_KEYS: usize = 128;

/// The weighted values of `HC` heads with `vdpbf16ps`, two keys per instruction:
/// `acc[h][d] (+)= sum_j p[h][j] v[j][d]` for the `32 * W` columns from `32 * c0` (the last
/// chunk partial when `dv % 32 != 0`), keys `0..nk`. `p` rows hold the weights as bf16 pairs
/// (`exp_round_bf16`), `ps` apart (even); rows of keys `j` and `j + 1` are interleaved
/// (`vpunpck[lh]wd`) so that each 32-bit lane holds the pair a weight pair multiplies. The
/// interleave permutes the columns within each 128-bit block; the accumulators are put back in
/// order (`vpermt2ps`) when stored, and `acc` holds them in order. An odd last key is paired
/// with zeros (its row is the last one that may be read). `first`: start from zero.
///
/// # Safety
/// As `exp_round_bf16`; `nk` value rows `vs` apart with `dv` readable columns; `p` rows hold
/// `nk` (rounded up to even) weights; `acc` rows (`acc_stride` apart) hold `dv` floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn pv_dp_tile<const HC: usize, const W: usize>(
    acc: *mut f32,
    acc_stride: usize,
    p: *const u16,
    ps: usize,
    v: *const bf16,
    vs: usize,
    nk: usize,
    c0: usize,
    dv: usize,
    first: bool,
) {
    use std::arch::x86_64::{
        __m512, __m512bh, __m512i, __mmask16, __mmask32, _mm512_dpbf16_ps, _mm512_loadu_epi32,
        _mm512_mask_storeu_ps, _mm512_maskz_loadu_epi16, _mm512_maskz_loadu_ps,
        _mm512_permutex2var_ps, _mm512_set1_epi32, _mm512_setzero_ps, _mm512_setzero_si512,
        _mm512_unpackhi_epi16, _mm512_unpacklo_epi16,
    };
    // Lane 4b + i of the low interleave holds column 8b + i, of the high one 8b + 4 + i
    // (b: the 128-bit block, i < 4).
    const TO_LO: [i32; 16] = [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27];
    const TO_HI: [i32; 16] = [4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31];
    const FROM0: [i32; 16] = [0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23];
    const FROM1: [i32; 16] = [8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31];
    // SAFETY: per the contract; masked loads and stores keep to the dv columns.
    unsafe {
        let idx = |t: [i32; 16]| -> __m512i { _mm512_loadu_epi32(t.as_ptr()) };
        // columns of chunk c0 + u present: bf16 mask (32) and the two f32 halves (16 each)
        let cols = |u: usize| dv.saturating_sub(32 * (c0 + u)).min(32);
        let m32 = |u: usize| -> __mmask32 {
            let c = cols(u);
            if c == 32 {
                !0
            } else {
                (1u32 << c) - 1
            }
        };
        let m16 = |u: usize, half: usize| -> __mmask16 {
            let c = cols(u).saturating_sub(16 * half).min(16);
            if c == 16 {
                !0
            } else {
                ((1u32 << c) - 1) as __mmask16
            }
        };
        let z = _mm512_setzero_ps();
        let mut a = [[z; 4]; HC];
        if !first {
            let (lo, hi) = (idx(TO_LO), idx(TO_HI));
            for (h, ah) in a.iter_mut().enumerate() {
                for u in 0..W {
                    let row = acc.add(h * acc_stride + 32 * (c0 + u));
                    let n0 = _mm512_maskz_loadu_ps(m16(u, 0), row);
                    let n1 = _mm512_maskz_loadu_ps(m16(u, 1), row.add(16));
                    ah[2 * u] = _mm512_permutex2var_ps(n0, lo, n1);
                    ah[2 * u + 1] = _mm512_permutex2var_ps(n0, hi, n1);
                }
            }
        }
        let ld = |row: *const bf16, u: usize| -> __m512i {
            _mm512_maskz_loadu_epi16(m32(u), row.add(32 * (c0 + u)) as *const i16)
        };
        let mut j = 0;
        while j < nk {
            let r0 = v.add(j * vs);
            let pair = j + 1 < nk;
            let mut x = [[_mm512_setzero_si512(); 2]; 2];
            for (u, xu) in x.iter_mut().enumerate().take(W) {
                let x0 = ld(r0, u);
                let x1 = if pair {
                    ld(r0.add(vs), u)
                } else {
                    _mm512_setzero_si512()
                };
                *xu = [_mm512_unpacklo_epi16(x0, x1), _mm512_unpackhi_epi16(x0, x1)];
            }
            for (h, ah) in a.iter_mut().enumerate() {
                let w = std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(
                    (p.add(h * ps + j) as *const i32).read(),
                ));
                for u in 0..W {
                    let [lo, hi] = x[u].map(|y| std::mem::transmute::<__m512i, __m512bh>(y));
                    ah[2 * u] = _mm512_dpbf16_ps(ah[2 * u], lo, w);
                    ah[2 * u + 1] = _mm512_dpbf16_ps(ah[2 * u + 1], hi, w);
                }
            }
            j += 2;
        }
        let (f0, f1) = (idx(FROM0), idx(FROM1));
        for (h, ah) in a.iter().enumerate() {
            for u in 0..W {
                let row = acc.add(h * acc_stride + 32 * (c0 + u));
                let (lo, hi): (__m512, __m512) = (ah[2 * u], ah[2 * u + 1]);
                _mm512_mask_storeu_ps(row, m16(u, 0), _mm512_permutex2var_ps(lo, f0, hi));
                _mm512_mask_storeu_ps(row.add(16), m16(u, 1), _mm512_permutex2var_ps(lo, f1, hi));
            }
        }
    }
}

/// The value pass of a bf16 item on the `vdpbf16ps` path: `acc[h * dv ..]` for the `grp` heads,
/// weights `p` (bf16 pairs, rows `ps` apart) over keys `0..n` of `v` (rows `vs` apart).
///
/// # Safety
/// As `pv_dp_tile` for all `grp` heads and `dv` columns.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn pv_dp(
    acc: *mut f32,
    p: *const u16,
    ps: usize,
    v: *const bf16,
    vs: usize,
    n: usize,
    grp: usize,
    dv: usize,
) {
    let chunks = dv.div_ceil(32);
    // SAFETY: forwarded contract.
    unsafe {
        // At least one pass, so that no keys (n == 0) still zero the accumulators.
        let mut kb0 = 0;
        loop {
            let nb = (n - kb0).min(PV_DP_KEYS);
            let first = kb0 == 0;
            let vb = v.add(kb0 * vs);
            let mut h0 = 0;
            while h0 < grp {
                let hc = (grp - h0).min(6);
                let (a, pp) = (acc.add(h0 * dv), p.add(h0 * ps + kb0));
                let mut c0 = 0;
                while c0 < chunks {
                    let w2 = c0 + 2 <= chunks;
                    macro_rules! tile {
                        ($($hc:literal)*) => {
                            match (hc, w2) {
                                $(($hc, true) => pv_dp_tile::<$hc, 2>(a, dv, pp, ps, vb, vs, nb, c0, dv, first),
                                  ($hc, false) => pv_dp_tile::<$hc, 1>(a, dv, pp, ps, vb, vs, nb, c0, dv, first),)*
                                _ => unreachable!(),
                            }
                        };
                    }
                    tile!(1 2 3 4 5 6);
                    c0 += if w2 { 2 } else { 1 };
                }
                h0 += hc;
            }
            kb0 += nb;
            if kb0 >= n {
                break;
            }
        }
    }
}

/// Keys per block of the score pass between prefetches.
const PREFETCH_KEYS: usize = 16;

/// Prefetches into L2, for the keys `jb..je` of a chunk about to be scored: the K rows
/// `2 * PREFETCH_KEYS` keys further on, and the V rows of `jb..je` for the value pass that
/// follows. With a cold cache (decoding reads each layer's KV cache once per token) the
/// score tiles read several rows at once, a pattern the hardware prefetchers do not follow:
/// cold decode attention ran at half the speed of a copy of the same bytes before (performance
/// log). Into L1 (`_MM_HINT_T0`) the same prefetches made it slower. Prefetches past the end
/// of a tensor are harmless: they never fault.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn prefetch_keys<T>(
    kbase: *const T,
    vbase: *const T,
    ks: usize,
    vs: usize,
    jb: usize,
    je: usize,
    d: usize,
    dv: usize,
) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
        let rows = |base: *const T, stride: usize, from: usize, to: usize, n: usize| {
            let bytes = n * std::mem::size_of::<T>();
            for j in from..to {
                let row = base.wrapping_add(j * stride) as *const i8;
                let mut b = 0;
                while b < bytes {
                    // SAFETY: a prefetch never faults, whatever the address.
                    unsafe { _mm_prefetch::<_MM_HINT_T1>(row.wrapping_add(b)) };
                    b += 64;
                }
            }
        };
        let ahead = 2 * PREFETCH_KEYS;
        rows(kbase, ks, jb + ahead, je + ahead, d);
        rows(vbase, vs, jb, je, dv);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (kbase, vbase, ks, vs, jb, je, d, dv);
}

/// Keys per block of the weighted-value pass.
const PV_KEYS: usize = 32;

/// One item: KV head `g`, query row `i`, keys `j0..j1`. Writes `m[G]`, `lsum[G]`,
/// `acc[G * dv]` (unnormalised). `dp`: bf16 scores and values with `vdpbf16ps`
/// (`scores_by_bf16_dot` and the queries free of subnormals: `gemv::bf16_dot_exact`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn item_body<S: Simd, T: Elem>(
    s: S,
    dims: *const AttnDims,
    q: *const T,
    k: *const T,
    v: *const T,
    g: usize,
    i: usize,
    j0: usize,
    j1: usize,
    scratch: *mut f32,
    m: *mut f32,
    lsum: *mut f32,
    acc: *mut f32,
    dp: bool,
) {
    // SAFETY: the caller sized every buffer from `dims`; indices are in range.
    unsafe {
        let dm = *dims;
        let grp = dm.h / dm.hk;
        let n = j1 - j0;
        // scratch: q rows (grp * d) then scores (grp * n)
        let qf = scratch;
        let sc = scratch.add(grp * dm.d);
        for hh in 0..grp {
            let qrow = q.add((i * dm.h + g * grp + hh) * dm.d);
            for t in 0..dm.d {
                *qf.add(hh * dm.d + t) = (*qrow.add(t)).to_f32() * dm.scale;
            }
        }
        let ks = dm.hk * dm.d;
        let kbase = k.add((j0 * dm.hk + g) * dm.d);
        let vs = dm.hk * dm.dv;
        let vbase = v.add((j0 * dm.hk + g) * dm.dv);
        #[cfg(target_arch = "x86_64")]
        let use_tiles = crate::kernels::cpu::sgemm_nt::available() && n > 0;
        #[cfg(not(target_arch = "x86_64"))]
        let use_tiles = false;
        let use_dp = n > 0 && is_bf16::<T>() && dp;
        // bf16 weights of the dp path, after the widened-key region (`grp` rows there):
        // `grp` rows of `n` rounded up to even
        #[cfg(target_arch = "x86_64")]
        let pbs = n + n % 2;
        #[cfg(target_arch = "x86_64")]
        let pb = sc.add(grp * n + grp * dm.d) as *mut u16;
        if dm.d == 0 {
            // empty heads: every score is 0 (each query averages the values it sees)
            std::ptr::write_bytes(sc, 0, grp * n);
        } else if use_dp {
            #[cfg(target_arch = "x86_64")]
            for jb in (0..n).step_by(PREFETCH_KEYS) {
                let je = (jb + PREFETCH_KEYS).min(n);
                prefetch_keys(kbase, vbase, ks, vs, jb, je, dm.d, dm.dv);
                scores_bf16_dp(
                    q.add((i * dm.h + g * grp) * dm.d) as *const bf16,
                    kbase.add(jb * ks) as *const bf16,
                    ks,
                    je - jb,
                    dm.d,
                    grp,
                    dm.scale,
                    sc.add(jb),
                    n,
                );
            }
        } else if use_tiles {
            // Scores as a small NT GEMM (heads x keys over d): 4x4 register tiles reuse each
            // loaded q and k vector four times.
            let (kf, ldk) = if std::mem::size_of::<T>() == 4 {
                (kbase as *const f32, ks)
            } else {
                let kf = sc.add(grp * n);
                for jj in 0..n {
                    let src = kbase.add(jj * ks);
                    let dst = kf.add(jj * dm.d);
                    let mut i = 0;
                    while i + S::LANES <= dm.d {
                        s.store(dst.add(i), T::load(s, src.add(i)));
                        i += S::LANES;
                    }
                    while i < dm.d {
                        *dst.add(i) = T::load(Scalar, src.add(i));
                        i += 1;
                    }
                }
                (kf as *const f32, dm.d)
            };
            #[cfg(target_arch = "x86_64")]
            for jb in (0..n).step_by(PREFETCH_KEYS) {
                let je = (jb + PREFETCH_KEYS).min(n);
                if std::mem::size_of::<T>() == 4 {
                    // (half types were widened above: their keys are already in cache)
                    prefetch_keys(kbase, vbase, ks, vs, jb, je, dm.d, dm.dv);
                }
                crate::kernels::cpu::sgemm_nt::block(
                    grp,
                    jb,
                    je,
                    dm.d,
                    qf,
                    dm.d as isize,
                    kf,
                    ldk as isize,
                    sc,
                    n as isize,
                    1.0,
                    0.0,
                );
            }
            let _ = kf;
        } else if dm.d % S::LANES == 0 && S::LANES == 8 {
            // Two heads x four keys per tile (a third head, or the last keys, one at a time).
            // bf16 keys load as pairs against q rows put in pair order (a copy: the last keys
            // use the natural order).
            let pairs = is_bf16::<T>() && dm.d % (2 * S::LANES) == 0;
            let qp = if pairs {
                let qp = sc.add(grp * n);
                let qn = std::slice::from_raw_parts(qf, grp * dm.d);
                let out = std::slice::from_raw_parts_mut(qp, grp * dm.d);
                for (src, dst) in qn.chunks_exact(dm.d).zip(out.chunks_exact_mut(dm.d)) {
                    super::simd::pair_order(src, dst, S::LANES);
                }
                qp
            } else {
                qf
            };
            let mut jb = 0;
            while jb + 4 <= n {
                if jb % PREFETCH_KEYS == 0 {
                    prefetch_keys(
                        kbase,
                        vbase,
                        ks,
                        vs,
                        jb,
                        n.min(jb + PREFETCH_KEYS),
                        dm.d,
                        dm.dv,
                    );
                }
                let kb = kbase.add(jb * ks);
                let mut hh = 0;
                while hh + 2 <= grp {
                    let (qh, o) = (qp.add(hh * dm.d), sc.add(hh * n + jb));
                    if pairs {
                        score_tile::<S, T, 2, true>(s, qh, kb, ks, dm.d, o, n);
                    } else {
                        score_tile::<S, T, 2, false>(s, qh, kb, ks, dm.d, o, n);
                    }
                    hh += 2;
                }
                if hh < grp {
                    let (qh, o) = (qp.add(hh * dm.d), sc.add(hh * n + jb));
                    if pairs {
                        score_tile::<S, T, 1, true>(s, qh, kb, ks, dm.d, o, n);
                    } else {
                        score_tile::<S, T, 1, false>(s, qh, kb, ks, dm.d, o, n);
                    }
                }
                jb += 4;
            }
            for jj in jb..n {
                let krow = kbase.add(jj * ks);
                for hh in 0..grp {
                    *sc.add(hh * n + jj) = dot(s, qf.add(hh * dm.d), krow, dm.d);
                }
            }
        } else if dm.d % S::LANES == 0 {
            let mut jb = 0;
            while jb < n {
                let nb = (n - jb).min(S::LANES);
                for hh in 0..grp {
                    let kb = kbase.add(jb * ks);
                    score_block(s, qf.add(hh * dm.d), kb, ks, nb, dm.d, sc.add(hh * n + jb));
                }
                jb += nb;
            }
        } else {
            for jj in 0..n {
                let krow = kbase.add(jj * ks);
                for hh in 0..grp {
                    *sc.add(hh * n + jj) = dot(s, qf.add(hh * dm.d), krow, dm.d);
                }
            }
        }
        for hh in 0..grp {
            let row = sc.add(hh * n);
            // the maximum, and the minimum (as the maximum of the negated scores) to see
            // whether any weight falls below the floor
            let (mut mv, mut nv) = (s.splat(f32::NEG_INFINITY), s.splat(f32::NEG_INFINITY));
            let mut jj = 0;
            while jj + S::LANES <= n {
                let x = s.load(row.add(jj));
                mv = s.max(mv, x);
                nv = s.max(nv, s.sub(s.splat(0.0), x));
                jj += S::LANES;
            }
            let (mut mx, mut mn) = (s.reduce_max(mv), -s.reduce_max(nv));
            while jj < n {
                mx = mx.max(*row.add(jj));
                mn = mn.min(*row.add(jj));
                jj += 1;
            }
            // (NaN, or -inf scores, take the floored way too)
            #[allow(clippy::neg_cmp_op_on_partial_ord)]
            let floor = !(mn - mx >= WEIGHT_FLOOR);
            *m.add(hh) = mx;
            if mx == f32::NEG_INFINITY {
                // every score of the chunk -inf: every weight is exactly 0 and so is the sum,
                // which the merge skips (exp(-inf - -inf) would be NaN, and the row with it; a
                // row whose keys are all -inf ends as 0 / 0 = NaN, as softmax gives). Written
                // out rather than computed: `Simd::exp` clamps its argument at -87, so
                // exp(-inf) would weigh each key e^-87 and the row would average its values.
                std::ptr::write_bytes(row, 0, n);
                #[cfg(target_arch = "x86_64")]
                if use_dp {
                    std::ptr::write_bytes(pb.add(hh * pbs), 0, pbs);
                }
                *lsum.add(hh) = 0.0;
                continue;
            }
            #[cfg(target_arch = "x86_64")]
            if use_dp {
                // bf16 weights for the vdpbf16ps value pass (pairs of keys per instruction)
                *lsum.add(hh) = exp_round_bf16(row, n, mx, pb.add(hh * pbs), floor);
                continue;
            }
            *lsum.add(hh) = if n == 0 {
                0.0
            } else {
                exp_sum(s, row, n, mx, floor)
            };
        }
        #[cfg(target_arch = "x86_64")]
        if use_dp {
            pv_dp(acc, pb, pbs, vbase as *const bf16, vs, n, grp, dm.dv);
            return;
        }
        // Weighted values: tiles of W vectors (4 with 32 registers, 2 with 16) for up to 6 heads
        // at once, the columns past the last tile per head.
        let wide = S::REGISTERS >= 32;
        let tile = if wide { 4 } else { 2 } * S::LANES;
        let tiled = dm.dv / tile * tile;
        // Keys in blocks of PV_KEYS: every tile pass after the first over a block finds its
        // value rows in L1 (the rows are 1-2 KiB apart, one line per pass otherwise).
        // At least one pass, so that no keys (n == 0) still zero the accumulators.
        let mut kb0 = 0;
        loop {
            let nb = (n - kb0).min(PV_KEYS);
            let first = kb0 == 0;
            let vb = vbase.add(kb0 * vs);
            let mut h0 = 0;
            while h0 < grp {
                let hc = (grp - h0).min(6);
                let (a, p) = (acc.add(h0 * dm.dv), sc.add(h0 * n + kb0) as *const f32);
                let mut t0 = 0;
                while t0 < tiled {
                    macro_rules! pv {
                        ($w:literal) => {
                            match hc {
                                1 => {
                                    pv_tile::<S, T, 1, $w>(s, a, dm.dv, p, n, vb, vs, nb, t0, first)
                                }
                                2 => {
                                    pv_tile::<S, T, 2, $w>(s, a, dm.dv, p, n, vb, vs, nb, t0, first)
                                }
                                3 => {
                                    pv_tile::<S, T, 3, $w>(s, a, dm.dv, p, n, vb, vs, nb, t0, first)
                                }
                                4 => {
                                    pv_tile::<S, T, 4, $w>(s, a, dm.dv, p, n, vb, vs, nb, t0, first)
                                }
                                5 => {
                                    pv_tile::<S, T, 5, $w>(s, a, dm.dv, p, n, vb, vs, nb, t0, first)
                                }
                                _ => {
                                    pv_tile::<S, T, 6, $w>(s, a, dm.dv, p, n, vb, vs, nb, t0, first)
                                }
                            }
                        };
                    }
                    if wide {
                        pv!(4)
                    } else {
                        pv!(2)
                    }
                    t0 += tile;
                }
                h0 += hc;
            }
            kb0 += nb;
            if kb0 >= n {
                break;
            }
        }
        if is_bf16::<T>() && tiled > 0 {
            // The value tiles accumulated in pair order: restore the natural order.
            let mut tmp = [0f32; 32];
            for hh in 0..grp {
                for b in (0..tiled).step_by(2 * S::LANES) {
                    let blk = std::slice::from_raw_parts_mut(acc.add(hh * dm.dv + b), 2 * S::LANES);
                    tmp[..blk.len()].copy_from_slice(blk);
                    super::simd::pair_unorder(&tmp[..blk.len()], blk, S::LANES);
                }
            }
        }
        if tiled < dm.dv {
            for hh in 0..grp {
                let row = sc.add(hh * n);
                let mut part = vec![0f32; dm.dv - tiled];
                weighted_sum(
                    s,
                    part.as_mut_ptr(),
                    row,
                    vbase.add(tiled),
                    vs,
                    n,
                    dm.dv - tiled,
                );
                for (t, x) in part.iter().enumerate() {
                    *acc.add(hh * dm.dv + tiled + t) = *x;
                }
            }
        }
    }
}

thread_local! {
    /// Work-item scratch (q rows, scores, widened keys) and output slot of this thread, kept
    /// from call to call: fresh buffers cost a zero fill per rayon job (280 KiB for a
    /// 4096-key decode chunk, sized for widened keys even where none were widened), 5-8% of
    /// hot decode attention (performance log).
    static SCRATCH: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Scratch larger than this (floats) is freed after the call instead of kept.
const KEEP_SCRATCH: usize = 1 << 20;

/// Calls `f` with this thread's scratch buffers (fresh ones if they are in use, or gone while
/// the thread's storage is torn down).
fn with_scratch<R>(f: impl FnOnce(&mut Vec<f32>, &mut Vec<f32>) -> R) -> R {
    crate::kernels::with_thread_local(&SCRATCH, |(s, l)| {
        let r = f(s, l);
        if s.len() > KEEP_SCRATCH {
            *s = Vec::new();
        }
        r
    })
}

/// Query head `h` of row `i` over keys `j0..j1` in f64 from the same inputs, for the rare item
/// whose f32 weighted sum overflowed: writes the head's `m` and `l` (as `item_body` does) and
/// its weighted mean of the values into `acc`.
///
/// # Safety
/// As `item_body`'s: the tensors hold the addressed rows.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn head_f64<T: Elem>(
    dm: &AttnDims,
    q: *const T,
    k: *const T,
    v: *const T,
    h: usize,
    i: usize,
    j0: usize,
    j1: usize,
    m: *mut f32,
    l: *mut f32,
    acc: &mut [f32],
) {
    let g = h / (dm.h / dm.hk);
    // SAFETY: rows within the validated shapes (caller).
    unsafe {
        let qrow = q.add((i * dm.h + h) * dm.d);
        // the scale applied in f32 as the kernels do
        let qf: Vec<f64> = (0..dm.d)
            .map(|t| ((*qrow.add(t)).to_f32() * dm.scale) as f64)
            .collect();
        let scores: Vec<f64> = (j0..j1)
            .map(|j| {
                let krow = k.add((j * dm.hk + g) * dm.d);
                (0..dm.d)
                    .map(|t| qf[t] * (*krow.add(t)).to_f32() as f64)
                    .sum()
            })
            .collect();
        let mx = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = scores.iter().map(|x| (x - mx).exp()).collect();
        let sum: f64 = w.iter().sum();
        for (t, a) in acc.iter_mut().enumerate() {
            // every key, weight 0 or not: a NaN or infinite value makes the row NaN, as the
            // vector paths (0 * NaN) and numpy's `p @ v` do
            let mut x = 0f64;
            for (jj, wj) in w.iter().enumerate() {
                x += wj * (*v.add(((j0 + jj) * dm.hk + g) * dm.dv + t)).to_f32() as f64;
            }
            *a = (x / sum) as f32;
        }
        *m = mx as f32;
        *l = sum as f32;
    }
}

/// Whether `item_body` scores keys of size `d` with `scores_bf16_dp` (bf16 with AVX512_BF16).
fn scores_by_bf16_dot<T: Elem>(d: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_bf16::<T>() && d > 0 && d <= 256 && crate::kernels::cpu::gemv::bf16_dot_available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = d;
        false
    }
}

/// Whether `item_body` may widen a chunk's keys into scratch: half types, unless the bf16
/// dot-product path (`dp`) scores them where they are.
fn widens_keys<T: Elem>(dp: bool) -> bool {
    std::mem::size_of::<T>() != 4 && !dp
}

/// Calls with fewer (KV head, query row) pairs than this split their keys into chunks.
const SPLIT_BELOW_ROWS: usize = 16;
/// Keys per chunk (at most; the chunks of a call are equal to within one key). Measured on 2
/// threads (performance log, session 18): decode with 8 KV heads in one 4096-key chunk per head
/// took 2.0x (f32) and 1.7x (bf16) the time of 8 chunks; 256-key chunks cost 1.05-1.09x in
/// per-item work against 512.
const CHUNK_KEYS: usize = 512;
/// The most chunks per (KV head, query row).
const MAX_CHUNKS: usize = 64;

/// Key chunks per (KV head, query row) for `rows` such pairs over `s` keys: a function of the
/// shape only. The chunks' partial softmaxes are merged in chunk order, so a split by the
/// thread count would make results change in the last bits with `ANYFFI_NUM_THREADS`.
fn key_chunks(rows: usize, s: usize) -> usize {
    if rows >= SPLIT_BELOW_ROWS {
        1
    } else {
        s.div_ceil(CHUNK_KEYS).clamp(1, MAX_CHUNKS)
    }
}

/// Runs causal GQA attention.
///
/// # Safety
/// q `[L, H, D]`, k `[S, HK, D]`, v `[S, HK, DV]`, out `[L, H, DV]` contiguous and valid, out not
/// overlapping the inputs, `H % HK == 0`, `S >= L`.
pub unsafe fn self_attention<T: Elem>(
    out: *mut T,
    q: *const T,
    k: *const T,
    v: *const T,
    dm: AttnDims,
) {
    let grp = dm.h / dm.hk;
    let rows = dm.hk * dm.l;
    // SAFETY: q holds L * H * D elements (of 2 bytes where `scores_by_bf16_dot` holds).
    let dp = scores_by_bf16_dot::<T>(dm.d)
        && unsafe {
            crate::kernels::cpu::gemv::bf16_dot_exact(q as *const u16, dm.l * dm.h * dm.d)
        };
    // Work items are (KV head, query row, key chunk), run in (row, chunk, head) order, so the
    // threads read the KV heads of the same keys together. Keys are split only when there are
    // few (KV head, query row) pairs, and by the shape alone (`key_chunks`), so that the
    // result does not depend on the thread count.
    let t = threads();
    let chunks = key_chunks(rows, dm.s);
    let chunk_len = dm.s.div_ceil(chunks);
    let items = rows * chunks;
    // partials per item: m[grp], l[grp], acc[grp*dv]
    let stride = grp * (2 + dm.dv);
    let mut partial = vec![0f32; if chunks > 1 { items * stride } else { 0 }];
    let pp = SendPtr(partial.as_mut_ptr());
    let (op, qp, kp, vp) = (
        SendPtr(out),
        SendPtr::from_const(q),
        SendPtr::from_const(k),
        SendPtr::from_const(v),
    );
    let work = |it: usize, scratch: &mut Vec<f32>, local: &mut Vec<f32>| {
        let row = it / chunks;
        let c = it % chunks;
        let (g, i) = (row / dm.l, row % dm.l);
        let limit = i + (dm.s - dm.l) + 1; // keys 0..limit are visible
        let j0 = (c * chunk_len).min(limit);
        let j1 = ((c + 1) * chunk_len).min(limit);
        // q rows | scores | the chunk's keys widened to f32 (half types on the AVX-512 tile
        // path) or the q rows in pair order (bf16 on AVX2)
        let last = if widens_keys::<T>(dp) {
            (j1 - j0).max(grp)
        } else {
            grp
        };
        // and the bf16 weights of the dp path (`grp` rows of (j1 - j0) rounded up to even)
        let weights = if dp { grp * (j1 - j0 + 1) / 2 + 1 } else { 0 };
        let need = grp * dm.d + grp * (j1 - j0) + last * dm.d + weights;
        if scratch.len() < need {
            scratch.resize(need, 0.0);
        }
        let dst: *mut f32 = if chunks > 1 {
            // SAFETY: item `it` owns its partial slot.
            unsafe { pp.get().add(it * stride) }
        } else {
            if local.len() < stride {
                local.resize(stride, 0.0);
            }
            local.as_mut_ptr()
        };
        // SAFETY: slot layout m | l | acc.
        let (m, lsum, acc) = unsafe { (dst, dst.add(grp), dst.add(2 * grp)) };
        let dims = &dm as *const AttnDims;
        let (q, k, v, scratch) = (
            qp.get() as *const T,
            kp.get() as *const T,
            vp.get() as *const T,
            scratch.as_mut_ptr(),
        );
        // SAFETY: buffers sized above; indices within the validated shapes.
        unsafe {
            multiversion!(item_body, [T: Elem], (dims: *const AttnDims, q: *const T, k: *const T, v: *const T, g: usize, i: usize, j0: usize, j1: usize, scratch: *mut f32, m: *mut f32, lsum: *mut f32, acc: *mut f32, dp: bool))
        };
        for hh in 0..grp {
            // SAFETY: head hh's part of the slot; row (i, g*grp+hh) of out belongs to this
            // item only.
            unsafe {
                // The slot keeps each head's weighted mean of the values, not the sum: the
                // chunks' means merge as a convex combination, which cannot overflow where
                // the sums could (values near 1e37-1e38 made inf, and NaN in the merge).
                let l = *lsum.add(hh);
                let a = std::slice::from_raw_parts_mut(acc.add(hh * dm.dv), dm.dv);
                let inv = 1.0 / l;
                a.iter_mut().for_each(|x| *x *= inv);
                let finite = a.iter().fold(true, |f, x| f & x.is_finite());
                if !finite && l > 0.0 && l.is_finite() {
                    // the weighted sum overflowed f32 (or a value is inf or NaN): again in f64
                    head_f64(
                        &dm,
                        q,
                        k,
                        v,
                        g * grp + hh,
                        i,
                        j0,
                        j1,
                        m.add(hh),
                        lsum.add(hh),
                        a,
                    );
                }
                if chunks == 1 {
                    // (an all -inf row has l = 0: 0 * inf = NaN, as softmax gives)
                    let o = op.get().add((i * dm.h + g * grp + hh) * dm.dv);
                    for (t, x) in a.iter().enumerate() {
                        *o.add(t) = T::from_f32(*x);
                    }
                }
            }
        }
    };
    let cost = dm.s * (dm.d + dm.dv) * grp * 4;
    let pairs = dm.l * chunks;
    // Items in (query row, chunk, KV head) order: `ordered(n)` runs the n-th.
    let total = pairs * dm.hk;
    let ordered = |n: usize, s: &mut Vec<f32>, l: &mut Vec<f32>| {
        let (p, g) = (n / dm.hk, n % dm.hk);
        let (i, c) = (p / chunks, p % chunks);
        work((g * dm.l + i) * chunks + c, s, l);
    };
    if pairs == 1 || t <= 1 || items * cost < 256 * 1024 {
        with_scratch(|s, l| (0..total).for_each(|n| ordered(n, s, l)));
    } else {
        // Every thread takes the next item from a shared counter: the threads work on the KV
        // heads of the same keys at the same time, so both stream the same region of K and V
        // (cold decode 0.87-0.91x the time against one stealable job per chunk, performance
        // log), and a thread that runs slower takes fewer items.
        let next = AtomicUsize::new(0);
        super::par_for(t, &|_| {
            with_scratch(|s, l| loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= total {
                    break;
                }
                ordered(n, s, l);
            })
        });
    }
    if chunks > 1 {
        // (the merge's buffers, reused for every row and head)
        let mut shares: Vec<(usize, f32)> = Vec::with_capacity(chunks);
        let mut acc = vec![0.0f32; dm.dv];
        for row in 0..rows {
            let (g, i) = (row / dm.l, row % dm.l);
            for hh in 0..grp {
                let slot = |c: usize| &partial[(row * chunks + c) * stride..][..stride];
                let mx = (0..chunks)
                    .map(|c| slot(c)[hh])
                    .fold(f32::NEG_INFINITY, f32::max);
                // chunk c's share of the softmax: e^(m_c - max) * l_c. A chunk whose scores are
                // all -inf (l_c = 0) has none and is skipped; one whose share underflows to 0
                // still adds 0 * its mean, so that a NaN or infinite value in it makes the row
                // NaN, as the single-chunk path and numpy do.
                shares.clear();
                shares.extend(
                    (0..chunks)
                        .filter(|&c| slot(c)[grp + hh] != 0.0)
                        .map(|c| (c, (slot(c)[hh] - mx).exp() * slot(c)[grp + hh])),
                );
                let den: f32 = shares.iter().map(|&(_, sh)| sh).sum();
                // no chunk with a share: 0 / 0, NaN as softmax gives
                acc.fill(if den == 0.0 { f32::NAN } else { 0.0 });
                for &(c, sh) in &shares {
                    let w = sh / den;
                    let a = &slot(c)[2 * grp + hh * dm.dv..][..dm.dv];
                    for (o, x) in acc.iter_mut().zip(a) {
                        *o += w * x;
                    }
                }
                // SAFETY: row (i, g*grp+hh) of out.
                unsafe {
                    let o = out.add((i * dm.h + g * grp + hh) * dm.dv);
                    for (t, x) in acc.iter().enumerate() {
                        *o.add(t) = T::from_f32(*x);
                    }
                }
            }
        }
    }
}

macro_rules! named {
    ($($name:ident = $t:ty;)*) => {$(
        /// See `self_attention`.
        ///
        /// # Safety
        /// As `self_attention`.
        pub unsafe fn $name(out: *mut $t, q: *const $t, k: *const $t, v: *const $t, dm: AttnDims) {
            // SAFETY: forwarded.
            unsafe { self_attention::<$t>(out, q, k, v, dm) }
        }
    )*};
}

named! {
    self_attention_f32 = f32;
    self_attention_f16 = f16;
    self_attention_bf16 = bf16;
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// The bf16 value pass (`exp_round_bf16` + `pv_dp`) against f64 sums of the same rounded
    /// weights: head counts around the 6-head tiles, odd key counts (the last key paired with
    /// zeros), key blocks past `PV_DP_KEYS`, partial 32-column chunks, strided value rows, and
    /// no keys at all (the accumulators still zeroed).
    #[test]
    fn bf16_value_pass_matches_a_reference() {
        if !crate::kernels::cpu::gemv::bf16_dot_available() {
            eprintln!("skipped: no AVX512_BF16 on this CPU");
            return;
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move || {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((seed >> 40) as f64 / (1u64 << 24) as f64) * 2.0 - 1.0
        };
        for &(grp, n, dv, pad) in &[
            (1usize, 1usize, 32usize, 0usize),
            (6, 300, 128, 128),
            (7, 129, 24, 8),
            (3, 2, 72, 0),
            (4, 257, 136, 40),
            (2, 0, 64, 0),
            (8, 31, 16, 0),
            (5, 128, 200, 56),
        ] {
            let vs = dv + pad;
            let scores: Vec<f32> = (0..grp * n).map(|_| (rnd() * 6.0) as f32).collect();
            // NaN in every element the pass must not read (row padding, past the last key): a
            // read of one, even with weight zero, shows in the sums
            let vals: Vec<bf16> = (0..(n + 1) * vs + 64)
                .map(|e| {
                    let x = bf16::from_f64(rnd() * 3.0);
                    if e % vs < dv && e / vs < n {
                        x
                    } else {
                        bf16::NAN
                    }
                })
                .collect();
            let pbs = n + n % 2;
            let mut pb = vec![0xffffu16; grp * pbs + 2];
            let mut lsum = vec![0f32; grp];
            for h in 0..grp {
                let row = &scores[h * n..(h + 1) * n];
                let m = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                // SAFETY: AVX512_BF16 checked; n scores, n + 1 weights.
                lsum[h] = unsafe {
                    exp_round_bf16(row.as_ptr(), n, m, pb.as_mut_ptr().add(h * pbs), true)
                };
                let mut want_sum = 0f64;
                for (j, x) in row.iter().enumerate() {
                    let got = bf16::from_bits(pb[h * pbs + j]).to_f64();
                    let exact = ((x - m) as f64).exp();
                    let err = (got - exact).abs();
                    assert!(
                        err <= exact * 2f64.powi(-8),
                        "weight {h},{j}: {got} vs {exact}"
                    );
                    want_sum += got;
                }
                if n % 2 == 1 {
                    assert_eq!(pb[h * pbs + n], 0, "pair padding of head {h}");
                }
                let rel = (lsum[h] as f64 - want_sum).abs() / want_sum.max(1e-30);
                assert!(
                    n == 0 || rel < 1e-6,
                    "sum of head {h}: {} vs {want_sum}",
                    lsum[h]
                );
            }
            let mut acc = vec![f32::NAN; grp * dv];
            // SAFETY: buffers sized as the contract asks.
            unsafe {
                pv_dp(
                    acc.as_mut_ptr(),
                    pb.as_ptr(),
                    pbs,
                    vals.as_ptr(),
                    vs,
                    n,
                    grp,
                    dv,
                );
            }
            for h in 0..grp {
                for t in 0..dv {
                    let (mut want, mut mag) = (0f64, 0f64);
                    for j in 0..n {
                        let w = bf16::from_bits(pb[h * pbs + j]).to_f64();
                        let x = vals[j * vs + t].to_f64();
                        want += w * x;
                        mag += (w * x).abs();
                    }
                    let got = acc[h * dv + t] as f64;
                    assert!(
                        (got - want).abs() <= 1e-6 * mag + 1e-30,
                        "grp {grp} n {n} dv {dv}: acc[{h}][{t}] = {got}, want {want}"
                    );
                }
            }
        }
    }
}
