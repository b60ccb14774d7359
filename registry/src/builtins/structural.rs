//! The structural built-ins (spec §8, Structural): `ffi.StructuralEqual`, `ffi.StructuralHash`,
//! `ffi.GetFirstStructuralMismatch`, `ffi.StructuralKey`, `ffi.StructuralKeyEqual`, over the
//! algorithms of `anyffi::structural`.

use anyffi::builtin_types::structural::{structural_key_equal, StructuralKeyObj};
use anyffi::structural::{equal, hash};
use anyffi::{Any, Array, Error, ObjectRef, Result};

use crate::global::Registrar;

pub(super) fn register(r: &mut Registrar<'_>) {
    r.typed(
        "ffi.StructuralEqual",
        "StructuralEqual(lhs, rhs, map_free_vars, skip_tensor_content): structural equality \
         (containers by content, reflected objects by their structural kind and fields).",
        |lhs: Any, rhs: Any, map_free_vars: bool, skip_tensor_content: bool| -> Result<bool> {
            equal::structural_equal(&lhs, &rhs, map_free_vars, skip_tensor_content)
        },
    );
    r.typed(
        "ffi.StructuralHash",
        "StructuralHash(value, map_free_vars, skip_tensor_content): the structural hash \
         (uint64 bits as int), consistent with StructuralEqual.",
        |value: Any, map_free_vars: bool, skip_tensor_content: bool| -> Result<i64> {
            hash::structural_hash(&value, map_free_vars, skip_tensor_content).map(|h| h as i64)
        },
    );
    r.typed(
        "ffi.GetFirstStructuralMismatch",
        "GetFirstStructuralMismatch(lhs, rhs, map_free_vars, skip_tensor_content): None when \
         structurally equal, else the (lhs, rhs) access paths of the first mismatch.",
        |lhs: Any,
         rhs: Any,
         map_free_vars: bool,
         skip_tensor_content: bool|
         -> Result<Option<MismatchPair>> {
            equal::first_mismatch_paths(&lhs, &rhs, map_free_vars, skip_tensor_content)
                .map(|p| p.map(MismatchPair))
        },
    );
    r.typed(
        "ffi.StructuralKey",
        "StructuralKey(key): a key compared by structural equality, its structural hash cached.",
        |key: Any| -> Result<ObjectRef<StructuralKeyObj>> { StructuralKeyObj::new(key) },
    );
    r.typed(
        "ffi.StructuralKeyEqual",
        "StructuralKeyEqual(lhs, rhs): the same value, or two StructuralKeys with equal hashes \
         and structurally equal keys.",
        |lhs: Any, rhs: Any| -> Result<bool> {
            if anyffi::hash::same_value(lhs.raw(), rhs.raw()) {
                return Ok(true);
            }
            let key = |v: &Any, side: &str| {
                v.as_view()
                    .as_object_of::<StructuralKeyObj>()
                    .ok_or_else(|| Error::internal(format!("Check not null: {side}_obj ")))
            };
            structural_key_equal(&*key(&lhs, "lhs")?, &*key(&rhs, "rhs")?)
        },
    );
}

/// `Tuple<AccessPath, AccessPath>` (an Array of the two paths).
struct MismatchPair(Array);

impl anyffi::IntoAny for MismatchPair {
    fn into_any(self) -> Any {
        Any::from(self.0)
    }
    fn schema() -> String {
        r#"{"type":"Tuple","args":[{"type":"ffi.reflection.AccessPath"},{"type":"ffi.reflection.AccessPath"}]}"#
            .into()
    }
}
