//! CUDA kernels: NVRTC-compiled CUDA C (`src/*.cu`, compiled at first use per device, see
//! `nvrtc.rs`) and cuBLAS GEMMs (`blas.rs`), both loaded at run time through cudarc, so the
//! library builds everywhere and runs with no CUDA installed (every entry is then a clear
//! RuntimeError naming the missing library; nothing panics).
//!
//! The functions here trust their arguments, which `ops/` validated (shapes, dtypes, overlap,
//! device). Each binds the device's primary context on the calling thread and enqueues on the
//! thread's current stream for that device (`TVMFFIEnvGetStream`; NULL is the legacy default
//! stream), then returns without waiting, as torch does: read results after synchronising that
//! stream. The one exception is `embedding`, which copies the indices to the host and waits for
//! them so that an out-of-range index is an IndexError before anything is written.

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod blas;
pub mod libs;
pub mod nvrtc;

use std::ffi::c_void;

use anyffi::abi::{kDLCUDA, DLDevice};
use anyffi::{Error, Result};
use cudarc::driver::sys as cu;

use crate::device::context::stream_or_env;
use crate::device::cuda::CUDA;
use crate::device::{DeviceRuntime, MemcpyKind};
use crate::ops::DType;

pub(crate) use blas::{gemm, Operand};

/// Mirrors `struct Lay` of `src/common.cuh`: up to 8 dimensions and the element strides of up
/// to 3 tensors, passed by value to the kernels.
#[repr(C)]
#[derive(Clone, Copy)]
struct Lay {
    nd: i32,
    pad: i32,
    shape: [i64; 8],
    st: [[i64; 8]; 3],
}

impl Lay {
    fn new(shape: &[i64], strides: &[&[i64]]) -> Lay {
        let mut l = Lay {
            nd: shape.len() as i32,
            pad: 0,
            shape: [1; 8],
            st: [[0; 8]; 3],
        };
        l.shape[..shape.len()].copy_from_slice(shape);
        for (t, s) in strides.iter().enumerate() {
            l.st[t][..shape.len()].copy_from_slice(s);
        }
        l
    }
}

/// The device and stream of one op call.
#[derive(Clone, Copy)]
pub struct Ctx {
    pub dev: i32,
    pub stream: cu::CUstream,
}

/// Makes `dev`'s primary context current on this thread and picks the thread's stream.
pub(crate) fn ctx(op: &str, dev: i32) -> Result<Ctx> {
    CUDA.set_device(dev).map_err(|e| prefixed(op, e))?;
    let device = DLDevice {
        device_type: kDLCUDA,
        device_id: dev,
    };
    Ok(Ctx {
        dev,
        stream: stream_or_env(device, std::ptr::null_mut()) as cu::CUstream,
    })
}

/// `e` with `op: ` in front of its message, same kind.
fn prefixed(op: &str, e: Error) -> Error {
    Error::new(e.kind(), format!("{op}: {}", e.message()))
}

/// Launches `name` with `params` (pointers to each argument's value).
fn launch(
    op: &str,
    c: Ctx,
    name: &'static str,
    grid: (u32, u32),
    block: u32,
    shmem: u32,
    params: &mut [*mut c_void],
) -> Result<()> {
    let f = nvrtc::function(c.dev, name).map_err(|e| prefixed(op, e))?;
    // SAFETY: a kernel of the loaded module; `params` points at one value per kernel parameter,
    // of the kernel's types (the callers below mirror the .cu signatures), alive for the call
    // (the driver copies them at launch); the stream belongs to this device.
    let rc = unsafe {
        cu::cuLaunchKernel(
            f,
            grid.0,
            grid.1,
            1,
            block,
            1,
            1,
            shmem,
            c.stream,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    if rc != cu::CUresult::CUDA_SUCCESS {
        return Err(Error::runtime_error(format!(
            "{op}: launching CUDA kernel {name} failed: {rc:?}"
        )));
    }
    Ok(())
}

/// `[&a as *mut c_void, ...]` for the kernel parameters (locals, so they outlive the launch).
macro_rules! params {
    ($($a:ident),*) => { [$(&$a as *const _ as *mut c_void),*] };
}

/// Threads per block of the 1-D kernels.
const THREADS: u32 = 256;

/// Blocks for a grid-stride loop over `n` items.
fn blocks(n: i64) -> u32 {
    ((n + THREADS as i64 - 1) / THREADS as i64).clamp(1, 1 << 16) as u32
}

/// Which element-wise op.
#[derive(Clone, Copy)]
pub enum Binary {
    Add,
    Swiglu,
}

#[allow(clippy::too_many_arguments)]
/// `ops.add` / `ops.swiglu`: `c = f(a, b)` over `shape` with element strides `st` (c, a, b).
pub(crate) fn binary(
    op: &str,
    dev: i32,
    kind: Binary,
    dt: DType,
    ptrs: [*mut u8; 3],
    shape: &[i64],
    st: [&[i64]; 3],
    contiguous: bool,
) -> Result<()> {
    let c = ctx(op, dev)?;
    let name = match (kind, dt) {
        (Binary::Add, DType::F32) => "add_f32",
        (Binary::Add, DType::F16) => "add_f16",
        (Binary::Add, _) => "add_bf16",
        (Binary::Swiglu, DType::F32) => "swiglu_f32",
        (Binary::Swiglu, DType::F16) => "swiglu_f16",
        (Binary::Swiglu, _) => "swiglu_bf16",
    };
    let n: i64 = shape.iter().product();
    let l = Lay::new(shape, &st);
    let contig = contiguous as i32;
    // contiguous and 16-byte aligned: the kernel moves 16 bytes per thread and step
    let per_thread = if contiguous && ptrs.iter().all(|&p| p as usize % 16 == 0) {
        if dt == DType::F32 {
            4
        } else {
            8
        }
    } else {
        1
    };
    let (y, a, b) = (ptrs[0] as usize, ptrs[1] as usize, ptrs[2] as usize);
    launch(
        op,
        c,
        name,
        (blocks((n + per_thread - 1) / per_thread), 1),
        THREADS,
        0,
        &mut params!(y, a, b, n, l, contig),
    )
}

/// `ops.rms_norm`: rows over `rows_shape` (the leading dimensions) with row strides `out_st` /
/// `in_st`, `d` unit-stride elements per row, weight in `wdt` (the dtype of `in` or f32).
#[allow(clippy::too_many_arguments)]
pub(crate) fn rms_norm(
    op: &str,
    dev: i32,
    dt: DType,
    wdt: DType,
    ptrs: [*mut u8; 3],
    rows_shape: &[i64],
    out_st: &[i64],
    in_st: &[i64],
    d: i64,
    eps: f32,
) -> Result<()> {
    let c = ctx(op, dev)?;
    let name = match (dt, wdt) {
        (DType::F32, _) => "rms_norm_f32",
        (DType::F16, DType::F16) => "rms_norm_f16",
        (DType::F16, _) => "rms_norm_f16_w32",
        (_, DType::BF16) => "rms_norm_bf16",
        _ => "rms_norm_bf16_w32",
    };
    let rows: i64 = rows_shape.iter().product();
    if rows > i32::MAX as i64 {
        return Err(Error::value_error(format!(
            "{op}: on CUDA `in` may have at most {} rows, got {rows}",
            i32::MAX
        )));
    }
    let l = Lay::new(rows_shape, &[out_st, in_st]);
    let (y, x, w) = (ptrs[0] as usize, ptrs[1] as usize, ptrs[2] as usize);
    launch(
        op,
        c,
        name,
        (rows as u32, 1),
        THREADS,
        0,
        &mut params!(y, x, w, l, d, eps),
    )
}

/// `ops.rope` on `[seq, nhead, 2h]` views with (token, head) element strides `ys` / `xs`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn rope(
    op: &str,
    dev: i32,
    dt: DType,
    pos_i64: bool,
    y: *mut u8,
    ys: [i64; 2],
    x: *const u8,
    xs: [i64; 2],
    pos: *const u8,
    seq: i64,
    nhead: i64,
    h: i64,
    theta: f32,
) -> Result<()> {
    let c = ctx(op, dev)?;
    if seq > i32::MAX as i64 || nhead > 65535 || h > i32::MAX as i64 {
        return Err(Error::value_error(format!(
            "{op}: on CUDA `in` must have seqlen < 2^31 and nhead <= 65535, got shape ({seq}, {nhead}, {})",
            2 * h
        )));
    }
    let name = match (dt, pos_i64) {
        (DType::F32, true) => "rope_f32_i64",
        (DType::F16, true) => "rope_f16_i64",
        (_, true) => "rope_bf16_i64",
        (DType::F32, false) => "rope_f32_i32",
        (DType::F16, false) => "rope_f16_i32",
        (_, false) => "rope_bf16_i32",
    };
    let (y, x, pos) = (y as usize, x as usize, pos as usize);
    let (ys0, ys1, xs0, xs1) = (ys[0], ys[1], xs[0], xs[1]);
    let h = h as i32;
    let block = (h as u32).div_ceil(32).clamp(1, 8) * 32;
    launch(
        op,
        c,
        name,
        (seq as u32, nhead as u32),
        block,
        0,
        &mut params!(y, ys0, ys1, x, xs0, xs1, pos, h, theta),
    )
}

/// `ops.argmax` over `n >= 1` contiguous values.
pub(crate) fn argmax(
    op: &str,
    dev: i32,
    dt: DType,
    idx: *mut u8,
    val: *mut u8,
    x: *const u8,
    n: i64,
) -> Result<()> {
    let c = ctx(op, dev)?;
    let name = match dt {
        DType::F32 => "argmax_f32",
        DType::F16 => "argmax_f16",
        _ => "argmax_bf16",
    };
    let (idx, val, x) = (idx as usize, val as usize, x as usize);
    launch(op, c, name, (1, 1), 1024, 0, &mut params!(idx, val, x, n))
}

/// `ops.embedding`: `n` indices (int64 or int32, device memory) into `[v, d]` rows of
/// `esize`-byte elements. Copies the indices to the host and waits for them (on the call's
/// stream), so an out-of-range index is an IndexError before anything is written.
#[allow(clippy::too_many_arguments)]
pub(crate) fn embedding(
    op: &str,
    dev: i32,
    esize: usize,
    index_i64: bool,
    out: *mut u8,
    index: *const u8,
    weight: *const u8,
    n: i64,
    v: i64,
    d: i64,
) -> Result<()> {
    let c = ctx(op, dev)?;
    let isize_ = if index_i64 { 8 } else { 4 };
    let nbytes = n as usize * isize_;
    let mut host = vec![0u8; nbytes];
    if nbytes > 0 {
        // SAFETY: `index` holds n device indices (validated); `host` is nbytes of host memory,
        // alive until the stream is synchronised just below.
        unsafe {
            CUDA.memcpy_async(
                dev,
                host.as_mut_ptr() as *mut c_void,
                index as *const c_void,
                nbytes,
                MemcpyKind::D2H,
                c.stream as *mut c_void,
            )
        }
        .map_err(|e| prefixed(op, e))?;
        CUDA.stream_synchronize(dev, c.stream as *mut c_void)
            .map_err(|e| prefixed(op, e))?;
    }
    for i in 0..n as usize {
        let ix = if index_i64 {
            i64::from_ne_bytes(host[8 * i..8 * i + 8].try_into().unwrap())
        } else {
            i32::from_ne_bytes(host[4 * i..4 * i + 4].try_into().unwrap()) as i64
        };
        if ix < 0 || ix >= v {
            return Err(Error::index_error(format!(
                "{op}: index[{i}] = {ix} is out of range for `weight` with {v} rows"
            )));
        }
    }
    if n == 0 || d == 0 {
        return Ok(());
    }
    if n > i32::MAX as i64 {
        return Err(Error::value_error(format!(
            "{op}: on CUDA `index` may hold at most {} indices, got {n}",
            i32::MAX
        )));
    }
    let name = match (esize, index_i64) {
        (2, true) => "embedding_2_i64",
        (2, false) => "embedding_2_i32",
        (_, true) => "embedding_4_i64",
        (_, false) => "embedding_4_i32",
    };
    let (out, index, weight) = (out as usize, index as usize, weight as usize);
    launch(
        op,
        c,
        name,
        (n as u32, 1),
        THREADS,
        0,
        &mut params!(out, index, weight, d),
    )
}

/// `ops.rearrange`: `out[idx] = in[idx]` over `shape` (up to 8 dims), element strides `st`
/// (out, in), elements of `esize` bytes (1, 2, 4, 8 or 16; both addresses aligned to it, up to
/// 8).
#[allow(clippy::too_many_arguments)]
pub(crate) fn rearrange(
    op: &str,
    dev: i32,
    esize: usize,
    out: *mut u8,
    inp: *const u8,
    shape: &[i64],
    out_st: &[i64],
    in_st: &[i64],
) -> Result<()> {
    let c = ctx(op, dev)?;
    let name = match esize {
        1 => "rearrange_1",
        2 => "rearrange_2",
        4 => "rearrange_4",
        8 => "rearrange_8",
        16 => "rearrange_16",
        _ => {
            return Err(Error::value_error(format!(
                "{op}: on CUDA `out` must have elements of 1, 2, 4, 8 or 16 bytes, got {esize}"
            )))
        }
    };
    let align = esize.min(8);
    if (out as usize) % align != 0 || (inp as usize) % align != 0 {
        return Err(Error::value_error(format!(
            "{op}: on CUDA `out` and `in` must be aligned to their element size ({align} \
             bytes), got {out:p} and {inp:p}"
        )));
    }
    let n: i64 = shape.iter().product();
    let l = Lay::new(shape, &[out_st, in_st]);
    let (out, inp) = (out as usize, inp as usize);
    launch(
        op,
        c,
        name,
        (blocks(n), 1),
        THREADS,
        0,
        &mut params!(out, inp, n, l),
    )
}

/// Largest `d + dv` the attention kernel takes (its shared memory: `(d + dv + 256)` floats,
/// within the 48 KiB every GPU grants without opt-in).
pub const ATTENTION_MAX_D_PLUS_DV: i64 = 8192;

/// `ops.self_attention` on contiguous `[l, h, d]` / `[s, hk, d]` / `[s, hk, dv]` tensors.
#[allow(clippy::too_many_arguments)]
pub(crate) fn self_attention(
    op: &str,
    dev: i32,
    dt: DType,
    ptrs: [*mut u8; 4],
    dims: [i64; 6],
    scale: f32,
) -> Result<()> {
    let [l, h, s, hk, d, dv] = dims;
    if d + dv > ATTENTION_MAX_D_PLUS_DV {
        return Err(Error::value_error(format!(
            "{op}: on CUDA the head sizes of `q` (d = {d}) and `v` (dv = {dv}) must add up to at \
             most {ATTENTION_MAX_D_PLUS_DV}"
        )));
    }
    if h > 65535 || l > i32::MAX as i64 || s > i32::MAX as i64 {
        return Err(Error::value_error(format!(
            "{op}: on CUDA `q` must have nhead <= 65535 and seqlen < 2^31, and `k` total_len < \
             2^31, got nhead {h}, seqlen {l}, total_len {s}"
        )));
    }
    let c = ctx(op, dev)?;
    let (name, combine, decode) = match dt {
        DType::F32 => (
            "self_attention_f32",
            "self_attention_combine_f32",
            "self_attention_decode_f32",
        ),
        DType::F16 => (
            "self_attention_f16",
            "self_attention_combine_f16",
            "self_attention_decode_f16",
        ),
        _ => (
            "self_attention_bf16",
            "self_attention_combine_bf16",
            "self_attention_decode_bf16",
        ),
    };
    let [o, q, k, v] = ptrs.map(|p| p as usize);
    // the grouped decode kernel: head sizes of 64, 128 or 256 (a lane loads d / 32 consecutive
    // elements at once, so q, k and v must be aligned to that many bytes, at most 16), one block
    // for up to `per_block` query heads of a KV head
    let esize = if dt == DType::F32 { 4 } else { 2 };
    let per_block = if d == 256 { 4 } else { 8 };
    let gqa = d == dv
        && matches!(d, 64 | 128 | 256)
        && [q, k, v]
            .iter()
            .all(|&p| p % (esize * d as usize / 32).min(16) == 0);
    // its blocks per query row and split: KV heads x groups of `per_block` query heads
    let group_blocks = hk * ((h / hk + per_block - 1) / per_block);
    let units = if gqa { l * group_blocks } else { l * h };
    let (splits, split_len) = attention_splits(dev, l, h, units, s);
    let [l, h, s, hk, d, dv] = dims.map(|x| x as i32);
    let shmem = ((d + dv + 256) * 4) as u32;
    // the split-KV workspace, stream-ordered: allocated and freed on the call's stream
    let ws_bytes = (l as usize) * (h as usize) * (splits as usize) * (dv as usize + 2) * 4;
    let mut ws: cu::CUdeviceptr = 0;
    // SAFETY: `ws` receives a device pointer of `ws_bytes` bytes, valid in stream order.
    let split = splits > 1
        && unsafe { cu::cuMemAllocAsync(&mut ws, ws_bytes, c.stream) }
            == cu::CUresult::CUDA_SUCCESS;
    let (splits, split_len) = if split { (splits, split_len) } else { (1, s) };
    let wsp = ws as usize;
    let grid = (l as u32 * splits as u32, h as u32);
    let first = if split && gqa {
        let name = match (dt, d) {
            (DType::F32, 64) => "self_attention_decode_gqa_f32_64",
            (DType::F32, 128) => "self_attention_decode_gqa_f32_128",
            (DType::F32, _) => "self_attention_decode_gqa_f32_256",
            (DType::F16, 64) => "self_attention_decode_gqa_f16_64",
            (DType::F16, 128) => "self_attention_decode_gqa_f16_128",
            (DType::F16, _) => "self_attention_decode_gqa_f16_256",
            (_, 64) => "self_attention_decode_gqa_bf16_64",
            (_, 128) => "self_attention_decode_gqa_bf16_128",
            _ => "self_attention_decode_gqa_bf16_256",
        };
        let shmem = (4 * per_block as i32 * d * 4) as u32;
        launch(
            op,
            c,
            name,
            (grid.0, group_blocks as u32),
            128,
            shmem,
            &mut params!(q, k, v, l, h, s, hk, scale, splits, split_len, wsp),
        )
    } else if split && d <= 256 && dv <= 256 {
        // split-KV with head sizes the decode kernel holds in registers (DEC_MAX * 32)
        let shmem = (dv * 4 * 4) as u32;
        launch(
            op,
            c,
            decode,
            grid,
            128,
            shmem,
            &mut params!(q, k, v, l, h, s, hk, d, dv, scale, splits, split_len, wsp),
        )
    } else {
        launch(
            op,
            c,
            name,
            grid,
            128,
            shmem,
            &mut params!(o, q, k, v, l, h, s, hk, d, dv, scale, splits, split_len, wsp),
        )
    };
    if !split {
        return first;
    }
    let second = first.and_then(|()| {
        launch(
            op,
            c,
            combine,
            (l as u32 * (dv as u32).div_ceil(32), h as u32),
            128,
            0,
            &mut params!(o, wsp, l, h, dv, splits),
        )
    });
    // SAFETY: `ws` came from cuMemAllocAsync on this stream; the kernels using it were
    // enqueued before this free.
    unsafe { cu::cuMemFreeAsync(ws, c.stream) };
    second
}

/// `(splits, keys per split)` for attention on `l` query rows, `h` heads and `s` keys, whose
/// kernel runs `units` blocks per split (`l * h`, or fewer for the grouped decode kernel): one
/// split while the rows and heads fill the GPU, else enough splits of at least 32 keys for
/// about `ANYFFI_CUDA_ATTN_BLOCKS_PER_SM` blocks per multiprocessor (default 8; at most 256
/// splits).
fn attention_splits(dev: i32, l: i64, h: i64, units: i64, s: i64) -> (i32, i32) {
    let target = attn_blocks_per_sm() * sm_count(dev) as i64;
    if l * h >= target / 2 || s < 64 {
        return (1, s as i32);
    }
    let want = (target / units).clamp(1, 256);
    let len = ((s + want - 1) / want).max(32);
    let len = (len + 31) / 32 * 32;
    let splits = (s + len - 1) / len;
    // a grid x of l * splits blocks
    if splits <= 1 || l * splits > i32::MAX as i64 {
        return (1, s as i32);
    }
    (splits as i32, len as i32)
}

/// `ANYFFI_CUDA_ATTN_BLOCKS_PER_SM` (1 to 64; default 8, the best of 2, 4, 8, 16 and 32 on an
/// H100), read once.
fn attn_blocks_per_sm() -> i64 {
    static V: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        std::env::var("ANYFFI_CUDA_ATTN_BLOCKS_PER_SM")
            .ok()
            .and_then(|v| v.parse::<i64>().ok())
            .map_or(8, |v| v.clamp(1, 64))
    })
}

/// Attribute `attr` of device ordinal `dev` (the driver initialised: a context was bound).
pub(crate) fn device_attribute(dev: i32, attr: cu::CUdevice_attribute) -> Result<i32> {
    let (mut d, mut v): (cu::CUdevice, i32) = (0, 0);
    // SAFETY: plain queries with valid out-parameters.
    let rc = unsafe {
        match cu::cuDeviceGet(&mut d, dev) {
            cu::CUresult::CUDA_SUCCESS => cu::cuDeviceGetAttribute(&mut v, attr, d),
            rc => rc,
        }
    };
    if rc != cu::CUresult::CUDA_SUCCESS {
        return Err(Error::runtime_error(format!(
            "reading {attr:?} of cuda:{dev} failed: {rc:?}"
        )));
    }
    Ok(v)
}

/// The multiprocessor count of device `dev` (cached; 1 when it cannot be read).
fn sm_count(dev: i32) -> i32 {
    use std::sync::atomic::{AtomicI32, Ordering};
    static CACHE: [AtomicI32; 16] = [const { AtomicI32::new(0) }; 16];
    let slot = CACHE.get(dev as usize);
    if let Some(n) = slot.map(|c| c.load(Ordering::Relaxed)).filter(|&n| n > 0) {
        return n;
    }
    let n = device_attribute(
        dev,
        cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
    )
    .map_or(1, |n| n.max(1));
    if let Some(c) = slot {
        c.store(n, Ordering::Relaxed);
    }
    n
}

#[allow(clippy::too_many_arguments)]
/// `ops.linear`'s bias: `y[r, :] = bias` for `m` rows of `n` elements (`esize` 2 or 4 bytes)
/// at row stride `ys` elements, enqueued on `c`'s stream before the GEMM (beta = 1).
pub(crate) fn bias_rows(
    op: &str,
    c: Ctx,
    esize: usize,
    y: *mut u8,
    ys: i64,
    bias: *const u8,
    m: i64,
    n: i64,
) -> Result<()> {
    let name = if esize == 2 {
        "bias_rows_2"
    } else {
        "bias_rows_4"
    };
    let (y, bias) = (y as usize, bias as usize);
    launch(
        op,
        c,
        name,
        (blocks(m * n), 1),
        THREADS,
        0,
        &mut params!(y, ys, bias, m, n),
    )
}
