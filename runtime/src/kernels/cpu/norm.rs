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
    let l = S::LANES;
    // SAFETY: d elements in each row and in w; y equals x or does not overlap it.
    unsafe {
        let mut acc0 = s.splat(0.0);
        let mut acc1 = s.splat(0.0);
        let mut i = 0;
        // bf16 rows (and weights) in pair space: one shift and one mask widen 2 LANES
        // elements, one store writes them back (element-wise, so the order never shows).
        let pairs = !nt && is_bf16::<T>() && is_bf16::<W>();
        // Four independent sums: with two, the FMA latency capped the first pass at half a
        // vector per cycle (bf16 pairs: a quarter), below what L3 delivers.
        let mut acc2 = s.splat(0.0);
        let mut acc3 = s.splat(0.0);
        // Two vectors at `i`: bf16 as one pair load (the sum does not care about the order).
        let load2 = |i: usize| {
            if is_bf16::<T>() {
                s.load_bf16_pairs((x as *const u16).add(i))
            } else {
                (T::load(s, x.add(i)), T::load(s, x.add(i + l)))
            }
        };
        while i + 4 * l <= d {
            let (v0, v1) = load2(i);
            let (v2, v3) = load2(i + 2 * l);
            acc0 = s.fma(v0, v0, acc0);
            acc1 = s.fma(v1, v1, acc1);
            acc2 = s.fma(v2, v2, acc2);
            acc3 = s.fma(v3, v3, acc3);
            i += 4 * l;
        }
        while i + 2 * l <= d {
            let (v0, v1) = load2(i);
            acc0 = s.fma(v0, v0, acc0);
            acc1 = s.fma(v1, v1, acc1);
            i += 2 * l;
        }
        while i + l <= d {
            let v = T::load(s, x.add(i));
            acc0 = s.fma(v, v, acc0);
            i += l;
        }
        let mut ss = s.reduce_sum(s.add(s.add(acc0, acc1), s.add(acc2, acc3)));
        while i < d {
            let v = T::load(Scalar, x.add(i));
            ss += v * v;
            i += 1;
        }
        let r = if !ss.is_finite() || (ss < 1e-28 && ss / d as f32 >= eps * 6e-8) {
            // The f32 sum overflowed (|x| past ~1e19) or lost its digits to underflow while it
            // still matters against eps (|x| below ~1e-19, eps tiny or 0): again in f64, so
            // the result is the normalised row rather than zeros or infinities.
            (1.0 / (sum_squares_f64(x, d) / d as f64 + eps as f64).sqrt()) as f32
        } else {
            1.0 / (ss / d as f32 + eps).sqrt()
        };
        let rv = s.splat(r);
        let mut i = 0;
        if pairs {
            let (x16, w16, y16) = (x as *const u16, w as *const u16, y as *mut u16);
            while i + 2 * l <= d {
                let (xe, xo) = s.load_bf16_pairs(x16.add(i));
                let (we, wo) = s.load_bf16_pairs(w16.add(i));
                let (ye, yo) = (s.mul(s.mul(xe, rv), we), s.mul(s.mul(xo, rv), wo));
                s.store_bf16_pairs(y16.add(i), ye, yo);
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
    par_ranges(n, d * 2 * std::mem::size_of::<T>(), 4, |range| {
        for r in range {
            let off = rows.row_offsets(r / n_inner);
            let i = (r % n_inner) as isize;
            // SAFETY: row r is valid (caller).
            let (y, x, w) = unsafe {
                (
                    yp.get().offset(off[0] + i * ys),
                    xp.get().offset(off[1] + i * xs) as *const T,
                    wp.get() as *const W,
                )
            };
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
