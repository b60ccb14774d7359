//! f32 GEMM in "NT" form for few rows on AVX2: `C = A B^T + beta * C` with A `[M, K]` and B
//! `[N, K]` both unit-stride in K (`linear`'s `X W^T`), no packing.
//!
//! Rationale: with few rows (M < 48) packing W costs as much as the product, and the `gemm`
//! crate ran (16,1536,1536) at 0.87-0.91x of OpenBLAS on the AVX2 EPYC VM. Here each 2x4 tile
//! of C keeps 8 accumulators of K-lane partial dot products (2 A loads and 4 B loads per 8
//! FMAs), reduced by one `reduce_lanes`; B rows are streamed once (groups of 4 rows split
//! between threads) while all of A stays in L2 (48 rows x K = 1536 is 288 KiB). AVX-512 has
//! its own 4x4 version (`sgemm_nt::sgemm_nt`).

use super::simd::{is_bf16, level, multiversion, Elem, Level, Simd};
use super::{par_ranges, threads, SendPtr};

/// Rows from which packing pays (the `linear` dispatch uses this kernel below it).
pub const MAX_ROWS: usize = 48;

/// Whether this kernel is the one to use here (AVX2 selected; AVX-512 has `sgemm_nt`).
pub fn available() -> bool {
    cfg!(target_arch = "x86_64") && level() == Level::Avx2
}

/// `C[i, j] = sum_k A[i, k] B[j, k] + beta * C[i, j]` (C not read when `beta == 0`), with B in
/// its own dtype (f16 widened in registers, bf16 read as pairs against a pair-ordered copy of
/// A), so a half-precision W is never widened in memory.
///
/// # Safety
/// A has `m` rows of `k` floats at row stride `lda`, B `n` rows of `k` at `ldb`, C `m` rows
/// of `n` at `ldc`; C overlaps neither input.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_nt_dot<T: Elem>(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: isize,
    b: *const T,
    ldb: isize,
    c: *mut f32,
    ldc: isize,
    beta: f32,
) {
    if m == 0 || n == 0 {
        return;
    }
    // bf16 B: A's rows in the pair order of this level's vectors (the body checks the width).
    let pair_lanes = super::simd::lanes();
    let mut paired = Vec::new();
    if is_bf16::<T>() {
        paired = vec![0f32; m * k];
        for i in 0..m {
            // SAFETY: row i of A holds k floats.
            let row = unsafe { std::slice::from_raw_parts(a.offset(i as isize * lda), k) };
            super::simd::pair_order(row, &mut paired[i * k..][..k], pair_lanes);
        }
    }
    let ap2 = SendPtr::from_const(if paired.is_empty() {
        std::ptr::null()
    } else {
        paired.as_ptr()
    });
    let (ap, bp, cp) = (SendPtr::from_const(a), SendPtr::from_const(b), SendPtr(c));
    let groups = n.div_ceil(4);
    let min = groups.div_ceil(4 * threads().max(1)).max(1);
    par_ranges(groups, 4 * m * k.max(1), min, |g| {
        let (j0, j1) = (g.start * 4, (g.end * 4).min(n));
        let (a, b, c) = (ap.get() as *const f32, bp.get() as *const T, cp.get());
        let ap = ap2.get() as *const f32;
        // SAFETY: columns j0..j1 of C belong to this range; layouts per the caller.
        unsafe {
            multiversion!(body, [T: Elem], (m: usize, j0: usize, j1: usize, k: usize, a: *const f32, ap: *const f32, pair_lanes: usize, lda: isize, b: *const T, ldb: isize, c: *mut f32, ldc: isize, beta: f32))
        }
    });
}

/// Columns `j0..j1`. `ap`: A's rows in pair order for `pair_lanes`-wide vectors (row stride
/// k), or NULL; with a bf16 B of this level's width, the products run in pair space.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn body<S: Simd, T: Elem>(
    s: S,
    m: usize,
    j0: usize,
    j1: usize,
    k: usize,
    a: *const f32,
    ap: *const f32,
    pair_lanes: usize,
    lda: isize,
    b: *const T,
    ldb: isize,
    c: *mut f32,
    ldc: isize,
    beta: f32,
) {
    let l = S::LANES;
    let pairs = !ap.is_null() && pair_lanes == l;
    let kv = if pairs {
        k / (2 * l) * (2 * l)
    } else {
        k / l * l
    };
    // SAFETY: rows and columns inside A, B and C (caller).
    unsafe {
        let mut jb = j0;
        while jb < j1 {
            let nj = (j1 - jb).min(4);
            // Missing columns of an edge group reuse the first row; their sums are dropped.
            let w: [*const T; 4] =
                std::array::from_fn(|t| b.offset((jb + if t < nj { t } else { 0 }) as isize * ldb));
            let mut i = 0;
            while i < m {
                let ni = (m - i).min(2);
                let x0 = a.offset(i as isize * lda);
                let x1 = if ni == 2 { x0.offset(lda) } else { x0 };
                let z = s.splat(0.0);
                let mut acc = [z; 8];
                let mut kk = 0;
                if pairs {
                    let p0 = ap.add(i * k);
                    let p1 = if ni == 2 { p0.add(k) } else { p0 };
                    while kk < kv {
                        let (xae, xao) = (s.load(p0.add(kk)), s.load(p0.add(kk + l)));
                        let (xbe, xbo) = (s.load(p1.add(kk)), s.load(p1.add(kk + l)));
                        for t in 0..4 {
                            let (we, wo) = s.load_bf16_pairs(w[t].add(kk) as *const u16);
                            acc[t] = s.fma(xae, we, acc[t]);
                            acc[4 + t] = s.fma(xbe, we, acc[4 + t]);
                            acc[t] = s.fma(xao, wo, acc[t]);
                            acc[4 + t] = s.fma(xbo, wo, acc[4 + t]);
                        }
                        kk += 2 * l;
                    }
                }
                while kk < kv {
                    let wv: [S::V; 4] = std::array::from_fn(|t| T::load(s, w[t].add(kk)));
                    let (xa, xb) = (s.load(x0.add(kk)), s.load(x1.add(kk)));
                    for t in 0..4 {
                        acc[t] = s.fma(xa, wv[t], acc[t]);
                        acc[4 + t] = s.fma(xb, wv[t], acc[4 + t]);
                    }
                    kk += l;
                }
                let mut sums = [0f32; 16];
                if l == 8 {
                    s.store(sums.as_mut_ptr(), s.reduce_lanes(&acc));
                } else {
                    for (x, v) in acc.iter().enumerate() {
                        sums[x] = s.reduce_sum(*v);
                    }
                }
                for kt in kv..k {
                    for t in 0..4 {
                        let wt = (*w[t].add(kt)).to_f32();
                        sums[t] += *x0.add(kt) * wt;
                        sums[4 + t] += *x1.add(kt) * wt;
                    }
                }
                for r in 0..ni {
                    let row = c.offset((i + r) as isize * ldc).add(jb);
                    for t in 0..nj {
                        let v = sums[4 * r + t];
                        *row.add(t) = if beta == 0.0 {
                            v
                        } else {
                            v + beta * *row.add(t)
                        };
                    }
                }
                i += ni;
            }
            jb += nj;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Odd M and N (edge tiles), K off the vector width, beta 0 and 1, strided rows; at every
    /// level the kernel compiles for (the AVX-512 monomorph reduces lane by lane).
    #[test]
    fn matches_a_float64_reference() {
        let _level = super::super::simd::level_lock();
        use super::super::simd::force_level;
        for lv in [Level::Scalar, Level::Avx2, Level::Avx512] {
            force_level(lv);
            for &(m, n, k) in &[(1, 1, 1), (3, 5, 9), (47, 33, 1536), (2, 8, 17)] {
                let (lda, ldb, ldc) = (k + 3, k + 1, n + 2);
                let a: Vec<f32> = (0..m * lda)
                    .map(|x| ((x * 7 % 23) as f32 - 11.0) * 0.1)
                    .collect();
                let b: Vec<f32> = (0..n * ldb)
                    .map(|x| ((x * 5 % 19) as f32 - 9.0) * 0.1)
                    .collect();
                let c0: Vec<f32> = (0..m * ldc).map(|x| (x % 5) as f32).collect();
                for beta in [0.0f32, 1.0] {
                    let mut c = c0.clone();
                    // SAFETY: buffers sized for the shapes and strides.
                    unsafe {
                        gemm_nt_dot::<f32>(
                            m,
                            n,
                            k,
                            a.as_ptr(),
                            lda as isize,
                            b.as_ptr(),
                            ldb as isize,
                            c.as_mut_ptr(),
                            ldc as isize,
                            beta,
                        )
                    };
                    for i in 0..m {
                        for j in 0..n {
                            let dot: f64 = (0..k)
                                .map(|kk| a[i * lda + kk] as f64 * b[j * ldb + kk] as f64)
                                .sum();
                            let want = dot + beta as f64 * c0[i * ldc + j] as f64;
                            let got = c[i * ldc + j] as f64;
                            let tol = 1e-5 * (1.0 + want.abs()) * (k as f64).sqrt();
                            assert!((got - want).abs() <= tol, "{lv:?} ({m},{n},{k}) [{i},{j}]");
                        }
                        // the padding between rows of C is untouched
                        for j in n..ldc {
                            assert_eq!(c[i * ldc + j], c0[i * ldc + j]);
                        }
                    }
                }
            }
        }
        force_level(Level::Avx512Bf16);
    }

    /// Half-precision B read in its own dtype (bf16 as pairs against pair-ordered A rows):
    /// the same sums as f32 B holding the same (rounded) values, at every level.
    #[test]
    fn half_b_matches_the_widened_product() {
        let _level = super::super::simd::level_lock();
        use super::super::simd::force_level;
        use half::{bf16, f16};
        for lv in [Level::Scalar, Level::Avx2, Level::Avx512] {
            force_level(lv);
            for &(m, n, k) in &[(2, 5, 40), (5, 9, 67), (47, 6, 1536)] {
                let a: Vec<f32> = (0..m * k)
                    .map(|x| ((x * 7 % 23) as f32 - 11.0) * 0.1)
                    .collect();
                let bw: Vec<f32> = (0..n * k)
                    .map(|x| ((x * 5 % 19) as f32 - 9.0) * 0.1)
                    .collect();
                let bb: Vec<bf16> = bw.iter().map(|&v| bf16::from_f32(v)).collect();
                let bh: Vec<f16> = bw.iter().map(|&v| f16::from_f32(v)).collect();
                let check = |got: &[f32], b_of: &dyn Fn(usize) -> f32, what: &str| {
                    for i in 0..m {
                        for j in 0..n {
                            let want: f64 = (0..k)
                                .map(|kk| a[i * k + kk] as f64 * b_of(j * k + kk) as f64)
                                .sum();
                            let tol = 1e-5 * (1.0 + want.abs()) * (k as f64).sqrt();
                            assert!(
                                (got[i * n + j] as f64 - want).abs() <= tol,
                                "{lv:?} {what} ({m},{n},{k}) [{i},{j}]"
                            );
                        }
                    }
                };
                let mut c = vec![0f32; m * n];
                // SAFETY: buffers sized for the shapes.
                unsafe {
                    gemm_nt_dot::<bf16>(
                        m,
                        n,
                        k,
                        a.as_ptr(),
                        k as isize,
                        bb.as_ptr(),
                        k as isize,
                        c.as_mut_ptr(),
                        n as isize,
                        0.0,
                    )
                };
                check(&c, &|x| bb[x].to_f32(), "bf16");
                // SAFETY: as above.
                unsafe {
                    gemm_nt_dot::<f16>(
                        m,
                        n,
                        k,
                        a.as_ptr(),
                        k as isize,
                        bh.as_ptr(),
                        k as isize,
                        c.as_mut_ptr(),
                        n as isize,
                        0.0,
                    )
                };
                check(&c, &|x| bh[x].to_f32(), "f16");
            }
        }
        force_level(Level::Avx512Bf16);
    }
}
