//! anyffi-runtime: the device runtime and operators behind the TVM FFI ABI, and the crate that
//! builds `libtvm_ffi.so` (the exported C symbols come from `anyffi` and `anyffi-registry`).
#![deny(unsafe_op_in_unsafe_fn)]

pub use anyffi;
pub use anyffi_registry;

// Re-exported so that the cdylib keeps every C symbol of the lower crates.
pub use anyffi::capi::*;
pub use anyffi_registry::capi::*;

pub mod kernels;
pub mod ops;
