//! `ops.rope(out, in, pos_ids, theta)` (spec §2.6): split-halves rotary embedding of
//! `[seqlen, nhead, d]` tensors (unit-stride last dimension, any strides on the first two, so
//! strided q/k views work), `pos_ids` int64 (or int32) `[seqlen]`, `d` even. f32 follows the
//! reference recipe (angle `pos / powf(theta, 2j/d)` rounded to f32) to meet 1e-4.

use anyffi::{AnyView, Error, Result};

use super::{expect_args, float_arg, output_arg, target, tensor_arg, DType, Target};
use crate::kernels::cpu::rope::{self as k, Positions};
use crate::kernels::cuda;

const OP: &str = "ops.rope";

pub(super) fn call(args: &[AnyView<'_>]) -> Result<()> {
    expect_args(OP, args, &["out", "in", "pos_ids", "theta"])?;
    let out = output_arg(OP, args, 0, "out")?;
    let inp = tensor_arg(OP, args, 1, "in")?;
    let pos = tensor_arg(OP, args, 2, "pos_ids")?;
    let theta = float_arg(OP, args, 3, "theta")?;
    inp.expect_float()?;
    out.expect_same_dtype(&inp)?;
    if !matches!(pos.dtype, DType::I64 | DType::I32) {
        return Err(Error::type_error(format!(
            "{OP}: `pos_ids` must have dtype int64 (or int32), got {}",
            pos.dtype.name()
        )));
    }
    inp.expect_ndim(3, "[seqlen, nhead, d]")?;
    out.expect_same_shape(&inp)?;
    let (seq, nhead, d) = (inp.shape[0], inp.shape[1], inp.shape[2]);
    pos.expect_shape("(seqlen,)", &[seq])?;
    pos.expect_contiguous()?;
    if d % 2 != 0 {
        return Err(Error::value_error(format!(
            "{OP}: `in` must have an even head size d (its last dimension), got shape {}",
            inp.shape_str()
        )));
    }
    #[allow(clippy::neg_cmp_op_on_partial_ord)] // NaN must fail the check too
    if !(theta > 0.0) || theta.is_infinite() {
        return Err(Error::value_error(format!(
            "{OP}: `theta` must be a finite number > 0, got {theta}"
        )));
    }
    // the kernels run in float32: a theta that rounds to inf there gives wrong angles, and one
    // that rounds to 0 makes every angle inf/NaN
    if (theta as f32).is_infinite() {
        return Err(Error::value_error(format!(
            "{OP}: `theta` = {theta} is out of the float32 range"
        )));
    }
    if theta as f32 == 0.0 {
        return Err(Error::value_error(format!(
            "{OP}: `theta` = {theta} rounds to 0 in float32; it must be >= {:e}",
            f32::from_bits(1)
        )));
    }
    inp.expect_unit_last_stride()?;
    out.expect_unit_last_stride()?;
    out.expect_same_or_disjoint(&inp)?;
    out.expect_no_overlap(&pos)?;
    let tg = target(OP, &[&out, &inp, &pos])?;
    if out.numel() == 0 {
        return Ok(());
    }
    if let Target::Cuda(dev) = tg {
        let st = |s: &[i64]| [s[0], s[1]];
        return cuda::rope(
            OP,
            dev,
            inp.dtype,
            pos.dtype == DType::I64,
            out.data,
            st(out.strides()),
            inp.data,
            st(inp.strides()),
            pos.data,
            seq,
            nhead,
            d / 2,
            theta as f32,
        );
    }
    let p = match pos.dtype {
        DType::I64 => Positions::I64(pos.ptr()),
        _ => Positions::I32(pos.ptr()),
    };
    let st = |s: &[i64]| [s[0] as isize, s[1] as isize];
    let (ys, xs) = (st(out.strides()), st(inp.strides()));
    let (seq, nhead, d, theta) = (seq as usize, nhead as usize, d as usize, theta as f32);
    // SAFETY: validated layouts; in place only on identical layouts.
    unsafe {
        match inp.dtype {
            DType::F32 => k::rope_f32(out.ptr(), ys, inp.ptr(), xs, p, seq, nhead, d, theta),
            DType::F16 => k::rope_f16(out.ptr(), ys, inp.ptr(), xs, p, seq, nhead, d, theta),
            _ => k::rope_bf16(out.ptr(), ys, inp.ptr(), xs, p, seq, nhead, d, theta),
        }
    }
    Ok(())
}
