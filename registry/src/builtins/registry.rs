//! `ffi.*` functions about the global function table itself: listing, removal, metadata.

use anyffi::{Any, Error, Function};

use crate::global::{self, Registrar};

pub(super) fn register(r: &mut Registrar<'_>) {
    r.typed(
        "ffi.FunctionListGlobalNamesFunctor",
        "A function g over a snapshot of the global names: g(-1) is the count, g(i) the i-th name.",
        || {
            let names = global::global_names();
            Function::from_typed(
                "ffi.FunctionListGlobalNamesFunctor.<lambda>",
                move |i: i64| -> anyffi::Result<Any> {
                    // any negative index is the count, as in the official library
                    if i < 0 {
                        return Ok(Any::from(names.len() as i64));
                    }
                    match usize::try_from(i).ok().and_then(|i| names.get(i)) {
                        Some(n) => Ok(Any::from(n.as_str())),
                        None => Err(Error::index_error(format!(
                            "ffi.FunctionListGlobalNamesFunctor: Index {i} out of bounds {}",
                            names.len()
                        ))),
                    }
                },
            )
        },
    );
    r.typed(
        "ffi.FunctionRemoveGlobal",
        "Removes a global function; whether it existed.",
        |name: String| global::remove_global(&name),
    );
    r.typed(
        "ffi.GetGlobalFuncMetadata",
        "The metadata JSON of a global function (\"\" when none was given).",
        |name: String| -> anyffi::Result<String> {
            match global::get_entry(&name) {
                Some(e) => Ok(e.metadata),
                None => Err(Error::runtime_error(format!(
                    "Global Function is not found: {name}"
                ))),
            }
        },
    );
}
