//! Field getters and setters (`TVMFFIFieldGetter` / `TVMFFIFieldSetter`) for every storage kind a
//! reflected field can have, plus the Python-class selection by static type index.
//!
//! Rationale: the ABI stores one plain C function pointer per field and passes only the field's
//! address, so a setter that must check "is this an `ffi.List`" carries the expected type in its
//! code: object setters are monomorphised over the type index (`set_object::<75, false>`). Every
//! function here validates its pointers and reports failures through the raised-error slot; none
//! can panic.

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;

use crate::abi::*;
use crate::any::{Any, AnyView};
use crate::error::{set_raised, Error, Result};
use crate::object::{Object, ObjectRef};

/// How a field is read and written, and what it reports about itself.
#[derive(Clone, Copy)]
pub struct Accessor {
    pub getter: TVMFFIFieldGetter,
    pub setter: TVMFFIFieldSetter,
    /// Bytes the field occupies.
    pub size: i64,
    /// Its alignment.
    pub alignment: i64,
    /// `field_static_type_index` (-1 = Any, also used for String and Optional cells).
    pub static_type_index: i32,
}

impl Accessor {
    /// `int64_t`.
    pub const I64: Accessor = Accessor {
        getter: Some(get_i64),
        setter: Some(set_i64),
        size: 8,
        alignment: 8,
        static_type_index: kTVMFFIInt,
    };
    /// `int32_t` (and 32-bit enums).
    pub const I32: Accessor = Accessor {
        getter: Some(get_i32),
        setter: Some(set_i32),
        size: 4,
        alignment: 4,
        static_type_index: kTVMFFIInt,
    };
    /// `double`.
    pub const F64: Accessor = Accessor {
        getter: Some(get_f64),
        setter: Some(set_f64),
        size: 8,
        alignment: 8,
        static_type_index: kTVMFFIFloat,
    };
    /// `bool` (one byte).
    pub const BOOL: Accessor = Accessor {
        getter: Some(get_bool),
        setter: Some(set_bool),
        size: 1,
        alignment: 1,
        static_type_index: kTVMFFIBool,
    };
    /// `Any` (a 16-byte owned value).
    pub const ANY: Accessor = Accessor {
        getter: Some(get_any),
        setter: Some(set_any),
        size: 16,
        alignment: 8,
        static_type_index: kTVMFFIAny,
    };
    /// `String`: a 16-byte cell holding SmallStr or an owned `ffi.String`.
    pub const STR: Accessor = Accessor {
        getter: Some(get_any),
        setter: Some(set_str),
        size: 16,
        alignment: 8,
        static_type_index: kTVMFFIAny,
    };

    /// An object reference (a nullable pointer cell) that must be an instance of `TI` (64 = any
    /// object); `NULLABLE` lets None store NULL. `static_type_index` is what the field reports
    /// (the official build reports 64 for maps and -1 for `Optional`).
    pub const fn object<const TI: i32, const NULLABLE: bool>(static_type_index: i32) -> Accessor {
        Accessor {
            getter: Some(get_object),
            setter: Some(set_object::<TI, NULLABLE>),
            size: 8,
            alignment: 8,
            static_type_index,
        }
    }
}

/// Runs a getter/setter body: `Err` is raised and reported as -1.
#[inline]
fn finish(r: Result<()>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            set_raised(e);
            -1
        }
    }
}

#[cold]
fn null_args(what: &str) -> Error {
    Error::value_error(format!(
        "{what}: the field address and the value pointer must not be NULL"
    ))
}

/// The conversion error of the official setters.
#[cold]
pub(crate) fn convert_error(v: &AnyView<'_>, target: &str) -> Error {
    Error::type_error(format!(
        "Cannot convert from type `{}` to `{target}`",
        v.type_key()
    ))
}

/// Writes a getter result.
///
/// # Safety
/// `field` and `out` must be valid for the kind the caller reads (checked non-null here).
#[inline]
unsafe fn read<T: Copy>(
    field: *mut c_void,
    out: *mut TVMFFIAny,
    f: impl FnOnce(T) -> Any,
) -> c_int {
    if field.is_null() || out.is_null() {
        set_raised(null_args("field getter"));
        return -1;
    }
    // SAFETY: the field of a live object, of the registered kind.
    let v = unsafe { *(field as *const T) };
    // SAFETY: a writable result slot; POD results need no release of the old slot (None).
    unsafe { *out = f(v).into_raw() };
    0
}

/// A borrowed view of a setter argument, or a ValueError for NULL pointers.
///
/// # Safety
/// `value` must be NULL or a valid Any view that outlives `'a`.
#[inline]
unsafe fn arg<'a>(field: *mut c_void, value: *const TVMFFIAny) -> Result<AnyView<'a>> {
    if field.is_null() || value.is_null() {
        return Err(null_args("field setter"));
    }
    // SAFETY: per the caller.
    Ok(unsafe { AnyView::from_raw(*value) })
}

unsafe extern "C" fn get_i64(field: *mut c_void, out: *mut TVMFFIAny) -> c_int {
    // SAFETY: the registered kind is int64.
    unsafe { read(field, out, |v: i64| Any::from(v)) }
}

unsafe extern "C" fn get_i32(field: *mut c_void, out: *mut TVMFFIAny) -> c_int {
    // SAFETY: the registered kind is int32.
    unsafe { read(field, out, |v: i32| Any::from(v)) }
}

unsafe extern "C" fn get_f64(field: *mut c_void, out: *mut TVMFFIAny) -> c_int {
    // SAFETY: the registered kind is double.
    unsafe { read(field, out, |v: f64| Any::from(v)) }
}

unsafe extern "C" fn get_bool(field: *mut c_void, out: *mut TVMFFIAny) -> c_int {
    // SAFETY: the registered kind is a one-byte bool.
    unsafe { read(field, out, |v: u8| Any::from(v != 0)) }
}

unsafe extern "C" fn get_opaque_ptr(field: *mut c_void, out: *mut TVMFFIAny) -> c_int {
    // SAFETY: the registered kind is void*.
    unsafe { read(field, out, |v: *mut c_void| Any::from(v)) }
}

unsafe extern "C" fn get_dtype(field: *mut c_void, out: *mut TVMFFIAny) -> c_int {
    // SAFETY: the registered kind is DLDataType.
    unsafe { read(field, out, |v: DLDataType| Any::from(v)) }
}

unsafe extern "C" fn get_device(field: *mut c_void, out: *mut TVMFFIAny) -> c_int {
    // SAFETY: the registered kind is DLDevice.
    unsafe { read(field, out, |v: DLDevice| Any::from(v)) }
}

/// Any and String cells: an owned copy of the stored value.
unsafe extern "C" fn get_any(field: *mut c_void, out: *mut TVMFFIAny) -> c_int {
    // SAFETY: the cell is an owned Any of a live object; the copy takes its own reference (an
    // owned cell never holds the raw kinds whose copy can fail).
    unsafe {
        read(field, out, |v: TVMFFIAny| {
            AnyView::from_raw(v).to_owned().unwrap_or_default()
        })
    }
}

/// A cell whose reads the structural walks do in place (`structural::WalkField::get`), found
/// by its getter being one of ours.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum InPlace {
    /// `get_object`
    Object,
    /// `get_i64`
    I64,
}

/// The in-place read of the cells `getter` reads, when it is one of ours that has one.
pub(crate) fn in_place(
    getter: unsafe extern "C" fn(*mut c_void, *mut TVMFFIAny) -> c_int,
) -> Option<InPlace> {
    type Getter = unsafe extern "C" fn(*mut c_void, *mut TVMFFIAny) -> c_int;
    let (object, int): (Getter, Getter) = (get_object, get_i64);
    if getter as usize == object as usize {
        Some(InPlace::Object)
    } else if getter as usize == int as usize {
        Some(InPlace::I64)
    } else {
        None
    }
}

/// Reads an object cell as `get_object` does.
///
/// # Safety
/// `field` must be the nullable object pointer cell of a live object.
#[inline(always)]
pub(crate) unsafe fn read_object_cell(field: *const c_void) -> Any {
    // SAFETY: per the caller.
    match NonNull::new(unsafe { *(field as *const *mut TVMFFIObject) }) {
        None => Any::none(),
        // SAFETY: a live object the cell holds a reference to.
        Some(p) => Any::from(unsafe { ObjectRef::from_raw_borrowed(p.cast::<Object>()) }),
    }
}

/// Object cells: None for NULL, else a new reference typed by the object's own index.
unsafe extern "C" fn get_object(field: *mut c_void, out: *mut TVMFFIAny) -> c_int {
    if field.is_null() || out.is_null() {
        set_raised(null_args("field getter"));
        return -1;
    }
    // SAFETY: the cell is a nullable object pointer of a live object; `out` a writable slot
    // (None before: nothing to release).
    unsafe { *out = read_object_cell(field).into_raw() };
    0
}

/// Replaces the value of type `T` at `field`, dropping the old one after the write.
///
/// # Safety
/// `field` must hold a valid `T`.
#[inline]
unsafe fn replace<T>(field: *mut c_void, v: T) {
    // SAFETY: per the caller.
    let old = unsafe { std::ptr::replace(field as *mut T, v) };
    drop(old);
}

unsafe extern "C" fn set_i64(field: *mut c_void, value: *const TVMFFIAny) -> c_int {
    finish((|| {
        // SAFETY: the caller passes a live view.
        let v = unsafe { arg(field, value) }?;
        let x = v.as_i64().ok_or_else(|| convert_error(&v, "int"))?;
        // SAFETY: an int64 field.
        unsafe { *(field as *mut i64) = x };
        Ok(())
    })())
}

unsafe extern "C" fn set_i32(field: *mut c_void, value: *const TVMFFIAny) -> c_int {
    finish((|| {
        // SAFETY: the caller passes a live view.
        let v = unsafe { arg(field, value) }?;
        let x = v.as_i64().ok_or_else(|| convert_error(&v, "int"))?;
        let x = i32::try_from(x).map_err(|_| {
            Error::value_error(format!("field setter: {x} does not fit in a 32-bit field"))
        })?;
        // SAFETY: an int32 field.
        unsafe { *(field as *mut i32) = x };
        Ok(())
    })())
}

unsafe extern "C" fn set_f64(field: *mut c_void, value: *const TVMFFIAny) -> c_int {
    finish((|| {
        // SAFETY: the caller passes a live view.
        let v = unsafe { arg(field, value) }?;
        let x = v.as_f64().ok_or_else(|| convert_error(&v, "float"))?;
        // SAFETY: a double field.
        unsafe { *(field as *mut f64) = x };
        Ok(())
    })())
}

unsafe extern "C" fn set_bool(field: *mut c_void, value: *const TVMFFIAny) -> c_int {
    finish((|| {
        // SAFETY: the caller passes a live view.
        let v = unsafe { arg(field, value) }?;
        let x = v.as_bool().ok_or_else(|| convert_error(&v, "bool"))?;
        // SAFETY: a one-byte bool field.
        unsafe { *(field as *mut u8) = u8::from(x) };
        Ok(())
    })())
}

unsafe extern "C" fn set_any(field: *mut c_void, value: *const TVMFFIAny) -> c_int {
    finish((|| {
        // SAFETY: the caller passes a live view.
        let v = unsafe { arg(field, value) }?;
        let owned = v.to_owned()?;
        // SAFETY: an owned Any cell.
        unsafe { replace(field, owned) };
        Ok(())
    })())
}

unsafe extern "C" fn set_str(field: *mut c_void, value: *const TVMFFIAny) -> c_int {
    finish((|| {
        // SAFETY: the caller passes a live view.
        let v = unsafe { arg(field, value) }?;
        if !matches!(v.type_index(), kTVMFFISmallStr | kTVMFFIStr | kTVMFFIRawStr) {
            return Err(convert_error(&v, "ffi.String"));
        }
        let owned = v.to_owned()?;
        // SAFETY: a String cell is an owned Any holding a string.
        unsafe { replace(field, owned) };
        Ok(())
    })())
}

/// Converts a view to an object reference of type `ti` (None → `None` when `nullable`).
pub(crate) fn object_arg(
    v: &AnyView<'_>,
    ti: i32,
    nullable: bool,
) -> Result<Option<ObjectRef<Object>>> {
    if v.is_none() {
        return if nullable {
            Ok(None)
        } else {
            Err(convert_error(v, &crate::type_table::type_key_of(ti)))
        };
    }
    match v.as_object() {
        Some(o) if ti == kTVMFFIObject || crate::type_table::is_instance_of(o.type_index(), ti) => {
            Ok(Some(o))
        }
        _ => Err(convert_error(v, &crate::type_table::type_key_of(ti))),
    }
}

unsafe extern "C" fn set_object<const TI: i32, const NULLABLE: bool>(
    field: *mut c_void,
    value: *const TVMFFIAny,
) -> c_int {
    finish((|| {
        // SAFETY: the caller passes a live view.
        let v = unsafe { arg(field, value) }?;
        let obj = object_arg(&v, TI, NULLABLE)?;
        // SAFETY: a nullable object cell; Option<ObjectRef> has the layout of a pointer.
        unsafe { replace(field, obj) };
        Ok(())
    })())
}

/// The getter `ffi.MakeFieldGetter` hands Python-defined classes for a field's static type index.
pub fn getter_for_static_type(field_type_index: i32) -> Result<TVMFFIFieldGetter> {
    Ok(match field_type_index {
        kTVMFFIInt => Some(get_i64),
        kTVMFFIFloat => Some(get_f64),
        kTVMFFIBool => Some(get_bool),
        kTVMFFIOpaquePtr => Some(get_opaque_ptr),
        kTVMFFIDataType => Some(get_dtype),
        kTVMFFIDevice => Some(get_device),
        kTVMFFIAny | kTVMFFINone => Some(get_any),
        ti if ti >= kTVMFFIStaticObjectBegin => Some(get_object),
        ti => {
            return Err(Error::value_error(format!(
                "Unsupported field type index for getter: {ti}"
            )))
        }
    })
}

/// Writes an already converted value into a Python-defined field of static type `ti`.
///
/// # Safety
/// `field` must be the address of a field of that kind inside a live object.
pub unsafe fn write_field_value(field: *mut c_void, ti: i32, value: Any) -> Result<()> {
    let v = value.as_view();
    // SAFETY: per the caller, `field` holds a value of the kind `ti` names (every arm).
    unsafe {
        match ti {
            kTVMFFIInt => {
                *(field as *mut i64) = v.as_i64().ok_or_else(|| convert_error(&v, "int"))?
            }
            kTVMFFIFloat => {
                *(field as *mut f64) = v.as_f64().ok_or_else(|| convert_error(&v, "float"))?
            }
            kTVMFFIBool => {
                *(field as *mut u8) =
                    u8::from(v.as_bool().ok_or_else(|| convert_error(&v, "bool"))?)
            }
            kTVMFFIOpaquePtr => {
                *(field as *mut *mut c_void) = v
                    .as_opaque_ptr()
                    .ok_or_else(|| convert_error(&v, "void*"))?
            }
            kTVMFFIDataType => {
                *(field as *mut DLDataType) = v
                    .get::<DLDataType>()
                    .map_err(|_| convert_error(&v, "DataType"))?
            }
            kTVMFFIDevice => {
                *(field as *mut DLDevice) =
                    v.as_device().ok_or_else(|| convert_error(&v, "Device"))?
            }
            kTVMFFIAny | kTVMFFINone => replace(field, value),
            ti if ti >= kTVMFFIStaticObjectBegin => {
                let obj = object_arg(&v, kTVMFFIObject, true)?;
                replace(field, obj);
            }
            ti => {
                return Err(Error::value_error(format!(
                    "Unsupported field type index for setter: {ti}"
                )))
            }
        }
    }
    Ok(())
}
