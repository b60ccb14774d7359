//! The per-thread context (current device) and the packed `runtime.*` functions of the runtime
//! table: device count, current device, synchronisation, streams, memory and copies.
//!
//! Rationale: as in LLAISYS, each thread has its own current device, which starts as the first
//! available non-CPU device (cuda:0 when a driver and GPU exist) and otherwise cpu:0. The
//! asynchronous entries take the stream argument, or when it is NULL/None the thread's FFI env
//! stream of the device (`TVMFFIEnvGetStream`), which is how frameworks hand us their stream.

use std::cell::Cell;
use std::ffi::c_void;

use anyffi::abi::{kDLCPU, kDLCUDA, DLDevice};
use anyffi::{Any, Error, Result};
use anyffi_registry::env;

use super::{device_count, resolve, DeviceRuntime, MemcpyKind, Stream};
use crate::args::{def, Args};

thread_local! {
    static CURRENT: Cell<Option<DLDevice>> = const { Cell::new(None) };
}

/// The calling thread's current device.
pub fn current_device() -> DLDevice {
    let default = || {
        if super::cuda::CUDA.get_device_count() > 0 {
            DLDevice {
                device_type: kDLCUDA,
                device_id: 0,
            }
        } else {
            DLDevice {
                device_type: kDLCPU,
                device_id: 0,
            }
        }
    };
    // while the thread's storage is torn down, the default device
    CURRENT
        .try_with(|c| match c.get() {
            Some(d) => d,
            None => {
                let d = default();
                c.set(Some(d));
                d
            }
        })
        .unwrap_or_else(|_| default())
}

/// Makes `device` current for the calling thread (checking that it exists).
pub fn set_device(device: DLDevice) -> Result<()> {
    resolve(device)?.set_device(device.device_id)?;
    // while the thread's storage is torn down there is nothing to remember it in
    let _ = CURRENT.try_with(|c| c.set(Some(device)));
    Ok(())
}

/// `stream`, or the thread's env stream of `device` when it is NULL.
pub fn stream_or_env(device: DLDevice, stream: Stream) -> Stream {
    if stream.is_null() {
        env::get_stream(device.device_type, device.device_id)
    } else {
        stream
    }
}

fn memcpy_kind(a: &Args<'_, '_>, i: usize) -> Result<MemcpyKind> {
    let k = a.int(i, "kind")?;
    MemcpyKind::from_i64(k).ok_or_else(|| {
        anyffi::Error::value_error(format!(
            "argument `kind` must be 0 (H2H), 1 (H2D), 2 (D2H) or 3 (D2D), got {k}"
        ))
    })
}

/// Checks the pointers of a copy: NULL is allowed only for 0 bytes.
fn copy_ptrs(a: &Args<'_, '_>, nbytes: usize) -> Result<(*mut c_void, *mut c_void)> {
    let dst = a.ptr(0, "dst")?;
    let src = a.ptr(1, "src")?;
    if nbytes > 0 && (dst.is_null() || src.is_null()) {
        return Err(anyffi::Error::value_error(format!(
            "NULL {} pointer for a copy of {nbytes} bytes",
            if dst.is_null() { "dst" } else { "src" }
        )));
    }
    Ok((dst, src))
}

/// Registers the runtime-table functions.
pub(crate) fn register() -> Result<()> {
    def(
        "runtime.device_count",
        "device_count(device_type: int) -> int: number of devices of a DLPack device type (0 when its driver is missing)",
        |args| {
            let a = Args::new("runtime.device_count", &["device_type"], args)?;
            let t = a.int(0, "device_type")?;
            // no truncation: 2^32 + 1 is not device type 1
            let t = i32::try_from(t).map_err(|_| {
                Error::value_error(format!("unknown device type {t} (supported: 1 = cpu, 2 = cuda)"))
            })?;
            Ok(Any::from(device_count(t)? as i64))
        },
    )?;
    def(
        "runtime.set_device",
        "set_device(device: Device) -> None: makes `device` current for the calling thread",
        |args| {
            let a = Args::new("runtime.set_device", &["device"], args)?;
            set_device(a.device(0, "device")?)?;
            Ok(Any::none())
        },
    )?;
    def(
        "runtime.get_device",
        "get_device() -> Device: the calling thread's current device",
        |args| {
            Args::new("runtime.get_device", &[], args)?;
            Ok(Any::from(current_device()))
        },
    )?;
    def(
        "runtime.device_synchronize",
        "device_synchronize(device: Device) -> None: waits for all work on `device`",
        |args| {
            let a = Args::new("runtime.device_synchronize", &["device"], args)?;
            let d = a.device(0, "device")?;
            resolve(d)?.device_synchronize(d.device_id)?;
            Ok(Any::none())
        },
    )?;
    def(
        "runtime.stream_create",
        "stream_create(device: Device) -> void*: a new stream on `device`",
        |args| {
            let a = Args::new("runtime.stream_create", &["device"], args)?;
            let d = a.device(0, "device")?;
            Ok(Any::from(resolve(d)?.create_stream(d.device_id)?))
        },
    )?;
    def(
        "runtime.stream_destroy",
        "stream_destroy(device: Device, stream: void*) -> None: destroys a stream made by stream_create",
        |args| {
            let a = Args::new("runtime.stream_destroy", &["device", "stream"], args)?;
            let d = a.device(0, "device")?;
            let s = a.ptr(1, "stream")?;
            resolve(d)?.destroy_stream(d.device_id, s)?;
            Ok(Any::none())
        },
    )?;
    def(
        "runtime.stream_synchronize",
        "stream_synchronize(device: Device, stream: void*) -> None: waits for `stream` (None: the env stream)",
        |args| {
            let a = Args::new("runtime.stream_synchronize", &["device", "stream"], args)?;
            let d = a.device(0, "device")?;
            let s = stream_or_env(d, a.ptr(1, "stream")?);
            resolve(d)?.stream_synchronize(d.device_id, s)?;
            Ok(Any::none())
        },
    )?;
    def(
        "runtime.malloc_device",
        "malloc_device(device: Device, nbytes: int) -> void*: device memory (CPU: 64-byte aligned, cached)",
        |args| {
            let a = Args::new("runtime.malloc_device", &["device", "nbytes"], args)?;
            let d = a.device(0, "device")?;
            let n = a.size(1, "nbytes")?;
            Ok(Any::from(resolve(d)?.malloc_device(d.device_id, n)?))
        },
    )?;
    def(
        "runtime.free_device",
        "free_device(device: Device, ptr: void*) -> None: releases malloc_device memory",
        |args| {
            let a = Args::new("runtime.free_device", &["device", "ptr"], args)?;
            let d = a.device(0, "device")?;
            let p = a.ptr(1, "ptr")?;
            resolve(d)?.free_device(d.device_id, p)?;
            Ok(Any::none())
        },
    )?;
    def(
        "runtime.malloc_host",
        "malloc_host(device: Device, nbytes: int) -> void*: host memory for transfers with `device` (pinned on CUDA)",
        |args| {
            let a = Args::new("runtime.malloc_host", &["device", "nbytes"], args)?;
            let d = a.device(0, "device")?;
            let n = a.size(1, "nbytes")?;
            Ok(Any::from(resolve(d)?.malloc_host(d.device_id, n)?))
        },
    )?;
    def(
        "runtime.free_host",
        "free_host(device: Device, ptr: void*) -> None: releases malloc_host memory",
        |args| {
            let a = Args::new("runtime.free_host", &["device", "ptr"], args)?;
            let d = a.device(0, "device")?;
            let p = a.ptr(1, "ptr")?;
            resolve(d)?.free_host(d.device_id, p)?;
            Ok(Any::none())
        },
    )?;
    def(
        "runtime.memcpy",
        "memcpy(dst: void*, src: void*, nbytes: int, kind: int) -> None: synchronous copy on the current device; \
         kind 0..3 = H2H, H2D, D2H, D2D",
        |args| {
            let a = Args::new("runtime.memcpy", &["dst", "src", "nbytes", "kind"], args)?;
            let n = a.size(2, "nbytes")?;
            let kind = memcpy_kind(&a, 3)?;
            let (dst, src) = copy_ptrs(&a, n)?;
            let d = current_device();
            // SAFETY: raw pointers from the caller, who vouches for them as with C memcpy.
            unsafe { resolve(d)?.memcpy_sync(d.device_id, dst, src, n, kind)? };
            Ok(Any::none())
        },
    )?;
    def(
        "runtime.memcpy_async",
        "memcpy_async(dst: void*, src: void*, nbytes: int, kind: int, stream: void*) -> None: copy queued on \
         `stream` of the current device (None: the env stream)",
        |args| {
            let a = Args::new("runtime.memcpy_async", &["dst", "src", "nbytes", "kind", "stream"], args)?;
            let n = a.size(2, "nbytes")?;
            let kind = memcpy_kind(&a, 3)?;
            let (dst, src) = copy_ptrs(&a, n)?;
            let d = current_device();
            let s = stream_or_env(d, a.ptr(4, "stream")?);
            // SAFETY: as for runtime.memcpy.
            unsafe { resolve(d)?.memcpy_async(d.device_id, dst, src, n, kind, s)? };
            Ok(Any::none())
        },
    )?;
    def(
        "runtime.empty_cache",
        "empty_cache(device: Device) -> int: returns cached free blocks to the system; the bytes released",
        |args| {
            let a = Args::new("runtime.empty_cache", &["device"], args)?;
            let d = a.device(0, "device")?;
            resolve(d)?;
            let released = if d.device_type == kDLCPU { super::caching::CPU_ALLOCATOR.trim() } else { 0 };
            Ok(Any::from(released as i64))
        },
    )?;
    Ok(())
}
