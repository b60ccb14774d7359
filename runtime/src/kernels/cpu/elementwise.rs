//! Element-wise binary kernels: `add` (c = a + b) and `swiglu` (out = up * gate / (1 + e^-gate)),
//! contiguous (SIMD, threaded) and strided (rows of the collapsed layout; SIMD when the inner
//! strides are 1).

use half::{bf16, f16};

use super::simd::{is_bf16, multiversion, put, Elem, Scalar, Simd};
use super::{par_ranges, stream_fence, stream_output, SendPtr, Strided};

/// A binary element-wise operation on f32 lanes.
pub trait BinaryOp: Copy + Send + Sync + 'static {
    /// Compute-bound (an exp per element): the loops then keep four vectors in flight, so that
    /// the four exps' dependency chains overlap (swiglu f32 0.91-0.94x, bf16 on AVX2 0.91x the
    /// time; add was 0.99-1.05x, so it keeps two).
    const HEAVY: bool;
    fn apply<S: Simd>(s: S, a: S::V, b: S::V) -> S::V;
}

/// `a + b`.
#[derive(Clone, Copy)]
pub struct AddOp;

impl BinaryOp for AddOp {
    const HEAVY: bool = false;
    #[inline(always)]
    fn apply<S: Simd>(s: S, a: S::V, b: S::V) -> S::V {
        s.add(a, b)
    }
}

/// `b * silu(a)` with a = gate, b = up: `up * gate / (1 + exp(-gate))`.
#[derive(Clone, Copy)]
pub struct SwiGluOp;

impl BinaryOp for SwiGluOp {
    const HEAVY: bool = true;
    #[inline(always)]
    fn apply<S: Simd>(s: S, gate: S::V, up: S::V) -> S::V {
        // One division rather than a reciprocal estimate, its Newton step and a multiply: the
        // divider runs beside the FMA pipes, which the exp keeps busy (performance log).
        // In the reference's order, up * (gate / (1 + e^-gate)): up * gate could overflow first.
        // e^-gate is +inf for gate below about -88.4, so silu is -0 there, as in f32 PyTorch.
        let e = s.exp_neg(gate);
        s.mul(up, s.div(gate, s.add(s.splat(1.0), e)))
    }
}

/// Contiguous run of `n` elements. `c` may equal `a` or `b`. `nt`: non-temporal stores.
#[inline(always)]
unsafe fn binary_body<S: Simd, T: Elem, O: BinaryOp>(
    s: S,
    c: *mut T,
    a: *const T,
    b: *const T,
    n: usize,
    nt: bool,
) {
    let l = S::LANES;
    let mut i = 0;
    // SAFETY: every access is below n; an exact alias is read before it is written.
    unsafe {
        if nt {
            // streaming stores need vector-aligned addresses: a head up to the alignment first
            // (all of the run if `c` is not even element-aligned)
            let align = l * std::mem::size_of::<T>();
            while i < n && (c.add(i) as usize) % align != 0 {
                i += 1;
            }
            binary_strided_body::<S, T, O>(s, c, a, b, i, 1, 1, 1);
        }
        if !nt && is_bf16::<T>() {
            // bf16 in pair space: one shift and one mask widen 2 LANES elements, and the
            // results go back as one store (element-wise, so the pair order never shows).
            let (a16, b16, c16) = (a as *const u16, b as *const u16, c as *mut u16);
            while O::HEAVY && i + 4 * l <= n {
                let (xe, xo) = s.load_bf16_pairs(a16.add(i));
                let (ye, yo) = s.load_bf16_pairs(b16.add(i));
                let (xe2, xo2) = s.load_bf16_pairs(a16.add(i + 2 * l));
                let (ye2, yo2) = s.load_bf16_pairs(b16.add(i + 2 * l));
                let (ve, vo) = (O::apply(s, xe, ye), O::apply(s, xo, yo));
                let (ve2, vo2) = (O::apply(s, xe2, ye2), O::apply(s, xo2, yo2));
                s.store_bf16_pairs(c16.add(i), ve, vo);
                s.store_bf16_pairs(c16.add(i + 2 * l), ve2, vo2);
                i += 4 * l;
            }
            while i + 2 * l <= n {
                let (xe, xo) = s.load_bf16_pairs(a16.add(i));
                let (ye, yo) = s.load_bf16_pairs(b16.add(i));
                s.store_bf16_pairs(c16.add(i), O::apply(s, xe, ye), O::apply(s, xo, yo));
                i += 2 * l;
            }
        }
        while O::HEAVY && i + 4 * l <= n {
            let (x0, x1) = (T::load(s, a.add(i)), T::load(s, a.add(i + l)));
            let (x2, x3) = (T::load(s, a.add(i + 2 * l)), T::load(s, a.add(i + 3 * l)));
            let (y0, y1) = (T::load(s, b.add(i)), T::load(s, b.add(i + l)));
            let (y2, y3) = (T::load(s, b.add(i + 2 * l)), T::load(s, b.add(i + 3 * l)));
            let (v0, v1) = (O::apply(s, x0, y0), O::apply(s, x1, y1));
            let (v2, v3) = (O::apply(s, x2, y2), O::apply(s, x3, y3));
            put(s, nt, c.add(i), v0);
            put(s, nt, c.add(i + l), v1);
            put(s, nt, c.add(i + 2 * l), v2);
            put(s, nt, c.add(i + 3 * l), v3);
            i += 4 * l;
        }
        while i + 2 * l <= n {
            let x0 = T::load(s, a.add(i));
            let y0 = T::load(s, b.add(i));
            let x1 = T::load(s, a.add(i + l));
            let y1 = T::load(s, b.add(i + l));
            put(s, nt, c.add(i), O::apply(s, x0, y0));
            put(s, nt, c.add(i + l), O::apply(s, x1, y1));
            i += 2 * l;
        }
        while i + l <= n {
            let v = O::apply(s, T::load(s, a.add(i)), T::load(s, b.add(i)));
            put(s, nt, c.add(i), v);
            i += l;
        }
        binary_lanes::<S, T, O>(s, c.add(i), a.add(i), b.add(i), n - i, [1, 1, 1]);
    }
}

/// Widest vector of any level, in lanes.
const MAX_LANES: usize = 16;

/// `n <= S::LANES` elements at element strides `st` (c, a, b) through the vector op, in
/// zero-padded lanes: the heads and tails of the contiguous runs and the strided rows compute
/// exactly as the vector body does. (The scalar level's exp differs from the vector levels'
/// by an ulp, and which elements fall in a tail depends on how the threads split the run:
/// swiglu gave 1-ulp different results for 1 and 2 threads.)
#[inline(always)]
unsafe fn binary_lanes<S: Simd, T: Elem, O: BinaryOp>(
    s: S,
    c: *mut T,
    a: *const T,
    b: *const T,
    n: usize,
    st: [isize; 3],
) {
    debug_assert!(n <= S::LANES && S::LANES <= MAX_LANES);
    if n == 0 {
        return;
    }
    let (mut x, mut y, mut r) = ([0f32; MAX_LANES], [0f32; MAX_LANES], [0f32; MAX_LANES]);
    // SAFETY: n elements at the given strides in each tensor (caller); every input is read
    // before any output is written (c may alias a or b with the same strides).
    unsafe {
        for i in 0..n {
            x[i] = T::load(Scalar, a.offset(i as isize * st[1]));
            y[i] = T::load(Scalar, b.offset(i as isize * st[2]));
        }
        s.store(
            r.as_mut_ptr(),
            O::apply(s, s.load(x.as_ptr()), s.load(y.as_ptr())),
        );
        for (i, v) in r.iter().take(n).enumerate() {
            T::store(Scalar, c.offset(i as isize * st[0]), *v);
        }
    }
}

/// Strided run of `n` elements (strides in elements), a vector's worth at a time.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn binary_strided_body<S: Simd, T: Elem, O: BinaryOp>(
    s: S,
    c: *mut T,
    a: *const T,
    b: *const T,
    n: usize,
    sc: isize,
    sa: isize,
    sb: isize,
) {
    let mut i = 0;
    while i < n {
        let k = (n - i).min(S::LANES);
        let o = i as isize;
        // SAFETY: the layout was validated; offsets stay inside each tensor.
        unsafe {
            binary_lanes::<S, T, O>(
                s,
                c.offset(o * sc),
                a.offset(o * sa),
                b.offset(o * sb),
                k,
                [sc, sa, sb],
            )
        };
        i += k;
    }
}

/// `c[i] = op(a[i], b[i])` over `n` contiguous elements, threaded.
///
/// # Safety
/// The pointers address `n` elements each; `c` either equals or does not overlap `a` and `b`.
pub unsafe fn binary_contiguous<T: Elem, O: BinaryOp>(
    c: *mut T,
    a: *const T,
    b: *const T,
    n: usize,
) {
    let (cp, ap, bp) = (SendPtr(c), SendPtr::from_const(a), SendPtr::from_const(b));
    let nt = stream_output(n * std::mem::size_of::<T>());
    par_ranges(n, 3 * std::mem::size_of::<T>(), 16 * 1024, |r| {
        let (c, a, b, n) = (
            // SAFETY: r is inside 0..n.
            unsafe { cp.get().add(r.start) },
            // SAFETY: as above.
            unsafe { ap.get().add(r.start) as *const T },
            // SAFETY: as above.
            unsafe { bp.get().add(r.start) as *const T },
            r.len(),
        );
        // SAFETY: disjoint range of valid elements.
        unsafe {
            multiversion!(binary_body, [T: Elem, O: BinaryOp], (c: *mut T, a: *const T, b: *const T, n: usize, nt: bool))
        }
        if nt {
            stream_fence();
        }
    });
}

/// `c[idx] = op(a[idx], b[idx])` for every index of a strided layout (element strides).
///
/// # Safety
/// The layout must address valid elements of each tensor; `c` either equals `a`/`b` with the
/// same strides or overlaps neither.
pub unsafe fn binary_strided<T: Elem, O: BinaryOp>(
    c: *mut T,
    a: *const T,
    b: *const T,
    layout: &Strided<3>,
) {
    let (cp, ap, bp) = (SendPtr(c), SendPtr::from_const(a), SendPtr::from_const(b));
    let inner = layout.inner();
    let unit = (0..3).all(|k| layout.inner_stride(k) == 1);
    let nt = unit && stream_output(layout.rows() * inner * std::mem::size_of::<T>());
    let (sc, sa, sb) = (
        layout.inner_stride(0),
        layout.inner_stride(1),
        layout.inner_stride(2),
    );
    par_ranges(
        layout.rows(),
        inner * 3 * std::mem::size_of::<T>(),
        1,
        |rows| {
            for r in rows {
                let off = layout.row_offsets(r);
                // SAFETY: offsets inside each tensor by the validated layout.
                let (c, a, b, n) = unsafe {
                    (
                        cp.get().offset(off[0]),
                        ap.get().offset(off[1]) as *const T,
                        bp.get().offset(off[2]) as *const T,
                        inner,
                    )
                };
                if unit {
                    // SAFETY: a contiguous row.
                    unsafe {
                        multiversion!(binary_body, [T: Elem, O: BinaryOp], (c: *mut T, a: *const T, b: *const T, n: usize, nt: bool))
                    }
                } else {
                    // SAFETY: a strided row.
                    unsafe {
                        multiversion!(binary_strided_body, [T: Elem, O: BinaryOp], (c: *mut T, a: *const T, b: *const T, n: usize, sc: isize, sa: isize, sb: isize))
                    }
                }
            }
            if nt {
                stream_fence();
            }
        },
    );
}

macro_rules! named {
    ($($name:ident, $sname:ident = $op:ty, $t:ty;)*) => {$(
        /// Contiguous kernel (see `binary_contiguous`).
        ///
        /// # Safety
        /// As `binary_contiguous`.
        pub unsafe fn $name(c: *mut $t, a: *const $t, b: *const $t, n: usize) {
            // SAFETY: forwarded.
            unsafe { binary_contiguous::<$t, $op>(c, a, b, n) }
        }
        /// Strided kernel (see `binary_strided`).
        ///
        /// # Safety
        /// As `binary_strided`.
        pub unsafe fn $sname(c: *mut $t, a: *const $t, b: *const $t, l: &Strided<3>) {
            // SAFETY: forwarded.
            unsafe { binary_strided::<$t, $op>(c, a, b, l) }
        }
    )*};
}

named! {
    add_f32, add_strided_f32 = AddOp, f32;
    add_f16, add_strided_f16 = AddOp, f16;
    add_bf16, add_strided_bf16 = AddOp, bf16;
    swiglu_f32, swiglu_strided_f32 = SwiGluOp, f32;
    swiglu_f16, swiglu_strided_f16 = SwiGluOp, f16;
    swiglu_bf16, swiglu_strided_bf16 = SwiGluOp, bf16;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// swiglu at the edges of f32, at every SIMD level, against the reference's order
    /// `up * (gate / (1 + exp(-gate)))` with an f32 exp (+inf past 88.72): very negative gates
    /// give (signed) zero, not a small quotient of a clamped exp; `up * gate` overflowing does
    /// not make the result infinite when the result itself is finite.
    #[test]
    fn swiglu_edges_follow_the_reference() {
        let _level = super::super::simd::level_lock();
        use super::super::simd::{force_level, Level};
        let cases: [(f32, f32); 17] = [
            (-1e35, 1.0),
            (-3e38, -2.0),
            (-100.0, 5.0),
            (-89.0, 1.0),
            // e^88.5 is finite (2.7e38): a small quotient, scaled back up by a huge `up`
            (-88.5, 3e38),
            (-88.7, f32::INFINITY),
            (-88.4, -1e38),
            (-20.0, 1.0),
            (0.0, 7.0),
            (-0.0, 1.0),
            (1.2, 3e38),
            (100.0, 2.0),
            (1e35, 1.0),
            (f32::INFINITY, 2.0),
            (f32::NEG_INFINITY, 1.0),
            (f32::NAN, 1.0),
            (3.0, f32::NAN),
        ];
        let want = |g: f32, u: f32| -> f64 {
            let e = if -g > 88.72 {
                f64::INFINITY
            } else {
                (-(g as f64)).exp()
            };
            u as f64 * (g as f64 / (1.0 + e))
        };
        // 56 elements: the cases in the SIMD body and in the scalar tail
        let n = 3 * cases.len() + 5;
        let (g, u): (Vec<f32>, Vec<f32>) = (0..n).map(|i| cases[i % cases.len()]).unzip();
        for lv in [Level::Scalar, Level::Avx2, Level::Avx512, Level::Avx512Bf16] {
            let l = force_level(lv);
            let mut c = vec![0f32; n];
            // SAFETY: n elements each.
            unsafe { swiglu_f32(c.as_mut_ptr(), g.as_ptr(), u.as_ptr(), n) };
            for i in 0..n {
                if l == Level::Avx2 && (88.37..=88.72).contains(&-g[i]) {
                    // the AVX2 exp overflows from 88.38 (see `Simd::exp`)
                    continue;
                }
                let (w, got) = (want(g[i], u[i]), c[i] as f64);
                let ok = if w.is_nan() {
                    got.is_nan()
                } else if w.is_infinite() || w == 0.0 {
                    got == w
                } else {
                    (got - w).abs() <= 1e-6 * w.abs()
                };
                assert!(
                    ok,
                    "{l:?} swiglu(gate {}, up {}) = {got}, want {w}",
                    g[i], u[i]
                );
            }
        }
        force_level(Level::Avx512Bf16);
    }

    /// Every element of a swiglu rounds the same wherever it falls: in the vector body, in a
    /// run's tail (the threads split runs at places that depend on their number) or in a strided
    /// row. The scalar level's exp differs from the vector levels' by an ulp for some inputs,
    /// so tails once went through it and gave other bits than the body.
    #[test]
    fn tails_and_strided_rows_round_as_the_body() {
        let _level = super::super::simd::level_lock();
        use super::super::simd::{force_level, Level};
        let n = 301;
        let mut g: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 1000) as f32 * 0.013 - 6.5)
            .collect();
        let u: Vec<f32> = (0..n).map(|i| 1.0 + (i % 17) as f32 * 0.25).collect();
        // 0.82161814 gave 0.57067937 in the body and 0.5706793 in a tail (audit, session 17)
        g[0] = 0.821_618_14;
        g[n - 1] = 0.821_618_14;
        for lv in [Level::Scalar, Level::Avx2, Level::Avx512, Level::Avx512Bf16] {
            let l = force_level(lv);
            let mut whole = vec![0f32; n];
            // SAFETY: n elements each.
            unsafe { swiglu_f32(whole.as_mut_ptr(), g.as_ptr(), u.as_ptr(), n) };
            // runs of every length from 1 to 40 (each a body, a tail or both)
            for len in 1..=40 {
                let mut parts = vec![0f32; n];
                for start in (0..n).step_by(len) {
                    let k = len.min(n - start);
                    // SAFETY: k elements from `start` in each buffer.
                    unsafe {
                        swiglu_f32(
                            parts[start..].as_mut_ptr(),
                            g[start..].as_ptr(),
                            u[start..].as_ptr(),
                            k,
                        )
                    };
                }
                for i in 0..n {
                    assert_eq!(
                        parts[i].to_bits(),
                        whole[i].to_bits(),
                        "{l:?}: element {i} in runs of {len}"
                    );
                }
            }
            // one strided row (every second element of doubled buffers)
            let g2: Vec<f32> = g.iter().flat_map(|&x| [x, f32::NAN]).collect();
            let u2: Vec<f32> = u.iter().flat_map(|&x| [x, f32::NAN]).collect();
            let mut c2 = vec![-1f32; 2 * n];
            let layout = Strided::new(&[n as i64], [&[2], &[2], &[2]]);
            // SAFETY: the layout addresses n elements of each buffer.
            unsafe { swiglu_strided_f32(c2.as_mut_ptr(), g2.as_ptr(), u2.as_ptr(), &layout) };
            for i in 0..n {
                assert_eq!(
                    c2[2 * i].to_bits(),
                    whole[i].to_bits(),
                    "{l:?}: strided {i}"
                );
                assert_eq!(c2[2 * i + 1], -1.0, "{l:?}: strided gap {i} written");
            }
        }
        force_level(Level::Avx512Bf16);
    }

    /// Outputs past `stream_min_bytes()` take the non-temporal path, with a scalar head up to the
    /// vector alignment: misaligned, in place and odd-length runs give the same values as
    /// element-by-element arithmetic.
    #[test]
    fn streamed_outputs_match_scalar_arithmetic() {
        let _level = super::super::simd::level_lock();
        let n = super::super::stream_min_bytes() / 4 + 77;
        assert!(stream_output(n * 4));
        let a: Vec<f32> = (0..n + 3)
            .map(|i| (i % 1013) as f32 * 0.37 - 100.0)
            .collect();
        let b: Vec<f32> = (0..n + 3).map(|i| (i % 917) as f32 * -0.21 + 3.0).collect();
        for off in [0usize, 1, 3] {
            let mut c = vec![f32::NAN; n + 3];
            // SAFETY: n elements from `off` in each buffer.
            unsafe {
                add_f32(
                    c[off..].as_mut_ptr(),
                    a[off..].as_ptr(),
                    b[off..].as_ptr(),
                    n,
                )
            };
            for i in off..off + n {
                assert_eq!(c[i], a[i] + b[i], "add at {i} (offset {off})");
            }
            // in place: c = c + b
            let mut c2 = a.clone();
            let p = c2[off..].as_mut_ptr();
            // SAFETY: exact alias of the output with the first input is allowed.
            unsafe { add_f32(p, p, b[off..].as_ptr(), n) };
            for i in off..off + n {
                assert_eq!(c2[i], a[i] + b[i], "in-place add at {i} (offset {off})");
            }
        }
        let ab: Vec<bf16> = a.iter().map(|&x| bf16::from_f32(x)).collect();
        let bb: Vec<bf16> = b.iter().map(|&x| bf16::from_f32(x)).collect();
        let n2 = 2 * n;
        let ab2: Vec<bf16> = ab.iter().chain(ab.iter()).copied().collect();
        let bb2: Vec<bf16> = bb.iter().chain(bb.iter()).copied().collect();
        let mut c = vec![bf16::ZERO; n2 + 1];
        // SAFETY: n2 elements from offset 1.
        unsafe {
            swiglu_bf16(
                c[1..].as_mut_ptr(),
                ab2[1..].as_ptr(),
                bb2[1..].as_ptr(),
                n2,
            )
        };
        for i in 1..n2 + 1 {
            let (g, u) = (ab2[i].to_f32() as f64, bb2[i].to_f32() as f64);
            let want = u * g / (1.0 + (-g).exp());
            let got = c[i].to_f32() as f64;
            assert!(
                (got - want).abs() <= 1e-2 * want.abs() + 1e-6,
                "swiglu at {i}: {got} vs {want}"
            );
        }
    }
}
