//! C API: function objects and calls (c_api.h "Function").

use std::ffi::{c_int, c_void};

use super::{guard, non_null};
use crate::abi::{TVMFFIAny, TVMFFISafeCallType};
use crate::error::{set_raised, Error};
use crate::function::{Function, FunctionObj};

/// Creates an `ffi.Function` (new reference in `*out`) with `cpp_call = NULL`. With `self_` and
/// `deleter` both NULL, the function is `safe_call` itself and receives its own handle;
/// otherwise `safe_call` receives `self_`, and `deleter(self_)` runs on destruction.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionCreate(
    self_: *mut c_void,
    safe_call: TVMFFISafeCallType,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: the C caller vouches for `safe_call`, `self_` and `deleter` (c_api.h).
    unsafe {
        create(
            "TVMFFIFunctionCreate",
            self_,
            safe_call,
            deleter,
            false,
            out,
        )
    }
}

/// As `TVMFFIFunctionCreate`, for a `safe_call` whose return code may be garbage (a ctypes thunk
/// whose Python callable could not be entered): calls never read it, and take "no result written
/// and no error raised" as a failure. `safe_call` must write the result on success. On success
/// `*out` holds a new reference the caller owns; `self_` is the creator's until `deleter` runs.
/// Not part of the TVM FFI ABI.
#[no_mangle]
pub unsafe extern "C" fn AnyFFIFunctionCreateChecked(
    self_: *mut c_void,
    safe_call: TVMFFISafeCallType,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: the C caller vouches for `safe_call`, `self_` and `deleter`.
    unsafe {
        create(
            "AnyFFIFunctionCreateChecked",
            self_,
            safe_call,
            deleter,
            true,
            out,
        )
    }
}

/// The body of both creators: `*out` = a new function (`checked`: see
/// `Function::from_c_checked`).
///
/// # Safety
/// As `TVMFFIFunctionCreate`.
unsafe fn create(
    what: &str,
    self_: *mut c_void,
    safe_call: TVMFFISafeCallType,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    checked: bool,
    out: *mut *mut c_void,
) -> c_int {
    guard(|| {
        let out = non_null(out, what, "out")? as *mut *mut c_void;
        // SAFETY: forwarded contract.
        let f = unsafe {
            if checked {
                Function::from_c_checked(self_, safe_call, deleter)
            } else {
                Function::from_c(self_, safe_call, deleter)
            }
        }?;
        // SAFETY: checked non-null out-parameter.
        unsafe { *out = f.into_raw() as *mut c_void };
        Ok(())
    })
}

/// Calls `func` (borrowed) with `num_args` borrowed arguments; on success `*result` holds an
/// owned value. A plain tail call into the function's `safe_call`.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionCall(
    func: *mut c_void,
    args: *mut TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> c_int {
    if func.is_null() {
        set_raised(Error::value_error(
            "TVMFFIFunctionCall: `func` must not be NULL",
        ));
        return -1;
    }
    // SAFETY: the caller passes a live function object; its cell follows the header.
    let call = unsafe { (*(func as *const FunctionObj)).cell.safe_call };
    match call {
        // SAFETY: the function's own entry point, called with its own handle.
        Some(call) => unsafe { call(func, args, num_args, result) },
        None => {
            set_raised(Error::internal(
                "TVMFFIFunctionCall: the function has a NULL safe_call",
            ));
            -1
        }
    }
}
