//! RMS normalisation over the last dimension: `y = w * x / sqrt(mean(x^2) + eps)`, computed in
//! f32 per row (sum of squares in SIMD lanes), rows threaded; the leading dimensions may have any
//! strides, the last dimension is unit-stride.

use half::{bf16, f16};

use super::simd::{is_bf16, multiversion, put, Elem, Scalar, Simd};
use super::{par_ranges, stream_fence, stream_output, SendPtr, Strided};

/// Sum of squares of `d` elements in f64 (the rare rows whose f32 sum overflows or underflows).
#[inline(never)]
#[cold]
unsafe fn sum_squares_f64<T: Elem>(x: *const T, d: usize) -> f64 {
    // SAFETY: d elements (caller).
    (0..d)
        .map(|i| unsafe { T::load(Scalar, x.add(i)) } as f64)
        .map(|v| v * v)
        .sum()
}

/// Elements summed in f32 lanes before the partial sum joins an f64 total: f32 sums of longer
/// rows lose digits in proportion to the length (a 2^24-element row was 1.6x past the 1e-5
/// tolerance; session 17's audit). Rows up to this length (every model's hidden size) are
/// summed exactly as before.
const SUM_BLOCK: usize = 1 << 14;

/// `1 / sqrt(mean(x^2) + eps)` of one row of `d` elements (the first pass).
#[inline(always)]
unsafe fn inv_rms<S: Simd, T: Elem>(s: S, x: *const T, d: usize, eps: f32) -> f32 {
    // SAFETY: d elements.
    unsafe {
        if d > SUM_BLOCK {
            let mut total = 0f64;
            let mut i = 0;
            while i < d {
                let n = SUM_BLOCK.min(d - i);
                total += sum_squares(s, x.add(i), n) as f64;
                i += n;
            }
            let mean = (total / d as f64) as f32;
            return if !total.is_finite() || tiny_needs_f64(total as f32, mean, eps) {
                (1.0 / (sum_squares_f64(x, d) / d as f64 + eps as f64).sqrt()) as f32
            } else {
                (1.0 / (total / d as f64 + eps as f64).sqrt()) as f32
            };
        }
        finish_inv_rms(sum_squares(s, x, d), x, d, eps)
    }
}

/// `1 / sqrt(ss / d + eps)` from the f32 sum of squares `ss` of a row of `d <= SUM_BLOCK`
/// elements at `x` (read again only in the rare cases below).
#[inline(always)]
unsafe fn finish_inv_rms<T: Elem>(ss: f32, x: *const T, d: usize, eps: f32) -> f32 {
    if !ss.is_finite() || tiny_needs_f64(ss, ss / d as f32, eps) {
        // The f32 sum overflowed (|x| past ~1e19) or lost its digits to underflow while it
        // still matters against eps (|x| below ~1e-19, eps tiny or 0): again in f64, so
        // the result is the normalised row rather than zeros or infinities.
        // SAFETY: d elements (caller).
        (1.0 / (unsafe { sum_squares_f64(x, d) } / d as f64 + eps as f64).sqrt()) as f32
    } else {
        1.0 / (ss / d as f32 + eps).sqrt()
    }
}

/// Whether a sum of squares `ss` (mean `mean`) is too small for f32 against `eps`: squares
/// below the smallest normal f32 (|x| < ~1.1e-19) lost digits to underflow (FMA) or were
/// flushed to zero (`vdpbf16ps`), and that shows while the mean is not negligible against
/// eps (the first test), or while mean + eps itself is so small that a flushed square of up to
/// 2^-126 would count (below 2e-31: session 20's audit found bf16 rows of 1e-19 with eps 2e-38
/// normalised by 1/sqrt(eps), 22% off).
#[inline(always)]
fn tiny_needs_f64(ss: f32, mean: f32, eps: f32) -> bool {
    ss < 1e-28 && (mean >= eps * 6e-8 || mean + eps < 2e-31)
}

/// Sum of the squares of `d` elements in f32 lanes.
#[inline(always)]
unsafe fn sum_squares<S: Simd, T: Elem>(s: S, x: *const T, d: usize) -> f32 {
    // SAFETY: d elements.
    unsafe { sum_squares_from(s, x, d, 0, [s.splat(0.0); 4]) }
}

/// Adds the squares of the `8 * LANES` elements at `x` to four independent sums (with two, the
/// FMA latency capped the first pass at half a vector per cycle, below what L3 delivers).
#[inline(always)]
unsafe fn square_block<S: Simd, T: Elem>(s: S, acc: &mut [S::V; 4], x: *const T) {
    let l = S::LANES;
    // SAFETY: 8 * LANES elements (caller).
    unsafe {
        if is_bf16::<T>() && S::DPBF16 {
            // one `vdpbf16ps` per 32 values; it flushes subnormal inputs (their squares are
            // below f32's range anyway) and squares or sums below 2^-126 to zero, which
            // `tiny_needs_f64` sends to f64 where it could show
            let x16 = x as *const u16;
            for (k, a) in acc.iter_mut().enumerate() {
                *a = s.square_bf16_pairs(*a, x16.add(2 * l * k));
            }
        } else {
            for h in [0, 4 * l] {
                let (v0, v1, v2, v3) = load4(s, x.add(h));
                acc[0] = s.fma(v0, v0, acc[0]);
                acc[1] = s.fma(v1, v1, acc[1]);
                acc[2] = s.fma(v2, v2, acc[2]);
                acc[3] = s.fma(v3, v3, acc[3]);
            }
        }
    }
}

/// Four vectors of elements at `x` (bf16 as two pair loads: the sum does not care about the
/// order).
#[inline(always)]
unsafe fn load4<S: Simd, T: Elem>(s: S, x: *const T) -> (S::V, S::V, S::V, S::V) {
    let l = S::LANES;
    // SAFETY: 4 * LANES elements (caller).
    unsafe {
        if is_bf16::<T>() {
            let (v0, v1) = s.load_bf16_pairs(x as *const u16);
            let (v2, v3) = s.load_bf16_pairs((x as *const u16).add(2 * l));
            (v0, v1, v2, v3)
        } else {
            (
                T::load(s, x),
                T::load(s, x.add(l)),
                T::load(s, x.add(2 * l)),
                T::load(s, x.add(3 * l)),
            )
        }
    }
}

/// `sum_squares` from element `i` on, the squares before it being in `acc` (`i` a multiple
/// of `8 * LANES`; `square_block` gave them).
#[inline(always)]
unsafe fn sum_squares_from<S: Simd, T: Elem>(
    s: S,
    x: *const T,
    d: usize,
    mut i: usize,
    mut acc: [S::V; 4],
) -> f32 {
    let l = S::LANES;
    // SAFETY: d elements.
    unsafe {
        while i + 8 * l <= d {
            square_block(s, &mut acc, x.add(i));
            i += 8 * l;
        }
        if i + 4 * l <= d {
            let (v0, v1, v2, v3) = load4(s, x.add(i));
            acc[0] = s.fma(v0, v0, acc[0]);
            acc[1] = s.fma(v1, v1, acc[1]);
            acc[2] = s.fma(v2, v2, acc[2]);
            acc[3] = s.fma(v3, v3, acc[3]);
            i += 4 * l;
        }
        while i + l <= d {
            let v = T::load(s, x.add(i));
            acc[0] = s.fma(v, v, acc[0]);
            i += l;
        }
        let mut ss = s.reduce_sum(s.add(s.add(acc[0], acc[1]), s.add(acc[2], acc[3])));
        while i < d {
            let v = T::load(Scalar, x.add(i));
            ss += v * v;
            i += 1;
        }
        ss
    }
}

/// How far ahead of the first pass `fused_body` prefetches, in bytes.
const PREFETCH_AHEAD: usize = 2048;

/// Prefetches the lines of `bytes` bytes at `p` into L1; any address (a prefetch never faults).
#[inline(always)]
fn prefetch_t0(p: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    for b in 0..bytes.div_ceil(64) {
        // SAFETY: prefetches do not fault or touch memory semantics.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                p.wrapping_add(64 * b) as *const i8,
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, bytes);
}

/// One row's second pass (`y = (x * r) * w`) with the next row's first pass in the same sweep,
/// bf16 rows and weights in cache (`fused` in `rms_norm`): row `x` was just read from L3 by its
/// own first pass and is in L1, so each step reads `xn` from L3 while `y`'s lines are written,
/// which keeps both directions busy (the separate passes read, then wrote, at a copy's time
/// each). Returns the next row's `1 / rms` as `inv_rms` would; `r` is this row's.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn fused_body<S: Simd, T: Elem, W: Elem>(
    s: S,
    y: *mut T,
    x: *const T,
    w: *const W,
    d: usize,
    eps: f32,
    r: f32,
    xn: *const T,
) -> f32 {
    let l = S::LANES;
    // SAFETY: d elements in y, x, xn and w; y equals x or does not overlap it or xn.
    unsafe {
        if r.is_infinite() {
            row_f64(y, x, w, d, eps);
            return inv_rms(s, xn, d, eps);
        }
        let rv = s.splat(r);
        let mut acc = [s.splat(0.0); 4];
        let mut i = 0;
        while i + 8 * l <= d {
            // the next row's lines 2 KiB ahead (into the row after it at the end: a prefetch
            // never faults): 0.87x the time at (512,4096), 1 KiB 0.91x, 4 KiB 0.89x
            let sz = std::mem::size_of::<T>();
            prefetch_t0(
                (xn as *const u8).wrapping_add(sz * i + PREFETCH_AHEAD),
                sz * 8 * l,
            );
            square_block(s, &mut acc, xn.add(i));
            for k in 0..4 {
                scale_step(s, y, x, w, i + 2 * l * k, rv);
            }
            i += 8 * l;
        }
        scale_row(s, y, x, w, i, d, r, false);
        finish_inv_rms(sum_squares_from(s, xn, d, i, acc), xn, d, eps)
    }
}

#[inline(always)]
unsafe fn row_body<S: Simd, T: Elem, W: Elem>(
    s: S,
    y: *mut T,
    x: *const T,
    w: *const W,
    d: usize,
    eps: f32,
    nt: bool,
) {
    // SAFETY: d elements in each row and in w; y equals x or does not overlap it.
    unsafe { scale_or_f64(s, y, x, w, d, eps, inv_rms(s, x, d, eps), nt) }
}

/// The second pass of a row whose `1 / rms` is `r`: `scale_row`, or the whole row in f64 when
/// `r` is past f32 (`row_f64`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn scale_or_f64<S: Simd, T: Elem, W: Elem>(
    s: S,
    y: *mut T,
    x: *const T,
    w: *const W,
    d: usize,
    eps: f32,
    r: f32,
    nt: bool,
) {
    // SAFETY: d elements in each row and in w; y equals x or does not overlap it.
    unsafe {
        if r.is_infinite() {
            row_f64(y, x, w, d, eps)
        } else {
            scale_row(s, y, x, w, 0, d, r, nt)
        }
    }
}

/// A whole row in f64, for rows whose `1 / rms` is past f32 (subnormal rows with eps = 0, or
/// an all-zero row, which gives NaN as the reference does).
#[inline(never)]
#[cold]
unsafe fn row_f64<T: Elem, W: Elem>(y: *mut T, x: *const T, w: *const W, d: usize, eps: f32) {
    // SAFETY: d elements in each row and in w; y equals x or does not overlap it (each element
    // is read before it is written).
    unsafe {
        let r = 1.0 / (sum_squares_f64(x, d) / d as f64 + eps as f64).sqrt();
        for i in 0..d {
            let v = T::load(Scalar, x.add(i)) as f64 * r * W::load(Scalar, w.add(i)) as f64;
            T::store(Scalar, y.add(i), v as f32);
        }
    }
}

/// `y = (x * r) * w` for the `2 * LANES` elements at `o` (`rv`: r in every lane), plain
/// stores; bf16 rows with bf16 weights in pair space (element-wise, so the order never shows).
#[inline(always)]
unsafe fn scale_step<S: Simd, T: Elem, W: Elem>(
    s: S,
    y: *mut T,
    x: *const T,
    w: *const W,
    o: usize,
    rv: S::V,
) {
    let l = S::LANES;
    // SAFETY: 2 LANES elements at o in y, x and w; y equals x or does not overlap it.
    unsafe {
        if is_bf16::<T>() && is_bf16::<W>() {
            let (x16, w16, y16) = (x as *const u16, w as *const u16, y as *mut u16);
            let (xe, xo) = s.load_bf16_pairs(x16.add(o));
            let (we, wo) = s.load_bf16_pairs(w16.add(o));
            let (ye, yo) = (s.mul(s.mul(xe, rv), we), s.mul(s.mul(xo, rv), wo));
            s.store_bf16_pairs(y16.add(o), ye, yo);
        } else {
            for o in [o, o + l] {
                let v = s.mul(s.mul(T::load(s, x.add(o)), rv), W::load(s, w.add(o)));
                T::store(s, y.add(o), v);
            }
        }
    }
}

/// The second pass over columns `i0..d` of one row: `y = (x * r) * w`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn scale_row<S: Simd, T: Elem, W: Elem>(
    s: S,
    y: *mut T,
    x: *const T,
    w: *const W,
    i0: usize,
    d: usize,
    r: f32,
    nt: bool,
) {
    let l = S::LANES;
    // SAFETY: d elements in each row and in w; y equals x or does not overlap it.
    unsafe {
        // bf16 rows (and weights) in pair space: one shift and one mask widen 2 LANES
        // elements, one store writes them back (element-wise, so the order never shows).
        let pairs = !nt && is_bf16::<T>() && is_bf16::<W>();
        let rv = s.splat(r);
        let mut i = i0;
        if pairs {
            while i + 2 * l <= d {
                scale_step(s, y, x, w, i, rv);
                i += 2 * l;
            }
        }
        if nt {
            // streaming stores need vector-aligned addresses: a scalar head first
            let align = l * std::mem::size_of::<T>();
            while i < d && (y.add(i) as usize) % align != 0 {
                let v = T::load(Scalar, x.add(i)) * r * W::load(Scalar, w.add(i));
                T::store(Scalar, y.add(i), v);
                i += 1;
            }
        }
        while i + l <= d {
            let v = s.mul(s.mul(T::load(s, x.add(i)), rv), W::load(s, w.add(i)));
            put(s, nt, y.add(i), v);
            i += l;
        }
        while i < d {
            let v = T::load(Scalar, x.add(i)) * r * W::load(Scalar, w.add(i));
            T::store(Scalar, y.add(i), v);
            i += 1;
        }
    }
}

/// Rows per group of `group_body`.
const GROUP_ROWS: usize = 8;

/// Rows (`g <= GROUP_ROWS` of them, `d` elements each) in cache, f32 with f32 weights or bf16
/// with bf16 weights: the second pass runs over column blocks with that block of `w` held in
/// registers for all the rows, instead of row by row. Row by row, the weight row (16 KiB of
/// f32 at d = 4096) is evicted from L1 by the streaming x and y rows and comes back from L2 for
/// every row: three line fills per output line instead of two (performance log, session 7).
/// bf16 goes in pair space (`load_bf16_pairs`: the weight block and each row block in the same
/// (even, odd) order; `store_bf16_pairs` restores it). Same arithmetic as `row_body`.
#[inline(always)]
unsafe fn group_body<S: Simd, T: Elem, W: Elem>(
    s: S,
    y: *const *mut T,
    x: *const *const T,
    g: usize,
    w: *const W,
    d: usize,
    eps: f32,
) {
    // weight vectors kept per block: 16 of the 32 registers (8 of 16)
    // SAFETY: forwarded.
    unsafe {
        if S::REGISTERS >= 32 {
            group_blocks::<S, T, W, 16>(s, y, x, g, w, d, eps)
        } else {
            group_blocks::<S, T, W, 8>(s, y, x, g, w, d, eps)
        }
    }
}

/// `group_body` with `U` (even) weight vectors per column block.
#[inline(always)]
unsafe fn group_blocks<S: Simd, T: Elem, W: Elem, const U: usize>(
    s: S,
    y: *const *mut T,
    x: *const *const T,
    g: usize,
    w: *const W,
    d: usize,
    eps: f32,
) {
    let l = S::LANES;
    let pairs = is_bf16::<T>() && is_bf16::<W>();
    // SAFETY: g row pointers of d elements each; each y row equals its x row or overlaps nothing.
    unsafe {
        let mut r = [0f32; GROUP_ROWS];
        for (k, rk) in r.iter_mut().enumerate().take(g) {
            *rk = inv_rms(s, *x.add(k), d, eps);
        }
        if r[..g].iter().any(|v| v.is_infinite()) {
            // a row past f32's range (see `row_f64`): the group goes row by row
            for k in 0..g {
                row_body(s, *y.add(k), *x.add(k), w, d, eps, false);
            }
            return;
        }
        let blk = U * l;
        let mut c = 0;
        while c + blk <= d {
            let mut wv = [s.splat(0.0); U];
            for u in (0..U).step_by(2) {
                (wv[u], wv[u + 1]) = if pairs {
                    s.load_bf16_pairs((w as *const u16).add(c + u * l))
                } else {
                    (
                        W::load(s, w.add(c + u * l)),
                        W::load(s, w.add(c + (u + 1) * l)),
                    )
                };
            }
            for (k, &rk) in r.iter().enumerate().take(g) {
                let (xk, yk, rv) = (*x.add(k), *y.add(k), s.splat(rk));
                for u in (0..U).step_by(2) {
                    let o = c + u * l;
                    if pairs {
                        let (xe, xo) = s.load_bf16_pairs((xk as *const u16).add(o));
                        let (ye, yo) =
                            (s.mul(s.mul(xe, rv), wv[u]), s.mul(s.mul(xo, rv), wv[u + 1]));
                        s.store_bf16_pairs((yk as *mut u16).add(o), ye, yo);
                    } else {
                        for v in [u, u + 1] {
                            let ov = c + v * l;
                            T::store(
                                s,
                                yk.add(ov),
                                s.mul(s.mul(T::load(s, xk.add(ov)), rv), wv[v]),
                            );
                        }
                    }
                }
            }
            c += blk;
        }
        for (k, &rk) in r.iter().enumerate().take(g) {
            scale_row(s, *y.add(k), *x.add(k), w, c, d, rk, false);
        }
    }
}

/// Rows of length `d` indexed by the leading dimensions `rows` (tensor 0 = y, 1 = x; the
/// innermost dimension of `rows` is the last leading dimension, with its strides).
///
/// # Safety
/// Every row must be valid; `y` equals `x` (same strides) or does not overlap it.
pub unsafe fn rms_norm<T: Elem, W: Elem>(
    y: *mut T,
    x: *const T,
    w: *const W,
    rows: &Strided<2>,
    d: usize,
    eps: f32,
) {
    let (yp, xp, wp) = (SendPtr(y), SendPtr::from_const(x), SendPtr::from_const(w));
    let (n_inner, ys, xs) = (rows.inner(), rows.inner_stride(0), rows.inner_stride(1));
    let n = rows.rows() * n_inner;
    let nt = stream_output(n * d * std::mem::size_of::<T>());
    // f32 (or bf16 with bf16 weights) in cache, rows too long for a row of x, y and w to share
    // a 32 KiB L1: rows in groups (`group_body`). Measured on Zen 4 (32 KiB L1): f32 (512, 1024)
    // 1.09x the time, (512, 4096) 0.90x; bf16: (512,3584) 0.86x, (512,4096) 0.92x, (256,8192)
    // 0.86x, (512,1024) 1.06x, (512,2048) 1.0x, hence one threshold on d. On Zen 5 (48 KiB L1)
    // grouping lost at every size, f32 (512,3584) to (256,8192) 1.29-1.66x the time, bf16
    // 1.07-1.46x, so only cores with an L1 of 32 KiB or less group (performance log).
    let l1 = super::l1d_bytes();
    let grouped = !nt
        && (std::mem::size_of::<T>() == 4 && std::mem::size_of::<W>() == 4
            || is_bf16::<T>() && is_bf16::<W>())
        && l1 <= 32 * 1024
        && 3 * d * 4 > l1
        && super::simd::level() >= super::simd::Level::Avx2;
    // Rows in cache whose next row fits L1 beside x, y and w (same-type weights): each row's
    // second pass reads the next row for its first (`fused_body`). Zen 5 (48 KiB L1), 2
    // threads: bf16 (512,4096) 0.77x the time (one thread 0.74x), f32 (128,1536) 0.91-0.98x;
    // rows past that lose (f32 d = 4096 1.30x, bf16 d = 8192 1.17x: the rows leave L1).
    let fused = !nt
        && !grouped
        && (is_bf16::<T>() && is_bf16::<W>()
            || std::mem::size_of::<T>() == 4 && std::mem::size_of::<W>() == 4)
        && d <= SUM_BLOCK
        && 4 * d * std::mem::size_of::<T>() <= l1
        && super::simd::level() >= super::simd::Level::Avx2;
    par_ranges(n, d * 2 * std::mem::size_of::<T>(), 4, |range| {
        if grouped {
            let mut r0 = range.start;
            while r0 < range.end {
                let g = (range.end - r0).min(GROUP_ROWS);
                let mut yr = [std::ptr::null_mut::<T>(); GROUP_ROWS];
                let mut xr = [std::ptr::null::<T>(); GROUP_ROWS];
                for k in 0..g {
                    let r = r0 + k;
                    let off = rows.row_offsets(r / n_inner);
                    let i = (r % n_inner) as isize;
                    // SAFETY: row r is valid (caller).
                    unsafe {
                        yr[k] = yp.get().offset(off[0] + i * ys);
                        xr[k] = xp.get().offset(off[1] + i * xs) as *const T;
                    }
                }
                let (y, x, w) = (yr.as_ptr(), xr.as_ptr(), wp.get() as *const W);
                // SAFETY: g valid rows.
                unsafe {
                    multiversion!(group_body, [T: Elem, W: Elem], (y: *const *mut T, x: *const *const T, g: usize, w: *const W, d: usize, eps: f32))
                }
                r0 += g;
            }
            return;
        }
        let row = |r: usize| {
            let off = rows.row_offsets(r / n_inner);
            let i = (r % n_inner) as isize;
            // SAFETY: row r is valid (caller).
            unsafe {
                (
                    yp.get().offset(off[0] + i * ys),
                    xp.get().offset(off[1] + i * xs) as *const T,
                )
            }
        };
        if fused && range.len() > 1 {
            let w = wp.get() as *const W;
            let (_, x0) = row(range.start);
            // SAFETY: row range.start is valid (caller).
            let mut inv = unsafe {
                multiversion!(inv_rms, [T: Elem], (x0: *const T, d: usize, eps: f32) -> f32)
            };
            for r in range.start..range.end - 1 {
                let ((y, x), (_, xn)) = (row(r), row(r + 1));
                let rr = inv;
                // SAFETY: rows r and r + 1 are valid (caller).
                inv = unsafe {
                    multiversion!(fused_body, [T: Elem, W: Elem], (y: *mut T, x: *const T, w: *const W, d: usize, eps: f32, rr: f32, xn: *const T) -> f32)
                };
            }
            let ((y, x), rr, nt) = (row(range.end - 1), inv, false);
            // SAFETY: the last row is valid (caller).
            unsafe {
                multiversion!(scale_or_f64, [T: Elem, W: Elem], (y: *mut T, x: *const T, w: *const W, d: usize, eps: f32, rr: f32, nt: bool))
            }
            return;
        }
        for r in range {
            let (y, x) = row(r);
            let w = wp.get() as *const W;
            // SAFETY: as above.
            unsafe {
                multiversion!(row_body, [T: Elem, W: Elem], (y: *mut T, x: *const T, w: *const W, d: usize, eps: f32, nt: bool))
            }
        }
        if nt {
            stream_fence();
        }
    });
}

macro_rules! named {
    ($($name:ident = $t:ty, $w:ty;)*) => {$(
        /// See `rms_norm`.
        ///
        /// # Safety
        /// As `rms_norm`.
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $name(y: *mut $t, x: *const $t, w: *const $w, rows: &Strided<2>,
                            d: usize, eps: f32) {
            // SAFETY: forwarded.
            unsafe { rms_norm::<$t, $w>(y, x, w, rows, d, eps) }
        }
    )*};
}

named! {
    rms_norm_f32 = f32, f32;
    rms_norm_f16 = f16, f16;
    rms_norm_bf16 = bf16, bf16;
    rms_norm_f16_w32 = f16, f32;
    rms_norm_bf16_w32 = bf16, f32;
}

#[cfg(test)]
mod tests {
    use super::super::simd::{force_level, Level};
    use super::*;

    /// `group_body` (taken only where L1 is 32 KiB or less, so not on every test machine)
    /// gives exactly `row_body`'s results, for full and partial column blocks and groups.
    fn grouped_equals_row_by_row<T: Elem + Copy, W: Elem + Copy>(
        from: fn(f32) -> T,
        wfrom: fn(f32) -> W,
        bits: fn(T) -> u32,
    ) {
        for (g, d) in [(GROUP_ROWS, 4096), (3, 3000), (5, 4100), (1, 17)] {
            let x: Vec<T> = (0..g * d)
                .map(|i| from(((i * 7919 % 1009) as f32 - 504.0) / 97.0))
                .collect();
            let w: Vec<W> = (0..d)
                .map(|i| wfrom(((i * 31 % 61) as f32 - 30.0) / 17.0))
                .collect();
            let mut grouped = vec![from(0.0); g * d];
            let mut plain = vec![from(0.0); g * d];
            let yr: Vec<*mut T> = (0..g).map(|r| grouped[r * d..].as_mut_ptr()).collect();
            let xr: Vec<*const T> = (0..g).map(|r| x[r * d..].as_ptr()).collect();
            let eps = 1e-6f32;
            // SAFETY: g rows of d elements each, w of d.
            unsafe {
                let (y, x, w) = (yr.as_ptr(), xr.as_ptr(), w.as_ptr());
                multiversion!(group_body, [T: Elem, W: Elem], (y: *const *mut T, x: *const *const T, g: usize, w: *const W, d: usize, eps: f32));
            }
            for r in 0..g {
                let (y, xrow, wp, nt) = (
                    plain[r * d..].as_mut_ptr(),
                    x[r * d..].as_ptr(),
                    w.as_ptr(),
                    false,
                );
                // SAFETY: as above.
                unsafe {
                    multiversion!(row_body, [T: Elem, W: Elem], (y: *mut T, xrow: *const T, wp: *const W, d: usize, eps: f32, nt: bool));
                }
            }
            for (i, (a, b)) in grouped.iter().zip(&plain).enumerate() {
                assert_eq!(bits(*a), bits(*b), "g {g} d {d} element {i}");
            }
        }
    }

    #[test]
    fn grouped_rows_match_row_by_row() {
        let _level = super::super::simd::level_lock();
        if super::super::simd::level() < super::super::simd::Level::Avx2 {
            return;
        }
        grouped_equals_row_by_row::<f32, f32>(|v| v, |v| v, f32::to_bits);
        grouped_equals_row_by_row::<bf16, bf16>(bf16::from_f32, bf16::from_f32, |v| {
            v.to_bits() as u32
        });
    }

    /// A chain of `fused_body` calls (what `rms_norm` runs on rows in cache) gives exactly
    /// `row_body`'s results row by row, at every level, in place or not, with vector tails,
    /// and with rows that take the f64 paths (overflowing, underflowing, all zero with eps 0).
    fn fused_equals_row_by_row<T: Elem + Copy, W: Elem + Copy>(
        from: fn(f32) -> T,
        wfrom: fn(f32) -> W,
        bits: fn(T) -> u32,
    ) {
        for lv in [Level::Scalar, Level::Avx2, Level::Avx512, Level::Avx512Bf16] {
            let lv = force_level(lv);
            for d in [1, 7, 64, 100, 130, 1536, 4099] {
                let scale = [1.0f32, 1e30, 0.0, 1e-30, 3.0, 1e-20];
                let rows = scale.len();
                let x: Vec<T> = (0..rows * d)
                    .map(|i| from(scale[i / d] * (((i * 7919 % 1009) as f32 - 504.0) / 97.0)))
                    .collect();
                let w: Vec<W> = (0..d)
                    .map(|i| wfrom(((i * 31 % 61) as f32 - 30.0) / 17.0))
                    .collect();
                for eps in [0.0f32, 1e-6] {
                    for in_place in [false, true] {
                        let mut plain = if in_place {
                            x.clone()
                        } else {
                            vec![from(0.0); rows * d]
                        };
                        let mut fused = plain.clone();
                        let nt = false;
                        for r in 0..rows {
                            let (y, xr, wp) =
                                (plain[r * d..].as_mut_ptr(), x[r * d..].as_ptr(), w.as_ptr());
                            // SAFETY: rows of d elements, w of d.
                            unsafe {
                                multiversion!(row_body, [T: Elem, W: Elem], (y: *mut T, xr: *const T, wp: *const W, d: usize, eps: f32, nt: bool));
                            }
                        }
                        let src = if in_place { fused.as_ptr() } else { x.as_ptr() };
                        let (yb, wp) = (fused.as_mut_ptr(), w.as_ptr());
                        // SAFETY: as above; in place, each call writes row r and reads r + 1.
                        unsafe {
                            let x0 = src;
                            let mut rr = multiversion!(inv_rms, [T: Elem], (x0: *const T, d: usize, eps: f32) -> f32);
                            for r in 0..rows - 1 {
                                let (y, xr, xn) =
                                    (yb.add(r * d), src.add(r * d), src.add((r + 1) * d));
                                rr = multiversion!(fused_body, [T: Elem, W: Elem], (y: *mut T, xr: *const T, wp: *const W, d: usize, eps: f32, rr: f32, xn: *const T) -> f32);
                            }
                            let (y, xr) = (yb.add((rows - 1) * d), src.add((rows - 1) * d));
                            multiversion!(scale_or_f64, [T: Elem, W: Elem], (y: *mut T, xr: *const T, wp: *const W, d: usize, eps: f32, rr: f32, nt: bool));
                        }
                        for (i, (a, b)) in fused.iter().zip(&plain).enumerate() {
                            assert_eq!(
                                bits(*a),
                                bits(*b),
                                "{lv:?} d {d} eps {eps} in place {in_place} row {} element {}",
                                i / d,
                                i % d
                            );
                        }
                    }
                }
            }
        }
        force_level(Level::Avx512Bf16);
    }

    #[test]
    fn fused_rows_match_row_by_row() {
        let _level = super::super::simd::level_lock();
        fused_equals_row_by_row::<f32, f32>(|v| v, |v| v, f32::to_bits);
        fused_equals_row_by_row::<bf16, bf16>(bf16::from_f32, bf16::from_f32, |v| {
            v.to_bits() as u32
        });
    }

    /// `inv_rms` at the level in use.
    unsafe fn inv_at_level<T: Elem>(x: *const T, d: usize, eps: f32) -> f32 {
        // SAFETY: forwarded.
        unsafe { multiversion!(inv_rms, [T: Elem], (x: *const T, d: usize, eps: f32) -> f32) }
    }

    /// Very long rows keep the accuracy of short ones: their sum of squares joins an f64 total
    /// every `SUM_BLOCK` elements (a plain f32 sum of a 2^24-element row was off by 3e-5).
    #[test]
    fn long_rows_sum_in_blocks() {
        let _level = super::super::simd::level_lock();
        for d in [SUM_BLOCK - 3, SUM_BLOCK + 5, 1 << 22] {
            // values in [0, 1): every square adds to the sum, the worst case for f32 lanes
            let x: Vec<f32> = (0..d)
                .map(|i| ((i * 7919) % 10007) as f32 / 10007.0)
                .collect();
            let sum: f64 = x.iter().map(|&v| v as f64 * v as f64).sum();
            let want = 1.0 / (sum / d as f64 + 1e-5).sqrt();
            for lv in [Level::Scalar, Level::Avx2, Level::Avx512] {
                let l = force_level(lv);
                // SAFETY: d elements.
                let got = unsafe { inv_at_level(x.as_ptr(), d, 1e-5) };
                let err = (got as f64 - want).abs() / want;
                assert!(
                    err < 1e-6,
                    "{l:?} d {d}: 1/rms {got} vs {want} (relative {err:e})"
                );
            }
        }
        force_level(Level::Avx512Bf16);
    }
}
