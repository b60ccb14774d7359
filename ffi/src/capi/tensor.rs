//! C API: DLPack tensors and data types (c_api.h "Tensor", "DataType").

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;

use super::{byte_array_arg, guard, non_null};
use crate::abi::{
    DLDataType, DLManagedTensor, DLManagedTensorVersioned, DLTensor, TVMFFIAny, TVMFFIByteArray,
    TVMFFIObject,
};
use crate::any::Any;
use crate::error::Error;
use crate::object::{Object, ObjectRef};
use crate::string::Str;
use crate::tensor::{Tensor, TensorObj};

/// Wraps a legacy managed tensor (ownership passes on success only) as an `ffi.Tensor`.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorFromDLPack(
    from: *mut DLManagedTensor,
    require_alignment: i32,
    require_contiguous: i32,
    out: *mut *mut c_void,
) -> c_int {
    guard(|| {
        let out = non_null(out, "TVMFFITensorFromDLPack", "out")? as *mut *mut c_void;
        // SAFETY: the caller passes a valid managed tensor.
        let t = unsafe { Tensor::from_dlpack(from, require_alignment, require_contiguous != 0) }?;
        // SAFETY: checked non-null out-parameter.
        unsafe { *out = t.into_raw() as *mut c_void };
        Ok(())
    })
}

/// Wraps a versioned managed tensor (ownership passes on success only) as an `ffi.Tensor`.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorFromDLPackVersioned(
    from: *mut DLManagedTensorVersioned,
    require_alignment: i32,
    require_contiguous: i32,
    out: *mut *mut c_void,
) -> c_int {
    guard(|| {
        let out = non_null(out, "TVMFFITensorFromDLPackVersioned", "out")? as *mut *mut c_void;
        // SAFETY: the caller passes a valid managed tensor.
        let t = unsafe {
            Tensor::from_dlpack_versioned(from, require_alignment, require_contiguous != 0)
        }?;
        // SAFETY: checked non-null out-parameter.
        unsafe { *out = t.into_raw() as *mut c_void };
        Ok(())
    })
}

/// The tensor behind a borrowed handle, checked.
unsafe fn tensor_arg(p: *mut c_void, func: &str) -> crate::error::Result<Tensor> {
    let p = non_null(p, func, "tensor")?;
    // SAFETY: the caller passes a live object.
    let ti = unsafe { (*(p as *const TVMFFIObject)).type_index };
    if ti != crate::abi::kTVMFFITensor {
        return Err(Error::type_error(format!(
            "{func}: expected an ffi.Tensor, got {}",
            crate::type_table::type_key_of(ti)
        )));
    }
    // SAFETY: a live tensor; we take our own reference for the duration of the call.
    Ok(unsafe { ObjectRef::from_raw_borrowed(NonNull::new_unchecked(p as *mut TensorObj)) })
}

/// Whether `tensor` (borrowed) is read-only memory: 1 when it was imported from a versioned
/// DLPack producer that flagged it `DLPACK_FLAG_BITMASK_READ_ONLY` (or is a view of such a
/// tensor), 0 otherwise, -1 with an error raised when `tensor` is not an `ffi.Tensor`. Ops
/// refuse such a tensor as an output, and versioned exports of it carry the flag. Not part of
/// the TVM FFI ABI.
#[no_mangle]
pub unsafe extern "C" fn AnyFFITensorIsReadOnly(tensor: *mut c_void) -> c_int {
    let mut read_only = false;
    let rc = guard(|| {
        // SAFETY: checked handle.
        let t = unsafe { tensor_arg(tensor, "AnyFFITensorIsReadOnly") }?;
        read_only = t.is_read_only();
        Ok(())
    });
    if rc != 0 {
        rc
    } else {
        c_int::from(read_only)
    }
}

/// Exports `tensor` (borrowed) as a new legacy managed tensor that holds a reference to it.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorToDLPack(
    tensor: *mut c_void,
    out: *mut *mut DLManagedTensor,
) -> c_int {
    guard(|| {
        let out = non_null(out, "TVMFFITensorToDLPack", "out")? as *mut *mut DLManagedTensor;
        // SAFETY: checked handle.
        let t = unsafe { tensor_arg(tensor, "TVMFFITensorToDLPack") }?;
        // SAFETY: checked non-null out-parameter.
        unsafe { *out = t.to_dlpack() };
        Ok(())
    })
}

/// Exports `tensor` (borrowed) as a new versioned managed tensor (version 1.3, flags 0).
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorToDLPackVersioned(
    tensor: *mut c_void,
    out: *mut *mut DLManagedTensorVersioned,
) -> c_int {
    guard(|| {
        let out = non_null(out, "TVMFFITensorToDLPackVersioned", "out")?
            as *mut *mut DLManagedTensorVersioned;
        // SAFETY: checked handle.
        let t = unsafe { tensor_arg(tensor, "TVMFFITensorToDLPackVersioned") }?;
        // SAFETY: checked non-null out-parameter.
        unsafe { *out = t.to_dlpack_versioned() };
        Ok(())
    })
}

/// A new tensor (new reference) with the metadata of `prototype` that keeps `source` (borrowed)
/// alive. `prototype->strides` must be non-NULL when `ndim > 0`.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorCreateUnsafeView(
    source: *mut c_void,
    prototype: *const DLTensor,
    out: *mut *mut c_void,
) -> c_int {
    guard(|| {
        let out = non_null(out, "TVMFFITensorCreateUnsafeView", "out")? as *mut *mut c_void;
        let proto = non_null(prototype, "TVMFFITensorCreateUnsafeView", "prototype")?;
        let src = NonNull::new(source as *mut Object).ok_or_else(|| {
            Error::value_error("TVMFFITensorCreateUnsafeView: `source` must not be NULL")
        })?;
        // SAFETY: the caller passes a live source object; we take our own reference.
        let src = unsafe { ObjectRef::from_raw_borrowed(src) };
        // SAFETY: the caller passes a valid prototype.
        let t = unsafe { Tensor::unsafe_view(src, &*proto) }?;
        // SAFETY: checked non-null out-parameter.
        unsafe { *out = t.into_raw() as *mut c_void };
        Ok(())
    })
}

/// Parses a dtype string (`float32`, `int8x4`, `bfloat16`, ...). Unknown strings: ValueError.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIDataTypeFromString(
    input: *const TVMFFIByteArray,
    out: *mut DLDataType,
) -> c_int {
    guard(|| {
        let out = non_null(out, "TVMFFIDataTypeFromString", "out")? as *mut DLDataType;
        // SAFETY: the caller passes a valid byte array.
        let s = unsafe { byte_array_arg(input, "TVMFFIDataTypeFromString", "str") }?;
        let t = crate::dtype::parse_dtype_bytes(s)?;
        // SAFETY: checked non-null out-parameter.
        unsafe { *out = t };
        Ok(())
    })
}

/// Writes the text of a dtype into `out` as an owned `ffi.String` object (never SmallStr).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIDataTypeToString(
    dtype: *const DLDataType,
    out: *mut TVMFFIAny,
) -> c_int {
    guard(|| {
        let out = non_null(out, "TVMFFIDataTypeToString", "out")? as *mut TVMFFIAny;
        let dtype = non_null(dtype, "TVMFFIDataTypeToString", "dtype")?;
        // SAFETY: valid dtype pointer supplied by the caller.
        let text = crate::dtype::try_dtype_to_string(unsafe { *dtype })?;
        // SAFETY: checked non-null out-parameter.
        unsafe { *out = Any::from(Str::from_content(text.as_bytes())).into_raw() };
        Ok(())
    })
}
