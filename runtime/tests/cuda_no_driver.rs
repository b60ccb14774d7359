//! With no CUDA driver, every op on CUDA tensors (DLTensor device_type 2, host buffers that are
//! never touched) is a RuntimeError that names the op and the missing `libcuda.so`, for every
//! dtype and for empty tensors, and nothing panics. Skipped where a driver with devices exists
//! (the pointers would then reach the GPU).

mod ops_common;

use ops_common::*;
use tvm_ffi::anyffi::abi::kDLCUDA;
use tvm_ffi::anyffi::AnyView;
use tvm_ffi::device::cuda::NO_DRIVER;

fn driver_present() -> bool {
    let n = tvm_ffi::device::device_count(kDLCUDA).unwrap();
    if n > 0 {
        eprintln!("skipped: a CUDA driver with {n} device(s) is present");
    }
    n > 0
}

/// A CUDA tensor (device `dev`) over a host buffer the op must not touch.
fn cuda(shape: &[i64], dt: Dt, dev: i32) -> HostTensor {
    let mut t = HostTensor::new(shape, dt);
    t.dl.device.device_type = kDLCUDA;
    t.dl.device.device_id = dev;
    t
}

/// Every op with valid shapes for `dt` on device `dev`, rows `m` (0 = empty tensors).
fn each_op(dt: Dt, dev: i32, m: i64, f: &mut dyn FnMut(&str, Vec<AnyView<'static>>)) {
    let keep: &mut Vec<HostTensor> = Box::leak(Box::default());
    let mut t = |shape: &[i64], d: Dt| {
        keep.push(cuda(shape, d, dev));
        keep.last().unwrap().view()
    };
    let f32v = |x: f64| AnyView::from(x);
    f(
        "ops.add",
        vec![t(&[m, 8], dt), t(&[m, 8], dt), t(&[m, 8], dt)],
    );
    f(
        "ops.swiglu",
        vec![t(&[m, 8], dt), t(&[m, 8], dt), t(&[m, 8], dt)],
    );
    f(
        "ops.argmax",
        vec![t(&[1], Dt::I64), t(&[1], dt), t(&[m.max(1)], dt)],
    );
    f(
        "ops.embedding",
        vec![t(&[m, 8], dt), t(&[m], Dt::I64), t(&[16, 8], dt)],
    );
    f(
        "ops.linear",
        vec![t(&[m, 6], dt), t(&[m, 4], dt), t(&[6, 4], dt), t(&[6], dt)],
    );
    f(
        "ops.linear",
        vec![
            t(&[m, 6], dt),
            t(&[m, 4], dt),
            t(&[6, 4], dt),
            AnyView::NONE,
        ],
    );
    f("ops.rearrange", vec![t(&[m, 8], dt), t(&[m, 8], dt)]);
    f(
        "ops.rms_norm",
        vec![t(&[m, 8], dt), t(&[m, 8], dt), t(&[8], dt), f32v(1e-6)],
    );
    f(
        "ops.rope",
        vec![
            t(&[m, 2, 8], dt),
            t(&[m, 2, 8], dt),
            t(&[m], Dt::I64),
            f32v(1e4),
        ],
    );
    f(
        "ops.self_attention",
        vec![
            t(&[m, 4, 8], dt),
            t(&[m, 4, 8], dt),
            t(&[m, 2, 8], dt),
            t(&[m, 2, 8], dt),
            f32v(0.35),
        ],
    );
    f(
        "ops.gemm",
        vec![
            t(&[m, 6], dt),
            t(&[m, 4], dt),
            t(&[4, 6], dt),
            f32v(1.0),
            f32v(0.0),
        ],
    );
    f(
        "ops.gemm",
        vec![
            t(&[2, m, 6], dt),
            t(&[2, m, 4], dt),
            t(&[4, 6], dt),
            f32v(2.0),
            f32v(1.0),
        ],
    );
}

#[test]
fn every_op_is_a_clear_runtime_error_without_a_driver() {
    if driver_present() {
        return;
    }
    let mut seen = std::collections::BTreeSet::new();
    for dt in FLOATS {
        for dev in [0, 1] {
            for m in [3, 0] {
                each_op(dt, dev, m, &mut |op, args| {
                    // A panic inside would surface as an error of another kind (the packed
                    // call's guard): the exact kind and text are checked.
                    let msg = err_of(call(op, &args));
                    let want =
                        format!("RuntimeError: {op}: cuda:{dev} is unavailable: {NO_DRIVER}");
                    assert!(
                        msg.starts_with(&want),
                        "{op} {dt:?} cuda:{dev} m {m}: {msg}"
                    );
                    seen.insert(op.to_string());
                });
            }
        }
    }
    // OPS-LIST: every registered op.
    assert_eq!(seen.len(), 10, "{seen:?}");
}

#[test]
fn device_and_kernel_libraries_report_missing_without_panicking() {
    if driver_present() {
        return;
    }
    // The kernel libraries are probed, never loaded blindly: with or without them, asking is
    // safe and names the library when missing.
    for (what, r) in [
        ("nvrtc", tvm_ffi::kernels::cuda::nvrtc::available()),
        ("cublas", tvm_ffi::kernels::cuda::blas::available()),
    ] {
        if let Err(e) = r {
            assert_eq!(e.kind(), "RuntimeError");
            assert!(
                e.message().contains(&format!("lib{what}.so")),
                "{}",
                e.message()
            );
        }
    }
}
