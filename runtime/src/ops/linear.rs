//! `ops.linear(out, in, weight, bias)` (spec §2.4): `Y = X W^T + b` with W stored `[N, K]`
//! (out_features, in_features), X `[..., K]`, Y `[..., N]`, b `[N]` or None; unit-stride last
//! dimensions, row strides free. One input row (decoding) runs the streaming GEMV kernel; more
//! rows run the `gemm` crate (half types through f32 copies). Plans are cached per layout
//! (`plan_cache`).

use std::cell::RefCell;

use anyffi::{AnyView, Error, Result};
use half::{bf16, f16};

use super::plan_cache::{with_scratch, workspace_len, Key, Lru};
use super::{
    expect_args, optional_tensor_arg, output_arg, target, tensor_arg, DType, Target, TensorArg,
};
use crate::kernels::cpu::gemm::{gemm_f32, narrow_2d, widen_2d, Mat};
use crate::kernels::cpu::simd::Elem;
use crate::kernels::cpu::{gemv, sgemm_dot, sgemm_nt};
use crate::kernels::cuda;

const OP: &str = "ops.linear";

/// Up to this many input rows run as one GEMV per row (W streamed once per row) instead of
/// a GEMM; see the performance log for how it was chosen.
const GEMV_MAX_ROWS: usize = 1;

/// From this many rows on, AVX-512 machines run the packed 12x32 kernel; below, the unpacked
/// dot-product kernel (packing W would cost as much as the product).
const PACKED_MIN_ROWS: usize = 48;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Gemv,
    Gemm,
}

#[derive(Clone, Debug)]
struct Plan {
    kind: Kind,
    dtype: DType,
    m: usize,
    n: usize,
    k: usize,
    /// Row strides (elements) of in, out, weight.
    x_rs: isize,
    y_rs: isize,
    w_rs: isize,
    /// f32 scratch elements needed.
    ws: usize,
    /// A GEMM with few rows on AVX2: the unpacked dot-product tiles of `sgemm_dot`, reading
    /// W in its own dtype (for half types, instead of a widened copy).
    direct: bool,
    /// The CUDA device, when the tensors live there (cuBLAS).
    cuda: Option<i32>,
}

thread_local! {
    static CACHE: RefCell<Lru<Plan>> = RefCell::new(Lru::default());
}

pub(super) fn call(args: &[AnyView<'_>]) -> Result<()> {
    expect_args(OP, args, &["out", "in", "weight", "bias"])?;
    let out = output_arg(OP, args, 0, "out")?;
    let inp = tensor_arg(OP, args, 1, "in")?;
    let w = tensor_arg(OP, args, 2, "weight")?;
    let bias = optional_tensor_arg(OP, args, 3, "bias")?;
    let mut key = Key::new();
    key.tensor(&out);
    key.tensor(&inp);
    key.tensor(&w);
    match &bias {
        Some(b) => key.tensor(b),
        None => key.none(),
    }
    // a throwaway cache while the thread's storage is torn down (a destructor calling in)
    let plan = crate::kernels::with_thread_local(&CACHE, |c| {
        c.get_or_plan(&key, || plan(&out, &inp, &w, bias.as_ref()))
    })?;
    out.expect_no_overlap(&inp)?;
    out.expect_no_overlap(&w)?;
    if let Some(b) = &bias {
        out.expect_no_overlap(b)?;
    }
    if let Some(dev) = plan.cuda {
        return run_cuda(dev, &plan, &out, &inp, &w, bias.as_ref());
    }
    run(&plan, &out, &inp, &w, bias.as_ref())
}

/// cuBLAS `Y = X W^T (+ b)`: the bias is first copied into every row of Y and the GEMM runs
/// with beta = 1, so it is added in f32 and rounded once, as on the CPU.
fn run_cuda(
    dev: i32,
    p: &Plan,
    out: &TensorArg<'_>,
    inp: &TensorArg<'_>,
    w: &TensorArg<'_>,
    bias: Option<&TensorArg<'_>>,
) -> Result<()> {
    if p.m == 0 || p.n == 0 {
        return Ok(());
    }
    let (m, n, k) = (p.m as i64, p.n as i64, p.k as i64);
    let void = |t: &TensorArg<'_>| t.data as *const std::ffi::c_void;
    let c = cuda::Operand::new(OP, "out", void(out), m, n, p.y_rs as i64, 1, 0)?;
    let a = cuda::Operand::new(OP, "in", void(inp), m, k, p.x_rs as i64, 1, 0)?;
    // W^T as a [K, N] operand: element (kk, j) = W[j, kk].
    let b = cuda::Operand::new(OP, "weight", void(w), k, n, 1, p.w_rs as i64, 0)?;
    let ctx = cuda::ctx(OP, dev)?;
    let beta = match bias {
        Some(bt) => {
            cuda::bias_rows(OP, ctx, out.esize, out.data, p.y_rs as i64, bt.data, m, n)?;
            1.0
        }
        None => 0.0,
    };
    // SAFETY: validated shapes and strides on this device; out overlaps no input.
    unsafe { cuda::gemm(OP, dev, ctx.stream, p.dtype, 1, m, n, k, c, a, b, 1.0, beta) }
}

/// Validates the layout once and picks the kernel.
fn plan(
    out: &TensorArg<'_>,
    inp: &TensorArg<'_>,
    w: &TensorArg<'_>,
    bias: Option<&TensorArg<'_>>,
) -> Result<Plan> {
    inp.expect_float()?;
    out.expect_same_dtype(inp)?;
    w.expect_same_dtype(inp)?;
    if inp.ndim() < 2 {
        return Err(Error::value_error(format!(
            "{OP}: `in` must be at least 2-D [M, K], got shape {}",
            inp.shape_str()
        )));
    }
    if out.ndim() != inp.ndim() {
        return Err(Error::value_error(format!(
            "{OP}: `out` must have the rank of `in` ({}), got shape {}",
            inp.ndim(),
            out.shape_str()
        )));
    }
    w.expect_ndim(2, "[N, K]")?;
    let nd = inp.ndim();
    let k = inp.shape[nd - 1];
    let n = out.shape[nd - 1];
    if out.shape[..nd - 1] != inp.shape[..nd - 1] {
        let mut want = inp.shape[..nd - 1].to_vec();
        want.push(n);
        out.expect_shape("(M, N)", &want)?;
    }
    if w.shape[1] == k && w.shape[0] != n {
        // `weight` agrees with `in`: it is `out` whose N is wrong
        let mut want = inp.shape[..nd - 1].to_vec();
        want.push(w.shape[0]);
        out.expect_shape("(M, N)", &want)?;
    }
    w.expect_shape("(N, K)", &[n, k])?;
    if let Some(b) = bias {
        b.expect_same_dtype(inp)?;
        b.expect_shape("(N,)", &[n])?;
        b.expect_contiguous()?;
    }
    inp.expect_unit_last_stride()?;
    out.expect_unit_last_stride()?;
    w.expect_unit_last_stride()?;
    let (x_rs, y_rs) = (inp.row_stride()?, out.row_stride()?);
    let w_rs = w.strides()[0] as isize;
    let mut ts = vec![out, inp, w];
    ts.extend(bias);
    let cuda = match target(OP, &ts)? {
        Target::Cpu => None,
        Target::Cuda(dev) => Some(dev),
    };
    let (n, k) = (n as usize, k as usize);
    let m: usize = inp.shape[..nd - 1].iter().product::<i64>() as usize;
    let kind = if m <= GEMV_MAX_ROWS {
        Kind::Gemv
    } else {
        Kind::Gemm
    };
    let direct = cuda.is_none()
        && kind == Kind::Gemm
        && !sgemm_nt::available()
        && sgemm_dot::available()
        && m < sgemm_dot::MAX_ROWS;
    let ws = match (kind, inp.dtype) {
        _ if cuda.is_some() => 0,
        (Kind::Gemv, DType::F32) => 0,
        (Kind::Gemv, _) => k,
        (Kind::Gemm, DType::F32) => 0,
        // checked: a zero row stride on `in` makes m * k huge while `in` is one row
        (Kind::Gemm, _) if direct => workspace_len(OP, &[(m, k), (m, n)])?,
        (Kind::Gemm, _) => workspace_len(OP, &[(m, k), (n, k), (m, n)])?,
    };
    Ok(Plan {
        kind,
        dtype: inp.dtype,
        m,
        n,
        k,
        x_rs,
        y_rs,
        w_rs,
        ws,
        direct,
        cuda,
    })
}

fn run(
    p: &Plan,
    out: &TensorArg<'_>,
    inp: &TensorArg<'_>,
    w: &TensorArg<'_>,
    b: Option<&TensorArg<'_>>,
) -> Result<()> {
    if p.m == 0 || p.n == 0 {
        return Ok(());
    }
    let bias = b.map_or(std::ptr::null_mut(), |b| b.data);
    // SAFETY: the plan validated every layout for this key; overlap was checked per call.
    unsafe {
        match p.dtype {
            DType::F32 => run_t::<f32>(p, out.ptr(), inp.ptr(), w.ptr(), bias as *const f32),
            DType::F16 => run_t::<f16>(p, out.ptr(), inp.ptr(), w.ptr(), bias as *const f16),
            _ => run_t::<bf16>(p, out.ptr(), inp.ptr(), w.ptr(), bias as *const bf16),
        }
    }
}

/// # Safety
/// Pointers valid for the plan's layout.
unsafe fn run_t<T: Elem>(
    p: &Plan,
    y: *mut T,
    x: *const T,
    w: *const T,
    bias: *const T,
) -> Result<()> {
    let is_f32 = p.dtype == DType::F32;
    with_scratch(OP, p.ws, |ws| {
        // SAFETY: layouts per the plan; scratch sized by it.
        unsafe {
            match p.kind {
                Kind::Gemv
                    if p.dtype == DType::BF16
                        && gemv::bf16_dot_available()
                        && (0..p.m).all(|r| {
                            gemv::bf16_dot_exact(x.offset(r as isize * p.x_rs) as *const u16, p.k)
                        }) =>
                {
                    for r in 0..p.m {
                        let (yr, xr) =
                            (y.offset(r as isize * p.y_rs), x.offset(r as isize * p.x_rs));
                        gemv::gemv_bf16_dot(
                            yr as *mut bf16,
                            xr as *const bf16,
                            w as *const bf16,
                            p.w_rs,
                            bias as *const bf16,
                            p.n,
                            p.k,
                        );
                    }
                }
                Kind::Gemv => {
                    for r in 0..p.m {
                        let xr = x.offset(r as isize * p.x_rs);
                        let xf: &[f32] = if is_f32 {
                            std::slice::from_raw_parts(xr as *const f32, p.k)
                        } else {
                            gemv::widen::<T>(ws.as_mut_ptr(), xr, p.k);
                            &ws[..p.k]
                        };
                        gemv::gemv::<T>(
                            y.offset(r as isize * p.y_rs),
                            xf,
                            w,
                            p.w_rs,
                            bias,
                            p.n,
                            p.k,
                        );
                    }
                }
                Kind::Gemm if is_f32 => {
                    let (y, x, w, bias) = (
                        y as *mut f32,
                        x as *mut f32,
                        w as *mut f32,
                        bias as *const f32,
                    );
                    let beta = if bias.is_null() {
                        0.0
                    } else {
                        for r in 0..p.m {
                            std::ptr::copy_nonoverlapping(bias, y.offset(r as isize * p.y_rs), p.n);
                        }
                        1.0
                    };
                    if sgemm_nt::available() && p.m >= PACKED_MIN_ROWS {
                        let (a, b, c) = (
                            (x as *const f32, p.x_rs, 1),
                            (w as *const f32, 1, p.w_rs),
                            (y, p.y_rs, 1),
                        );
                        sgemm_nt::sgemm_packed(p.m, p.n, p.k, a, b, c, 1.0, beta);
                        return;
                    }
                    if sgemm_nt::available() {
                        sgemm_nt::sgemm_nt(
                            p.m, p.n, p.k, x, p.x_rs, w, p.w_rs, y, p.y_rs, 1.0, beta,
                        );
                        return;
                    }
                    if p.direct {
                        sgemm_dot::gemm_nt_dot::<f32>(
                            p.m, p.n, p.k, x, p.x_rs, w, p.w_rs, y, p.y_rs, beta,
                        );
                        return;
                    }
                    gemm_f32(
                        p.m,
                        p.n,
                        p.k,
                        Mat {
                            ptr: y,
                            rs: p.y_rs,
                            cs: 1,
                        },
                        Mat {
                            ptr: x,
                            rs: p.x_rs,
                            cs: 1,
                        },
                        Mat {
                            ptr: w,
                            rs: 1,
                            cs: p.w_rs,
                        },
                        1.0,
                        beta,
                    );
                }
                Kind::Gemm => {
                    let direct = p.direct;
                    let (wa, rest) = ws.split_at_mut(p.m * p.k);
                    let (wb, wc) = rest.split_at_mut(if direct { 0 } else { p.n * p.k });
                    widen_2d::<T>(
                        wa.as_mut_ptr(),
                        Mat {
                            ptr: x as *mut T,
                            rs: p.x_rs,
                            cs: 1,
                        },
                        p.m,
                        p.k,
                    );
                    // Few rows on AVX2: W is read in its own dtype, never widened in memory.
                    if !direct {
                        widen_2d::<T>(
                            wb.as_mut_ptr(),
                            Mat {
                                ptr: w as *mut T,
                                rs: p.w_rs,
                                cs: 1,
                            },
                            p.n,
                            p.k,
                        );
                    }
                    let beta = if bias.is_null() {
                        0.0
                    } else {
                        for r in 0..p.m {
                            for j in 0..p.n {
                                wc[r * p.n + j] = (*bias.add(j)).to_f32();
                            }
                        }
                        1.0
                    };
                    // `direct` first: the plan left no room for a widened W then.
                    if direct {
                        let ld = p.k as isize;
                        let (a, c) = (wa.as_ptr(), wc.as_mut_ptr());
                        sgemm_dot::gemm_nt_dot::<T>(
                            p.m,
                            p.n,
                            p.k,
                            a,
                            ld,
                            w,
                            p.w_rs,
                            c,
                            p.n as isize,
                            beta,
                        );
                    } else if sgemm_nt::available() && p.m >= PACKED_MIN_ROWS {
                        let ld = p.k as isize;
                        let (a, b, c) = (
                            (wa.as_ptr(), ld, 1),
                            (wb.as_ptr(), 1, ld),
                            (wc.as_mut_ptr(), p.n as isize, 1),
                        );
                        sgemm_nt::sgemm_packed(p.m, p.n, p.k, a, b, c, 1.0, beta);
                    } else if sgemm_nt::available() {
                        let ld = p.k as isize;
                        let (a, b, c) = (wa.as_ptr(), wb.as_ptr(), wc.as_mut_ptr());
                        sgemm_nt::sgemm_nt(p.m, p.n, p.k, a, ld, b, ld, c, p.n as isize, 1.0, beta);
                    } else {
                        gemm_f32(
                            p.m,
                            p.n,
                            p.k,
                            Mat {
                                ptr: wc.as_mut_ptr(),
                                rs: p.n as isize,
                                cs: 1,
                            },
                            Mat {
                                ptr: wa.as_mut_ptr(),
                                rs: p.k as isize,
                                cs: 1,
                            },
                            Mat {
                                ptr: wb.as_mut_ptr(),
                                rs: 1,
                                cs: p.k as isize,
                            },
                            1.0,
                            beta,
                        );
                    }
                    narrow_2d::<T>(
                        Mat {
                            ptr: y,
                            rs: p.y_rs,
                            cs: 1,
                        },
                        wc.as_ptr(),
                        p.m,
                        p.n,
                    );
                }
            }
        }
    })
}
