//! f32 GEMM in "NT" form for few rows on AVX2: `C = A B^T + beta * C` with A `[M, K]` and B
//! `[N, K]` both unit-stride in K (`linear`'s `X W^T`), no packing.
//!
//! Rationale: with few rows (M < 48) packing W costs as much as the product, and the `gemm`
//! crate ran (16,1536,1536) at 0.87-0.91x of OpenBLAS on the AVX2 EPYC VM. Here each 2x4 tile
//! of C keeps 8 accumulators of K-lane partial dot products (2 A loads and 4 B loads per 8
//! FMAs), reduced by one `reduce_lanes`; B rows are streamed once (groups of 4 rows split
//! between threads) while all of A stays in L2 (48 rows x K = 1536 is 288 KiB). AVX-512 has
//! its own 4x4 version (`sgemm_nt::sgemm_nt`).

use super::simd::{level, multiversion, Level, Simd};
use super::{par_ranges, threads, SendPtr};

/// Rows from which packing pays (the `linear` dispatch uses this kernel below it).
pub const MAX_ROWS: usize = 48;

/// Whether this kernel is the one to use here (AVX2 selected; AVX-512 has `sgemm_nt`).
pub fn available() -> bool {
    cfg!(target_arch = "x86_64") && level() == Level::Avx2
}

/// `C[i, j] = sum_k A[i, k] B[j, k] + beta * C[i, j]` (C not read when `beta == 0`).
///
/// # Safety
/// A has `m` rows of `k` floats at row stride `lda`, B `n` rows of `k` at `ldb`, C `m` rows
/// of `n` at `ldc`; C overlaps neither input.
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm_nt_dot(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: isize,
    b: *const f32,
    ldb: isize,
    c: *mut f32,
    ldc: isize,
    beta: f32,
) {
    if m == 0 || n == 0 {
        return;
    }
    let (ap, bp, cp) = (SendPtr::from_const(a), SendPtr::from_const(b), SendPtr(c));
    let groups = n.div_ceil(4);
    let min = groups.div_ceil(4 * threads().max(1)).max(1);
    par_ranges(groups, 4 * m * k.max(1), min, |g| {
        let (j0, j1) = (g.start * 4, (g.end * 4).min(n));
        let (a, b, c) = (ap.get() as *const f32, bp.get() as *const f32, cp.get());
        // SAFETY: columns j0..j1 of C belong to this range; layouts per the caller.
        unsafe {
            multiversion!(body, [], (m: usize, j0: usize, j1: usize, k: usize, a: *const f32, lda: isize, b: *const f32, ldb: isize, c: *mut f32, ldc: isize, beta: f32))
        }
    });
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn body<S: Simd>(
    s: S,
    m: usize,
    j0: usize,
    j1: usize,
    k: usize,
    a: *const f32,
    lda: isize,
    b: *const f32,
    ldb: isize,
    c: *mut f32,
    ldc: isize,
    beta: f32,
) {
    let l = S::LANES;
    let kv = k / l * l;
    // SAFETY: rows and columns inside A, B and C (caller).
    unsafe {
        let mut jb = j0;
        while jb < j1 {
            let nj = (j1 - jb).min(4);
            // Missing columns of an edge group reuse the first row; their sums are dropped.
            let w: [*const f32; 4] =
                std::array::from_fn(|t| b.offset((jb + if t < nj { t } else { 0 }) as isize * ldb));
            let mut i = 0;
            while i < m {
                let ni = (m - i).min(2);
                let x0 = a.offset(i as isize * lda);
                let x1 = if ni == 2 { x0.offset(lda) } else { x0 };
                let z = s.splat(0.0);
                let mut acc = [z; 8];
                let mut kk = 0;
                while kk < kv {
                    let wv: [S::V; 4] = std::array::from_fn(|t| s.load(w[t].add(kk)));
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
                        sums[t] += *x0.add(kt) * *w[t].add(kt);
                        sums[4 + t] += *x1.add(kt) * *w[t].add(kt);
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
                        sgemm_nt_dot(
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
}
