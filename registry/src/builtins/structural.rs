//! The structural built-ins (spec §8, Structural): `ffi.StructuralEqual`, `ffi.StructuralHash`,
//! over the algorithms of `anyffi::structural`.

use anyffi::structural::{equal, hash};
use anyffi::{Any, Result};

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
}
