//! Tensors on devices (spec runtime-and-ops §1.3): allocation (`empty`, the DLPack allocator),
//! views without copies (`view`, `permute`, `slice`) and copies (`copy_`, `contiguous`,
//! `to_device`), all producing `ffi.Tensor` objects that keep their storage alive.

pub mod alloc;
pub mod copy;
pub mod view;

pub use alloc::{empty, nbytes_of, runtime_tensor_allocator};
pub use copy::{contiguous, copy_dl, to_device};
pub use view::{permute, slice, view, view_strides};

/// Registers the tensor functions.
pub(crate) fn register() -> anyffi::Result<()> {
    alloc::register()?;
    view::register()?;
    copy::register()
}
