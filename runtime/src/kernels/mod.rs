//! Compute kernels by device: `cpu/` (SIMD with run-time detection, rayon threads). Kernels
//! are named `<op>_<dtype>`; they trust their arguments, which `ops/` validated.

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod cpu;
