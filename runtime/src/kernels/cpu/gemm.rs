//! Matrix products: `gemm_f32` runs our AVX-512 kernels (`sgemm_nt`: packed for 48+ rows, the
//! unpacked dot-product tiles for "NT" layouts) where they apply and the `gemm` crate (blocked,
//! packed, rayon-parallel) otherwise; for f16/bf16 the operands are widened to f32 in a
//! caller-provided workspace, the product runs in f32 and the result is rounded once.

use half::{bf16, f16};

use super::simd::Elem;
use super::{gemv, par_ranges, sgemm_nt, threads, SendPtr};

/// One 2-D operand: pointer and strides in elements (row stride, column stride).
#[derive(Clone, Copy, Debug)]
pub struct Mat<T> {
    pub ptr: *mut T,
    pub rs: isize,
    pub cs: isize,
}

/// K per call of the `gemm` crate for a single row (see `gemm_f32`).
const GEMV_K_BLOCK: usize = 4096;

/// `c = alpha * a @ b + beta * c` with a `[m, k]`, b `[k, n]`, c `[m, n]` (f32); c is not read
/// when `beta == 0` (so NaN garbage in it is ignored, as in BLAS).
///
/// # Safety
/// Every operand addresses valid elements with its strides; c does not overlap a or b.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_f32(
    m: usize,
    n: usize,
    k: usize,
    c: Mat<f32>,
    a: Mat<f32>,
    b: Mat<f32>,
    alpha: f32,
    beta: f32,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        // The product is empty: c = beta * c.
        for i in 0..m as isize {
            for j in 0..n as isize {
                // SAFETY: inside c.
                unsafe {
                    let p = c.ptr.offset(i * c.rs + j * c.cs);
                    *p = if beta == 0.0 { 0.0 } else { beta * *p };
                }
            }
        }
        return;
    }
    if sgemm_nt::available() {
        if m >= 48 {
            // SAFETY: forwarded; any strides.
            unsafe {
                sgemm_nt::sgemm_packed(
                    m,
                    n,
                    k,
                    (a.ptr, a.rs, a.cs),
                    (b.ptr, b.rs, b.cs),
                    (c.ptr, c.rs, c.cs),
                    alpha,
                    beta,
                )
            };
            return;
        }
        if a.cs == 1 && b.rs == 1 && c.cs == 1 {
            // SAFETY: forwarded; A rows and B columns are unit-stride in K.
            unsafe {
                sgemm_nt::sgemm_nt(m, n, k, a.ptr, a.rs, b.ptr, b.cs, c.ptr, c.rs, alpha, beta)
            };
            return;
        }
    }
    if m == 1 && k > GEMV_K_BLOCK {
        // One row through the `gemm` crate is a chain of axpys into C: each output sums all of
        // K in one f32 chain (relative error 1.8e-5 at K = 262147, 10x numpy's; session 17's
        // audit). In K blocks instead: the first into C (with the caller's beta), each later
        // one into a zeroed row that is then added to C.
        let mut part = vec![0f32; n];
        let row = Mat {
            ptr: part.as_mut_ptr(),
            rs: n as isize,
            cs: 1,
        };
        let mut k0 = 0;
        while k0 < k {
            let kb = GEMV_K_BLOCK.min(k - k0);
            let o = k0 as isize;
            // SAFETY: columns k0..k0+kb of a and rows k0..k0+kb of b are inside them; `part`
            // holds one row of n.
            unsafe {
                let (ab, bb) = (
                    Mat {
                        ptr: a.ptr.offset(o * a.cs),
                        ..a
                    },
                    Mat {
                        ptr: b.ptr.offset(o * b.rs),
                        ..b
                    },
                );
                if k0 == 0 {
                    gemm_f32(1, n, kb, c, ab, bb, alpha, beta);
                } else {
                    gemm_f32(1, n, kb, row, ab, bb, alpha, 0.0);
                    for (j, x) in part.iter().enumerate() {
                        *c.ptr.offset(j as isize * c.cs) += x;
                    }
                }
            }
            k0 += kb;
        }
        return;
    }
    let flops = m * n * k;
    let par = if flops < 64 * 64 * 64 || threads() <= 1 {
        gemm::Parallelism::None
    } else {
        gemm::Parallelism::Rayon(threads())
    };
    let serial = matches!(par, gemm::Parallelism::None);
    // SAFETY: forwarded; the gemm crate computes dst := alpha*dst + beta*lhs*rhs, so our
    // (alpha, beta) map to its (beta, alpha).
    let run = || unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.ptr,
            c.cs,
            c.rs,
            beta != 0.0,
            a.ptr,
            a.cs,
            a.rs,
            b.ptr,
            b.cs,
            b.rs,
            beta,
            alpha,
            false,
            false,
            false,
            par,
        )
    };
    // A serial product runs on this thread: handed to the pool it cost two thread wake-ups
    // (4.4 against 22 us for a (4,64,64) `ops.gemm`). The crate packs into a buffer in a thread
    // local of the thread it runs on; in a thread-local destructor that may be gone already
    // (the crate would panic), and the product goes to the pool's threads as before.
    if serial && gemm_common::gemm::L2_SLAB.try_with(|_| ()).is_ok() {
        run()
    } else {
        // inside the kernels' pool, so that `Parallelism::Rayon` uses its threads
        // SAFETY: `run` touches only the operands, valid until it returns.
        unsafe { super::install_raw(run) }
    }
}

/// Copies a strided `[rows, cols]` matrix into a row-major f32 buffer.
///
/// # Safety
/// `src` addresses rows x cols valid elements; `dst` has room for rows*cols.
pub unsafe fn widen_2d<T: Elem>(dst: *mut f32, src: Mat<T>, rows: usize, cols: usize) {
    let (dp, sp) = (SendPtr(dst), SendPtr(src.ptr));
    par_ranges(rows, cols * 6, 16, |range| {
        for r in range {
            // SAFETY: row r of each.
            unsafe {
                let d = dp.get().add(r * cols);
                let s = sp.get().offset(r as isize * src.rs) as *const T;
                if src.cs == 1 {
                    gemv::widen::<T>(d, s, cols);
                } else {
                    for j in 0..cols {
                        *d.add(j) = (*s.offset(j as isize * src.cs)).to_f32();
                    }
                }
            }
        }
    });
}

/// Rounds a row-major f32 `[rows, cols]` buffer into a strided matrix.
///
/// # Safety
/// As `widen_2d`, reversed.
pub unsafe fn narrow_2d<T: Elem>(dst: Mat<T>, src: *const f32, rows: usize, cols: usize) {
    let (dp, sp) = (SendPtr(dst.ptr), SendPtr::from_const(src));
    par_ranges(rows, cols * 6, 16, |range| {
        for r in range {
            // SAFETY: row r of each.
            unsafe {
                let d = dp.get().offset(r as isize * dst.rs);
                let s = sp.get().add(r * cols) as *const f32;
                for j in 0..cols {
                    *d.offset(j as isize * dst.cs) = T::from_f32(*s.add(j));
                }
            }
        }
    });
}

/// Workspace (f32 elements) that `gemm_half` needs.
pub fn gemm_half_workspace(m: usize, n: usize, k: usize) -> usize {
    m * k + k * n + m * n
}

/// `gemm_f32` for f16/bf16 operands through f32 copies in `ws` (at least
/// `gemm_half_workspace(m, n, k)` elements).
///
/// # Safety
/// As `gemm_f32`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_half<T: Elem>(
    m: usize,
    n: usize,
    k: usize,
    c: Mat<T>,
    a: Mat<T>,
    b: Mat<T>,
    alpha: f32,
    beta: f32,
    ws: &mut [f32],
) {
    let (wa, rest) = ws.split_at_mut(m * k);
    let (wb, rest) = rest.split_at_mut(k * n);
    let wc = &mut rest[..m * n];
    // SAFETY: sizes per gemm_half_workspace; operands per the caller.
    unsafe {
        widen_2d(wa.as_mut_ptr(), a, m, k);
        widen_2d(wb.as_mut_ptr(), b, k, n);
        if beta != 0.0 {
            widen_2d(wc.as_mut_ptr(), c, m, n);
        }
        let mat = |p: *mut f32, cols: usize| Mat {
            ptr: p,
            rs: cols as isize,
            cs: 1,
        };
        gemm_f32(
            m,
            n,
            k,
            mat(wc.as_mut_ptr(), n),
            mat(wa.as_mut_ptr(), k),
            mat(wb.as_mut_ptr(), n),
            alpha,
            beta,
        );
        narrow_2d(c, wc.as_ptr(), m, n);
    }
}

/// f16 GEMM (see `gemm_half`).
///
/// # Safety
/// As `gemm_half`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_f16(
    m: usize,
    n: usize,
    k: usize,
    c: Mat<f16>,
    a: Mat<f16>,
    b: Mat<f16>,
    alpha: f32,
    beta: f32,
    ws: &mut [f32],
) {
    // SAFETY: forwarded.
    unsafe { gemm_half(m, n, k, c, a, b, alpha, beta, ws) }
}

/// bf16 GEMM (see `gemm_half`).
///
/// # Safety
/// As `gemm_half`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_bf16(
    m: usize,
    n: usize,
    k: usize,
    c: Mat<bf16>,
    a: Mat<bf16>,
    b: Mat<bf16>,
    alpha: f32,
    beta: f32,
    ws: &mut [f32],
) {
    // SAFETY: forwarded.
    unsafe { gemm_half(m, n, k, c, a, b, alpha, beta, ws) }
}
