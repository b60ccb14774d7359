//! Bad input gets a clear error of the right kind naming the op and the argument: mismatched
//! shapes, mixed dtypes, wrong ranks, unsupported strides, NULL data, indivisible head counts,
//! CUDA tensors with no CUDA driver, wrong argument counts and types.

mod ops_common;

use ops_common::*;
use tvm_ffi::anyffi::abi::kDLCUDA;
use tvm_ffi::anyffi::AnyView;

#[track_caller]
fn expect_err(r: Result<tvm_ffi::anyffi::Any, tvm_ffi::anyffi::Error>, kind: &str, parts: &[&str]) {
    let msg = err_of(r);
    assert!(msg.starts_with(kind), "wrong kind: {msg}");
    for p in parts {
        assert!(msg.contains(p), "`{p}` missing from: {msg}");
    }
}

#[test]
fn linear_weight_shape_message() {
    let x = HostTensor::new(&[1, 1536], Dt::F32);
    let w = HostTensor::new(&[1536, 8960], Dt::F32);
    let y = HostTensor::new(&[1, 8960], Dt::F32);
    expect_err(
        call("ops.linear", &[y.view(), x.view(), w.view(), AnyView::NONE]),
        "ValueError",
        &["ops.linear: `weight` must have shape (N, K) = (8960, 1536), got (1536, 8960)"],
    );
    let b = HostTensor::new(&[8959], Dt::F32);
    let w = HostTensor::new(&[8960, 1536], Dt::F32);
    expect_err(
        call("ops.linear", &[y.view(), x.view(), w.view(), b.view()]),
        "ValueError",
        &["ops.linear", "`bias`", "(8960,)"],
    );
    let wb = HostTensor::new(&[8960, 1536], Dt::BF16);
    expect_err(
        call(
            "ops.linear",
            &[y.view(), x.view(), wb.view(), AnyView::NONE],
        ),
        "TypeError",
        &["ops.linear", "`weight`", "bfloat16", "float32"],
    );
}

/// Dtypes no op computes in are named as users write them (float64, uint8, float32x2), and
/// the plan cache keeps int8 and uint8 apart.
#[test]
fn unsupported_dtypes_are_named() {
    use tvm_ffi::anyffi::abi::{kDLFloat, kDLInt, kDLUInt, DLDataType};
    let c = HostTensor::new(&[2, 3], Dt::F32);
    let a = HostTensor::new(&[2, 3], Dt::F32);
    let mut b = HostTensor::new(&[2, 3], Dt::I64);
    for (dt, name) in [
        (
            DLDataType {
                code: kDLFloat,
                bits: 64,
                lanes: 1,
            },
            "got float64",
        ),
        (
            DLDataType {
                code: kDLFloat,
                bits: 32,
                lanes: 2,
            },
            "got float32x2",
        ),
        (
            DLDataType {
                code: kDLUInt,
                bits: 64,
                lanes: 1,
            },
            "got uint64",
        ),
    ] {
        b.dl.dtype = dt;
        expect_err(
            call("ops.add", &[c.view(), a.view(), b.view()]),
            "TypeError",
            &["ops.add", "`b`", "float32", name],
        );
    }
    // linear plans through the cache: an int8 call must not find a uint8 plan, or the reverse
    let (mut x, mut w, mut y) = (
        HostTensor::new(&[2, 4], Dt::I32),
        HostTensor::new(&[3, 4], Dt::I32),
        HostTensor::new(&[2, 3], Dt::I32),
    );
    for code in [kDLUInt, kDLInt, kDLUInt] {
        for t in [&mut x, &mut w, &mut y] {
            t.dl.dtype = DLDataType {
                code,
                bits: 8,
                lanes: 1,
            };
        }
        let name = if code == kDLInt { "int8" } else { "uint8" };
        expect_err(
            call("ops.linear", &[y.view(), x.view(), w.view(), AnyView::NONE]),
            "TypeError",
            &["ops.linear", name],
        );
    }
}

#[test]
fn shape_dtype_rank_errors() {
    let a = HostTensor::new(&[2, 3], Dt::F32);
    let b = HostTensor::new(&[3, 2], Dt::F32);
    let c = HostTensor::new(&[2, 3], Dt::F32);
    expect_err(
        call("ops.add", &[c.view(), a.view(), b.view()]),
        "ValueError",
        &["ops.add", "`b`", "(2, 3)", "(3, 2)"],
    );
    let h = HostTensor::new(&[2, 3], Dt::F16);
    expect_err(
        call("ops.add", &[c.view(), a.view(), h.view()]),
        "TypeError",
        &["ops.add", "`b`", "float16"],
    );
    expect_err(
        call("ops.swiglu", &[c.view(), h.view(), a.view()]),
        "TypeError",
        &["ops.swiglu", "`gate`"],
    );
    let i = HostTensor::new(&[2, 3], Dt::I64);
    expect_err(
        call("ops.add", &[i.view(), i.view(), i.view()]),
        "TypeError",
        &["ops.add", "`a`", "int64", "supported"],
    );
    // float32 inputs into a float16 output: the output is the odd one out
    expect_err(
        call("ops.add", &[h.view(), a.view(), c.view()]),
        "TypeError",
        &["ops.add: `c` must have the dtype of `a` (float32), got float16"],
    );
    // argmax: wrong rank and wrong index dtype
    let v2 = HostTensor::new(&[2, 3], Dt::F32);
    let idx = HostTensor::new(&[1], Dt::I64);
    let val = HostTensor::new(&[1], Dt::F32);
    expect_err(
        call("ops.argmax", &[idx.view(), val.view(), v2.view()]),
        "ValueError",
        &["ops.argmax", "`vals`", "1-D"],
    );
    let idx32 = HostTensor::new(&[1], Dt::I32);
    let v1 = HostTensor::new(&[5], Dt::F32);
    expect_err(
        call("ops.argmax", &[idx32.view(), val.view(), v1.view()]),
        "TypeError",
        &["`max_idx`", "int64"],
    );
    let empty = HostTensor::new(&[0], Dt::F32);
    expect_err(
        call("ops.argmax", &[idx.view(), val.view(), empty.view()]),
        "ValueError",
        &["empty"],
    );
    // rope: odd head size, wrong pos length, 2-D input
    let x = HostTensor::new(&[2, 1, 5], Dt::F32);
    let y = HostTensor::new(&[2, 1, 5], Dt::F32);
    let mut pos = HostTensor::new(&[2], Dt::I64);
    pos.set(&[0.0, 1.0]);
    expect_err(
        call(
            "ops.rope",
            &[y.view(), x.view(), pos.view(), AnyView::from(1e4)],
        ),
        "ValueError",
        &["ops.rope", "even"],
    );
    let x = HostTensor::new(&[3, 1, 4], Dt::F32);
    let y = HostTensor::new(&[3, 1, 4], Dt::F32);
    expect_err(
        call(
            "ops.rope",
            &[y.view(), x.view(), pos.view(), AnyView::from(1e4)],
        ),
        "ValueError",
        &["`pos_ids`", "(3,)"],
    );
    let x2 = HostTensor::new(&[3, 4], Dt::F32);
    expect_err(
        call(
            "ops.rope",
            &[x2.view(), x2.view(), pos.view(), AnyView::from(1e4)],
        ),
        "ValueError",
        &["`in`", "3-D"],
    );
    let fpos = HostTensor::new(&[3], Dt::F32);
    expect_err(
        call(
            "ops.rope",
            &[y.view(), x.view(), fpos.view(), AnyView::from(1e4)],
        ),
        "TypeError",
        &["`pos_ids`", "int64"],
    );
    // rms_norm: weight length, mixed weight dtype that is not f32
    let x = HostTensor::new(&[2, 8], Dt::BF16);
    let y = HostTensor::new(&[2, 8], Dt::BF16);
    let w = HostTensor::new(&[7], Dt::BF16);
    expect_err(
        call(
            "ops.rms_norm",
            &[y.view(), x.view(), w.view(), AnyView::from(1e-5)],
        ),
        "ValueError",
        &["`weight`", "(8,)", "(7,)"],
    );
    let wh = HostTensor::new(&[8], Dt::F16);
    expect_err(
        call(
            "ops.rms_norm",
            &[y.view(), x.view(), wh.view(), AnyView::from(1e-5)],
        ),
        "TypeError",
        &["`weight`", "float32"],
    );
    // gemm: inner dimensions
    let a = HostTensor::new(&[4, 5], Dt::F32);
    let b = HostTensor::new(&[6, 7], Dt::F32);
    let c = HostTensor::new(&[4, 7], Dt::F32);
    expect_err(
        call(
            "ops.gemm",
            &[
                c.view(),
                a.view(),
                b.view(),
                AnyView::from(1.0),
                AnyView::from(0.0),
            ],
        ),
        "ValueError",
        &["ops.gemm", "`b`", "(K, N) = (5, 7)", "(6, 7)"],
    );
}

#[test]
fn contiguity_null_overlap_errors() {
    // embedding needs contiguous weight
    let w = HostTensor::strided(&[4, 3], &[1, 4], Dt::F32);
    let mut idx = HostTensor::new(&[2], Dt::I64);
    idx.set(&[0.0, 3.0]);
    let out = HostTensor::new(&[2, 3], Dt::F32);
    expect_err(
        call("ops.embedding", &[out.view(), idx.view(), w.view()]),
        "ValueError",
        &["ops.embedding", "`weight`", "contiguous"],
    );
    // index out of range
    let w = HostTensor::new(&[4, 3], Dt::F32);
    idx.set(&[0.0, 4.0]);
    expect_err(
        call("ops.embedding", &[out.view(), idx.view(), w.view()]),
        "IndexError",
        &["index[1] = 4", "4 rows"],
    );
    // attention needs contiguous q
    let q = HostTensor::strided(&[2, 2, 4], &[16, 4, 1], Dt::F32);
    let k = HostTensor::new(&[2, 1, 4], Dt::F32);
    let o = HostTensor::new(&[2, 2, 4], Dt::F32);
    expect_err(
        call(
            "ops.self_attention",
            &[o.view(), q.view(), k.view(), k.view(), AnyView::from(0.5)],
        ),
        "ValueError",
        &["ops.self_attention", "`q`", "contiguous"],
    );
    // linear needs a unit-stride last dimension
    let x = HostTensor::strided(&[2, 4], &[1, 2], Dt::F32);
    let wl = HostTensor::new(&[3, 4], Dt::F32);
    let y = HostTensor::new(&[2, 3], Dt::F32);
    expect_err(
        call(
            "ops.linear",
            &[y.view(), x.view(), wl.view(), AnyView::NONE],
        ),
        "ValueError",
        &["`in`", "stride 1"],
    );
    // NULL data
    let mut a = HostTensor::new(&[2, 3], Dt::F32);
    a.dl.data = std::ptr::null_mut();
    let b = HostTensor::new(&[2, 3], Dt::F32);
    expect_err(
        call("ops.add", &[b.view(), a.view(), b.view()]),
        "ValueError",
        &["ops.add", "`a`", "NULL data"],
    );
    // output overlapping an input (not the same elements)
    let mut big = HostTensor::new(&[4, 3], Dt::F32);
    big.set(&[0.0; 12]);
    let mut shifted = HostTensor::new(&[3, 3], Dt::F32);
    shifted.dl.data = big.dl.data;
    shifted.dl.byte_offset = 12;
    let first = HostTensor::new(&[3, 3], Dt::F32);
    let mut first = first;
    first.dl.data = big.dl.data;
    expect_err(
        call("ops.add", &[shifted.view(), first.view(), first.view()]),
        "ValueError",
        &["partially overlaps"],
    );
    // interleaved views of one buffer (numpy's buf[:, ::2] and buf[:, 1::2]) share no element:
    // accepted, and only the even columns are written
    let mut buf = HostTensor::new(&[3, 8], Dt::F32);
    buf.set(&(0..24).map(|i| i as f64).collect::<Vec<_>>());
    let (even, odd) = (
        HostTensor::strided(&[3, 4], &[8, 2], Dt::F32),
        HostTensor::strided(&[3, 4], &[8, 2], Dt::F32),
    );
    let (mut even, mut odd) = (even, odd);
    even.dl.data = buf.dl.data;
    odd.dl.data = buf.dl.data;
    odd.dl.byte_offset = 4;
    call("ops.add", &[even.view(), odd.view(), odd.view()]).unwrap();
    let got = buf.get();
    for (i, g) in got.iter().enumerate() {
        let want = if i % 2 == 0 {
            2.0 * (i + 1) as f64
        } else {
            i as f64
        };
        assert_eq!(*g, want, "element {i}");
    }
    // columns 0..4 against columns 2..6 of the same rows: they share elements
    let mut left = HostTensor::strided(&[3, 4], &[8, 1], Dt::F32);
    let mut right = HostTensor::strided(&[3, 4], &[8, 1], Dt::F32);
    left.dl.data = buf.dl.data;
    right.dl.data = buf.dl.data;
    right.dl.byte_offset = 8;
    expect_err(
        call("ops.add", &[left.view(), right.view(), right.view()]),
        "ValueError",
        &["partially overlaps"],
    );
    let x = HostTensor::new(&[1, 3], Dt::F32);
    let w = HostTensor::new(&[3, 3], Dt::F32);
    let mut y = HostTensor::new(&[1, 3], Dt::F32);
    y.dl.data = w.dl.data;
    expect_err(
        call("ops.linear", &[y.view(), x.view(), w.view(), AnyView::NONE]),
        "ValueError",
        &["`out` overlaps input `weight`"],
    );
}

#[test]
fn head_counts_and_cache_length() {
    let q = HostTensor::new(&[1, 5, 8], Dt::F32);
    let k = HostTensor::new(&[4, 2, 8], Dt::F32);
    let o = HostTensor::new(&[1, 5, 8], Dt::F32);
    expect_err(
        call(
            "ops.self_attention",
            &[o.view(), q.view(), k.view(), k.view(), AnyView::from(0.3)],
        ),
        "ValueError",
        &["nhead (5) must be a multiple of nkvhead (2)"],
    );
    let q = HostTensor::new(&[5, 2, 8], Dt::F32);
    let o = HostTensor::new(&[5, 2, 8], Dt::F32);
    expect_err(
        call(
            "ops.self_attention",
            &[o.view(), q.view(), k.view(), k.view(), AnyView::from(0.3)],
        ),
        "ValueError",
        &["total_len (4) must be >= seqlen (5)"],
    );
    let q = HostTensor::new(&[1, 2, 8], Dt::F32);
    let o = HostTensor::new(&[1, 2, 8], Dt::F32);
    let k7 = HostTensor::new(&[4, 2, 7], Dt::F32);
    expect_err(
        call(
            "ops.self_attention",
            &[o.view(), q.view(), k7.view(), k.view(), AnyView::from(0.3)],
        ),
        "ValueError",
        &["`k`", "(4, 2, 8)"],
    );
}

#[test]
fn devices_arguments_and_types() {
    let mut a = HostTensor::new(&[2, 3], Dt::F32);
    let b = HostTensor::new(&[2, 3], Dt::F32);
    a.dl.device.device_type = kDLCUDA;
    expect_err(
        call("ops.add", &[b.view(), a.view(), b.view()]),
        "ValueError",
        &["`a` is on cuda:0 but `c` is on cpu:0"],
    );
    let mut c = HostTensor::new(&[2, 3], Dt::F32);
    c.dl.device.device_type = kDLCUDA;
    let mut d = HostTensor::new(&[2, 3], Dt::F32);
    d.dl.device.device_type = kDLCUDA;
    if tvm_ffi::device::device_count(kDLCUDA).unwrap() == 0 {
        // With a driver the call would reach the GPU with host pointers; cuda_ops.rs covers it.
        expect_err(
            call("ops.add", &[c.view(), a.view(), d.view()]),
            "RuntimeError",
            &["ops.add: cuda:0 is unavailable"],
        );
    }
    expect_err(
        call("ops.add", &[b.view(), b.view()]),
        "TypeError",
        &["ops.add: expected 3 arguments (c, a, b), got 2"],
    );
    expect_err(
        call("ops.add", &[b.view(), AnyView::from(3i64), b.view()]),
        "TypeError",
        &["ops.add: argument #1 (`a`) must be an ffi.Tensor or a DLTensor*, got int"],
    );
    let x = HostTensor::new(&[1, 4], Dt::F32);
    let w = HostTensor::new(&[4], Dt::F32);
    expect_err(
        call(
            "ops.rms_norm",
            &[x.view(), x.view(), w.view(), AnyView::NONE],
        ),
        "TypeError",
        &["ops.rms_norm: argument #3 (`eps`) must be a float"],
    );
    // a CUDA error is not cached as a plan: the same layout on the CPU works afterwards
    let mut wc = HostTensor::new(&[3, 4], Dt::F32);
    wc.dl.device.device_type = kDLCUDA;
    let mut xc = HostTensor::new(&[1, 4], Dt::F32);
    xc.dl.device.device_type = kDLCUDA;
    let mut yc = HostTensor::new(&[1, 3], Dt::F32);
    yc.dl.device.device_type = kDLCUDA;
    if tvm_ffi::device::device_count(kDLCUDA).unwrap() == 0 {
        expect_err(
            call(
                "ops.linear",
                &[yc.view(), xc.view(), wc.view(), AnyView::NONE],
            ),
            "RuntimeError",
            &["ops.linear: cuda:0 is unavailable"],
        );
    }
}

#[test]
fn ffi_tensor_objects_work_too() {
    // ops accept ffi.Tensor objects (type index 70), not only DLTensor* views.
    use tvm_ffi::anyffi::abi::{kDLCPU, kDLFloat, DLDataType, DLDevice};
    use tvm_ffi::anyffi::Tensor;
    let shape = vec![2i64, 3];
    let mk = |mut vals: Vec<f32>| {
        let data = vals.as_mut_ptr() as *mut std::ffi::c_void;
        let dev = DLDevice {
            device_type: kDLCPU,
            device_id: 0,
        };
        let dt = DLDataType {
            code: kDLFloat,
            bits: 32,
            lanes: 1,
        };
        // SAFETY: `vals` holds the 6 f32s of shape (2, 3) at `data` and lives with the tensor.
        unsafe { Tensor::from_owned_memory(data, dev, dt, &shape, None, 0, Box::new(vals)) }
    };
    let (a, b, c) = (mk(vec![1.0; 6]), mk(vec![2.0; 6]), mk(vec![0.0; 6]));
    call(
        "ops.add",
        &[AnyView::from(&c), AnyView::from(&a), AnyView::from(&b)],
    )
    .unwrap();
    let p = c.dl_tensor.data as *const f32;
    // SAFETY: 6 floats owned by c.
    assert_eq!(unsafe { std::slice::from_raw_parts(p, 6) }, &[3.0; 6]);
}

#[test]
fn plan_cache_capacity_function() {
    let old = call("ops.plan_cache_capacity", &[AnyView::from(0i64)]).unwrap();
    let mut rng = Rng::new(3);
    let (x, _) = rand_tensor(&mut rng, &[3, 8], Dt::F32, 1.0, 0.0);
    let (w, _) = rand_tensor(&mut rng, &[5, 8], Dt::F32, 1.0, 0.0);
    let y1 = HostTensor::new(&[3, 5], Dt::F32);
    call(
        "ops.linear",
        &[y1.view(), x.view(), w.view(), AnyView::NONE],
    )
    .unwrap();
    call(
        "ops.plan_cache_capacity",
        &[AnyView::from(old.get::<i64>().unwrap())],
    )
    .unwrap();
    let y2 = HostTensor::new(&[3, 5], Dt::F32);
    call(
        "ops.linear",
        &[y2.view(), x.view(), w.view(), AnyView::NONE],
    )
    .unwrap();
    call(
        "ops.linear",
        &[y2.view(), x.view(), w.view(), AnyView::NONE],
    )
    .unwrap();
    assert_eq!(y1.get(), y2.get());
    expect_err(
        call("ops.plan_cache_capacity", &[AnyView::from(-1i64)]),
        "ValueError",
        &["ops.plan_cache_capacity", "`capacity`", "got -1"],
    );
    expect_err(
        call("ops.plan_cache_capacity", &[AnyView::from(1.5)]),
        "TypeError",
        &["ops.plan_cache_capacity", "`capacity`", "float"],
    );
}

/// Shapes whose element count overflows, and sub-byte element types, are refused before any
/// kernel runs; empty tensors with zero strides (numpy's) are accepted by ops that want unit
/// last strides.
#[test]
fn absurd_shapes_sub_byte_dtypes_and_empty_zero_strides() {
    use tvm_ffi::anyffi::abi::{kDLInt, DLDataType};
    let c = HostTensor::new(&[2, 3], Dt::F32);
    let mut a = HostTensor::new(&[2, 3], Dt::F32);
    a.shape[0] = 1 << 32;
    a.shape[1] = 1 << 32;
    expect_err(
        call("ops.add", &[c.view(), a.view(), c.view()]),
        "ValueError",
        &[
            "ops.add",
            "`a`",
            "(4294967296, 4294967296)",
            "address space",
        ],
    );
    a.shape[0] = 0; // an empty tensor, whatever its other dimensions
    expect_err(
        call("ops.add", &[c.view(), a.view(), c.view()]),
        "ValueError",
        &["ops.add", "`a`", "must have the shape of"],
    );
    let (mut o, mut x) = (
        HostTensor::new(&[4], Dt::F32),
        HostTensor::new(&[4], Dt::F32),
    );
    for t in [&mut o, &mut x] {
        t.dl.dtype = DLDataType {
            code: kDLInt,
            bits: 4,
            lanes: 1,
        };
    }
    expect_err(
        call("ops.rearrange", &[o.view(), x.view()]),
        "TypeError",
        &["ops.rearrange", "`out`", "int4", "whole-byte"],
    );
    let (mut y, mut x) = (
        HostTensor::new(&[0, 8], Dt::F32),
        HostTensor::new(&[0, 8], Dt::F32),
    );
    for t in [&mut y, &mut x] {
        t.strides[0] = 0;
        t.strides[1] = 0;
    }
    let w = HostTensor::new(&[8], Dt::F32);
    call(
        "ops.rms_norm",
        &[y.view(), x.view(), w.view(), AnyView::from(1e-5)],
    )
    .unwrap();
}

#[test]
fn outputs_that_write_an_element_twice_are_refused() {
    // a zero stride on a dimension of size > 1 (numpy's broadcast_to made writeable, as_strided):
    // several threads would write one element; PyTorch and runtime.copy_ refuse it too
    let t = |shape: &[i64], dt: Dt| HostTensor::new(shape, dt);
    let zero = |mut h: HostTensor, dim: usize| {
        h.strides[dim] = 0;
        h
    };
    let mut idx = t(&[2], Dt::I64);
    idx.set(&[0.0, 1.0]);
    let mut pos = t(&[2], Dt::I64);
    pos.set(&[0.0, 1.0]);
    let f = AnyView::from;
    let cases: Vec<(&str, &str, Vec<HostTensor>, Vec<AnyView<'static>>)> = vec![
        (
            "ops.add",
            "`c`",
            vec![
                zero(t(&[2, 3], Dt::F32), 0),
                t(&[2, 3], Dt::F32),
                t(&[2, 3], Dt::F32),
            ],
            vec![],
        ),
        (
            "ops.swiglu",
            "`out`",
            vec![
                zero(t(&[2, 3], Dt::F32), 1),
                t(&[2, 3], Dt::F32),
                t(&[2, 3], Dt::F32),
            ],
            vec![],
        ),
        (
            "ops.rms_norm",
            "`out`",
            vec![
                zero(t(&[2, 8], Dt::F32), 0),
                t(&[2, 8], Dt::F32),
                t(&[8], Dt::F32),
            ],
            vec![f(1e-5)],
        ),
        (
            "ops.rope",
            "`out`",
            vec![zero(t(&[2, 2, 4], Dt::F32), 1), t(&[2, 2, 4], Dt::F32), pos],
            vec![f(1e4)],
        ),
        (
            "ops.rearrange",
            "`out`",
            vec![zero(t(&[2, 3], Dt::F32), 0), t(&[2, 3], Dt::F32)],
            vec![],
        ),
        (
            "ops.linear",
            "`out`",
            vec![
                zero(t(&[2, 4], Dt::F32), 0),
                t(&[2, 3], Dt::F32),
                t(&[4, 3], Dt::F32),
            ],
            vec![AnyView::NONE],
        ),
        (
            "ops.gemm",
            "`c`",
            vec![
                zero(t(&[2, 4], Dt::F32), 1),
                t(&[2, 3], Dt::F32),
                t(&[3, 4], Dt::F32),
            ],
            vec![f(1.0), f(0.0)],
        ),
        (
            "ops.embedding",
            "`out`",
            vec![zero(t(&[2, 4], Dt::F32), 0), idx, t(&[5, 4], Dt::F32)],
            vec![],
        ),
        (
            "ops.self_attention",
            "`attn_val`",
            vec![
                zero(t(&[1, 2, 4], Dt::F32), 1),
                t(&[1, 2, 4], Dt::F32),
                t(&[3, 1, 4], Dt::F32),
                t(&[3, 1, 4], Dt::F32),
            ],
            vec![f(0.5)],
        ),
    ];
    for (op, name, ts, scalars) in &cases {
        let mut args: Vec<AnyView<'_>> = ts.iter().map(|h| h.view()).collect();
        args.extend(scalars.iter().copied());
        expect_err(
            call(op, &args),
            "ValueError",
            &[op, name, "zero stride", "more than once"],
        );
    }
}

/// The scalars run in float32: NaN, inf, and values that round to inf or (for eps and theta) to
/// 0 there are refused, naming the argument; in-range values work.
#[test]
fn float_scalars_outside_float32_are_refused() {
    let x = HostTensor::new(&[2, 2, 8], Dt::F32);
    let y = HostTensor::new(&[2, 2, 8], Dt::F32);
    let pos = HostTensor::new(&[2], Dt::I64);
    let rope = |theta: f64| {
        call(
            "ops.rope",
            &[y.view(), x.view(), pos.view(), AnyView::from(theta)],
        )
    };
    for (theta, want) in [
        (f64::NAN, "`theta` must be a finite number > 0, got NaN"),
        (
            f64::INFINITY,
            "`theta` must be a finite number > 0, got inf",
        ),
        (-1.0, "`theta` must be a finite number > 0, got -1"),
        (
            1e39,
            "`theta` = 1000000000000000000000000000000000000000 is out of the float32 range",
        ),
        (1e-50, "rounds to 0 in float32"),
    ] {
        expect_err(rope(theta), "ValueError", &["ops.rope: ", want]);
    }
    rope(1e4).unwrap();
    let w = HostTensor::new(&[8], Dt::F32);
    let norm = |eps: f64| {
        call(
            "ops.rms_norm",
            &[y.view(), x.view(), w.view(), AnyView::from(eps)],
        )
    };
    for (eps, want) in [
        (f64::NAN, "`eps` must be a finite number >= 0, got NaN"),
        (f64::INFINITY, "`eps` must be a finite number >= 0, got inf"),
        (-1e-6, "`eps` must be a finite number >= 0"),
        (1e39, "is out of the float32 range (it rounds to inf)"),
        (1e-50, "`eps` = 0.00000"),
    ] {
        expect_err(norm(eps), "ValueError", &["ops.rms_norm: ", want]);
    }
    norm(0.0).unwrap();
    norm(1e-6).unwrap();
    let attn = |scale: f64| {
        call(
            "ops.self_attention",
            &[y.view(), x.view(), x.view(), x.view(), AnyView::from(scale)],
        )
    };
    for (scale, want) in [
        (f64::NAN, "`scale` must be a finite number, got NaN"),
        (
            f64::NEG_INFINITY,
            "`scale` must be a finite number, got -inf",
        ),
        (1e39, "is out of the float32 range"),
    ] {
        expect_err(attn(scale), "ValueError", &["ops.self_attention: ", want]);
    }
    attn(0.0).unwrap();
    // an odd head size names `in`, the argument's name
    let x7 = HostTensor::new(&[2, 2, 7], Dt::F32);
    expect_err(
        call(
            "ops.rope",
            &[x7.view(), x7.view(), pos.view(), AnyView::from(1e4)],
        ),
        "ValueError",
        &["ops.rope: `in` must have an even head size"],
    );
}

/// Literal shapes are written once, and dtypes outside the ops' set by their names.
#[test]
fn shapes_and_dtypes_in_messages() {
    use tvm_ffi::anyffi::abi::{kDLFloat8_e4m3fn, DLDataType};
    let vals = HostTensor::new(&[5], Dt::F32);
    let idx = HostTensor::new(&[], Dt::I64);
    let val = HostTensor::new(&[1], Dt::F32);
    expect_err(
        call("ops.argmax", &[idx.view(), val.view(), vals.view()]),
        "ValueError",
        &["ops.argmax: `max_idx` must have shape (1,), got ()"],
    );
    let a = HostTensor::new(&[2], Dt::F32);
    for (dt, name) in [
        (
            DLDataType {
                code: 5,
                bits: 64,
                lanes: 1,
            },
            "got complex64",
        ),
        (
            DLDataType {
                code: kDLFloat8_e4m3fn,
                bits: 8,
                lanes: 1,
            },
            "got float8_e4m3fn",
        ),
    ] {
        let mut b = HostTensor::new(&[2], Dt::F32);
        b.dl.dtype = dt;
        expect_err(
            call("ops.add", &[a.view(), a.view(), b.view()]),
            "TypeError",
            &["ops.add", "`b`", name],
        );
    }
}

/// When the inputs agree with each other, a wrong output shape blames the output.
#[test]
fn wrong_output_shapes_blame_the_output() {
    let x = HostTensor::new(&[2, 4], Dt::F32);
    let w = HostTensor::new(&[3, 4], Dt::F32);
    let y = HostTensor::new(&[2, 5], Dt::F32);
    expect_err(
        call("ops.linear", &[y.view(), x.view(), w.view(), AnyView::NONE]),
        "ValueError",
        &["ops.linear: `out` must have shape (M, N) = (2, 3), got (2, 5)"],
    );
    let (a, b) = (
        HostTensor::new(&[2, 3], Dt::F32),
        HostTensor::new(&[3, 4], Dt::F32),
    );
    let one = AnyView::from(1.0);
    for (shape, want) in [
        (
            &[2, 5][..],
            "ops.gemm: `c` must have shape (M, N) = (2, 4), got (2, 5)",
        ),
        (
            &[3, 4][..],
            "ops.gemm: `c` must have shape (M, N) = (2, 4), got (3, 4)",
        ),
        (
            &[2, 2, 5][..],
            "ops.gemm: `c` must have shape (B, M, N) = (2, 2, 4), got (2, 2, 5)",
        ),
    ] {
        let c = HostTensor::new(shape, Dt::F32);
        expect_err(
            call("ops.gemm", &[c.view(), a.view(), b.view(), one, one]),
            "ValueError",
            &[want],
        );
    }
    // a batch `a` and `b` agree on that `c` lacks: `c` is blamed
    let a3 = HostTensor::new(&[2, 2, 3], Dt::F32);
    let c3 = HostTensor::new(&[3, 2, 4], Dt::F32);
    expect_err(
        call("ops.gemm", &[c3.view(), a3.view(), b.view(), one, one]),
        "ValueError",
        &["ops.gemm: `c` must have shape (B, M, N) = (2, 2, 4), got (3, 2, 4)"],
    );
    let b3 = HostTensor::new(&[2, 3, 4], Dt::F32);
    expect_err(
        call("ops.gemm", &[c3.view(), a3.view(), b3.view(), one, one]),
        "ValueError",
        &["ops.gemm: `c` must have shape (B, M, N) = (2, 2, 4), got (3, 2, 4)"],
    );
    // `a` and `b` of different batches: an operand is blamed
    let b4 = HostTensor::new(&[4, 3, 4], Dt::F32);
    let c2 = HostTensor::new(&[2, 2, 4], Dt::F32);
    expect_err(
        call("ops.gemm", &[c2.view(), a3.view(), b4.view(), one, one]),
        "ValueError",
        &["ops.gemm: `b` must have shape (B, K, N) = (2, 3, 4), got (4, 3, 4)"],
    );
    // inner dimensions that disagree still blame the operand
    let b5 = HostTensor::new(&[5, 4], Dt::F32);
    let c = HostTensor::new(&[2, 4], Dt::F32);
    expect_err(
        call("ops.gemm", &[c.view(), a.view(), b5.view(), one, one]),
        "ValueError",
        &["`b` must have shape (K, N) = (3, 4), got (5, 4)"],
    );
}
