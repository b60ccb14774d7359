//! Support for classes whose layout is defined from Python (`@py_class`): the `__ffi_new__`,
//! `__ffi_shallow_copy__` and `__ffi_init__` attributes of `ffi._PyClassRegisterTypeAttrColumns`,
//! the deleter of such objects, and the converting field setter of `ffi.MakeFieldSetter`.
//!
//! Rationale: Python lays the fields out itself (spec §8) and describes them only through the
//! type table, so these objects are zero-filled `calloc` blocks whose deleter walks the reflected
//! fields to release the Any and object cells (a zero cell is None / NULL, so nothing needs
//! constructing).

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;

use super::accessor::write_field_value;
use super::{fields, make_init, type_info, type_key, FieldRef};
use crate::abi::*;
use crate::any::Any;
use crate::error::{fetch_raised, Error, Result};
use crate::function::Function;
use crate::object::{Object, ObjectRef, INITIAL_REF_COUNT};
use crate::type_table;

/// The Python converter callback `int f(void* converter, const TVMFFIAny* in, TVMFFIAny* out)`.
pub type FConvert = unsafe extern "C" fn(*mut c_void, *const TVMFFIAny, *mut TVMFFIAny) -> c_int;

/// How a Python-class field is stored.
enum Storage {
    Pod,
    Any,
    Object,
}

fn storage(f: &FieldRef) -> Storage {
    let info = f.info();
    match info.field_static_type_index {
        // A C++ parent's Optional/ObjectRef field reports Any but stores a pointer.
        kTVMFFIAny if info.size == 8 => Storage::Object,
        kTVMFFIAny => Storage::Any,
        ti if ti >= kTVMFFIStaticObjectBegin => Storage::Object,
        _ => Storage::Pod,
    }
}

/// Deleter of Python-class objects: flag 1 releases the Any/object fields, flag 2 frees.
unsafe extern "C" fn py_class_deleter(obj: *mut c_void, flags: c_int) {
    // SAFETY: this object's deleter, called with `flags`.
    if unsafe { crate::object::keep_if_lent(obj, flags) } {
        return;
    }
    let header = obj as *mut TVMFFIObject;
    if flags & kTVMFFIObjectDeleterFlagBitMaskStrong != 0 {
        // SAFETY: the header of the object being destroyed.
        let ti = unsafe { (*header).type_index };
        if let Ok(info) = type_info(ti) {
            for f in fields(info) {
                // SAFETY: the field lies inside this object; each cell is released once.
                unsafe {
                    let addr = (obj as *mut u8).offset(f.info().offset as isize);
                    match storage(&f) {
                        Storage::Any => std::ptr::drop_in_place(addr as *mut Any),
                        Storage::Object => {
                            std::ptr::drop_in_place(addr as *mut Option<ObjectRef<Object>>)
                        }
                        Storage::Pod => {}
                    }
                }
            }
        }
    }
    if flags & kTVMFFIObjectDeleterFlagBitMaskWeak != 0 {
        // SAFETY: the block came from `calloc` below.
        unsafe { libc::free(obj) };
    }
}

/// A zero-filled object block of `total_size` bytes with a fresh header.
fn alloc_py_object(type_index: i32, total_size: usize) -> Result<ObjectRef<Object>> {
    // SAFETY: plain calloc; checked below.
    let p = unsafe { libc::calloc(1, total_size) } as *mut TVMFFIObject;
    let p = NonNull::new(p).ok_or_else(|| {
        Error::runtime_error(format!(
            "Failed to allocate {total_size} bytes for type {}",
            type_table::type_key_of(type_index)
        ))
    })?;
    // SAFETY: a fresh, zeroed block of at least the header's size.
    unsafe {
        let h = p.as_ptr();
        (*h).combined_ref_count = INITIAL_REF_COUNT.into();
        (*h).type_index = type_index;
        (*h).deleter = Some(py_class_deleter);
        Ok(ObjectRef::from_raw_owned(p.cast::<Object>()))
    }
}

/// `ffi._PyClassRegisterTypeAttrColumns(type_index, total_size)`: registers the reflection
/// `__ffi_init__`, and `__ffi_new__` / `__ffi_shallow_copy__` over zero-filled blocks.
///
/// # Safety
/// `type_index` must be a type whose instances are `total_size` bytes of reflected fields
/// (a Python-defined class): `__ffi_new__` hands out zero-filled blocks of that size as its
/// instances.
pub unsafe fn register_py_class_attrs(type_index: i32, total_size: i32) -> Result<()> {
    let info = type_info(type_index)?;
    let key = type_key(info).to_string();
    let size = usize::try_from(total_size)
        .ok()
        .filter(|&s| s >= std::mem::size_of::<TVMFFIObject>())
        .ok_or_else(|| {
            Error::value_error(format!(
                "ffi._PyClassRegisterTypeAttrColumns: total_size {total_size} of `{key}` is smaller than the object header"
            ))
        })?;
    // SAFETY: a live Function value; the caller vouched for the type (see `# Safety`).
    unsafe {
        type_table::register_attr(
            type_index,
            "__ffi_init__",
            Any::from(make_init(type_index)?).raw(),
        )
    }?;
    let new_name = format!("{key}.__ffi_new__");
    let new_fn = Function::from_packed(move |args| {
        if !args.is_empty() {
            return Err(Error::type_error(format!(
                "{new_name}: expected 0 arguments, got {}",
                args.len()
            )));
        }
        Ok(Any::from(alloc_py_object(type_index, size)?))
    });
    // SAFETY: as above.
    unsafe { type_table::register_attr(type_index, "__ffi_new__", Any::from(new_fn).raw()) }?;
    let copy_name = format!("{key}.__ffi_shallow_copy__");
    let copy_fn = Function::from_packed(move |args| {
        let src = match args {
            [v] => v.as_object(),
            _ => None,
        }
        .filter(|o| type_table::is_instance_of(o.type_index(), type_index))
        .ok_or_else(|| {
            Error::type_error(format!(
                "{copy_name}: expected one `{}` object",
                type_table::type_key_of(type_index)
            ))
        })?;
        let dst = alloc_py_object(type_index, size)?;
        for f in fields(type_info(type_index)?) {
            let off = f.info().offset as isize;
            let n = f.info().size.max(0) as usize;
            // SAFETY: both objects have this type's layout; the destination cell is zero.
            unsafe {
                let from = (src.as_raw() as *const u8).offset(off);
                let to = (dst.as_raw() as *mut u8).offset(off);
                match storage(&f) {
                    Storage::Any => {
                        std::ptr::write(to as *mut Any, (*(from as *const Any)).clone())
                    }
                    Storage::Object => std::ptr::write(
                        to as *mut Option<ObjectRef<Object>>,
                        (*(from as *const Option<ObjectRef<Object>>)).clone(),
                    ),
                    Storage::Pod => std::ptr::copy_nonoverlapping(from, to, n),
                }
            }
        }
        Ok(Any::from(dst))
    });
    // SAFETY: as above.
    unsafe {
        type_table::register_attr(type_index, "__ffi_shallow_copy__", Any::from(copy_fn).raw())
    }
}

/// `ffi.MakeFieldSetter(field_type_index, converter, f_convert)`: a setter Function called with
/// (field address, value) that converts through Python's converter, then stores the result.
pub fn make_field_setter(
    field_type_index: i32,
    converter: *mut c_void,
    f_convert: FConvert,
) -> Result<Function> {
    // Reject unsupported kinds now rather than on the first write.
    super::accessor::getter_for_static_type(field_type_index)?;
    let converter = converter as usize;
    Ok(Function::from_packed(move |args| {
        let [addr, value] = args else {
            return Err(Error::type_error(format!(
                "field setter: expected 2 arguments (field address, value), got {}",
                args.len()
            )));
        };
        let addr = addr
            .as_opaque_ptr()
            .filter(|p| !p.is_null())
            .ok_or_else(|| {
                Error::type_error(format!(
                    "field setter: argument #0 must be the field address (void*), got {}",
                    addr.type_key()
                ))
            })?;
        let mut converted = Any::none();
        // SAFETY: Python's converter callback, with its own converter object (borrowed) and a
        // live value; on success it writes an owned value.
        let rc = unsafe {
            f_convert(
                converter as *mut c_void,
                value.raw(),
                converted.as_out_ptr(),
            )
        };
        if rc != 0 {
            return Err(fetch_raised("field converter"));
        }
        // SAFETY: the address of a field of this kind, given by the caller (Python's setter).
        unsafe { write_field_value(addr, field_type_index, converted) }?;
        Ok(Any::none())
    }))
}
