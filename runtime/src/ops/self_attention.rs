//! `ops.self_attention(attn_val, q, k, v, scale)` (spec §2.7): q `[L, H, D]`, k `[S, HK, D]`,
//! v `[S, HK, DV]`, attn_val `[L, H, DV]`, contiguous, one dtype; causal mask aligned
//! bottom-right (row i sees keys `j <= i + S - L`), GQA head mapping `h / (H / HK)`.

use anyffi::{AnyView, Error, Result};

use super::{expect_args, float_arg, output_arg, target, tensor_arg, DType, Target};
use crate::kernels::cpu::attention::{self as k, AttnDims};
use crate::kernels::cuda;

const OP: &str = "ops.self_attention";

pub(super) fn call(args: &[AnyView<'_>]) -> Result<()> {
    expect_args(OP, args, &["attn_val", "q", "k", "v", "scale"])?;
    let out = output_arg(OP, args, 0, "attn_val")?;
    let q = tensor_arg(OP, args, 1, "q")?;
    let kk = tensor_arg(OP, args, 2, "k")?;
    let v = tensor_arg(OP, args, 3, "v")?;
    let scale64 = float_arg(OP, args, 4, "scale")?;
    let scale = scale64 as f32;
    // NaN or inf (also a finite scale past the float32 range the kernels run in) turns every
    // score row into NaN (inf - inf in the softmax)
    if !scale64.is_finite() {
        return Err(Error::value_error(format!(
            "{OP}: `scale` must be a finite number, got {scale64}"
        )));
    }
    if !scale.is_finite() {
        return Err(Error::value_error(format!(
            "{OP}: `scale` = {scale64} is out of the float32 range"
        )));
    }
    q.expect_float()?;
    kk.expect_same_dtype(&q)?;
    v.expect_same_dtype(&q)?;
    out.expect_same_dtype(&q)?;
    q.expect_ndim(3, "[seqlen, nhead, d]")?;
    kk.expect_ndim(3, "[total_len, nkvhead, d]")?;
    v.expect_ndim(3, "[total_len, nkvhead, dv]")?;
    let (l, h, d) = (q.shape[0], q.shape[1], q.shape[2]);
    let (s, hk) = (kk.shape[0], kk.shape[1]);
    kk.expect_shape("(total_len, nkvhead, d)", &[s, hk, d])?;
    let dv = v.shape[2];
    v.expect_shape("(total_len, nkvhead, dv)", &[s, hk, dv])?;
    out.expect_shape("(seqlen, nhead, dv)", &[l, h, dv])?;
    // (no heads at all: an empty result, as in torch)
    if (hk == 0 && h != 0) || (hk != 0 && h % hk != 0) {
        return Err(Error::value_error(format!(
            "{OP}: nhead ({h}) must be a multiple of nkvhead ({hk}): `q` has {h} heads, `k` and \
             `v` have {hk}"
        )));
    }
    if s < l {
        return Err(Error::value_error(format!(
            "{OP}: total_len ({s}) must be >= seqlen ({l}): `k` and `v` hold {s} positions, \
             `q` {l}; with the causal mask aligned bottom-right, the first rows would see no key"
        )));
    }
    for t in [&out, &q, &kk, &v] {
        t.expect_contiguous()?;
    }
    for t in [&q, &kk, &v] {
        out.expect_no_overlap(t)?;
    }
    let tg = target(OP, &[&out, &q, &kk, &v])?;
    if out.numel() == 0 {
        return Ok(());
    }
    if s == 0 || h == 0 {
        return Ok(());
    }
    if let Target::Cuda(dev) = tg {
        return cuda::self_attention(
            OP,
            dev,
            q.dtype,
            [out.data, q.data, kk.data, v.data],
            [l, h, s, hk, d, dv],
            scale,
        );
    }
    let dm = AttnDims {
        l: l as usize,
        h: h as usize,
        s: s as usize,
        hk: hk as usize,
        d: d as usize,
        dv: dv as usize,
        scale,
    };
    // SAFETY: validated contiguous shapes, disjoint output, H % HK == 0, S >= L.
    unsafe {
        match q.dtype {
            DType::F32 => k::self_attention_f32(out.ptr(), q.ptr(), kk.ptr(), v.ptr(), dm),
            DType::F16 => k::self_attention_f16(out.ptr(), q.ptr(), kk.ptr(), v.ptr(), dm),
            _ => k::self_attention_bf16(out.ptr(), q.ptr(), kk.ptr(), v.ptr(), dm),
        }
    }
    Ok(())
}
