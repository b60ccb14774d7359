//! Tensors through the packed `runtime.*` functions: the LLAISYS tensor vector ((3,4,5) i64
//! view/permute/slice), storage lifetime, copies across layouts and devices, the DLPack
//! allocator behind `TVMFFIEnvTensorAlloc`, and the bad inputs of each function.

mod common;

use std::ffi::c_void;

use anyffi::abi::{DLDevice, DLTensor};
use anyffi::{Any, AnyView, Shape, Tensor};
use common::*;

fn shape(d: &[i64]) -> Shape {
    Shape::new(d)
}

fn view(t: &Tensor, s: &[i64]) -> Tensor {
    let s = shape(s);
    ok("runtime.view", &[t.into(), AnyView::from(&s)])
        .get::<Tensor>()
        .unwrap()
}

fn permute(t: &Tensor, o: &[i64]) -> Tensor {
    let o = shape(o);
    ok("runtime.permute", &[t.into(), AnyView::from(&o)])
        .get::<Tensor>()
        .unwrap()
}

fn slice(t: &Tensor, dim: i64, start: i64, end: i64) -> Tensor {
    ok(
        "runtime.slice",
        &[t.into(), dim.into(), start.into(), end.into()],
    )
    .get::<Tensor>()
    .unwrap()
}

/// Row-major reference of `t[perm]` for a contiguous (3,4,5) arange.
fn expected_permuted(shape: &[i64], order: &[usize]) -> Vec<i64> {
    let strides = anyffi::tensor::compact_strides(shape);
    let new_shape: Vec<i64> = order.iter().map(|&d| shape[d]).collect();
    let n: i64 = shape.iter().product();
    (0..n)
        .map(|flat| {
            let (mut rem, mut off) = (flat, 0);
            for k in (0..new_shape.len()).rev() {
                off += (rem % new_shape[k]) * strides[order[k]];
                rem /= new_shape[k];
            }
            off
        })
        .collect()
}

#[test]
fn llaisys_tensor_vector() {
    let t = arange_i64(&[3, 4, 5]);
    assert_eq!(t.shape(), &[3, 4, 5]);
    assert_eq!(t.strides(), &[20, 5, 1]);
    assert!(t.is_contiguous());
    assert_eq!(t.dl_tensor.data as usize % 64, 0);

    let v = view(&t, &[6, 10]);
    assert_eq!((v.shape(), v.strides()), (&[6i64, 10][..], &[10i64, 1][..]));
    assert_eq!(read_i64(&v), (0..60).collect::<Vec<_>>());
    assert_eq!(v.dl_tensor.data, t.dl_tensor.data, "views share storage");

    let p = permute(&t, &[2, 0, 1]);
    assert_eq!(
        (p.shape(), p.strides()),
        (&[5i64, 3, 4][..], &[1i64, 20, 5][..])
    );
    assert_eq!(read_i64(&p), expected_permuted(&[3, 4, 5], &[2, 0, 1]));

    let s = slice(&t, 2, 1, 4);
    assert_eq!(
        (s.shape(), s.strides()),
        (&[3i64, 4, 3][..], &[20i64, 5, 1][..])
    );
    assert_eq!(s.dl_tensor.byte_offset, 8, "data starts at element 1");
    let want: Vec<i64> = (0..60).filter(|i| (1..4).contains(&(i % 5))).collect();
    assert_eq!(read_i64(&s), want);
}

#[test]
fn view_rejects_incompatible_strides() {
    // LLAISYS: (2,3,5) with strides (30,10,1) cannot become (2,15).
    let base = arange_i64(&[2, 3, 10]);
    let t = slice(&base, 2, 0, 5);
    assert_eq!(t.strides(), &[30, 10, 1]);
    let s = shape(&[2, 15]);
    err(
        "runtime.view",
        &[(&t).into(), AnyView::from(&s)],
        "ValueError",
        &["runtime.view", "incompatible"],
    );
    // Splitting a dimension is fine.
    let ok_view = view(&t, &[2, 3, 5, 1]);
    assert_eq!(ok_view.strides(), &[30, 10, 1, 1]);
    // contiguous() then view works and keeps the values.
    let c = ok("runtime.contiguous", &[(&t).into()])
        .get::<Tensor>()
        .unwrap();
    assert!(c.is_contiguous());
    assert_eq!(read_i64(&view(&c, &[2, 15])), read_i64(&t));
}

#[test]
fn views_keep_storage_alive() {
    let t = arange_i64(&[4, 1001]);
    let data = t.dl_tensor.data;
    let v = slice(&permute(&t, &[1, 0]), 0, 1000, 1001);
    drop(t);
    assert!(tvm_ffi::device::caching::CPU_ALLOCATOR
        .block_size(data as *const u8)
        .is_some());
    assert_eq!(read_i64(&v), vec![1000, 2001, 3002, 4003]);
    drop(v);
    assert!(
        tvm_ffi::device::caching::CPU_ALLOCATOR
            .block_size(data as *const u8)
            .is_none(),
        "the storage is released with the last view"
    );
}

#[test]
fn copies_across_layouts() {
    let src = arange_i64(&[3, 4, 5]);
    let p = permute(&src, &[2, 0, 1]);
    // Non-contiguous source into a contiguous destination.
    let dst = empty(&[5, 3, 4], i64_dtype(), cpu());
    ok("runtime.copy_", &[(&dst).into(), (&p).into()]);
    assert_eq!(read_i64(&dst), read_i64(&p));
    // Contiguous source into a non-contiguous destination (a slice of a bigger tensor).
    let big = arange_i64(&[5, 3, 8]);
    let window = slice(&big, 2, 2, 6);
    ok(
        "runtime.copy_",
        &[(&window).into(), (&view(&dst, &[5, 3, 4])).into()],
    );
    let all = read_i64(&big);
    for i in 0..5 {
        for j in 0..3 {
            for k in 0..8 {
                let got = all[(i * 24 + j * 8 + k) as usize];
                let want = if (2..6).contains(&k) {
                    read_i64(&p)[(i * 12 + j * 4 + k - 2) as usize]
                } else {
                    i * 24 + j * 8 + k
                };
                assert_eq!(got, want, "({i},{j},{k})");
            }
        }
    }
    // contiguous() of a contiguous tensor and to_device() to its own device return it as is.
    let same = ok("runtime.contiguous", &[(&dst).into()])
        .get::<Tensor>()
        .unwrap();
    assert!(same.same_as(&dst));
    let same = ok("runtime.to_device", &[(&dst).into(), cpu().into()])
        .get::<Tensor>()
        .unwrap();
    assert!(same.same_as(&dst));
}

/// A copy between overlapping layouts of the same storage reads the whole source first (as
/// numpy's copyto): a tensor into its own transpose, and shifted windows both ways.
#[test]
fn overlapping_copies_read_the_source_first() {
    let t = arange_i64(&[4, 4]);
    ok(
        "runtime.copy_",
        &[(&t).into(), (&permute(&t, &[1, 0])).into()],
    );
    let want: Vec<i64> = (0..16).map(|i| (i % 4) * 4 + i / 4).collect();
    assert_eq!(read_i64(&t), want);
    let r = arange_i64(&[8]);
    ok(
        "runtime.copy_",
        &[(&slice(&r, 0, 1, 8)).into(), (&slice(&r, 0, 0, 7)).into()],
    );
    assert_eq!(read_i64(&r), vec![0, 0, 1, 2, 3, 4, 5, 6]);
    ok(
        "runtime.copy_",
        &[(&slice(&r, 0, 0, 7)).into(), (&slice(&r, 0, 1, 8)).into()],
    );
    assert_eq!(read_i64(&r), vec![0, 1, 2, 3, 4, 5, 6, 6]);
    ok("runtime.copy_", &[(&r).into(), (&r).into()]); // the same elements: nothing to do
    assert_eq!(read_i64(&r), vec![0, 1, 2, 3, 4, 5, 6, 6]);
}

/// A live tensor's storage cannot be freed by hand (the allocator would hand the block to a
/// second tensor); once the tensor is gone, the address is nobody's special case.
#[test]
fn tensor_storage_is_not_free_device_memory() {
    let t = arange_i64(&[1000]);
    let p = t.dl_tensor.data;
    err(
        "runtime.free_device",
        &[cpu().into(), AnyView::from(p)],
        "ValueError",
        &["runtime.free_device", "storage of a live tensor"],
    );
    err(
        "runtime.free_host",
        &[cpu().into(), AnyView::from(p)],
        "ValueError",
        &["runtime.free_host", "storage of a live tensor"],
    );
    assert_eq!(read_i64(&t)[999], 999); // untouched
    drop(t);
    let raw = ok("runtime.malloc_device", &[cpu().into(), 64i64.into()]);
    let q: *mut c_void = raw.get().unwrap();
    ok("runtime.free_device", &[cpu().into(), AnyView::from(q)]);
}

/// A double free of a raw block racing another thread's tensor allocations: the second free
/// is refused, or finds the block free again, but never frees a block a tensor took in between
/// (the check and the free were not atomic with the tensor's allocation and registration:
/// thousands of tensors per second lost their storage).
///
/// The blocks are 1344 bytes, a size no other test here allocates raw: the deliberate double
/// free may free a raw block another test running in parallel took meanwhile (as any double
/// free may), which then failed that test's free or this one's (seen once under load).
#[test]
fn double_free_racing_tensor_allocation_never_frees_a_tensor() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let stop = AtomicBool::new(false);
    let (wrong, checked) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let raw = ok("runtime.malloc_device", &[cpu().into(), 1344i64.into()]);
                let q: *mut c_void = raw.get().unwrap();
                ok("runtime.free_device", &[cpu().into(), AnyView::from(q)]);
                if call("runtime.free_device", &[cpu().into(), AnyView::from(q)]).is_ok() {
                    wrong.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                // 1344 bytes: the raw block's size class
                let t = empty(&[168], i64_dtype(), cpu());
                // SAFETY: a live CPU tensor of 168 int64.
                unsafe { std::ptr::write_bytes(t.dl_tensor.data as *mut u8, 7, 1344) };
                drop(t);
                checked.fetch_add(1, Ordering::Relaxed);
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(1500));
        stop.store(true, Ordering::Relaxed);
    });
    assert!(checked.load(Ordering::Relaxed) > 1000);
    assert_eq!(
        wrong.load(Ordering::Relaxed),
        0,
        "second frees that succeeded"
    );
}

#[test]
fn borrowed_dltensor_arguments() {
    let src = arange_i64(&[2, 3]);
    let dst = empty(&[2, 3], i64_dtype(), cpu());
    // SAFETY: `src` and `dst` outlive every use of these views below.
    let src_dl =
        unsafe { AnyView::from_dltensor_ptr(&src.dl_tensor as *const DLTensor as *mut DLTensor) };
    // SAFETY: as above.
    let dst_dl =
        unsafe { AnyView::from_dltensor_ptr(&dst.dl_tensor as *const DLTensor as *mut DLTensor) };
    ok("runtime.copy_", &[dst_dl, src_dl]);
    assert_eq!(read_i64(&dst), (0..6).collect::<Vec<_>>());
    // A borrowed view gets a fresh copy from contiguous()/to_device().
    let c = ok("runtime.contiguous", &[src_dl]).get::<Tensor>().unwrap();
    assert!(!c.same_as(&src));
    assert_eq!(read_i64(&c), (0..6).collect::<Vec<_>>());
    // A non-empty DLTensor without memory is a ValueError, not a crash.
    let mut null_dl = src.dl_tensor;
    null_dl.data = std::ptr::null_mut();
    // SAFETY: `null_dl` (shape and strides from `src`) outlives the calls below.
    let null_p = unsafe { AnyView::from_dltensor_ptr(&mut null_dl as *mut DLTensor) };
    err(
        "runtime.copy_",
        &[dst_dl, null_p],
        "ValueError",
        &["runtime.copy_", "`src` has NULL data"],
    );
    err(
        "runtime.contiguous",
        &[null_p],
        "ValueError",
        &["runtime.contiguous", "`t` has NULL data"],
    );
    // Functions that return views need the object that owns the storage.
    let s = shape(&[6]);
    err(
        "runtime.view",
        &[src_dl, AnyView::from(&s)],
        "TypeError",
        &["runtime.view", "`t`", "DLTensor*"],
    );
}

#[test]
fn round_trip_through_cuda() {
    for id in 0..cuda_count_or_skip("round_trip_through_cuda") {
        let t = arange_i64(&[3, 4, 5]);
        let d = ok("runtime.to_device", &[(&t).into(), cuda(id).into()])
            .get::<Tensor>()
            .unwrap();
        assert_eq!(d.dl_tensor.device, cuda(id));
        // A permuted device tensor comes back through the staged strided copy.
        let dp = permute(&d, &[2, 0, 1]);
        let back = ok("runtime.to_device", &[(&dp).into(), cpu().into()])
            .get::<Tensor>()
            .unwrap();
        assert_eq!(read_i64(&back), expected_permuted(&[3, 4, 5], &[2, 0, 1]));
        // Into a strided device destination.
        let dst = empty(&[3, 4, 8], i64_dtype(), cuda(id));
        let window = slice(&dst, 2, 1, 6);
        ok("runtime.copy_", &[(&window).into(), (&d).into()]);
        let host = ok("runtime.to_device", &[(&window).into(), cpu().into()])
            .get::<Tensor>()
            .unwrap();
        assert_eq!(read_i64(&host), (0..60).collect::<Vec<_>>());
    }
}

#[test]
fn dlpack_allocator_is_the_default() {
    tvm_ffi::register_all();
    let mut shape = [5i64, 6];
    // SAFETY: DLTensor is plain data; all-zero is a valid (empty) value.
    let mut proto: DLTensor = unsafe { std::mem::zeroed() };
    proto.device = cpu();
    proto.ndim = 2;
    proto.dtype = anyffi::abi::DLDataType {
        code: 2,
        bits: 32,
        lanes: 1,
    };
    proto.shape = shape.as_mut_ptr();
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: a valid prototype and out slot.
    let rc = unsafe { anyffi_registry::capi::TVMFFIEnvTensorAlloc(&mut proto, &mut out) };
    assert_eq!(
        rc,
        0,
        "{:?}",
        anyffi::error::take_raised().map(|e| e.message().to_string())
    );
    // SAFETY: a new reference to an ffi.Tensor.
    let t = unsafe {
        Any::from_raw(anyffi::abi::TVMFFIAny {
            type_index: 70,
            small_str_len: 0,
            value: anyffi::abi::TVMFFIAnyValue { v_obj: out as _ },
        })
    }
    .get::<Tensor>()
    .unwrap();
    assert_eq!((t.shape(), t.strides()), (&[5i64, 6][..], &[6i64, 1][..]));
    assert_eq!(t.dl_tensor.data as usize % 64, 0);
    assert!(tvm_ffi::device::caching::CPU_ALLOCATOR
        .block_size(t.dl_tensor.data as *const u8)
        .is_some());
    // Errors come back through the allocator's error callback.
    // SAFETY: proto.shape points at `shape`, written only through this pointer from here on.
    unsafe { *proto.shape = -5 };
    // SAFETY: as above.
    let rc = unsafe { anyffi_registry::capi::TVMFFIEnvTensorAlloc(&mut proto, &mut out) };
    assert_eq!(rc, -1);
    let e = anyffi::error::take_raised().unwrap();
    assert_eq!(e.kind(), "ValueError");
    assert!(e.message().contains("negative"), "{}", e.message());
    proto.device = DLDevice {
        device_type: 99,
        device_id: 0,
    };
    // SAFETY: as above.
    unsafe { *proto.shape = 5 };
    // SAFETY: as above.
    let rc = unsafe { anyffi_registry::capi::TVMFFIEnvTensorAlloc(&mut proto, &mut out) };
    assert_eq!(rc, -1);
    assert_eq!(anyffi::error::take_raised().unwrap().kind(), "ValueError");
}

#[test]
fn empty_bad_inputs() {
    let s = shape(&[2, 3]);
    let neg = shape(&[2, -3]);
    let huge = shape(&[1 << 40, 1 << 40]);
    let f = "runtime.empty";
    let (sv, dt, dev) = (AnyView::from(&s), f32_dtype().into(), cpu().into());
    let t = ok(f, &[sv, Any::from("bfloat16").as_view(), dev])
        .get::<Tensor>()
        .unwrap();
    assert_eq!((t.dl_tensor.dtype.code, t.dl_tensor.dtype.bits), (4, 16));
    err(
        f,
        &[AnyView::from(&neg), dt, dev],
        "ValueError",
        &[f, "negative"],
    );
    err(
        f,
        &[AnyView::from(&huge), dt, dev],
        "ValueError",
        &[f, "too large"],
    );
    err(
        f,
        &[3i64.into(), dt, dev],
        "TypeError",
        &[
            f,
            "`shape`",
            "expected ffi.Shape or an Array of ints, got int",
        ],
    );
    err(
        f,
        &[sv, Any::from("flaot32").as_view(), dev],
        "ValueError",
        &[f, "`dtype`", "unknown dtype"],
    );
    err(
        f,
        &[sv, 7i64.into(), dev],
        "TypeError",
        &[f, "`dtype`", "DataType"],
    );
    err(
        f,
        &[
            sv,
            dt,
            DLDevice {
                device_type: 99,
                device_id: 0,
            }
            .into(),
        ],
        "ValueError",
        &[f, "unknown device type"],
    );
    err(
        f,
        &[
            sv,
            dt,
            DLDevice {
                device_type: 1,
                device_id: 3,
            }
            .into(),
        ],
        "ValueError",
        &[f, "device id 3"],
    );
    err(
        f,
        &[sv, dt, Any::from("cpu").as_view()],
        "TypeError",
        &[f, "`device`"],
    );
    err(
        f,
        &[sv, dt],
        "TypeError",
        &["runtime.empty(shape, dtype, device) expects 3 arguments, got 2"],
    );
    err(
        f,
        &[
            sv,
            anyffi::abi::DLDataType {
                code: 2,
                bits: 0,
                lanes: 1,
            }
            .into(),
            dev,
        ],
        "ValueError",
        &["bits and lanes must be positive"],
    );
    // A zero-sized tensor is fine.
    let z = shape(&[0, 4]);
    let t = ok(f, &[AnyView::from(&z), dt, dev])
        .get::<Tensor>()
        .unwrap();
    assert_eq!(t.numel(), 0);
}

#[test]
fn view_permute_slice_bad_inputs() {
    let t = arange_i64(&[3, 4, 5]);
    let tv = AnyView::from(&t);
    let s = |d: &[i64]| shape(d);
    let (wrong_numel, negative) = (s(&[7, 9]), s(&[-6, -10]));
    err(
        "runtime.view",
        &[tv, AnyView::from(&wrong_numel)],
        "ValueError",
        &["runtime.view", "60 elements"],
    );
    err(
        "runtime.view",
        &[tv, AnyView::from(&negative)],
        "ValueError",
        &["negative"],
    );
    err(
        "runtime.view",
        &[3i64.into(), AnyView::from(&wrong_numel)],
        "TypeError",
        &["`t`", "expected ffi.Tensor, got int"],
    );
    err(
        "runtime.view",
        &[tv, 6i64.into()],
        "TypeError",
        &["`shape`", "ffi.Shape"],
    );

    for bad in [
        &[2i64, 0][..],
        &[0, 1, 1],
        &[0, 1, 3],
        &[0, 1, 2, 3],
        &[-1, 0, 1],
    ] {
        let o = s(bad);
        err(
            "runtime.permute",
            &[tv, AnyView::from(&o)],
            "ValueError",
            &["runtime.permute", "not a permutation"],
        );
    }
    err(
        "runtime.permute",
        &[tv, AnyView::NONE],
        "TypeError",
        &["`order`"],
    );

    err(
        "runtime.slice",
        &[tv, 3i64.into(), 0i64.into(), 1i64.into()],
        "IndexError",
        &["runtime.slice", "dim 3"],
    );
    err(
        "runtime.slice",
        &[tv, (-1i64).into(), 0i64.into(), 1i64.into()],
        "IndexError",
        &["dim -1"],
    );
    err(
        "runtime.slice",
        &[tv, 2i64.into(), 1i64.into(), 6i64.into()],
        "IndexError",
        &["[1, 6)", "size 5"],
    );
    err(
        "runtime.slice",
        &[tv, 2i64.into(), 3i64.into(), 2i64.into()],
        "IndexError",
        &["[3, 2)"],
    );
    err(
        "runtime.slice",
        &[tv, 2i64.into(), (-1i64).into(), 2i64.into()],
        "IndexError",
        &["[-1, 2)"],
    );
    err(
        "runtime.slice",
        &[tv, 2i64.into(), 0i64.into(), 1.5f64.into()],
        "TypeError",
        &["`end`"],
    );
    // An empty slice is allowed.
    assert_eq!(slice(&t, 1, 2, 2).shape(), &[3, 0, 5]);
}

#[test]
fn copy_bad_inputs() {
    let a = arange_i64(&[2, 3]);
    let b = empty(&[3, 2], i64_dtype(), cpu());
    let c = empty(&[2, 3], f32_dtype(), cpu());
    err(
        "runtime.copy_",
        &[(&b).into(), (&a).into()],
        "ValueError",
        &["runtime.copy_", "`src` must have the shape of `dst`"],
    );
    err(
        "runtime.copy_",
        &[(&c).into(), (&a).into()],
        "TypeError",
        &["`src` must have the dtype of `dst` (float32), got int64"],
    );
    err(
        "runtime.copy_",
        &[(&a).into(), 1i64.into()],
        "TypeError",
        &["`src`", "ffi.Tensor or DLTensor*"],
    );
    err(
        "runtime.to_device",
        &[
            (&a).into(),
            DLDevice {
                device_type: 99,
                device_id: 0,
            }
            .into(),
        ],
        "ValueError",
        &["runtime.to_device", "unknown device type"],
    );
    err(
        "runtime.to_device",
        &[(&a).into(), AnyView::NONE],
        "TypeError",
        &["`device`"],
    );
    err(
        "runtime.contiguous",
        &[AnyView::NONE],
        "TypeError",
        &["runtime.contiguous", "`t`"],
    );
}

#[test]
fn shapes_as_arrays_of_ints() {
    use anyffi::array::Array;
    let t = arange_i64(&[3, 4, 5]);
    let dims = Array::from_vec(vec![Any::from(4i64), Any::from(15i64)]);
    let v = ok("runtime.view", &[(&t).into(), AnyView::from(&dims)])
        .get::<Tensor>()
        .unwrap();
    assert_eq!(v.shape(), &[4, 15]);
    let order = Array::from_vec(vec![Any::from(2i64), Any::from(0i64), Any::from(1i64)]);
    let p = ok("runtime.permute", &[(&t).into(), AnyView::from(&order)])
        .get::<Tensor>()
        .unwrap();
    assert_eq!(p.shape(), &[5, 3, 4]);
    let bad = Array::from_vec(vec![Any::from(4i64), Any::from(1.5f64)]);
    err(
        "runtime.view",
        &[(&t).into(), AnyView::from(&bad)],
        "TypeError",
        &["`shape`", "element 1", "float"],
    );
}

#[test]
fn long_view_chains_release_without_recursion() {
    // `x = x[1:]` in a loop: each view used to keep the previous one alive, and releasing the
    // last one recursed once per link (a stack overflow after ~5e4 links on a 1 MiB stack).
    std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(|| {
            let n = 100_000i64;
            let base = empty(&[n + 1], i64_dtype(), cpu());
            let mut x = slice(&base, 0, 0, n + 1);
            for i in 0..n {
                x = slice(&x, 0, 1, n + 1 - i);
            }
            assert_eq!(x.shape(), &[1]);
            drop(base);
            drop(x);
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn free_device_refuses_a_live_tensors_storage() {
    // The packed `runtime.free_device` refused it; the safe trait method freed the block under
    // the tensor (a later copy read freed memory, a new tensor aliased the live one).
    use anyffi::abi::{kDLCPU, kDLFloat, DLDataType};
    use tvm_ffi::device::runtime_of;
    let cpu = DLDevice {
        device_type: kDLCPU,
        device_id: 0,
    };
    let f32 = DLDataType {
        code: kDLFloat as u8,
        bits: 32,
        lanes: 1,
    };
    let a = tvm_ffi::tensor::empty(&[16], f32, cpu).unwrap();
    let rt = runtime_of(kDLCPU).unwrap();
    let e = rt.free_device(0, a.dl_tensor.data).unwrap_err();
    assert_eq!(e.kind(), "ValueError");
    assert!(e.message().contains("live tensor"), "{}", e.message());
    let b = tvm_ffi::tensor::empty(&[16], f32, cpu).unwrap();
    assert_ne!(
        a.dl_tensor.data, b.dl_tensor.data,
        "two live tensors share storage"
    );
    // a block from malloc_device is still freed by it
    let p = rt.malloc_device(0, 64).unwrap();
    rt.free_device(0, p).unwrap();
}

#[test]
fn view_strides_of_mismatched_lengths_is_none() {
    // strides.last().unwrap() panicked on an empty slice; a short one indexed out of bounds
    use tvm_ffi::tensor::view_strides;
    assert_eq!(view_strides(&[2, 3], &[], &[6]), None);
    assert_eq!(view_strides(&[2, 3], &[3], &[6]), None);
    assert_eq!(view_strides(&[2, 3], &[3, 1], &[6]), Some(vec![1]));
}
