//! Host cost of the CUDA path of an op call, step by step, on device 0 (needs a GPU; prints why
//! and exits 0 without one):
//!
//!     cargo bench -p anyffi-runtime --bench cuda_calls
//!
//! Rows (microseconds per call, the best of 7 batches of 2,000, synchronised after each batch):
//! a plain driver call (cuCtxGetCurrent) as the anchor, binding the device, the kernel lookup, a
//! bare cuLaunchKernel of the add kernel on 1 element, a stream-ordered alloc + free pair, and
//! the whole `ops.add` (1 element) and `ops.self_attention` (decode, 4096 keys, GQA 6:1, split-KV)
//! calls through the registry, then that attention's two kernels launched alone (where its GPU
//! time goes).

use std::ffi::c_void;
use std::time::Instant;

use cudarc::driver::sys as cu;
use tvm_ffi::anyffi::abi::{kDLCUDA, kDLFloat, DLDataType, DLDevice, DLTensor};
use tvm_ffi::anyffi::AnyView;
use tvm_ffi::device::cuda::CUDA;
use tvm_ffi::device::DeviceRuntime;
use tvm_ffi::kernels::cuda::nvrtc;

/// Mirrors `Lay` of the launcher (`src/common.cuh`).
#[repr(C)]
#[derive(Clone, Copy)]
struct Lay {
    nd: i32,
    pad: i32,
    shape: [i64; 8],
    st: [[i64; 8]; 3],
}

/// A contiguous f32 device tensor of `shape`.
struct Dev {
    dl: Box<DLTensor>,
    _shape: Box<[i64]>,
    ptr: *mut c_void,
}

impl Dev {
    fn new(shape: &[i64]) -> Dev {
        let n: i64 = shape.iter().product();
        let ptr = CUDA.malloc_device(0, n as usize * 4).unwrap();
        let mut sh: Box<[i64]> = shape.into();
        let dl = Box::new(DLTensor {
            data: ptr,
            device: DLDevice {
                device_type: kDLCUDA,
                device_id: 0,
            },
            ndim: shape.len() as i32,
            dtype: DLDataType {
                code: kDLFloat,
                bits: 32,
                lanes: 1,
            },
            shape: sh.as_mut_ptr(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        });
        Dev {
            dl,
            _shape: sh,
            ptr,
        }
    }
    fn view(&self) -> AnyView<'_> {
        // SAFETY: `self.dl` lives (unchanged) as long as the borrow of `self`.
        unsafe { AnyView::from_dltensor_ptr(&*self.dl as *const DLTensor as *mut DLTensor) }
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = CUDA.free_device(0, self.ptr);
    }
}

fn best_us(mut f: impl FnMut()) -> f64 {
    const N: usize = 2000;
    let mut best = f64::INFINITY;
    for _ in 0..7 {
        CUDA.device_synchronize(0).unwrap();
        let t = Instant::now();
        for _ in 0..N {
            f();
        }
        CUDA.device_synchronize(0).unwrap();
        best = best.min(t.elapsed().as_secs_f64() * 1e6 / N as f64);
    }
    best
}

fn main() {
    if tvm_ffi::device::device_count(kDLCUDA).unwrap_or(0) == 0 {
        println!(
            "cuda_calls: skipped, no CUDA device ({})",
            CUDA.unavailable_reason().unwrap_or_default()
        );
        return;
    }
    tvm_ffi::ops::register_ops().unwrap();
    CUDA.set_device(0).unwrap();
    let add = tvm_ffi::anyffi_registry::get_global("ops.add").unwrap();
    let att = tvm_ffi::anyffi_registry::get_global("ops.self_attention").unwrap();
    let (a, b, c) = (Dev::new(&[1]), Dev::new(&[1]), Dev::new(&[1]));
    add.call(&[c.view(), a.view(), b.view()]).unwrap(); // compiles and loads the module
    let f = nvrtc::function(0, "add_f32").unwrap();

    let mut rows: Vec<(&str, f64)> = Vec::new();
    rows.push((
        "driver call (cuCtxGetCurrent), the anchor",
        best_us(|| {
            let mut ctx: cu::CUcontext = std::ptr::null_mut();
            // SAFETY: valid out-parameter.
            unsafe { cu::cuCtxGetCurrent(&mut ctx) };
        }),
    ));
    rows.push((
        "bind device 0 (CUDA.set_device)",
        best_us(|| CUDA.set_device(0).unwrap()),
    ));
    rows.push((
        "kernel lookup (nvrtc::function)",
        best_us(|| {
            nvrtc::function(0, "add_f32").unwrap();
        }),
    ));
    let (y, x0, x1) = (c.ptr as usize, a.ptr as usize, b.ptr as usize);
    let n: i64 = 1;
    let lay = Lay {
        nd: 1,
        pad: 0,
        shape: [1; 8],
        st: [[0; 8]; 3],
    };
    let contig: i32 = 1;
    rows.push((
        "cuLaunchKernel add_f32, 1 element",
        best_us(|| {
            let mut p = [
                &y as *const _ as *mut c_void,
                &x0 as *const _ as *mut c_void,
                &x1 as *const _ as *mut c_void,
                &n as *const _ as *mut c_void,
                &lay as *const _ as *mut c_void,
                &contig as *const _ as *mut c_void,
            ];
            // SAFETY: the add kernel's parameters (y, a, b, n, Lay, contiguous) on 1-element
            // device buffers, default stream.
            unsafe {
                cu::cuLaunchKernel(
                    f,
                    1,
                    1,
                    1,
                    256,
                    1,
                    1,
                    0,
                    std::ptr::null_mut(),
                    p.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            };
        }),
    ));
    rows.push((
        "cuMemAllocAsync + cuMemFreeAsync, 64 KiB",
        best_us(|| {
            let mut p: cu::CUdeviceptr = 0;
            // SAFETY: stream-ordered pair on the default stream.
            unsafe {
                cu::cuMemAllocAsync(&mut p, 65536, std::ptr::null_mut());
                cu::cuMemFreeAsync(p, std::ptr::null_mut());
            }
        }),
    ));
    rows.push((
        "ops.add, 1 element (whole call)",
        best_us(|| {
            add.call(&[c.view(), a.view(), b.view()]).unwrap();
        }),
    ));
    let (q, k, v, o) = (
        Dev::new(&[1, 12, 128]),
        Dev::new(&[4096, 2, 128]),
        Dev::new(&[4096, 2, 128]),
        Dev::new(&[1, 12, 128]),
    );
    let scale = AnyView::from(1.0 / (128f64).sqrt());
    rows.push((
        "ops.self_attention decode 4096 keys (whole call)",
        best_us(|| {
            att.call(&[o.view(), q.view(), k.view(), v.view(), scale])
                .unwrap();
        }),
    ));
    // the call's two kernels alone (split-KV as the launcher picks it for this shape on an
    // H100: 128 splits of 32 keys, the grouped kernel's 2 x 128 blocks, the combine's 4 x 12),
    // on a workspace allocated once
    let (splits, split_len) = (128i32, 32i32);
    let ws = Dev::new(&[12 * splits as i64 * (128 + 2)]);
    let (qp, kp, vp, op_, wsp) = (
        q.ptr as usize,
        k.ptr as usize,
        v.ptr as usize,
        o.ptr as usize,
        ws.ptr as usize,
    );
    let (l, h, s, hk, dv, sc) = (1i32, 12i32, 4096i32, 2i32, 128i32, 1.0f32 / 128f32.sqrt());
    let decode = nvrtc::function(0, "self_attention_decode_gqa_f32_128").unwrap();
    let combine = nvrtc::function(0, "self_attention_combine_f32").unwrap();
    let raw = |f: cu::CUfunction, grid: (u32, u32), shmem: u32, p: &mut [*mut c_void]| {
        // SAFETY: the kernel's parameters, in its order and types (attention.cu), on device
        // buffers of the sizes it reads and writes; default stream.
        unsafe {
            cu::cuLaunchKernel(
                f,
                grid.0,
                grid.1,
                1,
                128,
                1,
                1,
                shmem,
                std::ptr::null_mut(),
                p.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
    };
    macro_rules! ps {
        ($($a:ident),*) => { [$(&$a as *const _ as *mut c_void),*] };
    }
    rows.push((
        "  its grouped decode kernel alone (f32, 256 blocks)",
        best_us(|| {
            raw(
                decode,
                (splits as u32, hk as u32),
                4 * 8 * 128 * 4,
                &mut ps!(qp, kp, vp, l, h, s, hk, sc, splits, split_len, wsp),
            )
        }),
    ));
    rows.push((
        "  its combine kernel alone (48 blocks)",
        best_us(|| {
            raw(
                combine,
                (4, h as u32),
                0,
                &mut ps!(op_, wsp, l, h, dv, splits),
            )
        }),
    ));
    let anchor = rows[0].1;
    println!("{:52} {:>9} {:>12}", "step", "us/call", "x anchor");
    for (name, us) in rows {
        println!("{name:52} {us:9.2} {:11.1}x", us / anchor);
    }
}
