//! `TypeDef`: registers a Rust `#[repr(C)]` object type's metadata, fields, methods and type
//! attributes in one table, the way the official `ObjectDef<T>` does for C++ classes.
//!
//! Rationale: registration goes through a [`TypeSink`] so the library's own types can be
//! registered while the type table itself is being built (before any foreign code allocates a
//! dynamic index), and later types through the global table with the same code.

use std::ffi::{c_int, c_void};
use std::panic::catch_unwind;
use std::ptr;

use super::accessor::Accessor;
use super::json_quote;
use crate::abi::*;
use crate::any::Any;
use crate::error::{set_raised, Error, Result};
use crate::function::{Function, TypedFn};
use crate::object::{Object, ObjectRef, ObjectType};
use crate::type_table::TypeSink;

fn byte_array(s: &str) -> TVMFFIByteArray {
    TVMFFIByteArray {
        data: if s.is_empty() {
            ptr::null()
        } else {
            s.as_ptr() as *const _
        },
        size: s.len(),
    }
}

/// `{"type_schema":"<schema as a JSON string>"}`, the metadata of fields and methods.
pub fn schema_metadata(schema: &str) -> String {
    format!("{{\"type_schema\":{}}}", json_quote(schema))
}

/// One field of a [`TypeDef`].
pub struct FieldDef {
    name: &'static str,
    offset: usize,
    access: Accessor,
    flags: i64,
    doc: &'static str,
    schema: &'static str,
    default: Option<Any>,
}

impl FieldDef {
    /// A read-only field at `offset` (from the object header) with its type schema JSON, e.g.
    /// `{"type":"int"}`.
    pub fn new(name: &'static str, offset: usize, access: Accessor, schema: &'static str) -> Self {
        FieldDef {
            name,
            offset,
            access,
            flags: 0,
            doc: "",
            schema,
            default: None,
        }
    }

    /// Adds field flag bits (`kTVMFFIFieldFlagBitMask*`).
    pub fn flags(mut self, flags: i64) -> Self {
        self.flags |= flags;
        self
    }

    /// Sets the docstring.
    pub fn doc(mut self, doc: &'static str) -> Self {
        self.doc = doc;
        self
    }

    /// Sets a default value (and the HasDefault flag).
    pub fn default_value(mut self, value: Any) -> Self {
        self.flags |= kTVMFFIFieldFlagBitMaskHasDefault;
        self.default = Some(value);
        self
    }
}

/// Objects a reflected creator can make with every field at its default.
pub trait DefaultObject: ObjectType {
    /// A fresh object.
    fn default_object() -> ObjectRef<Self>;
}

/// The `metadata.creator` of a [`DefaultObject`] type.
///
/// # Safety
/// `out` must be writable (checked non-null).
pub unsafe extern "C" fn creator<T: DefaultObject>(out: *mut *mut c_void) -> c_int {
    if out.is_null() {
        set_raised(Error::value_error(format!(
            "{}: creator: `out` must not be NULL",
            T::TYPE_KEY
        )));
        return -1;
    }
    match catch_unwind(T::default_object) {
        Ok(obj) => {
            // SAFETY: checked non-null; the caller adopts the new reference.
            unsafe { *out = obj.into_raw() as *mut c_void };
            0
        }
        Err(p) => {
            set_raised(Error::from_panic(p));
            -1
        }
    }
}

/// A `__ffi_new__` function over a creator: no arguments, returns a fresh object.
pub fn new_function(
    type_key: &str,
    creator: unsafe extern "C" fn(*mut *mut c_void) -> c_int,
) -> Function {
    let name = format!("{type_key}.__ffi_new__");
    Function::from_packed(move |args| {
        if !args.is_empty() {
            return Err(Error::type_error(format!(
                "{name}: expected 0 arguments, got {}",
                args.len()
            )));
        }
        let mut out: *mut c_void = ptr::null_mut();
        // SAFETY: a creator writes one new reference into `out` on success.
        if unsafe { creator(&mut out) } != 0 {
            return Err(crate::error::fetch_raised(&name));
        }
        let obj = ptr::NonNull::new(out as *mut Object)
            .ok_or_else(|| Error::internal(format!("{name}: the creator returned NULL")))?;
        // SAFETY: the creator handed us a new reference.
        Ok(Any::from(unsafe { ObjectRef::from_raw_owned(obj) }))
    })
}

/// Registration of one type: `TypeDef::new(sink, index, key).metadata(..)?.field(..)?`.
pub struct TypeDef<'a> {
    sink: &'a dyn TypeSink,
    index: i32,
    key: &'a str,
}

impl<'a> TypeDef<'a> {
    /// Registration into `sink` of the type `index` whose key is `key`.
    ///
    /// # Safety
    /// Everything registered through the result must be true of the type: `metadata`'s size and
    /// creator, each field's offset and accessor (getters and setters read and write the
    /// object there), attribute values the library calls (see `TypeSink`).
    pub unsafe fn new(sink: &'a dyn TypeSink, index: i32, key: &'a str) -> Self {
        TypeDef { sink, index, key }
    }

    /// The type index.
    pub fn index(&self) -> i32 {
        self.index
    }

    /// Registers `total_size`, the structural kind and the creator.
    pub fn metadata(
        &self,
        total_size: usize,
        structural_kind: i32,
        creator: TVMFFIObjectCreator,
    ) -> Result<&Self> {
        let meta = TVMFFITypeMetadata {
            doc: byte_array(""),
            creator,
            total_size: i32::try_from(total_size)
                .map_err(|_| Error::value_error("TypeDef: total_size does not fit in int32"))?,
            structural_eq_hash_kind: structural_kind,
        };
        // SAFETY: the creator of this TypeDef vouched for the description (`TypeDef::new`).
        unsafe { self.sink.register_metadata(self.index, &meta) }?;
        Ok(self)
    }

    /// Registers a field.
    pub fn field(&self, f: FieldDef) -> Result<&Self> {
        let metadata = schema_metadata(f.schema);
        let default = f.default.unwrap_or_default();
        let info = TVMFFIFieldInfo {
            name: byte_array(f.name),
            doc: byte_array(f.doc),
            metadata: byte_array(&metadata),
            flags: f.flags,
            size: f.access.size,
            alignment: f.access.alignment,
            offset: f.offset as i64,
            getter: f.access.getter,
            setter: f
                .access
                .setter
                .map_or(ptr::null_mut(), |s| s as *mut c_void),
            default_value_or_factory: *default.raw(),
            field_static_type_index: f.access.static_type_index,
        };
        // The table keeps its own copies of the strings and of the default.
        // SAFETY: as in `metadata`.
        unsafe { self.sink.register_field(self.index, &info) }?;
        Ok(self)
    }

    /// Registers a method with an explicit type schema.
    pub fn method(
        &self,
        name: &str,
        doc: &str,
        is_static: bool,
        f: &Function,
        schema: &str,
    ) -> Result<&Self> {
        let metadata = schema_metadata(schema);
        let info = TVMFFIMethodInfo {
            name: byte_array(name),
            doc: byte_array(doc),
            metadata: byte_array(&metadata),
            flags: if is_static {
                kTVMFFIFieldFlagBitMaskIsStaticMethod
            } else {
                0
            },
            method: TVMFFIAny {
                type_index: kTVMFFIFunction,
                small_str_len: 0,
                value: TVMFFIAnyValue { v_obj: f.as_raw() },
            },
        };
        // SAFETY: `f` is a live function; the description as in `metadata`.
        unsafe { self.sink.register_method(self.index, &info) }?;
        Ok(self)
    }

    /// Registers a typed Rust closure as a method (instance methods take `self` first); the
    /// schema comes from the signature and errors name `<type key>.<name>`.
    pub fn typed_method<Args, F: TypedFn<Args>>(
        &self,
        name: &str,
        is_static: bool,
        f: F,
    ) -> Result<&Self> {
        let func = Function::from_typed(&format!("{}.{name}", self.key), f);
        self.method(name, "", is_static, &func, &F::type_schema())
    }

    /// Registers a type attribute value.
    pub fn attr(&self, name: &str, value: &Any) -> Result<&Self> {
        // SAFETY: `value` is a valid value; as in `metadata`.
        unsafe { self.sink.register_attr(self.index, name, value.raw()) }?;
        Ok(self)
    }

    /// Publishes `__ffi_type_final__`.
    pub fn type_final(&self, is_final: bool) -> Result<&Self> {
        self.attr("__ffi_type_final__", &Any::from(is_final))
    }

    /// Registers `__ffi_new__` over a creator.
    pub fn new_from_creator(
        &self,
        creator: unsafe extern "C" fn(*mut *mut c_void) -> c_int,
    ) -> Result<&Self> {
        self.attr("__ffi_new__", &Any::from(new_function(self.key, creator)))
    }

    /// Registers `__ffi_shallow_copy__` (`f(self) -> copy`).
    pub fn shallow_copy<T: ObjectType>(
        &self,
        copy: fn(&ObjectRef<T>) -> ObjectRef<T>,
    ) -> Result<&Self> {
        let name = format!("{}.__ffi_shallow_copy__", self.key);
        let f = Function::from_typed(&name, move |src: ObjectRef<T>| copy(&src));
        self.attr("__ffi_shallow_copy__", &Any::from(f))
    }

    /// Registers an explicit constructor: the static method `__ffi_init__`, mirrored into the
    /// `__ffi_init__` attribute column.
    pub fn init<Args, F: TypedFn<Args>>(&self, doc: &str, f: F) -> Result<&Self> {
        let func = Function::from_typed(&format!("{}.__ffi_init__", self.key), f);
        self.method("__ffi_init__", doc, true, &func, &F::type_schema())?;
        self.attr("__ffi_init__", &Any::from(func))
    }
}
