//! anyffi-runtime: the device runtime and operators behind the TVM FFI ABI, and the crate that
//! builds `libtvm_ffi.so` (the exported C symbols come from `anyffi` and `anyffi-registry`).
//!
//! Everything this crate offers is a registered packed function (`runtime.*`), registered by
//! [`register_all`] when the library is loaded (an ELF constructor), so the functions exist
//! before any C call returns.
#![deny(unsafe_op_in_unsafe_fn)]
// `x % n != 0`, not `is_multiple_of` (Rust 1.87): the workspace's rust-version is 1.80.
#![allow(clippy::manual_is_multiple_of)]
// ABI constants keep their upstream C names (kDLCPU, ...) so matches read like the header.
#![allow(non_upper_case_globals)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub use anyffi;
pub use anyffi_registry;

// Re-exported so that the cdylib keeps every C symbol of the lower crates.
pub use anyffi::capi::*;
pub use anyffi_registry::capi::*;

mod args;
pub mod device;
pub mod kernels;
pub mod ops;
pub mod tensor;

pub use args::dims_arg;

use std::sync::Once;

/// Registers every `runtime.*` global function and installs the runtime's DLPack tensor
/// allocator as the process-wide default (unless a host set one). Idempotent; called at library
/// load, and explicitly by Rust tests (whose binaries may not run the constructor).
pub fn register_all() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let outcome = std::panic::catch_unwind(|| -> anyffi::Result<()> {
            device::context::register()?;
            tensor::register()?;
            ops::register_ops()?;
            tensor::alloc::install_default_allocator();
            Ok(())
        });
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!(
                "anyffi: registering the runtime functions failed: {}",
                e.message()
            ),
            Err(_) => eprintln!("anyffi: registering the runtime functions panicked"),
        }
    });
}

#[cfg_attr(not(unix), allow(dead_code))]
extern "C" fn init_at_load() {
    register_all();
}

/// Runs [`register_all`] when the shared library is loaded (before `dlopen` returns).
#[cfg(all(unix, not(target_vendor = "apple")))]
#[used]
#[link_section = ".init_array"]
static INIT_AT_LOAD: extern "C" fn() = init_at_load;

/// Runs [`register_all`] when the shared library is loaded (Mach-O initialiser section).
#[cfg(target_vendor = "apple")]
#[used]
#[link_section = "__DATA,__mod_init_func"]
static INIT_AT_LOAD: extern "C" fn() = init_at_load;
