//! cuBLAS GEMMs for `ops.gemm` and `ops.linear`: `cublasGemmEx` / `cublasGemmStridedBatchedEx`
//! with `CUBLAS_COMPUTE_32F` for f32, f16 and bf16 (f32 accumulation and f32 alpha/beta; half
//! outputs rounded once). Our tensors are row-major views with a unit stride in one of the two
//! matrix dimensions; cuBLAS is column-major, so a row-major `C = A B` runs as the column-major
//! `C^T = B^T A^T` (operands swapped), and a column-major C runs directly.
//!
//! libcublas is loaded by `libs.rs` (`ANYFFI_CUBLAS_LIBRARY`, else `libcublas.so`, `.so.13`,
//! `.so.12`, ...); `available()` says why it cannot be used. One handle per device, created on first use in the device's primary context; calls hold its lock while
//! they set the stream and enqueue, so threads may share it.

use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::sync::LazyLock;

use anyffi::{Error, Result};
use cudarc::driver::sys as cu;
use parking_lot::Mutex;

use super::libs::{self, BlasHandle, Cublas, CUBLAS, SUCCESS};
use crate::ops::DType;

pub use super::libs::NO_CUBLAS;

/// The loaded cuBLAS, or a RuntimeError saying why it cannot be used.
fn lib() -> Result<&'static Cublas> {
    CUBLAS.as_ref().map_err(|e| Error::runtime_error(e.clone()))
}

/// Ok when cuBLAS is loadable, else a RuntimeError naming the library.
pub fn available() -> Result<()> {
    lib().map(|_| ())
}

/// cuBLAS handles by device id (addresses), each behind its own lock.
static HANDLES: LazyLock<Mutex<HashMap<i32, &'static Mutex<usize>>>> =
    LazyLock::new(Default::default);

fn check(bl: &Cublas, rc: i32, call: &str) -> Result<()> {
    if rc == SUCCESS {
        return Ok(());
    }
    let p = match bl.get_status_string {
        // SAFETY: cuBLAS's status strings are static (one for unknown codes too).
        Some(f) => unsafe { f(rc) },
        None => std::ptr::null(),
    };
    let text = if p.is_null() {
        String::new()
    } else {
        // SAFETY: a NUL-terminated static string from cuBLAS.
        format!(" ({})", unsafe { CStr::from_ptr(p) }.to_string_lossy())
    };
    Err(Error::runtime_error(format!(
        "{call} failed: status {rc}{text}"
    )))
}

/// The handle of device `dev` (its primary context current on this thread).
fn handle(bl: &Cublas, dev: i32) -> Result<&'static Mutex<usize>> {
    let mut handles = HANDLES.lock();
    if let Some(h) = handles.get(&dev) {
        return Ok(h);
    }
    let mut h: BlasHandle = std::ptr::null_mut();
    // SAFETY: the device's context is current; valid out-parameter. The handle lives for the
    // process.
    check(bl, unsafe { (bl.create)(&mut h) }, "cublasCreate")?;
    let cell: &'static Mutex<usize> = Box::leak(Box::new(Mutex::new(h as usize)));
    handles.insert(dev, cell);
    Ok(cell)
}

/// One operand in row-major terms: element (i, j) at `i * ld + j` (`row_major`) or
/// `i + j * ld`.
#[derive(Clone, Copy, Debug)]
pub struct Operand {
    pub ptr: *const c_void,
    pub row_major: bool,
    pub ld: i64,
    /// Elements between consecutive batch matrices (0 broadcasts).
    pub batch_stride: i64,
}

impl Operand {
    /// Describes a `[rows, cols]` matrix with element strides `(rs, cs)`, or explains (for
    /// `op`'s argument `name`) why cuBLAS cannot take it.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        op: &str,
        name: &str,
        ptr: *const c_void,
        rows: i64,
        cols: i64,
        rs: i64,
        cs: i64,
        batch_stride: i64,
    ) -> Result<Operand> {
        let (row_major, ld) = if cs == 1 || cols <= 1 {
            (true, if rows <= 1 { cols.max(1) } else { rs })
        } else if rs == 1 || rows <= 1 {
            (false, if cols <= 1 { rows.max(1) } else { cs })
        } else {
            return Err(Error::value_error(format!(
                "{op}: on CUDA `{name}` needs a unit stride in one of its two matrix \
                 dimensions (cuBLAS), got strides ({rs}, {cs}) for a [{rows}, {cols}] matrix"
            )));
        };
        let need = if row_major { cols } else { rows }.max(1);
        if ld < need || ld > i32::MAX as i64 || batch_stride < 0 {
            return Err(Error::value_error(format!(
                "{op}: on CUDA `{name}` needs non-overlapping {} (stride >= {need}, cuBLAS), got \
                 strides ({rs}, {cs}) for a [{rows}, {cols}] matrix{}",
                if row_major { "rows" } else { "columns" },
                if batch_stride < 0 {
                    " and a negative batch stride"
                } else {
                    ""
                }
            )));
        }
        Ok(Operand {
            ptr,
            row_major,
            ld,
            batch_stride,
        })
    }
}

/// The column-major cuBLAS problem for a row-major-view `C[m, n] = A[m, k] B[k, n]`:
/// `C' (m' x n', ld c.ld) = op(first) op(second)`.
#[derive(Clone, Copy, Debug)]
pub struct ColumnMajor {
    pub m: i64,
    pub n: i64,
    pub first: Operand,
    pub first_t: bool,
    pub second: Operand,
    pub second_t: bool,
}

/// A row-major C is the column-major `C^T (n x m) = B^T A^T` (operands swapped); a column-major
/// C is `C (m x n) = A B`. An operand is taken as stored (no transpose) when its storage order
/// matches C's, else transposed.
pub fn map_to_column_major(m: i64, n: i64, c: Operand, a: Operand, b: Operand) -> ColumnMajor {
    let (mm, nn, first, second) = if c.row_major {
        (n, m, b, a)
    } else {
        (m, n, a, b)
    };
    ColumnMajor {
        m: mm,
        n: nn,
        first,
        first_t: first.row_major != c.row_major,
        second,
        second_t: second.row_major != c.row_major,
    }
}

fn data_type(dt: DType) -> i32 {
    match dt {
        DType::F32 => libs::CUDA_R_32F,
        DType::F16 => libs::CUDA_R_16F,
        _ => libs::CUDA_R_16BF,
    }
}

/// `C = alpha * A B + beta * C` for `batch` matrices ([m, k] x [k, n] -> [m, n]), enqueued on
/// `stream`. `beta == 0` does not read C.
///
/// # Safety
/// The operands describe device memory of device `dev` valid for the shapes, C overlaps
/// neither input, and the device's primary context is current.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm(
    op: &str,
    dev: i32,
    stream: cu::CUstream,
    dt: DType,
    batch: i64,
    m: i64,
    n: i64,
    k: i64,
    c: Operand,
    a: Operand,
    b: Operand,
    alpha: f32,
    beta: f32,
) -> Result<()> {
    for (what, v) in [("M", m), ("N", n), ("K", k), ("the batch", batch)] {
        if v > i32::MAX as i64 {
            return Err(Error::value_error(format!(
                "{op}: on CUDA {what} ({v}) must fit in a 32-bit int (cuBLAS)"
            )));
        }
    }
    // SAFETY: forwarded contract.
    unsafe {
        gemm_with(
            lib()?,
            dev,
            stream,
            dt,
            batch,
            m,
            n,
            k,
            c,
            a,
            b,
            alpha,
            beta,
        )
    }
}

/// [`gemm`] through the cuBLAS functions `bl` (the loaded library, or a stand-in in tests).
///
/// # Safety
/// As for [`gemm`]; `bl` holds the cuBLAS functions (or functions with their contracts).
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_with(
    bl: &Cublas,
    dev: i32,
    stream: cu::CUstream,
    dt: DType,
    batch: i64,
    m: i64,
    n: i64,
    k: i64,
    c: Operand,
    a: Operand,
    b: Operand,
    alpha: f32,
    beta: f32,
) -> Result<()> {
    let g = map_to_column_major(m, n, c, a, b);
    let h = handle(bl, dev)?;
    let h = h.lock();
    let hb = *h as BlasHandle;
    let op_of = |t: bool| {
        if t {
            libs::CUBLAS_OP_T
        } else {
            libs::CUBLAS_OP_N
        }
    };
    let (first, second) = (g.first, g.second);
    let (mm, nn) = (g.m, g.n);
    let t = data_type(dt);
    let compute = libs::CUBLAS_COMPUTE_32F;
    let algo = libs::CUBLAS_GEMM_DEFAULT;
    let (alpha, beta) = (alpha, beta);
    check(
        bl,
        // SAFETY: a live handle of this device, used under its lock; the stream belongs to the
        // device (the caller's or the env stream).
        unsafe { (bl.set_stream)(hb, stream as *mut c_void) },
        "cublasSetStream",
    )?;
    let (al, be) = (
        &alpha as *const f32 as *const c_void,
        &beta as *const f32 as *const c_void,
    );
    if batch == 1 {
        check(
            bl,
            // SAFETY: per the caller's contract; leading dimensions checked by `Operand::new`;
            // host-pointer scalars (the default pointer mode) read before the call returns.
            unsafe {
                (bl.gemm_ex)(
                    hb,
                    op_of(g.first_t),
                    op_of(g.second_t),
                    mm as i32,
                    nn as i32,
                    k as i32,
                    al,
                    first.ptr,
                    t,
                    first.ld as i32,
                    second.ptr,
                    t,
                    second.ld as i32,
                    be,
                    c.ptr as *mut c_void,
                    t,
                    c.ld as i32,
                    compute,
                    algo,
                )
            },
            "cublasGemmEx",
        )
    } else {
        check(
            bl,
            // SAFETY: as above, with batch strides validated by the op (0 broadcasts an input).
            unsafe {
                (bl.gemm_strided_batched_ex)(
                    hb,
                    op_of(g.first_t),
                    op_of(g.second_t),
                    mm as i32,
                    nn as i32,
                    k as i32,
                    al,
                    first.ptr,
                    t,
                    first.ld as i32,
                    first.batch_stride,
                    second.ptr,
                    t,
                    second.ld as i32,
                    second.batch_stride,
                    be,
                    c.ptr as *mut c_void,
                    t,
                    c.ld as i32,
                    c.batch_stride,
                    batch as i32,
                    compute,
                    algo,
                )
            },
            "cublasGemmStridedBatchedEx",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BLAS column-major GEMM on host slices, as cublasGemmEx defines it:
    /// `C[i + j ldc] = alpha sum_p opA(i, p) opB(p, j) + beta C`, opX(r, c) = X[r + c ld] or,
    /// transposed, X[c + r ld].
    #[allow(clippy::too_many_arguments)]
    fn blas_ref(
        ta: bool,
        tb: bool,
        m: i64,
        n: i64,
        k: i64,
        a: &[f64],
        lda: i64,
        b: &[f64],
        ldb: i64,
        c: &mut [f64],
        ldc: i64,
    ) {
        let at = |r: i64, cc: i64| {
            if ta {
                a[(cc + r * lda) as usize]
            } else {
                a[(r + cc * lda) as usize]
            }
        };
        let bt = |r: i64, cc: i64| {
            if tb {
                b[(cc + r * ldb) as usize]
            } else {
                b[(r + cc * ldb) as usize]
            }
        };
        for i in 0..m {
            for j in 0..n {
                c[(i + j * ldc) as usize] = (0..k).map(|p| at(i, p) * bt(p, j)).sum();
            }
        }
    }

    /// Every storage order of C, A and B (and padded leading dimensions) through
    /// `Operand::new` + `map_to_column_major` + the BLAS definition gives the row-major product.
    #[test]
    fn mapping_gives_the_row_major_product_for_every_storage_order() {
        let (m, n, k) = (5i64, 7i64, 3i64);
        let val = |i: i64, j: i64, s: i64| ((i * 31 + j * 17 + s * 7) % 13) as f64 - 6.0;
        // row-major strides (ld = cols + pad) or column-major (ld = rows + pad)
        let strides = |rows: i64, cols: i64, row_major: bool| {
            if row_major {
                (cols + 2, 1)
            } else {
                (1, rows + 1)
            }
        };
        for &(cr, ar, br) in &[
            (true, true, true),
            (true, true, false),
            (true, false, true),
            (true, false, false),
            (false, true, true),
            (false, true, false),
            (false, false, true),
            (false, false, false),
        ] {
            let store = |rows: i64, cols: i64, rm: bool, seed: i64| {
                let (rs, cs) = strides(rows, cols, rm);
                let mut v = vec![f64::NAN; (rows * rs.max(1) + cols * cs.max(1)) as usize];
                for i in 0..rows {
                    for j in 0..cols {
                        v[(i * rs + j * cs) as usize] = val(i, j, seed);
                    }
                }
                (v, rs, cs)
            };
            let (av, ars, acs) = store(m, k, ar, 1);
            let (bv, brs, bcs) = store(k, n, br, 2);
            let (crs, ccs) = strides(m, n, cr);
            let mut cv = vec![0.0; (m * crs + n * ccs) as usize];
            let nul = std::ptr::null();
            let ao = Operand::new("t", "a", nul, m, k, ars, acs, 0).unwrap();
            let bo = Operand::new("t", "b", nul, k, n, brs, bcs, 0).unwrap();
            let co = Operand::new("t", "c", nul, m, n, crs, ccs, 0).unwrap();
            assert_eq!((ao.row_major, bo.row_major, co.row_major), (ar, br, cr));
            let g = map_to_column_major(m, n, co, ao, bo);
            // which host array is `first`: B when C is row-major, else A
            let (fv, sv) = if cr { (&bv, &av) } else { (&av, &bv) };
            blas_ref(
                g.first_t,
                g.second_t,
                g.m,
                g.n,
                k,
                fv,
                g.first.ld,
                sv,
                g.second.ld,
                &mut cv,
                co.ld,
            );
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k).map(|p| val(i, p, 1) * val(p, j, 2)).sum();
                    let got = cv[(i * crs + j * ccs) as usize];
                    assert_eq!(got, want, "C{:?} A{:?} B{:?} at ({i},{j})", cr, ar, br);
                }
            }
        }
    }

    #[test]
    fn operands_cublas_cannot_take_are_value_errors() {
        let nul = std::ptr::null();
        let e = Operand::new("ops.gemm", "a", nul, 4, 4, 8, 2, 0).unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        assert!(
            e.message()
                .contains("ops.gemm: on CUDA `a` needs a unit stride"),
            "{}",
            e.message()
        );
        let e = Operand::new("ops.linear", "in", nul, 4, 8, 0, 1, 0).unwrap_err();
        assert!(
            e.message()
                .contains("ops.linear: on CUDA `in` needs non-overlapping rows"),
            "{}",
            e.message()
        );
        // one row: any row stride; one column: any column stride
        assert_eq!(Operand::new("t", "x", nul, 1, 8, 0, 1, 0).unwrap().ld, 8);
        assert_eq!(Operand::new("t", "x", nul, 8, 1, 1, 0, 0).unwrap().ld, 1);
    }

    /// The stand-in libcublas of `tests/fake_cublas` (the five functions we call, computing on
    /// host memory as cuBLAS defines them), built with the C compiler; None (skipped, with a
    /// message) without one.
    fn fake_cublas() -> Option<libs::Cublas> {
        let src = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fake_cublas/fake_cublas.c"
        );
        let dir = std::env::temp_dir().join(format!("anyffi-fake-cublas-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let so = dir.join("libfakecublas.so");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let built = std::process::Command::new(&cc)
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(&so)
            .arg(src)
            .status();
        match built {
            Ok(s) if s.success() => {}
            other => {
                eprintln!("skipped: {cc} could not build the stand-in cuBLAS: {other:?}");
                return None;
            }
        }
        let lib = libs::load_cublas(Some(so.clone().into_os_string())).unwrap();
        // the mapping outlives the file: remove it so that runs leave nothing in the temp dir
        let _ = std::fs::remove_dir_all(&dir);
        Some(lib)
    }

    #[test]
    fn calls_reach_cublas_with_the_blas_arguments() {
        let Some(bl) = fake_cublas() else { return };
        let mut state = 0x2545f4914f6cdd1du64;
        let mut rnd = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let nul = std::ptr::null_mut();
        let mut cases = 0;
        for (m, n, k) in [(3i64, 5i64, 4i64), (1, 7, 6), (6, 1, 3), (4, 4, 1)] {
            for layout in 0..8 {
                let (a_rm, b_rm, c_rm) = (layout & 1 == 0, layout & 2 == 0, layout & 4 == 0);
                for (batch, bcast) in [(1i64, false), (3, false), (3, true)] {
                    for beta in [0.5f32, 0.0] {
                        let na = if bcast { 1 } else { batch };
                        let a: Vec<f32> = (0..na * m * k).map(|_| rnd()).collect();
                        let b: Vec<f32> = (0..batch * k * n).map(|_| rnd()).collect();
                        // with beta = 0, C's old values (NaN) must not be read
                        let c0: Vec<f32> = (0..batch * m * n)
                            .map(|_| if beta == 0.0 { f32::NAN } else { rnd() })
                            .collect();
                        let mut c = c0.clone();
                        let st = |rm: bool, rows: i64, cols: i64| {
                            if rm {
                                (cols, 1)
                            } else {
                                (1, rows)
                            }
                        };
                        let ((ars, acs), (brs, bcs), (crs, ccs)) =
                            (st(a_rm, m, k), st(b_rm, k, n), st(c_rm, m, n));
                        let abs = if bcast { 0 } else { m * k };
                        let ao = Operand::new("t", "a", a.as_ptr().cast(), m, k, ars, acs, abs);
                        let bo = Operand::new("t", "b", b.as_ptr().cast(), k, n, brs, bcs, k * n);
                        let co = Operand::new(
                            "t",
                            "c",
                            c.as_mut_ptr().cast_const().cast(),
                            m,
                            n,
                            crs,
                            ccs,
                            m * n,
                        );
                        let (ao, bo, co) = (ao.unwrap(), bo.unwrap(), co.unwrap());
                        // SAFETY: host buffers sized for the shapes; the stand-in computes on
                        // host memory.
                        unsafe {
                            gemm_with(
                                &bl,
                                -7,
                                nul,
                                DType::F32,
                                batch,
                                m,
                                n,
                                k,
                                co,
                                ao,
                                bo,
                                1.5,
                                beta,
                            )
                        }
                        .unwrap();
                        for q in 0..batch {
                            for i in 0..m {
                                for j in 0..n {
                                    let mut s = 0.0f64;
                                    for p in 0..k {
                                        let av = a[((if bcast { 0 } else { q * m * k })
                                            + i * ars
                                            + p * acs)
                                            as usize];
                                        let bv = b[(q * k * n + p * brs + j * bcs) as usize];
                                        s += av as f64 * bv as f64;
                                    }
                                    let ix = (q * m * n + i * crs + j * ccs) as usize;
                                    let old = if beta == 0.0 { 0.0 } else { c0[ix] as f64 };
                                    let want = 1.5 * s + beta as f64 * old;
                                    assert!(
                                        (c[ix] as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                                        "({m},{n},{k}) layout {layout} batch {batch} bcast \
                                         {bcast} beta {beta}: C[{q}][{i},{j}] = {} want {want}",
                                        c[ix]
                                    );
                                }
                            }
                        }
                        cases += 1;
                    }
                }
            }
        }
        assert_eq!(cases, 4 * 8 * 3 * 2);
    }
}
