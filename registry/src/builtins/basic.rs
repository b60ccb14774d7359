//! `ffi.Shape`, `ffi.String`, `ffi.Bytes`: constructors and identity casts of basic objects.

use anyffi::{Any, AnyView, Error, Shape};

use crate::global::Registrar;

pub(super) fn register(r: &mut Registrar<'_>) {
    r.packed(
        "ffi.Shape",
        "Shape(*dims): a new ffi.Shape of int dimensions.",
        |args| {
            // Up to 16 dimensions on the stack: the shape object is then the only allocation.
            let mut small = [0i64; 16];
            let mut large = Vec::new();
            let dims: &mut [i64] = if args.len() <= small.len() {
                &mut small[..args.len()]
            } else {
                large.resize(args.len(), 0);
                &mut large
            };
            for (i, a) in args.iter().enumerate() {
                match a.type_index() {
                    anyffi::abi::kTVMFFIInt => dims[i] = a.as_i64().unwrap(),
                    _ => {
                        return Err(Error::value_error(format!(
                            "ffi.Shape: argument #{i} must be an int, got {}",
                            a.type_key()
                        )))
                    }
                }
            }
            Ok(Any::from(Shape::new(dims)))
        },
    );
    r.packed(
        "ffi.String",
        "String(s): s itself as an ffi.String (the same object when it is one).",
        |args| identity_cast(args, "ffi.String", |v| v.as_str().is_some()),
    );
    r.packed(
        "ffi.Bytes",
        "Bytes(b): b itself as ffi.Bytes (the same object when it is one).",
        |args| identity_cast(args, "ffi.Bytes", |v| v.as_bytes().is_some()),
    );
}

/// Returns the single argument when `accepts` it (keeping object identity; raw views become
/// owned objects), else a TypeError.
fn identity_cast(
    args: &[AnyView<'_>],
    name: &str,
    accepts: impl Fn(&AnyView<'_>) -> bool,
) -> anyffi::Result<Any> {
    match args {
        [v] if accepts(v) => v.to_owned(),
        [v] => Err(Error::type_error(format!(
            "{name}: expected {name}, got {}",
            v.type_key()
        ))),
        _ => Err(Error::type_error(format!(
            "{name}: expected 1 argument, got {}",
            args.len()
        ))),
    }
}
