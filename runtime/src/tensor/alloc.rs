//! Tensor storage: `empty` (a new contiguous `ffi.Tensor` on a device, memory uninitialised),
//! the storage owner that frees through the device runtime, and the DLPack managed-tensor
//! allocator installed as the process-wide default behind `TVMFFIEnvTensorAlloc`.

use std::ffi::{c_char, c_int, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use anyffi::abi::{DLDataType, DLDevice, DLManagedTensorVersioned, DLTensor};
use anyffi::device::device_to_string;
use anyffi::{Any, Error, Result, Tensor};

use crate::args::{def, Args};
use crate::device::{resolve, DeviceRuntime};

/// Device memory owned by a tensor; freed through its runtime when the last view dies.
struct Storage {
    ptr: *mut c_void,
    device: DLDevice,
    runtime: &'static dyn DeviceRuntime,
}

// SAFETY: the storage is a plain address range handed out by a thread-safe runtime; nothing
// here is tied to the allocating thread.
unsafe impl Send for Storage {}
// SAFETY: as above; Storage has no interior mutability.
unsafe impl Sync for Storage {}

impl Drop for Storage {
    fn drop(&mut self) {
        if let Err(e) = self
            .runtime
            .free_tensor_storage(self.device.device_id, self.ptr)
        {
            // Drop cannot fail; this only happens if the driver went away first (process exit).
            eprintln!(
                "anyffi: freeing tensor storage on {} failed: {}",
                device_to_string(self.device),
                e.message()
            );
        }
    }
}

/// The number of bytes of a tensor of `shape` and `dtype`: ValueError for negative dimensions,
/// invalid dtypes, or sizes no allocation can have.
pub fn nbytes_of(shape: &[i64], dtype: DLDataType) -> Result<usize> {
    if dtype.bits == 0 || dtype.lanes == 0 {
        return Err(Error::value_error(format!(
            "invalid dtype (code {}, bits {}, lanes {}): bits and lanes must be positive",
            dtype.code, dtype.bits, dtype.lanes
        )));
    }
    let mut numel: u128 = 1;
    // The largest compact stride (the product of the dimensions, empty ones counted as 1) must
    // fit i64 even when the tensor is empty (as torch's "Stride calculation overflowed").
    let mut span: i64 = 1;
    for (i, &n) in shape.iter().enumerate() {
        if n < 0 {
            return Err(Error::value_error(format!(
                "shape {shape:?}: dimension {i} is negative ({n})"
            )));
        }
        numel = numel.saturating_mul(n as u128);
        span = span.checked_mul(n.max(1)).ok_or_else(|| {
            Error::value_error(format!(
                "shape {shape:?} is too large: its strides overflow int64"
            ))
        })?;
    }
    let bits = numel.saturating_mul(dtype.bits as u128 * dtype.lanes as u128);
    let bytes = bits.div_ceil(8);
    if bytes > crate::device::caching::MAX_REQUEST as u128 {
        return Err(Error::value_error(format!(
            "shape {shape:?} is too large: {bytes} bytes exceed the largest allocation ({} bytes)",
            crate::device::caching::MAX_REQUEST
        )));
    }
    Ok(bytes as usize)
}

/// A new contiguous tensor on `device`, memory uninitialised.
pub fn empty(shape: &[i64], dtype: DLDataType, device: DLDevice) -> Result<Tensor> {
    let nbytes = nbytes_of(shape, dtype)?;
    let runtime = resolve(device)?;
    // marked as a tensor's by the runtime: `runtime.free_device`/`free_host` refuse it (the
    // tensor frees it when its last view dies; freeing it by hand let the allocator hand the
    // same block to a second tensor)
    let ptr = runtime.malloc_tensor_storage(device.device_id, nbytes)?;
    let storage = Box::new(Storage {
        ptr,
        device,
        runtime,
    });
    // SAFETY: `storage` owns `nbytes_of(shape, dtype)` bytes at `ptr` on `device`, a compact
    // tensor of `shape` and `dtype`, and is dropped with the tensor.
    Ok(unsafe { Tensor::from_owned_memory(ptr, device, dtype, shape, None, 0, storage) })
}

/// The `DLPackManagedTensorAllocator` of this runtime: a contiguous tensor shaped like
/// `prototype` (dtype, ndim, shape and device are read), as a versioned managed tensor whose
/// deleter releases the storage. Errors go through `set_error` (or the TLS error slot when the
/// caller passes none) and return -1.
///
/// # Safety
/// `prototype` must be a valid DLTensor and `out` a writable slot (both are NULL-checked).
pub unsafe extern "C" fn runtime_tensor_allocator(
    prototype: *mut DLTensor,
    out: *mut *mut DLManagedTensorVersioned,
    error_ctx: *mut c_void,
    set_error: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char)>,
) -> c_int {
    let outcome = catch_unwind(AssertUnwindSafe(
        || -> Result<*mut DLManagedTensorVersioned> {
            if prototype.is_null() || out.is_null() {
                return Err(Error::value_error(
                    "anyffi runtime tensor allocator: NULL prototype or out",
                ));
            }
            // SAFETY: per the caller, a valid DLTensor.
            let proto = unsafe { &*prototype };
            if proto.ndim < 0 || (proto.ndim > 0 && proto.shape.is_null()) {
                return Err(Error::value_error(format!(
                    "anyffi runtime tensor allocator: invalid prototype (ndim {}, shape {:p})",
                    proto.ndim, proto.shape
                )));
            }
            let shape = if proto.ndim == 0 {
                &[][..]
            } else {
                // SAFETY: checked non-NULL; the caller's shape array holds ndim entries.
                unsafe { std::slice::from_raw_parts(proto.shape, proto.ndim as usize) }
            };
            let t = empty(shape, proto.dtype, proto.device)
                .map_err(|e| crate::args::in_fn("TVMFFIEnvTensorAlloc", e))?;
            // The managed tensor holds its own reference; ours is dropped here.
            Ok(t.to_dlpack_versioned())
        },
    ));
    let err = match outcome {
        Ok(Ok(mt)) => {
            // SAFETY: `out` was checked non-NULL above.
            unsafe { *out = mt };
            return 0;
        }
        Ok(Err(e)) => e,
        Err(panic) => Error::from_panic(panic),
    };
    match set_error {
        Some(set) => {
            let kind = CString::new(err.kind()).unwrap_or_default();
            let msg = CString::new(err.message().replace('\0', " ")).unwrap_or_default();
            // SAFETY: the caller's error callback with its context and two C strings that live
            // across the call.
            unsafe { set(error_ctx, kind.as_ptr(), msg.as_ptr()) };
        }
        None => anyffi::error::set_raised(err),
    }
    -1
}

/// Installs [`runtime_tensor_allocator`] as the library's fallback DLPack allocator:
/// `TVMFFIEnvTensorAlloc` uses it when no host installed one (for this thread or the process);
/// `TVMFFIEnvGetDLPackManagedTensorAllocator` does not report it.
pub(crate) fn install_default_allocator() {
    // A false return means it is installed already.
    let _ = anyffi_registry::env::set_fallback_tensor_allocator(Some(runtime_tensor_allocator));
}

/// Registers `runtime.empty`.
pub(crate) fn register() -> Result<()> {
    def(
        "runtime.empty",
        "empty(shape: ffi.Shape, dtype: DataType|str, device: Device) -> ffi.Tensor: a new contiguous tensor, \
         memory uninitialised",
        |args| {
            let a = Args::new("runtime.empty", &["shape", "dtype", "device"], args)?;
            let shape = a.dims(0, "shape")?;
            let dtype = a.dtype(1, "dtype")?;
            let device = a.device(2, "device")?;
            Ok(Any::from(empty(&shape, dtype, device)?))
        },
    )
}
