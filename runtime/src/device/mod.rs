//! Devices: the `DeviceRuntime` trait with the 12 entries of the LLAISYS runtime table
//! (spec runtime-and-ops §1.2), its CPU and CUDA implementations, and device resolution
//! (`DLDevice` -> runtime, with the errors every entry point shares).
//!
//! Rationale: LLAISYS entries act on "the current device"; ours take the device id explicitly,
//! so a call never depends on hidden state except where the packed API says so (`runtime.memcpy`
//! uses the thread's current device, see `context.rs`).

use std::ffi::c_void;

use anyffi::abi::{kDLCPU, kDLCUDA, DLDevice};
use anyffi::device::{device_to_string, device_type_name};
use anyffi::{Error, Result};

pub mod caching;
pub mod context;
pub mod cpu;
pub mod cuda;

/// An opaque stream handle (`llaisysStream_t`); NULL is the device's default stream.
pub type Stream = *mut c_void;

/// Direction of a copy (`llaisysMemcpyKind_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum MemcpyKind {
    H2H = 0,
    H2D = 1,
    D2H = 2,
    D2D = 3,
}

impl MemcpyKind {
    /// The kind of a packed `kind` argument (0..3).
    pub fn from_i64(k: i64) -> Option<MemcpyKind> {
        Some(match k {
            0 => MemcpyKind::H2H,
            1 => MemcpyKind::H2D,
            2 => MemcpyKind::D2H,
            3 => MemcpyKind::D2D,
            _ => return None,
        })
    }
}

/// One device type's runtime: the 12 entries of `LlaisysRuntimeAPI`, in its order, each taking
/// the device id it acts on. Ids are validated by [`resolve`] before any entry is called.
pub trait DeviceRuntime: Send + Sync {
    /// The DLPack device type served (`kDLCPU`, `kDLCUDA`).
    fn device_type(&self) -> i32;
    /// Why the device type has no devices (e.g. the driver library is missing), if it has none.
    fn unavailable_reason(&self) -> Option<String> {
        None
    }

    /// 1. Number of devices (0 when the driver or hardware is missing).
    fn get_device_count(&self) -> i32;
    /// 2. Makes `device_id` current for the calling thread.
    fn set_device(&self, device_id: i32) -> Result<()>;
    /// 3. Waits for all work on the device.
    fn device_synchronize(&self, device_id: i32) -> Result<()>;
    /// 4. A new stream (never NULL).
    fn create_stream(&self, device_id: i32) -> Result<Stream>;
    /// 5. Destroys a stream made by `create_stream`; ValueError for any other handle.
    fn destroy_stream(&self, device_id: i32, stream: Stream) -> Result<()>;
    /// 6. Waits for the work queued on `stream` (NULL: the default stream).
    fn stream_synchronize(&self, device_id: i32, stream: Stream) -> Result<()>;
    /// 7. Device memory of at least `nbytes` bytes.
    fn malloc_device(&self, device_id: i32, nbytes: usize) -> Result<*mut c_void>;
    /// 8. Releases `malloc_device` memory; ValueError for unknown or already freed pointers.
    fn free_device(&self, device_id: i32, ptr: *mut c_void) -> Result<()>;
    /// Device memory for a tensor's storage: as `malloc_device`, but marked, in the runtime's
    /// own table and with the allocation, so that `free_device` refuses it and only
    /// `free_tensor_storage` releases it (a stray free of a recycled address cannot take a
    /// tensor's memory).
    fn malloc_tensor_storage(&self, device_id: i32, nbytes: usize) -> Result<*mut c_void>;
    /// Releases what `malloc_tensor_storage` returned, once its tensor is gone.
    fn free_tensor_storage(&self, device_id: i32, ptr: *mut c_void) -> Result<()>;
    /// 9. Host memory suited to transfers with the device (pinned on CUDA).
    fn malloc_host(&self, device_id: i32, nbytes: usize) -> Result<*mut c_void>;
    /// 10. Releases `malloc_host` memory; ValueError for unknown or already freed pointers.
    fn free_host(&self, device_id: i32, ptr: *mut c_void) -> Result<()>;
    /// 11. Copies `nbytes` bytes and waits for the copy.
    ///
    /// # Safety
    /// `dst` and `src` must be valid for `nbytes` bytes on the sides `kind` names.
    unsafe fn memcpy_sync(
        &self,
        device_id: i32,
        dst: *mut c_void,
        src: *const c_void,
        nbytes: usize,
        kind: MemcpyKind,
    ) -> Result<()>;
    /// 12. Queues the copy on `stream` (NULL: the default stream).
    ///
    /// # Safety
    /// As for `memcpy_sync`, and the memory must stay valid until the stream reaches the copy.
    unsafe fn memcpy_async(
        &self,
        device_id: i32,
        dst: *mut c_void,
        src: *const c_void,
        nbytes: usize,
        kind: MemcpyKind,
        stream: Stream,
    ) -> Result<()>;
}

/// The runtime of a device type: CPU and CUDA are served; any other DLPack type is a ValueError.
pub fn runtime_of(device_type: i32) -> Result<&'static dyn DeviceRuntime> {
    match device_type {
        kDLCPU => Ok(&cpu::CPU),
        kDLCUDA => Ok(&*cuda::CUDA),
        t => Err(Error::value_error(match device_type_name(t) {
            Some(name) => format!("device type {t} ({name}) is not supported by this runtime (supported: 1 = cpu, 2 = cuda)"),
            None => format!("unknown device type {t} (supported: 1 = cpu, 2 = cuda)"),
        })),
    }
}

/// The runtime serving `device`, after checking that the device exists: RuntimeError when its
/// type has no devices here (naming why, e.g. the missing driver), ValueError for a bad id.
pub fn resolve(device: DLDevice) -> Result<&'static dyn DeviceRuntime> {
    let rt = runtime_of(device.device_type)?;
    let count = rt.get_device_count();
    if count == 0 {
        let why = rt
            .unavailable_reason()
            .unwrap_or_else(|| "no device is present".into());
        return Err(Error::runtime_error(format!(
            "{} is unavailable: {why}",
            device_to_string(device)
        )));
    }
    if device.device_id < 0 || device.device_id >= count {
        return Err(Error::value_error(format!(
            "device id {} is out of range for {} ({})",
            device.device_id,
            device_type_name(device.device_type).unwrap_or("device"),
            valid_ids(count)
        )));
    }
    Ok(rt)
}

/// "valid ids: 0" / "valid ids: 0 to 3" for `count` devices of a kind ("no device is present"
/// for none), in out-of-range messages.
pub(crate) fn valid_ids(count: i32) -> String {
    match count {
        ..=0 => "no device is present".into(),
        1 => "valid ids: 0".into(),
        n => format!("valid ids: 0 to {}", n - 1),
    }
}

/// The number of devices of a type: 0 for known DLPack types this runtime does not serve (as
/// LLAISYS's "unsupported" table), ValueError for numbers that are no DLPack device type.
pub fn device_count(device_type: i32) -> Result<i32> {
    match runtime_of(device_type) {
        Ok(rt) => Ok(rt.get_device_count()),
        Err(_) if device_type_name(device_type).is_some() => Ok(0),
        Err(e) => Err(e),
    }
}
