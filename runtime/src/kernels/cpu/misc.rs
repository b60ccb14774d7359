//! Data-movement and reduction kernels: `argmax` (first maximal index; NaN counts as the
//! largest), `embedding` (row gather), `rearrange` (strided copy of any element size).

use half::{bf16, f16};

use super::simd::{multiversion, Elem, Scalar, Simd};
use super::{par_for, par_ranges, SendPtr, Strided};

/// (index, value) of the first maximum of `n` contiguous values; NaN beats every number (the
/// first NaN wins), as `torch.max` propagates NaN.
///
/// # Safety
/// `vals` readable for `n >= 1` elements.
pub unsafe fn argmax<T: Elem>(vals: *const T, n: usize) -> (usize, T) {
    fn scan<T: Elem>(vals: &[T], base: usize) -> (usize, f32) {
        let (p, n) = (vals.as_ptr(), vals.len());
        // SAFETY: n readable elements.
        let (i, v) =
            unsafe { multiversion!(scan_body, [T: Elem], (p: *const T, n: usize) -> (usize, f32)) };
        (base + i, v)
    }
    // SAFETY: n valid elements (caller).
    let all = unsafe { std::slice::from_raw_parts(vals, n) };
    let per = 32 * 1024;
    let best = if n <= 2 * per {
        scan(all, 0)
    } else {
        let slots: Vec<std::sync::OnceLock<(usize, f32)>> =
            (0..n.div_ceil(per)).map(|_| Default::default()).collect();
        par_for(slots.len(), &|c| {
            let s = &all[c * per..((c + 1) * per).min(n)];
            let _ = slots[c].set(scan(s, c * per));
        });
        let parts: Vec<(usize, f32)> = slots
            .into_iter()
            .map(|s| s.into_inner().expect("every chunk ran"))
            .collect();
        let mut best = parts[0];
        for &p in &parts[1..] {
            if best.1.is_nan() {
                break;
            }
            if p.1 > best.1 || p.1.is_nan() {
                best = p;
            }
        }
        best
    };
    (best.0, all[best.0])
}

/// (index, value) of the first maximum of `n >= 1` values at `p`, first NaN winning: two
/// vector passes (the maximum, then the first vector holding it) where no value is NaN or
/// infinite, which `v - v` (0 for finite values) tells in the first pass; the scalar scan
/// otherwise.
#[inline(always)]
unsafe fn scan_body<S: Simd, T: Elem>(s: S, p: *const T, n: usize) -> (usize, f32) {
    let l = S::LANES;
    // SAFETY: n readable elements (caller).
    unsafe {
        // four independent chains of each (one waited on the add's latency every vector)
        let mut mx = [s.splat(f32::NEG_INFINITY); 4];
        let mut bad = [s.splat(0.0); 4];
        let mut i = 0;
        while i + 4 * l <= n {
            for k in 0..4 {
                let v = T::load(s, p.add(i + k * l));
                mx[k] = s.max(mx[k], v);
                bad[k] = s.add(bad[k], s.sub(v, v));
            }
            i += 4 * l;
        }
        while i + l <= n {
            let v = T::load(s, p.add(i));
            mx[0] = s.max(mx[0], v);
            bad[0] = s.add(bad[0], s.sub(v, v));
            i += l;
        }
        let mut m = s.reduce_max(s.max(s.max(mx[0], mx[1]), s.max(mx[2], mx[3])));
        let mut finite = s.reduce_sum(s.add(s.add(bad[0], bad[1]), s.add(bad[2], bad[3]))) == 0.0;
        for j in i..n {
            let x = T::load(Scalar, p.add(j));
            finite &= x.is_finite();
            m = m.max(x);
        }
        if !finite {
            return scan_scalar(p, n);
        }
        // the first vector whose maximum is m, then the first lane equal to it (later
        // candidates never replace an equal one: the first index wins ties, -0 == +0)
        let mut i = 0;
        // blocks of four vectors: their maximum is m exactly when one of them holds it
        while i + 4 * l <= n {
            let ld = |k: usize| T::load(s, p.add(i + k * l));
            let b = s.max(s.max(ld(0), ld(1)), s.max(ld(2), ld(3)));
            if s.reduce_max(b) == m {
                break;
            }
            i += 4 * l;
        }
        while i + l <= n && s.reduce_max(T::load(s, p.add(i))) != m {
            i += l;
        }
        (i..n)
            .find(|&j| T::load(Scalar, p.add(j)) == m)
            .map_or_else(|| scan_scalar(p, n), |j| (j, m))
    }
}

/// The scalar scan: later candidates replace only when strictly greater; the first NaN wins.
#[inline(never)]
unsafe fn scan_scalar<T: Elem>(p: *const T, n: usize) -> (usize, f32) {
    // SAFETY: n >= 1 readable elements (caller).
    let load = |i: usize| unsafe { T::load(Scalar, p.add(i)) };
    let mut best = (0, load(0));
    if best.1.is_nan() {
        return best;
    }
    for i in 1..n {
        let x = load(i);
        if x > best.1 {
            best = (i, x);
        } else if x.is_nan() {
            return (i, x);
        }
    }
    best
}

macro_rules! named_argmax {
    ($($name:ident = $t:ty;)*) => {$(
        /// See `argmax`.
        ///
        /// # Safety
        /// As `argmax`.
        pub unsafe fn $name(vals: *const $t, n: usize) -> (usize, $t) {
            // SAFETY: forwarded.
            unsafe { argmax::<$t>(vals, n) }
        }
    )*};
}

named_argmax! {
    argmax_f32 = f32;
    argmax_f16 = f16;
    argmax_bf16 = bf16;
}

/// `out[i, :] = weight[index[i], :]` for rows of `row_bytes` bytes; indices already checked.
///
/// # Safety
/// `out` has `n` rows of `row_bytes` at stride `out_stride` bytes, every index is a valid row
/// of `weight` (stride `w_stride` bytes); no overlap.
pub unsafe fn embedding(
    out: *mut u8,
    out_stride: usize,
    weight: *const u8,
    w_stride: usize,
    index: &[i64],
    row_bytes: usize,
) {
    let (op, wp) = (SendPtr(out), SendPtr::from_const(weight));
    par_ranges(index.len(), row_bytes * 2, 8, |range| {
        for i in range {
            // SAFETY: checked indices, disjoint output rows.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    wp.get().add(index[i] as usize * w_stride),
                    op.get().add(i * out_stride),
                    row_bytes,
                )
            };
        }
    });
}

/// Embedding gather for each dtype (`row_bytes` = d * element size).
///
/// # Safety
/// As `embedding`.
pub unsafe fn embedding_f32(out: *mut u8, weight: *const u8, index: &[i64], d: usize) {
    // SAFETY: forwarded; contiguous rows.
    unsafe { embedding(out, d * 4, weight, d * 4, index, d * 4) }
}

/// See `embedding_f32`.
///
/// # Safety
/// As `embedding`.
pub unsafe fn embedding_f16(out: *mut u8, weight: *const u8, index: &[i64], d: usize) {
    // SAFETY: forwarded; contiguous rows.
    unsafe { embedding(out, d * 2, weight, d * 2, index, d * 2) }
}

/// See `embedding_f32`.
///
/// # Safety
/// As `embedding`.
pub unsafe fn embedding_bf16(out: *mut u8, weight: *const u8, index: &[i64], d: usize) {
    // SAFETY: forwarded; contiguous rows.
    unsafe { embedding(out, d * 2, weight, d * 2, index, d * 2) }
}

#[inline(always)]
unsafe fn copy_row<const B: usize>(dst: *mut u8, src: *const u8, n: usize, sd: isize, ss: isize) {
    for i in 0..n as isize {
        // SAFETY: inside both tensors (caller); B-byte elements, unaligned.
        unsafe {
            let v = (src.offset(i * ss * B as isize) as *const [u8; B]).read_unaligned();
            (dst.offset(i * sd * B as isize) as *mut [u8; B]).write_unaligned(v);
        }
    }
}

/// `out[idx] = in[idx]` over a collapsed layout of element size `esize` bytes (strides in
/// elements; tensor 0 is out, tensor 1 is in).
///
/// # Safety
/// The layout addresses valid elements of both; they do not overlap.
pub unsafe fn rearrange(out: *mut u8, inp: *const u8, esize: usize, layout: &Strided<2>) {
    let (op, ip) = (SendPtr(out), SendPtr::from_const(inp));
    let inner = layout.inner();
    let (sd, ss) = (layout.inner_stride(0), layout.inner_stride(1));
    par_ranges(layout.rows(), inner * esize * 2, 1, |rows| {
        for r in rows {
            let off = layout.row_offsets(r);
            // SAFETY: offsets inside both tensors (validated layout).
            unsafe {
                let d = op.get().offset(off[0] * esize as isize);
                let s = ip.get().offset(off[1] * esize as isize) as *const u8;
                if sd == 1 && ss == 1 {
                    std::ptr::copy_nonoverlapping(s, d, inner * esize);
                    continue;
                }
                match esize {
                    1 => copy_row::<1>(d, s, inner, sd, ss),
                    2 => copy_row::<2>(d, s, inner, sd, ss),
                    4 => copy_row::<4>(d, s, inner, sd, ss),
                    8 => copy_row::<8>(d, s, inner, sd, ss),
                    16 => copy_row::<16>(d, s, inner, sd, ss),
                    _ => {
                        for i in 0..inner as isize {
                            std::ptr::copy_nonoverlapping(
                                s.offset(i * ss * esize as isize),
                                d.offset(i * sd * esize as isize),
                                esize,
                            );
                        }
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector scan against the scalar one on arrays built to hit its edges: ties inside
    /// and across vectors, the maximum in the tail, infinities and NaN (scalar fallback), signed
    /// zeros, lengths below one vector.
    fn check<T: Elem + Copy>(from: fn(f32) -> T) {
        let mut seed = 7u64;
        let mut rnd = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) % 1000) as f32 / 7.0 - 70.0
        };
        let specials = [
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            0.0,
            -0.0,
            1e30,
            -1e30,
        ];
        for n in [1usize, 2, 15, 16, 17, 31, 33, 100, 1000, 4099] {
            for case in 0..40 {
                let mut v: Vec<f32> = (0..n).map(|_| rnd()).collect();
                match case % 8 {
                    0 => {}
                    1 => v.iter_mut().for_each(|x| *x = x.round().min(3.0)), // many ties
                    2 => v
                        .iter_mut()
                        .for_each(|x| *x = if *x > 0.0 { 0.0 } else { -0.0 }),
                    3 => v[n - 1] = 500.0, // in the tail
                    4 => v.iter_mut().for_each(|x| *x = f32::NEG_INFINITY),
                    _ => {
                        let k = (case * 7919) % n;
                        v[k] = specials[case % specials.len()];
                        let k2 = (case * 104729) % n;
                        v[k2] = specials[(case + 3) % specials.len()];
                    }
                }
                let t: Vec<T> = v.iter().map(|&x| from(x)).collect();
                let (p, len) = (t.as_ptr(), t.len());
                // SAFETY: len readable elements.
                let got = unsafe {
                    multiversion!(scan_body, [T: Elem], (p: *const T, len: usize) -> (usize, f32))
                };
                // SAFETY: as above.
                let want = unsafe { scan_scalar(p, len) };
                assert_eq!(got.0, want.0, "n {n} case {case}: {v:?}");
                assert!(
                    got.1 == want.1 || got.1.is_nan() && want.1.is_nan(),
                    "n {n} case {case}"
                );
            }
        }
    }

    #[test]
    fn vector_scan_matches_the_scalar_scan() {
        check::<f32>(|x| x);
        check::<bf16>(bf16::from_f32);
        check::<f16>(f16::from_f32);
    }
}
