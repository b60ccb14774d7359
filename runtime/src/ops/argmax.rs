//! `ops.argmax(max_idx, max_val, vals)` (spec §2.2): `vals` 1-D `[n]`, `max_idx` int64 `[1]`,
//! `max_val` `[1]` in the dtype of `vals`; the first maximal index wins ties, NaN counts as the
//! largest value (as `torch.max`).

use anyffi::{AnyView, Error, Result};
use half::{bf16, f16};

use super::{expect_args, output_arg, target, tensor_arg, DType, Target};
use crate::kernels::cpu::misc as k;
use crate::kernels::cuda;

const OP: &str = "ops.argmax";

pub(super) fn call(args: &[AnyView<'_>]) -> Result<()> {
    expect_args(OP, args, &["max_idx", "max_val", "vals"])?;
    let idx = output_arg(OP, args, 0, "max_idx")?;
    let val = output_arg(OP, args, 1, "max_val")?;
    let vals = tensor_arg(OP, args, 2, "vals")?;
    vals.expect_float()?;
    idx.expect_dtype(DType::I64)?;
    val.expect_same_dtype(&vals)?;
    vals.expect_ndim(1, "[n]")?;
    idx.expect_shape("(1,)", &[1])?;
    val.expect_shape("(1,)", &[1])?;
    vals.expect_contiguous()?;
    let n = vals.numel();
    if n == 0 {
        return Err(Error::value_error(format!(
            "{OP}: `vals` must not be empty"
        )));
    }
    idx.expect_no_overlap(&vals)?;
    val.expect_no_overlap(&vals)?;
    idx.expect_no_overlap(&val)?;
    if let Target::Cuda(dev) = target(OP, &[&vals, &idx, &val])? {
        return cuda::argmax(OP, dev, vals.dtype, idx.data, val.data, vals.data, n as i64);
    }
    // SAFETY: n contiguous values; 1-element outputs that overlap nothing.
    unsafe {
        let i = match vals.dtype {
            DType::F32 => {
                let (i, v) = k::argmax_f32(vals.ptr(), n);
                *val.ptr::<f32>() = v;
                i
            }
            DType::F16 => {
                let (i, v) = k::argmax_f16(vals.ptr(), n);
                *val.ptr::<f16>() = v;
                i
            }
            _ => {
                let (i, v) = k::argmax_bf16(vals.ptr(), n);
                *val.ptr::<bf16>() = v;
                i
            }
        };
        *idx.ptr::<i64>() = i as i64;
    }
    Ok(())
}
