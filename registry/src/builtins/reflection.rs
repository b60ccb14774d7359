//! Reflection and dataclass built-ins (spec §8): `ffi._RegisterFFIInit`,
//! `ffi.MakeObjectFromPackedArgs`, `ffi.MakeFieldGetter`, `ffi.MakeFieldSetter`,
//! `ffi._PyClassRegisterTypeAttrColumns` and `ffi.FunctionFromExternC`.
//!
//! Each is a thin wrapper over `anyffi::reflection`, which works on the type
//! table alone and so serve C++-defined (testing library), Python-defined and Rust types alike.

use std::ffi::c_void;

use anyffi::abi::TVMFFISafeCallType;
use anyffi::function::SelfDeleter;
use anyffi::reflection::{self, FConvert};
use anyffi::{type_table, Any, Error, Function, Result};

use crate::global::Registrar;

/// A type index argument that names a registered type.
fn registered_index(what: &str, ti: i64) -> Result<i32> {
    i32::try_from(ti)
        .ok()
        .filter(|&ti| type_table::type_entry(ti).is_some())
        .ok_or_else(|| Error::value_error(format!("{what}: unknown type index {ti}")))
}

pub(super) fn register(r: &mut Registrar<'_>) {
    r.typed(
        "ffi._RegisterFFIInit",
        "Installs the reflection-generated `__ffi_init__` of a type (KWARGS protocol).",
        |ti: i64| -> Result<()> {
            let ti = registered_index("ffi._RegisterFFIInit", ti)?;
            let init = reflection::make_init(ti)?;
            // SAFETY: a live Function value; `make_init` builds it from the type's reflection.
            unsafe { type_table::register_attr(ti, "__ffi_init__", Any::from(init).raw()) }
        },
    );
    r.packed(
        "ffi.MakeObjectFromPackedArgs",
        "MakeObjectFromPackedArgs(type_key_or_index, name1, value1, ...): a new object with \
         the named fields set and the rest at their defaults.",
        reflection::make_object_from_packed_args,
    );
    r.typed(
        "ffi.MakeFieldGetter",
        "The C getter (as an int) for a field of the given static type index.",
        |ti: i64| -> Result<i64> {
            let ti = i32::try_from(ti).map_err(|_| {
                Error::value_error(format!("Unsupported field type index for getter: {ti}"))
            })?;
            let getter = reflection::getter_for_static_type(ti)?;
            Ok(getter.map_or(0, |g| g as usize as i64))
        },
    );
    r.typed(
        "ffi.MakeFieldSetter",
        "A setter Function (field address, value) for a Python-defined field: converts with \
         `f_convert(converter, value, &out)`, then stores the result.",
        |ti: i64, converter: i64, f_convert: i64| -> Result<Function> {
            let ti = i32::try_from(ti).map_err(|_| {
                Error::value_error(format!("Unsupported field type index for setter: {ti}"))
            })?;
            if f_convert == 0 {
                return Err(Error::value_error(
                    "ffi.MakeFieldSetter: the converter function pointer must not be NULL",
                ));
            }
            // SAFETY: Python passes the address of its converter callback, which has this type.
            let f: FConvert = unsafe { std::mem::transmute::<usize, FConvert>(f_convert as usize) };
            reflection::make_field_setter(ti, converter as usize as *mut c_void, f)
        },
    );
    r.typed(
        "ffi._PyClassRegisterTypeAttrColumns",
        "Registers `__ffi_init__`, `__ffi_new__` and `__ffi_shallow_copy__` for a \
         Python-defined type of the given total size.",
        |ti: i64, total_size: i64| -> Result<()> {
            let ti = registered_index("ffi._PyClassRegisterTypeAttrColumns", ti)?;
            let size = i32::try_from(total_size).map_err(|_| {
                Error::value_error(format!(
                    "ffi._PyClassRegisterTypeAttrColumns: total_size {total_size} out of range"
                ))
            })?;
            // SAFETY: the caller (the official Python package) vouches for the class and its
            // size; like `ffi.FunctionFromExternC`, an unchecked escape hatch of the ABI.
            unsafe { reflection::register_py_class_attrs(ti, size) }
        },
    );
    r.typed(
        "ffi.FunctionFromExternC",
        "A Function over a C `safe_call(self, args, n, result)`; `deleter(self)` runs when it \
         dies.",
        |self_: *mut c_void, safe_call: *mut c_void, deleter: *mut c_void| -> Result<Function> {
            if safe_call.is_null() {
                return Err(Error::value_error(
                    "ffi.FunctionFromExternC: `safe_call` must not be NULL",
                ));
            }
            // SAFETY: the caller passes C function pointers of these ABI types (NULL deleter
            // allowed), as the official function documents.
            let (call, del): (TVMFFISafeCallType, SelfDeleter) = unsafe {
                (
                    std::mem::transmute::<*mut c_void, TVMFFISafeCallType>(safe_call),
                    std::mem::transmute::<*mut c_void, SelfDeleter>(deleter),
                )
            };
            // SAFETY: as above: the caller vouches for the pointers (an escape hatch of the
            // ABI, as in the official library).
            unsafe { Function::from_c(self_, call, del) }
        },
    );
}
