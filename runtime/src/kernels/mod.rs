//! Compute kernels by device: `cpu/` (SIMD with run-time detection, rayon threads) and `cuda/`
//! (NVRTC-compiled CUDA C and cuBLAS, loaded at run time). Kernels are named `<op>_<dtype>`;
//! they trust their arguments, which `ops/` validated.

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod cpu;
pub mod cuda;
