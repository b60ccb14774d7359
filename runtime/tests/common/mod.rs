//! Helpers shared by the runtime integration tests: calling `runtime.*` through the global
//! registry, devices, and reading tensors.
#![allow(dead_code)]

use std::ffi::c_void;

use anyffi::abi::{kDLCPU, kDLCUDA, DLDataType, DLDevice};
use anyffi::{Any, AnyView, Error, Result, Shape, Tensor};

/// Calls the global function `name` (registering the runtime first).
pub fn call(name: &str, args: &[AnyView<'_>]) -> Result<Any> {
    tvm_ffi::register_all();
    let f = anyffi_registry::get_global(name).unwrap_or_else(|| panic!("{name} is not registered"));
    f.call(args)
}

/// Calls and unwraps, naming the function on failure.
pub fn ok(name: &str, args: &[AnyView<'_>]) -> Any {
    call(name, args).unwrap_or_else(|e| panic!("{name} failed: {}: {}", e.kind(), e.message()))
}

/// The error of a call that must fail with `kind`; its message must contain every needle.
pub fn err(name: &str, args: &[AnyView<'_>], kind: &str, needles: &[&str]) -> Error {
    let e = match call(name, args) {
        Ok(v) => panic!("{name} should fail with {kind}, returned {v:?}"),
        Err(e) => e,
    };
    assert_eq!(e.kind(), kind, "{name}: {}", e.message());
    for n in needles {
        assert!(
            e.message().contains(n),
            "{name}: message {:?} lacks {n:?}",
            e.message()
        );
    }
    e
}

pub fn cpu() -> DLDevice {
    DLDevice {
        device_type: kDLCPU,
        device_id: 0,
    }
}

pub fn cuda(id: i32) -> DLDevice {
    DLDevice {
        device_type: kDLCUDA,
        device_id: id,
    }
}

pub fn i64_dtype() -> DLDataType {
    DLDataType {
        code: 0,
        bits: 64,
        lanes: 1,
    }
}

pub fn f32_dtype() -> DLDataType {
    DLDataType {
        code: 2,
        bits: 32,
        lanes: 1,
    }
}

pub fn ptr(v: &Any) -> *mut c_void {
    v.as_view().as_opaque_ptr().expect("an opaque pointer")
}

/// `runtime.empty(shape, dtype, device)`.
pub fn empty(shape: &[i64], dtype: DLDataType, device: DLDevice) -> Tensor {
    let s = Shape::new(shape);
    ok(
        "runtime.empty",
        &[AnyView::from(&s), dtype.into(), device.into()],
    )
    .get::<Tensor>()
    .unwrap()
}

/// A CPU i64 tensor of `shape` holding 0, 1, 2, ...
pub fn arange_i64(shape: &[i64]) -> Tensor {
    let t = empty(shape, i64_dtype(), cpu());
    let n = t.numel() as usize;
    // SAFETY: a fresh contiguous CPU tensor of n i64 elements.
    let data = unsafe { std::slice::from_raw_parts_mut(t.dl_tensor.data as *mut i64, n) };
    for (i, x) in data.iter_mut().enumerate() {
        *x = i as i64;
    }
    t
}

/// The i64 elements of a CPU tensor in row-major order, read through its strides.
pub fn read_i64(t: &Tensor) -> Vec<i64> {
    let shape = t.shape().to_vec();
    let strides = t.strides().to_vec();
    let base = (t.dl_tensor.data as *const u8).wrapping_add(t.dl_tensor.byte_offset as usize)
        as *const i64;
    let n: i64 = shape.iter().product();
    let mut out = Vec::with_capacity(n as usize);
    for flat in 0..n {
        let (mut rem, mut off) = (flat, 0i64);
        for d in (0..shape.len()).rev() {
            off += (rem % shape[d]) * strides[d];
            rem /= shape[d];
        }
        // SAFETY: the offset addresses an element of the tensor's storage.
        out.push(unsafe { *base.offset(off as isize) });
    }
    out
}

/// Number of CUDA devices, printing why CUDA tests skip when there are none.
pub fn cuda_count_or_skip(test: &str) -> i32 {
    let n = ok("runtime.device_count", &[2i64.into()])
        .get::<i64>()
        .unwrap() as i32;
    if n == 0 {
        let e = call("runtime.set_device", &[cuda(0).into()]).unwrap_err();
        eprintln!("{test}: CUDA part skipped: {}", e.message());
    }
    n
}
