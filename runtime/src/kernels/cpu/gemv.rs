//! Matrix-vector product for `linear` with one input row (decoding): `y[n] = x . W[n, :] + b[n]`
//! with W stored `[N, K]` row-major. Memory-bound, so W is streamed once in its own dtype (bf16 and
//! f16 widened in registers), four rows at a time against one f32 copy of x, rows threaded.

use half::{bf16, f16};

use super::simd::{is_bf16, multiversion, Elem, Scalar, Simd};
use super::{par_ranges, SendPtr};

/// `y[r] = v + bias[r]` (bias may be NULL), rounded once to `T`.
///
/// # Safety
/// `y` (and `bias` unless NULL) hold element `r`.
#[inline(always)]
unsafe fn finish_row<T: Elem>(y: *mut T, bias: *const T, r: usize, v: f32) {
    // SAFETY: per the contract above.
    unsafe {
        let b = if bias.is_null() {
            0.0
        } else {
            (*bias.add(r)).to_f32()
        };
        *y.add(r) = T::from_f32(v + b);
    }
}

/// `sum_{i >= from} x[i] * row[i]` over `x.len()` elements: the part past the vector loop.
///
/// # Safety
/// `row` holds `x.len()` elements.
#[inline(always)]
unsafe fn dot_tail<T: Elem>(x: &[f32], row: *const T, from: usize) -> f32 {
    let mut t = 0.0f32;
    for (i, xi) in x.iter().enumerate().skip(from) {
        // SAFETY: i < x.len() (caller).
        t += xi * unsafe { *row.add(i) }.to_f32();
    }
    t
}

/// Rows `0..rows` of W starting at `w`, output `y[0..rows]`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
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
    // SAFETY: k elements of x (caller).
    let xs = unsafe { std::slice::from_raw_parts(x, k) };
    // SAFETY: rows x k elements of W at stride ws, k of x, rows of y and bias (if non-NULL).
    unsafe {
        let finish = |r: usize, v: f32| finish_row(y, bias, r, v);
        let tail = |row: *const T| dot_tail(xs, row, kv);
        let pf = prefetch_blocks::<T>(k);
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
                if pf {
                    prefetch_next_rows(w0, ws, i);
                }
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

/// Largest 4-row block (bytes) worth prefetching: long rows stream well on their own, and
/// prefetching a larger block into L1 evicted the current one (f32 (1,1536,8960) and bf16
/// (1,8960,1536) 1.1-1.3x slower).
const PREFETCH_BLOCK_MAX: usize = 16 * 1024;

/// Whether the 4-row blocks of a W with `k` elements of `T` per row are short enough for
/// `prefetch_next_rows`.
#[inline(always)]
fn prefetch_blocks<T>(k: usize) -> bool {
    cfg!(target_arch = "x86_64") && 4 * k * std::mem::size_of::<T>() <= PREFETCH_BLOCK_MAX
}

/// Prefetches element `i` of the next block's four rows (`row0` is the current block's first
/// row, rows `ws` elements apart) while the current block reads element `i`, so the next block
/// is in L1/L2 when its turn comes.
///
/// Rationale: with rows of a few KiB (K = 1536) each block is four short streams and the
/// hardware prefetchers lose time ramping up at every block; hot bf16 GEMV (1,1536,8960) on
/// the AVX2 EPYC 0.96 -> 0.51 ms median (performance log). No division here: a first version
/// that mapped a line number to (row, offset) per prefetch gave most of that back.
#[inline(always)]
fn prefetch_next_rows<T>(row0: *const T, ws: isize, i: usize) {
    #[cfg(target_arch = "x86_64")]
    for u in 4..8 {
        // SAFETY: a prefetch never faults, whatever the address (the last block's prefetches
        // point past W).
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                row0.wrapping_offset(u * ws).wrapping_add(i) as *const i8,
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (row0, ws, i);
}

/// bf16 rows `0..rows` (see `gemv_body`), each 32-bit word of W widened as a pair
/// (`load_bf16_pairs`: one shift and one mask per `2 * LANES` weights instead of two
/// zero-extensions and two shifts) against x in the matching pair order.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemv_pairs_body<S: Simd>(
    s: S,
    y: *mut bf16,
    x: *const f32,
    w: *const bf16,
    ws: isize,
    bias: *const bf16,
    rows: usize,
    k: usize,
) {
    let l = S::LANES;
    let kv = k / (2 * l) * (2 * l);
    // SAFETY: k elements of x (caller).
    let xn = unsafe { std::slice::from_raw_parts(x, k) };
    let mut xp = vec![0f32; k];
    super::simd::pair_order(xn, &mut xp, l);
    let x = xp.as_ptr();
    // SAFETY: rows x k elements of W at stride ws, rows of y and bias (if non-NULL).
    unsafe {
        let finish = |r: usize, v: f32| finish_row(y, bias, r, v);
        let tail = |row: *const bf16| dot_tail(xn, row, kv);
        let wp = |r: usize| (w as *const u16).offset(r as isize * ws);
        let mut r = 0;
        let pf = prefetch_blocks::<bf16>(k);
        while r + 4 <= rows {
            let z = s.splat(0.0);
            let (mut a, mut b) = ([z; 4], [z; 4]);
            let rw = [wp(r), wp(r + 1), wp(r + 2), wp(r + 3)];
            let mut i = 0;
            while i < kv {
                let xe = s.load(x.add(i));
                let xo = s.load(x.add(i + l));
                if pf {
                    prefetch_next_rows(rw[0], ws, i);
                }
                for u in 0..4 {
                    let (we, wo) = s.load_bf16_pairs(rw[u].add(i));
                    a[u] = s.fma(we, xe, a[u]);
                    b[u] = s.fma(wo, xo, b[u]);
                }
                i += 2 * l;
            }
            for u in 0..4 {
                let row = w.offset((r + u) as isize * ws);
                finish(r + u, s.reduce_sum(s.add(a[u], b[u])) + tail(row));
            }
            r += 4;
        }
        while r < rows {
            let (mut a, mut b) = (s.splat(0.0), s.splat(0.0));
            let mut i = 0;
            while i < kv {
                let (we, wo) = s.load_bf16_pairs(wp(r).add(i));
                a = s.fma(we, s.load(x.add(i)), a);
                b = s.fma(wo, s.load(x.add(i + l)), b);
                i += 2 * l;
            }
            finish(
                r,
                s.reduce_sum(s.add(a, b)) + tail(w.offset(r as isize * ws)),
            );
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
            if is_bf16::<T>() {
                let (y, w, bias) = (y as *mut bf16, w as *const bf16, bias as *const bf16);
                multiversion!(gemv_pairs_body, [], (y: *mut bf16, x: *const f32, w: *const bf16, ws: isize, bias: *const bf16, rows: usize, k: usize))
            } else {
                multiversion!(gemv_body, [T: Elem], (y: *mut T, x: *const f32, w: *const T, ws: isize, bias: *const T, rows: usize, k: usize))
            }
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

/// Whether the `vdpbf16ps` paths (this GEMV, attention's bf16 scores and values) can run: the
/// AVX512_BF16 level is in use (the CPU has it and `ANYFFI_SIMD=avx512` did not turn it off,
/// so that the AVX-512 paths without it can be tested here).
pub fn bf16_dot_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        super::simd::level() >= super::simd::Level::Avx512Bf16
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether `vdpbf16ps` serves these `n` bf16 values of the vector side (the GEMV's x,
/// attention's queries) at `x` (any alignment; not read when `n` is 0). The instruction takes
/// subnormal inputs as zero: a subnormal x against a large weight lost its term (x = 1e-39
/// against w = 1e38 gave 0 instead of 0.1 per term, and M = 1 answered otherwise than M = 2;
/// session 17's audit), and so does a subnormal weight or key against a large x. So x must
/// hold no subnormal and no value of 2^64 or more; then a subnormal weight, key or value,
/// still read as zero, drops a term below 2^-62 in size. Otherwise the widening paths run.
///
/// # Safety
/// `n` readable u16 at `x` when `n > 0`.
pub unsafe fn bf16_dot_exact(x: *const u16, n: usize) -> bool {
    // exponent bits zero with a non-zero fraction (subnormal), or exponent 127 + 64 and up
    // (no early exit, so that the loop vectorises)
    let mut bad = false;
    for i in 0..n {
        // SAFETY: i < n (caller).
        let b = unsafe { x.add(i).read_unaligned() };
        let e = b & 0x7f80;
        bad |= (e == 0) & (b & 0x7f != 0) | (e >= (127 + 64) << 7);
    }
    !bad
}

/// bf16 GEMV with `vdpbf16ps`: pairs of bf16 products (exact in f32) accumulated in f32, 32
/// weights per instruction, x used as stored (bf16, so nothing is rounded that was not
/// already). Versus widening each weight (load, zero-extend, shift, FMA per 16) it needs a
/// third of the instructions, which is what kept the widening kernel from streaming at
/// memory speed (performance log).
///
/// # Safety
/// `bf16_dot_available()`; as `gemv` otherwise (x contiguous, `k` elements).
pub unsafe fn gemv_bf16_dot(
    y: *mut bf16,
    x: *const bf16,
    w: *const bf16,
    ws: isize,
    bias: *const bf16,
    n: usize,
    k: usize,
) {
    let (yp, wp, bp, xp) = (
        SendPtr(y),
        SendPtr::from_const(w),
        SendPtr::from_const(bias),
        SendPtr::from_const(x),
    );
    par_ranges(n, k * 2, 64, |range| {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: rows `range` of W, y and bias; features per the caller.
        unsafe {
            let bias = if bp.get().is_null() {
                std::ptr::null()
            } else {
                bp.get().add(range.start) as *const bf16
            };
            gemv_bf16_dot_rows(
                yp.get().add(range.start),
                xp.get() as *const bf16,
                (wp.get() as *const bf16).offset(range.start as isize * ws),
                ws,
                bias,
                range.len(),
                k,
            )
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (range, yp, wp, bp, xp);
    });
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn gemv_bf16_dot_rows(
    y: *mut bf16,
    x: *const bf16,
    w: *const bf16,
    ws: isize,
    bias: *const bf16,
    rows: usize,
    k: usize,
) {
    use std::arch::x86_64::{
        __m512, __m512bh, __mmask32, _mm512_add_ps, _mm512_dpbf16_ps, _mm512_loadu_si512,
        _mm512_maskz_loadu_epi16, _mm512_reduce_add_ps, _mm512_setzero_ps,
    };
    let kv = k / 32 * 32;
    let rem = k - kv;
    let tail: __mmask32 = if rem == 0 {
        0
    } else {
        (1u64 << rem) as u32 - 1
    };
    // SAFETY: rows x k elements of W at stride ws, k of x, rows of y and bias (caller).
    unsafe {
        let ld =
            |p: *const bf16| -> __m512bh { std::mem::transmute(_mm512_loadu_si512(p as *const _)) };
        let ldm = |p: *const bf16| -> __m512bh {
            std::mem::transmute(_mm512_maskz_loadu_epi16(tail, p as *const i16))
        };
        let finish = |r: usize, acc: __m512| {
            let b = if bias.is_null() {
                0.0
            } else {
                (*bias.add(r)).to_f32()
            };
            *y.add(r) = bf16::from_f32(_mm512_reduce_add_ps(acc) + b);
        };
        let mut r = 0;
        while r < rows {
            let nr = (rows - r).min(4);
            let wr: [*const bf16; 4] =
                std::array::from_fn(|t| w.offset((r + t.min(nr - 1)) as isize * ws));
            let z = _mm512_setzero_ps();
            let (mut a, mut b) = ([z; 4], [z; 4]);
            let mut i = 0;
            while i + 64 <= kv {
                let (xa, xb) = (ld(x.add(i)), ld(x.add(i + 32)));
                for t in 0..4 {
                    a[t] = _mm512_dpbf16_ps(a[t], ld(wr[t].add(i)), xa);
                    b[t] = _mm512_dpbf16_ps(b[t], ld(wr[t].add(i + 32)), xb);
                }
                i += 64;
            }
            if i < kv {
                let xa = ld(x.add(i));
                for t in 0..4 {
                    a[t] = _mm512_dpbf16_ps(a[t], ld(wr[t].add(i)), xa);
                }
            }
            if rem > 0 {
                let xa = ldm(x.add(kv));
                for t in 0..4 {
                    b[t] = _mm512_dpbf16_ps(b[t], ldm(wr[t].add(kv)), xa);
                }
            }
            for t in 0..nr {
                finish(r + t, _mm512_add_ps(a[t], b[t]));
            }
            r += nr;
        }
    }
}
