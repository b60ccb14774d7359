//! The NVIDIA runtime over the CUDA driver API, loaded at run time through `cudarc` (dlopen of
//! `libcuda.so`): it builds with no CUDA toolkit and runs with no driver, where the device count
//! is 0 and every other entry is a RuntimeError naming the missing library.
//!
//! Rationale: the driver library is probed once (`is_culib_present`) before any other driver
//! call, because cudarc's lazy symbol loading panics when the library is absent. Each device's
//! primary context is retained once and made current on the calling thread before each call,
//! so any thread can use any device, as with the CUDA runtime API. Allocations and streams made
//! here are tracked so that a bad free or destroy is a ValueError rather than undefined behaviour
//! in the driver.

use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::sync::LazyLock;

use anyffi::abi::kDLCUDA;
use anyffi::{Error, Result};
use cudarc::driver::sys;
use parking_lot::Mutex;

use super::{DeviceRuntime, MemcpyKind, Stream};

/// What the probe found: the device count, or why there are no devices.
struct Driver {
    count: i32,
    unavailable: Option<String>,
}

/// The NVIDIA runtime.
pub struct CudaRuntime {
    driver: LazyLock<Driver>,
    /// Primary context per device id, retained on first use (stored as addresses).
    contexts: Mutex<Vec<usize>>,
    /// Live allocations: address -> (device id, what it is).
    allocations: Mutex<HashMap<usize, (i32, Alloc)>>,
    /// Live streams made by `create_stream`: address -> device id.
    streams: Mutex<HashMap<usize, i32>>,
}

/// The process-wide NVIDIA runtime.
pub static CUDA: LazyLock<CudaRuntime> = LazyLock::new(|| CudaRuntime {
    driver: LazyLock::new(probe),
    contexts: Mutex::new(Vec::new()),
    allocations: Mutex::new(HashMap::new()),
    streams: Mutex::new(HashMap::new()),
});

/// The message used whenever the driver library cannot be loaded.
pub const NO_DRIVER: &str =
    "the CUDA driver library libcuda.so was not found (install the NVIDIA driver or add the \
     directory holding libcuda.so.1 to LD_LIBRARY_PATH)";

fn probe() -> Driver {
    let none = |why: String| Driver {
        count: 0,
        unavailable: Some(why),
    };
    // SAFETY: only tries to dlopen the candidate names; no driver function is called.
    if !unsafe { sys::is_culib_present() } {
        return none(NO_DRIVER.into());
    }
    // SAFETY: the library is present, so the symbol loads; cuInit may be called repeatedly.
    let rc = unsafe { sys::cuInit(0) };
    if rc == sys::CUresult::CUDA_ERROR_NO_DEVICE {
        return none(
            "the CUDA driver reports no CUDA-capable device (cuInit: CUDA_ERROR_NO_DEVICE)".into(),
        );
    }
    if rc != sys::CUresult::CUDA_SUCCESS {
        return none(format!("cuInit failed: {}", describe(rc)));
    }
    let mut count = 0;
    // SAFETY: the driver is initialised; `count` is a valid out-parameter.
    let rc = unsafe { sys::cuDeviceGetCount(&mut count) };
    if rc != sys::CUresult::CUDA_SUCCESS {
        return none(format!("cuDeviceGetCount failed: {}", describe(rc)));
    }
    if count == 0 {
        return none("the CUDA driver reports no CUDA-capable device".into());
    }
    Driver {
        count,
        unavailable: None,
    }
}

/// `CUDA_ERROR_X (description)` for a driver status.
fn describe(rc: sys::CUresult) -> String {
    let mut text: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: only called once the driver library is loaded; `text` is a valid out-parameter and
    // the driver returns a static string (or leaves NULL for unknown codes).
    let ok = unsafe { sys::cuGetErrorString(rc, &mut text) } == sys::CUresult::CUDA_SUCCESS;
    if ok && !text.is_null() {
        // SAFETY: a NUL-terminated static string from the driver.
        let s = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        format!("{rc:?} ({s})")
    } else {
        format!("{rc:?}")
    }
}

/// "cuMemcpyHtoD of 64 bytes from host memory 0x... to device memory 0x..." for a failed copy's
/// message: which side the driver expected where (a host pointer passed as device memory is the
/// usual cause).
fn copy_call(
    kind: MemcpyKind,
    is_async: bool,
    dst: *mut c_void,
    src: *const c_void,
    nbytes: usize,
) -> String {
    let (name, from, to) = match kind {
        MemcpyKind::H2D => ("cuMemcpyHtoD", "host", "device"),
        MemcpyKind::D2H => ("cuMemcpyDtoH", "device", "host"),
        _ => ("cuMemcpy", "device", "device"),
    };
    let suffix = if is_async { "Async" } else { "" };
    format!("{name}{suffix} of {nbytes} bytes from {from} memory {src:p} to {to} memory {dst:p}")
}

/// A RuntimeError naming the driver call when `rc` is not success.
fn check(rc: sys::CUresult, call: &str) -> Result<()> {
    if rc == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::runtime_error(format!(
            "{call} failed: {}",
            describe(rc)
        )))
    }
}

impl CudaRuntime {
    /// Errors unless the driver is loaded and `device_id` exists.
    fn ready(&self, device_id: i32) -> Result<()> {
        if let Some(why) = &self.driver.unavailable {
            return Err(Error::runtime_error(format!(
                "cuda:{device_id} is unavailable: {why}"
            )));
        }
        if device_id < 0 || device_id >= self.driver.count {
            return Err(Error::value_error(format!(
                "device id {device_id} is out of range for cuda ({})",
                super::valid_ids(self.driver.count)
            )));
        }
        Ok(())
    }

    /// Makes the primary context of `device_id` current on this thread.
    fn bind(&self, device_id: i32) -> Result<()> {
        self.ready(device_id)?;
        let ctx = {
            let mut contexts = self.contexts.lock();
            if contexts.len() < self.driver.count as usize {
                contexts.resize(self.driver.count as usize, 0);
            }
            let slot = &mut contexts[device_id as usize];
            if *slot == 0 {
                let mut dev: sys::CUdevice = 0;
                // SAFETY: the driver is initialised and the ordinal is in range.
                let rc = unsafe { sys::cuDeviceGet(&mut dev, device_id) };
                check(rc, "cuDeviceGet")?;
                let mut ctx: sys::CUcontext = std::ptr::null_mut();
                // SAFETY: valid device and out-parameter; the retained context lives for the
                // process (never released), so the stored address stays valid.
                let rc = unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) };
                check(rc, "cuDevicePrimaryCtxRetain")?;
                *slot = ctx as usize;
            }
            *slot as sys::CUcontext
        };
        let mut current: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: valid out-parameter.
        let rc = unsafe { sys::cuCtxGetCurrent(&mut current) };
        check(rc, "cuCtxGetCurrent")?;
        if current != ctx {
            // SAFETY: `ctx` is a retained primary context.
            let rc = unsafe { sys::cuCtxSetCurrent(ctx) };
            check(rc, "cuCtxSetCurrent")?;
        }
        Ok(())
    }

    /// Removes a tracked allocation of the given kind, returning its device and address;
    /// ValueError if it is not one.
    /// Refuses stream handles that cannot be streams before they reach the driver, which
    /// dereferences them (a made-up handle crashed the process): NULL, `CU_STREAM_LEGACY` (1),
    /// `CU_STREAM_PER_THREAD` (2) and streams of `runtime.stream_create` pass, and so does any
    /// other aligned address past the first 64 KiB, since a framework's stream (torch's, or one
    /// set with `TVMFFIEnvSetStream`) cannot be told from a stale one without dereferencing it.
    fn check_stream(&self, stream: Stream) -> Result<()> {
        let addr = stream as usize;
        if addr <= 2 || self.streams.lock().contains_key(&addr) {
            return Ok(());
        }
        if addr < 1 << 16 || addr % std::mem::align_of::<usize>() != 0 {
            return Err(Error::value_error(format!(
                "{stream:p} is not a CUDA stream handle (NULL, 1 = legacy, \
                 2 = per-thread, or a stream of runtime.stream_create or of a framework)"
            )));
        }
        Ok(())
    }

    /// Removes a live allocation of `kind` on `device_id`: its device and address. A tensor's
    /// storage is refused to a plain `free_device` (the tensor frees it), under the same lock
    /// that marked it when it was allocated.
    fn untrack(&self, device_id: i32, ptr: *mut c_void, kind: Alloc) -> Result<(i32, usize)> {
        let mut allocs = self.allocations.lock();
        match allocs.get(&(ptr as usize)) {
            Some(&(dev, k)) if k == kind && dev == device_id => {
                allocs.remove(&(ptr as usize));
                Ok((dev, ptr as usize))
            }
            Some(&(dev, Alloc::Tensor)) if kind == Alloc::Device => {
                Err(Error::value_error(format!(
                    "{ptr:p} is the storage of a live tensor on cuda:{dev}; it is freed when the \
                     tensor is released"
                )))
            }
            Some(&(dev, k)) if k == kind => Err(Error::value_error(format!(
                "cannot free {ptr:p} on cuda:{device_id}: it was allocated on cuda:{dev}"
            ))),
            _ => Err(Error::value_error(format!(
                "cannot free {ptr:p}: it was not allocated by runtime.{} on cuda or was already freed",
                if kind == Alloc::Host { "malloc_host" } else { "malloc_device" }
            ))),
        }
    }

    fn alloc_device(&self, device_id: i32, nbytes: usize, kind: Alloc) -> Result<*mut c_void> {
        self.bind(device_id)?;
        let mut p: sys::CUdeviceptr = 0;
        // cuMemAlloc rejects 0 bytes; a minimal block keeps pointers unique and freeable.
        // SAFETY: a context is current; valid out-parameter.
        let rc = unsafe { sys::cuMemAlloc_v2(&mut p, nbytes.max(1)) };
        check(
            rc,
            &format!("cuMemAlloc of {nbytes} bytes on cuda:{device_id}"),
        )?;
        self.allocations
            .lock()
            .insert(p as usize, (device_id, kind));
        Ok(p as usize as *mut c_void)
    }

    fn free_device_as(&self, device_id: i32, ptr: *mut c_void, kind: Alloc) -> Result<()> {
        self.ready(device_id)?;
        if ptr.is_null() {
            return Ok(());
        }
        let (dev, addr) = self.untrack(device_id, ptr, kind)?;
        self.bind(dev)?;
        // SAFETY: a live allocation of ours, just untracked, freed once.
        let rc = unsafe { sys::cuMemFree_v2(addr as sys::CUdeviceptr) };
        check(rc, "cuMemFree")
    }
}

/// What a tracked CUDA allocation is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Alloc {
    /// `malloc_device`
    Device,
    /// `malloc_host` (pinned)
    Host,
    /// a tensor's storage (`malloc_tensor_storage`)
    Tensor,
}

impl DeviceRuntime for CudaRuntime {
    fn device_type(&self) -> i32 {
        kDLCUDA
    }

    fn unavailable_reason(&self) -> Option<String> {
        self.driver.unavailable.clone()
    }

    fn get_device_count(&self) -> i32 {
        self.driver.count
    }

    fn set_device(&self, device_id: i32) -> Result<()> {
        self.bind(device_id)
    }

    fn device_synchronize(&self, device_id: i32) -> Result<()> {
        self.bind(device_id)?;
        // SAFETY: a context is current.
        let rc = unsafe { sys::cuCtxSynchronize() };
        check(rc, "cuCtxSynchronize")
    }

    fn create_stream(&self, device_id: i32) -> Result<Stream> {
        self.bind(device_id)?;
        let mut s: sys::CUstream = std::ptr::null_mut();
        // SAFETY: a context is current; valid out-parameter.
        let rc = unsafe {
            sys::cuStreamCreate(&mut s, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
        };
        check(rc, "cuStreamCreate")?;
        self.streams.lock().insert(s as usize, device_id);
        Ok(s as Stream)
    }

    fn destroy_stream(&self, device_id: i32, stream: Stream) -> Result<()> {
        self.ready(device_id)?;
        let Some(dev) = self.streams.lock().remove(&(stream as usize)) else {
            return Err(Error::value_error(format!(
                "{stream:p} is not a live CUDA stream made by runtime.stream_create (or was already destroyed)"
            )));
        };
        self.bind(dev)?;
        // SAFETY: a stream we created and have just untracked, destroyed once.
        let rc = unsafe { sys::cuStreamDestroy_v2(stream as sys::CUstream) };
        check(rc, "cuStreamDestroy")
    }

    fn stream_synchronize(&self, device_id: i32, stream: Stream) -> Result<()> {
        self.bind(device_id)?;
        self.check_stream(stream)?;
        // SAFETY: NULL is the default stream; other handles are ours or the caller's (env
        // streams set by frameworks), which the caller vouches for.
        let rc = unsafe { sys::cuStreamSynchronize(stream as sys::CUstream) };
        check(rc, "cuStreamSynchronize")
    }

    fn malloc_device(&self, device_id: i32, nbytes: usize) -> Result<*mut c_void> {
        self.alloc_device(device_id, nbytes, Alloc::Device)
    }

    fn free_device(&self, device_id: i32, ptr: *mut c_void) -> Result<()> {
        self.free_device_as(device_id, ptr, Alloc::Device)
    }

    fn malloc_tensor_storage(&self, device_id: i32, nbytes: usize) -> Result<*mut c_void> {
        self.alloc_device(device_id, nbytes, Alloc::Tensor)
    }

    fn free_tensor_storage(&self, device_id: i32, ptr: *mut c_void) -> Result<()> {
        self.free_device_as(device_id, ptr, Alloc::Tensor)
    }

    fn malloc_host(&self, device_id: i32, nbytes: usize) -> Result<*mut c_void> {
        self.bind(device_id)?;
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: a context is current; valid out-parameter.
        let rc = unsafe { sys::cuMemAllocHost_v2(&mut p, nbytes.max(1)) };
        check(rc, &format!("cuMemAllocHost of {nbytes} bytes"))?;
        self.allocations
            .lock()
            .insert(p as usize, (device_id, Alloc::Host));
        Ok(p)
    }

    fn free_host(&self, device_id: i32, ptr: *mut c_void) -> Result<()> {
        self.ready(device_id)?;
        if ptr.is_null() {
            return Ok(());
        }
        let (dev, addr) = self.untrack(device_id, ptr, Alloc::Host)?;
        self.bind(dev)?;
        // SAFETY: a live pinned allocation of ours, just untracked, freed once.
        let rc = unsafe { sys::cuMemFreeHost(addr as *mut c_void) };
        check(rc, "cuMemFreeHost")
    }

    unsafe fn memcpy_sync(
        &self,
        device_id: i32,
        dst: *mut c_void,
        src: *const c_void,
        nbytes: usize,
        kind: MemcpyKind,
    ) -> Result<()> {
        self.bind(device_id)?;
        if nbytes == 0 {
            return Ok(());
        }
        let (d, s) = (
            dst as usize as sys::CUdeviceptr,
            src as usize as sys::CUdeviceptr,
        );
        let rc = match kind {
            MemcpyKind::H2H => {
                // SAFETY: per the caller, both ranges are valid host memory.
                unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, nbytes) };
                return Ok(());
            }
            // SAFETY: per the caller, dst is device memory and src host memory of nbytes bytes;
            // a context is current (bind above). The same holds for the arms below.
            MemcpyKind::H2D => unsafe { sys::cuMemcpyHtoD_v2(d, src, nbytes) },
            // SAFETY: as above, with the sides swapped.
            MemcpyKind::D2H => unsafe { sys::cuMemcpyDtoH_v2(dst, s, nbytes) },
            // cuMemcpy infers the devices from unified addresses, so peers work too.
            // SAFETY: as above, both sides on devices.
            MemcpyKind::D2D => unsafe { sys::cuMemcpy(d, s, nbytes) },
        };
        check(rc, &copy_call(kind, false, dst, src, nbytes))
    }

    unsafe fn memcpy_async(
        &self,
        device_id: i32,
        dst: *mut c_void,
        src: *const c_void,
        nbytes: usize,
        kind: MemcpyKind,
        stream: Stream,
    ) -> Result<()> {
        self.bind(device_id)?;
        self.check_stream(stream)?;
        if nbytes == 0 {
            return Ok(());
        }
        let (d, s, st) = (
            dst as usize as sys::CUdeviceptr,
            src as usize as sys::CUdeviceptr,
            stream as sys::CUstream,
        );
        let rc = match kind {
            MemcpyKind::H2H => {
                // SAFETY: the stream is NULL, ours, or the caller's (vouched for).
                let rc = unsafe { sys::cuStreamSynchronize(st) };
                check(rc, "cuStreamSynchronize")?;
                // SAFETY: per the caller, both ranges are valid host memory.
                unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, nbytes) };
                return Ok(());
            }
            // SAFETY: per the caller, the ranges are valid on the sides `kind` names and stay
            // valid until the stream reaches the copy; a context is current (bind above).
            MemcpyKind::H2D => unsafe { sys::cuMemcpyHtoDAsync_v2(d, src, nbytes, st) },
            // SAFETY: as above.
            MemcpyKind::D2H => unsafe { sys::cuMemcpyDtoHAsync_v2(dst, s, nbytes, st) },
            // SAFETY: as above.
            MemcpyKind::D2D => unsafe { sys::cuMemcpyAsync(d, s, nbytes, st) },
        };
        check(rc, &copy_call(kind, true, dst, src, nbytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_driver_means_zero_devices_and_clear_errors() {
        if CUDA.get_device_count() > 0 {
            eprintln!("skipped: a CUDA driver with devices is present");
            return;
        }
        let why = CUDA.unavailable_reason().unwrap();
        let e = CUDA.malloc_device(0, 16).unwrap_err();
        assert_eq!(e.kind(), "RuntimeError");
        assert!(e.message().contains(&why), "{}", e.message());
        assert!(CUDA.create_stream(0).is_err());
        assert!(CUDA.free_device(0, 8 as *mut c_void).is_err());
    }
}
