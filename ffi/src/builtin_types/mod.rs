//! The reflected types the library registers itself (spec §3.3): the dynamic types 128–137 in
//! the official order, and the reflection of the static types `ffi.VisitInterrupt` (77) and
//! `ffi.BigInt` (78). `ffi.Module` (73) is described by the registry, which owns its layout.
//!
//! Rationale: the official library allocates its ten dynamic types during its own static
//! initialisation, before any other library can load, so they always hold indices 128–137 and
//! foreign types start at 138. Registering them while the type table is built gives the same
//! guarantee here; their indices are therefore constants, checked as they are allocated.

pub mod access_path;
mod bigint;
mod convert;
pub mod enums;
pub mod structural;

use crate::abi::kTVMFFIObject;
use crate::error::{Error, Result};
use crate::type_table::TypeSink;

/// `ffi.EnumState`.
pub const ENUM_STATE_INDEX: i32 = 128;
/// `ffi.Enum`.
pub const ENUM_INDEX: i32 = 129;
/// `ffi.IntEnum`.
pub const INT_ENUM_INDEX: i32 = 130;
/// `ffi.StrEnum`.
pub const STR_ENUM_INDEX: i32 = 131;
/// `ffi.reflection.AccessStep`.
pub const ACCESS_STEP_INDEX: i32 = 132;
/// `ffi.reflection.AccessPath`.
pub const ACCESS_PATH_INDEX: i32 = 133;
/// `ffi.StructuralVisitor`.
pub const STRUCTURAL_VISITOR_INDEX: i32 = 134;
/// `ffi.VisitErrorContext`.
pub const VISIT_ERROR_CONTEXT_INDEX: i32 = 135;
/// `ffi.StructuralMutator`.
pub const STRUCTURAL_MUTATOR_INDEX: i32 = 136;
/// `ffi.StructuralKey`.
pub const STRUCTURAL_KEY_INDEX: i32 = 137;

/// (key, expected index, parent, whether subclasses may overflow the parent's slots), in
/// allocation order. Final C++ classes cannot have subclasses; the others overflow freely.
// Marker: the official type table order (spec §3.3, tests/reflection/test_reflection.c).
const DYNAMIC_TYPES: &[(&str, i32, i32, bool)] = &[
    ("ffi.EnumState", ENUM_STATE_INDEX, kTVMFFIObject, false),
    ("ffi.Enum", ENUM_INDEX, kTVMFFIObject, true),
    ("ffi.IntEnum", INT_ENUM_INDEX, ENUM_INDEX, true),
    ("ffi.StrEnum", STR_ENUM_INDEX, ENUM_INDEX, true),
    (
        "ffi.reflection.AccessStep",
        ACCESS_STEP_INDEX,
        kTVMFFIObject,
        false,
    ),
    (
        "ffi.reflection.AccessPath",
        ACCESS_PATH_INDEX,
        kTVMFFIObject,
        false,
    ),
    (
        "ffi.StructuralVisitor",
        STRUCTURAL_VISITOR_INDEX,
        kTVMFFIObject,
        true,
    ),
    (
        "ffi.VisitErrorContext",
        VISIT_ERROR_CONTEXT_INDEX,
        kTVMFFIObject,
        false,
    ),
    (
        "ffi.StructuralMutator",
        STRUCTURAL_MUTATOR_INDEX,
        kTVMFFIObject,
        true,
    ),
    (
        "ffi.StructuralKey",
        STRUCTURAL_KEY_INDEX,
        kTVMFFIObject,
        false,
    ),
];

/// Allocates the dynamic types, then registers the reflection of every built-in type.
pub(crate) fn register(sink: &dyn TypeSink) -> Result<()> {
    for &(key, want, parent, can_overflow) in DYNAMIC_TYPES {
        let depth = if parent == kTVMFFIObject { 1 } else { 2 };
        let got = sink.alloc_index(key, -1, depth, 0, can_overflow, parent)?;
        if got != want {
            return Err(Error::internal(format!(
                "built-in type `{key}` got index {got}, expected {want}"
            )));
        }
    }
    convert::register(sink)?;
    enums::register(sink)?;
    access_path::register(sink)?;
    structural::register(sink)?;
    bigint::register(sink)?;
    crate::structural::register_hooks(sink)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::any::Any;
    use crate::builtin_types::access_path::{extend, is_prefix_of, path_equal, AccessPathObj};
    use crate::builtin_types::access_path::{kind, AccessStepObj};
    use crate::type_table::{key_to_index, type_entry};

    #[test]
    fn dynamic_types_take_the_official_indices() {
        for &(key, index, parent, _) in DYNAMIC_TYPES {
            assert_eq!(key_to_index(key), Some(index), "{key}");
            let e = type_entry(index).unwrap();
            assert_eq!(
                e.ancestors().last().map(|p| unsafe { (**p).type_index }),
                Some(parent)
            );
            assert!(e.metadata().is_some(), "{key} has metadata");
        }
        let path = type_entry(ACCESS_PATH_INDEX).unwrap();
        assert_eq!(path.methods().len(), 11);
        assert_eq!(path.metadata().unwrap().total_size, 48);
    }

    #[test]
    fn access_paths_compare_by_steps() {
        let root = AccessPathObj::root();
        let a = extend(&root, AccessStepObj::new(kind::ATTR, Any::from("x")));
        let b = extend(&a, AccessStepObj::new(kind::ARRAY_ITEM, Any::from(1i64)));
        let b2 = extend(
            &extend(&root, AccessStepObj::new(kind::ATTR, Any::from("x"))),
            AccessStepObj::new(kind::ARRAY_ITEM, Any::from(1i64)),
        );
        assert!(path_equal(&b, &b2).unwrap());
        assert!(is_prefix_of(&a, &b2).unwrap());
        assert!(!is_prefix_of(&b, &a).unwrap());
        assert_eq!(b.to_steps().unwrap().len(), 2);
        assert_eq!(b.depth, 2);
    }
}
