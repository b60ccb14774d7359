//! `ffi.EnumState` (128), `ffi.Enum` (129), `ffi.IntEnum` (130) and `ffi.StrEnum` (131): the
//! layouts header code of enum classes reads (C++ `tvm/ffi/enum.h`) and their reflection.
//!
//! Rationale: enum singletons and their per-class state are created by whoever defines the enum
//! (the testing library, Python), through inline C++ or reflection; this library only has to
//! give the types their official indices, layouts, fields and creators.

use std::mem::offset_of;

use crate::abi::*;
use crate::any::Any;
use crate::error::{Error, Result};
use crate::list::List;
use crate::map::Dict;
use crate::object::{new_object, ObjectRef, ObjectType};
use crate::reflection::{creator, Accessor, DefaultObject, FieldDef, TypeDef};
use crate::type_table::TypeSink;

use super::convert::convert_function;
use super::{ENUM_INDEX, ENUM_STATE_INDEX, INT_ENUM_INDEX, STR_ENUM_INDEX};

/// Payload of `ffi.EnumState`: the singletons of one enum class and their indices.
#[repr(C)]
pub struct EnumStateObj {
    pub header: TVMFFIObject,
    /// Enum singletons in registration order.
    pub entries: List,
    /// Canonical integer and string indices to singletons.
    pub indexes: Dict,
    /// Extensible-attribute columns keyed by singleton.
    pub attrs: Dict,
}

// SAFETY: repr(C), header first; a final type with a fixed index.
unsafe impl ObjectType for EnumStateObj {
    const TYPE_KEY: &'static str = "ffi.EnumState";
    fn type_index() -> i32 {
        ENUM_STATE_INDEX
    }
    fn is_instance(type_index: i32) -> bool {
        type_index == ENUM_STATE_INDEX
    }
}

impl DefaultObject for EnumStateObj {
    fn default_object() -> ObjectRef<Self> {
        new_object(EnumStateObj {
            header: TVMFFIObject::new::<Self>(),
            entries: List::new(),
            indexes: Dict::new(),
            attrs: Dict::new(),
        })
    }
}

/// Payload of `ffi.Enum` and of its subclasses (`ffi.IntEnum`, `ffi.StrEnum`, user enums).
#[repr(C)]
pub struct EnumObj {
    pub header: TVMFFIObject,
    /// Canonical integer index.
    pub int_index: i64,
    /// Canonical string index (a String cell: SmallStr or `ffi.String`).
    pub str_index: Any,
}

// SAFETY: repr(C), header first; subclasses share this layout and derive from index 129.
unsafe impl ObjectType for EnumObj {
    const TYPE_KEY: &'static str = "ffi.Enum";
    fn type_index() -> i32 {
        ENUM_INDEX
    }
}

fn new_enum(type_index: i32) -> ObjectRef<EnumObj> {
    new_object(EnumObj {
        header: TVMFFIObject::with_index::<EnumObj>(type_index),
        int_index: 0,
        str_index: Any::from(""),
    })
}

/// Creator of `ffi.Enum` and its two built-in subclasses (same layout, own index).
unsafe extern "C" fn enum_creator<const TI: i32>(out: *mut *mut std::ffi::c_void) -> i32 {
    if out.is_null() {
        crate::error::set_raised(Error::value_error(
            "ffi.Enum creator: `out` must not be NULL",
        ));
        return -1;
    }
    // SAFETY: checked non-null; the caller adopts the new reference.
    unsafe { *out = new_enum(TI).into_raw() as *mut std::ffi::c_void };
    0
}

fn copy_enum(src: &ObjectRef<EnumObj>) -> ObjectRef<EnumObj> {
    new_object(EnumObj {
        header: TVMFFIObject::with_index::<EnumObj>(src.type_index()),
        int_index: src.int_index,
        str_index: src.str_index.clone(),
    })
}

fn copy_state(src: &ObjectRef<EnumStateObj>) -> ObjectRef<EnumStateObj> {
    new_object(EnumStateObj {
        header: TVMFFIObject::new::<EnumStateObj>(),
        entries: src.entries.clone(),
        indexes: src.indexes.clone(),
        attrs: src.attrs.clone(),
    })
}

const SCHEMA_INT: &str = r#"{"type":"int"}"#;
const SCHEMA_STR: &str = r#"{"type":"ffi.String"}"#;

pub(super) fn register(sink: &dyn TypeSink) -> Result<()> {
    let init_off = kTVMFFIFieldFlagBitMaskInitOff;
    let seq_ignore = kTVMFFIFieldFlagBitMaskSEqHashIgnore;

    // SAFETY: the library's own type; the registrations below describe its Rust layout.
    let state = unsafe { TypeDef::new(sink, ENUM_STATE_INDEX, "ffi.EnumState") };
    state
        .metadata(
            std::mem::size_of::<EnumStateObj>(),
            kTVMFFISEqHashKindUnsupported,
            Some(creator::<EnumStateObj>),
        )?
        .init("", || EnumStateObj::default_object().upcast())?
        .field(
            FieldDef::new(
                "entries",
                offset_of!(EnumStateObj, entries),
                Accessor::object::<{ kTVMFFIList }, false>(kTVMFFIList),
                r#"{"type":"ffi.List","args":[{"type":"ffi.Object"}]}"#,
            )
            .doc("Enum singletons in registration order.")
            .flags(init_off),
        )?
        .field(
            FieldDef::new(
                "indexes",
                offset_of!(EnumStateObj, indexes),
                Accessor::object::<{ kTVMFFIDict }, false>(kTVMFFIObject),
                r#"{"type":"ffi.Dict","args":[{"type":"Any"},{"type":"ffi.Object"}]}"#,
            )
            .doc("Canonical integer and string indices to enum singletons.")
            .flags(init_off),
        )?
        .field(
            FieldDef::new(
                "attrs",
                offset_of!(EnumStateObj, attrs),
                Accessor::object::<{ kTVMFFIDict }, false>(kTVMFFIObject),
                r#"{"type":"ffi.Dict","args":[{"type":"ffi.String"},{"type":"ffi.Dict","args":[{"type":"ffi.Object"},{"type":"Any"}]}]}"#,
            )
            .doc("Extensible-attribute columns keyed by enum singleton.")
            .flags(init_off),
        )?
        .shallow_copy(copy_state)?
        .new_from_creator(creator::<EnumStateObj>)?
        .type_final(true)?;

    // SAFETY: the library's own type; the registrations below describe its Rust layout.
    let base = unsafe { TypeDef::new(sink, ENUM_INDEX, "ffi.Enum") };
    base.metadata(
        std::mem::size_of::<EnumObj>(),
        kTVMFFISEqHashKindUniqueInstance,
        Some(enum_creator::<ENUM_INDEX>),
    )?
    .field(
        FieldDef::new(
            "_int_index",
            offset_of!(EnumObj, int_index),
            Accessor::I64,
            SCHEMA_INT,
        )
        .doc("Canonical integer index.")
        .flags(seq_ignore),
    )?
    .field(
        FieldDef::new(
            "_str_index",
            offset_of!(EnumObj, str_index),
            Accessor::STR,
            SCHEMA_STR,
        )
        .doc("Canonical string index."),
    )?
    .shallow_copy(copy_enum)?
    .new_from_creator(enum_creator::<ENUM_INDEX>)?
    .type_final(false)?;

    // SAFETY: the library's own type; the registrations below describe its Rust layout.
    let int_enum = unsafe { TypeDef::new(sink, INT_ENUM_INDEX, "ffi.IntEnum") };
    int_enum
        .metadata(
            std::mem::size_of::<EnumObj>(),
            kTVMFFISEqHashKindUniqueInstance,
            Some(enum_creator::<INT_ENUM_INDEX>),
        )?
        .field(
            FieldDef::new(
                "value",
                offset_of!(EnumObj, int_index),
                Accessor::I64,
                SCHEMA_INT,
            )
            .doc("Canonical integer index.")
            .flags(init_off | seq_ignore),
        )?
        .shallow_copy(copy_enum)?
        .new_from_creator(enum_creator::<INT_ENUM_INDEX>)?
        .attr(
            "__ffi_convert__",
            &Any::from(convert_function(INT_ENUM_INDEX, "ffi.IntEnum")),
        )?
        .type_final(false)?;

    // SAFETY: the library's own type; the registrations below describe its Rust layout.
    let str_enum = unsafe { TypeDef::new(sink, STR_ENUM_INDEX, "ffi.StrEnum") };
    str_enum
        .metadata(
            std::mem::size_of::<EnumObj>(),
            kTVMFFISEqHashKindUniqueInstance,
            Some(enum_creator::<STR_ENUM_INDEX>),
        )?
        .field(
            FieldDef::new(
                "value",
                offset_of!(EnumObj, str_index),
                Accessor::STR,
                SCHEMA_STR,
            )
            .doc("Canonical string index.")
            .flags(init_off | seq_ignore),
        )?
        .shallow_copy(copy_enum)?
        .new_from_creator(enum_creator::<STR_ENUM_INDEX>)?
        .attr(
            "__ffi_convert__",
            &Any::from(convert_function(STR_ENUM_INDEX, "ffi.StrEnum")),
        )?
        .type_final(false)?;
    Ok(())
}
