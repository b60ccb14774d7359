//! `ffi.Shape`, `ffi.String`, `ffi.Bytes`: constructors and identity casts of basic objects.

use anyffi::{Any, Error, Shape};

use crate::global::Registrar;

pub(super) fn register(r: &mut Registrar<'_>) {
    r.packed("ffi.Shape", "Shape(*dims): a new ffi.Shape of int dimensions.", |args| {
        let mut dims = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            match a.type_index() {
                anyffi::abi::kTVMFFIInt => dims.push(a.as_i64().unwrap()),
                _ => {
                    return Err(Error::value_error(format!(
                        "ffi.Shape: argument #{i} must be an int, got {}",
                        a.type_key()
                    )))
                }
            }
        }
        Ok(Any::from(Shape::new(&dims)))
    });
    r.typed("ffi.String", "Identity cast to ffi.String.", |s: String| s);
    r.typed("ffi.Bytes", "Identity cast to ffi.Bytes.", |b: Vec<u8>| Any::from(b.as_slice()));
}
