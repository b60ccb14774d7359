//! `ops.add(c, a, b)`: `c = a + b` element-wise (spec §2.1); same shape and dtype, no
//! broadcasting; any strides (contiguous tensors take the SIMD fast path); `c` may be `a` or `b`.

use anyffi::{AnyView, Result};

use super::binary::{self, BinaryKernels};
use crate::kernels::cpu::elementwise as k;

const KERNELS: BinaryKernels = BinaryKernels {
    cuda: crate::kernels::cuda::Binary::Add,
    f32: k::add_f32,
    f16: k::add_f16,
    bf16: k::add_bf16,
    strided_f32: k::add_strided_f32,
    strided_f16: k::add_strided_f16,
    strided_bf16: k::add_strided_bf16,
};

pub(super) fn call(args: &[AnyView<'_>]) -> Result<()> {
    binary::call("ops.add", args, ["c", "a", "b"], &KERNELS)
}
