//! `ffi.Error` (67) and the thread-local "raised" slot (c_api.h "Error handling", spec §1.1).
//!
//! Rationale: errors cross every language boundary as objects in a per-thread slot, so the Rust
//! error type *is* the FFI object: `Result<T>` carries an `Error` that can be raised to C without
//! conversion, and errors raised by C++ or Python come back as the same type with their kind,
//! message, backtrace, cause chain and extra context intact.

use std::cell::{RefCell, UnsafeCell};
use std::ffi::{c_void, CStr};
use std::fmt;
use std::ptr::{self, NonNull};

use crate::abi::{
    kTVMFFIBacktraceUpdateModeReplace, kTVMFFIError, TVMFFIByteArray, TVMFFIErrorCell, TVMFFIObject,
};
use crate::object::{dec_ref, inc_ref, new_object, ObjectRef, ObjectType};

/// Result type of everything fallible in anyffi.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Payload of `ffi.Error`: the public cell followed by the storage it points into.
#[repr(C)]
pub struct ErrorObj {
    pub header: TVMFFIObject,
    pub cell: TVMFFIErrorCell,
    storage: UnsafeCell<ErrorStorage>,
}

struct ErrorStorage {
    kind: Box<[u8]>,
    message: Box<[u8]>,
    /// NUL-terminated; `cell.backtrace` excludes the NUL.
    backtrace: Vec<u8>,
}

// SAFETY: repr(C), header first, fixed static index.
unsafe impl ObjectType for ErrorObj {
    const TYPE_KEY: &'static str = "ffi.Error";
    #[inline]
    fn type_index() -> i32 {
        kTVMFFIError
    }
    #[inline]
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFIError
    }
}

// SAFETY: immutable except for the backtrace, which `update_backtrace` replaces and
// `Error::backtrace` reads only under `BACKTRACE_LOCK`.
unsafe impl Send for ErrorObj {}
// SAFETY: as above.
unsafe impl Sync for ErrorObj {}

fn nul_terminated(bytes: &[u8]) -> Box<[u8]> {
    let mut v = Vec::with_capacity(bytes.len() + 1);
    v.extend_from_slice(bytes);
    v.push(0);
    v.into_boxed_slice()
}

fn byte_array(b: &[u8]) -> TVMFFIByteArray {
    TVMFFIByteArray {
        data: b.as_ptr() as *const _,
        size: b.len().saturating_sub(1),
    }
}

impl Drop for ErrorObj {
    fn drop(&mut self) {
        for p in [self.cell.cause_chain, self.cell.extra_context] {
            if !p.is_null() {
                // SAFETY: the error owns one reference to each non-null handle.
                unsafe { dec_ref(p as *mut TVMFFIObject) };
            }
        }
    }
}

/// Serialises backtrace updates with the Rust readers of backtraces: `update_backtrace` may
/// reallocate the buffer that `cell.backtrace` points into, through a shared `&Error`.
static BACKTRACE_LOCK: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// `update_backtrace` of the cell: replaces (mode 0) or appends to (mode 1) the backtrace.
unsafe extern "C" fn update_backtrace(obj: *mut c_void, bt: *const TVMFFIByteArray, mode: i32) {
    if obj.is_null() || bt.is_null() {
        return;
    }
    let _guard = BACKTRACE_LOCK.lock();
    // SAFETY: called by the owner of a live error; the ABI gives no concurrent access guarantee
    // beyond the official one (none), so this matches its contract.
    let err = unsafe { &mut *(obj as *mut ErrorObj) };
    // SAFETY: as above.
    let storage = unsafe { &mut *err.storage.get() };
    // SAFETY: the caller passes a valid byte range. Copied first: it may point into this
    // error's own backtrace (appending a backtrace to itself), which the updates below move.
    let add = unsafe { bytes_of(&*bt) }.to_vec();
    storage.backtrace.pop();
    // Replace (0) replaces; every other mode appends, as in the official library
    if mode == kTVMFFIBacktraceUpdateModeReplace {
        storage.backtrace.clear();
    }
    storage.backtrace.extend_from_slice(&add);
    storage.backtrace.push(0);
    err.cell.backtrace = byte_array(&storage.backtrace);
}

/// The bytes of a C byte array (empty for NULL data).
///
/// # Safety
/// `b` must describe readable memory that outlives the result.
pub unsafe fn bytes_of<'a>(b: &TVMFFIByteArray) -> &'a [u8] {
    if b.data.is_null() || b.size == 0 {
        &[]
    } else {
        // SAFETY: per the caller.
        unsafe { std::slice::from_raw_parts(b.data as *const u8, b.size) }
    }
}

/// An `ffi.Error` object: the error type of every anyffi API.
#[derive(Clone)]
pub struct Error(ObjectRef<ErrorObj>);

impl Error {
    /// A new error with a backtrace of the caller's frames.
    #[inline(never)]
    pub fn new(kind: &str, message: impl Into<String>) -> Error {
        let bt = crate::backtrace::capture(1);
        Error::from_parts(kind.as_bytes(), message.into().as_bytes(), bt.as_bytes())
    }

    /// A new error from its parts, without cause or extra context.
    pub fn from_parts(kind: &[u8], message: &[u8], backtrace: &[u8]) -> Error {
        // SAFETY: no object handles are passed.
        unsafe { Error::with_parts(kind, message, backtrace, None, None) }
    }

    /// A new error from its parts; `cause` and `extra` are retained (borrowed inputs).
    ///
    /// # Safety
    /// `cause` and `extra`, when `Some` and non-NULL, must point at live objects.
    pub unsafe fn with_parts(
        kind: &[u8],
        message: &[u8],
        backtrace: &[u8],
        cause: Option<*mut TVMFFIObject>,
        extra: Option<*mut TVMFFIObject>,
    ) -> Error {
        let mut bt = Vec::with_capacity(backtrace.len() + 1);
        bt.extend_from_slice(backtrace);
        bt.push(0);
        let storage = ErrorStorage {
            kind: nul_terminated(kind),
            message: nul_terminated(message),
            backtrace: bt,
        };
        let retain = |p: Option<*mut TVMFFIObject>| match p {
            Some(p) if !p.is_null() => {
                // SAFETY: the caller passes live handles; the error owns its own reference.
                unsafe { inc_ref(p) };
                p as *mut c_void
            }
            _ => ptr::null_mut(),
        };
        let cell = TVMFFIErrorCell {
            kind: byte_array(&storage.kind),
            message: byte_array(&storage.message),
            backtrace: byte_array(&storage.backtrace),
            update_backtrace: Some(update_backtrace),
            cause_chain: retain(cause),
            extra_context: retain(extra),
        };
        // The byte arrays point into heap buffers owned by `storage`; moving the boxes into the
        // object does not move those buffers.
        Error(new_object(ErrorObj {
            header: TVMFFIObject::new::<ErrorObj>(),
            cell,
            storage: UnsafeCell::new(storage),
        }))
    }

    /// Adopts an owned raw error handle.
    ///
    /// # Safety
    /// `obj` must be a live `ffi.Error` and the caller gives up one strong reference.
    pub unsafe fn from_raw_owned(obj: NonNull<TVMFFIObject>) -> Error {
        // SAFETY: per the caller.
        Error(unsafe { ObjectRef::from_raw_owned(obj.cast()) })
    }

    /// The object handle.
    pub fn as_object(&self) -> &ObjectRef<ErrorObj> {
        &self.0
    }

    /// Gives the reference away.
    pub fn into_raw(self) -> *mut TVMFFIObject {
        self.0.into_raw()
    }

    /// The kind, e.g. `ValueError`.
    pub fn kind(&self) -> &str {
        // SAFETY: the cell points at live storage of this error (or foreign storage it owns).
        std::str::from_utf8(unsafe { bytes_of(&self.0.cell.kind) }).unwrap_or("<non-UTF-8 kind>")
    }

    /// The message.
    pub fn message(&self) -> std::borrow::Cow<'_, str> {
        // SAFETY: as for kind.
        String::from_utf8_lossy(unsafe { bytes_of(&self.0.cell.message) })
    }

    /// The backtrace text, most recent frame first. A copy: `update_backtrace` (through any
    /// handle to this error) may replace the buffer the cell points into.
    pub fn backtrace(&self) -> std::borrow::Cow<'_, str> {
        let _guard = BACKTRACE_LOCK.lock();
        // SAFETY: as for kind; the lock keeps our own `update_backtrace` out while we copy.
        let text = String::from_utf8_lossy(unsafe { bytes_of(&self.0.cell.backtrace) });
        std::borrow::Cow::Owned(text.into_owned())
    }

    /// The backtrace with the most recent call last, one frame per line: the frames of
    /// [`Error::backtrace`] in reverse order, empty lines and text after the last newline left
    /// out (the official `Error::TracebackMostRecentCallLast`).
    pub fn traceback_most_recent_call_last(&self) -> String {
        let bt = self.backtrace();
        let complete = match bt.rfind('\n') {
            Some(end) => &bt[..end],
            None => return String::new(),
        };
        let mut out = String::with_capacity(bt.len());
        for line in complete.rsplit('\n').filter(|l| !l.is_empty()) {
            out.push_str(line);
            out.push('\n');
        }
        out
    }

    /// `Traceback (most recent call last):\n<frames><kind>: <message>\n`, the text the official
    /// library prints for an error it logs before raising (its `Error::FullMessage`).
    pub fn full_message(&self) -> String {
        format!(
            "Traceback (most recent call last):\n{}{}: {}\n",
            self.traceback_most_recent_call_last(),
            self.kind(),
            self.message()
        )
    }

    /// The error this one was caused by, if any.
    pub fn cause(&self) -> Option<ObjectRef<crate::object::Object>> {
        let p = NonNull::new(self.0.cell.cause_chain as *mut crate::object::Object)?;
        // SAFETY: the error keeps its cause alive; we take our own reference.
        Some(unsafe { ObjectRef::from_raw_borrowed(p) })
    }

    /// Extra context attached by the raiser, if any.
    pub fn extra_context(&self) -> Option<ObjectRef<crate::object::Object>> {
        let p = NonNull::new(self.0.cell.extra_context as *mut crate::object::Object)?;
        // SAFETY: as for cause.
        Some(unsafe { ObjectRef::from_raw_borrowed(p) })
    }

    /// Replaces or appends to the backtrace through the cell's own hook (works for foreign errors).
    pub fn update_backtrace(&self, text: &str, append: bool) {
        let ba = TVMFFIByteArray {
            data: text.as_ptr() as *const _,
            size: text.len(),
        };
        if let Some(f) = self.0.cell.update_backtrace {
            // SAFETY: the hook belongs to this error object.
            unsafe { f(self.0.as_raw() as *mut c_void, &ba, i32::from(append)) };
        }
    }

    /// Turns a caught panic into an `InternalError`.
    pub fn from_panic(payload: Box<dyn std::any::Any + Send>) -> Error {
        let msg = if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "a Rust panic with a non-string payload".to_string()
        };
        Error::new("InternalError", format!("panic: {msg}"))
    }

    /// `ValueError`.
    pub fn value_error(msg: impl Into<String>) -> Error {
        Error::new("ValueError", msg)
    }
    /// `TypeError`.
    pub fn type_error(msg: impl Into<String>) -> Error {
        Error::new("TypeError", msg)
    }
    /// `RuntimeError`.
    pub fn runtime_error(msg: impl Into<String>) -> Error {
        Error::new("RuntimeError", msg)
    }
    /// `IndexError`.
    pub fn index_error(msg: impl Into<String>) -> Error {
        Error::new("IndexError", msg)
    }
    /// `KeyError`.
    pub fn key_error(msg: impl Into<String>) -> Error {
        Error::new("KeyError", msg)
    }
    /// `AttributeError`.
    pub fn attribute_error(msg: impl Into<String>) -> Error {
        Error::new("AttributeError", msg)
    }
    /// `InternalError`: a broken invariant of the library or of a caller of the C ABI.
    pub fn internal(msg: impl Into<String>) -> Error {
        Error::new("InternalError", msg)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind(), self.message())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}\n{}",
            self.kind(),
            self.message(),
            self.backtrace()
        )
    }
}

impl std::error::Error for Error {}

/// Returns early with an `Error` of the given kind: `bail!(ValueError, "bad {x}")`.
#[macro_export]
macro_rules! bail {
    ($kind:ident, $($fmt:tt)+) => {
        return Err($crate::error::Error::new(stringify!($kind), format!($($fmt)+)))
    };
}

thread_local! {
    static RAISED: RefCell<Option<Error>> = const { RefCell::new(None) };
}

/// Stores `err` in this thread's raised slot, releasing what was there.
///
/// While the thread's storage is torn down (the slot's own pending error being released, its
/// objects' deleters calling back into the library) the slot is gone: the error is released
/// instead of kept, rather than panicking in a function that cannot unwind (an abort).
pub fn set_raised(err: Error) {
    // on Err, `err` was moved into the closure, which was dropped unrun
    if let Ok(old) = RAISED.try_with(|slot| slot.borrow_mut().replace(err)) {
        drop(old);
    }
}

/// Moves the raised error out of this thread's slot (None once the thread's storage is torn
/// down, see `set_raised`).
pub fn take_raised() -> Option<Error> {
    RAISED
        .try_with(|slot| slot.borrow_mut().take())
        .ok()
        .flatten()
}

/// The raised error after a call returned -1; an `InternalError` naming `what` when the callee
/// broke the protocol by failing without raising.
pub fn fetch_raised(what: &str) -> Error {
    take_raised()
        .unwrap_or_else(|| Error::internal(format!("{what} returned -1 but raised no error")))
}

/// Reads a NUL-terminated C string for messages (lossy); "" for NULL.
///
/// # Safety
/// `p` must be NULL or a valid NUL-terminated string.
pub unsafe fn cstr_lossy<'a>(p: *const std::ffi::c_char) -> std::borrow::Cow<'a, str> {
    if p.is_null() {
        "".into()
    } else {
        // SAFETY: per the caller.
        unsafe { CStr::from_ptr(p) }.to_string_lossy()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_and_update_backtrace() {
        let e = Error::from_parts(b"ValueError", b"bad value", b"  File \"a\", line 1, in f\n");
        assert_eq!(e.kind(), "ValueError");
        assert_eq!(e.message(), "bad value");
        e.update_backtrace("X\n", true);
        assert!(e.backtrace().ends_with("X\n"));
        e.update_backtrace("Y", false);
        assert_eq!(e.backtrace(), "Y");
        // SAFETY: the cell backtrace is NUL-terminated storage.
        assert_eq!(unsafe { *e.as_object().cell.backtrace.data.add(1) }, 0);
        assert_eq!(e.to_string(), "ValueError: bad value");
    }

    #[test]
    fn full_message_reverses_the_frames() {
        let e = Error::from_parts(
            b"RuntimeError",
            b"boom",
            b"  File \"inner\", line 2, in g\n\n  File \"outer\", line 1, in f\n  partial",
        );
        assert_eq!(
            e.traceback_most_recent_call_last(),
            "  File \"outer\", line 1, in f\n  File \"inner\", line 2, in g\n"
        );
        assert_eq!(
            e.full_message(),
            "Traceback (most recent call last):\n  File \"outer\", line 1, in f\n  \
             File \"inner\", line 2, in g\nRuntimeError: boom\n"
        );
        let bare = Error::from_parts(b"ValueError", b"v", b"");
        assert_eq!(
            bare.full_message(),
            "Traceback (most recent call last):\nValueError: v\n"
        );
    }

    #[test]
    fn cause_is_retained_and_released() {
        let cause = Error::value_error("root");
        let raw = cause.as_object().as_raw();
        // SAFETY: `cause` is alive.
        let e = unsafe { Error::with_parts(b"RuntimeError", b"outer", b"", Some(raw), None) };
        assert_eq!(cause.as_object().strong_count(), 2);
        assert!(e.cause().unwrap().as_raw() == raw);
        drop(e);
        assert_eq!(cause.as_object().strong_count(), 1);
    }

    #[test]
    fn raised_slot_moves() {
        set_raised(Error::type_error("t"));
        set_raised(Error::key_error("k"));
        let e = take_raised().unwrap();
        assert_eq!(e.kind(), "KeyError");
        assert!(take_raised().is_none());
        assert_eq!(fetch_raised("f").kind(), "InternalError");
    }
}
