//! The shared shell of the binary element-wise ops (`ops.add`, `ops.swiglu`): validation once
//! (same shape and dtype, no broadcasting, output equal to or disjoint from each input), then
//! dispatch to the op's `<op>_<dtype>` kernels, contiguous (SIMD fast path) or strided.

use anyffi::{AnyView, Result};
use half::{bf16, f16};

use super::{expect_args, output_arg, target, tensor_arg, DType, Target};
use crate::kernels::cpu::Strided;
use crate::kernels::cuda;

/// The named kernels of one binary op, contiguous and strided, per dtype.
pub(super) struct BinaryKernels {
    /// The CUDA kernel family.
    pub cuda: cuda::Binary,
    pub f32: unsafe fn(*mut f32, *const f32, *const f32, usize),
    pub f16: unsafe fn(*mut f16, *const f16, *const f16, usize),
    pub bf16: unsafe fn(*mut bf16, *const bf16, *const bf16, usize),
    pub strided_f32: unsafe fn(*mut f32, *const f32, *const f32, &Strided<3>),
    pub strided_f16: unsafe fn(*mut f16, *const f16, *const f16, &Strided<3>),
    pub strided_bf16: unsafe fn(*mut bf16, *const bf16, *const bf16, &Strided<3>),
}

/// Validates `(out, x, y)` named `names` and runs `k`.
pub(super) fn call(
    op: &'static str,
    args: &[AnyView<'_>],
    names: [&'static str; 3],
    k: &BinaryKernels,
) -> Result<()> {
    expect_args(op, args, &names)?;
    let c = output_arg(op, args, 0, names[0])?;
    let a = tensor_arg(op, args, 1, names[1])?;
    let b = tensor_arg(op, args, 2, names[2])?;
    // inputs first, then the output against them: a float16 `c` for float32 inputs blames `c`
    a.expect_float()?;
    b.expect_same_dtype(&a)?;
    c.expect_same_dtype(&a)?;
    b.expect_same_shape(&a)?;
    c.expect_same_shape(&a)?;
    c.expect_same_or_disjoint(&a)?;
    c.expect_same_or_disjoint(&b)?;
    let tg = target(op, &[&c, &a, &b])?;
    let n = c.numel();
    if n == 0 {
        return Ok(());
    }
    if let Target::Cuda(dev) = tg {
        let contiguous = c.is_contiguous() && a.is_contiguous() && b.is_contiguous();
        return cuda::binary(
            op,
            dev,
            k.cuda,
            c.dtype,
            [c.data, a.data, b.data],
            c.shape,
            [c.strides(), a.strides(), b.strides()],
            contiguous,
        );
    }
    if c.is_contiguous() && a.is_contiguous() && b.is_contiguous() {
        // SAFETY: validated: n elements each, exact alias or disjoint.
        unsafe {
            match c.dtype {
                DType::F32 => (k.f32)(c.ptr(), a.ptr(), b.ptr(), n),
                DType::F16 => (k.f16)(c.ptr(), a.ptr(), b.ptr(), n),
                _ => (k.bf16)(c.ptr(), a.ptr(), b.ptr(), n),
            }
        }
    } else {
        let l = Strided::new(c.shape, [c.strides(), a.strides(), b.strides()]);
        // SAFETY: validated layout.
        unsafe {
            match c.dtype {
                DType::F32 => (k.strided_f32)(c.ptr(), a.ptr(), b.ptr(), &l),
                DType::F16 => (k.strided_f16)(c.ptr(), a.ptr(), b.ptr(), &l),
                _ => (k.strided_bf16)(c.ptr(), a.ptr(), b.ptr(), &l),
            }
        }
    }
    Ok(())
}
