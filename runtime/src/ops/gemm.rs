//! `ops.gemm(c, a, b, alpha, beta)`: `C = alpha * A @ B + beta * C` as InfiniCore's gemm, 2-D
//! (`[M, K] @ [K, N]`) or batched 3-D (`[B, M, K] @ [B, K, N]`; a 2-D or batch-1 operand is
//! broadcast over the batch), any strides. `beta == 0` never reads C. Plans are cached per
//! layout and scalars (`plan_cache`).

use std::cell::RefCell;

use anyffi::{AnyView, Error, Result};
use half::{bf16, f16};

use super::plan_cache::{with_scratch, workspace_len, Key, Lru};
use super::{expect_args, float_arg, output_arg, target, tensor_arg, DType, Target, TensorArg};
use crate::kernels::cpu::gemm::{gemm_bf16, gemm_f16, gemm_f32, Mat};
use crate::kernels::cuda;

const OP: &str = "ops.gemm";

#[derive(Clone, Debug)]
struct Plan {
    dtype: DType,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    /// (batch stride, row stride, column stride) in elements for c, a, b.
    c: [isize; 3],
    a: [isize; 3],
    b: [isize; 3],
    alpha: f32,
    beta: f32,
    ws: usize,
    /// The CUDA device, when the tensors live there (cuBLAS).
    cuda: Option<i32>,
}

thread_local! {
    static CACHE: RefCell<Lru<Plan>> = RefCell::new(Lru::default());
}

pub(super) fn call(args: &[AnyView<'_>]) -> Result<()> {
    expect_args(OP, args, &["c", "a", "b", "alpha", "beta"])?;
    let c = output_arg(OP, args, 0, "c")?;
    let a = tensor_arg(OP, args, 1, "a")?;
    let b = tensor_arg(OP, args, 2, "b")?;
    let alpha = float_arg(OP, args, 3, "alpha")?;
    let beta = float_arg(OP, args, 4, "beta")?;
    for (name, x) in [("alpha", alpha), ("beta", beta)] {
        // the kernels scale in float32: a finite scalar past its range would turn into inf
        // (or 0) there; NaN and inf go through as BLAS takes them
        let r = x as f32;
        if x.is_finite() && (r.is_infinite() || (x != 0.0 && r == 0.0)) {
            return Err(Error::value_error(format!(
                "{OP}: `{name}` = {x} is out of the float32 range (it rounds to {r})"
            )));
        }
    }
    let mut key = Key::new();
    key.tensor(&c);
    key.tensor(&a);
    key.tensor(&b);
    key.scalar(alpha);
    key.scalar(beta);
    // a throwaway cache while the thread's storage is torn down (a destructor calling in)
    let plan = crate::kernels::with_thread_local(&CACHE, |cache| {
        cache.get_or_plan(&key, || plan(&c, &a, &b, alpha as f32, beta as f32))
    })?;
    c.expect_no_overlap(&a)?;
    c.expect_no_overlap(&b)?;
    if let Some(dev) = plan.cuda {
        return run_cuda(dev, &plan, &c, &a, &b);
    }
    run(&plan, &c, &a, &b)
}

/// cuBLAS: every operand needs a unit stride in one of its matrix dimensions, rows (or
/// columns) that do not overlap, and C distinct matrices per batch.
fn run_cuda(
    dev: i32,
    p: &Plan,
    c: &TensorArg<'_>,
    a: &TensorArg<'_>,
    b: &TensorArg<'_>,
) -> Result<()> {
    if p.m == 0 || p.n == 0 || p.batch == 0 {
        return Ok(());
    }
    if p.batch > 1 && p.c[0] == 0 {
        return Err(Error::value_error(format!(
            "{OP}: on CUDA `c` must not repeat one matrix over the batch (batch stride 0)"
        )));
    }
    let (batch, m, n, k) = (p.batch as i64, p.m as i64, p.n as i64, p.k as i64);
    let operand = |t: &TensorArg<'_>, s: [isize; 3], r: i64, cc: i64| {
        cuda::Operand::new(
            OP,
            t.name,
            t.data as *const std::ffi::c_void,
            r,
            cc,
            s[1] as i64,
            s[2] as i64,
            s[0] as i64,
        )
    };
    let (co, ao, bo) = (
        operand(c, p.c, m, n)?,
        operand(a, p.a, m, k)?,
        operand(b, p.b, k, n)?,
    );
    let ctx = cuda::ctx(OP, dev)?;
    // SAFETY: validated shapes and strides on this device; c overlaps neither input.
    unsafe {
        cuda::gemm(
            OP, dev, ctx.stream, p.dtype, batch, m, n, k, co, ao, bo, p.alpha, p.beta,
        )
    }
}

/// (batch stride, row stride, col stride) of a 2-D or 3-D operand; batch stride 0 broadcasts.
fn strides3(t: &TensorArg<'_>) -> [isize; 3] {
    let s = t.strides();
    match t.ndim() {
        2 => [0, s[0] as isize, s[1] as isize],
        _ => [
            if t.shape[0] == 1 { 0 } else { s[0] as isize },
            s[1] as isize,
            s[2] as isize,
        ],
    }
}

fn plan(
    c: &TensorArg<'_>,
    a: &TensorArg<'_>,
    b: &TensorArg<'_>,
    alpha: f32,
    beta: f32,
) -> Result<Plan> {
    a.expect_float()?;
    b.expect_same_dtype(a)?;
    c.expect_same_dtype(a)?;
    if !matches!(c.ndim(), 2 | 3) {
        return Err(Error::value_error(format!(
            "{OP}: `c` must be 2-D [M, N] or 3-D [B, M, N], got shape {}",
            c.shape_str()
        )));
    }
    for t in [a, b] {
        if t.ndim() != 2 && t.ndim() != c.ndim() {
            return Err(Error::value_error(format!(
                "{OP}: `{}` must be 2-D or have the rank of `c` ({}), got shape {}",
                t.name,
                c.ndim(),
                t.shape_str()
            )));
        }
    }
    let nd = c.ndim();
    let (batch, m, n) = if nd == 3 {
        (c.shape[0], c.shape[1], c.shape[2])
    } else {
        (1, c.shape[0], c.shape[1])
    };
    let k = a.shape[a.ndim() - 1];
    let with_batch = |t: &TensorArg<'_>, r: i64, cc: i64| -> Vec<i64> {
        if t.ndim() == 3 {
            let tb = if t.shape[0] == 1 { 1 } else { batch };
            vec![tb, r, cc]
        } else {
            vec![r, cc]
        }
    };
    let what =
        |t: &TensorArg<'_>, s: &'static str, s3: &'static str| if t.ndim() == 3 { s3 } else { s };
    let (ar, br) = (a.ndim() - 2, b.ndim() - 2);
    // the batch `a` and `b` agree on (1 when neither has one above 1), if they agree
    let batch_of = |t: &TensorArg<'_>| if t.ndim() == 3 { t.shape[0] } else { 1 };
    let (ab, bb) = (batch_of(a), batch_of(b));
    let ab_batch = (ab == bb || ab == 1 || bb == 1).then(|| ab.max(bb));
    if let Some(ab_batch) = ab_batch {
        let c_batch_fits = ab_batch == 1 || ab_batch == batch;
        if a.shape[ar + 1] == b.shape[br]
            && (a.shape[ar] != m || b.shape[br + 1] != n || !c_batch_fits)
        {
            // `a` and `b` agree with each other: it is `c` whose shape is wrong
            let mut want = if nd == 3 {
                vec![if c_batch_fits { batch } else { ab_batch }]
            } else {
                vec![]
            };
            want.extend([a.shape[ar], b.shape[br + 1]]);
            c.expect_shape(if nd == 3 { "(B, M, N)" } else { "(M, N)" }, &want)?;
        }
    }
    a.expect_shape(what(a, "(M, K)", "(B, M, K)"), &with_batch(a, m, k))?;
    b.expect_shape(what(b, "(K, N)", "(B, K, N)"), &with_batch(b, k, n))?;
    let cuda = match target(OP, &[c, a, b])? {
        Target::Cpu => None,
        Target::Cuda(dev) => Some(dev),
    };
    let (batch, m, n, k) = (batch as usize, m as usize, n as usize, k as usize);
    let ws = if c.dtype == DType::F32 || cuda.is_some() {
        0
    } else {
        // as gemm_half_workspace(m, n, k), checked: zero-stride (broadcast) operands can make
        // m * k or k * n huge while the tensors themselves are tiny
        workspace_len(OP, &[(m, k), (k, n), (m, n)])?
    };
    Ok(Plan {
        dtype: c.dtype,
        batch,
        m,
        n,
        k,
        c: strides3(c),
        a: strides3(a),
        b: strides3(b),
        alpha,
        beta,
        ws,
        cuda,
    })
}

fn run(p: &Plan, c: &TensorArg<'_>, a: &TensorArg<'_>, b: &TensorArg<'_>) -> Result<()> {
    if p.m == 0 || p.n == 0 || p.batch == 0 {
        return Ok(());
    }
    with_scratch(OP, p.ws, |ws| {
        for bi in 0..p.batch as isize {
            let mat = |t: &TensorArg<'_>, s: [isize; 3]| {
                // SAFETY: batch index inside the validated shape.
                let ptr = unsafe { t.data.offset(bi * s[0] * t.esize as isize) };
                (ptr, s[1], s[2])
            };
            let (cp, crs, ccs) = mat(c, p.c);
            let (ap, ars, acs) = mat(a, p.a);
            let (bp, brs, bcs) = mat(b, p.b);
            macro_rules! m {
                ($t:ty, $p:expr, $rs:expr, $cs:expr) => {
                    Mat::<$t> {
                        ptr: $p as *mut $t,
                        rs: $rs,
                        cs: $cs,
                    }
                };
            }
            // SAFETY: validated layouts; c overlaps neither input.
            unsafe {
                match p.dtype {
                    DType::F32 => gemm_f32(
                        p.m,
                        p.n,
                        p.k,
                        m!(f32, cp, crs, ccs),
                        m!(f32, ap, ars, acs),
                        m!(f32, bp, brs, bcs),
                        p.alpha,
                        p.beta,
                    ),
                    DType::F16 => gemm_f16(
                        p.m,
                        p.n,
                        p.k,
                        m!(f16, cp, crs, ccs),
                        m!(f16, ap, ars, acs),
                        m!(f16, bp, brs, bcs),
                        p.alpha,
                        p.beta,
                        ws,
                    ),
                    _ => gemm_bf16(
                        p.m,
                        p.n,
                        p.k,
                        m!(bf16, cp, crs, ccs),
                        m!(bf16, ap, ars, acs),
                        m!(bf16, bp, brs, bcs),
                        p.alpha,
                        p.beta,
                        ws,
                    ),
                }
            }
        }
    })
}
