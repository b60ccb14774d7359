//! `ops.rms_norm(out, in, weight, eps)` (spec §2.5): per row over the last dimension,
//! `y = w * x / sqrt(mean(x^2) + eps)`, in f32, rounded once. `in`/`out` `[..., d]` with a
//! unit-stride last dimension and any strides on the others (InfiniCore's strided cases); `weight` `[d]`
//! contiguous, in the dtype of `in` or float32 (mixed precision, as InfiniCore allows).

use anyffi::{AnyView, Error, Result};

use super::{expect_args, float_arg, output_arg, target, tensor_arg, DType, Target};
use crate::kernels::cpu::{norm as k, Strided};
use crate::kernels::cuda;

const OP: &str = "ops.rms_norm";

pub(super) fn call(args: &[AnyView<'_>]) -> Result<()> {
    expect_args(OP, args, &["out", "in", "weight", "eps"])?;
    let out = output_arg(OP, args, 0, "out")?;
    let inp = tensor_arg(OP, args, 1, "in")?;
    let w = tensor_arg(OP, args, 2, "weight")?;
    let eps64 = float_arg(OP, args, 3, "eps")?;
    let eps = eps64 as f32;
    inp.expect_float()?;
    out.expect_same_dtype(&inp)?;
    if w.dtype != inp.dtype && w.dtype != DType::F32 {
        return Err(Error::type_error(format!(
            "{OP}: `weight` must have the dtype of `in` ({}){}, got {}",
            inp.dtype.name(),
            if inp.dtype == DType::F32 {
                ""
            } else {
                " or float32"
            },
            w.dtype.name()
        )));
    }
    if inp.ndim() < 1 {
        return Err(Error::value_error(format!(
            "{OP}: `in` must have at least 1 dimension, got shape {}",
            inp.shape_str()
        )));
    }
    out.expect_same_shape(&inp)?;
    let d = *inp.shape.last().unwrap();
    w.expect_shape("(d,)", &[d])?;
    w.expect_contiguous()?;
    inp.expect_unit_last_stride()?;
    out.expect_unit_last_stride()?;
    out.expect_same_or_disjoint(&inp)?;
    out.expect_no_overlap(&w)?;
    #[allow(clippy::neg_cmp_op_on_partial_ord)] // NaN must fail the check too
    if !(eps64 >= 0.0) || eps64.is_infinite() {
        return Err(Error::value_error(format!(
            "{OP}: `eps` must be a finite number >= 0, got {eps64}"
        )));
    }
    // the kernels run in float32: an eps that rounds to 0 there no longer guards all-zero rows
    // (they become NaN), and one that rounds to inf zeroes every output
    if eps.is_infinite() || (eps64 > 0.0 && eps == 0.0) {
        return Err(Error::value_error(format!(
            "{OP}: `eps` = {eps64} is out of the float32 range (it rounds to {eps})"
        )));
    }
    let tg = target(OP, &[&out, &inp, &w])?;
    if out.numel() == 0 {
        return Ok(());
    }
    let nd = inp.ndim();
    if let Target::Cuda(dev) = tg {
        return cuda::rms_norm(
            OP,
            dev,
            inp.dtype,
            w.dtype,
            [out.data, inp.data, w.data],
            &inp.shape[..nd - 1],
            &out.strides()[..nd - 1],
            &inp.strides()[..nd - 1],
            d,
            eps,
        );
    }
    let rows = Strided::new(
        &inp.shape[..nd - 1],
        [&out.strides()[..nd - 1], &inp.strides()[..nd - 1]],
    );
    let d = d as usize;
    // SAFETY: validated rows, unit inner stride, in-place only on identical layouts.
    unsafe {
        match (inp.dtype, w.dtype) {
            (DType::F32, _) => k::rms_norm_f32(out.ptr(), inp.ptr(), w.ptr(), &rows, d, eps),
            (DType::F16, DType::F16) => {
                k::rms_norm_f16(out.ptr(), inp.ptr(), w.ptr(), &rows, d, eps)
            }
            (DType::F16, _) => k::rms_norm_f16_w32(out.ptr(), inp.ptr(), w.ptr(), &rows, d, eps),
            (_, DType::BF16) => k::rms_norm_bf16(out.ptr(), inp.ptr(), w.ptr(), &rows, d, eps),
            _ => k::rms_norm_bf16_w32(out.ptr(), inp.ptr(), w.ptr(), &rows, d, eps),
        }
    }
    Ok(())
}
