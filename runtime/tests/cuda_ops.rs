//! On a GPU: every op in f32, f16 and bf16 against the CPU kernels on the same inputs (random
//! data, LLAISYS-like shapes, decode attention 1 query vs 300 keys with GQA 6:1 and d 128,
//! chunked prefill, batched and transposed gemm, strided rearrange/add/rms_norm/rope, argmax
//! ties and NaN, linear with and without bias), with the spec tolerances. Skips with a message
//! where there is no CUDA driver or device (set ANYFFI_REQUIRE_CUDA=1 to make that a failure).

mod ops_common;

use std::ffi::c_void;

use ops_common::*;
use tvm_ffi::anyffi::abi::kDLCUDA;
use tvm_ffi::anyffi::AnyView;
use tvm_ffi::device::cuda::CUDA;
use tvm_ffi::device::{DeviceRuntime, MemcpyKind};

fn gpu_or_skip() -> bool {
    let required = std::env::var_os("ANYFFI_REQUIRE_CUDA").is_some_and(|v| v == "1");
    let why = if tvm_ffi::device::device_count(kDLCUDA).unwrap() == 0 {
        CUDA.unavailable_reason().unwrap_or_default()
    } else if let Err(e) = tvm_ffi::kernels::cuda::nvrtc::available() {
        e.message().into_owned()
    } else if let Err(e) = tvm_ffi::kernels::cuda::blas::available() {
        e.message().into_owned()
    } else {
        return true;
    };
    assert!(!required, "ANYFFI_REQUIRE_CUDA=1 but: {why}");
    eprintln!("skipped: no usable CUDA device: {why}");
    false
}

/// A device copy of a host tensor (same shape, strides, bytes), freed on drop.
struct DevTensor {
    view: HostTensor,
    ptr: *mut c_void,
    bytes: usize,
}

impl DevTensor {
    fn new(h: &HostTensor) -> DevTensor {
        let bytes = h.buf.len() * 8;
        let ptr = CUDA.malloc_device(0, bytes).unwrap();
        // SAFETY: `ptr` holds `bytes` device bytes; the host buffer as many.
        unsafe {
            CUDA.memcpy_sync(
                0,
                ptr,
                h.buf.as_ptr() as *const c_void,
                bytes,
                MemcpyKind::H2D,
            )
            .unwrap()
        };
        let mut view = HostTensor::strided(&h.shape, &h.strides, h.dt);
        view.dl.data = ptr;
        view.dl.device.device_type = kDLCUDA;
        view.dl.device.device_id = 0;
        DevTensor { view, ptr, bytes }
    }

    /// Waits for the device, then copies back into a host tensor of the same layout.
    fn host(&self) -> HostTensor {
        CUDA.device_synchronize(0).unwrap();
        let mut h = HostTensor::strided(&self.view.shape, &self.view.strides, self.view.dt);
        // SAFETY: as in `new`, the other way.
        unsafe {
            CUDA.memcpy_sync(
                0,
                h.buf.as_mut_ptr() as *mut c_void,
                self.ptr,
                self.bytes,
                MemcpyKind::D2H,
            )
            .unwrap()
        };
        h
    }
}

impl Drop for DevTensor {
    fn drop(&mut self) {
        let _ = CUDA.free_device(0, self.ptr);
    }
}

/// An op argument: a tensor (index into the list), a float, or None.
#[derive(Clone, Copy)]
enum A {
    T(usize),
    F(f64),
    N,
}

fn views<'a>(ts: &'a [&'a HostTensor], args: &[A]) -> Vec<AnyView<'a>> {
    args.iter()
        .map(|a| match *a {
            A::T(i) => ts[i].view(),
            A::F(x) => AnyView::from(x),
            A::N => AnyView::NONE,
        })
        .collect()
}

/// Runs `op` on the host tensors and on device copies; returns, for each output index, the
/// (CPU, GPU) values.
fn both(op: &str, ts: &mut [HostTensor], args: &[A], outs: &[usize]) -> Vec<(Vec<f64>, Vec<f64>)> {
    let devs: Vec<DevTensor> = ts.iter().map(DevTensor::new).collect();
    {
        let refs: Vec<&HostTensor> = ts.iter().collect();
        call(op, &views(&refs, args)).unwrap_or_else(|e| panic!("{op} on CPU: {}", e.message()));
    }
    {
        let refs: Vec<&HostTensor> = devs.iter().map(|d| &d.view).collect();
        call(op, &views(&refs, args)).unwrap_or_else(|e| panic!("{op} on CUDA: {}", e.message()));
    }
    outs.iter()
        .map(|&o| (ts[o].get(), devs[o].host().get()))
        .collect()
}

#[track_caller]
fn check(what: &str, r: &[(Vec<f64>, Vec<f64>)], atol: f64, rtol: f64) {
    for (cpu, gpu) in r {
        assert!(
            cpu.iter().all(|x| !x.is_nan()),
            "{what}: NaN in the CPU result"
        );
        assert_close(what, gpu, cpu, atol, rtol);
    }
}

fn rt(shape: &[i64], dt: Dt, rng: &mut Rng, scale: f64, bias: f64) -> HostTensor {
    rand_tensor(rng, shape, dt, scale, bias).0
}

/// `ops.self_attention` tensors (out, q, k, v) and arguments for 12 heads over 2 KV heads of
/// d = 128: q all ones, keys `neg` -inf in every element (so they score -inf), the rest random.
fn minus_inf_keys(
    dt: Dt,
    rng: &mut Rng,
    l: i64,
    s: i64,
    neg: std::ops::Range<i64>,
) -> (Vec<HostTensor>, [A; 5]) {
    let (h, hk, d) = (12i64, 2i64, 128i64);
    let mut q = HostTensor::new(&[l, h, d], dt);
    q.set(&vec![1.0; (l * h * d) as usize]);
    let mut k = rt(&[s, hk, d], dt, rng, 1.0, 0.0);
    let mut kv = k.get();
    for x in &mut kv[(neg.start * hk * d) as usize..(neg.end * hk * d) as usize] {
        *x = f64::NEG_INFINITY;
    }
    k.set(&kv);
    let v = rt(&[s, hk, d], dt, rng, 1.0, 0.0);
    let scale = 1.0 / (d as f64).sqrt();
    let args = [A::T(0), A::T(1), A::T(2), A::T(3), A::F(scale)];
    (vec![HostTensor::new(&[l, h, d], dt), q, k, v], args)
}

#[test]
fn add_and_swiglu() {
    if !gpu_or_skip() {
        return;
    }
    let mut rng = Rng::new(1);
    for dt in FLOATS {
        for shape in [[2i64, 3], [512, 4096]] {
            for op in ["ops.add", "ops.swiglu"] {
                let mut ts = vec![
                    HostTensor::new(&shape, dt),
                    rt(&shape, dt, &mut rng, 4.0, -2.0),
                    rt(&shape, dt, &mut rng, 4.0, -2.0),
                ];
                let r = both(op, &mut ts, &[A::T(0), A::T(1), A::T(2)], &[0]);
                let tol = if op == "ops.add" && dt != Dt::F32 {
                    1e-3
                } else {
                    dt.tol()
                };
                check(&format!("{op} {dt:?} {shape:?}"), &r, tol, tol);
            }
        }
        // strided: `a` a transposed view, `c` row-padded
        let mut ts = vec![
            HostTensor::strided(&[5, 7], &[9, 1], dt),
            {
                let mut t = HostTensor::strided(&[5, 7], &[1, 5], dt);
                t.rand(&mut rng, 2.0, -1.0);
                t
            },
            rt(&[5, 7], dt, &mut rng, 2.0, -1.0),
        ];
        for op in ["ops.add", "ops.swiglu"] {
            let r = both(op, &mut ts, &[A::T(0), A::T(1), A::T(2)], &[0]);
            let tol = if op == "ops.add" && dt != Dt::F32 {
                1e-3
            } else {
                dt.tol()
            };
            check(&format!("{op} {dt:?} strided"), &r, tol, tol);
        }
    }
}

#[test]
fn argmax_values_ties_and_nan() {
    if !gpu_or_skip() {
        return;
    }
    let mut rng = Rng::new(2);
    for dt in FLOATS {
        let mut cases: Vec<Vec<f64>> = vec![vec![1.0, 3.0, 3.0, 2.0], vec![0.5; 3000]];
        for n in [4usize, 4096, 151_936] {
            cases.push((0..n).map(|_| rng.uniform()).collect());
        }
        let mut nan = vec![0.25; 5000];
        nan[4000] = f64::NAN;
        nan[4500] = f64::NAN;
        nan[10] = 9.0;
        cases.push(nan);
        let mut tie_late: Vec<f64> = (0..70_000).map(|i| (i % 97) as f64 / 97.0).collect();
        tie_late[69_999] = 2.0;
        tie_late[40_001] = 2.0;
        cases.push(tie_late);
        for vals in cases {
            let n = vals.len() as i64;
            let mut x = HostTensor::new(&[n], dt);
            x.set(&vals);
            let mut ts = vec![HostTensor::new(&[1], Dt::I64), HostTensor::new(&[1], dt), x];
            let r = both("ops.argmax", &mut ts, &[A::T(0), A::T(1), A::T(2)], &[0, 1]);
            assert_eq!(r[0].0, r[0].1, "argmax index {dt:?} n {n}");
            let (c, g) = (r[1].0[0], r[1].1[0]);
            assert!(
                c == g || (c.is_nan() && g.is_nan()),
                "argmax value {dt:?} n {n}: {c} vs {g}"
            );
        }
    }
}

#[test]
fn embedding_rows_and_bad_index() {
    if !gpu_or_skip() {
        return;
    }
    let mut rng = Rng::new(3);
    for dt in FLOATS {
        for (n, v, d) in [(1i64, 2i64, 3i64), (50, 512, 4096)] {
            for idt in [Dt::I64, Dt::I32] {
                let mut idx = HostTensor::new(&[n], idt);
                idx.set(
                    &(0..n)
                        .map(|_| rng.below(v as u64) as f64)
                        .collect::<Vec<_>>(),
                );
                let mut ts = vec![
                    HostTensor::new(&[n, d], dt),
                    idx,
                    rt(&[v, d], dt, &mut rng, 2.0, -1.0),
                ];
                let r = both("ops.embedding", &mut ts, &[A::T(0), A::T(1), A::T(2)], &[0]);
                check(&format!("embedding {dt:?} {idt:?}"), &r, 0.0, 0.0);
            }
        }
        let mut idx = HostTensor::new(&[2], Dt::I64);
        idx.set(&[1.0, 7.0]);
        let w = DevTensor::new(&rt(&[4, 8], dt, &mut rng, 1.0, 0.0));
        let i = DevTensor::new(&idx);
        let o = DevTensor::new(&HostTensor::new(&[2, 8], dt));
        let e = call(
            "ops.embedding",
            &[o.view.view(), i.view.view(), w.view.view()],
        )
        .unwrap_err();
        assert_eq!(e.kind(), "IndexError", "{}", e.message());
        assert!(e.message().contains("index[1] = 7"), "{}", e.message());
    }
}

#[test]
fn linear_with_and_without_bias() {
    if !gpu_or_skip() {
        return;
    }
    let mut rng = Rng::new(4);
    for dt in FLOATS {
        for (m, k, n, bias) in [
            (2i64, 4i64, 3i64, true),
            (512, 4096, 4096, true),
            (1, 1536, 8960, false),
            (7, 96, 40, false),
        ] {
            let mut ts = vec![
                HostTensor::new(&[m, n], dt),
                rt(&[m, k], dt, &mut rng, 0.1, 0.0),
                rt(&[n, k], dt, &mut rng, 0.01, 0.0),
                rt(&[n], dt, &mut rng, 1.0, 0.0),
            ];
            let b = if bias { A::T(3) } else { A::N };
            let r = both("ops.linear", &mut ts, &[A::T(0), A::T(1), A::T(2), b], &[0]);
            check(
                &format!("linear {dt:?} ({m},{k},{n}) bias {bias}"),
                &r,
                dt.tol(),
                dt.tol(),
            );
        }
    }
}

#[test]
fn rms_norm_rows_contiguous_strided_and_f32_weight() {
    if !gpu_or_skip() {
        return;
    }
    let mut rng = Rng::new(5);
    for dt in FLOATS {
        for (m, d) in [(1i64, 4i64), (512, 4096), (3, 1000)] {
            let mut ts = vec![
                HostTensor::new(&[m, d], dt),
                rt(&[m, d], dt, &mut rng, 2.0, -1.0),
                rt(&[d], dt, &mut rng, 1.0, 0.5),
            ];
            let r = both(
                "ops.rms_norm",
                &mut ts,
                &[A::T(0), A::T(1), A::T(2), A::F(1e-5)],
                &[0],
            );
            check(
                &format!("rms_norm {dt:?} ({m},{d})"),
                &r,
                dt.tol(),
                dt.tol(),
            );
        }
        // 3-D input whose rows do not collapse, f32 weight for half inputs
        let mut x = HostTensor::strided(&[2, 3, 64], &[500, 130, 1], dt);
        x.rand(&mut rng, 2.0, -1.0);
        let mut ts = vec![
            HostTensor::new(&[2, 3, 64], dt),
            x,
            rt(&[64], Dt::F32, &mut rng, 1.0, 0.5),
        ];
        let r = both(
            "ops.rms_norm",
            &mut ts,
            &[A::T(0), A::T(1), A::T(2), A::F(1e-6)],
            &[0],
        );
        check(
            &format!("rms_norm {dt:?} strided, f32 weight"),
            &r,
            dt.tol(),
            dt.tol(),
        );
    }
}

#[test]
fn rope_positions_and_strided_heads() {
    if !gpu_or_skip() {
        return;
    }
    let mut rng = Rng::new(6);
    for dt in FLOATS {
        let tol = if dt == Dt::F32 { 1e-4 } else { dt.tol() };
        for (seq, nh, d, p0, pdt) in [
            (2i64, 1i64, 4i64, 0i64, Dt::I64),
            (512, 4, 4096, 512, Dt::I64),
            (33, 6, 128, 100, Dt::I32),
        ] {
            let mut pos = HostTensor::new(&[seq], pdt);
            pos.set(&(0..seq).map(|i| (p0 + i) as f64).collect::<Vec<_>>());
            let mut ts = vec![
                HostTensor::new(&[seq, nh, d], dt),
                rt(&[seq, nh, d], dt, &mut rng, 2.0, -1.0),
                pos,
            ];
            let r = both(
                "ops.rope",
                &mut ts,
                &[A::T(0), A::T(1), A::T(2), A::F(1e4)],
                &[0],
            );
            check(&format!("rope {dt:?} ({seq},{nh},{d})"), &r, tol, tol);
        }
        // q as a strided view of a fused qkv buffer [seq, 3 * nh, d]
        let (seq, nh, d) = (9i64, 4i64, 64i64);
        let mut q = HostTensor::strided(&[seq, nh, d], &[3 * nh * d, d, 1], dt);
        q.rand(&mut rng, 2.0, -1.0);
        let mut pos = HostTensor::new(&[seq], Dt::I64);
        pos.set(&(0..seq).map(|i| (7 * i) as f64).collect::<Vec<_>>());
        let mut ts = vec![HostTensor::new(&[seq, nh, d], dt), q, pos];
        let r = both(
            "ops.rope",
            &mut ts,
            &[A::T(0), A::T(1), A::T(2), A::F(1e6)],
            &[0],
        );
        check(&format!("rope {dt:?} strided"), &r, tol, tol);
    }
}

#[test]
fn self_attention_decode_prefill_gqa() {
    if !gpu_or_skip() {
        return;
    }
    let mut rng = Rng::new(7);
    for dt in FLOATS {
        for (l, s, h, hk, d) in [
            (2i64, 2i64, 1i64, 1i64, 4i64),
            (5, 11, 4, 2, 8),
            (1, 300, 6, 1, 128),
            (3, 700, 4, 2, 64),
            // the grouped decode kernel with two blocks a KV head (8 heads, 4 a block at d 256)
            // and with 12:1 heads; the per-head decode kernel (d 96 is not 64, 128 or 256)
            (2, 400, 16, 2, 256),
            (1, 1000, 12, 1, 64),
            (1, 500, 6, 2, 96),
            (64, 64, 12, 2, 128),
        ] {
            let mut ts = vec![
                HostTensor::new(&[l, h, d], dt),
                rt(&[l, h, d], dt, &mut rng, 1.0, 0.0),
                rt(&[s, hk, d], dt, &mut rng, 1.0, 0.0),
                rt(&[s, hk, d], dt, &mut rng, 1.0, 0.0),
            ];
            let scale = 1.0 / (d as f64).sqrt();
            let args = [A::T(0), A::T(1), A::T(2), A::T(3), A::F(scale)];
            let r = both("ops.self_attention", &mut ts, &args, &[0]);
            check(
                &format!("self_attention {dt:?} ({l},{s},{h},{hk},{d})"),
                &r,
                dt.tol(),
                dt.tol(),
            );
        }
        // keys scoring -inf (q = 1, key rows -inf) weigh nothing, also as the first keys of
        // a split or warp before any finite score, and as whole splits
        for (l, s, neg) in [
            (1i64, 300i64, 0..1i64),
            (1, 300, 0..100),
            (1, 4096, 100..700),
        ] {
            let (mut ts, args) = minus_inf_keys(dt, &mut rng, l, s, neg.clone());
            let r = both("ops.self_attention", &mut ts, &args, &[0]);
            check(
                &format!("self_attention {dt:?} ({l},{s}) -inf keys {neg:?}"),
                &r,
                dt.tol(),
                dt.tol(),
            );
        }
        // rows that see only -inf keys are NaN on both devices (softmax of a row of -inf), the
        // others match: one block per head (short), split decode (4096 keys), causal prefill
        for (l, s, neg) in [
            (1i64, 300i64, 300i64),
            (1, 4096, 4096),
            (4, 4, 1),
            (5, 300, 297),
        ] {
            let (mut ts, args) = minus_inf_keys(dt, &mut rng, l, s, 0..neg);
            let what = format!("self_attention {dt:?} ({l},{s}) all -inf below key {neg}");
            for (cpu, gpu) in both("ops.self_attention", &mut ts, &args, &[0]) {
                let row = cpu.len() / l as usize; // h * d
                for i in 0..l as usize {
                    let sees = i as i64 + (s - l) + 1;
                    let (c, g) = (&cpu[i * row..(i + 1) * row], &gpu[i * row..(i + 1) * row]);
                    if sees <= neg {
                        assert!(c.iter().all(|x| x.is_nan()), "{what}: CPU row {i}");
                        assert!(g.iter().all(|x| x.is_nan()), "{what}: GPU row {i}");
                    } else {
                        assert_close(&format!("{what}: row {i}"), g, c, dt.tol(), dt.tol());
                    }
                }
            }
        }
    }
}

#[test]
fn gemm_2d_batched_broadcast_transposed() {
    if !gpu_or_skip() {
        return;
    }
    let mut rng = Rng::new(8);
    for dt in FLOATS {
        let tol = if dt == Dt::F32 { 1e-4 } else { dt.tol() * 2.0 };
        // (c shape+strides, a shape+strides, b shape+strides, alpha, beta)
        type L = (Vec<i64>, Vec<i64>);
        let cases: Vec<(L, L, L, f64, f64)> = vec![
            (
                (vec![64, 80], vec![80, 1]),
                (vec![64, 48], vec![48, 1]),
                (vec![48, 80], vec![80, 1]),
                2.5,
                0.0,
            ),
            (
                (vec![64, 80], vec![80, 1]),
                (vec![64, 48], vec![1, 64]),
                (vec![48, 80], vec![1, 48]),
                1.0,
                0.5,
            ),
            (
                (vec![64, 80], vec![1, 64]),
                (vec![64, 48], vec![48, 1]),
                (vec![48, 80], vec![80, 1]),
                0.5,
                1.0,
            ),
            (
                (vec![4, 32, 24], vec![768, 24, 1]),
                (vec![4, 32, 40], vec![1280, 40, 1]),
                (vec![4, 40, 24], vec![960, 24, 1]),
                1.0,
                0.0,
            ),
            (
                (vec![3, 16, 24], vec![384, 24, 1]),
                (vec![3, 16, 40], vec![640, 40, 1]),
                (vec![40, 24], vec![24, 1]),
                1.5,
                2.0,
            ),
            (
                (vec![3, 16, 24], vec![400, 25, 1]),
                (vec![1, 16, 40], vec![640, 40, 1]),
                (vec![3, 40, 24], vec![960, 1, 40]),
                1.0,
                1.0,
            ),
        ];
        for (i, (c, a, b, alpha, beta)) in cases.into_iter().enumerate() {
            let mut cc = HostTensor::strided(&c.0, &c.1, dt);
            if beta != 0.0 {
                cc.rand(&mut rng, 1.0, 0.0);
            }
            let mut at = HostTensor::strided(&a.0, &a.1, dt);
            at.rand(&mut rng, 1.0, -0.5);
            let mut bt = HostTensor::strided(&b.0, &b.1, dt);
            bt.rand(&mut rng, 1.0, -0.5);
            let mut ts = vec![cc, at, bt];
            let args = [A::T(0), A::T(1), A::T(2), A::F(alpha), A::F(beta)];
            let r = both("ops.gemm", &mut ts, &args, &[0]);
            check(&format!("gemm {dt:?} case {i}"), &r, tol, tol);
        }
    }
}

#[test]
fn rearrange_permuted_views() {
    if !gpu_or_skip() {
        return;
    }
    let mut rng = Rng::new(9);
    for dt in [Dt::F32, Dt::F16, Dt::BF16, Dt::I64, Dt::I32] {
        // in: a [4, 5, 6] tensor seen as [6, 4, 5] (permuted); out: row-padded
        let mut inp = HostTensor::strided(&[6, 4, 5], &[1, 30, 6], dt);
        let vals: Vec<f64> = (0..120).map(|_| (rng.below(1000) as f64) - 500.0).collect();
        inp.set(&vals);
        // the input as stored (bf16 rounds integers above 256)
        let want = inp.get();
        let mut ts = vec![HostTensor::strided(&[6, 4, 5], &[24, 6, 1], dt), inp];
        let r = both("ops.rearrange", &mut ts, &[A::T(0), A::T(1)], &[0]);
        check(&format!("rearrange {dt:?}"), &r, 0.0, 0.0);
        assert_eq!(r[0].1, want, "rearrange {dt:?} equals its input");
    }
}

#[test]
fn unsupported_cuda_layout_is_a_value_error() {
    if !gpu_or_skip() {
        return;
    }
    // gemm with `a` strided in both matrix dimensions: fine on the CPU, not for cuBLAS
    let a = DevTensor::new(&HostTensor::strided(&[8, 8], &[16, 2], Dt::F32));
    let b = DevTensor::new(&HostTensor::new(&[8, 8], Dt::F32));
    let c = DevTensor::new(&HostTensor::new(&[8, 8], Dt::F32));
    let e = call(
        "ops.gemm",
        &[
            c.view.view(),
            a.view.view(),
            b.view.view(),
            AnyView::from(1.0),
            AnyView::from(0.0),
        ],
    )
    .unwrap_err();
    assert_eq!(e.kind(), "ValueError", "{}", e.message());
    assert!(
        e.message().contains("ops.gemm: on CUDA `a`"),
        "{}",
        e.message()
    );
    // attention beyond the documented shared-memory limit (d + dv <= 8192)
    let q = DevTensor::new(&HostTensor::new(&[1, 1, 8192], Dt::F32));
    let k = DevTensor::new(&HostTensor::new(&[1, 1, 8192], Dt::F32));
    let v = DevTensor::new(&HostTensor::new(&[1, 1, 8], Dt::F32));
    let o = DevTensor::new(&HostTensor::new(&[1, 1, 8], Dt::F32));
    let e = call(
        "ops.self_attention",
        &[
            o.view.view(),
            q.view.view(),
            k.view.view(),
            v.view.view(),
            AnyView::from(0.1),
        ],
    )
    .unwrap_err();
    assert_eq!(e.kind(), "ValueError", "{}", e.message());
    assert!(
        e.message().contains("must add up to at most 8192"),
        "{}",
        e.message()
    );
}
