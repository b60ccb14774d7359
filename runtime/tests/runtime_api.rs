//! The runtime table through the packed `runtime.*` functions: device counts, current device,
//! streams, memory, and the LLAISYS runtime vector (1 MiB H2D/D2D/D2H round trip on every
//! device id), plus the bad inputs of each entry.

mod common;

use std::ffi::c_void;

use anyffi::abi::DLDevice;
use anyffi::{Any, AnyView};
use common::*;

const MIB: usize = 1 << 20;

/// LLAISYS `test/test_runtime.py`: H2D, D2D, D2H of 1 MiB on `device`, sync and async.
fn round_trip(device: DLDevice) {
    ok("runtime.set_device", &[device.into()]);
    assert_eq!(
        ok("runtime.get_device", &[]).get::<DLDevice>().unwrap(),
        device
    );
    let n = Any::from(MIB as i64);
    let host_src = ok("runtime.malloc_host", &[device.into(), n.as_view()]);
    let host_dst = ok("runtime.malloc_host", &[device.into(), n.as_view()]);
    let dev_a = ok("runtime.malloc_device", &[device.into(), n.as_view()]);
    let dev_b = ok("runtime.malloc_device", &[device.into(), n.as_view()]);
    // SAFETY: 1 MiB host blocks from malloc_host.
    let (src, dst) = unsafe {
        (
            std::slice::from_raw_parts_mut(ptr(&host_src) as *mut u8, MIB),
            std::slice::from_raw_parts_mut(ptr(&host_dst) as *mut u8, MIB),
        )
    };
    for (i, b) in src.iter_mut().enumerate() {
        *b = (i * 7 % 251) as u8;
    }
    let p = |v: &Any| AnyView::from(ptr(v));
    for async_ in [false, true] {
        dst.fill(0);
        let stream = ok("runtime.stream_create", &[device.into()]);
        let copy = |d: &Any, s: &Any, kind: i64| {
            if async_ {
                ok(
                    "runtime.memcpy_async",
                    &[p(d), p(s), n.as_view(), kind.into(), p(&stream)],
                );
            } else {
                ok("runtime.memcpy", &[p(d), p(s), n.as_view(), kind.into()]);
            }
        };
        copy(&dev_a, &host_src, 1);
        copy(&dev_b, &dev_a, 3);
        copy(&host_dst, &dev_b, 2);
        ok("runtime.stream_synchronize", &[device.into(), p(&stream)]);
        ok("runtime.device_synchronize", &[device.into()]);
        assert!(
            src == dst,
            "{device:?} round trip (async = {async_}) lost data"
        );
        ok("runtime.stream_destroy", &[device.into(), p(&stream)]);
    }
    // memcpy_async with no stream uses the thread's env stream (NULL here: the default stream).
    dst.fill(0);
    ok(
        "runtime.memcpy_async",
        &[
            p(&host_dst),
            p(&dev_b),
            n.as_view(),
            2i64.into(),
            AnyView::NONE,
        ],
    );
    ok(
        "runtime.stream_synchronize",
        &[device.into(), AnyView::NONE],
    );
    assert!(src == dst);
    for (f, v) in [
        ("runtime.free_device", &dev_a),
        ("runtime.free_device", &dev_b),
    ] {
        ok(f, &[device.into(), p(v)]);
    }
    for v in [&host_src, &host_dst] {
        ok("runtime.free_host", &[device.into(), p(v)]);
    }
}

#[test]
fn round_trip_on_every_device() {
    let n_cpu = ok("runtime.device_count", &[1i64.into()])
        .get::<i64>()
        .unwrap();
    assert_eq!(n_cpu, 1);
    round_trip(cpu());
    for id in 0..cuda_count_or_skip("round_trip_on_every_device") {
        round_trip(cuda(id));
    }
}

#[test]
fn device_counts() {
    assert_eq!(
        ok("runtime.device_count", &[1i64.into()])
            .get::<i64>()
            .unwrap(),
        1
    );
    // Known DLPack types this runtime does not serve have no devices (LLAISYS "unsupported").
    assert_eq!(
        ok("runtime.device_count", &[10i64.into()])
            .get::<i64>()
            .unwrap(),
        0
    );
    err(
        "runtime.device_count",
        &[99i64.into()],
        "ValueError",
        &["runtime.device_count", "unknown device type 99"],
    );
    // not truncated to i32 (2^32 + 1 was read as 1 = cpu)
    err(
        "runtime.device_count",
        &[((1i64 << 32) + 1).into()],
        "ValueError",
        &["unknown device type 4294967297"],
    );
    err(
        "runtime.device_count",
        &[Any::from("cuda").as_view()],
        "TypeError",
        &["`device_type`", "expected int"],
    );
    err(
        "runtime.device_count",
        &[],
        "TypeError",
        &["runtime.device_count(device_type) expects 1 argument, got 0"],
    );
}

#[test]
fn current_device_is_per_thread() {
    ok("runtime.set_device", &[cpu().into()]);
    let main = ok("runtime.get_device", &[]).get::<DLDevice>().unwrap();
    assert_eq!(main, cpu());
    let other = std::thread::spawn(|| ok("runtime.get_device", &[]).get::<DLDevice>().unwrap())
        .join()
        .unwrap();
    // A new thread starts on the first available non-CPU device, else cpu:0.
    let expect = if cuda_count_or_skip("current_device_is_per_thread") > 0 {
        cuda(0)
    } else {
        cpu()
    };
    assert_eq!(other, expect);
}

#[test]
fn cuda_without_driver_is_a_clear_runtime_error() {
    if cuda_count_or_skip("cuda_without_driver_is_a_clear_runtime_error") > 0 {
        return;
    }
    assert_eq!(
        ok("runtime.device_count", &[2i64.into()])
            .get::<i64>()
            .unwrap(),
        0
    );
    let n = Any::from(16i64);
    for (f, args) in [
        ("runtime.set_device", vec![cuda(0).into()]),
        ("runtime.device_synchronize", vec![cuda(0).into()]),
        ("runtime.stream_create", vec![cuda(0).into()]),
        (
            "runtime.stream_destroy",
            vec![cuda(0).into(), AnyView::NONE],
        ),
        (
            "runtime.stream_synchronize",
            vec![cuda(0).into(), AnyView::NONE],
        ),
        ("runtime.malloc_device", vec![cuda(0).into(), n.as_view()]),
        (
            "runtime.free_device",
            vec![cuda(0).into(), AnyView::from(8 as *mut c_void)],
        ),
        ("runtime.malloc_host", vec![cuda(0).into(), n.as_view()]),
        ("runtime.free_host", vec![cuda(0).into(), AnyView::NONE]),
    ] {
        let e = err(f, &args, "RuntimeError", &[f, "cuda:0 is unavailable"]);
        let m = e.message();
        assert!(
            m.contains("libcuda.so") || m.contains("no CUDA-capable device"),
            "{f}: {m}"
        );
    }
    let shape = anyffi::Shape::new(&[2]);
    err(
        "runtime.empty",
        &[AnyView::from(&shape), f32_dtype().into(), cuda(0).into()],
        "RuntimeError",
        &["cuda:0"],
    );
}

#[test]
fn device_arguments() {
    err(
        "runtime.set_device",
        &[1i64.into()],
        "TypeError",
        &["runtime.set_device", "`device`", "expected Device, got int"],
    );
    err(
        "runtime.set_device",
        &[DLDevice {
            device_type: 1,
            device_id: 1,
        }
        .into()],
        "ValueError",
        &["device id 1", "cpu"],
    );
    err(
        "runtime.set_device",
        &[DLDevice {
            device_type: 1,
            device_id: -1,
        }
        .into()],
        "ValueError",
        &["device id -1"],
    );
    err(
        "runtime.set_device",
        &[DLDevice {
            device_type: 99,
            device_id: 0,
        }
        .into()],
        "ValueError",
        &["unknown device type 99"],
    );
    err(
        "runtime.set_device",
        &[DLDevice {
            device_type: 10,
            device_id: 0,
        }
        .into()],
        "ValueError",
        &["rocm", "not supported"],
    );
    err(
        "runtime.device_synchronize",
        &[AnyView::NONE],
        "TypeError",
        &["`device`"],
    );
}

#[test]
fn memory_bad_inputs() {
    let c = cpu();
    err(
        "runtime.malloc_device",
        &[c.into(), (-1i64).into()],
        "ValueError",
        &["runtime.malloc_device", "`nbytes` must be >= 0"],
    );
    err(
        "runtime.malloc_device",
        &[c.into(), i64::MAX.into()],
        "ValueError",
        &["runtime.malloc_device", "exceeds"],
    );
    err(
        "runtime.malloc_device",
        &[c.into(), Any::from("1024").as_view()],
        "TypeError",
        &["`nbytes`", "expected int"],
    );
    err(
        "runtime.malloc_device",
        &[c.into()],
        "TypeError",
        &["expects 2 arguments, got 1"],
    );
    err(
        "runtime.malloc_host",
        &[c.into(), 1.5f64.into()],
        "TypeError",
        &["runtime.malloc_host", "`nbytes`"],
    );

    // Zero bytes still gives a unique, freeable pointer.
    let z = ok("runtime.malloc_device", &[c.into(), 0i64.into()]);
    assert!(!ptr(&z).is_null());
    assert_eq!(ptr(&z) as usize % 64, 0, "CPU blocks are 64-byte aligned");
    ok("runtime.free_device", &[c.into(), AnyView::from(ptr(&z))]);
    err(
        "runtime.free_device",
        &[c.into(), AnyView::from(ptr(&z))],
        "ValueError",
        &["runtime.free_device", "already freed"],
    );

    let mut local = [0u8; 64];
    let foreign = AnyView::from(local.as_mut_ptr() as *mut c_void);
    err(
        "runtime.free_device",
        &[c.into(), foreign],
        "ValueError",
        &["not allocated by the CPU allocator"],
    );
    err(
        "runtime.free_host",
        &[c.into(), foreign],
        "ValueError",
        &["runtime.free_host"],
    );
    err(
        "runtime.free_device",
        &[c.into(), 4096i64.into()],
        "TypeError",
        &["`ptr`", "expected void* (opaque pointer), got int"],
    );
    // NULL is a no-op, as with C free.
    ok("runtime.free_device", &[c.into(), AnyView::NONE]);
}

#[test]
fn stream_bad_inputs() {
    let c = cpu();
    let s = ok("runtime.stream_create", &[c.into()]);
    assert!(!ptr(&s).is_null());
    ok(
        "runtime.stream_synchronize",
        &[c.into(), AnyView::from(ptr(&s))],
    );
    ok(
        "runtime.stream_destroy",
        &[c.into(), AnyView::from(ptr(&s))],
    );
    err(
        "runtime.stream_destroy",
        &[c.into(), AnyView::from(ptr(&s))],
        "ValueError",
        &["runtime.stream_destroy", "not a live CPU stream"],
    );
    err(
        "runtime.stream_synchronize",
        &[c.into(), AnyView::from(ptr(&s))],
        "ValueError",
        &["runtime.stream_synchronize"],
    );
    err(
        "runtime.stream_destroy",
        &[c.into(), 5i64.into()],
        "TypeError",
        &["`stream`"],
    );
    // the NULL (default) stream: destroying it is a no-op, as in LLAISYS's CPU runtime
    ok(
        "runtime.stream_destroy",
        &[
            c.into(),
            AnyView::from(std::ptr::null_mut::<std::ffi::c_void>()),
        ],
    );
}

#[test]
fn cuda_stream_handles_are_checked_before_the_driver() {
    if cuda_count_or_skip("cuda_stream_handles_are_checked_before_the_driver") == 0 {
        return;
    }
    let d = cuda(0);
    ok("runtime.set_device", &[d.into()]); // memcpy_async copies on the current device
                                           // NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD, and a stream of ours, reach the driver.
    for h in [0usize, 1, 2] {
        ok(
            "runtime.stream_synchronize",
            &[d.into(), AnyView::from(h as *mut c_void)],
        );
    }
    let s = ok("runtime.stream_create", &[d.into()]);
    ok(
        "runtime.stream_synchronize",
        &[d.into(), AnyView::from(ptr(&s))],
    );
    let mut host = [7u8; 64];
    let dev = ok(
        "runtime.malloc_device",
        &[d.into(), Any::from(64i64).as_view()],
    );
    // Made-up handles (small, or not pointer-aligned) are a ValueError, not a crash.
    for h in [12345usize, 8, 0x1000_0003] {
        err(
            "runtime.stream_synchronize",
            &[d.into(), AnyView::from(h as *mut c_void)],
            "ValueError",
            &["runtime.stream_synchronize", "not a CUDA stream handle"],
        );
        err(
            "runtime.memcpy_async",
            &[
                AnyView::from(ptr(&dev)),
                AnyView::from(host.as_mut_ptr() as *mut c_void),
                Any::from(64i64).as_view(),
                Any::from(1i64).as_view(),
                AnyView::from(h as *mut c_void),
            ],
            "ValueError",
            &["runtime.memcpy_async", "not a CUDA stream handle"],
        );
    }
    ok("runtime.free_device", &[d.into(), AnyView::from(ptr(&dev))]);
    ok(
        "runtime.stream_destroy",
        &[d.into(), AnyView::from(ptr(&s))],
    );
}

#[test]
fn memcpy_bad_inputs() {
    ok("runtime.set_device", &[cpu().into()]);
    let mut a = [1u8; 16];
    let mut b = [0u8; 16];
    let (pa, pb) = (
        AnyView::from(a.as_mut_ptr() as *mut c_void),
        AnyView::from(b.as_mut_ptr() as *mut c_void),
    );
    ok("runtime.memcpy", &[pb, pa, 16i64.into(), 0i64.into()]);
    assert_eq!(b, [1u8; 16]);
    err(
        "runtime.memcpy",
        &[pb, pa, 16i64.into(), 4i64.into()],
        "ValueError",
        &["runtime.memcpy", "`kind` must be 0 (H2H)"],
    );
    err(
        "runtime.memcpy",
        &[pb, pa, (-3i64).into(), 0i64.into()],
        "ValueError",
        &["`nbytes` must be >= 0"],
    );
    err(
        "runtime.memcpy",
        &[AnyView::NONE, pa, 16i64.into(), 0i64.into()],
        "ValueError",
        &["NULL dst"],
    );
    err(
        "runtime.memcpy",
        &[pb, AnyView::NONE, 16i64.into(), 0i64.into()],
        "ValueError",
        &["NULL src"],
    );
    ok(
        "runtime.memcpy",
        &[AnyView::NONE, AnyView::NONE, 0i64.into(), 0i64.into()],
    );
    err(
        "runtime.memcpy",
        &[pb, pa, 16i64.into()],
        "TypeError",
        &["expects 4 arguments, got 3"],
    );
    err(
        "runtime.memcpy_async",
        &[pb, pa, 16i64.into(), 0i64.into(), 1i64.into()],
        "TypeError",
        &["`stream`"],
    );
    let fake_stream = AnyView::from(0x10 as *mut c_void);
    err(
        "runtime.memcpy_async",
        &[pb, pa, 16i64.into(), 0i64.into(), fake_stream],
        "ValueError",
        &["not a live CPU stream"],
    );
}

#[test]
fn env_stream_is_used_when_none_is_passed() {
    ok("runtime.set_device", &[cpu().into()]);
    let s = ok("runtime.stream_create", &[cpu().into()]);
    let prev = anyffi_registry::env::set_stream(1, 0, ptr(&s));
    let mut a = [3u8; 8];
    let mut b = [0u8; 8];
    let (pa, pb) = (
        AnyView::from(a.as_mut_ptr() as *mut c_void),
        AnyView::from(b.as_mut_ptr() as *mut c_void),
    );
    ok(
        "runtime.memcpy_async",
        &[pb, pa, 8i64.into(), 0i64.into(), AnyView::NONE],
    );
    ok("runtime.stream_synchronize", &[cpu().into(), AnyView::NONE]);
    assert_eq!(b, [3u8; 8]);
    // A destroyed env stream is caught rather than used.
    ok(
        "runtime.stream_destroy",
        &[cpu().into(), AnyView::from(ptr(&s))],
    );
    err(
        "runtime.memcpy_async",
        &[pb, pa, 8i64.into(), 0i64.into(), AnyView::NONE],
        "ValueError",
        &["not a live CPU stream"],
    );
    anyffi_registry::env::set_stream(1, 0, prev);
}

#[test]
fn empty_cache_releases_cpu_blocks() {
    let c = cpu();
    // An unusual size so that no other test shares the class.
    let p = ok("runtime.malloc_device", &[c.into(), 3_000_001i64.into()]);
    ok("runtime.free_device", &[c.into(), AnyView::from(ptr(&p))]);
    let released = ok("runtime.empty_cache", &[c.into()]).get::<i64>().unwrap();
    assert!(released >= 3_000_001, "released {released}");
}

/// Every runtime.* function describes its signature in its metadata, as typed functions do.
#[test]
fn runtime_functions_carry_type_schemas() {
    ok("runtime.get_device", &[]); // the runtime is registered
    let names: Vec<String> = anyffi_registry::global::global_names()
        .into_iter()
        .filter(|n| n.starts_with("runtime."))
        .collect();
    assert!(names.len() >= 20, "{names:?}");
    for n in &names {
        let e = anyffi_registry::global::get_entry(n).unwrap();
        assert!(
            e.metadata.starts_with("{\"type_schema\":") && e.metadata.contains("named_args"),
            "{n}: {}",
            e.metadata
        );
    }
    let e = anyffi_registry::global::get_entry("runtime.malloc_device").unwrap();
    assert!(
        e.metadata.contains(r#"\"return\":[{\"type\":\"void*\"}],\"params\":[{\"type\":\"Device\"},{\"type\":\"int\"}]"#),
        "{}",
        e.metadata
    );
}
