//! The reflection of the structural-algorithm types: `ffi.VisitInterrupt` (77),
//! `ffi.StructuralVisitor` (134), `ffi.VisitErrorContext` (135), `ffi.StructuralMutator` (136)
//! and `ffi.StructuralKey` (137), with the layouts of the official headers.
//!
//! Rationale: the structural algorithms themselves (hash, equality, visit, mutate) live above
//! this crate; a StructuralKey is built through the global `ffi.StructuralHash` and compared
//! through `ffi.StructuralEqual` when the registry provides them, and reports a clear error
//! otherwise. Visitors and mutators are created only by those algorithms, so their types carry
//! metadata but no creator, exactly as in the official table.

use std::ffi::c_void;
use std::mem::offset_of;

use crate::abi::*;
use crate::any::{Any, AnyView};
use crate::error::{Error, Result};
use crate::list::List;
use crate::object::{new_object, Object, ObjectRef, ObjectType};
use crate::reflection::{creator, global_function, Accessor, DefaultObject, FieldDef, TypeDef};
use crate::type_table::TypeSink;

use super::{
    STRUCTURAL_KEY_INDEX, STRUCTURAL_MUTATOR_INDEX, STRUCTURAL_VISITOR_INDEX,
    VISIT_ERROR_CONTEXT_INDEX,
};

/// Payload of `ffi.VisitInterrupt`: the value a visit stopped with.
#[repr(C)]
pub struct VisitInterruptObj {
    pub header: TVMFFIObject,
    pub value: Any,
}

// SAFETY: repr(C), header first; a final static type.
unsafe impl ObjectType for VisitInterruptObj {
    const TYPE_KEY: &'static str = "ffi.VisitInterrupt";
    fn type_index() -> i32 {
        kTVMFFIVisitInterrupt
    }
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFIVisitInterrupt
    }
}

impl DefaultObject for VisitInterruptObj {
    fn default_object() -> ObjectRef<Self> {
        VisitInterruptObj::new(Any::none())
    }
}

impl VisitInterruptObj {
    /// A new interrupt carrying `value`.
    pub fn new(value: Any) -> ObjectRef<Self> {
        new_object(VisitInterruptObj {
            header: TVMFFIObject::new::<Self>(),
            value,
        })
    }
}

/// Payload of `ffi.VisitErrorContext`.
#[repr(C)]
pub struct VisitErrorContextObj {
    pub header: TVMFFIObject,
    pub reverse_visit_pattern: List,
    pub prev_error_context: Option<ObjectRef<Object>>,
}

// SAFETY: repr(C), header first; a final type with a fixed index.
unsafe impl ObjectType for VisitErrorContextObj {
    const TYPE_KEY: &'static str = "ffi.VisitErrorContext";
    fn type_index() -> i32 {
        VISIT_ERROR_CONTEXT_INDEX
    }
    fn is_instance(type_index: i32) -> bool {
        type_index == VISIT_ERROR_CONTEXT_INDEX
    }
}

impl DefaultObject for VisitErrorContextObj {
    fn default_object() -> ObjectRef<Self> {
        new_object(VisitErrorContextObj {
            header: TVMFFIObject::new::<Self>(),
            reverse_visit_pattern: List::new(),
            prev_error_context: None,
        })
    }
}

/// Payload of `ffi.StructuralKey`: a key compared structurally, with its hash cached.
#[repr(C)]
pub struct StructuralKeyObj {
    pub header: TVMFFIObject,
    pub key: Any,
    pub hash_i64: i64,
}

// SAFETY: repr(C), header first; a final type with a fixed index.
unsafe impl ObjectType for StructuralKeyObj {
    const TYPE_KEY: &'static str = "ffi.StructuralKey";
    fn type_index() -> i32 {
        STRUCTURAL_KEY_INDEX
    }
    fn is_instance(type_index: i32) -> bool {
        type_index == STRUCTURAL_KEY_INDEX
    }
}

impl DefaultObject for StructuralKeyObj {
    fn default_object() -> ObjectRef<Self> {
        new_object(StructuralKeyObj {
            header: TVMFFIObject::new::<Self>(),
            key: Any::none(),
            hash_i64: 0,
        })
    }
}

/// Calls a structural global function of the registry, or reports that it is missing.
fn call_structural(name: &str, args: &[AnyView<'_>]) -> Result<Any> {
    let f = global_function(name).ok_or_else(|| {
        Error::runtime_error(format!(
            "ffi.StructuralKey needs the global function `{name}`, which is not registered"
        ))
    })?;
    f.call(args)
}

impl StructuralKeyObj {
    /// A key holding `key` and its structural hash (`ffi.StructuralHash(key, false, false)`).
    pub fn new(key: Any) -> Result<ObjectRef<Self>> {
        let no = AnyView::from(false);
        let hash = call_structural("ffi.StructuralHash", &[key.as_view(), no, no])?.get::<i64>()?;
        Ok(new_object(StructuralKeyObj {
            header: TVMFFIObject::new::<Self>(),
            key,
            hash_i64: hash,
        }))
    }
}

/// Same object, or equal hashes and structurally equal keys.
pub fn structural_key_equal(lhs: &StructuralKeyObj, rhs: &StructuralKeyObj) -> Result<bool> {
    if std::ptr::eq(lhs, rhs) {
        return Ok(true);
    }
    if lhs.hash_i64 != rhs.hash_i64 {
        return Ok(false);
    }
    let no = AnyView::from(false);
    call_structural(
        "ffi.StructuralEqual",
        &[lhs.key.as_view(), rhs.key.as_view(), no, no],
    )?
    .get::<bool>()
}

fn error_any(e: Error) -> TVMFFIAny {
    Any::from(e.as_object().clone()).into_raw()
}

/// The StructuralKey of a hook argument.
///
/// # Safety
/// `v` must point at a live value.
unsafe fn key_arg<'a>(v: *const TVMFFIAny) -> Result<&'a StructuralKeyObj> {
    // SAFETY: per the caller.
    let view = unsafe { AnyView::from_raw(*v) };
    let is_key = |p: &*mut TVMFFIObject| {
        // SAFETY: an object view points at a live object.
        unsafe { (**p).type_index == STRUCTURAL_KEY_INDEX }
    };
    match view.as_object_ptr().filter(is_key) {
        // SAFETY: the type check makes the cast valid; the caller keeps the object alive.
        Some(p) => Ok(unsafe { &*(p as *const StructuralKeyObj) }),
        _ => Err(Error::type_error(format!(
            "ffi.StructuralKey hook: expected ffi.StructuralKey, got {}",
            view.type_key()
        ))),
    }
}

/// Native `__any_hash__` of StructuralKey: the cached hash.
unsafe extern "C" fn key_any_hash(v: *const TVMFFIAny) -> TVMFFIAny {
    // SAFETY: the map passes a live key.
    match unsafe { key_arg(v) } {
        Ok(k) => Any::from(k.hash_i64).into_raw(),
        Err(e) => error_any(e),
    }
}

/// Native `__any_equal__` of StructuralKey.
unsafe extern "C" fn key_any_equal(lhs: *const TVMFFIAny, rhs: *const TVMFFIAny) -> TVMFFIAny {
    // SAFETY: the map passes two live keys.
    let r = unsafe { key_arg(lhs) }
        .and_then(|l| Ok((l, unsafe { key_arg(rhs) }?)))
        .and_then(|(l, r)| structural_key_equal(l, r));
    match r {
        Ok(b) => Any::from(b).into_raw(),
        Err(e) => error_any(e),
    }
}

fn native_any(p: *mut c_void) -> Any {
    Any::from(p)
}

pub(super) fn register(sink: &dyn TypeSink) -> Result<()> {
    // SAFETY: the library's own type; the registrations below describe its Rust layout.
    unsafe { TypeDef::new(sink, kTVMFFIVisitInterrupt, VisitInterruptObj::TYPE_KEY) }
        .metadata(
            std::mem::size_of::<VisitInterruptObj>(),
            kTVMFFISEqHashKindUnsupported,
            Some(creator::<VisitInterruptObj>),
        )?
        .field(
            FieldDef::new(
                "value",
                offset_of!(VisitInterruptObj, value),
                Accessor::ANY,
                r#"{"type":"Any"}"#,
            )
            .default_value(Any::none()),
        )?
        .shallow_copy(|s: &ObjectRef<VisitInterruptObj>| VisitInterruptObj::new(s.value.clone()))?
        .new_from_creator(creator::<VisitInterruptObj>)?
        .type_final(true)?;

    // Visitor and mutator objects: header, a vtable pointer and 8 bytes of state (40 bytes).
    for (index, key) in [
        (STRUCTURAL_VISITOR_INDEX, "ffi.StructuralVisitor"),
        (STRUCTURAL_MUTATOR_INDEX, "ffi.StructuralMutator"),
    ] {
        // SAFETY: the library's own type; the registrations below describe its Rust layout.
        unsafe { TypeDef::new(sink, index, key) }
            .metadata(40, kTVMFFISEqHashKindUnsupported, None)?
            .type_final(false)?;
    }

    // SAFETY: the library's own type; the registrations below describe its Rust layout.
    unsafe {
        TypeDef::new(
            sink,
            VISIT_ERROR_CONTEXT_INDEX,
            VisitErrorContextObj::TYPE_KEY,
        )
    }
    .metadata(
        std::mem::size_of::<VisitErrorContextObj>(),
        kTVMFFISEqHashKindUnsupported,
        Some(creator::<VisitErrorContextObj>),
    )?
    .field(FieldDef::new(
        "reverse_visit_pattern",
        offset_of!(VisitErrorContextObj, reverse_visit_pattern),
        Accessor::object::<{ kTVMFFIList }, false>(kTVMFFIList),
        r#"{"type":"ffi.List","args":[{"type":"ffi.Object"}]}"#,
    ))?
    .field(FieldDef::new(
        "prev_error_context",
        offset_of!(VisitErrorContextObj, prev_error_context),
        Accessor::object::<{ kTVMFFIObject }, true>(kTVMFFIAny),
        r#"{"type":"Optional","args":[{"type":"ffi.Object"}]}"#,
    ))?
    .shallow_copy(|s: &ObjectRef<VisitErrorContextObj>| {
        new_object(VisitErrorContextObj {
            header: TVMFFIObject::new::<VisitErrorContextObj>(),
            reverse_visit_pattern: s.reverse_visit_pattern.clone(),
            prev_error_context: s.prev_error_context.clone(),
        })
    })?
    .new_from_creator(creator::<VisitErrorContextObj>)?
    .type_final(true)?;

    let native_hash: unsafe extern "C" fn(*const TVMFFIAny) -> TVMFFIAny = key_any_hash;
    let native_equal: unsafe extern "C" fn(*const TVMFFIAny, *const TVMFFIAny) -> TVMFFIAny =
        key_any_equal;
    // SAFETY: the library's own type; the registrations below describe its Rust layout.
    unsafe { TypeDef::new(sink, STRUCTURAL_KEY_INDEX, StructuralKeyObj::TYPE_KEY) }
        .metadata(
            std::mem::size_of::<StructuralKeyObj>(),
            kTVMFFISEqHashKindUnsupported,
            Some(creator::<StructuralKeyObj>),
        )?
        .init(
            "Constructor that takes any key and computes its structural hash",
            |key: Any| -> Result<ObjectRef<Object>> { Ok(StructuralKeyObj::new(key)?.upcast()) },
        )?
        .field(FieldDef::new(
            "key",
            offset_of!(StructuralKeyObj, key),
            Accessor::ANY,
            r#"{"type":"Any"}"#,
        ))?
        .field(FieldDef::new(
            "hash_i64",
            offset_of!(StructuralKeyObj, hash_i64),
            Accessor::I64,
            r#"{"type":"int"}"#,
        ))?
        .attr("__any_hash__", &native_any(native_hash as *mut c_void))?
        .attr("__any_equal__", &native_any(native_equal as *mut c_void))?
        .shallow_copy(|s: &ObjectRef<StructuralKeyObj>| {
            new_object(StructuralKeyObj {
                header: TVMFFIObject::new::<StructuralKeyObj>(),
                key: s.key.clone(),
                hash_i64: s.hash_i64,
            })
        })?
        .new_from_creator(creator::<StructuralKeyObj>)?
        .type_final(true)?;
    Ok(())
}
