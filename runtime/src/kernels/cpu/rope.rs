//! Rotary position embedding, split halves (GPT-NeoX / HF `rotate_half`), following the
//! reference recipe of spec §2.6 so f32 meets 1e-4: `phi = (pos as f32) / powf(theta, 2j/d)` in
//! f32 with a true division, then sin/cos of that f32 angle, then `a*cos - b*sin` and
//! `b*cos + a*sin` in f32. Tokens are threaded; sin/cos are computed once per token and reused
//! for every head.

use std::cell::RefCell;

use half::{bf16, f16};

use super::simd::{is_bf16, multiversion, put, Elem, Scalar, Simd};
use super::{par_ranges, stream_fence, stream_output, SendPtr};

thread_local! {
    static DENOMS: RefCell<(u32, usize, Vec<f32>)> = const { RefCell::new((0, 0, Vec::new())) };
}

/// `powf(theta, 2j/d)` for j in 0..d/2, all in f32 (cached per thread for the last (theta, d)).
/// Computed afresh while the thread's storage is torn down (a destructor calling in).
pub fn with_denominators<R>(theta: f32, d: usize, f: impl FnOnce(&[f32]) -> R) -> R {
    crate::kernels::with_thread_local(&DENOMS, |c| {
        if c.0 != theta.to_bits() || c.1 != d || c.2.len() != d / 2 {
            c.2 = (0..d / 2)
                .map(|j| theta.powf((2 * j) as f32 / d as f32))
                .collect();
            c.0 = theta.to_bits();
            c.1 = d;
        }
        f(&c.2)
    })
}

/// Largest angle (radians) the SIMD `sin_cos` reduces exactly (its quotient by pi/2 must stay
/// an integer well inside f32's 24 bits); positions with larger angles take the f64 path.
const SIMD_SINCOS_MAX_ANGLE: f32 = 1e6;

/// Angles' sin and cos for one position; `exact`: every angle through `Scalar::sin_cos` (f64).
#[inline(always)]
unsafe fn sincos_body<S: Simd>(
    s: S,
    pos: f32,
    den: *const f32,
    sn: *mut f32,
    cs: *mut f32,
    h: usize,
    exact: bool,
) {
    let l = S::LANES;
    let mut j = 0;
    // SAFETY: h entries in each buffer.
    unsafe {
        let p = s.splat(pos);
        while j + l <= h && !exact {
            let (sv, cv) = s.sin_cos(s.div(p, s.load(den.add(j))));
            s.store(sn.add(j), sv);
            s.store(cs.add(j), cv);
            j += l;
        }
        while j < h {
            let (sv, cv) = Scalar.sin_cos(pos / *den.add(j));
            *sn.add(j) = sv;
            *cs.add(j) = cv;
            j += 1;
        }
    }
}

/// Rotates one head vector of length 2h.
#[inline(always)]
unsafe fn rotate_body<S: Simd, T: Elem>(
    s: S,
    y: *mut T,
    x: *const T,
    sn: *const f32,
    cs: *const f32,
    h: usize,
    nt: bool,
) {
    let l = S::LANES;
    let mut j = 0;
    // SAFETY: 2h elements per head; y equals x or does not overlap it; a and b are read first.
    unsafe {
        while j + l <= h {
            let a = T::load(s, x.add(j));
            let b = T::load(s, x.add(h + j));
            let c = s.load(cs.add(j));
            let sv = s.load(sn.add(j));
            let ya = s.sub(s.mul(a, c), s.mul(b, sv));
            let yb = s.add(s.mul(b, c), s.mul(a, sv));
            put(s, nt, y.add(j), ya);
            put(s, nt, y.add(h + j), yb);
            j += l;
        }
        while j < h {
            let a = T::load(Scalar, x.add(j));
            let b = T::load(Scalar, x.add(h + j));
            let (c, sv) = (*cs.add(j), *sn.add(j));
            T::store(Scalar, y.add(j), a * c - b * sv);
            T::store(Scalar, y.add(h + j), b * c + a * sv);
            j += 1;
        }
    }
}

/// Rotates one bf16 head vector of length 2h in pair space (`load_bf16_pairs` /
/// `store_bf16_pairs`): `sn`/`cs` are in pair order (`pair_order`, natural past the last full
/// block of 2 LANES), so the rotation is element-wise there.
#[inline(always)]
unsafe fn rotate_pairs_body<S: Simd>(
    s: S,
    y: *mut u16,
    x: *const u16,
    sn: *const f32,
    cs: *const f32,
    h: usize,
) {
    let l = S::LANES;
    let mut j = 0;
    // SAFETY: 2h elements per head; y equals x or does not overlap it; a and b are read first.
    unsafe {
        while j + 2 * l <= h {
            let (ae, ao) = s.load_bf16_pairs(x.add(j));
            let (be, bo) = s.load_bf16_pairs(x.add(h + j));
            let (ce, co) = (s.load(cs.add(j)), s.load(cs.add(j + l)));
            let (se, so) = (s.load(sn.add(j)), s.load(sn.add(j + l)));
            let rot_a = |a, b, c, sv| s.sub(s.mul(a, c), s.mul(b, sv));
            let rot_b = |a, b, c, sv| s.add(s.mul(b, c), s.mul(a, sv));
            s.store_bf16_pairs(y.add(j), rot_a(ae, be, ce, se), rot_a(ao, bo, co, so));
            s.store_bf16_pairs(y.add(h + j), rot_b(ae, be, ce, se), rot_b(ao, bo, co, so));
            j += 2 * l;
        }
        while j < h {
            let a = bf16::from_bits(*x.add(j)).to_f32();
            let b = bf16::from_bits(*x.add(h + j)).to_f32();
            let (c, sv) = (*cs.add(j), *sn.add(j));
            *y.add(j) = bf16::from_f32(a * c - b * sv).to_bits();
            *y.add(h + j) = bf16::from_f32(b * c + a * sv).to_bits();
            j += 1;
        }
    }
}

/// Every head of one token when a head's half is exactly `NB` vectors (`PAIRS`: `NB` blocks of
/// 2 LANES in pair space, as `rotate_pairs_body`): the token's sin and cos stay in registers
/// for all its heads instead of being loaded again per head (the common d = 64 and 128).
/// Elementwise the same arithmetic as the general bodies, so the same bits.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn rotate_heads_fixed<S: Simd, T: Elem, const NB: usize, const PAIRS: bool>(
    s: S,
    y: *mut T,
    ys1: isize,
    x: *const T,
    xs1: isize,
    nhead: usize,
    sn: *const f32,
    cs: *const f32,
    nt: bool,
) {
    let l = S::LANES;
    let vecs = if PAIRS { 2 * NB } else { NB };
    let h = vecs * l;
    let z = s.splat(0.0);
    // (plain loops: `array::from_fn` closures were not inlined into multiversioned bodies)
    let mut c = [z; 16];
    let mut sv = [z; 16];
    // SAFETY: h entries in sn/cs; nhead heads of 2h elements at the given strides; y equals x
    // or does not overlap it, and each head's a and b are read before its stores.
    unsafe {
        for u in 0..vecs {
            c[u] = s.load(cs.add(u * l));
            sv[u] = s.load(sn.add(u * l));
        }
        for hd in 0..nhead as isize {
            let (yh, xh) = (y.offset(hd * ys1), x.offset(hd * xs1));
            if PAIRS {
                let (yh, xh) = (yh as *mut u16, xh as *const u16);
                for u in 0..NB {
                    let (ae, ao) = s.load_bf16_pairs(xh.add(2 * u * l));
                    let (be, bo) = s.load_bf16_pairs(xh.add(h + 2 * u * l));
                    let (ce, co) = (c[2 * u], c[2 * u + 1]);
                    let (se, so) = (sv[2 * u], sv[2 * u + 1]);
                    let rot_a = |a, b, c, sv| s.sub(s.mul(a, c), s.mul(b, sv));
                    let rot_b = |a, b, c, sv| s.add(s.mul(b, c), s.mul(a, sv));
                    s.store_bf16_pairs(
                        yh.add(2 * u * l),
                        rot_a(ae, be, ce, se),
                        rot_a(ao, bo, co, so),
                    );
                    s.store_bf16_pairs(
                        yh.add(h + 2 * u * l),
                        rot_b(ae, be, ce, se),
                        rot_b(ao, bo, co, so),
                    );
                }
            } else {
                for u in 0..NB {
                    let a = T::load(s, xh.add(u * l));
                    let b = T::load(s, xh.add(h + u * l));
                    let ya = s.sub(s.mul(a, c[u]), s.mul(b, sv[u]));
                    let yb = s.add(s.mul(b, c[u]), s.mul(a, sv[u]));
                    put(s, nt, yh.add(u * l), ya);
                    put(s, nt, yh.add(h + u * l), yb);
                }
            }
        }
    }
}

/// Whether `rotate_heads_fixed` takes heads with halves of `vecs` vectors at this level: up to
/// 8 (16 registers of sin and cos) with 32 registers, 4 with 16.
fn fixed_vecs<S: Simd>(vecs: usize) -> bool {
    #[cfg(test)]
    if tests::GENERAL_ONLY.load(std::sync::atomic::Ordering::Relaxed) {
        return false;
    }
    matches!(vecs, 1 | 2 | 4 | 8) && 4 * vecs <= S::REGISTERS
}

/// One token: sin/cos of its angles into `sn`/`cs`, then every head rotated (one dispatch per
/// token rather than per head). bf16 heads pass `den_pairs` (the denominators in pair order
/// for `pair_lanes`-wide vectors) and are rotated in pair space when that matches this level.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn token_body<S: Simd, T: Elem>(
    s: S,
    pos: f32,
    den: *const f32,
    den_pairs: *const f32,
    pair_lanes: usize,
    sn: *mut f32,
    cs: *mut f32,
    h: usize,
    y: *mut T,
    ys1: isize,
    x: *const T,
    xs1: isize,
    nhead: usize,
    nt: bool,
    exact: bool,
) {
    // SAFETY: the caller's layout: nhead heads of 2h elements at the given strides.
    unsafe {
        if !den_pairs.is_null() && pair_lanes == S::LANES {
            // Angles from the pair-ordered denominators: sin and cos come out in pair order.
            sincos_body(s, pos, den_pairs, sn, cs, h, exact);
            let l2 = 2 * S::LANES;
            if h % l2 == 0 && fixed_vecs::<S>(h / S::LANES) {
                match h / l2 {
                    1 => rotate_heads_fixed::<S, T, 1, true>(s, y, ys1, x, xs1, nhead, sn, cs, nt),
                    2 => rotate_heads_fixed::<S, T, 2, true>(s, y, ys1, x, xs1, nhead, sn, cs, nt),
                    _ => rotate_heads_fixed::<S, T, 4, true>(s, y, ys1, x, xs1, nhead, sn, cs, nt),
                }
                return;
            }
            for hd in 0..nhead as isize {
                let (yh, xh) = (
                    y.offset(hd * ys1) as *mut u16,
                    x.offset(hd * xs1) as *const u16,
                );
                rotate_pairs_body(s, yh, xh, sn, cs, h);
            }
            return;
        }
        sincos_body(s, pos, den, sn, cs, h, exact);
        if h % S::LANES == 0 && fixed_vecs::<S>(h / S::LANES) {
            match h / S::LANES {
                1 => rotate_heads_fixed::<S, T, 1, false>(s, y, ys1, x, xs1, nhead, sn, cs, nt),
                2 => rotate_heads_fixed::<S, T, 2, false>(s, y, ys1, x, xs1, nhead, sn, cs, nt),
                4 => rotate_heads_fixed::<S, T, 4, false>(s, y, ys1, x, xs1, nhead, sn, cs, nt),
                _ => rotate_heads_fixed::<S, T, 8, false>(s, y, ys1, x, xs1, nhead, sn, cs, nt),
            }
            return;
        }
        for hd in 0..nhead as isize {
            rotate_body(s, y.offset(hd * ys1), x.offset(hd * xs1), sn, cs, h, nt);
        }
    }
}

/// Positions as read from an i64 or i32 tensor.
#[derive(Clone, Copy)]
pub enum Positions {
    I64(*const i64),
    I32(*const i32),
}

// SAFETY: read-only.
unsafe impl Send for Positions {}
// SAFETY: read-only.
unsafe impl Sync for Positions {}

impl Positions {
    /// # Safety
    /// `i` must be in bounds.
    #[inline]
    unsafe fn get(self, i: usize) -> f32 {
        // SAFETY: caller.
        unsafe {
            match self {
                Positions::I64(p) => *p.add(i) as f32,
                Positions::I32(p) => *p.add(i) as f32,
            }
        }
    }
}

/// `y[i, h, :] = rope(x[i, h, :], pos[i])` for `seq` tokens of `nhead` heads of size `d`.
/// Strides are in elements for dims 0 and 1 (the last dim is unit-stride).
///
/// # Safety
/// All addressed elements must be valid; `y` equals `x` (same strides) or does not overlap it.
#[allow(clippy::too_many_arguments)]
pub unsafe fn rope<T: Elem>(
    y: *mut T,
    ys: [isize; 2],
    x: *const T,
    xs: [isize; 2],
    pos: Positions,
    seq: usize,
    nhead: usize,
    d: usize,
    theta: f32,
) {
    let h = d / 2;
    let (yp, xp) = (SendPtr(y), SendPtr::from_const(x));
    let nt = stream_output(seq * nhead * d * std::mem::size_of::<T>());
    with_denominators(theta, d, |den| {
        let denp = SendPtr::from_const(den.as_ptr());
        // bf16 rotates in pair space (see `rotate_pairs_body`); not with streaming stores.
        let pair_lanes = super::simd::lanes();
        let den_pairs = if !nt && is_bf16::<T>() {
            let mut v = vec![0f32; h];
            super::simd::pair_order(den, &mut v, pair_lanes);
            v
        } else {
            Vec::new()
        };
        // positions past this have an angle the SIMD sin/cos would reduce inexactly
        let den_min = den.iter().cloned().fold(f32::INFINITY, f32::min);
        let exact_from = SIMD_SINCOS_MAX_ANGLE * den_min;
        let dpp = SendPtr::from_const(if den_pairs.is_empty() {
            std::ptr::null()
        } else {
            den_pairs.as_ptr()
        });
        par_ranges(seq, nhead * d * 2 * std::mem::size_of::<T>(), 1, |range| {
            let mut sn = vec![0f32; h];
            let mut cs = vec![0f32; h];
            let (snp, csp) = (sn.as_mut_ptr(), cs.as_mut_ptr());
            for i in range {
                // SAFETY: i < seq.
                let p = unsafe { pos.get(i) };
                let den = denp.get() as *const f32;
                let den_pairs = dpp.get() as *const f32;
                // SAFETY: token i is inside both tensors.
                let (y, x) = unsafe {
                    (
                        yp.get().offset(i as isize * ys[0]),
                        xp.get().offset(i as isize * xs[0]) as *const T,
                    )
                };
                let (ys1, xs1) = (ys[1], xs[1]);
                let exact = p.abs() > exact_from;
                // SAFETY: h entries in each buffer; nhead heads at the given strides.
                unsafe {
                    multiversion!(token_body, [T: Elem], (p: f32, den: *const f32, den_pairs: *const f32, pair_lanes: usize, snp: *mut f32, csp: *mut f32, h: usize, y: *mut T, ys1: isize, x: *const T, xs1: isize, nhead: usize, nt: bool, exact: bool))
                };
            }
            if nt {
                stream_fence();
            }
            drop((sn, cs));
        });
    });
}

macro_rules! named {
    ($($name:ident = $t:ty;)*) => {$(
        /// See `rope`.
        ///
        /// # Safety
        /// As `rope`.
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $name(y: *mut $t, ys: [isize; 2], x: *const $t, xs: [isize; 2],
                            pos: Positions, seq: usize, nhead: usize, d: usize, theta: f32) {
            // SAFETY: forwarded.
            unsafe { rope::<$t>(y, ys, x, xs, pos, seq, nhead, d, theta) }
        }
    )*};
}

named! {
    rope_f32 = f32;
    rope_f16 = f16;
    rope_bf16 = bf16;
}

#[cfg(test)]
mod tests {
    use super::super::simd::{force_level, level_lock, Level};
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Set: `token_body` takes the general per-head bodies only.
    pub(super) static GENERAL_ONLY: AtomicBool = AtomicBool::new(false);

    fn rotated<T: Elem + Copy>(x: &[T], seq: usize, nhead: usize, d: usize) -> Vec<T> {
        let mut y = x.to_vec();
        let pos: Vec<i64> = (0..seq as i64).map(|i| i * 37 % 1000).collect();
        let st = [(nhead * d) as isize, d as isize];
        // SAFETY: seq x nhead x d contiguous elements in both; positions for seq tokens.
        unsafe {
            rope::<T>(
                y.as_mut_ptr(),
                st,
                x.as_ptr(),
                st,
                Positions::I64(pos.as_ptr()),
                seq,
                nhead,
                d,
                10000.0,
            )
        };
        y
    }

    /// The fixed-size bodies (sin and cos kept in registers across a token's heads) give
    /// exactly the general bodies' bits, at every level, in f32 and bf16 (pair space), for the
    /// head sizes they take and for ones they leave to the general bodies.
    #[test]
    fn fixed_heads_match_the_general_bodies() {
        let _lock = level_lock();
        let was = super::super::simd::level();
        for want in [Level::Scalar, Level::Avx2, Level::Avx512] {
            if force_level(want) != want {
                continue;
            }
            for d in [2, 4, 8, 16, 32, 64, 96, 128, 256, 512] {
                let (seq, nhead) = (5, 3);
                let xf: Vec<f32> = (0..seq * nhead * d)
                    .map(|i| ((i * 7919 % 1009) as f32 - 504.0) / 97.0)
                    .collect();
                let xb: Vec<bf16> = xf.iter().map(|&v| bf16::from_f32(v)).collect();
                let fixed = (rotated(&xf, seq, nhead, d), rotated(&xb, seq, nhead, d));
                GENERAL_ONLY.store(true, Ordering::Relaxed);
                let general = (rotated(&xf, seq, nhead, d), rotated(&xb, seq, nhead, d));
                GENERAL_ONLY.store(false, Ordering::Relaxed);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                let bbits = |v: &[bf16]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&fixed.0), bits(&general.0), "f32 {want:?} d {d}");
                assert_eq!(bbits(&fixed.1), bbits(&general.1), "bf16 {want:?} d {d}");
                assert_ne!(
                    bits(&fixed.0),
                    bits(&xf),
                    "f32 {want:?} d {d} rotated nothing"
                );
            }
        }
        force_level(was);
    }
}
