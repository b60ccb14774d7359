//! Shared helpers of the ops tests: host tensors as DLTensor views over Rust buffers, a seeded
//! uniform generator, f64 references, and `allclose` as the LLAISYS harness checks it.
#![allow(dead_code)]

use std::ffi::c_void;

use half::{bf16, f16};
use tvm_ffi::anyffi::abi::{kDLBfloat, kDLCPU, kDLFloat, kDLInt, DLDataType, DLDevice, DLTensor};
use tvm_ffi::anyffi::{Any, AnyView, Error};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dt {
    F32,
    F16,
    BF16,
    I64,
    I32,
}

pub const FLOATS: [Dt; 3] = [Dt::F32, Dt::F16, Dt::BF16];

impl Dt {
    pub fn dl(self) -> DLDataType {
        let (code, bits) = match self {
            Dt::F32 => (kDLFloat, 32),
            Dt::F16 => (kDLFloat, 16),
            Dt::BF16 => (kDLBfloat, 16),
            Dt::I64 => (kDLInt, 64),
            Dt::I32 => (kDLInt, 32),
        };
        DLDataType {
            code,
            bits,
            lanes: 1,
        }
    }
    pub fn size(self) -> usize {
        match self {
            Dt::F32 | Dt::I32 => 4,
            Dt::F16 | Dt::BF16 => 2,
            Dt::I64 => 8,
        }
    }
    /// Rounds like a store into this dtype.
    pub fn round(self, x: f64) -> f64 {
        match self {
            Dt::F32 => x as f32 as f64,
            Dt::F16 => f16::from_f64(x).to_f64(),
            Dt::BF16 => bf16::from_f64(x).to_f64(),
            Dt::I64 | Dt::I32 => x.round(),
        }
    }
    /// LLAISYS tolerance (atol = rtol) for most ops.
    pub fn tol(self) -> f64 {
        match self {
            Dt::F32 => 1e-5,
            Dt::F16 => 1e-3,
            _ => 1e-2,
        }
    }
}

/// A host tensor: a DLTensor view over an owned byte buffer (boxed, so the view's address is
/// stable while the test holds it).
pub struct HostTensor {
    pub buf: Vec<u64>,
    pub shape: Vec<i64>,
    pub strides: Vec<i64>,
    pub dt: Dt,
    pub dl: Box<DLTensor>,
}

impl HostTensor {
    /// Uninitialised-looking (filled with a NaN-ish garbage pattern) contiguous tensor.
    pub fn new(shape: &[i64], dt: Dt) -> Self {
        let mut strides = vec![1i64; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * shape[i + 1];
        }
        Self::strided(shape, &strides, dt)
    }

    /// A tensor with the given strides (elements) over a buffer just large enough.
    pub fn strided(shape: &[i64], strides: &[i64], dt: Dt) -> Self {
        let span: i64 = if shape.contains(&0) {
            0
        } else {
            1 + shape
                .iter()
                .zip(strides)
                .map(|(&n, &s)| (n - 1) * s)
                .sum::<i64>()
        };
        let bytes = span as usize * dt.size();
        // Garbage fill (0xFF bytes: NaN in every float type) so unwritten outputs show up.
        let buf = vec![u64::MAX; bytes.div_ceil(8).max(1)];
        let mut t = HostTensor {
            buf,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            dt,
            dl: Box::new(DLTensor {
                data: std::ptr::null_mut(),
                device: DLDevice {
                    device_type: kDLCPU,
                    device_id: 0,
                },
                ndim: shape.len() as i32,
                dtype: dt.dl(),
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            }),
        };
        t.dl.data = t.buf.as_mut_ptr() as *mut c_void;
        t.dl.shape = t.shape.as_mut_ptr();
        t.dl.strides = t.strides.as_mut_ptr();
        t
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product::<i64>() as usize
    }

    /// Element offsets in row-major index order.
    pub fn offsets(&self) -> Vec<usize> {
        let n = self.numel();
        let mut out = Vec::with_capacity(n);
        let nd = self.shape.len();
        let mut idx = vec![0i64; nd];
        for _ in 0..n {
            out.push(
                idx.iter()
                    .zip(&self.strides)
                    .map(|(i, s)| i * s)
                    .sum::<i64>() as usize,
            );
            for d in (0..nd).rev() {
                idx[d] += 1;
                if idx[d] < self.shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        out
    }

    fn bytes(&mut self) -> *mut u8 {
        self.buf.as_mut_ptr() as *mut u8
    }

    pub fn set(&mut self, vals: &[f64]) {
        let offs = self.offsets();
        assert_eq!(vals.len(), offs.len());
        let p = self.bytes();
        for (&o, &v) in offs.iter().zip(vals) {
            // SAFETY: offsets inside the buffer.
            unsafe {
                match self.dt {
                    Dt::F32 => *(p as *mut f32).add(o) = v as f32,
                    Dt::F16 => *(p as *mut f16).add(o) = f16::from_f64(v),
                    Dt::BF16 => *(p as *mut bf16).add(o) = bf16::from_f64(v),
                    Dt::I64 => *(p as *mut i64).add(o) = v as i64,
                    Dt::I32 => *(p as *mut i32).add(o) = v as i32,
                }
            }
        }
    }

    /// Values in row-major index order, as f64.
    pub fn get(&self) -> Vec<f64> {
        let p = self.buf.as_ptr() as *const u8;
        self.offsets()
            .into_iter()
            .map(|o| {
                // SAFETY: offsets inside the buffer.
                unsafe {
                    match self.dt {
                        Dt::F32 => *(p as *const f32).add(o) as f64,
                        Dt::F16 => (*(p as *const f16).add(o)).to_f64(),
                        Dt::BF16 => (*(p as *const bf16).add(o)).to_f64(),
                        Dt::I64 => *(p as *const i64).add(o) as f64,
                        Dt::I32 => *(p as *const i32).add(o) as f64,
                    }
                }
            })
            .collect()
    }

    /// Fills with uniform [0,1) * scale + bias values, returns them as stored (rounded).
    pub fn rand(&mut self, rng: &mut Rng, scale: f64, bias: f64) -> Vec<f64> {
        let v: Vec<f64> = (0..self.numel())
            .map(|_| rng.uniform() * scale + bias)
            .collect();
        self.set(&v);
        self.get()
    }

    /// A `DLTensor*` view; callers keep `self` alive (and unchanged) while they use it.
    pub fn view(&self) -> AnyView<'static> {
        // SAFETY: `self.dl` is boxed; test code keeps the tensor alive while the view is used.
        unsafe { AnyView::from_dltensor_ptr(&*self.dl as *const DLTensor as *mut DLTensor) }
    }
}

/// A contiguous tensor of `shape` filled with uniform values; returns it and its stored values.
pub fn rand_tensor(
    rng: &mut Rng,
    shape: &[i64],
    dt: Dt,
    scale: f64,
    bias: f64,
) -> (HostTensor, Vec<f64>) {
    let mut t = HostTensor::new(shape, dt);
    let v = t.rand(rng, scale, bias);
    (t, v)
}

/// xorshift64* with a fixed seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

pub fn setup() {
    tvm_ffi::ops::register_ops().unwrap();
}

/// Calls a registered op.
pub fn call(name: &str, args: &[AnyView<'_>]) -> Result<Any, Error> {
    setup();
    let f = tvm_ffi::anyffi_registry::get_global(name).expect("registered");
    f.call(args)
}

/// Asserts `|got - want| <= atol + rtol * |want|` everywhere (the torch.allclose rule).
#[track_caller]
pub fn assert_close(what: &str, got: &[f64], want: &[f64], atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst = (0usize, 0.0f64);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs();
        let ok = err <= atol + rtol * w.abs();
        if !ok || g.is_nan() {
            panic!("{what}: element {i}: got {g}, want {w} (atol {atol}, rtol {rtol})");
        }
        if err > worst.1 {
            worst = (i, err);
        }
    }
}

/// The message of an error (kind: message).
pub fn err_of(r: Result<Any, Error>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => format!("{}: {}", e.kind(), e.message()),
    }
}
