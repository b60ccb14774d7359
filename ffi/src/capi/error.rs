//! C API: the thread-local raised error, error objects and backtraces (c_api.h "Error").

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

use super::guard_void;
use crate::abi::{kTVMFFIError, TVMFFIByteArray, TVMFFIObject};
use crate::error::{bytes_of, cstr_lossy, set_raised, take_raised, Error};
use crate::object::inc_ref;

/// Moves this thread's raised error into `*result` (new reference, or NULL) and empties the slot.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorMoveFromRaised(result: *mut *mut c_void) {
    if result.is_null() {
        return;
    }
    let e = take_raised().map_or(std::ptr::null_mut(), |e| e.into_raw() as *mut c_void);
    // SAFETY: non-null out-parameter supplied by the caller.
    unsafe { *result = e };
}

/// Stores `error` (borrowed; the slot takes its own reference) as this thread's raised error.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorSetRaised(error: *mut c_void) {
    let Some(p) = NonNull::new(error as *mut TVMFFIObject) else {
        return;
    };
    // SAFETY: the caller passes a live object.
    let type_index = unsafe { p.as_ref().type_index };
    if type_index != kTVMFFIError {
        let got = crate::type_table::type_key_of(type_index);
        set_raised(Error::type_error(format!(
            "TVMFFIErrorSetRaised: expected an ffi.Error, got {got}"
        )));
        return;
    }
    // SAFETY: live error; the slot owns the reference taken here.
    unsafe {
        inc_ref(p.as_ptr());
        set_raised(Error::from_raw_owned(p));
    }
}

fn raise_parts(kind: &[u8], message: &[u8]) {
    let bt = crate::backtrace::backtrace_string(None, 0, None, false);
    set_raised(Error::from_parts(kind, message, bt.as_bytes()));
}

/// Raises a new error of `kind` with `message` (NUL-terminated; NULL reads as "").
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorSetRaisedFromCStr(kind: *const c_char, message: *const c_char) {
    guard_void("TVMFFIErrorSetRaisedFromCStr", || {
        // SAFETY: the caller passes NUL-terminated strings or NULL.
        let (k, m) = unsafe { (cstr_lossy(kind), cstr_lossy(message)) };
        raise_parts(k.as_bytes(), m.as_bytes());
    });
}

/// Raises a new error whose message is the concatenation of the non-NULL `parts`.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorSetRaisedFromCStrParts(
    kind: *const c_char,
    parts: *const *const c_char,
    n: i32,
) {
    guard_void("TVMFFIErrorSetRaisedFromCStrParts", || {
        let mut msg = Vec::new();
        if !parts.is_null() {
            for i in 0..n.max(0) as usize {
                // SAFETY: the caller passes `n` entries, each NULL or NUL-terminated.
                let p = unsafe { *parts.add(i) };
                if !p.is_null() {
                    // SAFETY: as above.
                    msg.extend_from_slice(unsafe { CStr::from_ptr(p) }.to_bytes());
                }
            }
        }
        // SAFETY: the caller passes a NUL-terminated kind or NULL.
        raise_parts(unsafe { cstr_lossy(kind) }.as_bytes(), &msg);
    });
}

unsafe fn create(
    kind: *const TVMFFIByteArray,
    message: *const TVMFFIByteArray,
    backtrace: *const TVMFFIByteArray,
    cause: *mut c_void,
    extra: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    if out.is_null() {
        return -1;
    }
    // SAFETY: byte arrays supplied by the caller, NULL reads as empty.
    let read = |p: *const TVMFFIByteArray| {
        if p.is_null() {
            &[][..]
        } else {
            // SAFETY: a non-NULL byte array supplied by the caller.
            unsafe { bytes_of(&*p) }
        }
    };
    // Errors of this function never touch the raised slot (it reports failure by -1 alone).
    match catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the C caller passes NULL or live objects as `cause` and `extra`.
        unsafe {
            Error::with_parts(
                read(kind),
                read(message),
                read(backtrace),
                Some(cause as *mut TVMFFIObject),
                Some(extra as *mut TVMFFIObject),
            )
        }
    })) {
        Ok(e) => {
            // SAFETY: checked non-null out-parameter.
            unsafe { *out = e.into_raw() as *mut c_void };
            0
        }
        Err(_) => -1,
    }
}

/// Creates an `ffi.Error` (new reference in `*out`). Returns -1 without raising on failure.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorCreate(
    kind: *const TVMFFIByteArray,
    message: *const TVMFFIByteArray,
    backtrace: *const TVMFFIByteArray,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: forwarded caller pointers.
    unsafe {
        create(
            kind,
            message,
            backtrace,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            out,
        )
    }
}

/// As `TVMFFIErrorCreate`, also retaining `cause_chain` and `extra_context` (borrowed inputs).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorCreateWithCauseAndExtraContext(
    kind: *const TVMFFIByteArray,
    message: *const TVMFFIByteArray,
    backtrace: *const TVMFFIByteArray,
    cause_chain: *mut c_void,
    extra_context: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: forwarded caller pointers.
    unsafe { create(kind, message, backtrace, cause_chain, extra_context, out) }
}

thread_local! {
    static BACKTRACE_BUF: RefCell<(String, TVMFFIByteArray)> =
        const { RefCell::new((String::new(), TVMFFIByteArray { data: std::ptr::null(), size: 0 })) };
}

/// The backtrace of the calling thread in the official text format, most recent frame first,
/// preceded by `file:line in func` when given. The result is thread-local and valid until the
/// next call on this thread.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIBacktrace(
    file: *const c_char,
    line: c_int,
    func: *const c_char,
    cross_ffi_boundary: c_int,
) -> *const TVMFFIByteArray {
    let text = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the caller passes NUL-terminated strings or NULL.
        let (f, fun) = unsafe { (cstr_lossy(file), cstr_lossy(func)) };
        let f = (!file.is_null()).then_some(f.as_ref());
        let fun = (!func.is_null()).then_some(fun.as_ref());
        crate::backtrace::backtrace_string(f, line, fun, cross_ffi_boundary != 0)
    }))
    .unwrap_or_default();
    BACKTRACE_BUF
        .try_with(|b| {
            let mut b = b.borrow_mut();
            // NUL after the text, as the official std::string result has (C callers print it)
            let size = text.len();
            b.0 = text;
            b.0.push('\0');
            b.1 = TVMFFIByteArray {
                data: b.0.as_ptr() as *const c_char,
                size,
            };
            &b.1 as *const TVMFFIByteArray
        })
        // the thread's storage is being torn down (a deleter calling in at thread exit)
        .unwrap_or(&EMPTY_BACKTRACE.0 as *const TVMFFIByteArray)
}

/// The empty backtrace handed out once this thread's buffer is gone.
struct StaticByteArray(TVMFFIByteArray);
// SAFETY: points at a static, immutable empty string.
unsafe impl Sync for StaticByteArray {}
static EMPTY_BACKTRACE: StaticByteArray = StaticByteArray(TVMFFIByteArray {
    data: c"".as_ptr(),
    size: 0,
});
