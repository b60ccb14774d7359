//! Matrix-vector product for `linear` with one input row (decoding): `y[n] = x . W[n, :] + b[n]`
//! with W stored `[N, K]` row-major. Memory-bound, so W is streamed once in its own dtype (bf16 and
//! f16 widened in registers), four rows at a time against one f32 copy of x, rows threaded.

use half::{bf16, f16};

use super::simd::{multiversion, Elem, Scalar, Simd};
use super::{par_ranges, SendPtr};

/// Rows `0..rows` of W starting at `w`, output `y[0..rows]`.
#[inline(always)]
unsafe fn gemv_body<S: Simd, T: Elem>(
    s: S,
    y: *mut T,
    x: *const f32,
    w: *const T,
    ws: isize,
    bias: *const T,
    rows: usize,
    k: usize,
) {
    let l = S::LANES;
    let kv = k / (2 * l) * (2 * l);
    let mut r = 0;
    // SAFETY: rows x k elements of W at stride ws, k of x, rows of y and bias (if non-NULL).
    unsafe {
        let finish = |r: usize, v: f32| {
            let b = if bias.is_null() {
                0.0
            } else {
                (*bias.add(r)).to_f32()
            };
            *y.add(r) = T::from_f32(v + b);
        };
        let tail = |row: *const T| {
            let mut t = 0.0f32;
            for i in kv..k {
                t += *x.add(i) * (*row.add(i)).to_f32();
            }
            t
        };
        while r + 4 <= rows {
            let w0 = w.offset(r as isize * ws);
            let w1 = w0.offset(ws);
            let w2 = w1.offset(ws);
            let w3 = w2.offset(ws);
            let z = s.splat(0.0);
            let (mut a0, mut a1, mut a2, mut a3) = (z, z, z, z);
            let (mut b0, mut b1, mut b2, mut b3) = (z, z, z, z);
            let mut i = 0;
            while i < kv {
                let xa = s.load(x.add(i));
                let xb = s.load(x.add(i + l));
                a0 = s.fma(T::load(s, w0.add(i)), xa, a0);
                a1 = s.fma(T::load(s, w1.add(i)), xa, a1);
                a2 = s.fma(T::load(s, w2.add(i)), xa, a2);
                a3 = s.fma(T::load(s, w3.add(i)), xa, a3);
                b0 = s.fma(T::load(s, w0.add(i + l)), xb, b0);
                b1 = s.fma(T::load(s, w1.add(i + l)), xb, b1);
                b2 = s.fma(T::load(s, w2.add(i + l)), xb, b2);
                b3 = s.fma(T::load(s, w3.add(i + l)), xb, b3);
                i += 2 * l;
            }
            finish(r, s.reduce_sum(s.add(a0, b0)) + tail(w0));
            finish(r + 1, s.reduce_sum(s.add(a1, b1)) + tail(w1));
            finish(r + 2, s.reduce_sum(s.add(a2, b2)) + tail(w2));
            finish(r + 3, s.reduce_sum(s.add(a3, b3)) + tail(w3));
            r += 4;
        }
        while r < rows {
            let w0 = w.offset(r as isize * ws);
            let mut a0 = s.splat(0.0);
            let mut b0 = s.splat(0.0);
            let mut i = 0;
            while i < kv {
                a0 = s.fma(T::load(s, w0.add(i)), s.load(x.add(i)), a0);
                b0 = s.fma(T::load(s, w0.add(i + l)), s.load(x.add(i + l)), b0);
                i += 2 * l;
            }
            finish(r, s.reduce_sum(s.add(a0, b0)) + tail(w0));
            r += 1;
        }
    }
}

#[inline(always)]
unsafe fn widen_body<S: Simd, T: Elem>(s: S, dst: *mut f32, src: *const T, n: usize) {
    let l = S::LANES;
    let mut i = 0;
    // SAFETY: n elements each.
    unsafe {
        while i + l <= n {
            s.store(dst.add(i), T::load(s, src.add(i)));
            i += l;
        }
        while i < n {
            *dst.add(i) = T::load(Scalar, src.add(i));
            i += 1;
        }
    }
}

/// Widens `n` contiguous elements to f32.
///
/// # Safety
/// `src` readable and `dst` writable for `n` elements, not overlapping.
pub unsafe fn widen<T: Elem>(dst: *mut f32, src: *const T, n: usize) {
    // SAFETY: forwarded.
    unsafe { multiversion!(widen_body, [T: Elem], (dst: *mut f32, src: *const T, n: usize)) }
}

/// `y[n] = sum_k x[k] W[n, k] + bias[n]` (bias may be NULL); `x_f32` is x widened to f32.
///
/// # Safety
/// W has `n` rows of `k` elements at row stride `ws`; y has n elements and does not overlap the
/// inputs.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemv<T: Elem>(
    y: *mut T,
    x_f32: &[f32],
    w: *const T,
    ws: isize,
    bias: *const T,
    n: usize,
    k: usize,
) {
    let (yp, wp, bp) = (
        SendPtr(y),
        SendPtr::from_const(w),
        SendPtr::from_const(bias),
    );
    let xp = SendPtr::from_const(x_f32.as_ptr());
    par_ranges(n, k * std::mem::size_of::<T>(), 64, |range| {
        // SAFETY: rows `range` of W, y and bias.
        unsafe {
            let y = yp.get().add(range.start);
            let w = (wp.get() as *const T).offset(range.start as isize * ws);
            let bias = if bp.get().is_null() {
                std::ptr::null()
            } else {
                bp.get().add(range.start) as *const T
            };
            let x = xp.get() as *const f32;
            let rows = range.len();
            multiversion!(gemv_body, [T: Elem], (y: *mut T, x: *const f32, w: *const T, ws: isize, bias: *const T, rows: usize, k: usize))
        }
    });
}

macro_rules! named {
    ($($name:ident = $t:ty;)*) => {$(
        /// See `gemv`.
        ///
        /// # Safety
        /// As `gemv`.
        pub unsafe fn $name(y: *mut $t, x_f32: &[f32], w: *const $t, ws: isize, bias: *const $t,
                            n: usize, k: usize) {
            // SAFETY: forwarded.
            unsafe { gemv::<$t>(y, x_f32, w, ws, bias, n, k) }
        }
    )*};
}

named! {
    gemv_f32 = f32;
    gemv_f16 = f16;
    gemv_bf16 = bf16;
}
