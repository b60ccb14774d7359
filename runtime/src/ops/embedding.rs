//! `ops.embedding(out, index, weight)` (spec §2.3): `out[i, :] = weight[index[i], :]`, a row
//! copy with no dtype change; `index` 1-D int64 (or int32) `[n]`, `weight` `[V, d]`, `out`
//! `[n, d]`, contiguous. Every index is checked before anything is written.

use anyffi::{AnyView, Error, Result};

use super::{expect_args, output_arg, target, tensor_arg, DType, Target};
use crate::kernels::cpu::misc as k;
use crate::kernels::cuda;

const OP: &str = "ops.embedding";

pub(super) fn call(args: &[AnyView<'_>]) -> Result<()> {
    expect_args(OP, args, &["out", "index", "weight"])?;
    let out = output_arg(OP, args, 0, "out")?;
    let index = tensor_arg(OP, args, 1, "index")?;
    let weight = tensor_arg(OP, args, 2, "weight")?;
    weight.expect_float()?;
    out.expect_same_dtype(&weight)?;
    if !matches!(index.dtype, DType::I64 | DType::I32) {
        return Err(Error::type_error(format!(
            "{OP}: `index` must have dtype int64 (or int32), got {}",
            index.dtype.name()
        )));
    }
    index.expect_ndim(1, "[n]")?;
    weight.expect_ndim(2, "[V, d]")?;
    let (n, v, d) = (index.shape[0], weight.shape[0], weight.shape[1]);
    out.expect_shape("(n, d)", &[n, d])?;
    index.expect_contiguous()?;
    weight.expect_contiguous()?;
    out.expect_contiguous()?;
    out.expect_no_overlap(&weight)?;
    out.expect_no_overlap(&index)?;
    if let Target::Cuda(dev) = target(OP, &[&out, &index, &weight])? {
        return cuda::embedding(
            OP,
            dev,
            weight.esize,
            index.dtype == DType::I64,
            out.data,
            index.data,
            weight.data,
            n,
            v,
            d,
        );
    }
    let n = n as usize;
    // SAFETY: n contiguous indices.
    let idx: Vec<i64> = unsafe {
        match index.dtype {
            DType::I64 => std::slice::from_raw_parts(index.ptr::<i64>(), n).to_vec(),
            _ => std::slice::from_raw_parts(index.ptr::<i32>(), n)
                .iter()
                .map(|&i| i as i64)
                .collect(),
        }
    };
    if let Some((i, &bad)) = idx.iter().enumerate().find(|(_, &i)| i < 0 || i >= v) {
        return Err(Error::index_error(format!(
            "{OP}: index[{i}] = {bad} is out of range for `weight` with {v} rows"
        )));
    }
    if n == 0 || d == 0 {
        return Ok(());
    }
    let d = d as usize;
    // SAFETY: checked indices, contiguous rows, no overlap.
    unsafe {
        match weight.dtype {
            DType::F32 => k::embedding_f32(out.data, weight.data, &idx, d),
            DType::F16 => k::embedding_f16(out.data, weight.data, &idx, d),
            _ => k::embedding_bf16(out.data, weight.data, &idx, d),
        }
    }
    Ok(())
}
