//! `ops.swiglu(out, gate, up)`: `out = up * gate / (1 + exp(-gate))` element-wise (spec §2.8);
//! same shape and dtype; any strides (contiguous tensors take the SIMD fast path); `out` may be
//! `gate` or `up`.

use anyffi::{AnyView, Result};

use super::binary::{self, BinaryKernels};
use crate::kernels::cpu::elementwise as k;

const KERNELS: BinaryKernels = BinaryKernels {
    cuda: crate::kernels::cuda::Binary::Swiglu,
    f32: k::swiglu_f32,
    f16: k::swiglu_f16,
    bf16: k::swiglu_bf16,
    strided_f32: k::swiglu_strided_f32,
    strided_f16: k::swiglu_strided_f16,
    strided_bf16: k::swiglu_strided_bf16,
};

pub(super) fn call(args: &[AnyView<'_>]) -> Result<()> {
    binary::call("ops.swiglu", args, ["out", "gate", "up"], &KERNELS)
}
