//! C API: object reference counting and opaque objects (c_api.h "Object").

use std::ffi::{c_int, c_void};

use super::{guard, non_null};
use crate::abi::{kTVMFFIOpaquePyObject, TVMFFIObject, TVMFFIVersion};
use crate::error::Error;
use crate::object::{dec_ref, inc_ref};
use crate::opaque::Opaque;

/// Writes the C ABI version (0.1.16).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIGetVersion(out: *mut TVMFFIVersion) {
    if out.is_null() {
        return;
    }
    use crate::abi::{TVM_FFI_VERSION_MAJOR, TVM_FFI_VERSION_MINOR, TVM_FFI_VERSION_PATCH};
    // SAFETY: non-null out-parameter supplied by the caller.
    unsafe {
        *out = TVMFFIVersion {
            major: TVM_FFI_VERSION_MAJOR,
            minor: TVM_FFI_VERSION_MINOR,
            patch: TVM_FFI_VERSION_PATCH,
        }
    };
}

/// Adds a strong reference to `obj` (borrowed). NULL is an error (-1, ValueError).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIObjectIncRef(obj: *mut c_void) -> c_int {
    if obj.is_null() {
        return guard(|| {
            Err(Error::value_error(
                "TVMFFIObjectIncRef: `obj` must not be NULL",
            ))
        });
    }
    // SAFETY: the caller passes a live object.
    unsafe { inc_ref(obj as *mut TVMFFIObject) };
    0
}

/// Releases one strong reference the caller owns; NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIObjectDecRef(obj: *mut c_void) -> c_int {
    if !obj.is_null() {
        // SAFETY: the caller gives up a reference it owns.
        unsafe { dec_ref(obj as *mut TVMFFIObject) };
    }
    0
}

/// Wraps a foreign handle in an `ffi.OpaquePyObject` (new reference in `*out`); `deleter(handle)`
/// runs on destruction. Only type index 74 is supported.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIObjectCreateOpaque(
    handle: *mut c_void,
    type_index: i32,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    out: *mut *mut c_void,
) -> c_int {
    guard(|| {
        let out = non_null(out, "TVMFFIObjectCreateOpaque", "out")? as *mut *mut c_void;
        if type_index != kTVMFFIOpaquePyObject {
            return Err(Error::runtime_error(format!(
                "TVMFFIObjectCreateOpaque: only kTVMFFIOpaquePyObject (74) is supported, got type index {type_index}"
            )));
        }
        // SAFETY: checked non-null out-parameter; the C caller vouches for `deleter(handle)`.
        unsafe { *out = Opaque::new(handle, deleter).into_raw() as *mut c_void };
        Ok(())
    })
}
