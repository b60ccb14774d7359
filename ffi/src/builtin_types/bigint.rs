//! The dataclass hooks of `ffi.BigInt` (78): `__ffi_hash__`, `__ffi_eq__` and `__ffi_compare__`
//! (value semantics for `RecursiveHash`/`RecursiveEq`/ordering), and its finality. Its metadata
//! and key hash/equality hooks are registered with the type table itself.

use crate::abi::kTVMFFIBigInt;
use crate::any::Any;
use crate::bigint::BigIntObj;
use crate::dataclass::compare_words;
use crate::error::Result;
use crate::function::Function;
use crate::hash::stable_hash_bytes;
use crate::object::ObjectRef;
use crate::reflection::TypeDef;
use crate::type_table::TypeSink;

fn word_bytes(b: &BigIntObj) -> &[u8] {
    let w = b.words();
    // SAFETY: the words are plain i64s, viewed as their bytes.
    unsafe { std::slice::from_raw_parts(w.as_ptr() as *const u8, w.len() * 8) }
}

pub(super) fn register(sink: &dyn TypeSink) -> Result<()> {
    type Big = ObjectRef<BigIntObj>;
    // SAFETY: the library's own type; the registrations below describe its Rust layout.
    unsafe { TypeDef::new(sink, kTVMFFIBigInt, "ffi.BigInt") }
        .attr(
            "__ffi_hash__",
            &Any::from(Function::from_typed(
                "ffi.BigInt.__ffi_hash__",
                |v: Big, _fn_hash: Function| stable_hash_bytes(word_bytes(&v)) as i64,
            )),
        )?
        .attr(
            "__ffi_eq__",
            &Any::from(Function::from_typed(
                "ffi.BigInt.__ffi_eq__",
                |a: Big, b: Big, _fn_eq: Function| a.words() == b.words(),
            )),
        )?
        .attr(
            "__ffi_compare__",
            &Any::from(Function::from_typed(
                "ffi.BigInt.__ffi_compare__",
                |a: Big, b: Big, _fn_cmp: Function| compare_words(a.words(), b.words()),
            )),
        )?
        .type_final(true)?;
    Ok(())
}
