//! cuBLAS GEMMs for `ops.gemm` and `ops.linear`: `cublasGemmEx` / `cublasGemmStridedBatchedEx`
//! with `CUBLAS_COMPUTE_32F` for f32, f16 and bf16 (f32 accumulation and f32 alpha/beta; half
//! outputs rounded once). Our tensors are row-major views with a unit stride in one of the two
//! matrix dimensions; cuBLAS is column-major, so a row-major `C = A B` runs as the column-major
//! `C^T = B^T A^T` (operands swapped), and a column-major C runs directly.
//!
//! libcublas is loaded by cudarc, whose lazy loading panics when the library is missing, so it
//! is probed first (cudarc's candidate list: `libcublas.so`, `libcublas.so.12`, ...). One handle
//! per device, created on first use in the device's primary context; calls hold its lock while
//! they set the stream and enqueue, so threads may share it.

use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::sync::LazyLock;

use anyffi::{Error, Result};
use cudarc::cublas::sys as bl;
use cudarc::driver::sys as cu;
use parking_lot::Mutex;

use crate::ops::DType;

/// The message when no cuBLAS library can be loaded.
pub const NO_CUBLAS: &str = "the cuBLAS library libcublas.so was not found (install the CUDA \
     toolkit's cuBLAS, e.g. `pip install nvidia-cublas-cu12`, and add its lib directory to \
     LD_LIBRARY_PATH)";

static PRESENT: LazyLock<bool> = LazyLock::new(|| {
    // SAFETY: only tries to dlopen cudarc's candidate names; no cuBLAS function is called.
    unsafe { bl::is_culib_present() }
});

/// Ok when cuBLAS is loadable, else a RuntimeError naming the library.
pub fn available() -> Result<()> {
    if *PRESENT {
        Ok(())
    } else {
        Err(Error::runtime_error(NO_CUBLAS))
    }
}

/// cuBLAS handles by device id (addresses), each behind its own lock.
static HANDLES: LazyLock<Mutex<HashMap<i32, &'static Mutex<usize>>>> =
    LazyLock::new(Default::default);

fn check(rc: bl::cublasStatus_t, call: &str) -> Result<()> {
    if rc == bl::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        return Ok(());
    }
    // SAFETY: cuBLAS is loaded (we got a status from it); the string is static.
    let p = unsafe { bl::cublasGetStatusString(rc) };
    let text = if p.is_null() {
        String::new()
    } else {
        // SAFETY: a NUL-terminated static string from cuBLAS.
        format!(" ({})", unsafe { CStr::from_ptr(p) }.to_string_lossy())
    };
    Err(Error::runtime_error(format!("{call} failed: {rc:?}{text}")))
}

/// The handle of device `dev` (its primary context current on this thread).
fn handle(dev: i32) -> Result<&'static Mutex<usize>> {
    available()?;
    let mut handles = HANDLES.lock();
    if let Some(h) = handles.get(&dev) {
        return Ok(h);
    }
    let mut h: bl::cublasHandle_t = std::ptr::null_mut();
    // SAFETY: cuBLAS is loaded and the device's context is current; valid out-parameter. The
    // handle lives for the process.
    check(unsafe { bl::cublasCreate_v2(&mut h) }, "cublasCreate")?;
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

fn data_type(dt: DType) -> bl::cudaDataType {
    match dt {
        DType::F32 => bl::cudaDataType::CUDA_R_32F,
        DType::F16 => bl::cudaDataType::CUDA_R_16F,
        _ => bl::cudaDataType::CUDA_R_16BF,
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
    let h = handle(dev)?;
    let h = h.lock();
    let hb = *h as bl::cublasHandle_t;
    // Column-major problem: (m', n') = the stored C's shape; first/second operands.
    let (mm, nn, first, second) = if c.row_major {
        (n, m, b, a) // C^T = B^T A^T
    } else {
        (m, n, a, b) // C = A B
    };
    // In the swapped problem an operand is usable as-is when row-major; directly, when
    // column-major.
    let opn = |x: &Operand| {
        if x.row_major == c.row_major {
            bl::cublasOperation_t::CUBLAS_OP_N
        } else {
            bl::cublasOperation_t::CUBLAS_OP_T
        }
    };
    let t = data_type(dt);
    let compute = bl::cublasComputeType_t::CUBLAS_COMPUTE_32F;
    let algo = bl::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT;
    let (alpha, beta) = (alpha, beta);
    check(
        // SAFETY: a live handle of this device, used under its lock; the stream belongs to the
        // device (the caller's or the env stream).
        unsafe { bl::cublasSetStream_v2(hb, stream as bl::cudaStream_t) },
        "cublasSetStream",
    )?;
    let (al, be) = (
        &alpha as *const f32 as *const c_void,
        &beta as *const f32 as *const c_void,
    );
    if batch == 1 {
        check(
            // SAFETY: per the caller's contract; leading dimensions checked by `Operand::new`;
            // host-pointer scalars (the default pointer mode) read before the call returns.
            unsafe {
                bl::cublasGemmEx(
                    hb,
                    opn(&first),
                    opn(&second),
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
            // SAFETY: as above, with batch strides validated by the op (0 broadcasts an input).
            unsafe {
                bl::cublasGemmStridedBatchedEx(
                    hb,
                    opn(&first),
                    opn(&second),
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
