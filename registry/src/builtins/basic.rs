//! `ffi.Shape`, `ffi.String`, `ffi.Bytes`: constructors and identity casts of basic objects.

use anyffi::{Any, AnyView, Error, Shape};

use crate::global::{self, Registrar};

pub(super) fn register(r: &mut Registrar<'_>) {
    r.packed(
        "ffi.Shape",
        "Shape(*dims): a new ffi.Shape of int dimensions.",
        |args| {
            let shape = Shape::try_from_fn(args.len(), |i| {
                let a = &args[i];
                match a.type_index() {
                    // bools are ints here, as in the official library
                    anyffi::abi::kTVMFFIInt | anyffi::abi::kTVMFFIBool => Ok(a.as_i64().unwrap()),
                    _ => Err(Error::value_error(format!(
                        "ffi.Shape: argument #{i} must be an int, got {}",
                        a.type_key()
                    ))),
                }
            })?;
            Ok(Any::from(shape))
        },
    );
    r.packed_schema(
        "ffi.String",
        "String(s): s itself as an ffi.String (the same object when it is one).",
        global::function_schema(&["ffi.String"], "ffi.String"),
        // any bytes: an ffi.String need not be UTF-8 (as_str would refuse it)
        |args| identity_cast(args, "ffi.String", "str", |v| v.as_str_bytes().is_some()),
    );
    r.packed_schema(
        "ffi.Bytes",
        "Bytes(b): b itself as ffi.Bytes (the same object when it is one).",
        global::function_schema(&["ffi.Bytes"], "ffi.Bytes"),
        |args| identity_cast(args, "ffi.Bytes", "bytes", |v| v.as_bytes().is_some()),
    );
}

/// Returns the single argument when `accepts` it (keeping object identity; raw views become
/// owned objects), else a TypeError, worded as the official typed
/// function's (`ty` is the Python-facing name, `str`/`bytes`).
fn identity_cast(
    args: &[AnyView<'_>],
    name: &str,
    ty: &str,
    accepts: impl Fn(&AnyView<'_>) -> bool,
) -> anyffi::Result<Any> {
    let sig = anyffi::function::signature(name, &[ty], ty);
    match args {
        [v] if accepts(v) => v.to_owned(),
        [v] => Err(Error::type_error(format!(
            "Mismatched type on argument #0 when calling: `{sig}`. Expected `{ty}` but got `{}`",
            anyffi::function::mismatch_type_key(v)
        ))),
        _ => Err(Error::type_error(format!(
            "Mismatched number of arguments when calling: `{sig}`. Expected 1 but got {} arguments",
            args.len()
        ))),
    }
}
