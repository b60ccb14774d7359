//! Dataclass built-ins (spec §8): `ffi.ReprPrint`, `ffi.DeepCopy`, `ffi.RecursiveHash` and
//! `ffi.RecursiveEq/Lt/Le/Gt/Ge`, thin wrappers over `anyffi::repr` and `anyffi::dataclass`.

use anyffi::dataclass::{deep_copy, recursive_compare, recursive_hash};
use anyffi::Any;

use crate::global::Registrar;

pub(super) fn register(r: &mut Registrar<'_>) {
    r.typed("ffi.ReprPrint", "The repr text of any value.", |v: Any| {
        anyffi::repr::repr_print(v.as_view())
    });
    r.typed(
        "ffi.DeepCopy",
        "A deep copy of a value (strings, shapes, big integers and enum singletons are shared).",
        |v: Any| deep_copy(&v),
    );
    r.typed(
        "ffi.RecursiveHash",
        "A hash of a value's structure, consistent with ffi.RecursiveEq.",
        |v: Any| recursive_hash(&v),
    );
    r.typed(
        "ffi.RecursiveEq",
        "Whether two values are equal field by field.",
        |a: Any, b: Any| recursive_compare(&a, &b, true).map(|c| c == 0),
    );
    r.typed(
        "ffi.RecursiveLt",
        "Whether a < b in the recursive order.",
        |a: Any, b: Any| recursive_compare(&a, &b, false).map(|c| c < 0),
    );
    r.typed(
        "ffi.RecursiveLe",
        "Whether a <= b in the recursive order.",
        |a: Any, b: Any| recursive_compare(&a, &b, false).map(|c| c <= 0),
    );
    r.typed(
        "ffi.RecursiveGt",
        "Whether a > b in the recursive order.",
        |a: Any, b: Any| recursive_compare(&a, &b, false).map(|c| c > 0),
    );
    r.typed(
        "ffi.RecursiveGe",
        "Whether a >= b in the recursive order.",
        |a: Any, b: Any| recursive_compare(&a, &b, false).map(|c| c >= 0),
    );
}
