//! f32 GEMM in "NT" form for AVX-512: `C = alpha * A B^T + beta * C` with A `[M, K]` and B
//! `[N, K]` both unit-stride in K (so `linear`'s `X W^T` needs no packing at all) and C rows
//! unit-stride.
//!
//! Rationale: the `gemm` crate reached about 0.6x of OpenBLAS (SkylakeX kernel) on this CPU for
//! `linear`'s shapes, with or without its `x86-v4` feature (performance log). Here each 4x4
//! tile of C keeps 16 zmm accumulators of K-lane partial dot products (4 row loads of A and 4
//! of B per 16 FMAs, all from L1/L2), reduces the 16 vectors with one shuffle tree (~3 ops per
//! dot product), and updates C once per K block. Blocking: K in blocks of `KC` (the A tile and
//! the B tile stay in L1), B rows in blocks of `NB` (kept in L2 while every A tile passes), N
//! split between threads.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use super::simd::{level, Level};
use super::{par_ranges, threads, SendPtr};

const KC: usize = 1024;
const NB: usize = 64;

/// Whether this kernel can run here (AVX-512 detected and selected).
pub fn available() -> bool {
    cfg!(target_arch = "x86_64") && level() >= Level::Avx512
}

/// `C[i, j] = alpha * sum_k A[i, k] B[j, k] + beta * C[i, j]` (C not read when `beta == 0`).
///
/// # Safety
/// `available()` must be true; A has `m` rows of `k` floats at row stride `lda`, B `n` rows of
/// `k` at `ldb`, C `m` rows of `n` at `ldc`; C overlaps neither input.
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm_nt(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: isize,
    b: *const f32,
    ldb: isize,
    c: *mut f32,
    ldc: isize,
    alpha: f32,
    beta: f32,
) {
    if m == 0 || n == 0 {
        return;
    }
    let (ap, bp, cp) = (SendPtr::from_const(a), SendPtr::from_const(b), SendPtr(c));
    let groups = n.div_ceil(4);
    // Each item is a group of 4 columns of C; the cost of one is about 4*m*k FMAs.
    let cost = 4 * m * k;
    let min = if threads() > 1 {
        groups.div_ceil(threads()).max(1)
    } else {
        groups
    };
    par_ranges(groups, cost, min, |g| {
        let (j0, j1) = (g.start * 4, (g.end * 4).min(n));
        #[cfg(target_arch = "x86_64")]
        // SAFETY: columns j0..j1 of C belong to this range only; AVX-512 per the caller.
        unsafe {
            block(
                m,
                j0,
                j1,
                k,
                ap.get(),
                lda,
                bp.get(),
                ldb,
                cp.get(),
                ldc,
                alpha,
                beta,
            )
        };
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (j0, j1, ap, bp, cp);
    });
}

/// Columns `j0..j1` of C, all rows.
///
/// # Safety
/// As `sgemm_nt` (AVX-512 present), for columns `j0..j1` only; runs on the calling thread.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn block(
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
    alpha: f32,
    beta: f32,
) {
    let mut k0 = 0;
    loop {
        let kc = KC.min(k - k0);
        // First K block applies beta; later ones accumulate.
        let (al, be, read_c) = if k0 == 0 {
            (alpha, beta, beta != 0.0)
        } else {
            (alpha, 1.0, true)
        };
        let mut nb0 = j0;
        while nb0 < j1 {
            let nb1 = (nb0 + NB).min(j1);
            let mut i = 0;
            while i < m {
                // Rows by 4, the last 5 or 6 as two tiles of 3 and 2 or 3 (attention's 6 query
                // heads per KV head): a 6-row tile's 24 accumulators spilled to the stack, and
                // tiles of fewer than 4 rows take the register path too, not `tile_edge`.
                let mr = match m - i {
                    5..=6 => 3,
                    r => r.min(4),
                };
                let mut j = nb0;
                while j < nb1 {
                    let nr = (nb1 - j).min(4);
                    // SAFETY: tile (i.., j..) inside the operands; K range k0..k0+kc.
                    unsafe {
                        let at = a.offset(i as isize * lda).add(k0);
                        let bt = b.offset(j as isize * ldb).add(k0);
                        let ct = c.offset(i as isize * ldc).add(j);
                        match (mr, nr) {
                            (4, 4) => tile_mx4::<4>(at, lda, bt, ldb, kc, ct, ldc, al, be, read_c),
                            (3, 4) => tile_mx4::<3>(at, lda, bt, ldb, kc, ct, ldc, al, be, read_c),
                            (2, 4) => tile_mx4::<2>(at, lda, bt, ldb, kc, ct, ldc, al, be, read_c),
                            (1, 4) => tile_mx4::<1>(at, lda, bt, ldb, kc, ct, ldc, al, be, read_c),
                            _ => tile_edge(mr, nr, at, lda, bt, ldb, kc, ct, ldc, al, be, read_c),
                        }
                    }
                    j += 4;
                }
                i += mr;
            }
            nb0 = nb1;
        }
        k0 += kc;
        if k0 >= k {
            break;
        }
    }
}

/// The sums of 16 vectors: lane `t` of the result is the sum of the lanes of `v[t]`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn reduce16(v: &[__m512; 16]) -> __m512 {
    // Pairs: 128-bit blocks (0+2, 1+3) of each vector side by side.
    let mut x = [_mm512_setzero_ps(); 8];
    for p in 0..8 {
        let (a, b) = (v[2 * p], v[2 * p + 1]);
        x[p] = _mm512_add_ps(
            _mm512_shuffle_f32x4::<0b01_00_01_00>(a, b),
            _mm512_shuffle_f32x4::<0b11_10_11_10>(a, b),
        );
    }
    // Quads: block q of y[r] now sums to v[4r + q].
    let mut y = [_mm512_setzero_ps(); 4];
    for q in 0..4 {
        let (a, b) = (x[2 * q], x[2 * q + 1]);
        y[q] = _mm512_add_ps(
            _mm512_shuffle_f32x4::<0b10_00_10_00>(a, b),
            _mm512_shuffle_f32x4::<0b11_01_11_01>(a, b),
        );
    }
    // Within blocks: lane (4b + l) = sum of block b of y[l] = sum(v[4l + b]).
    let t0 = _mm512_add_ps(
        _mm512_unpacklo_ps(y[0], y[1]),
        _mm512_unpackhi_ps(y[0], y[1]),
    );
    let t1 = _mm512_add_ps(
        _mm512_unpacklo_ps(y[2], y[3]),
        _mm512_unpackhi_ps(y[2], y[3]),
    );
    let (t0d, t1d) = (_mm512_castps_pd(t0), _mm512_castps_pd(t1));
    let u = _mm512_add_ps(
        _mm512_castpd_ps(_mm512_unpacklo_pd(t0d, t1d)),
        _mm512_castpd_ps(_mm512_unpackhi_pd(t0d, t1d)),
    );
    // Reorder lanes: result lane t = 4l + b takes u's lane 4b + l.
    let idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_permutexvar_ps(idx, u)
}

/// A full tile of `MR` rows (1 to 4) by 4 columns over `kc` values of K: `MR * 4` zmm
/// accumulators in registers, each B vector loaded once for all the rows, one shuffle tree for
/// the sums.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
#[inline(never)] // inlined into `block`, its accumulators were spilled to the stack
unsafe fn tile_mx4<const MR: usize>(
    a: *const f32,
    lda: isize,
    b: *const f32,
    ldb: isize,
    kc: usize,
    c: *mut f32,
    ldc: isize,
    alpha: f32,
    beta: f32,
    read_c: bool,
) {
    debug_assert!((1..=4).contains(&MR));
    let mut acc = [_mm512_setzero_ps(); 16];
    // SAFETY: MR rows of A and 4 of B of kc floats at the given strides (caller); masked loads
    // for the tail.
    unsafe {
        let ar: [*const f32; MR] = std::array::from_fn(|i| a.offset(i as isize * lda));
        let br: [*const f32; 4] = std::array::from_fn(|j| b.offset(j as isize * ldb));
        let mut kk = 0;
        let mask: __mmask16;
        macro_rules! step {
            ($ld:ident) => {{
                let bv: [__m512; 4] = std::array::from_fn(|j| $ld!(br[j]));
                for i in 0..MR {
                    let av = $ld!(ar[i]);
                    for j in 0..4 {
                        acc[i * 4 + j] = _mm512_fmadd_ps(av, bv[j], acc[i * 4 + j]);
                    }
                }
            }};
        }
        macro_rules! full {
            ($p:expr) => {
                _mm512_loadu_ps($p.add(kk))
            };
        }
        macro_rules! part {
            ($p:expr) => {
                _mm512_maskz_loadu_ps(mask, $p.add(kk))
            };
        }
        while kk + 16 <= kc {
            step!(full);
            kk += 16;
        }
        if kk < kc {
            mask = (1u32 << (kc - kk)) as u16 - 1;
            step!(part);
        }
        // row i's four sums are lanes 4i..4i+4 of the reduction
        let s = _mm512_mul_ps(reduce16(&acc), _mm512_set1_ps(alpha));
        let sa: [__m128; 4] = [
            _mm512_extractf32x4_ps::<0>(s),
            _mm512_extractf32x4_ps::<1>(s),
            _mm512_extractf32x4_ps::<2>(s),
            _mm512_extractf32x4_ps::<3>(s),
        ];
        for (i, row) in sa.iter().enumerate().take(MR) {
            let cp = c.offset(i as isize * ldc);
            let v = if read_c {
                _mm_fmadd_ps(_mm_loadu_ps(cp), _mm_set1_ps(beta), *row)
            } else {
                *row
            };
            _mm_storeu_ps(cp, v);
        }
    }
}

/// A partial tile (`mr` <= 4, `nr` < 4) at the edges of C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_edge(
    mr: usize,
    nr: usize,
    a: *const f32,
    lda: isize,
    b: *const f32,
    ldb: isize,
    kc: usize,
    c: *mut f32,
    ldc: isize,
    alpha: f32,
    beta: f32,
    read_c: bool,
) {
    let mut acc = [_mm512_setzero_ps(); 16];
    // SAFETY: mr rows of A and nr rows of B of kc floats (caller); masked tail loads.
    unsafe {
        let mut kk = 0;
        while kk < kc {
            let mask: __mmask16 = if kk + 16 <= kc {
                0xffff
            } else {
                (1u32 << (kc - kk)) as u16 - 1
            };
            let mut bv = [_mm512_setzero_ps(); 4];
            for (j, v) in bv.iter_mut().enumerate().take(nr) {
                *v = _mm512_maskz_loadu_ps(mask, b.offset(j as isize * ldb).add(kk));
            }
            for i in 0..mr {
                let av = _mm512_maskz_loadu_ps(mask, a.offset(i as isize * lda).add(kk));
                for j in 0..nr {
                    acc[i * 4 + j] = _mm512_fmadd_ps(av, bv[j], acc[i * 4 + j]);
                }
            }
            kk += 16;
        }
        for i in 0..mr {
            for j in 0..nr {
                let p = c.offset(i as isize * ldc).add(j);
                let s = alpha * _mm512_reduce_add_ps(acc[i * 4 + j]);
                *p = if read_c { s + beta * *p } else { s };
            }
        }
    }
}

/// Packed (BLIS-style) f32 GEMM for large M on AVX-512: `C = alpha * A B + beta * C` with any
/// strides, `A(i, k) = a[i*ars + k*acs]`, `B(k, j) = b[k*brs + j*bcs]`,
/// `C(i, j) = c[i*crs + j*ccs]`. A 12x32 microkernel (24 zmm accumulators, B rows as two
/// vectors, A values broadcast) on panels packed per thread: B `[KC][32]` per 32 columns, A
/// `[KC][12]` per 12 rows; N is split between threads.
///
/// # Safety
/// `available()`; operands valid for their strides; C overlaps neither input.
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm_packed(
    m: usize,
    n: usize,
    k: usize,
    a: (*const f32, isize, isize),
    b: (*const f32, isize, isize),
    c: (*mut f32, isize, isize),
    alpha: f32,
    beta: f32,
) {
    if m == 0 || n == 0 {
        return;
    }
    let (ap, bp, cp) = (
        SendPtr::from_const(a.0),
        SendPtr::from_const(b.0),
        SendPtr(c.0),
    );
    let panels = n.div_ceil(PNR);
    let min = panels.div_ceil(threads().max(1)).max(1);
    par_ranges(panels, PNR * m * k, min, |r| {
        let (j0, j1) = (r.start * PNR, (r.end * PNR).min(n));
        #[cfg(target_arch = "x86_64")]
        // SAFETY: columns j0..j1 of C belong to this range; AVX-512 per the caller.
        unsafe {
            packed_block(
                m,
                j0,
                j1,
                k,
                (ap.get(), a.1, a.2),
                (bp.get(), b.1, b.2),
                (cp.get(), c.1, c.2),
                alpha,
                beta,
            )
        };
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (j0, j1, ap, bp, cp);
    });
}

const PMR: usize = 12;
const PNR: usize = 32;
const PKC: usize = 256;
/// Columns per B block (kept in L2 while every A micro-panel passes over it).
const PNB: usize = 128;

thread_local! {
    static PACK: std::cell::RefCell<(Vec<f32>, Vec<f32>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// Columns `j0..j1` of C. Loop order (BLIS with the roles of A and B exchanged, since our
/// vector dimension is N): K blocks; all of A packed in 12-row micro-panels; B in blocks of
/// `PNB` columns packed in 32-column micro-panels (L2); the A micro-panel (12 x KC, L1) outer,
/// the B micro-panels inner.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn packed_block(
    m: usize,
    j0: usize,
    j1: usize,
    k: usize,
    a: (*const f32, isize, isize),
    b: (*const f32, isize, isize),
    c: (*mut f32, isize, isize),
    alpha: f32,
    beta: f32,
) {
    let mpan = m.div_ceil(PMR);
    // this thread's packing buffers (fresh ones while the thread's storage is torn down)
    crate::kernels::with_thread_local(&PACK, |(bbuf, abuf)| {
        if bbuf.len() < PNB * PKC {
            bbuf.resize(PNB * PKC, 0.0);
        }
        if abuf.len() < mpan * PMR * PKC {
            abuf.resize(mpan * PMR * PKC, 0.0);
        }
        let (abase, bbase) = (abuf.as_mut_ptr(), bbuf.as_mut_ptr());
        let mut k0 = 0;
        loop {
            let kc = PKC.min(k - k0);
            let (be, read_c) = if k0 == 0 {
                (beta, beta != 0.0)
            } else {
                (1.0, true)
            };
            // SAFETY: panels sized above; source rows/columns inside A and B.
            unsafe {
                for q in 0..mpan {
                    let dst = abase.add(q * PMR * kc);
                    if a.2 == 1 {
                        let rows = (m - q * PMR).min(PMR);
                        let src = |r: usize| a.0.offset((q * PMR + r) as isize * a.1 + k0 as isize);
                        pack_rows_t(src, rows, PMR, kc, dst, PMR, PMR as isize * a.1);
                        continue;
                    }
                    for ii in 0..PMR {
                        let i = q * PMR + ii;
                        if i < m {
                            let row = a.0.offset(i as isize * a.1 + k0 as isize * a.2);
                            for kk in 0..kc {
                                *dst.add(kk * PMR + ii) = *row.offset(kk as isize * a.2);
                            }
                        } else {
                            for kk in 0..kc {
                                *dst.add(kk * PMR + ii) = 0.0;
                            }
                        }
                    }
                }
                let mut nb0 = j0;
                while nb0 < j1 {
                    let nbc = PNB.min(j1 - nb0);
                    let npan = nbc.div_ceil(PNR);
                    for p in 0..npan {
                        let dst = bbase.add(p * PNR * kc);
                        if b.1 == 1 {
                            for half in 0..2 {
                                let first = p * PNR + half * 16;
                                let rows = nbc.saturating_sub(first).min(16);
                                let src = |r: usize| {
                                    b.0.offset((nb0 + first + r) as isize * b.2 + k0 as isize)
                                };
                                pack_rows_t(src, rows, 16, kc, dst.add(half * 16), PNR, 16 * b.2);
                            }
                            continue;
                        }
                        for jj in 0..PNR {
                            let j = nb0 + p * PNR + jj;
                            if j < nb0 + nbc {
                                let col = b.0.offset(j as isize * b.2 + k0 as isize * b.1);
                                for kk in 0..kc {
                                    *dst.add(kk * PNR + jj) = *col.offset(kk as isize * b.1);
                                }
                            } else {
                                for kk in 0..kc {
                                    *dst.add(kk * PNR + jj) = 0.0;
                                }
                            }
                        }
                    }
                    for q in 0..mpan {
                        let mr = (m - q * PMR).min(PMR);
                        for p in 0..npan {
                            let nr = (nbc - p * PNR).min(PNR);
                            let (i, j) = (q * PMR, nb0 + p * PNR);
                            kernel_12x32(
                                kc,
                                abase.add(q * PMR * kc),
                                bbase.add(p * PNR * kc),
                                c.0.offset(i as isize * c.1 + j as isize * c.2),
                                c.1,
                                c.2,
                                mr,
                                nr,
                                alpha,
                                be,
                                read_c,
                            );
                        }
                    }
                    nb0 += nbc;
                }
            }
            k0 += kc;
            if k0 >= k {
                break;
            }
        }
    });
}

/// 16x16 transpose: `out[c]` lane `r` = `v[r]` lane `c`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
fn transpose16(v: &[__m512; 16]) -> [__m512; 16] {
    let mut t = [_mm512_setzero_ps(); 16];
    for p in 0..8 {
        t[2 * p] = _mm512_unpacklo_ps(v[2 * p], v[2 * p + 1]);
        t[2 * p + 1] = _mm512_unpackhi_ps(v[2 * p], v[2 * p + 1]);
    }
    // u[4g + x], 128-bit lane L: column 4L + x, rows 4g..4g+4
    let mut u = [_mm512_setzero_ps(); 16];
    for g in 0..4 {
        let (t0, t1, t2, t3) = (
            _mm512_castps_pd(t[4 * g]),
            _mm512_castps_pd(t[4 * g + 1]),
            _mm512_castps_pd(t[4 * g + 2]),
            _mm512_castps_pd(t[4 * g + 3]),
        );
        u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
        u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
        u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
        u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
    }
    let mut out = [_mm512_setzero_ps(); 16];
    for x in 0..4 {
        let a = _mm512_shuffle_f32x4::<0x88>(u[x], u[4 + x]);
        let b = _mm512_shuffle_f32x4::<0xDD>(u[x], u[4 + x]);
        let c = _mm512_shuffle_f32x4::<0x88>(u[8 + x], u[12 + x]);
        let d = _mm512_shuffle_f32x4::<0xDD>(u[8 + x], u[12 + x]);
        out[x] = _mm512_shuffle_f32x4::<0x88>(a, c);
        out[8 + x] = _mm512_shuffle_f32x4::<0xDD>(a, c);
        out[4 + x] = _mm512_shuffle_f32x4::<0x88>(b, d);
        out[12 + x] = _mm512_shuffle_f32x4::<0xDD>(b, d);
    }
    out
}

/// Packs `rows` (<= 16 valid of `width` <= 16) vectors that are contiguous in K into
/// `dst[kk * ld + r]` for kk in 0..kc: a transposing copy, 16x16 blocks at a time, prefetching
/// into L2 the same part of the rows `ahead` floats further on (the caller's next rows).
///
/// # Safety
/// `src(r)` points at `kc` readable floats for r < rows; dst has room for `kc * ld` floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn pack_rows_t(
    src: impl Fn(usize) -> *const f32,
    rows: usize,
    width: usize,
    kc: usize,
    dst: *mut f32,
    ld: usize,
    ahead: isize,
) {
    let store_mask: __mmask16 = ((1u32 << width) - 1) as u16;
    let mut kb = 0;
    while kb < kc {
        let rem = (kc - kb).min(16);
        let lmask: __mmask16 = ((1u32 << rem) - 1) as u16;
        let mut v = [_mm512_setzero_ps(); 16];
        for (r, vr) in v.iter_mut().enumerate().take(rows) {
            // SAFETY: rem floats of row r (caller).
            *vr = unsafe { _mm512_maskz_loadu_ps(lmask, src(r).add(kb)) };
        }
        // The same line of the rows `ahead` floats on (the next call's rows): the strided
        // 1 KiB row pieces of a K block are too short for the hardware prefetchers, so
        // without this the pack waited on DRAM (performance log, session 16).
        for r in 0..rows {
            let p = src(r).wrapping_add(kb).wrapping_offset(ahead) as *const i8;
            _mm_prefetch::<_MM_HINT_T1>(p);
        }
        let t = transpose16(&v);
        for (kk, tk) in t.iter().enumerate().take(rem) {
            // SAFETY: row kb+kk of dst, `width` lanes.
            unsafe { _mm512_mask_storeu_ps(dst.add((kb + kk) * ld), store_mask, *tk) };
        }
        kb += 16;
    }
}

/// 12x32 microkernel: `C[0..mr, 0..nr] = alpha * Ap Bp + beta * C` (C read only if `read_c`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_12x32(
    kc: usize,
    ap: *const f32,
    bp: *const f32,
    c: *mut f32,
    crs: isize,
    ccs: isize,
    mr: usize,
    nr: usize,
    alpha: f32,
    beta: f32,
    read_c: bool,
) {
    let mut acc = [_mm512_setzero_ps(); 24];
    // The C tile's rows (16 KiB apart at N = 4096) are fetched while the K loop runs,
    // instead of one miss after another in the update at its end.
    if ccs == 1 {
        for i in 0..mr {
            let row = c.wrapping_offset(i as isize * crs) as *const i8;
            _mm_prefetch::<_MM_HINT_T0>(row);
            _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(64));
        }
    }
    // SAFETY: packed panels of kc steps (caller); C tile rows/cols inside C.
    unsafe {
        for kk in 0..kc {
            let b0 = _mm512_loadu_ps(bp.add(kk * PNR));
            let b1 = _mm512_loadu_ps(bp.add(kk * PNR + 16));
            let arow = ap.add(kk * PMR);
            for i in 0..PMR {
                let av = _mm512_set1_ps(*arow.add(i));
                acc[2 * i] = _mm512_fmadd_ps(av, b0, acc[2 * i]);
                acc[2 * i + 1] = _mm512_fmadd_ps(av, b1, acc[2 * i + 1]);
            }
        }
        let al = _mm512_set1_ps(alpha);
        let be = _mm512_set1_ps(beta);
        for i in 0..mr {
            let row = c.offset(i as isize * crs);
            for h in 0..2 {
                let cols = nr.saturating_sub(h * 16).min(16);
                if cols == 0 {
                    continue;
                }
                let v = _mm512_mul_ps(acc[2 * i + h], al);
                if ccs == 1 {
                    let mask: __mmask16 = if cols == 16 {
                        0xffff
                    } else {
                        (1u32 << cols) as u16 - 1
                    };
                    let p = row.add(h * 16);
                    let out = if read_c {
                        _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, p), be, v)
                    } else {
                        v
                    };
                    _mm512_mask_storeu_ps(p, mask, out);
                } else {
                    let mut tmp = [0f32; 16];
                    _mm512_storeu_ps(tmp.as_mut_ptr(), v);
                    for (t, x) in tmp.iter().enumerate().take(cols) {
                        let p = row.offset((h * 16 + t) as isize * ccs);
                        *p = if read_c { x + beta * *p } else { *x };
                    }
                }
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn transpose16_is_a_transpose() {
        if !is_x86_feature_detected!("avx512f") {
            return;
        }
        #[target_feature(enable = "avx512f")]
        fn run() -> [[f32; 16]; 16] {
            let mut v = [_mm512_setzero_ps(); 16];
            for (r, vr) in v.iter_mut().enumerate() {
                let row: [f32; 16] = std::array::from_fn(|c| (r * 16 + c) as f32);
                // SAFETY: 16 floats.
                *vr = unsafe { _mm512_loadu_ps(row.as_ptr()) };
            }
            let t = transpose16(&v);
            let mut out = [[0f32; 16]; 16];
            for (c, tc) in t.iter().enumerate() {
                // SAFETY: 16 floats.
                unsafe { _mm512_storeu_ps(out[c].as_mut_ptr(), *tc) };
            }
            out
        }
        // SAFETY: AVX-512F detected above.
        let out = unsafe { run() };
        for (c, row) in out.iter().enumerate() {
            for (r, &x) in row.iter().enumerate() {
                assert_eq!(x, (r * 16 + c) as f32, "out[{c}][{r}]");
            }
        }
    }

    /// Every row tiling (4-row tiles, trailing 5-6 rows as 3 + 2/3, tiles of 1-3 rows, edge
    /// tiles), column edges, K tails and blocks, padded strides, alpha and beta, against an
    /// f64 reference.
    #[test]
    fn tiles_of_every_shape_match_a_reference() {
        if !available() {
            eprintln!("skipped: AVX-512 not selected");
            return;
        }
        let mut seed = 0x2545_f491u32;
        let mut rnd = move || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        };
        for m in 1..=13usize {
            for n in [1usize, 3, 4, 7, 9] {
                for k in [1usize, 15, 17, 100, 1030] {
                    let (lda, ldb, ldc) = (k + 3, k + 1, n + 2);
                    let a: Vec<f32> = (0..m * lda).map(|_| rnd()).collect();
                    let b: Vec<f32> = (0..n * ldb).map(|_| rnd()).collect();
                    let c0: Vec<f32> = (0..m * ldc).map(|_| rnd()).collect();
                    for (alpha, beta) in [(1.0f32, 0.0f32), (0.5, 0.25)] {
                        let mut c = c0.clone();
                        // SAFETY: the buffers hold the rows at these strides.
                        unsafe {
                            sgemm_nt(
                                m,
                                n,
                                k,
                                a.as_ptr(),
                                lda as isize,
                                b.as_ptr(),
                                ldb as isize,
                                c.as_mut_ptr(),
                                ldc as isize,
                                alpha,
                                beta,
                            )
                        };
                        for i in 0..m {
                            for j in 0..ldc {
                                let got = c[i * ldc + j];
                                if j >= n {
                                    assert_eq!(got, c0[i * ldc + j], "padding ({i},{j}) written");
                                    continue;
                                }
                                let dot: f64 = (0..k)
                                    .map(|t| a[i * lda + t] as f64 * b[j * ldb + t] as f64)
                                    .sum();
                                let want =
                                    alpha as f64 * dot + beta as f64 * c0[i * ldc + j] as f64;
                                assert!(
                                    (got as f64 - want).abs() < 1e-4,
                                    "m {m} n {n} k {k} alpha {alpha} ({i},{j}): {got} vs {want}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
