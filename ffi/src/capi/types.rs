//! C API: the type table and reflection registration (c_api.h "Type reflection").

use std::ffi::c_int;

use super::{guard, non_null, str_arg};
use crate::abi::*;
use crate::error::{set_raised, Error};
use crate::type_table;

/// Looks up a registered type key. A missing key: -1 with an error of kind InternalError, as the
/// official library reports it.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeKeyToIndex(
    type_key: *const TVMFFIByteArray,
    out: *mut i32,
) -> c_int {
    guard(|| {
        let out = non_null(out, "TVMFFITypeKeyToIndex", "out")? as *mut i32;
        // SAFETY: the caller passes a valid byte array.
        let key = unsafe { str_arg(type_key, "TVMFFITypeKeyToIndex", "type_key") }?;
        // the official library's wording (its lookup check), which callers may match on
        let ti = type_table::key_to_index(key).ok_or_else(|| {
            Error::new(
                "InternalError",
                format!("Check failed: (it != type_key2index_.end()) is false: Cannot find type `{key}`"),
            )
        })?;
        // SAFETY: checked non-null out-parameter.
        unsafe { *out = ti };
        Ok(())
    })
}

/// Returns the index of `type_key`, allocating it per the rules of spec §3.2 when missing
/// (-2 in query mode, `parent_type_index == -2`). A conflicting or invalid registration prints
/// the reason, raises it, and returns -1 (the official library exits the process instead).
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeGetOrAllocIndex(
    type_key: *const TVMFFIByteArray,
    static_type_index: i32,
    type_depth: i32,
    num_child_slots: i32,
    child_slots_can_overflow: i32,
    parent_type_index: i32,
) -> i32 {
    let mut index = -1;
    let rc = guard(|| {
        // SAFETY: the caller passes a valid byte array.
        let key = unsafe { str_arg(type_key, "TVMFFITypeGetOrAllocIndex", "type_key") }?;
        index = type_table::get_or_alloc_index(
            key,
            static_type_index,
            type_depth,
            num_child_slots,
            child_slots_can_overflow != 0,
            parent_type_index,
        )?;
        Ok(())
    });
    if rc != 0 {
        let mut e = std::ptr::null_mut();
        // SAFETY: moving our own raised error out to print it, then raising it again.
        unsafe { super::TVMFFIErrorMoveFromRaised(&mut e) };
        if let Some(p) = std::ptr::NonNull::new(e as *mut TVMFFIObject) {
            // SAFETY: an owned error reference.
            let err = unsafe { Error::from_raw_owned(p) };
            eprintln!("Exception caught during TVMFFITypeGetOrAllocIndex:\n{err}");
            set_raised(err);
        }
        return -1;
    }
    index
}

/// The stable type information of `type_index`, or NULL when it is not registered.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIGetTypeInfo(type_index: i32) -> *const TVMFFITypeInfo {
    type_table::type_info_ptr(type_index)
}

/// Registers a reflected field on `type_index`; the description is copied.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeRegisterField(
    type_index: i32,
    info: *const TVMFFIFieldInfo,
) -> c_int {
    guard(|| {
        let info = non_null(info, "TVMFFITypeRegisterField", "info")?;
        // SAFETY: the caller passes a valid description, true of the type (c_api.h).
        unsafe { type_table::register_field(type_index, &*info) }
    })
}

/// Registers a reflected method on `type_index`; the description is copied, the method retained.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeRegisterMethod(
    type_index: i32,
    info: *const TVMFFIMethodInfo,
) -> c_int {
    guard(|| {
        let info = non_null(info, "TVMFFITypeRegisterMethod", "info")?;
        // SAFETY: the caller passes a valid description, true of the type (c_api.h).
        unsafe { type_table::register_method(type_index, &*info) }
    })
}

/// Registers the metadata of `type_index` (once).
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeRegisterMetadata(
    type_index: i32,
    metadata: *const TVMFFITypeMetadata,
) -> c_int {
    guard(|| {
        let m = non_null(metadata, "TVMFFITypeRegisterMetadata", "metadata")?;
        // SAFETY: the caller passes a valid description, true of the type (c_api.h).
        unsafe { type_table::register_metadata(type_index, &*m) }
    })
}

/// Sets attribute `name` of `type_index` to an owned copy of `value` (index 0 only makes sure
/// the column exists).
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeRegisterAttr(
    type_index: i32,
    name: *const TVMFFIByteArray,
    value: *const TVMFFIAny,
) -> c_int {
    guard(|| {
        // SAFETY: the caller passes a valid byte array.
        let name = unsafe { str_arg(name, "TVMFFITypeRegisterAttr", "attr_name") }?;
        let value = non_null(value, "TVMFFITypeRegisterAttr", "attr_value")?;
        // SAFETY: the caller passes a valid view.
        unsafe { type_table::register_attr(type_index, name, &*value) }
    })
}

/// The column of attribute `name` (stable address), or NULL when no type registered it.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIGetTypeAttrColumn(
    name: *const TVMFFIByteArray,
) -> *const TVMFFITypeAttrColumn {
    if name.is_null() {
        return std::ptr::null();
    }
    // SAFETY: the caller passes a valid byte array.
    let name = unsafe { type_table::byte_array_str(&*name) };
    type_table::attr_column(&name)
}
