//! The CPU runtime: one device, streams that are no-op handles, memory from the caching
//! allocator (device and host memory are the same), and every copy kind a `memcpy`.

use std::ffi::c_void;

use anyffi::abi::kDLCPU;
use anyffi::{Error, Result};
use parking_lot::Mutex;

use super::caching::CPU_ALLOCATOR;
use super::{DeviceRuntime, MemcpyKind, Stream};

/// The CPU runtime.
pub struct CpuRuntime {
    /// Streams handed out by `create_stream` (so destroying anything else is caught).
    streams: Mutex<Vec<usize>>,
}

/// The process-wide CPU runtime.
pub static CPU: CpuRuntime = CpuRuntime {
    streams: Mutex::new(Vec::new()),
};

impl CpuRuntime {
    fn check_stream(&self, stream: Stream) -> Result<()> {
        if stream.is_null() || self.streams.lock().contains(&(stream as usize)) {
            Ok(())
        } else {
            Err(Error::value_error(format!(
                "{stream:p} is not a live CPU stream (make one with runtime.stream_create)"
            )))
        }
    }
}

impl DeviceRuntime for CpuRuntime {
    fn device_type(&self) -> i32 {
        kDLCPU
    }

    fn get_device_count(&self) -> i32 {
        1
    }

    fn set_device(&self, _device_id: i32) -> Result<()> {
        Ok(())
    }

    fn device_synchronize(&self, _device_id: i32) -> Result<()> {
        Ok(())
    }

    fn create_stream(&self, _device_id: i32) -> Result<Stream> {
        // A distinct heap address per stream; the byte itself is never read.
        let handle = Box::into_raw(Box::new(0u8)) as usize;
        self.streams.lock().push(handle);
        Ok(handle as Stream)
    }

    fn destroy_stream(&self, _device_id: i32, stream: Stream) -> Result<()> {
        if stream.is_null() {
            // the default stream (LLAISYS's CPU create_stream returns NULL, and destroying it
            // is a no-op there; synchronize and memcpy_async accept NULL as well)
            return Ok(());
        }
        let removed = {
            let mut streams = self.streams.lock();
            let pos = streams.iter().position(|&s| s == stream as usize);
            pos.map(|i| streams.swap_remove(i))
        };
        if removed.is_none() {
            return Err(Error::value_error(format!(
                "{stream:p} is not a live CPU stream (not made by runtime.stream_create, or already destroyed)"
            )));
        }
        // SAFETY: the handle came from Box::into_raw in create_stream and left the set just now,
        // so it is released exactly once.
        drop(unsafe { Box::from_raw(stream as *mut u8) });
        Ok(())
    }

    fn stream_synchronize(&self, _device_id: i32, stream: Stream) -> Result<()> {
        self.check_stream(stream)
    }

    fn malloc_device(&self, _device_id: i32, nbytes: usize) -> Result<*mut c_void> {
        CPU_ALLOCATOR.alloc(nbytes).map(|p| p as *mut c_void)
    }

    fn free_device(&self, _device_id: i32, ptr: *mut c_void) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        // SAFETY: the allocator refuses a tensor's storage (the tensor frees it when its last
        // view dies); any other block is only reachable through raw pointers, whose users
        // vouch for them.
        unsafe { CPU_ALLOCATOR.free(ptr as *mut u8) }
    }

    fn malloc_tensor_storage(&self, _device_id: i32, nbytes: usize) -> Result<*mut c_void> {
        CPU_ALLOCATOR.alloc_tensor(nbytes).map(|p| p as *mut c_void)
    }

    fn free_tensor_storage(&self, _device_id: i32, ptr: *mut c_void) -> Result<()> {
        // SAFETY: called by the storage owner once its tensor is gone.
        unsafe { CPU_ALLOCATOR.free_tensor(ptr as *mut u8) }
    }

    fn malloc_host(&self, device_id: i32, nbytes: usize) -> Result<*mut c_void> {
        self.malloc_device(device_id, nbytes)
    }

    fn free_host(&self, device_id: i32, ptr: *mut c_void) -> Result<()> {
        self.free_device(device_id, ptr)
    }

    unsafe fn memcpy_sync(
        &self,
        _device_id: i32,
        dst: *mut c_void,
        src: *const c_void,
        nbytes: usize,
        _kind: MemcpyKind,
    ) -> Result<()> {
        if nbytes > 0 {
            // SAFETY: per the caller, both ranges are valid host memory; `copy` tolerates overlap.
            unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, nbytes) };
        }
        Ok(())
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
        self.check_stream(stream)?;
        // SAFETY: per the caller.
        unsafe { self.memcpy_sync(device_id, dst, src, nbytes, kind) }
    }
}
