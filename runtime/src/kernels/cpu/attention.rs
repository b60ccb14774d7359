//! Causal self-attention with grouped KV heads (spec §2.7), in f32:
//! `out[i, h] = softmax_j(scale * q[i, h] . k[j, g]) v[j, g]` over `j <= i + (S - L)`,
//! `g = h / (H / HK)`.
//!
//! Work items are (KV head, query row, key chunk): each item streams its keys once for all the
//! query heads of the group (so K and V are read once per group, not once per head). Decoding
//! (one query row) splits the keys into chunks across threads and merges the partial softmaxes
//! (max, sum, weighted values) afterwards, as flash-decoding does.

use half::{bf16, f16};

use super::simd::{multiversion, Elem, Scalar, Simd};
use super::{threads, SendPtr};
use rayon::prelude::*;

/// Shapes of one call (all tensors contiguous).
#[derive(Clone, Copy, Debug)]
pub struct AttnDims {
    /// Query rows L, query heads H, key rows S, KV heads HK, head size D, value size DV.
    pub l: usize,
    pub h: usize,
    pub s: usize,
    pub hk: usize,
    pub d: usize,
    pub dv: usize,
    pub scale: f32,
}

#[inline(always)]
unsafe fn dot<S: Simd, T: Elem>(s: S, q: *const f32, k: *const T, d: usize) -> f32 {
    let l = S::LANES;
    let mut i = 0;
    // SAFETY: d elements each.
    unsafe {
        let mut a0 = s.splat(0.0);
        let mut a1 = s.splat(0.0);
        while i + 2 * l <= d {
            a0 = s.fma(s.load(q.add(i)), T::load(s, k.add(i)), a0);
            a1 = s.fma(s.load(q.add(i + l)), T::load(s, k.add(i + l)), a1);
            i += 2 * l;
        }
        while i + l <= d {
            a0 = s.fma(s.load(q.add(i)), T::load(s, k.add(i)), a0);
            i += l;
        }
        let mut t = s.reduce_sum(s.add(a0, a1));
        while i < d {
            t += *q.add(i) * T::load(Scalar, k.add(i));
            i += 1;
        }
        t
    }
}

/// `acc[0..n] = sum_j p[j] * v[j * vs + 0..n]` for `nk` keys: the accumulators stay in
/// registers (8 vectors per tile) while the value rows stream from cache.
#[inline(always)]
unsafe fn weighted_sum<S: Simd, T: Elem>(
    s: S,
    acc: *mut f32,
    p: *const f32,
    v: *const T,
    vs: usize,
    nk: usize,
    n: usize,
) {
    let l = S::LANES;
    let tile = 8 * l;
    let mut t0 = 0;
    // SAFETY: nk rows of n elements at stride vs, nk weights, n outputs.
    unsafe {
        while t0 + tile <= n {
            let z = s.splat(0.0);
            let mut a = [z; 8];
            for j in 0..nk {
                let pj = s.splat(*p.add(j));
                let row = v.add(j * vs + t0);
                for (u, au) in a.iter_mut().enumerate() {
                    *au = s.fma(pj, T::load(s, row.add(u * l)), *au);
                }
            }
            for (u, au) in a.iter().enumerate() {
                s.store(acc.add(t0 + u * l), *au);
            }
            t0 += tile;
        }
        while t0 + l <= n {
            let mut a = s.splat(0.0);
            for j in 0..nk {
                a = s.fma(s.splat(*p.add(j)), T::load(s, v.add(j * vs + t0)), a);
            }
            s.store(acc.add(t0), a);
            t0 += l;
        }
        while t0 < n {
            let mut a = 0.0f32;
            for j in 0..nk {
                a += *p.add(j) * T::load(Scalar, v.add(j * vs + t0));
            }
            *acc.add(t0) = a;
            t0 += 1;
        }
    }
}

/// `row[j] = exp(row[j] - m)`; returns the sum.
#[inline(always)]
unsafe fn exp_sum<S: Simd>(s: S, row: *mut f32, n: usize, m: f32) -> f32 {
    let l = S::LANES;
    let mut i = 0;
    // SAFETY: n elements.
    unsafe {
        let mv = s.splat(m);
        let mut acc = s.splat(0.0);
        while i + l <= n {
            let e = s.exp(s.sub(s.load(row.add(i)), mv));
            s.store(row.add(i), e);
            acc = s.add(acc, e);
            i += l;
        }
        let mut t = s.reduce_sum(acc);
        while i < n {
            let e = Scalar.exp(*row.add(i) - m);
            *row.add(i) = e;
            t += e;
            i += 1;
        }
        t
    }
}

/// One item: KV head `g`, query row `i`, keys `j0..j1`. Writes `m[G]`, `lsum[G]`,
/// `acc[G * dv]` (unnormalised).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn item_body<S: Simd, T: Elem>(
    s: S,
    dims: *const AttnDims,
    q: *const T,
    k: *const T,
    v: *const T,
    g: usize,
    i: usize,
    j0: usize,
    j1: usize,
    scratch: *mut f32,
    m: *mut f32,
    lsum: *mut f32,
    acc: *mut f32,
) {
    // SAFETY: the caller sized every buffer from `dims`; indices are in range.
    unsafe {
        let dm = *dims;
        let grp = dm.h / dm.hk;
        let n = j1 - j0;
        // scratch: q rows (grp * d) then scores (grp * n)
        let qf = scratch;
        let sc = scratch.add(grp * dm.d);
        for hh in 0..grp {
            let qrow = q.add((i * dm.h + g * grp + hh) * dm.d);
            for t in 0..dm.d {
                *qf.add(hh * dm.d + t) = (*qrow.add(t)).to_f32() * dm.scale;
            }
        }
        for jj in 0..n {
            let krow = k.add(((j0 + jj) * dm.hk + g) * dm.d);
            for hh in 0..grp {
                *sc.add(hh * n + jj) = dot(s, qf.add(hh * dm.d), krow, dm.d);
            }
        }
        for hh in 0..grp {
            let row = sc.add(hh * n);
            let mut mx = f32::NEG_INFINITY;
            for jj in 0..n {
                mx = mx.max(*row.add(jj));
            }
            *m.add(hh) = mx;
            *lsum.add(hh) = if n == 0 { 0.0 } else { exp_sum(s, row, n, mx) };
            let vbase = v.add((j0 * dm.hk + g) * dm.dv);
            weighted_sum(s, acc.add(hh * dm.dv), row, vbase, dm.hk * dm.dv, n, dm.dv);
        }
    }
}

/// Runs causal GQA attention.
///
/// # Safety
/// q `[L, H, D]`, k `[S, HK, D]`, v `[S, HK, DV]`, out `[L, H, DV]` contiguous and valid, out not
/// overlapping the inputs, `H % HK == 0`, `S >= L`.
pub unsafe fn self_attention<T: Elem>(
    out: *mut T,
    q: *const T,
    k: *const T,
    v: *const T,
    dm: AttnDims,
) {
    let grp = dm.h / dm.hk;
    let rows = dm.hk * dm.l;
    // Split keys only when there are too few (head, row) items to keep the threads busy.
    let t = threads();
    let chunks = if rows >= 2 * t || dm.s < 512 {
        1
    } else {
        (4 * t).div_ceil(rows).min(dm.s / 256).max(1)
    };
    let chunk_len = dm.s.div_ceil(chunks);
    let items = rows * chunks;
    // partials per item: m[grp], l[grp], acc[grp*dv]
    let stride = grp * (2 + dm.dv);
    let mut partial = vec![0f32; if chunks > 1 { items * stride } else { 0 }];
    let pp = SendPtr(partial.as_mut_ptr());
    let (op, qp, kp, vp) = (
        SendPtr(out),
        SendPtr::from_const(q),
        SendPtr::from_const(k),
        SendPtr::from_const(v),
    );
    let work = |it: usize, scratch: &mut Vec<f32>, local: &mut Vec<f32>| {
        let row = it / chunks;
        let c = it % chunks;
        let (g, i) = (row / dm.l, row % dm.l);
        let limit = i + (dm.s - dm.l) + 1; // keys 0..limit are visible
        let j0 = (c * chunk_len).min(limit);
        let j1 = ((c + 1) * chunk_len).min(limit);
        let need = grp * dm.d + grp * (j1 - j0);
        if scratch.len() < need {
            scratch.resize(need, 0.0);
        }
        let dst: *mut f32 = if chunks > 1 {
            // SAFETY: item `it` owns its partial slot.
            unsafe { pp.get().add(it * stride) }
        } else {
            if local.len() < stride {
                local.resize(stride, 0.0);
            }
            local.as_mut_ptr()
        };
        // SAFETY: slot layout m | l | acc.
        let (m, lsum, acc) = unsafe { (dst, dst.add(grp), dst.add(2 * grp)) };
        let dims = &dm as *const AttnDims;
        let (q, k, v, scratch) = (
            qp.get() as *const T,
            kp.get() as *const T,
            vp.get() as *const T,
            scratch.as_mut_ptr(),
        );
        // SAFETY: buffers sized above; indices within the validated shapes.
        unsafe {
            multiversion!(item_body, [T: Elem], (dims: *const AttnDims, q: *const T, k: *const T, v: *const T, g: usize, i: usize, j0: usize, j1: usize, scratch: *mut f32, m: *mut f32, lsum: *mut f32, acc: *mut f32))
        };
        if chunks == 1 {
            for hh in 0..grp {
                // SAFETY: row (i, g*grp+hh) of out belongs to this item only.
                unsafe {
                    let o = op.get().add((i * dm.h + g * grp + hh) * dm.dv);
                    let inv = 1.0 / *lsum.add(hh);
                    for t in 0..dm.dv {
                        *o.add(t) = T::from_f32(*acc.add(hh * dm.dv + t) * inv);
                    }
                }
            }
        }
    };
    let cost = dm.s * (dm.d + dm.dv) * grp * 4;
    if items == 1 || t <= 1 || items * cost < 256 * 1024 {
        let (mut s, mut l) = (Vec::new(), Vec::new());
        for it in 0..items {
            work(it, &mut s, &mut l);
        }
    } else {
        (0..items)
            .into_par_iter()
            .for_each_init(|| (Vec::new(), Vec::new()), |(s, l), it| work(it, s, l));
    }
    if chunks > 1 {
        for row in 0..rows {
            let (g, i) = (row / dm.l, row % dm.l);
            for hh in 0..grp {
                let slot = |c: usize| &partial[(row * chunks + c) * stride..][..stride];
                let mx = (0..chunks)
                    .map(|c| slot(c)[hh])
                    .fold(f32::NEG_INFINITY, f32::max);
                let mut den = 0.0f32;
                let mut acc = vec![0f32; dm.dv];
                for c in 0..chunks {
                    let sl = slot(c);
                    if sl[grp + hh] == 0.0 {
                        continue;
                    }
                    let w = (sl[hh] - mx).exp();
                    den += w * sl[grp + hh];
                    let a = &sl[2 * grp + hh * dm.dv..][..dm.dv];
                    for (o, x) in acc.iter_mut().zip(a) {
                        *o += w * x;
                    }
                }
                // SAFETY: row (i, g*grp+hh) of out.
                unsafe {
                    let o = out.add((i * dm.h + g * grp + hh) * dm.dv);
                    for (t, x) in acc.iter().enumerate() {
                        *o.add(t) = T::from_f32(x / den);
                    }
                }
            }
        }
    }
}

macro_rules! named {
    ($($name:ident = $t:ty;)*) => {$(
        /// See `self_attention`.
        ///
        /// # Safety
        /// As `self_attention`.
        pub unsafe fn $name(out: *mut $t, q: *const $t, k: *const $t, v: *const $t, dm: AttnDims) {
            // SAFETY: forwarded.
            unsafe { self_attention::<$t>(out, q, k, v, dm) }
        }
    )*};
}

named! {
    self_attention_f32 = f32;
    self_attention_f16 = f16;
    self_attention_bf16 = bf16;
}
