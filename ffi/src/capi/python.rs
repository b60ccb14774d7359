//! The Python package's fast paths (not part of the TVM FFI ABI): a native `__call__` for
//! `anyffi.Function`, and FFI functions that call Python callables themselves.
//!
//! A ctypes foreign call costs ~250 ns on CPython, three times what the whole call of the
//! official (Cython) package costs. The package therefore asks this library for a CPython method
//! in the `METH_FASTCALL` convention ([`AnyFFIPyInstall`]) and installs it as
//! `Function.__call__` with `PyDescr_NewMethod`: calling a function then costs what calling a
//! builtin method costs. The library links no Python: every CPython function it calls and every
//! Python object it compares against comes from the package in an [`AnyFFIPyApi`] table
//! (addresses out of `ctypes.pythonapi`), which must outlive the process's Python (the package
//! keeps them for good).
//!
//! The native method converts the arguments it knows without the interpreter (None, bool, int
//! within int64, float, str, `numpy.ndarray` through its own `__dlpack__()`, anyffi objects,
//! devices and dtypes), calls the function, and returns None, int, bool, float, str and bytes
//! results itself. Everything else goes back to Python: another argument type (or a numpy array
//! that refuses DLPack) makes it call the package's pure-Python `__call__` instead
//! (`slow_call`), a failed call goes to `on_failed(self, rc, *args)` (which raises the error or
//! retries), and other results to `on_result(i, *capsules)`, which takes the owned result Any at
//! `_mem.Q` index `i` and writes its type word back to None once it has (a result Python did not
//! take is released here).
//!
//! [`AnyFFIPyFunctionCreate`] makes the FFI function of a Python callable: its calls take the
//! GIL, convert simple arguments and results here and call the callable directly, and hand
//! anything else to the package (`run_callback`, `write_result`, `callback_error`).
//!
//! Python objects are read through the table's functions, except three layouts the package
//! checks before it installs this: an object's type is its second word, a type's name
//! (`tp_name`) its fourth, and the `_h`/`_call` slots of anyffi objects lie at the byte offsets
//! in the table.
#![allow(non_snake_case)]

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_long, c_void};
use std::mem::size_of;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, null_mut};
use std::sync::atomic::{AtomicPtr, Ordering};

use super::TVMFFIFunctionCall;
use crate::abi::{
    kTVMFFIBool, kTVMFFIBytes, kTVMFFIDLTensorPtr, kTVMFFIDataType, kTVMFFIDevice, kTVMFFIFloat,
    kTVMFFIInt, kTVMFFINone, kTVMFFIRawStr, kTVMFFISmallBytes, kTVMFFISmallStr,
    kTVMFFIStaticObjectBegin, kTVMFFIStr, TVMFFIAny, TVMFFIAnyValue, TVMFFIObject,
};
use crate::any::Any;
use crate::error::take_raised;
use crate::string::{StrObj, MAX_SMALL_LEN};

/// A `PyObject*`.
pub type AnyFFIPyObjectPtr = *mut c_void;
type Py = AnyFFIPyObjectPtr;

/// Arguments converted natively; calls with more take the Python path (which has its own frames).
const MAX_ARGS: usize = 8;

/// `METH_FASTCALL`: `PyObject* f(PyObject* self, PyObject* const* args, Py_ssize_t nargs)`.
const METH_FASTCALL: c_int = 0x80;
/// Bit of a vectorcall's `nargsf`: `args[-1]` may be overwritten by the callee.
const PY_VECTORCALL_ARGUMENTS_OFFSET: usize = 1 << (usize::BITS - 1);

/// What the package passes to [`AnyFFIPyInstall`]: CPython functions (addresses), then objects
/// (borrowed; the package keeps them alive for good). `size` is `sizeof` this struct, for a check
/// that both sides agree on the layout. Only `ndarray_type` may be NULL (no numpy).
#[repr(C)]
pub struct AnyFFIPyApi {
    pub size: usize,
    pub Py_IncRef: *const c_void,
    pub Py_DecRef: *const c_void,
    pub PyObject_GetAttr: *const c_void,
    pub PyObject_VectorcallDict: *const c_void,
    pub PyObject_VectorcallMethod: *const c_void,
    pub PyLong_AsLongLongAndOverflow: *const c_void,
    pub PyLong_AsUnsignedLongLong: *const c_void,
    pub PyLong_FromLongLong: *const c_void,
    pub PyLong_FromUnsignedLongLong: *const c_void,
    pub PyFloat_AsDouble: *const c_void,
    pub PyFloat_FromDouble: *const c_void,
    pub PyBool_FromLong: *const c_void,
    pub PyUnicode_AsUTF8AndSize: *const c_void,
    pub PyCapsule_GetPointer: *const c_void,
    pub PyErr_Occurred: *const c_void,
    pub PyErr_ExceptionMatches: *const c_void,
    pub PyErr_Clear: *const c_void,
    pub PyErr_SetString: *const c_void,
    pub PyEval_SaveThread: *const c_void,
    pub PyEval_RestoreThread: *const c_void,
    pub PyType_IsSubtype: *const c_void,
    pub PyUnicode_DecodeUTF8: *const c_void,
    pub PyBytes_FromStringAndSize: *const c_void,
    pub PyGILState_Ensure: *const c_void,
    pub PyGILState_Release: *const c_void,
    pub Py_IsInitialized: *const c_void,
    pub PyErr_Fetch: *const c_void,
    pub PyErr_NormalizeException: *const c_void,
    pub PyException_SetTraceback: *const c_void,
    /// `Py_IsFinalizing` (3.13+) or `_Py_IsFinalizing`
    pub Py_IsFinalizing: *const c_void,
    /// `pthread_self()` of Python's main thread (`threading.main_thread().ident`), the thread
    /// that finalizes the interpreter
    pub main_thread: usize,
    /// byte offsets in the object of the `_h` slot of `anyffi.Object` and of the `_call` slot of
    /// `anyffi.Function` (found by the package; 0: unknown, read as attributes instead)
    pub h_offset: usize,
    pub call_offset: usize,
    /// `None`, `True`
    pub none: AnyFFIPyObjectPtr,
    pub true_: AnyFFIPyObjectPtr,
    /// the exact types converted inline: int, float, bool, str, numpy.ndarray (or NULL),
    /// anyffi.Device, anyffi.dtype; anyffi.Object and its subclasses
    pub int_type: AnyFFIPyObjectPtr,
    pub float_type: AnyFFIPyObjectPtr,
    pub bool_type: AnyFFIPyObjectPtr,
    pub str_type: AnyFFIPyObjectPtr,
    pub ndarray_type: AnyFFIPyObjectPtr,
    pub device_type: AnyFFIPyObjectPtr,
    pub dtype_type: AnyFFIPyObjectPtr,
    pub object_type: AnyFFIPyObjectPtr,
    /// BufferError (numpy's `__dlpack__` of a read-only array), SystemError (a panic here)
    pub buffer_error: AnyFFIPyObjectPtr,
    pub system_error: AnyFFIPyObjectPtr,
    /// interned names: "_h" (an object's handle), "_call" (a Function's ctypes entry point),
    /// "_packed" (a Device's or dtype's packed value), "__dlpack__"
    pub name_h: AnyFFIPyObjectPtr,
    pub name_call: AnyFFIPyObjectPtr,
    pub name_packed: AnyFFIPyObjectPtr,
    pub name_dlpack: AnyFFIPyObjectPtr,
    /// the two `_call`s of a Function: calls release the GIL (the default) or keep it
    /// (`release_gil = False`); a Function with another `_call` takes the Python path
    pub release_gil: AnyFFIPyObjectPtr,
    pub keep_gil: AnyFFIPyObjectPtr,
    /// `slow_call(self, *args)`, `on_failed(self, rc, *args)`, `on_result(i, *capsules)`
    pub slow_call: AnyFFIPyObjectPtr,
    pub on_failed: AnyFFIPyObjectPtr,
    pub on_result: AnyFFIPyObjectPtr,
    /// callbacks ([`AnyFFIPyFunctionCreate`]): `run_callback(f, args, n, result)` (the whole
    /// callback in Python, returns 0 or -1 with the FFI error set), `callback_error(exc)` (sets
    /// the FFI error of `exc`), `write_result(value, i)` (writes `value` as the owned Any at
    /// `_mem.Q` index `i`)
    pub run_callback: AnyFFIPyObjectPtr,
    pub callback_error: AnyFFIPyObjectPtr,
    pub write_result: AnyFFIPyObjectPtr,
    /// `object_of(h)`: the Python value of object `h`, adopting a reference the caller gives
    pub object_of: AnyFFIPyObjectPtr,
}

/// The table with typed function pointers, made once by [`AnyFFIPyInstall`] and never freed.
struct Api {
    incref: unsafe extern "C" fn(Py),
    decref: unsafe extern "C" fn(Py),
    getattr: unsafe extern "C" fn(Py, Py) -> Py,
    vectorcall: unsafe extern "C" fn(Py, *const Py, usize, Py) -> Py,
    vectorcall_method: unsafe extern "C" fn(Py, *const Py, usize, Py) -> Py,
    long_as_i64: unsafe extern "C" fn(Py, *mut c_int) -> i64,
    long_as_u64: unsafe extern "C" fn(Py) -> u64,
    long_from_i64: unsafe extern "C" fn(i64) -> Py,
    long_from_u64: unsafe extern "C" fn(u64) -> Py,
    float_as_f64: unsafe extern "C" fn(Py) -> f64,
    float_from_f64: unsafe extern "C" fn(f64) -> Py,
    bool_from_long: unsafe extern "C" fn(c_long) -> Py,
    unicode_as_utf8: unsafe extern "C" fn(Py, *mut isize) -> *const c_char,
    capsule_pointer: unsafe extern "C" fn(Py, *const c_char) -> *mut c_void,
    err_occurred: unsafe extern "C" fn() -> Py,
    err_matches: unsafe extern "C" fn(Py) -> c_int,
    err_clear: unsafe extern "C" fn(),
    err_set_string: unsafe extern "C" fn(Py, *const c_char),
    save_thread: unsafe extern "C" fn() -> *mut c_void,
    restore_thread: unsafe extern "C" fn(*mut c_void),
    is_subtype: unsafe extern "C" fn(Py, Py) -> c_int,
    decode_utf8: unsafe extern "C" fn(*const c_char, isize, *const c_char) -> Py,
    bytes_from: unsafe extern "C" fn(*const c_char, isize) -> Py,
    gil_ensure: unsafe extern "C" fn() -> c_int,
    gil_release: unsafe extern "C" fn(c_int),
    is_initialized: unsafe extern "C" fn() -> c_int,
    err_fetch: unsafe extern "C" fn(*mut Py, *mut Py, *mut Py),
    err_normalize: unsafe extern "C" fn(*mut Py, *mut Py, *mut Py),
    set_traceback: unsafe extern "C" fn(Py, Py) -> c_int,
    is_finalizing: unsafe extern "C" fn() -> c_int,
    o: AnyFFIPyApi,
}

static API: AtomicPtr<Api> = AtomicPtr::new(null_mut());

/// CPython's `PyMethodDef` (under our own name: a C file may include both headers).
#[repr(C)]
pub struct AnyFFIPyMethodDef {
    ml_name: *const c_char,
    ml_meth: *const c_void,
    ml_flags: c_int,
    ml_doc: *const c_char,
}

struct SyncDef(AnyFFIPyMethodDef);
// SAFETY: immutable after construction; CPython only reads it.
unsafe impl Sync for SyncDef {}

static CALL_DEF: SyncDef = SyncDef(AnyFFIPyMethodDef {
    ml_name: c"__call__".as_ptr(),
    ml_meth: function_call as *const c_void,
    ml_flags: METH_FASTCALL,
    // the first lines are the signature CPython reports (`inspect.signature`, `help`)
    ml_doc: c"__call__($self, /, *args)\n--\n\nCalls the FFI function with borrowed views of the arguments; returns the owned result."
        .as_ptr(),
});

/// Takes the package's table (copied; its objects must stay alive for good) and returns the
/// `PyMethodDef` of the native `Function.__call__`, or NULL when the table is not the one this
/// library expects (another size, a NULL entry). A later call replaces the table (the earlier
/// one is never freed: a call in flight may be reading it).
///
/// # Safety
/// `api` points at a filled table whose function addresses are those of the running CPython.
#[no_mangle]
pub unsafe extern "C" fn AnyFFIPyInstall(api: *const AnyFFIPyApi) -> *const AnyFFIPyMethodDef {
    if api.is_null() {
        return ptr::null();
    }
    // SAFETY: the caller passes a live table; `size` is read first and checked.
    let a = unsafe { &*api };
    if a.size != size_of::<AnyFFIPyApi>() {
        return ptr::null();
    }
    // SAFETY: as above, the whole table is there.
    let a = unsafe { ptr::read(api) };
    let fns = [
        a.Py_IncRef,
        a.Py_DecRef,
        a.PyObject_GetAttr,
        a.PyObject_VectorcallDict,
        a.PyObject_VectorcallMethod,
        a.PyLong_AsLongLongAndOverflow,
        a.PyLong_AsUnsignedLongLong,
        a.PyLong_FromLongLong,
        a.PyLong_FromUnsignedLongLong,
        a.PyFloat_AsDouble,
        a.PyFloat_FromDouble,
        a.PyBool_FromLong,
        a.PyUnicode_AsUTF8AndSize,
        a.PyCapsule_GetPointer,
        a.PyErr_Occurred,
        a.PyErr_ExceptionMatches,
        a.PyErr_Clear,
        a.PyErr_SetString,
        a.PyEval_SaveThread,
        a.PyEval_RestoreThread,
        a.PyType_IsSubtype,
        a.PyUnicode_DecodeUTF8,
        a.PyBytes_FromStringAndSize,
        a.PyGILState_Ensure,
        a.PyGILState_Release,
        a.Py_IsInitialized,
        a.PyErr_Fetch,
        a.PyErr_NormalizeException,
        a.PyException_SetTraceback,
        a.Py_IsFinalizing,
    ];
    let objs = [
        a.none,
        a.true_,
        a.int_type,
        a.float_type,
        a.bool_type,
        a.str_type,
        a.device_type,
        a.dtype_type,
        a.object_type,
        a.buffer_error,
        a.system_error,
        a.name_h,
        a.name_call,
        a.name_packed,
        a.name_dlpack,
        a.release_gil,
        a.keep_gil,
        a.slow_call,
        a.on_failed,
        a.on_result,
        a.run_callback,
        a.callback_error,
        a.write_result,
        a.object_of,
    ];
    if fns.iter().any(|p| p.is_null()) || objs.iter().any(|p| p.is_null()) {
        return ptr::null();
    }
    // SAFETY: every address is a non-NULL CPython function of the stated prototype (the caller's
    // contract).
    let api = unsafe {
        Api {
            incref: fn_at(a.Py_IncRef),
            decref: fn_at(a.Py_DecRef),
            getattr: fn_at(a.PyObject_GetAttr),
            vectorcall: fn_at(a.PyObject_VectorcallDict),
            vectorcall_method: fn_at(a.PyObject_VectorcallMethod),
            long_as_i64: fn_at(a.PyLong_AsLongLongAndOverflow),
            long_as_u64: fn_at(a.PyLong_AsUnsignedLongLong),
            long_from_i64: fn_at(a.PyLong_FromLongLong),
            long_from_u64: fn_at(a.PyLong_FromUnsignedLongLong),
            float_as_f64: fn_at(a.PyFloat_AsDouble),
            float_from_f64: fn_at(a.PyFloat_FromDouble),
            bool_from_long: fn_at(a.PyBool_FromLong),
            unicode_as_utf8: fn_at(a.PyUnicode_AsUTF8AndSize),
            capsule_pointer: fn_at(a.PyCapsule_GetPointer),
            err_occurred: fn_at(a.PyErr_Occurred),
            err_matches: fn_at(a.PyErr_ExceptionMatches),
            err_clear: fn_at(a.PyErr_Clear),
            err_set_string: fn_at(a.PyErr_SetString),
            save_thread: fn_at(a.PyEval_SaveThread),
            restore_thread: fn_at(a.PyEval_RestoreThread),
            is_subtype: fn_at(a.PyType_IsSubtype),
            decode_utf8: fn_at(a.PyUnicode_DecodeUTF8),
            bytes_from: fn_at(a.PyBytes_FromStringAndSize),
            gil_ensure: fn_at(a.PyGILState_Ensure),
            gil_release: fn_at(a.PyGILState_Release),
            is_initialized: fn_at(a.Py_IsInitialized),
            err_fetch: fn_at(a.PyErr_Fetch),
            err_normalize: fn_at(a.PyErr_NormalizeException),
            set_traceback: fn_at(a.PyException_SetTraceback),
            is_finalizing: fn_at(a.Py_IsFinalizing),
            o: a,
        }
    };
    API.store(Box::into_raw(Box::new(api)), Ordering::Release);
    &CALL_DEF.0
}

/// The function pointer (of type `F`) at address `p`.
///
/// # Safety
/// `p` is a non-NULL function of `F`'s prototype.
unsafe fn fn_at<F: Copy>(p: *const c_void) -> F {
    assert_eq!(size_of::<F>(), size_of::<*const c_void>());
    // SAFETY: same size (checked); the caller vouches for the prototype.
    unsafe { std::mem::transmute_copy(&p) }
}

thread_local! {
    /// The numpy arrays that native calls of this thread are passing right now, with the address
    /// of each one's DLTensor: what keeps the memory of a callback's argument view alive
    /// ([`AnyFFIPyArgOwner`]). Calls nest (a callback calls again), so this is a stack.
    static IN_FLIGHT: RefCell<Vec<(usize, usize)>> = const { RefCell::new(Vec::new()) };
}

/// The numpy array (borrowed `PyObject*`) whose DLTensor is at `dltensor`, if a native call of
/// this thread is passing it right now; else NULL. The package's `_arg_owner` asks here for the
/// views its callbacks receive (the pure-Python path finds them in its own frames instead).
#[no_mangle]
pub extern "C" fn AnyFFIPyArgOwner(dltensor: *const c_void) -> *mut c_void {
    let p = dltensor as usize;
    IN_FLIGHT
        .try_with(|v| {
            let v = v.borrow();
            v.iter().rev().find(|e| e.0 == p).map(|e| e.1)
        })
        .ok()
        .flatten()
        .map_or(null_mut(), |o| o as *mut c_void)
}

/// Whether this thread must not take the GIL: the interpreter is finalizing and this is not the
/// thread doing it. CPython 3.9-3.13 ends such a thread with `pthread_exit` when it asks for
/// the GIL, and that forced unwinding cannot cross Rust frames (the process aborts with
/// "exception not rethrown"; the official package aborts the same way). A thread already
/// waiting for the GIL when finalization begins is not covered.
fn must_not_take_gil(api: &Api) -> bool {
    // SAFETY: callable without the GIL (it reads the runtime's finalizing state).
    unsafe { (api.is_finalizing)() != 0 && libc::pthread_self() as usize != api.o.main_thread }
}

/// The type of `o` (the second word of every CPython object; checked by the package).
#[inline(always)]
unsafe fn type_of(o: Py) -> Py {
    // SAFETY: `o` is a live object (the caller's).
    unsafe { *(o as *const Py).add(1) }
}

/// What converting the arguments came to.
enum Conv {
    /// all converted: call
    Ready,
    /// an argument the native path does not take: the Python path converts them all
    Python,
    /// a Python exception is set: return NULL
    Raised,
}

/// The temporaries of one native call: the numpy capsules (released on drop) and this call's
/// entries on the thread's in-flight stack (popped on drop).
struct Temps<'a> {
    api: &'a Api,
    caps: [Py; MAX_ARGS],
    ncaps: usize,
    /// the stack's depth before this call's first array (None: it pushed none)
    in_flight_base: Option<usize>,
}

impl Temps<'_> {
    fn release(&mut self) {
        if let Some(base) = self.in_flight_base.take() {
            let _ = IN_FLIGHT.try_with(|v| v.borrow_mut().truncate(base));
        }
        for c in &self.caps[..self.ncaps] {
            // SAFETY: each capsule is a new reference taken by this call.
            unsafe { (self.api.decref)(*c) };
        }
        self.ncaps = 0;
    }
}

impl Drop for Temps<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

/// The native `Function.__call__` (`METH_FASTCALL`).
unsafe extern "C" fn function_call(slf: Py, args: *const Py, nargs: isize) -> Py {
    let api = API.load(Ordering::Acquire);
    if api.is_null() {
        return null_mut(); // unreachable: CPython gets this function from AnyFFIPyInstall only
    }
    // SAFETY: installed tables are never freed.
    let api = unsafe { &*api };
    // SAFETY: CPython passes `self` and `nargs` live arguments.
    match catch_unwind(AssertUnwindSafe(|| unsafe {
        call(api, slf, args, nargs as usize)
    })) {
        Ok(r) => r,
        Err(_) => {
            // SAFETY: the GIL is held here (every path re-takes it before unwinding could reach
            // this frame).
            unsafe {
                (api.err_set_string)(
                    api.o.system_error,
                    c"anyffi.Function.__call__: internal error (a panic in the native call)"
                        .as_ptr(),
                )
            };
            null_mut()
        }
    }
}

/// `callable(first, *args)` through vectorcall.
unsafe fn call_with(api: &Api, callable: Py, first: &[Py], args: *const Py, n: usize) -> Py {
    let mut v: Vec<Py> = Vec::with_capacity(first.len() + n);
    v.extend_from_slice(first);
    for i in 0..n {
        // SAFETY: `args` holds `n` live objects.
        v.push(unsafe { *args.add(i) });
    }
    // SAFETY: a live callable and `v.len()` live arguments, no keywords.
    unsafe { (api.vectorcall)(callable, v.as_ptr(), v.len(), null_mut()) }
}

/// The int `v` as u64 (None: an exception is set: not an int, or out of range).
///
/// # Safety
/// `v` is live and the GIL is held; the two functions are CPython's.
unsafe fn checked_u64(
    long_as_u64: unsafe extern "C" fn(Py) -> u64,
    err_occurred: unsafe extern "C" fn() -> Py,
    v: Py,
) -> Option<u64> {
    // SAFETY: the caller's contract.
    unsafe {
        let x = long_as_u64(v);
        (x != u64::MAX || err_occurred().is_null()).then_some(x)
    }
}

/// An object's int attribute `name` as u64 (None: an exception is set).
unsafe fn int_attr(api: &Api, o: Py, name: Py) -> Option<u64> {
    // SAFETY: live object and name; the results are checked.
    unsafe {
        let v = (api.getattr)(o, name);
        if v.is_null() {
            return None;
        }
        let x = checked_u64(api.long_as_u64, api.err_occurred, v);
        (api.decref)(v);
        x
    }
}

/// The value (borrowed) of the slot at byte offset `offset` of `o`, when the offset is known
/// and the slot is set; else None (read the attribute instead).
#[inline(always)]
unsafe fn slot(o: Py, offset: usize) -> Option<Py> {
    if offset == 0 {
        return None;
    }
    // SAFETY: `o` is an instance of the class whose slot lies at `offset` (the caller checked).
    let v = unsafe { *((o as *const u8).add(offset) as *const Py) };
    (!v.is_null()).then_some(v)
}

/// The handle in `o._h` of an `anyffi.Object` `o` (None: an exception is set).
#[inline(always)]
unsafe fn handle_of(api: &Api, o: Py) -> Option<u64> {
    // SAFETY: `o` is an anyffi.Object (the caller checked); the results are checked.
    unsafe {
        match slot(o, api.o.h_offset) {
            Some(v) => checked_u64(api.long_as_u64, api.err_occurred, v),
            None => int_attr(api, o, api.o.name_h),
        }
    }
}

/// References to a call's object arguments, taken before the GIL is released and dropped after
/// it is back (see `call`).
struct Held {
    objs: [*mut TVMFFIObject; MAX_ARGS],
    n: usize,
}

impl Held {
    /// # Safety
    /// The object cells are live objects.
    unsafe fn new(cells: &[TVMFFIAny]) -> Held {
        let mut held = Held {
            objs: [null_mut(); MAX_ARGS],
            n: 0,
        };
        let objects = cells
            .iter()
            .filter(|c| c.type_index >= kTVMFFIStaticObjectBegin)
            // SAFETY: object cells hold a pointer.
            .map(|c| unsafe { c.value.v_obj });
        for p in objects {
            if !p.is_null() && held.n < held.objs.len() {
                // SAFETY: per the caller.
                unsafe { crate::object::inc_ref(p) };
                held.objs[held.n] = p;
                held.n += 1;
            }
        }
        held
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        for &p in &self.objs[..self.n] {
            // SAFETY: a reference `new` took.
            unsafe { crate::object::dec_ref(p) };
        }
    }
}

unsafe fn call(api: &Api, slf: Py, args: *const Py, n: usize) -> Py {
    // SAFETY: (the whole body) the GIL is held except between save_thread and restore_thread, where
    // no Python object is touched; every object comes from CPython's arguments or the table.
    unsafe {
        let Some(h) = handle_of(api, slf) else {
            return null_mut();
        };
        let c = match slot(slf, api.o.call_offset) {
            Some(c) => c,
            None => {
                let c = (api.getattr)(slf, api.o.name_call);
                if c.is_null() {
                    return null_mut();
                }
                (api.decref)(c); // still held by `self`
                c
            }
        };
        let keep_gil = c == api.o.keep_gil;
        if h == 0 || n > MAX_ARGS || !keep_gil && c != api.o.release_gil {
            // closed (the Python path raises the error), more arguments than we convert, or an
            // entry point of the caller's own
            return call_with(api, api.o.slow_call, &[slf], args, n);
        }

        let mut cells = [TVMFFIAny::NONE; MAX_ARGS];
        let mut temps = Temps {
            api,
            caps: [null_mut(); MAX_ARGS],
            ncaps: 0,
            in_flight_base: None,
        };
        match convert(api, args, n, &mut cells, &mut temps) {
            Conv::Ready => {}
            Conv::Python => {
                temps.release();
                return call_with(api, api.o.slow_call, &[slf], args, n);
            }
            Conv::Raised => return null_mut(),
        }

        let mut result = TVMFFIAny::NONE;
        let at: *mut TVMFFIAny = &mut result;
        let func = h as usize as *mut c_void;
        let rc = if keep_gil {
            TVMFFIFunctionCall(func, cells.as_mut_ptr(), n as i32, at)
        } else {
            // Other Python threads run during the call: one may `close()` an object argument
            // (dropping the reference its Python object held), so the call holds references of
            // its own until the GIL is back. (Not the Function's: 7 ns on every call; closing
            // a Function another thread is calling is not supported, as in the official
            // package, whose `_move` has the same limit.)
            let _held = Held::new(&cells[..n]);
            let ts = (api.save_thread)();
            let rc = TVMFFIFunctionCall(func, cells.as_mut_ptr(), n as i32, at);
            if must_not_take_gil(api) {
                // a daemon thread at exit: wait for the process to end (as Python 3.14 does)
                loop {
                    std::thread::park();
                }
            }
            (api.restore_thread)(ts);
            rc
        };
        if !(api.err_occurred)().is_null() {
            // a Python exception arrived during the call: the signal handler that
            // TVMFFIEnvCheckSignals ran (Ctrl-C in a long native loop); its placeholder FFI
            // error and any result are dropped, the Python exception propagates
            drop_result(at);
            if rc != 0 {
                drop(take_raised());
            }
            return null_mut();
        }
        if rc != 0 {
            drop_result(at);
            temps.release(); // a retry with owned tensors makes its own
            let code = (api.long_from_i64)(rc as i64);
            if code.is_null() {
                drop(take_raised());
                return null_mut();
            }
            let r = call_with(api, api.o.on_failed, &[slf, code], args, n);
            (api.decref)(code);
            return r;
        }
        let raw = ptr::read(at);
        if let Some(r) = scalar_to_py(api, &raw) {
            return r;
        }
        match raw.type_index {
            kTVMFFISmallStr | kTVMFFIStr | kTVMFFISmallBytes | kTVMFFIBytes => {
                let b = crate::string::raw_any_bytes(&raw).unwrap_or_default();
                let (p, n) = (b.as_ptr() as *const c_char, b.len() as isize);
                let r = if raw.type_index == kTVMFFISmallStr || raw.type_index == kTVMFFIStr {
                    (api.decode_utf8)(p, n, ptr::null()) // strict, as the Python path
                } else {
                    (api.bytes_from)(p, n)
                };
                drop_result(at); // (after reading: a Str/Bytes object holds the bytes)
                r
            }
            _ => {
                // Python adopts the owned Any where it lies (its address escapes as an int) and
                // sets the type word to None once it has; a result it did not adopt (an
                // exception came first) is released here
                let index = (api.long_from_u64)((at as usize >> 3) as u64 - 1);
                if index.is_null() {
                    drop_result(at);
                    return null_mut();
                }
                let mut v = [null_mut(); 1 + MAX_ARGS];
                v[0] = index;
                v[1..1 + temps.ncaps].copy_from_slice(&temps.caps[..temps.ncaps]);
                let r = (api.vectorcall)(api.o.on_result, v.as_ptr(), 1 + temps.ncaps, null_mut());
                (api.decref)(index);
                drop_result(at);
                r
            }
        }
    }
}

/// Releases the owned result Any at `at` (None, or a POD, after Python adopted it).
unsafe fn drop_result(at: *mut TVMFFIAny) {
    // SAFETY: `at` is the call's result slot, an owned Any; read afresh (Python may have written
    // it through the address it was given).
    unsafe {
        let raw = ptr::read_volatile(at);
        ptr::write_volatile(at, TVMFFIAny::NONE);
        drop(Any::from_raw(raw));
    }
}

/// Writes each argument as a borrowed Any view into `cells`.
unsafe fn convert(
    api: &Api,
    args: *const Py,
    n: usize,
    cells: &mut [TVMFFIAny; MAX_ARGS],
    temps: &mut Temps,
) -> Conv {
    let o = &api.o;
    for (i, cell) in cells.iter_mut().enumerate().take(n) {
        // SAFETY: (the whole loop) `args` holds `n` live objects, the GIL is held, and every result
        // of the table's functions is checked before use.
        unsafe {
            let a = *args.add(i);
            let t = type_of(a);
            if let Some(v) = scalar_any(api, a, t) {
                *cell = v;
            } else if t == o.int_type {
                return Conv::Python; // beyond int64: an ffi.BigInt
            } else if t == o.str_type {
                let Some(bytes) = utf8_of(api, a) else {
                    return Conv::Python; // not encodable: the Python path says so
                };
                if bytes.len() <= MAX_SMALL_LEN {
                    *cell = StrObj::any_from(bytes); // a SmallStr, inline
                } else if bytes.contains(&0) {
                    return Conv::Python; // NUL inside: an ffi.String, not a C string
                } else {
                    // CPython keeps the UTF-8 (NUL-terminated) as long as the str lives, and
                    // the caller holds the str for the call
                    let p = bytes.as_ptr() as *const c_char;
                    *cell = any(kTVMFFIRawStr, 0, TVMFFIAnyValue { v_c_str: p });
                }
            } else if t == o.ndarray_type && !t.is_null() {
                let cap = (api.vectorcall_method)(
                    o.name_dlpack,
                    &a,
                    1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                    null_mut(),
                );
                if cap.is_null() {
                    if (api.err_matches)(o.buffer_error) != 0 {
                        // read-only, or a dtype DLPack cannot carry: the Python path's way
                        (api.err_clear)();
                        return Conv::Python;
                    }
                    return Conv::Raised;
                }
                temps.caps[temps.ncaps] = cap;
                temps.ncaps += 1;
                // a legacy DLManagedTensor capsule; its DLTensor is the first field
                let dl = (api.capsule_pointer)(cap, c"dltensor".as_ptr());
                if dl.is_null() {
                    return Conv::Raised;
                }
                let _ = IN_FLIGHT.try_with(|v| {
                    let mut v = v.borrow_mut();
                    temps.in_flight_base.get_or_insert(v.len());
                    v.push((dl as usize, a as usize));
                });
                *cell = any(kTVMFFIDLTensorPtr, 0, TVMFFIAnyValue { v_ptr: dl });
            } else if t == o.device_type || t == o.dtype_type {
                let Some(v) = int_attr(api, a, o.name_packed) else {
                    return Conv::Raised;
                };
                let ti = if t == o.device_type {
                    kTVMFFIDevice
                } else {
                    kTVMFFIDataType
                };
                *cell = any(ti, 0, TVMFFIAnyValue { v_uint64: v });
            } else if (api.is_subtype)(t, o.object_type) != 0 {
                let Some(h) = handle_of(api, a) else {
                    return Conv::Raised;
                };
                if h == 0 {
                    return Conv::Python; // closed, or a Tensor view: the object decides
                }
                let obj = h as usize as *const TVMFFIObject;
                let ti = (*obj).type_index;
                if ti < kTVMFFIStaticObjectBegin {
                    return Conv::Python;
                }
                *cell = any(
                    ti,
                    0,
                    TVMFFIAnyValue {
                        v_obj: obj as *mut TVMFFIObject,
                    },
                );
            } else {
                return Conv::Python;
            }
        }
    }
    Conv::Ready
}

/// The Any of `a` (of type `t`) when it is None, a bool, an int within int64 or a float; None
/// for any other value.
#[inline(always)]
unsafe fn scalar_any(api: &Api, a: Py, t: Py) -> Option<TVMFFIAny> {
    let o = &api.o;
    // SAFETY: a live object of type `t`; the GIL is held (the caller's).
    unsafe {
        if t == o.int_type {
            let mut overflow: c_int = 0;
            let v = (api.long_as_i64)(a, &mut overflow);
            (overflow == 0).then(|| any(kTVMFFIInt, 0, TVMFFIAnyValue { v_int64: v }))
        } else if t == o.float_type {
            let v = (api.float_as_f64)(a);
            Some(any(kTVMFFIFloat, 0, TVMFFIAnyValue { v_float64: v }))
        } else if a == o.none {
            Some(TVMFFIAny::NONE)
        } else if t == o.bool_type {
            let v = (a == o.true_) as i64;
            Some(any(kTVMFFIBool, 0, TVMFFIAnyValue { v_int64: v }))
        } else {
            None
        }
    }
}

/// The UTF-8 of the str `s`: CPython's own copy, NUL-terminated and alive as long as `s`.
/// None when it has none (lone surrogates; the error is cleared: the Python path reports it).
unsafe fn utf8_of<'a>(api: &Api, s: Py) -> Option<&'a [u8]> {
    // SAFETY: a live str; the GIL is held (the caller's).
    unsafe {
        let mut len: isize = 0;
        let p = (api.unicode_as_utf8)(s, &mut len);
        if p.is_null() {
            (api.err_clear)();
            return None;
        }
        Some(std::slice::from_raw_parts(p as *const u8, len as usize))
    }
}

/// The Python value (new reference; NULL with an exception set) of a None, bool, int or float
/// Any; None for the other kinds.
unsafe fn scalar_to_py(api: &Api, v: &TVMFFIAny) -> Option<Py> {
    // SAFETY: each arm reads the member its type index names; the GIL is held.
    unsafe {
        Some(match v.type_index {
            kTVMFFINone => {
                (api.incref)(api.o.none);
                api.o.none
            }
            kTVMFFIInt => (api.long_from_i64)(v.value.v_int64),
            kTVMFFIBool => (api.bool_from_long)((v.value.v_int64 != 0) as c_long),
            kTVMFFIFloat => (api.float_from_f64)(v.value.v_float64),
            _ => return None,
        })
    }
}

#[inline(always)]
fn any(type_index: i32, small_str_len: u32, value: TVMFFIAnyValue) -> TVMFFIAny {
    TVMFFIAny {
        type_index,
        small_str_len,
        value,
    }
}

// ---------------------------------------------------------------------------------------------
// Python callables as FFI functions
// ---------------------------------------------------------------------------------------------

/// Creates an `ffi.Function` (new reference in `*out`) that calls the Python callable
/// `callable` (borrowed; the function takes its own reference and drops it, with the GIL, when
/// it dies). Needs the table of [`AnyFFIPyInstall`] and the GIL. Not part of the TVM FFI ABI.
///
/// A call takes the GIL (`PyGILState_Ensure`, so any thread may call), converts None, bool,
/// int, float and string arguments itself and objects through the package's `object_of` (with a
/// new reference each), and calls the callable with them; a result of the simple types (a str
/// as an `ffi.String`) is written here too, others by the package's `write_result`. Any other
/// argument (a `DLTensor*`, bytes, a device...) makes the whole call the package's
/// (`run_callback`, which also closes the `DLTensor*` views it hands out). An exception becomes the FFI error the
/// package makes of it (`callback_error`: its kind, message and Python traceback).
///
/// # Safety
/// `callable` is a live Python object and the caller holds the GIL.
#[no_mangle]
pub unsafe extern "C" fn AnyFFIPyFunctionCreate(
    callable: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    super::guard(|| {
        let out = super::non_null(out, "AnyFFIPyFunctionCreate", "out")? as *mut *mut c_void;
        super::non_null(callable, "AnyFFIPyFunctionCreate", "callable")?;
        let api = API.load(Ordering::Acquire);
        if api.is_null() {
            return Err(crate::error::Error::runtime_error(
                "AnyFFIPyFunctionCreate: the Python table is not installed (AnyFFIPyInstall)",
            ));
        }
        // SAFETY: installed tables are never freed; the caller holds the GIL.
        let api = unsafe { &*api };
        // SAFETY: a live object (the caller's contract); the new reference is the function's,
        // dropped by `callback_deleter` (or below when creation fails).
        unsafe { (api.incref)(callable) };
        // SAFETY: the entry point and deleter take `callable` as `self_`.
        let f = unsafe {
            crate::function::Function::from_c(
                callable,
                Some(callback_entry),
                Some(callback_deleter),
            )
        };
        match f {
            Ok(f) => {
                // SAFETY: checked non-NULL out-parameter.
                unsafe { *out = f.into_raw() as *mut c_void };
                Ok(())
            }
            Err(e) => {
                // SAFETY: the reference taken above; the GIL is held.
                unsafe { (api.decref)(callable) };
                Err(e)
            }
        }
    })
}

/// Drops the function's reference to its callable, with the GIL (any thread may release the
/// last reference). Once the interpreter is finalizing (another thread's) or finalized, the
/// reference is left alone.
unsafe extern "C" fn callback_deleter(callable: *mut c_void) {
    let api = API.load(Ordering::Acquire);
    if api.is_null() {
        return;
    }
    // SAFETY: installed tables are never freed; the GIL is taken before the reference is
    // dropped, and not at all once Python is gone.
    unsafe {
        let api = &*api;
        if (api.is_initialized)() == 0 {
            return;
        }
        if must_not_take_gil(api) {
            return; // the reference stays (the process is ending)
        }
        let g = (api.gil_ensure)();
        (api.decref)(callable);
        (api.gil_release)(g);
    }
}

/// The `safe_call` of a function made by [`AnyFFIPyFunctionCreate`].
unsafe extern "C" fn callback_entry(
    callable: *mut c_void,
    args: *const TVMFFIAny,
    num_args: c_int,
    result: *mut TVMFFIAny,
) -> c_int {
    let api = API.load(Ordering::Acquire);
    if api.is_null() {
        crate::error::set_raised(crate::error::Error::internal(
            "anyffi Python callback: the Python table is gone",
        ));
        return -1;
    }
    // SAFETY: installed tables are never freed.
    let api = unsafe { &*api };
    if must_not_take_gil(api) {
        crate::error::set_raised(crate::error::Error::runtime_error(
            "a Python callback cannot run: the interpreter is finalizing",
        ));
        return -1;
    }
    // SAFETY: any thread may take the GIL this way; released below on every path.
    let g = unsafe { (api.gil_ensure)() };
    let n = num_args.max(0) as usize;
    // SAFETY: the caller's `num_args` argument views and result slot; the GIL is held.
    let rc = catch_unwind(AssertUnwindSafe(|| unsafe {
        callback(api, callable, args, n, result)
    }))
    .unwrap_or_else(|p| {
        crate::error::set_raised(crate::error::Error::from_panic(p));
        -1
    });
    // SAFETY: the state `gil_ensure` returned.
    unsafe { (api.gil_release)(g) };
    rc
}

/// The Python value of a borrowed argument view the native path converts (None: another kind,
/// for the package; Some(NULL): a Python exception is set).
unsafe fn arg_to_py(api: &Api, v: &TVMFFIAny) -> Option<Py> {
    // SAFETY: a valid view (the caller's); each arm reads the member its type index names.
    unsafe {
        if let Some(o) = scalar_to_py(api, v) {
            return Some(o);
        }
        Some(match v.type_index {
            kTVMFFISmallStr | kTVMFFIStr | kTVMFFIRawStr => {
                let b = crate::string::raw_any_bytes(v)?;
                (api.decode_utf8)(b.as_ptr() as *const c_char, b.len() as isize, ptr::null())
            }
            ti if ti >= kTVMFFIStaticObjectBegin => {
                // a new reference, given to the package's wrapper of its class (as `from_view`
                // takes one, through a ctypes call)
                let h = v.value.v_obj;
                crate::object::inc_ref(h);
                let hv = (api.long_from_u64)(h as usize as u64);
                if hv.is_null() {
                    crate::object::dec_ref(h);
                    return Some(null_mut());
                }
                let r = (api.vectorcall)(api.o.object_of, &hv, 1, null_mut());
                (api.decref)(hv);
                r
            }
            _ => return None,
        })
    }
}

unsafe fn callback(
    api: &Api,
    f: Py,
    args: *const TVMFFIAny,
    n: usize,
    result: *mut TVMFFIAny,
) -> c_int {
    // SAFETY: (the whole body) the GIL is held; `args` holds `n` views and `result` is the
    // caller's slot; every object made here is released once.
    unsafe {
        let mut objs = [null_mut(); MAX_ARGS];
        let mut made = 0;
        let mut native = n <= MAX_ARGS;
        while native && made < n {
            match arg_to_py(api, &*args.add(made)) {
                Some(o) if o.is_null() => {
                    for o in &objs[..made] {
                        (api.decref)(*o);
                    }
                    return report(api); // text that is not UTF-8: as the package says it
                }
                Some(o) => {
                    objs[made] = o;
                    made += 1;
                }
                None => native = false,
            }
        }
        if !native {
            for o in &objs[..made] {
                (api.decref)(*o);
            }
            let ints = [
                (api.long_from_u64)(args as usize as u64),
                (api.long_from_i64)(n as i64),
                (api.long_from_u64)(result as usize as u64),
            ];
            if ints.iter().any(|o| o.is_null()) {
                for o in ints.iter().filter(|o| !o.is_null()) {
                    (api.decref)(*o);
                }
                return report(api);
            }
            let v = [f, ints[0], ints[1], ints[2]];
            let r = (api.vectorcall)(api.o.run_callback, v.as_ptr(), 4, null_mut());
            for o in ints {
                (api.decref)(o);
            }
            if r.is_null() {
                return report(api);
            }
            let mut overflow = 0;
            let rc = (api.long_as_i64)(r, &mut overflow);
            (api.decref)(r);
            return if rc == 0 { 0 } else { -1 };
        }
        let r = (api.vectorcall)(f, objs.as_ptr(), n, null_mut());
        for o in &objs[..n] {
            (api.decref)(*o);
        }
        if r.is_null() {
            return report(api);
        }
        let rc = write_result(api, r, result);
        (api.decref)(r);
        rc
    }
}

/// Writes the callback's result `r` (borrowed) as the owned Any in `*result`.
unsafe fn write_result(api: &Api, r: Py, result: *mut TVMFFIAny) -> c_int {
    let o = &api.o;
    // SAFETY: (the whole body) the GIL is held, `r` is live, `result` is the caller's slot.
    unsafe {
        let t = type_of(r);
        let v = match scalar_any(api, r, t) {
            // a str as an ffi.String (not encodable: the package's writer says so)
            None if t == o.str_type => utf8_of(api, r).map(StrObj::any_from),
            v => v,
        };
        if let Some(v) = v {
            ptr::write(result, v);
            return 0;
        }
        let at = (result as usize >> 3) as u64 - 1;
        let index = (api.long_from_u64)(at);
        if index.is_null() {
            return report(api);
        }
        let v = [r, index];
        let w = (api.vectorcall)(o.write_result, v.as_ptr(), 2, null_mut());
        (api.decref)(index);
        if w.is_null() {
            return report(api);
        }
        (api.decref)(w);
        0
    }
}

/// Turns the Python exception being raised into the thread's FFI error (through the package's
/// `callback_error`; when even that fails, at the recursion limit, an error of the exception
/// class's name) and returns -1.
unsafe fn report(api: &Api) -> c_int {
    // SAFETY: (the whole body) the GIL is held and an exception is set; the three references
    // fetched are released once.
    unsafe {
        let (mut t, mut v, mut tb) = (null_mut(), null_mut(), null_mut());
        (api.err_fetch)(&mut t, &mut v, &mut tb);
        if t.is_null() {
            crate::error::set_raised(crate::error::Error::internal(
                "a Python callback failed without an exception",
            ));
            return -1;
        }
        (api.err_normalize)(&mut t, &mut v, &mut tb);
        let mut done = false;
        if !v.is_null() {
            if !tb.is_null() {
                (api.set_traceback)(v, tb);
            }
            let r = (api.vectorcall)(api.o.callback_error, &v, 1, null_mut());
            if r.is_null() {
                (api.err_clear)();
            } else {
                (api.decref)(r);
                done = true;
            }
        }
        if !done {
            // `tp_name` follows the variable-size object header of every type object
            let name = *(t as *const *const c_char).add(3);
            let kind = if name.is_null() {
                "RuntimeError".to_owned()
            } else {
                let full = std::ffi::CStr::from_ptr(name).to_string_lossy();
                full.rsplit('.').next().unwrap_or("RuntimeError").to_owned()
            };
            crate::error::set_raised(crate::error::Error::new(
                &kind,
                "raised in a Python callback (its message could not be formed: no stack left)",
            ));
        }
        for o in [t, v, tb] {
            if !o.is_null() {
                (api.decref)(o);
            }
        }
        -1
    }
}

// ---------------------------------------------------------------------------------------------
// Reference counts from Python
// ---------------------------------------------------------------------------------------------

/// What the refcount builtins need ([`AnyFFIPyRefcountInstall`]); `size` is `sizeof` this
/// struct.
#[repr(C)]
pub struct AnyFFIPyRefcountApi {
    pub size: usize,
    pub PyLong_AsUnsignedLongLong: *const c_void,
    pub PyLong_FromLongLong: *const c_void,
    pub PyErr_Occurred: *const c_void,
    pub none: AnyFFIPyObjectPtr,
}

struct RefcountApi {
    long_as_u64: unsafe extern "C" fn(Py) -> u64,
    long_from_i64: unsafe extern "C" fn(i64) -> Py,
    err_occurred: unsafe extern "C" fn() -> Py,
    none: Py,
}

static REFCOUNT_API: AtomicPtr<RefcountApi> = AtomicPtr::new(null_mut());

/// `METH_O`: `PyObject* f(PyObject* self, PyObject* arg)`.
const METH_O: c_int = 0x08;

struct SyncDefs([AnyFFIPyMethodDef; 2]);
// SAFETY: immutable after construction; CPython only reads it.
unsafe impl Sync for SyncDefs {}

static REFCOUNT_DEFS: SyncDefs = SyncDefs([
    AnyFFIPyMethodDef {
        ml_name: c"TVMFFIObjectIncRef".as_ptr(),
        ml_meth: object_inc_ref as *const c_void,
        ml_flags: METH_O,
        ml_doc: c"TVMFFIObjectIncRef($module, handle, /)\n--\n\nTVMFFIObjectIncRef(handle): 0, or -1 with the FFI error set.".as_ptr(),
    },
    AnyFFIPyMethodDef {
        ml_name: c"TVMFFIObjectDecRef".as_ptr(),
        ml_meth: object_dec_ref as *const c_void,
        ml_flags: METH_O,
        ml_doc: c"TVMFFIObjectDecRef($module, handle, /)\n--\n\nTVMFFIObjectDecRef(handle): 0, or -1 with the FFI error set.".as_ptr(),
    },
]);

/// Returns two `PyMethodDef`s (IncRef, DecRef), for builtins that call `TVMFFIObjectIncRef` /
/// `TVMFFIObjectDecRef` on a handle given as a Python int (or None for NULL), keeping the GIL,
/// and return the C return code: what the package's ctypes bindings of the two do, without a
/// ctypes call (~250 ns; every Python wrapper of an object pays one when it dies). NULL when
/// the table is not the one this library expects. The package makes them when its C bindings
/// load, before [`AnyFFIPyInstall`].
///
/// # Safety
/// `api` points at a filled table whose function addresses are those of the running CPython.
#[no_mangle]
pub unsafe extern "C" fn AnyFFIPyRefcountInstall(
    api: *const AnyFFIPyRefcountApi,
) -> *const AnyFFIPyMethodDef {
    // SAFETY: the caller's table; `size` is checked before the rest is read.
    unsafe {
        if api.is_null() || (*api).size != size_of::<AnyFFIPyRefcountApi>() {
            return ptr::null();
        }
        let a = &*api;
        if a.PyLong_AsUnsignedLongLong.is_null()
            || a.PyLong_FromLongLong.is_null()
            || a.PyErr_Occurred.is_null()
            || a.none.is_null()
        {
            return ptr::null();
        }
        let t = RefcountApi {
            long_as_u64: fn_at(a.PyLong_AsUnsignedLongLong),
            long_from_i64: fn_at(a.PyLong_FromLongLong),
            err_occurred: fn_at(a.PyErr_Occurred),
            none: a.none,
        };
        REFCOUNT_API.store(Box::into_raw(Box::new(t)), Ordering::Release);
    }
    REFCOUNT_DEFS.0.as_ptr()
}

/// The handle an int (or None) names; None: a Python exception is set.
unsafe fn handle_arg(api: &RefcountApi, arg: Py) -> Option<*mut c_void> {
    if arg == api.none {
        return Some(null_mut());
    }
    // SAFETY: a live object (CPython's argument); the GIL is held.
    unsafe {
        checked_u64(api.long_as_u64, api.err_occurred, arg).map(|x| x as usize as *mut c_void)
    }
}

unsafe extern "C" fn object_inc_ref(_module: Py, arg: Py) -> Py {
    refcount_call(arg, super::TVMFFIObjectIncRef)
}

unsafe extern "C" fn object_dec_ref(_module: Py, arg: Py) -> Py {
    refcount_call(arg, super::TVMFFIObjectDecRef)
}

fn refcount_call(arg: Py, f: unsafe extern "C" fn(*mut c_void) -> c_int) -> Py {
    let api = REFCOUNT_API.load(Ordering::Acquire);
    if api.is_null() {
        return null_mut(); // unreachable: the builtins exist only after the install
    }
    // SAFETY: installed tables are never freed; CPython passes a live argument and holds the
    // GIL; the handle is the caller's (as with the C function itself).
    unsafe {
        let api = &*api;
        let Some(h) = handle_arg(api, arg) else {
            return null_mut();
        };
        (api.long_from_i64)(f(h) as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_refuses_a_table_it_cannot_use() {
        // SAFETY: NULL and tables of zeros are what the checks must refuse before any use.
        unsafe {
            assert!(AnyFFIPyInstall(ptr::null()).is_null());
            let mut zeros = [0usize; size_of::<AnyFFIPyApi>() / size_of::<usize>()];
            zeros[0] = size_of::<AnyFFIPyApi>() - 8; // another layout
            assert!(AnyFFIPyInstall(zeros.as_ptr() as *const AnyFFIPyApi).is_null());
            zeros[0] = size_of::<AnyFFIPyApi>(); // the right size, NULL entries
            assert!(AnyFFIPyInstall(zeros.as_ptr() as *const AnyFFIPyApi).is_null());
        }
        assert!(API.load(Ordering::Acquire).is_null());
    }

    #[test]
    fn refcount_install_refuses_a_table_it_cannot_use() {
        // SAFETY: NULL and tables of zeros are what the checks must refuse before any use.
        unsafe {
            assert!(AnyFFIPyRefcountInstall(ptr::null()).is_null());
            let mut zeros = [0usize; size_of::<AnyFFIPyRefcountApi>() / size_of::<usize>()];
            zeros[0] = 8;
            assert!(AnyFFIPyRefcountInstall(zeros.as_ptr() as *const _).is_null());
            zeros[0] = size_of::<AnyFFIPyRefcountApi>();
            assert!(AnyFFIPyRefcountInstall(zeros.as_ptr() as *const _).is_null());
        }
        assert!(REFCOUNT_API.load(Ordering::Acquire).is_null());
    }

    #[test]
    fn arg_owner_knows_only_arrays_in_flight_on_this_thread() {
        let x = 0u64;
        let p = &x as *const u64 as *const c_void;
        assert!(AnyFFIPyArgOwner(p).is_null());
        IN_FLIGHT.with(|v| v.borrow_mut().push((p as usize, 0x1230)));
        assert_eq!(AnyFFIPyArgOwner(p) as usize, 0x1230);
        let addr = p as usize;
        std::thread::scope(|s| {
            s.spawn(|| assert!(AnyFFIPyArgOwner(addr as *const c_void).is_null()));
        });
        IN_FLIGHT.with(|v| v.borrow_mut().clear());
        assert!(AnyFFIPyArgOwner(p).is_null());
    }
}
