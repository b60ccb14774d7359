//! Operator benchmark, Rust side: a server that `bench/ops/bench.py` drives over stdin so that
//! our calls and numpy's interleave in small blocks (the 2 cores are shared, so timings taken
//! minutes apart are not comparable). Each `ops.*` call goes through the global function table
//! with DLTensor views over Rust buffers, the call path every binding uses.
//!
//! Protocol: one request per line, `CASE REPS`; the answer is one line of REPS per-call times
//! in seconds. Cases (built on first use, then reused):
//! `copy:BYTES` (parallel memcpy of BYTES/2 into BYTES/2: BYTES of traffic),
//! `linear:DT:M:K:N`, `add|swiglu|rms_norm:DT:M:N`, `rope:DT:SEQ:NH:D`,
//! `attn:DT:L:S:H:HK:D`, `argmax:DT:N`, `cold:CASE` (256 MiB written before each call, so operands come
//! from DRAM) and `nocache:CASE` (the same with the plan cache capacity 0 for
//! the timed block). DT is f32 or bf16.
//!
//! Usage: `cargo bench -p anyffi-runtime --bench ops` starts the server; normally run through
//! `bench/ops/run.sh`.

use std::collections::HashMap;
use std::ffi::c_void;
use std::io::{BufRead, Write};
use std::time::Instant;

use half::bf16;
use tvm_ffi::anyffi::abi::{kDLBfloat, kDLCPU, kDLFloat, kDLInt, DLDataType, DLDevice, DLTensor};
use tvm_ffi::anyffi::{AnyView, Function};
use tvm_ffi::device::caching::CPU_ALLOCATOR;
use tvm_ffi::kernels::cpu::{par_for, threads};

/// Memory from the runtime's CPU allocator (what `runtime.empty` hands out: 64-byte aligned,
/// huge-page eligible from 4 MiB, as numpy's large arrays are), zero-filled.
struct Block {
    p: *mut u8,
    n: usize,
}

impl Block {
    fn new(n: usize) -> Block {
        let p = CPU_ALLOCATOR.alloc(n.max(1)).expect("allocation");
        // SAFETY: a fresh block of at least n bytes.
        unsafe { std::ptr::write_bytes(p, 0, n) };
        Block { p, n }
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: n bytes owned by this block.
        unsafe { std::slice::from_raw_parts_mut(self.p, self.n) }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: our own block, no longer used.
        unsafe { CPU_ALLOCATOR.free(self.p) }.expect("free");
    }
}

struct Buf {
    _mem: Block,
    _shape: Vec<i64>,
    dl: Box<DLTensor>,
}

impl Buf {
    fn new(shape: &[i64], dtype: DLDataType, fill: impl Fn(usize) -> f32) -> Buf {
        let n: i64 = shape.iter().product();
        let esize = dtype.bits as usize / 8;
        let mut mem = Block::new(n as usize * esize);
        let p = mem.as_mut_slice().as_mut_ptr();
        for i in 0..n as usize {
            let v = fill(i);
            // SAFETY: i < n elements of esize bytes.
            unsafe {
                match (dtype.code, dtype.bits) {
                    (c, 32) if c == kDLFloat => *(p as *mut f32).add(i) = v,
                    (c, 16) if c == kDLBfloat => *(p as *mut bf16).add(i) = bf16::from_f32(v),
                    (_, 64) => *(p as *mut i64).add(i) = v as i64,
                    _ => unreachable!(),
                }
            }
        }
        let mut shape = shape.to_vec();
        let dl = Box::new(DLTensor {
            data: p as *mut c_void,
            device: DLDevice {
                device_type: kDLCPU,
                device_id: 0,
            },
            ndim: shape.len() as i32,
            dtype,
            shape: shape.as_mut_ptr(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        });
        Buf {
            _mem: mem,
            _shape: shape,
            dl,
        }
    }
    fn view(&self) -> AnyView<'_> {
        // SAFETY: `self.dl` lives (unchanged) as long as the borrow of `self`.
        unsafe { AnyView::from_dltensor_ptr(&*self.dl as *const DLTensor as *mut DLTensor) }
    }
}

const F32: DLDataType = DLDataType {
    code: kDLFloat,
    bits: 32,
    lanes: 1,
};
const BF16: DLDataType = DLDataType {
    code: kDLBfloat,
    bits: 16,
    lanes: 1,
};
const I64: DLDataType = DLDataType {
    code: kDLInt,
    bits: 64,
    lanes: 1,
};

fn rnd(i: usize) -> f32 {
    let x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    (x as f32) / (1u64 << 24) as f32
}

fn op(name: &str) -> Function {
    tvm_ffi::anyffi_registry::get_global(name).unwrap_or_else(|| panic!("{name} registered"))
}

type Runner = Box<dyn FnMut()>;

/// Builds the runner of one case (buffers live in the closure).
fn build(case: &str) -> Runner {
    if let Some(inner) = case.strip_prefix("cold:") {
        return build(inner);
    }
    if let Some(inner) = case.strip_prefix("nocache:") {
        // The capacity is set around the timed block by `main`.
        return build(inner);
    }
    let parts: Vec<&str> = case.split(':').collect();
    let num = |i: usize| parts[i].parse::<i64>().expect("number");
    let dt = || match parts[1] {
        "f32" => F32,
        "bf16" => BF16,
        other => panic!("dtype {other}"),
    };
    match parts[0] {
        "copy" => {
            let n = num(1) as usize / 2;
            let mut src = Block::new(n);
            src.as_mut_slice().fill(1);
            let dst = Block::new(n);
            // On the kernels' threads (the team: the caller and the spinning helpers), like
            // the ops it is compared with, in chunks taken from a shared counter.
            let (dp, sp) = (dst.p as usize, src.p as usize);
            Box::new(move || {
                let _ = (&src, &dst);
                let parts = 4 * threads().max(1);
                let chunk = n.div_ceil(parts);
                par_for(parts, &|c| {
                    let start = (c * chunk).min(n);
                    let len = chunk.min(n - start);
                    // SAFETY: disjoint ranges of the two blocks, which outlive the closure.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            (sp + start) as *const u8,
                            (dp + start) as *mut u8,
                            len,
                        )
                    };
                });
            })
        }
        "linear" => {
            let (m, k, n) = (num(2), num(3), num(4));
            let x = Buf::new(&[m, k], dt(), rnd);
            let w = Buf::new(&[n, k], dt(), |i| rnd(i) * 0.01);
            let y = Buf::new(&[m, n], dt(), |_| 0.0);
            let f = op("ops.linear");
            Box::new(move || {
                f.call(&[y.view(), x.view(), w.view(), AnyView::NONE])
                    .unwrap();
            })
        }
        name @ ("add" | "swiglu" | "rms_norm") => {
            let (m, n) = (num(2), num(3));
            let a = Buf::new(&[m, n], dt(), rnd);
            let b = Buf::new(&[m, n], dt(), |i| rnd(i + 7));
            let c = Buf::new(&[m, n], dt(), |_| 0.0);
            let w = Buf::new(&[n], dt(), |i| rnd(i + 3));
            let f = op(&format!("ops.{name}"));
            let norm = name == "rms_norm";
            Box::new(move || {
                if norm {
                    f.call(&[c.view(), a.view(), w.view(), AnyView::from(1e-6)])
                        .unwrap();
                } else {
                    f.call(&[c.view(), a.view(), b.view()]).unwrap();
                }
            })
        }
        "rope" => {
            let (seq, nh, d) = (num(2), num(3), num(4));
            let x = Buf::new(&[seq, nh, d], dt(), rnd);
            let y = Buf::new(&[seq, nh, d], dt(), |_| 0.0);
            let pos = Buf::new(&[seq], I64, |i| (seq as usize + i) as f32);
            let f = op("ops.rope");
            Box::new(move || {
                f.call(&[y.view(), x.view(), pos.view(), AnyView::from(1e4)])
                    .unwrap();
            })
        }
        "attn" => {
            let (l, s, h, hk, d) = (num(2), num(3), num(4), num(5), num(6));
            let q = Buf::new(&[l, h, d], dt(), rnd);
            let k = Buf::new(&[s, hk, d], dt(), |i| rnd(i + 1));
            let v = Buf::new(&[s, hk, d], dt(), |i| rnd(i + 2));
            let o = Buf::new(&[l, h, d], dt(), |_| 0.0);
            let f = op("ops.self_attention");
            let scale = 1.0 / (d as f64).sqrt();
            Box::new(move || {
                f.call(&[o.view(), q.view(), k.view(), v.view(), AnyView::from(scale)])
                    .unwrap();
            })
        }
        "argmax" => {
            let n = num(2);
            let vals = Buf::new(&[n], dt(), rnd);
            let idx = Buf::new(&[1], I64, |_| 0.0);
            let val = Buf::new(&[1], dt(), |_| 0.0);
            let f = op("ops.argmax");
            Box::new(move || {
                f.call(&[idx.view(), val.view(), vals.view()]).unwrap();
            })
        }
        other => panic!("unknown case {other}"),
    }
}

fn main() {
    tvm_ffi::ops::register_ops().unwrap();
    let mut cases: HashMap<String, Runner> = HashMap::new();
    // Written between the timed calls of `cold:` cases so the operands come from DRAM.
    let mut flush = vec![0u64; 32 << 20];
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.unwrap();
        let mut it = line.split_whitespace();
        let (Some(case), Some(reps)) = (it.next(), it.next()) else {
            continue;
        };
        let reps: usize = reps.parse().unwrap();
        let nocache = case.starts_with("nocache:");
        let cap = op("ops.plan_cache_capacity");
        if nocache {
            cap.call(&[AnyView::from(0i64)]).unwrap();
        }
        let run = cases.entry(case.to_string()).or_insert_with(|| {
            let mut r = build(case);
            r(); // first touch, plan
            r
        });
        let cold = case.starts_with("cold:");
        let times: Vec<String> = (0..reps)
            .map(|_| {
                if cold {
                    flush.iter_mut().for_each(|x| *x = x.wrapping_add(1));
                }
                let t = Instant::now();
                run();
                format!("{:e}", t.elapsed().as_secs_f64())
            })
            .collect();
        if nocache {
            cap.call(&[AnyView::from(100i64)]).unwrap();
        }
        writeln!(out, "{}", times.join(" ")).unwrap();
        out.flush().unwrap();
    }
}
