//! The operator library (`ops.*` global functions, spec §2): one file per operator, each
//! validating its arguments once (device, dtype, shape, strides, overlap) with errors that name
//! the op and the argument, then dispatching by device and dtype to `kernels::cpu` or
//! `kernels::cuda`.
//!
//! Every op is a packed function taking `ffi.Tensor` objects or borrowed `DLTensor*` views,
//! outputs first (LLAISYS order), and writes every output element. On CUDA the ops enqueue on
//! the thread's current stream and return without waiting (see `kernels::cuda`); with no
//! driver they fail with a RuntimeError naming `libcuda.so`.

#![warn(clippy::undocumented_unsafe_blocks)]

mod add;
mod argmax;
mod binary;
mod embedding;
mod gemm;
mod linear;
pub mod plan_cache;
mod rearrange;
mod rms_norm;
mod rope;
mod self_attention;
mod swiglu;

use anyffi::abi::{
    kDLBfloat, kDLCPU, kDLCUDA, kDLCUDAHost, kDLFloat, kDLInt, DLDataType, DLTensor,
};
use anyffi::tensor::dtype_bytes;
use anyffi::{Any, AnyView, Error, Result};

/// Registers every `ops.*` function in the global table (idempotent: re-registration
/// overrides). The library's init calls it once.
pub fn register_ops() -> Result<()> {
    type Op = fn(&[AnyView<'_>]) -> Result<()>;
    // OPS-LIST: keep in sync with ARCHITECTURE.md's ops names.
    let ops: [(&str, Op); 10] = [
        ("ops.add", add::call),
        ("ops.argmax", argmax::call),
        ("ops.embedding", embedding::call),
        ("ops.linear", linear::call),
        ("ops.rearrange", rearrange::call),
        ("ops.rms_norm", rms_norm::call),
        ("ops.rope", rope::call),
        ("ops.self_attention", self_attention::call),
        ("ops.swiglu", swiglu::call),
        ("ops.gemm", gemm::call),
    ];
    for (name, f) in ops {
        anyffi_registry::register_packed(name, move |args| f(args).map(|()| Any::none()), true)?;
    }
    anyffi_registry::register_packed(
        "ops.plan_cache_capacity",
        |args| {
            let cap = match args {
                [c] => match c.as_i64() {
                    Some(n) if n >= 0 => n,
                    Some(n) => {
                        return Err(Error::value_error(format!(
                            "ops.plan_cache_capacity: `capacity` must be >= 0, got {n}"
                        )))
                    }
                    None => {
                        return Err(Error::type_error(format!(
                            "ops.plan_cache_capacity: `capacity` must be an int >= 0, got {}",
                            c.type_key()
                        )))
                    }
                },
                _ => {
                    return Err(Error::type_error(format!(
                        "ops.plan_cache_capacity: expected 1 argument (capacity), got {}",
                        args.len()
                    )))
                }
            };
            Ok(Any::from(plan_cache::set_capacity(cap as usize) as i64))
        },
        true,
    )?;
    Ok(())
}

/// Element types the ops understand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum DType {
    F32,
    F16,
    BF16,
    I64,
    I32,
    /// Anything else, as (code, bits, lanes) (only `rearrange` and `embedding` move such
    /// elements, by size).
    Other(u8, u8, u16),
}

impl DType {
    fn from_dl(t: DLDataType) -> DType {
        match (t.code, t.bits, t.lanes) {
            (c, 32, 1) if c == kDLFloat => DType::F32,
            (c, 16, 1) if c == kDLFloat => DType::F16,
            (c, 16, 1) if c == kDLBfloat => DType::BF16,
            (c, 64, 1) if c == kDLInt => DType::I64,
            (c, 32, 1) if c == kDLInt => DType::I32,
            (c, b, l) => DType::Other(c, b, l),
        }
    }

    pub(crate) fn name(self) -> String {
        match self {
            DType::F32 => "float32".into(),
            DType::F16 => "float16".into(),
            DType::BF16 => "bfloat16".into(),
            DType::I64 => "int64".into(),
            DType::I32 => "int32".into(),
            DType::Other(code, bits, lanes) => {
                crate::args::dtype_name(DLDataType { code, bits, lanes })
            }
        }
    }

    pub(crate) fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }
}

/// Most dimensions an op argument may have.
pub(crate) const MAX_NDIM: usize = 8;

/// One validated tensor argument: shape and strides (compact ones filled in when a DLTensor*
/// view leaves strides NULL), dtype, device, and the address of element 0.
#[derive(Clone, Copy)]
pub(crate) struct TensorArg<'a> {
    pub op: &'static str,
    pub name: &'static str,
    pub shape: &'a [i64],
    strides_buf: [i64; MAX_NDIM],
    pub dtype: DType,
    pub esize: usize,
    pub device: (i32, i32),
    pub data: *mut u8,
}

impl<'a> TensorArg<'a> {
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    pub fn strides(&self) -> &[i64] {
        &self.strides_buf[..self.shape.len()]
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product::<i64>() as usize
    }

    pub fn is_contiguous(&self) -> bool {
        anyffi::tensor::is_contiguous(self.shape, Some(self.strides()))
    }

    pub fn ptr<T>(&self) -> *mut T {
        self.data as *mut T
    }

    /// `(a, b, c)` for messages.
    pub fn shape_str(&self) -> String {
        tuple(self.shape)
    }

    /// ValueError unless the shape equals `want` (described as `what`, e.g. "(N, K)").
    pub fn expect_shape(&self, what: &str, want: &[i64]) -> Result<()> {
        if self.shape != want {
            let want = tuple(want);
            // "(M, N) = (2, 3)", but a literal shape once: "(1,)", not "(1,) = (1,)"
            let shape = if what == want {
                want
            } else {
                format!("{what} = {want}")
            };
            return Err(Error::value_error(format!(
                "{}: `{}` must have shape {shape}, got {}",
                self.op,
                self.name,
                self.shape_str()
            )));
        }
        Ok(())
    }

    /// ValueError unless the tensor has `n` dimensions.
    pub fn expect_ndim(&self, n: usize, what: &str) -> Result<()> {
        if self.ndim() != n {
            return Err(Error::value_error(format!(
                "{}: `{}` must be {}-D {}, got shape {}",
                self.op,
                self.name,
                n,
                what,
                self.shape_str()
            )));
        }
        Ok(())
    }

    /// ValueError unless row-major contiguous.
    pub fn expect_contiguous(&self) -> Result<()> {
        if !self.is_contiguous() {
            return Err(Error::value_error(format!(
                "{}: `{}` must be contiguous, got strides {} for shape {}",
                self.op,
                self.name,
                tuple(self.strides()),
                self.shape_str()
            )));
        }
        Ok(())
    }

    /// ValueError unless the last dimension has stride 1 (size-1 last dims pass).
    pub fn expect_unit_last_stride(&self) -> Result<()> {
        if self.numel() == 0 {
            // nothing to read or write (numpy gives empty arrays zero strides)
            return Ok(());
        }
        if let (Some(&n), Some(&s)) = (self.shape.last(), self.strides().last()) {
            if n > 1 && s != 1 {
                return Err(Error::value_error(format!(
                    "{}: `{}` must have stride 1 in its last dimension, got strides {}",
                    self.op,
                    self.name,
                    tuple(self.strides())
                )));
            }
        }
        Ok(())
    }

    /// TypeError unless the dtype is `want`.
    pub fn expect_dtype(&self, want: DType) -> Result<()> {
        if self.dtype != want {
            return Err(Error::type_error(format!(
                "{}: `{}` must have dtype {}, got {}",
                self.op,
                self.name,
                want.name(),
                self.dtype.name()
            )));
        }
        Ok(())
    }

    /// TypeError unless float32, float16 or bfloat16.
    pub fn expect_float(&self) -> Result<()> {
        if !self.dtype.is_float() {
            return Err(Error::type_error(format!(
                "{}: `{}` has dtype {}; supported: float32, float16, bfloat16",
                self.op,
                self.name,
                self.dtype.name()
            )));
        }
        Ok(())
    }

    /// TypeError unless the dtype equals `other`'s.
    pub fn expect_same_dtype(&self, other: &TensorArg<'_>) -> Result<()> {
        if self.dtype != other.dtype {
            return Err(Error::type_error(format!(
                "{}: `{}` must have the dtype of `{}` ({}), got {}",
                self.op,
                self.name,
                other.name,
                other.dtype.name(),
                self.dtype.name()
            )));
        }
        Ok(())
    }

    /// ValueError unless the shape equals `other`'s.
    pub fn expect_same_shape(&self, other: &TensorArg<'_>) -> Result<()> {
        if self.shape != other.shape {
            return Err(Error::value_error(format!(
                "{}: `{}` must have the shape of `{}` {}, got {}",
                self.op,
                self.name,
                other.name,
                other.shape_str(),
                self.shape_str()
            )));
        }
        Ok(())
    }

    /// Stride (elements) between consecutive rows when the leading dimensions (all but the
    /// last) collapse into one strided row index; ValueError otherwise.
    pub fn row_stride(&self) -> Result<isize> {
        let nd = self.ndim();
        if nd == 0 || self.numel() == 0 {
            // nothing is read or written (an empty `[2, 0, K]` has strides that do not
            // collapse, e.g. torch's (K, K, 1))
            return Ok(0);
        }
        let (shape, strides) = (&self.shape[..nd - 1], &self.strides()[..nd - 1]);
        let mut stride: Option<i64> = None;
        let mut expect: Option<i64> = None;
        for (&n, &s) in shape.iter().zip(strides).rev() {
            if n == 1 {
                continue;
            }
            match expect {
                None => stride = Some(s),
                Some(e) if e == s => {}
                Some(_) => {
                    return Err(Error::value_error(format!(
                        "{}: the leading dimensions of `{}` must collapse into rows, got \
                         strides {} for shape {}",
                        self.op,
                        self.name,
                        tuple(self.strides()),
                        self.shape_str()
                    )))
                }
            }
            expect = Some(s * n);
        }
        Ok(stride.unwrap_or(0) as isize)
    }

    /// Byte range `[lo, hi)` the tensor touches (empty tensors touch nothing).
    fn span(&self) -> (usize, usize) {
        if self.numel() == 0 {
            return (self.data as usize, self.data as usize);
        }
        let (mut lo, mut hi) = (0i64, 0i64);
        for (&n, &s) in self.shape.iter().zip(self.strides()) {
            if s >= 0 {
                hi += (n - 1) * s;
            } else {
                lo += (n - 1) * s;
            }
        }
        let e = self.esize as i64;
        let base = self.data as i64;
        ((base + lo * e) as usize, (base + (hi + 1) * e) as usize)
    }

    /// Whether the two tensors may share an element: their byte spans intersect, and the
    /// distance between their first elements does not rule it out. Every element sits at its
    /// first element's address plus a multiple of `g`, the gcd of both tensors' byte strides,
    /// so interleaved views (`buf[:, ::2]` and `buf[:, 1::2]`) are disjoint when that distance
    /// modulo `g` keeps their elements apart.
    fn overlaps(&self, other: &TensorArg<'_>) -> bool {
        let (a0, a1) = self.span();
        let (b0, b1) = other.span();
        if !(a0 < b1 && b0 < a1) {
            return false;
        }
        fn gcd(a: i64, b: i64) -> i64 {
            if b == 0 {
                a
            } else {
                gcd(b, a % b)
            }
        }
        let mut g = 0i64;
        for t in [self, other] {
            for (&n, &s) in t.shape.iter().zip(t.strides()) {
                if n > 1 {
                    g = gcd(g, (s * t.esize as i64).abs());
                }
            }
        }
        if g == 0 {
            return true; // one element each, and their spans intersect
        }
        let (ea, eb) = (self.esize as i64, other.esize as i64);
        let r = (self.data as i64 - other.data as i64).rem_euclid(g);
        // the address differences are r + k*g; elements meet when one lies in (-ea, eb)
        r < eb || g - r < ea
    }

    /// ValueError if this output shares memory with `input`.
    pub fn expect_no_overlap(&self, input: &TensorArg<'_>) -> Result<()> {
        if self.overlaps(input) {
            return Err(Error::value_error(format!(
                "{}: output `{}` overlaps input `{}`; use a separate buffer",
                self.op, self.name, input.name
            )));
        }
        Ok(())
    }

    /// Whether both tensors address exactly the same elements in the same order: same shape,
    /// same first element and the same strides on every dimension of size > 1 (the stride of
    /// a size-1 dimension is never used: `a[None, :]` and `a.reshape(1, n)` are one layout).
    pub fn same_elements(&self, other: &TensorArg<'_>) -> bool {
        self.data == other.data
            && self.shape == other.shape
            && self
                .shape
                .iter()
                .zip(self.strides().iter().zip(other.strides()))
                .all(|(&n, (a, b))| n <= 1 || a == b)
    }

    /// ValueError if this output partially overlaps `input`: element-wise ops may run in place
    /// only on exactly the same elements (same address and strides).
    pub fn expect_same_or_disjoint(&self, input: &TensorArg<'_>) -> Result<()> {
        if self.overlaps(input) && !self.same_elements(input) {
            return Err(Error::value_error(format!(
                "{}: output `{}` partially overlaps input `{}`; in-place use needs the same \
                 memory and strides",
                self.op, self.name, input.name
            )));
        }
        Ok(())
    }
}

/// `(a, b, c)` (Python tuple style; `(a,)` for one element).
pub(crate) fn tuple(v: &[i64]) -> String {
    match v {
        [x] => format!("({x},)"),
        _ => format!(
            "({})",
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// TypeError unless exactly `names.len()` arguments were passed.
pub(crate) fn expect_args(op: &str, args: &[AnyView<'_>], names: &[&str]) -> Result<()> {
    if args.len() != names.len() {
        return Err(Error::type_error(format!(
            "{op}: expected {} arguments ({}), got {}",
            names.len(),
            names.join(", "),
            args.len()
        )));
    }
    Ok(())
}

/// Parses output argument `idx` as a tensor, refusing one with a zero stride on a dimension
/// of size > 1 (as PyTorch and `runtime.copy_` do): some of its elements would be written more
/// than once, by different threads.
pub(crate) fn output_arg<'a>(
    op: &'static str,
    args: &'a [AnyView<'a>],
    idx: usize,
    name: &'static str,
) -> Result<TensorArg<'a>> {
    let t = tensor_arg(op, args, idx, name)?;
    crate::args::check_writable(&args[idx], op, name)?;
    // an empty output is not written; a layout that fails the overlap rule is named by its
    // plainest cause, a zero stride, when it has one
    if t.shape.contains(&0) || strides_disjoint(t.shape, t.strides()) {
        return Ok(t);
    }
    if t.shape
        .iter()
        .zip(t.strides())
        .any(|(&n, &s)| n > 1 && s == 0)
    {
        return Err(Error::value_error(format!(
            "{op}: output `{name}` has a zero stride on a dimension of size > 1 (shape {}, \
             strides {}): some elements would be written more than once",
            tuple(t.shape),
            tuple(t.strides())
        )));
    }
    Err(Error::value_error(format!(
        "{op}: output `{name}` may overlap itself (shape {}, strides {}): ordered by stride, \
         each dimension's stride must step past everything the smaller ones span, else several \
         threads could write one element",
        tuple(t.shape),
        tuple(t.strides())
    )))
}

/// Whether no two elements of a tensor with this shape and these strides (all dimensions > 0)
/// share an address, by the rule that covers every layout made by slicing, permuting or
/// broadcasting a compact tensor: taken in order of |stride|, each dimension steps past the
/// whole span of the smaller ones. (A few exotic layouts that never overlap fail it, such as
/// shape (3, 2) with strides (2, 3).)
pub(crate) fn strides_disjoint(shape: &[i64], strides: &[i64]) -> bool {
    let mut dims = [(0u128, 0u128); MAX_NDIM];
    let mut n = 0;
    for (&size, &stride) in shape.iter().zip(strides) {
        if size > 1 {
            dims[n] = (stride.unsigned_abs() as u128, size as u128);
            n += 1;
        }
    }
    let dims = &mut dims[..n];
    dims.sort_unstable();
    let mut span = 1u128; // elements covered by the dimensions so far, from offset 0
    for &(stride, size) in dims.iter() {
        if stride < span {
            return false;
        }
        span = span.saturating_add(stride.saturating_mul(size - 1));
    }
    true
}

/// Parses argument `idx` as a tensor (an `ffi.Tensor` or a `DLTensor*`).
pub(crate) fn tensor_arg<'a>(
    op: &'static str,
    args: &'a [AnyView<'a>],
    idx: usize,
    name: &'static str,
) -> Result<TensorArg<'a>> {
    let v = &args[idx];
    let Some(p) = v.as_dltensor_ptr() else {
        return Err(Error::type_error(format!(
            "{op}: argument #{idx} (`{name}`) must be an ffi.Tensor or a DLTensor*, got {}",
            v.type_key()
        )));
    };
    // SAFETY: a Tensor object or a non-NULL DLTensor* view, alive for the call (borrowed).
    let t: &'a DLTensor = unsafe { &*p };
    if t.ndim < 0 || t.ndim as usize > MAX_NDIM {
        return Err(Error::value_error(format!(
            "{op}: `{name}` has ndim {}; ops take 0 to {MAX_NDIM} dimensions",
            t.ndim
        )));
    }
    let nd = t.ndim as usize;
    let shape: &'a [i64] = if nd == 0 {
        &[]
    } else if t.shape.is_null() {
        return Err(Error::value_error(format!(
            "{op}: `{name}` has a NULL shape pointer with ndim {nd}"
        )));
    } else {
        // SAFETY: DLPack: shape holds ndim entries.
        unsafe { std::slice::from_raw_parts(t.shape, nd) }
    };
    if let Some(&bad) = shape.iter().find(|&&n| n < 0) {
        return Err(Error::value_error(format!(
            "{op}: `{name}` has a negative dimension {bad} in shape {}",
            tuple(shape)
        )));
    }
    if t.dtype.bits == 0 || t.dtype.bits % 8 != 0 || t.dtype.lanes == 0 {
        return Err(Error::type_error(format!(
            "{op}: `{name}` has dtype {}; ops take whole-byte element types",
            crate::args::dtype_name(t.dtype)
        )));
    }
    let dtype = DType::from_dl(t.dtype);
    let esize = dtype_bytes(t.dtype);
    let numel = if shape.contains(&0) {
        Some(0)
    } else {
        shape.iter().try_fold(1i64, |acc, &n| acc.checked_mul(n))
    }
    .filter(|&n| {
        n.checked_mul(esize as i64)
            .is_some_and(|b| b <= isize::MAX as i64)
    })
    .ok_or_else(|| {
        Error::value_error(format!(
            "{op}: `{name}` has shape {}, more bytes than an address space holds",
            tuple(shape)
        ))
    })?;
    let mut strides_buf = [0i64; MAX_NDIM];
    if nd > 0 && !t.strides.is_null() {
        // SAFETY: DLPack: strides, when present, hold ndim entries.
        strides_buf[..nd].copy_from_slice(unsafe { std::slice::from_raw_parts(t.strides, nd) });
    } else {
        let mut s = 1i64;
        for d in (0..nd).rev() {
            strides_buf[d] = s;
            s *= shape[d].max(1);
        }
    }
    if numel > 0 && t.data.is_null() {
        return Err(Error::value_error(format!("{op}: `{name}` has NULL data")));
    }
    Ok(TensorArg {
        op,
        name,
        shape,
        strides_buf,
        dtype,
        esize,
        device: (t.device.device_type, t.device.device_id),
        // SAFETY: byte_offset stays inside the producer's allocation (DLPack contract).
        data: unsafe { (t.data as *mut u8).add(t.byte_offset as usize) },
    })
}

/// Parses argument `idx` as an optional tensor (None → `None`).
pub(crate) fn optional_tensor_arg<'a>(
    op: &'static str,
    args: &'a [AnyView<'a>],
    idx: usize,
    name: &'static str,
) -> Result<Option<TensorArg<'a>>> {
    if args[idx].is_none() {
        return Ok(None);
    }
    tensor_arg(op, args, idx, name).map(Some)
}

/// Parses argument `idx` as a number.
pub(crate) fn float_arg(op: &str, args: &[AnyView<'_>], idx: usize, name: &str) -> Result<f64> {
    args[idx].as_f64().ok_or_else(|| {
        Error::type_error(format!(
            "{op}: argument #{idx} (`{name}`) must be a float, got {}",
            args[idx].type_key()
        ))
    })
}

/// Where an op runs.
pub(crate) enum Target {
    Cpu,
    /// A CUDA device id (the driver is loaded and the id exists).
    Cuda(i32),
}

/// Checks that every tensor sits on the first one's device and picks the target.
pub(crate) fn target(op: &str, tensors: &[&TensorArg<'_>]) -> Result<Target> {
    let first = tensors[0];
    for t in &tensors[1..] {
        if t.device != first.device {
            return Err(Error::value_error(format!(
                "{op}: `{}` is on {} but `{}` is on {}",
                t.name,
                device_str(t.device),
                first.name,
                device_str(first.device)
            )));
        }
    }
    match first.device.0 {
        d if d == kDLCPU || d == kDLCUDAHost => Ok(Target::Cpu),
        d if d == kDLCUDA => {
            use crate::device::DeviceRuntime;
            let id = first.device.1;
            let cuda = &*crate::device::cuda::CUDA;
            if let Some(why) = cuda.unavailable_reason() {
                return Err(Error::runtime_error(format!(
                    "{op}: cuda:{id} is unavailable: {why}"
                )));
            }
            if id < 0 || id >= cuda.get_device_count() {
                return Err(Error::value_error(format!(
                    "{op}: device id {id} is out of range for cuda ({})",
                    crate::device::valid_ids(cuda.get_device_count())
                )));
            }
            Ok(Target::Cuda(id))
        }
        d => Err(Error::runtime_error(format!(
            "{op}: device type {d} ({}) is not supported",
            device_str(first.device)
        ))),
    }
}

fn device_str((ty, id): (i32, i32)) -> String {
    let name = match ty {
        1 => "cpu",
        2 => "cuda",
        3 => "cuda_host",
        4 => "opencl",
        7 => "vulkan",
        8 => "metal",
        10 => "rocm",
        13 => "cuda_managed",
        _ => "device",
    };
    format!("{name}:{id}")
}

#[cfg(test)]
mod tests {
    use super::strides_disjoint;

    #[test]
    fn disjoint_strides() {
        // compact, sliced, transposed, reversed, size-1 dimensions with any stride
        assert!(strides_disjoint(&[2, 3], &[3, 1]));
        assert!(strides_disjoint(&[2, 3], &[12, 2]));
        assert!(strides_disjoint(&[3, 2], &[1, 3]));
        assert!(strides_disjoint(&[2, 3], &[-3, -1]));
        assert!(strides_disjoint(&[1, 3, 1], &[0, 1, 0]));
        assert!(strides_disjoint(&[4], &[i64::MAX]));
        assert!(strides_disjoint(&[2, 2, 2], &[i64::MAX / 2, 1 << 40, 1]));
        // overlapping: equal strides, a stride inside the span of a smaller one, zero strides
        assert!(!strides_disjoint(&[2, 3], &[1, 1]));
        assert!(!strides_disjoint(&[2, 3], &[2, 1]));
        assert!(!strides_disjoint(&[2, 3], &[0, 1]));
        assert!(!strides_disjoint(&[3, 3], &[-2, 1]));
        // spans past u128 saturate instead of wrapping into "disjoint"
        assert!(!strides_disjoint(
            &[i64::MAX, i64::MAX, 2],
            &[1, 1 << 62, 1 << 62]
        ));
    }
}
