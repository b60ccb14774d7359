//! `anyffi.testing.*`: functions every binding's tests and benchmarks rely on, always registered.

use anyffi::{Any, Error, Function};

use crate::global::Registrar;

pub(super) fn register(r: &mut Registrar<'_>) {
    r.packed(
        "anyffi.testing.nop",
        "nop(*args): ignores its arguments and returns None.",
        |_| Ok(Any::none()),
    );
    r.packed(
        "anyffi.testing.echo",
        "echo(x): returns x.",
        |args| match args {
            [x] => x.to_owned(),
            _ => Err(Error::type_error(format!(
                "anyffi.testing.echo: expected 1 argument (x), got {}",
                args.len()
            ))),
        },
    );
    r.typed(
        "anyffi.testing.add_one",
        "add_one(x: int) -> int: x + 1.",
        |x: i64| -> anyffi::Result<i64> {
            x.checked_add(1)
                .ok_or_else(|| Error::value_error("anyffi.testing.add_one: x + 1 overflows int64"))
        },
    );
    r.packed(
        "anyffi.testing.apply",
        "apply(f, *args): calls f(*args) on the calling thread and returns its result.",
        |args| {
            let Some((f, rest)) = args.split_first() else {
                return Err(Error::type_error(
                    "anyffi.testing.apply: expected at least 1 argument (f)",
                ));
            };
            let f = f.as_object_of::<anyffi::FunctionObj>().ok_or_else(|| {
                Error::type_error(format!(
                    "anyffi.testing.apply: argument #0 (f) must be an ffi.Function, got {}",
                    f.type_key()
                ))
            })?;
            Function::call(&f, rest)
        },
    );
    r.typed(
        "anyffi.testing.raise_error",
        "raise_error(kind, message): raises an error of that kind.",
        |kind: String, message: String| -> anyffi::Result<()> {
            if kind.is_empty() {
                return Err(Error::value_error(
                    "anyffi.testing.raise_error: `kind` must not be empty",
                ));
            }
            Err(Error::new(&kind, message))
        },
    );
}
