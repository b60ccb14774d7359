//! Copies between tensors of any layouts and devices (`runtime.copy_`), and the copies built on
//! them (`runtime.contiguous`, `runtime.to_device`).
//!
//! Rationale: host-to-host copies walk the strides directly, merging dimensions that are
//! contiguous in both tensors so a compact copy is one `memcpy`. Copies that involve a device
//! are one runtime `memcpy` when both sides are compact; otherwise they are staged through a
//! host buffer covering the strided span (no device kernels yet: correct, not fast).

use std::ffi::c_void;

use anyffi::abi::{kDLCPU, DLDataType, DLDevice, DLTensor};
use anyffi::tensor::{compact_strides, is_contiguous};
use anyffi::{Any, Error, Result, Tensor, TensorObj};

use super::alloc::{empty, nbytes_of};
use crate::args::{def, dtype_name, Args};
use crate::device::{resolve, MemcpyKind};

/// A tensor's memory as the copy engine sees it (strides always present, in elements).
struct Side<'a> {
    /// Address of element (0, ..., 0): `data + byte_offset`.
    base: *mut u8,
    device: DLDevice,
    dtype: DLDataType,
    shape: &'a [i64],
    strides: Vec<i64>,
}

impl Side<'_> {
    fn compact(&self) -> bool {
        is_contiguous(self.shape, Some(&self.strides))
    }

    /// `(min, max)` element offsets reachable from `base`.
    fn extent(&self) -> (i64, i64) {
        let (mut lo, mut hi) = (0i64, 0i64);
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            let reach = (n - 1) * s;
            if reach < 0 {
                lo += reach;
            } else {
                hi += reach;
            }
        }
        (lo, hi)
    }
}

/// Whether the byte ranges two layouts reach intersect (`bits` per element).
fn overlap(a: &Side<'_>, b: &Side<'_>, bits: usize) -> bool {
    let range = |t: &Side<'_>| {
        let (lo, hi) = t.extent();
        let base = t.base as i128;
        (
            base + lo as i128 * bits as i128 / 8,
            base + ((hi as i128 + 1) * bits as i128 + 7) / 8,
        )
    };
    let ((a0, a1), (b0, b1)) = (range(a), range(b));
    a0 < b1 && b0 < a1
}

/// Reads a DLTensor's layout, checking what a foreign producer could get wrong.
///
/// # Safety
/// `dl` must point at a live DLTensor whose shape/strides arrays hold `ndim` entries.
unsafe fn side<'a>(dl: *const DLTensor, what: &str) -> Result<Side<'a>> {
    // SAFETY: per the caller.
    let t = unsafe { &*dl };
    if t.ndim < 0 || (t.ndim > 0 && t.shape.is_null()) {
        return Err(Error::value_error(format!(
            "{what}: invalid DLTensor (ndim {}, shape {:p})",
            t.ndim, t.shape
        )));
    }
    let n = t.ndim as usize;
    let shape: &'a [i64] = if n == 0 {
        &[]
    } else {
        // SAFETY: per the caller (checked non-NULL above).
        unsafe { std::slice::from_raw_parts(t.shape, n) }
    };
    if let Some(&d) = shape.iter().find(|&&d| d < 0) {
        return Err(Error::value_error(format!(
            "{what}: negative dimension {d} in shape {shape:?}"
        )));
    }
    if t.data.is_null() && !shape.contains(&0) {
        // a non-empty tensor (0-d included) must have memory (the ops refuse it the same way)
        return Err(Error::value_error(format!(
            "`{what}` has NULL data (shape {shape:?})"
        )));
    }
    let strides = if n == 0 || t.strides.is_null() {
        compact_strides(shape)
    } else {
        // SAFETY: per the caller.
        unsafe { std::slice::from_raw_parts(t.strides, n) }.to_vec()
    };
    let base = (t.data as *mut u8).wrapping_add(t.byte_offset as usize);
    Ok(Side {
        base,
        device: t.device,
        dtype: t.dtype,
        shape,
        strides,
    })
}

/// Reads `buf.len()` bytes at `at` from memory on `device` (`host`: directly).
///
/// # Safety
/// `at` must be valid for `buf.len()` bytes on that side.
unsafe fn read_bytes(device: DLDevice, host: bool, at: *const u8, buf: &mut [u8]) -> Result<()> {
    if host {
        // SAFETY: per the caller; `buf` is a separate host buffer.
        unsafe { std::ptr::copy(at, buf.as_mut_ptr(), buf.len()) };
        return Ok(());
    }
    // SAFETY: per the caller, device memory of `buf.len()` bytes into a host buffer as large.
    unsafe {
        resolve(device)?.memcpy_sync(
            device.device_id,
            buf.as_mut_ptr() as *mut c_void,
            at as *const c_void,
            buf.len(),
            MemcpyKind::D2H,
        )
    }
}

/// Writes `buf` to `at` in memory on `device` (`host`: directly).
///
/// # Safety
/// `at` must be valid for `buf.len()` bytes on that side.
unsafe fn write_bytes(device: DLDevice, host: bool, at: *mut u8, buf: &[u8]) -> Result<()> {
    if host {
        // SAFETY: per the caller; `buf` is a separate host buffer.
        unsafe { std::ptr::copy(buf.as_ptr(), at, buf.len()) };
        return Ok(());
    }
    // SAFETY: per the caller, a host buffer into device memory of the same size.
    unsafe {
        resolve(device)?.memcpy_sync(
            device.device_id,
            at as *mut c_void,
            buf.as_ptr() as *const c_void,
            buf.len(),
            MemcpyKind::H2D,
        )
    }
}

/// Copies `shape` elements of `elem` bytes between two host layouts.
///
/// # Safety
/// Every element address `base + sum(i_k * stride_k) * elem` of both sides must be valid.
unsafe fn host_copy(
    dst: *mut u8,
    dst_strides: &[i64],
    src: *const u8,
    src_strides: &[i64],
    shape: &[i64],
    elem: usize,
) {
    // Merge dimensions that are contiguous in both tensors, dropping size-1 dimensions.
    let mut dims: Vec<(i64, i64, i64)> = Vec::with_capacity(shape.len());
    for ((&n, &ds), &ss) in shape.iter().zip(dst_strides).zip(src_strides) {
        if n == 1 {
            continue;
        }
        match dims.last_mut() {
            Some(outer) if outer.1 == ds * n && outer.2 == ss * n => *outer = (outer.0 * n, ds, ss),
            _ => dims.push((n, ds, ss)),
        }
    }
    let (inner_n, inner_ds, inner_ss) = dims.pop().unwrap_or((1, 1, 1));
    let outer = dims;
    let mut index = vec![0i64; outer.len()];
    let elem_i = elem as isize;
    loop {
        let (mut doff, mut soff) = (0isize, 0isize);
        for (&i, &(_, ds, ss)) in index.iter().zip(&outer) {
            doff += (i * ds) as isize;
            soff += (i * ss) as isize;
        }
        // SAFETY: per the caller, each row's addresses are valid elements.
        unsafe {
            let d = dst.offset(doff * elem_i);
            let s = src.offset(soff * elem_i);
            if inner_ds == 1 && inner_ss == 1 {
                std::ptr::copy(s, d, inner_n as usize * elem);
            } else {
                let (dstep, sstep) = (inner_ds as isize * elem_i, inner_ss as isize * elem_i);
                for k in 0..inner_n as isize {
                    let (dp, sp) = (d.offset(k * dstep), s.offset(k * sstep));
                    match elem {
                        1 => *dp = *sp,
                        2 => (dp as *mut u16).write_unaligned((sp as *const u16).read_unaligned()),
                        4 => (dp as *mut u32).write_unaligned((sp as *const u32).read_unaligned()),
                        8 => (dp as *mut u64).write_unaligned((sp as *const u64).read_unaligned()),
                        _ => std::ptr::copy(sp, dp, elem),
                    }
                }
            }
        }
        // Advance the outer index (odometer order).
        let mut k = outer.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            index[k] += 1;
            if index[k] < outer[k].0 {
                break;
            }
            index[k] = 0;
        }
    }
}

/// A host copy of a device side's strided span: the buffer and the element offset of the
/// side's element 0 inside it.
fn stage_down(side: &Side<'_>, elem: usize) -> Result<(Vec<u8>, i64)> {
    let (lo, hi) = side.extent();
    let span = ((hi - lo + 1) as usize) * elem;
    let mut buf = vec![0u8; span];
    let rt = resolve(side.device)?;
    let start = side.base.wrapping_offset(lo as isize * elem as isize);
    // SAFETY: the span of a valid device tensor, into a host buffer of the same size.
    unsafe {
        rt.memcpy_sync(
            side.device.device_id,
            buf.as_mut_ptr() as *mut c_void,
            start as *const c_void,
            span,
            MemcpyKind::D2H,
        )
    }?;
    Ok((buf, -lo))
}

/// Copies `src` into `dst` (same shape and dtype; any layouts and devices).
///
/// # Safety
/// Both pointers must be live DLTensors describing valid memory.
pub unsafe fn copy_dl(dst: *const DLTensor, src: *const DLTensor) -> Result<()> {
    // SAFETY: per the caller.
    unsafe { copy_impl(dst, src, false) }
}

/// [`copy_dl`]; `as_device` treats CPU sides as device memory, so tests can run the staged
/// device paths on a machine without a GPU (the CPU runtime serves every copy kind).
///
/// # Safety
/// As for [`copy_dl`].
unsafe fn copy_impl(dst: *const DLTensor, src: *const DLTensor, as_device: bool) -> Result<()> {
    // SAFETY: per the caller.
    let (dst, src) = unsafe { (side(dst, "dst")?, side(src, "src")?) };
    // worded as the ops word the same checks (a dtype is a TypeError, a shape a ValueError)
    if dst.dtype != src.dtype {
        return Err(Error::type_error(format!(
            "`src` must have the dtype of `dst` ({}), got {}",
            dtype_name(dst.dtype),
            dtype_name(src.dtype)
        )));
    }
    if dst.shape != src.shape {
        return Err(Error::value_error(format!(
            "`src` must have the shape of `dst` {}, got {}",
            crate::ops::tuple(dst.shape),
            crate::ops::tuple(src.shape)
        )));
    }
    let nbytes = nbytes_of(dst.shape, dst.dtype)?;
    if nbytes == 0 || dst.shape.contains(&0) {
        return Ok(());
    }
    let both_compact = dst.compact() && src.compact();
    let bits = dst.dtype.bits as usize * dst.dtype.lanes as usize;
    #[allow(clippy::manual_is_multiple_of)] // is_multiple_of needs Rust 1.87; MSRV is 1.80
    let whole_bytes = bits % 8 == 0;
    if !whole_bytes && !both_compact {
        return Err(Error::value_error(format!(
            "strided copies of the sub-byte dtype {} are not supported",
            dtype_name(dst.dtype)
        )));
    }
    let elem = bits / 8;
    if dst
        .shape
        .iter()
        .zip(&dst.strides)
        .any(|(&n, &s)| n > 1 && s == 0)
    {
        // as PyTorch refuses: some memory location would be written more than once
        return Err(Error::value_error(format!(
            "dst has a zero stride on a dimension of size > 1 (strides {:?}, shape {:?}): some \
             elements would be written more than once",
            dst.strides, dst.shape
        )));
    }
    let (d_host, s_host) = (
        dst.device.device_type == kDLCPU && !as_device,
        src.device.device_type == kDLCPU && !as_device,
    );
    // Check both devices exist before touching memory.
    resolve(dst.device)?;
    resolve(src.device)?;
    if !whole_bytes {
        // A dtype whose elements are not whole bytes (int4, int12, int4x3, float6_e2m3fnx2;
        // both sides compact, checked above): `host_copy` moves whole elements of `bits / 8`
        // bytes, i.e. nothing or too little. Read the source's bytes first (so overlapping
        // views of one storage come out as numpy's copyto), then write whole bytes; the last
        // byte, when the elements end inside it, keeps dst's bits past the last element
        // (DLPack packs sub-byte elements little bit-endian), since a view of a larger tensor
        // may end mid-byte and the next element lives there.
        let numel: i64 = dst.shape.iter().product();
        let tail_bits = (numel as u128 * bits as u128 % 8) as u32;
        let mut buf = vec![0u8; nbytes];
        // SAFETY: both sides are compact and valid for `nbytes` bytes (caller's contract).
        unsafe {
            read_bytes(src.device, s_host, src.base, &mut buf)?;
            if tail_bits != 0 {
                let mut last = [0u8];
                read_bytes(dst.device, d_host, dst.base.add(nbytes - 1), &mut last)?;
                let keep = !((1u8 << tail_bits) - 1);
                buf[nbytes - 1] = (buf[nbytes - 1] & !keep) | (last[0] & keep);
            }
            return write_bytes(dst.device, d_host, dst.base, &buf);
        }
    }
    let same_device = dst.device.device_type == src.device.device_type
        && dst.device.device_id == src.device.device_id;
    if same_device && overlap(&dst, &src, bits) {
        if dst.base == src.base && dst.strides == src.strides {
            return Ok(()); // the very same elements
        }
        if !(d_host && s_host) {
            return Err(Error::value_error(
                "dst and src overlap in device memory; copy src to a separate tensor first",
            ));
        }
        // Overlapping host layouts (a tensor into its own transpose, a shifted view): read the
        // whole source first, as numpy's copyto does, so the result never depends on the order
        // of the element copies. (Sub-byte dtypes never get here: handled above.)
        let mut tmp = vec![0u8; nbytes];
        let compact = compact_strides(src.shape);
        // SAFETY: the source layout is valid host memory (caller); `tmp` holds it compactly.
        unsafe {
            host_copy(
                tmp.as_mut_ptr(),
                &compact,
                src.base,
                &src.strides,
                src.shape,
                elem,
            );
            host_copy(
                dst.base,
                &dst.strides,
                tmp.as_ptr(),
                &compact,
                dst.shape,
                elem,
            );
        }
        return Ok(());
    }
    if d_host && s_host {
        // SAFETY: both layouts describe valid host memory (caller's contract).
        unsafe {
            host_copy(
                dst.base,
                &dst.strides,
                src.base,
                &src.strides,
                dst.shape,
                elem,
            )
        };
        return Ok(());
    }
    if both_compact {
        let (kind, dev) = match (d_host, s_host) {
            (true, false) => (MemcpyKind::D2H, src.device),
            (false, true) => (MemcpyKind::H2D, dst.device),
            _ => (MemcpyKind::D2D, dst.device),
        };
        // SAFETY: two compact ranges of `nbytes` bytes on the sides `kind` names.
        return unsafe {
            resolve(dev)?.memcpy_sync(
                dev.device_id,
                dst.base as *mut c_void,
                src.base as *const c_void,
                nbytes,
                kind,
            )
        };
    }
    // Staged: bring the device side(s) to host buffers, copy on the host, send dst back.
    let src_stage = if s_host {
        None
    } else {
        Some(stage_down(&src, elem)?)
    };
    let (src_ptr, src_strides) = match &src_stage {
        None => (src.base as *const u8, src.strides.clone()),
        Some((buf, origin)) => (
            buf.as_ptr().wrapping_add(*origin as usize * elem),
            src.strides.clone(),
        ),
    };
    if d_host {
        // SAFETY: host dst (caller's contract) and a src buffer covering every element.
        unsafe {
            host_copy(
                dst.base,
                &dst.strides,
                src_ptr,
                &src_strides,
                dst.shape,
                elem,
            )
        };
        return Ok(());
    }
    let rt = resolve(dst.device)?;
    if dst.compact() {
        let mut buf = vec![0u8; nbytes];
        // SAFETY: a compact host buffer of the full size, and a src covering every element.
        unsafe {
            host_copy(
                buf.as_mut_ptr(),
                &compact_strides(dst.shape),
                src_ptr,
                &src_strides,
                dst.shape,
                elem,
            );
            rt.memcpy_sync(
                dst.device.device_id,
                dst.base as *mut c_void,
                buf.as_ptr() as *const c_void,
                nbytes,
                MemcpyKind::H2D,
            )
        }
    } else {
        // The gaps between dst's elements must survive, so its whole span makes the round trip.
        let (mut buf, origin) = stage_down(&dst, elem)?;
        let (lo, _) = dst.extent();
        // SAFETY: the staged span covers every dst element; it goes back to where it came from.
        unsafe {
            let d = buf.as_mut_ptr().add(origin as usize * elem);
            host_copy(d, &dst.strides, src_ptr, &src_strides, dst.shape, elem);
            let start = dst.base.wrapping_offset(lo as isize * elem as isize);
            rt.memcpy_sync(
                dst.device.device_id,
                start as *mut c_void,
                buf.as_ptr() as *const c_void,
                buf.len(),
                MemcpyKind::H2D,
            )
        }
    }
}

/// A new contiguous tensor on `device` holding a copy of `src`.
///
/// # Safety
/// `src` must be a live DLTensor describing valid memory.
unsafe fn copy_to_new(src: *const DLTensor, device: DLDevice) -> Result<Tensor> {
    // SAFETY: per the caller.
    let s = unsafe { side(src, "t")? };
    let out = empty(s.shape, s.dtype, device)?;
    // SAFETY: a fresh tensor and the caller's valid source.
    unsafe { copy_dl(&out.dl_tensor, src) }?;
    Ok(out)
}

/// `t` itself when it is compact, else a compact copy on the same device.
pub fn contiguous(t: &Tensor) -> Result<Tensor> {
    if t.is_contiguous() {
        return Ok(t.clone());
    }
    // SAFETY: a live tensor object.
    unsafe { copy_to_new(&t.dl_tensor, t.dl_tensor.device) }
}

/// `t` itself when it is on `device`, else a compact copy there.
pub fn to_device(t: &Tensor, device: DLDevice) -> Result<Tensor> {
    if t.dl_tensor.device == device {
        return Ok(t.clone());
    }
    // SAFETY: a live tensor object.
    unsafe { copy_to_new(&t.dl_tensor, device) }
}

/// Registers `runtime.copy_`, `runtime.contiguous` and `runtime.to_device`.
pub(crate) fn register() -> Result<()> {
    def(
        "runtime.copy_",
        "copy_(dst: Tensor|DLTensor*, src: Tensor|DLTensor*) -> None: copies src into dst (same shape and dtype; \
         any layouts and devices)",
        |args| {
            let a = Args::new("runtime.copy_", &["dst", "src"], args)?;
            let dst = a.output_dltensor(0, "dst")?;
            let src = a.dltensor(1, "src")?;
            // SAFETY: arguments are live for the call (borrowed views).
            unsafe { copy_dl(dst, src) }?;
            Ok(Any::none())
        },
    )?;
    def(
        "runtime.contiguous",
        "contiguous(t: Tensor|DLTensor*) -> ffi.Tensor: t itself if compact, else a compact copy",
        |args| {
            let a = Args::new("runtime.contiguous", &["t"], args)?;
            let dl = a.dltensor(0, "t")?;
            match a.view(0).as_object_of::<TensorObj>() {
                Some(t) => Ok(Any::from(contiguous(&t)?)),
                // SAFETY: a borrowed DLTensor* live for the call; a view cannot be returned, so copy.
                None => Ok(Any::from(unsafe { copy_to_new(dl, (*dl).device) }?)),
            }
        },
    )?;
    def(
        "runtime.to_device",
        "to_device(t: Tensor|DLTensor*, device: Device) -> ffi.Tensor: t itself if already on device, else a \
         compact copy there",
        |args| {
            let a = Args::new("runtime.to_device", &["t", "device"], args)?;
            let dl = a.dltensor(0, "t")?;
            let device = a.device(1, "device")?;
            resolve(device)?;
            match a.view(0).as_object_of::<TensorObj>() {
                Some(t) => Ok(Any::from(to_device(&t, device)?)),
                // SAFETY: a borrowed DLTensor* live for the call.
                None => Ok(Any::from(unsafe { copy_to_new(dl, device) }?)),
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `copy_impl` through the device paths (compact and staged) on CPU tensors.
    fn staged(dst: &Tensor, src: &Tensor) {
        // SAFETY: two live CPU tensors.
        unsafe { copy_impl(&dst.dl_tensor, &src.dl_tensor, true) }.unwrap();
    }

    fn filled(shape: &[i64], start: i64) -> Tensor {
        let t = empty(
            shape,
            DLDataType {
                code: 0,
                bits: 64,
                lanes: 1,
            },
            DLDevice {
                device_type: kDLCPU,
                device_id: 0,
            },
        )
        .unwrap();
        let n = t.numel() as usize;
        // SAFETY: a fresh contiguous tensor of n i64.
        let data = unsafe { std::slice::from_raw_parts_mut(t.dl_tensor.data as *mut i64, n) };
        for (i, x) in data.iter_mut().enumerate() {
            *x = start + i as i64;
        }
        t
    }

    fn values(t: &Tensor) -> Vec<i64> {
        let out = filled(t.shape(), 0);
        // SAFETY: two live CPU tensors.
        unsafe { copy_impl(&out.dl_tensor, &t.dl_tensor, false) }.unwrap();
        // SAFETY: a contiguous tensor of numel i64.
        unsafe {
            std::slice::from_raw_parts(out.dl_tensor.data as *const i64, out.numel() as usize)
        }
        .to_vec()
    }

    #[test]
    fn device_paths_compact_and_staged() {
        use crate::tensor::{permute, slice};
        let src = filled(&[3, 4, 5], 0);
        // Compact both sides: one memcpy of the device kind.
        let dst = filled(&[3, 4, 5], 100);
        staged(&dst, &src);
        assert_eq!(values(&dst), (0..60).collect::<Vec<_>>());
        // Strided source staged down, compact destination sent up.
        let p = permute(&src, &[2, 0, 1]).unwrap();
        let dst = filled(&[5, 3, 4], 100);
        staged(&dst, &p);
        assert_eq!(values(&dst), values(&p));
        // Strided destination: its span makes the round trip and the gaps survive.
        let big = filled(&[5, 3, 8], 1000);
        let window = slice(&big, 2, 2, 6).unwrap();
        staged(&window, &p);
        let all = values(&big);
        let pv = values(&p);
        for i in 0..5i64 {
            for j in 0..3i64 {
                for k in 0..8i64 {
                    let flat = (i * 24 + j * 8 + k) as usize;
                    let want = if (2..6).contains(&k) {
                        pv[(i * 12 + j * 4 + k - 2) as usize]
                    } else {
                        1000 + flat as i64
                    };
                    assert_eq!(all[flat], want, "({i},{j},{k})");
                }
            }
        }
        // A window that starts mid-storage (byte offset) as the staged source.
        let inner = slice(&big, 0, 1, 4).unwrap();
        let dst = filled(&[3, 3, 8], 0);
        staged(&dst, &inner);
        assert_eq!(values(&dst), all[24..96].to_vec());
    }

    #[test]
    fn sub_byte_copies_keep_the_bits_past_dst() {
        use crate::tensor::slice;
        let int4 = DLDataType {
            code: 0,
            bits: 4,
            lanes: 1,
        };
        let cpu = DLDevice {
            device_type: kDLCPU,
            device_id: 0,
        };
        let bytes = |t: &Tensor, n: usize| {
            // SAFETY: a live CPU tensor of at least n bytes.
            unsafe { std::slice::from_raw_parts(t.dl_tensor.data as *const u8, n) }.to_vec()
        };
        let set = |t: &Tensor, b: &[u8]| {
            // SAFETY: a live CPU tensor of at least b.len() bytes.
            unsafe { std::ptr::copy(b.as_ptr(), t.dl_tensor.data as *mut u8, b.len()) }
        };
        for as_device in [false, true] {
            let big = empty(&[8], int4, cpu).unwrap();
            let src = empty(&[3], int4, cpu).unwrap();
            set(&big, &[0x10, 0x32, 0x54, 0x76]); // elements 0..7
            set(&src, &[0xBA, 0xFC]); // 10, 11, 12 (and 15 in the padding)
            let dst = slice(&big, 0, 0, 3).unwrap();
            // SAFETY: two live CPU tensors.
            unsafe { copy_impl(&dst.dl_tensor, &src.dl_tensor, as_device) }.unwrap();
            assert_eq!(
                bytes(&big, 4),
                [0xBA, 0x3C, 0x54, 0x76],
                "as_device {as_device}"
            );
            // Overlapping views of one storage: big[0:3] = big[2:5].
            set(&big, &[0x10, 0x32, 0x54, 0x76]);
            let (d, s) = (slice(&big, 0, 0, 3).unwrap(), slice(&big, 0, 2, 5).unwrap());
            // SAFETY: two live CPU views.
            unsafe { copy_impl(&d.dl_tensor, &s.dl_tensor, as_device) }.unwrap();
            assert_eq!(
                bytes(&big, 4),
                [0x32, 0x34, 0x54, 0x76],
                "as_device {as_device}"
            );
            // elements of 12 bits (int12, int4x3): 4 of them are 6 whole bytes; 3 end mid-byte
            for dt in [(0u8, 12u8, 1u16), (0, 4, 3), (0, 6, 2)] {
                let dt = DLDataType {
                    code: dt.0,
                    bits: dt.1,
                    lanes: dt.2,
                };
                let (dst, src) = (empty(&[4], dt, cpu).unwrap(), empty(&[4], dt, cpu).unwrap());
                set(&src, &[1, 2, 3, 4, 5, 6]);
                set(&dst, &[0; 6]);
                // SAFETY: two live CPU tensors.
                unsafe { copy_impl(&dst.dl_tensor, &src.dl_tensor, as_device) }.unwrap();
                assert_eq!(
                    bytes(&dst, 6),
                    [1, 2, 3, 4, 5, 6],
                    "{dt:?} as_device {as_device}"
                );
                let big = empty(&[4], dt, cpu).unwrap();
                set(&big, &[0; 6]);
                let d3 = slice(&big, 0, 0, 3).unwrap();
                let s3 = slice(&src, 0, 0, 3).unwrap();
                set(&big, &[0xEE; 6]);
                // SAFETY: two live CPU views.
                unsafe { copy_impl(&d3.dl_tensor, &s3.dl_tensor, as_device) }.unwrap();
                assert_eq!(
                    bytes(&big, 6),
                    [1, 2, 3, 4, 0xE5, 0xEE],
                    "{dt:?} as_device {as_device}"
                );
            }
        }
    }

    #[test]
    fn host_copy_transposes() {
        let src: Vec<u32> = (0..6).collect(); // (2,3) row-major
        let mut dst = vec![0u32; 6]; // (3,2) row-major = transpose
                                     // SAFETY: both buffers hold 6 u32 and the strides stay inside.
        unsafe {
            host_copy(
                dst.as_mut_ptr() as *mut u8,
                &[1, 2],
                src.as_ptr() as *const u8,
                &[3, 1],
                &[2, 3],
                4,
            )
        };
        assert_eq!(dst, vec![0, 3, 1, 4, 2, 5]);
    }
}
