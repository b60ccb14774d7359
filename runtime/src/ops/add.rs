//! `ops.add(c, a, b)`: `c = a + b` element-wise (spec §2.1); same shape and dtype, no
//! broadcasting; any strides (contiguous tensors take the SIMD fast path); `c` may be `a` or `b`.

use anyffi::{AnyView, Result};
use half::{bf16, f16};

use super::{expect_args, target, tensor_arg, DType, Target};
use crate::kernels::cpu::{elementwise as k, Strided};

const OP: &str = "ops.add";

pub(super) fn call(args: &[AnyView<'_>]) -> Result<()> {
    expect_args(OP, args, &["c", "a", "b"])?;
    let c = tensor_arg(OP, args, 0, "c")?;
    let a = tensor_arg(OP, args, 1, "a")?;
    let b = tensor_arg(OP, args, 2, "b")?;
    c.expect_float()?;
    a.expect_same_dtype(&c)?;
    b.expect_same_dtype(&c)?;
    a.expect_same_shape(&c)?;
    b.expect_same_shape(&c)?;
    c.expect_same_or_disjoint(&a)?;
    c.expect_same_or_disjoint(&b)?;
    let Target::Cpu = target(OP, &[&c, &a, &b])?;
    let n = c.numel();
    if n == 0 {
        return Ok(());
    }
    if c.is_contiguous() && a.is_contiguous() && b.is_contiguous() {
        // SAFETY: validated: n elements each, exact alias or disjoint.
        unsafe {
            match c.dtype {
                DType::F32 => k::add_f32(c.ptr(), a.ptr(), b.ptr(), n),
                DType::F16 => k::add_f16(c.ptr(), a.ptr(), b.ptr(), n),
                _ => k::add_bf16(c.ptr(), a.ptr(), b.ptr(), n),
            }
        }
    } else {
        let l = Strided::new(c.shape, [c.strides(), a.strides(), b.strides()]);
        // SAFETY: validated layout.
        unsafe {
            match c.dtype {
                DType::F32 => k::add_strided_f32(c.ptr(), a.ptr(), b.ptr(), &l),
                DType::F16 => k::add_strided_f16(c.ptr::<f16>(), a.ptr(), b.ptr(), &l),
                _ => k::add_strided_bf16(c.ptr::<bf16>(), a.ptr(), b.ptr(), &l),
            }
        }
    }
    Ok(())
}
