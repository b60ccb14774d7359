//! C API: Any conversion, strings, bytes and big integers (c_api.h "Any", "String/Bytes").

use std::ffi::c_int;

use super::{byte_array_arg, guard, non_null};
use crate::abi::{kTVMFFIBigInt, kTVMFFIInt, kTVMFFIStaticObjectBegin, TVMFFIAny, TVMFFIByteArray};
use crate::any::Any;
use crate::bigint::{any_from_words, BigIntObj};
use crate::error::Error;
use crate::string::{BytesObj, StrObj};

/// Copies a view into an owned Any (objects gain a reference; RawStr/ByteArrayPtr become
/// String/Bytes; ObjectRValueRef moves the object out of its slot).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIAnyViewToOwnedAny(
    view: *const TVMFFIAny,
    out: *mut TVMFFIAny,
) -> c_int {
    guard(|| {
        let view = non_null(view, "TVMFFIAnyViewToOwnedAny", "any_view")?;
        let out = non_null(out, "TVMFFIAnyViewToOwnedAny", "out")? as *mut TVMFFIAny;
        // SAFETY: the caller passes a valid view.
        let v = unsafe { &*view };
        // SAFETY: the type index says which union member is set.
        if v.type_index >= kTVMFFIStaticObjectBegin && unsafe { v.value.v_obj }.is_null() {
            // a null object is None in this ABI; an owned copy of this one would crash its user
            return Err(Error::value_error(format!(
                "TVMFFIAnyViewToOwnedAny: `any_view` has object type index {} but a NULL object \
                 pointer (a null object is None, type index 0)",
                v.type_index
            )));
        }
        // SAFETY: the caller passes a valid view and a writable slot.
        unsafe { *out = Any::copy_from_raw_view(v)?.into_raw() };
        Ok(())
    })
}

/// Writes an owned string (SmallStr when at most 7 bytes, else `ffi.String`) into `out`.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIStringFromByteArray(
    input: *const TVMFFIByteArray,
    out: *mut TVMFFIAny,
) -> c_int {
    guard(|| {
        let out = non_null(out, "TVMFFIStringFromByteArray", "out")? as *mut TVMFFIAny;
        // SAFETY: writable slot; set None first so that a failure leaves a valid value.
        unsafe { *out = TVMFFIAny::NONE };
        // SAFETY: the caller passes a valid byte array.
        let bytes = unsafe { byte_array_arg(input, "TVMFFIStringFromByteArray", "input") }?;
        // SAFETY: writable slot.
        unsafe { *out = StrObj::any_from(bytes) };
        Ok(())
    })
}

/// Writes owned bytes (SmallBytes when at most 7 bytes, else `ffi.Bytes`) into `out`.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIBytesFromByteArray(
    input: *const TVMFFIByteArray,
    out: *mut TVMFFIAny,
) -> c_int {
    guard(|| {
        let out = non_null(out, "TVMFFIBytesFromByteArray", "out")? as *mut TVMFFIAny;
        // SAFETY: writable slot.
        unsafe { *out = TVMFFIAny::NONE };
        // SAFETY: the caller passes a valid byte array.
        let bytes = unsafe { byte_array_arg(input, "TVMFFIBytesFromByteArray", "input") }?;
        // SAFETY: writable slot.
        unsafe { *out = BytesObj::any_from(bytes) };
        Ok(())
    })
}

/// Builds an integer from little-word-first two's-complement int64 words: Int when it fits,
/// else `ffi.BigInt`. The size must be a multiple of 8 (ValueError otherwise).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIBigIntFromByteArray(
    input: *const TVMFFIByteArray,
    out: *mut TVMFFIAny,
) -> c_int {
    guard(|| {
        let out = non_null(out, "TVMFFIBigIntFromByteArray", "out")? as *mut TVMFFIAny;
        // SAFETY: writable slot.
        unsafe { *out = TVMFFIAny::NONE };
        // SAFETY: the caller passes a valid byte array.
        let bytes = unsafe { byte_array_arg(input, "TVMFFIBigIntFromByteArray", "input") }?;
        if bytes.len() % 8 != 0 {
            return Err(Error::value_error(format!(
                "TVMFFIBigIntFromByteArray: BigInt content must contain whole 64-bit words, got {} bytes",
                bytes.len()
            )));
        }
        let words: Vec<i64> = bytes
            .chunks_exact(8)
            .map(|c| i64::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        // SAFETY: writable slot.
        unsafe { *out = any_from_words(&words).into_raw() };
        Ok(())
    })
}

/// The int64 words of an Int or BigInt value, borrowed from `value` (empty for other types).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIBigIntGetContentByteArray(
    value: *const TVMFFIAny,
) -> TVMFFIByteArray {
    let empty = TVMFFIByteArray {
        data: std::ptr::null(),
        size: 0,
    };
    if value.is_null() {
        return empty;
    }
    // SAFETY: the caller passes a valid value that outlives the result.
    unsafe {
        match (*value).type_index {
            kTVMFFIInt => TVMFFIByteArray {
                data: std::ptr::addr_of!((*value).value.v_int64) as *const _,
                size: 8,
            },
            kTVMFFIBigInt => {
                let obj = &*((*value).value.v_obj as *const BigIntObj);
                let w = obj.words();
                TVMFFIByteArray {
                    data: w.as_ptr() as *const _,
                    size: w.len() * 8,
                }
            }
            _ => empty,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{kTVMFFIStr, TVMFFIAnyValue};

    /// A view of an object type with a NULL pointer is refused, not copied into an owned value
    /// its users would dereference.
    #[test]
    fn object_view_with_null_pointer_is_refused() {
        let view = TVMFFIAny {
            type_index: kTVMFFIStr,
            small_str_len: 0,
            value: TVMFFIAnyValue {
                v_obj: std::ptr::null_mut(),
            },
        };
        let mut out = TVMFFIAny::NONE;
        // SAFETY: valid pointers.
        assert_eq!(unsafe { TVMFFIAnyViewToOwnedAny(&view, &mut out) }, -1);
        let err = crate::error::take_raised().expect("an error is raised");
        assert_eq!(err.kind(), "ValueError");
        assert!(err.message().contains("NULL object pointer"));
        assert_eq!(out.type_index, 0);
    }
}
