//! Data-movement and reduction kernels: `argmax` (first maximal index; NaN counts as the
//! largest), `embedding` (row gather), `rearrange` (strided copy of any element size).

use half::{bf16, f16};

use super::simd::Elem;
use super::{par_for, par_ranges, SendPtr, Strided};

/// (index, value) of the first maximum of `n` contiguous values; NaN beats every number (the
/// first NaN wins), as `torch.max` propagates NaN.
///
/// # Safety
/// `vals` readable for `n >= 1` elements.
pub unsafe fn argmax<T: Elem>(vals: *const T, n: usize) -> (usize, T) {
    // Keeps the first index on ties: later candidates replace only when strictly greater.
    fn scan<T: Elem>(vals: &[T], base: usize) -> (usize, f32) {
        let mut best = (base, vals[0].to_f32());
        if best.1.is_nan() {
            return best;
        }
        for (i, v) in vals.iter().enumerate().skip(1) {
            let x = v.to_f32();
            if x > best.1 {
                best = (base + i, x);
            } else if x.is_nan() {
                return (base + i, x);
            }
        }
        best
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
