//! `ops.rearrange(out, in)` (spec §2.9): `out[idx] = in[idx]` for every index, any strides on
//! both sides, same shape and dtype (any dtype: elements are moved by size).

use anyffi::{AnyView, Error, Result};

use super::{expect_args, output_arg, target, tensor_arg, Target};
use crate::kernels::cpu::{misc as k, Strided};
use crate::kernels::cuda;

const OP: &str = "ops.rearrange";

pub(super) fn call(args: &[AnyView<'_>]) -> Result<()> {
    expect_args(OP, args, &["out", "in"])?;
    let out = output_arg(OP, args, 0, "out")?;
    let inp = tensor_arg(OP, args, 1, "in")?;
    inp.expect_same_dtype(&out)?;
    inp.expect_same_shape(&out)?;
    if out.esize == 0 {
        return Err(Error::type_error(format!(
            "{OP}: `out` has a zero-size dtype {}",
            out.dtype.name()
        )));
    }
    let tg = target(OP, &[&out, &inp])?;
    if out.numel() == 0 {
        return Ok(());
    }
    if out.same_elements(&inp) {
        return Ok(());
    }
    out.expect_no_overlap(&inp)?;
    if let Target::Cuda(dev) = tg {
        return cuda::rearrange(
            OP,
            dev,
            out.esize,
            out.data,
            inp.data,
            out.shape,
            out.strides(),
            inp.strides(),
        );
    }
    let l = Strided::new(out.shape, [out.strides(), inp.strides()]);
    // SAFETY: validated layouts, disjoint.
    unsafe { k::rearrange(out.data, inp.data, out.esize, &l) };
    Ok(())
}
