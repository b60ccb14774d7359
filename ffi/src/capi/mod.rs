//! The exported `TVMFFI*` C symbols of the object system, one file per section of `c_api.h`.
//! Every function is a thin shell: check pointers, run safe code under [`guard`], and turn the
//! `Result` into 0 / -1 plus the thread-local error. A panic never crosses the boundary.
//!
//! The `# Safety` contract of every exported function is the C one, written in its doc comment
//! (which pointers are borrowed, which out-parameters receive new references).
#![allow(clippy::missing_safety_doc)]

mod any;
mod error;
mod function;
mod object;
mod python;
mod tensor;
mod types;

pub use any::*;
pub use error::*;
pub use function::*;
pub use object::*;
pub use python::*;
pub use tensor::*;
pub use types::*;

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::abi::TVMFFIByteArray;
use crate::error::{set_raised, Error, Result};

/// Runs `f` at a C boundary: `Ok` → 0; `Err` or a panic → the error is raised and -1 returned.
#[inline(always)]
pub fn guard(f: impl FnOnce() -> Result<()>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            set_raised(e);
            -1
        }
        Err(panic) => {
            set_raised(Error::from_panic(panic));
            -1
        }
    }
}

/// Runs an infallible body at a C boundary; a panic is reported on stderr and swallowed
/// (for `void` functions, which have no error channel).
#[inline(always)]
pub fn guard_void(what: &str, f: impl FnOnce()) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
        eprintln!(
            "anyffi: {what} panicked: {}",
            Error::from_panic(p).message()
        );
    }
}

/// A required pointer argument, or a ValueError naming the function and the argument.
#[inline]
pub fn non_null<T>(p: *const T, func: &str, arg: &str) -> Result<*const T> {
    if p.is_null() {
        Err(Error::value_error(format!(
            "{func}: `{arg}` must not be NULL"
        )))
    } else {
        Ok(p)
    }
}

/// The bytes of a required byte-array argument.
///
/// # Safety
/// `p`, when non-NULL, must point at a valid byte array that outlives the result.
#[inline]
pub unsafe fn byte_array_arg<'a>(
    p: *const TVMFFIByteArray,
    func: &str,
    arg: &str,
) -> Result<&'a [u8]> {
    let p = non_null(p, func, arg)?;
    // SAFETY: per the caller.
    let b = unsafe { &*p };
    if b.size > 0 && b.data.is_null() {
        return Err(Error::value_error(format!(
            "{func}: `{arg}` has NULL data and size {}",
            b.size
        )));
    }
    // SAFETY: per the caller.
    Ok(unsafe { crate::error::bytes_of(b) })
}

/// A required UTF-8 string argument given as a byte array.
///
/// # Safety
/// As for [`byte_array_arg`].
#[inline]
pub unsafe fn str_arg<'a>(p: *const TVMFFIByteArray, func: &str, arg: &str) -> Result<&'a str> {
    // SAFETY: per the caller.
    let b = unsafe { byte_array_arg(p, func, arg) }?;
    std::str::from_utf8(b)
        .map_err(|_| Error::value_error(format!("{func}: `{arg}` is not valid UTF-8")))
}
