//! Views without copies (LLAISYS `tensorView`, `tensorPermute`, `tensorSlice`): each returns a
//! new `ffi.Tensor` over the same storage that keeps its source, and so the storage, alive.

use anyffi::tensor::compact_strides;
use anyffi::{Any, Error, Result, Tensor};

use crate::args::{def, Args};

/// Strides that let `new_shape` view memory laid out as `shape`/`strides`, or `None` when no
/// such strides exist (PyTorch's `computeStride`: dimensions are grouped into contiguous chunks
/// and each chunk must be split or merged as a whole). `None` as well when `strides` and
/// `shape` differ in length.
pub fn view_strides(shape: &[i64], strides: &[i64], new_shape: &[i64]) -> Option<Vec<i64>> {
    if strides.len() != shape.len() {
        return None;
    }
    if shape.is_empty() || shape.contains(&0) {
        // A scalar or empty tensor has no layout to respect.
        return Some(compact_strides(new_shape));
    }
    let mut new_strides = vec![0i64; new_shape.len()];
    let mut view_d = new_shape.len() as isize - 1;
    let mut chunk_base_stride = *strides.last().unwrap();
    let mut tensor_numel = 1i64;
    let mut view_numel = 1i64;
    for tensor_d in (0..shape.len()).rev() {
        tensor_numel *= shape[tensor_d];
        let chunk_ends = tensor_d == 0
            || (shape[tensor_d - 1] != 1
                && strides[tensor_d - 1] != tensor_numel * chunk_base_stride);
        if chunk_ends {
            while view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d as usize] == 1) {
                new_strides[view_d as usize] = view_numel * chunk_base_stride;
                view_numel *= new_shape[view_d as usize];
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if tensor_d > 0 {
                chunk_base_stride = strides[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    (view_d == -1).then_some(new_strides)
}

/// `t` reshaped to `shape` without a copy: ValueError for negative sizes, a different number of
/// elements, or strides that cannot express the new shape (e.g. (2,3,5) with strides (30,10,1)
/// as (2,15)).
pub fn view(t: &Tensor, shape: &[i64]) -> Result<Tensor> {
    if let Some((i, n)) = shape.iter().enumerate().find(|(_, &n)| n < 0) {
        return Err(Error::value_error(format!(
            "shape {shape:?}: dimension {i} is negative ({n})"
        )));
    }
    let numel = t.numel();
    let new_numel = shape.iter().try_fold(1i64, |acc, &n| acc.checked_mul(n));
    if new_numel != Some(numel) {
        return Err(Error::value_error(format!(
            "shape {shape:?} is invalid for a tensor of shape {:?} ({numel} elements)",
            t.shape()
        )));
    }
    let strides = view_strides(t.shape(), t.strides(), shape).ok_or_else(|| {
        Error::value_error(format!(
            "cannot view a tensor of shape {:?} and strides {:?} as shape {shape:?}: the strides are \
             incompatible (use runtime.contiguous first)",
            t.shape(),
            t.strides()
        ))
    })?;
    // SAFETY: same elements as `t` (equal counts, strides from `view_strides`).
    Ok(unsafe { t.view_with(t.dl_tensor.data, shape, &strides, t.dl_tensor.byte_offset) })
}

/// `t` with its dimensions reordered: dimension `i` of the result is dimension `order[i]` of `t`.
pub fn permute(t: &Tensor, order: &[i64]) -> Result<Tensor> {
    let n = t.shape().len();
    let mut seen = vec![false; n];
    let valid = order.len() == n
        && order.iter().all(|&d| {
            let ok = (0..n as i64).contains(&d) && !seen[d as usize];
            if ok {
                seen[d as usize] = true;
            }
            ok
        });
    if !valid {
        return Err(Error::value_error(format!(
            "order {order:?} is not a permutation of the {n} dimensions of a tensor of shape {:?}",
            t.shape()
        )));
    }
    let shape: Vec<i64> = order.iter().map(|&d| t.shape()[d as usize]).collect();
    let strides: Vec<i64> = order.iter().map(|&d| t.strides()[d as usize]).collect();
    // SAFETY: the same elements as `t`, dimensions reordered.
    Ok(unsafe { t.view_with(t.dl_tensor.data, &shape, &strides, t.dl_tensor.byte_offset) })
}

/// The half-open range `[start, end)` of dimension `dim` (same strides; the byte offset moves by
/// `start * stride[dim]` elements). IndexError for a bad dimension or bounds.
pub fn slice(t: &Tensor, dim: i64, start: i64, end: i64) -> Result<Tensor> {
    let shape = t.shape();
    if dim < 0 || dim as usize >= shape.len() {
        return Err(Error::index_error(format!(
            "dim {dim} is out of range for a tensor of {} dimensions",
            shape.len()
        )));
    }
    let d = dim as usize;
    if start < 0 || start > end || end > shape[d] {
        return Err(Error::index_error(format!(
            "slice [{start}, {end}) is out of bounds for dimension {dim} of size {} (need 0 <= start <= end <= size)",
            shape[d]
        )));
    }
    let dtype = t.dl_tensor.dtype;
    let elem_bits = dtype.bits as i128 * dtype.lanes as i128;
    let offset_bits = start as i128 * t.strides()[d] as i128 * elem_bits;
    if offset_bits % 8 != 0 {
        return Err(Error::value_error(
            "slice start does not fall on a byte boundary for this sub-byte dtype",
        ));
    }
    let total = t.dl_tensor.byte_offset as i128 + offset_bits / 8;
    let (data, byte_offset) = if total < 0 {
        // a negative stride (a reversed view, e.g. from numpy) moves the start below `data`:
        // the offset cannot be negative, so the data pointer moves instead (still inside the
        // storage the view keeps alive)
        let back = isize::try_from(total).map_err(|_| {
            Error::value_error(format!(
                "slice would move the data pointer out of range ({total})"
            ))
        })?;
        (
            (t.dl_tensor.data as *mut u8).wrapping_offset(back) as *mut std::ffi::c_void,
            0,
        )
    } else {
        let off = u64::try_from(total).map_err(|_| {
            Error::value_error(format!(
                "slice would move the byte offset out of range ({total})"
            ))
        })?;
        (t.dl_tensor.data, off)
    };
    let mut new_shape = shape.to_vec();
    new_shape[d] = end - start;
    // SAFETY: `[start, end)` lies within dimension `d` of `t` (checked above).
    Ok(unsafe { t.view_with(data, &new_shape, t.strides(), byte_offset) })
}

/// Registers `runtime.view`, `runtime.permute` and `runtime.slice`.
pub(crate) fn register() -> Result<()> {
    def(
        "runtime.view",
        "view(t: ffi.Tensor, shape: ffi.Shape) -> ffi.Tensor: the same storage with another shape (no copy)",
        |args| {
            let a = Args::new("runtime.view", &["t", "shape"], args)?;
            let t = a.tensor(0, "t")?;
            Ok(Any::from(view(&t, &a.dims(1, "shape")?)?))
        },
    )?;
    def(
        "runtime.permute",
        "permute(t: ffi.Tensor, order: ffi.Shape) -> ffi.Tensor: dimensions reordered (no copy)",
        |args| {
            let a = Args::new("runtime.permute", &["t", "order"], args)?;
            let t = a.tensor(0, "t")?;
            Ok(Any::from(permute(&t, &a.dims(1, "order")?)?))
        },
    )?;
    def(
        "runtime.slice",
        "slice(t: ffi.Tensor, dim: int, start: int, end: int) -> ffi.Tensor: [start, end) of dimension `dim` (no copy)",
        |args| {
            let a = Args::new("runtime.slice", &["t", "dim", "start", "end"], args)?;
            let t = a.tensor(0, "t")?;
            Ok(Any::from(slice(&t, a.int(1, "dim")?, a.int(2, "start")?, a.int(3, "end")?)?))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_strides_follow_chunks() {
        assert_eq!(
            view_strides(&[3, 4, 5], &[20, 5, 1], &[6, 10]),
            Some(vec![10, 1])
        );
        assert_eq!(view_strides(&[2, 3, 5], &[30, 10, 1], &[2, 15]), None);
        assert_eq!(
            view_strides(&[2, 3, 5], &[30, 10, 1], &[2, 3, 5, 1]),
            Some(vec![30, 10, 1, 1])
        );
        // A permuted (transposed) tensor can still split its outer dimension.
        assert_eq!(
            view_strides(&[4, 6], &[1, 4], &[2, 2, 6]),
            Some(vec![2, 1, 4])
        );
        assert_eq!(view_strides(&[4, 6], &[1, 4], &[24]), None);
        assert_eq!(view_strides(&[], &[], &[1, 1]), Some(vec![1, 1]));
    }
}
