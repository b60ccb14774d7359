//! Compute kernels by device: `cpu/` (SIMD with run-time detection, rayon threads) and `cuda/`
//! (NVRTC-compiled CUDA C and cuBLAS, loaded at run time). Kernels are named `<op>_<dtype>`;
//! they trust their arguments, which `ops/` validated.

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod cpu;
pub mod cuda;

use std::cell::RefCell;
use std::thread::LocalKey;

/// Calls `f` with this thread's value of `key` (a per-thread cache or scratch buffer), or with
/// a fresh `T::default()` when that value is in use (a re-entrant call) or gone (the thread's
/// storage is being torn down and a host's thread-local destructor called in).
pub(crate) fn with_thread_local<T: Default, R>(
    key: &'static LocalKey<RefCell<T>>,
    f: impl FnOnce(&mut T) -> R,
) -> R {
    let mut f = Some(f);
    let kept = key.try_with(|cell| {
        let mut v = cell.try_borrow_mut().ok()?;
        Some((f.take().expect("runs once"))(&mut v))
    });
    match (kept, f) {
        (Ok(Some(r)), _) => r,
        (_, Some(f)) => f(&mut T::default()),
        (_, None) => unreachable!("f ran but returned nothing"),
    }
}
