//! Modules made by C++ code: subclasses of `tvm::ffi::ModuleObj` built on the official headers
//! (the documented way to write a custom module kind). Their methods are C++ virtual functions,
//! which may throw; this file calls them for the `ffi.Module*` globals and the C++ entry points.
//!
//! Rationale: Rust cannot catch a C++ exception (unwinding one through Rust frames is undefined
//! or aborts), so each call goes through `anyffi_cxx_module_call`, a C++ function that makes the
//! virtual call inside `try` and returns a status: `registry/cxx/module_calls.cc`, assembled
//! from the generated `cxx_module_calls.s` (so the build needs no C++ compiler). A thrown
//! `tvm::ffi::Error` comes back as that error object; any other `std::exception` becomes an
//! InternalError with its `what()`, as the official library's safe-call wrappers do.
//!
//! The C++ side of a subclass needs `typeinfo` and `vtable for tvm::ffi::ModuleObj` and the two
//! out-of-line virtual functions from this library: see `cxx_api.rs`.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr::{null, null_mut};

use anyffi::abi::{TVMFFIAny, TVMFFIObject};
use anyffi::array::Array;
use anyffi::{Any, Error, Function, ObjectRef, Result};

use crate::module::{Module, ModuleObj};

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
std::arch::global_asm!(include_str!("cxx_module_calls.s"), options(att_syntax));

/// Operation codes of `anyffi_cxx_module_call` (the `Op` enum of `module_calls.cc`; 8 was
/// `SaveToBytes`, which nothing here calls).
#[derive(Clone, Copy)]
#[repr(i32)]
enum Op {
    Kind = 0,
    PropertyMask = 1,
    GetFunction = 2,
    Implements = 3,
    FunctionDoc = 4,
    FunctionMetadata = 5,
    WriteToFile = 6,
    WriteFormats = 7,
    InspectSource = 9,
    ImportModule = 10,
    ClearImports = 11,
}

impl Op {
    /// The C++ member function, for messages.
    fn name(self) -> &'static str {
        match self {
            Op::Kind => "kind",
            Op::PropertyMask => "GetPropertyMask",
            Op::GetFunction => "GetFunction",
            Op::Implements => "ImplementsFunction",
            Op::FunctionDoc => "GetFunctionDoc",
            Op::FunctionMetadata => "GetFunctionMetadata",
            Op::WriteToFile => "WriteToFile",
            Op::WriteFormats => "GetWriteFormats",
            Op::InspectSource => "InspectSource",
            Op::ImportModule => "ImportModule",
            Op::ClearImports => "ClearImports",
        }
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
extern "C" {
    fn anyffi_cxx_module_call(
        op: c_int,
        this: *mut c_void,
        a: *const c_void,
        b: *const c_void,
        out: *mut c_void,
        error: *mut *mut TVMFFIObject,
        what: *mut *mut c_char,
    ) -> c_int;
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
extern "C" {
    fn anyffi_cxx_dlopen(path: *const c_char, mode: c_int) -> *mut c_void;
}

/// `dlopen`, except that a C++ exception from the library's static initialisers is printed
/// (what it says) before the process aborts, as it does in the official library; unhandled,
/// it reached Rust frames, whose abort loses the message (`module_calls.cc`).
///
/// # Safety
/// As `dlopen`: `path` is a NUL-terminated string; loading runs the library's initialisers.
pub(crate) unsafe fn dlopen(path: *const c_char, mode: c_int) -> *mut c_void {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        // SAFETY: per the caller.
        unsafe { anyffi_cxx_dlopen(path, mode) }
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        // SAFETY: per the caller.
        unsafe { libc::dlopen(path, mode) }
    }
}

/// Runs `op` on the C++ module `m`; a C++ exception becomes the error it carries.
///
/// # Safety
/// `m` must be a module made by C++ code; `a`, `b` and `out` must be what `op` expects
/// (`module_calls.cc`).
unsafe fn call(
    op: Op,
    m: &ModuleObj,
    a: *const c_void,
    b: *const c_void,
    out: *mut c_void,
) -> Result<()> {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        // C++ `this`: the vptr, 8 bytes before the header.
        let this = (m as *const ModuleObj as *mut u8).wrapping_sub(8) as *mut c_void;
        let (mut error, mut what) = (null_mut(), null_mut());
        // SAFETY: per the caller; the out-parameters are ours.
        let rc =
            unsafe { anyffi_cxx_module_call(op as c_int, this, a, b, out, &mut error, &mut what) };
        match rc {
            0 => Ok(()),
            1 => match std::ptr::NonNull::new(error) {
                // SAFETY: the shim took a reference to the thrown error's object for us.
                Some(e) => Err(unsafe { Error::from_raw_owned(e) }),
                None => Err(Error::internal(
                    "a C++ module threw an empty tvm::ffi::Error",
                )),
            },
            2 => {
                // SAFETY: `what` is NULL or a malloc'd NUL-terminated copy.
                let text = unsafe {
                    let t = if what.is_null() {
                        String::new()
                    } else {
                        CStr::from_ptr(what).to_string_lossy().into_owned()
                    };
                    libc::free(what as *mut c_void);
                    t
                };
                Err(Error::internal(text))
            }
            3 => Err(Error::internal(format!(
                "ModuleObj::{}: a C++ module threw an exception that is not a std::exception",
                op.name()
            ))),
            _ => Err(Error::internal(format!(
                "ModuleObj::{}: unknown operation",
                op.name()
            ))),
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        let _ = (m, a, b, out);
        Err(Error::runtime_error(format!(
            "ModuleObj::{}: modules made by C++ code are supported on x86-64 Linux only",
            op.name()
        )))
    }
}

/// Runs `op` with at most one `const String&` argument (`name`) and returns its result slot,
/// which starts as `out`.
///
/// # Safety
/// `m` must be a module made by C++ code, and `R` the result type `op` writes
/// (`module_calls.cc`).
unsafe fn call_for<R>(op: Op, m: &ModuleObj, name: Option<&str>, mut out: R) -> Result<R> {
    // A C++ `String` is one `TVMFFIAny` cell, passed by reference.
    let cell = name.map(Any::from);
    let arg = cell
        .as_ref()
        .map_or(null(), |c| c.raw() as *const TVMFFIAny as *const c_void);
    // SAFETY: per the caller; `cell` outlives the call.
    unsafe { call(op, m, arg, null(), &mut out as *mut R as *mut c_void)? };
    Ok(out)
}

/// `const char* kind() const`.
pub(crate) fn kind(m: &ModuleObj) -> Result<String> {
    // SAFETY: a C++ module; the result is a `const char*`.
    let p = unsafe { call_for(Op::Kind, m, None, null::<c_char>())? };
    if p.is_null() {
        return Ok(String::new());
    }
    // SAFETY: kind() returns a NUL-terminated string that lives as long as the module.
    Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// `int GetPropertyMask() const`.
pub(crate) fn property_mask(m: &ModuleObj) -> Result<i64> {
    // SAFETY: a C++ module; the result is an int.
    Ok(unsafe { call_for(Op::PropertyMask, m, None, 0 as c_int)? } as i64)
}

/// `Optional<Function> GetFunction(const String& name)`.
pub(crate) fn get_function(m: &ModuleObj, name: &str) -> Result<Option<Function>> {
    // SAFETY: a C++ module; the result is an owned Function or NULL.
    unsafe {
        let p = call_for(Op::GetFunction, m, Some(name), null_mut::<TVMFFIObject>())?;
        Ok(std::ptr::NonNull::new(p).map(|p| Function::from_raw_owned(p.cast())))
    }
}

/// `bool ImplementsFunction(const String& name)`.
pub(crate) fn implements(m: &ModuleObj, name: &str) -> Result<bool> {
    // SAFETY: a C++ module; the result is an int.
    Ok(unsafe { call_for(Op::Implements, m, Some(name), 0 as c_int)? } != 0)
}

/// A `String` or `Optional<String>` result: None, or the text.
fn string_result(op: Op, m: &ModuleObj, arg: &str) -> Result<Option<String>> {
    // SAFETY: a C++ module; the result is an owned String or Optional<String> cell.
    let v = unsafe { Any::from_raw(call_for(op, m, Some(arg), TVMFFIAny::NONE)?) };
    if v.type_index() == anyffi::abi::kTVMFFINone {
        return Ok(None);
    }
    v.get::<String>().map(Some)
}

/// `Optional<String> GetFunctionDoc(const String& name)`.
pub(crate) fn function_doc(m: &ModuleObj, name: &str) -> Result<Option<String>> {
    string_result(Op::FunctionDoc, m, name)
}

/// `Optional<String> GetFunctionMetadata(const String& name)`.
pub(crate) fn function_metadata(m: &ModuleObj, name: &str) -> Result<Option<String>> {
    string_result(Op::FunctionMetadata, m, name)
}

/// `String InspectSource(const String& format) const`.
pub(crate) fn inspect_source(m: &ModuleObj, format: &str) -> Result<String> {
    Ok(string_result(Op::InspectSource, m, format)?.unwrap_or_default())
}

/// `Array<String> GetWriteFormats() const`.
pub(crate) fn write_formats(m: &ModuleObj) -> Result<Array> {
    // SAFETY: a C++ module; the result is an owned Array (never NULL in C++).
    unsafe {
        let p = call_for(Op::WriteFormats, m, None, null_mut::<TVMFFIObject>())?;
        Ok(std::ptr::NonNull::new(p)
            .map_or_else(Array::empty, |p| ObjectRef::from_raw_owned(p.cast())))
    }
}

/// `void WriteToFile(const String& file_name, const String& format) const`.
pub(crate) fn write_to_file(m: &ModuleObj, path: &str, format: &str) -> Result<()> {
    let (path, format) = (Any::from(path), Any::from(format));
    // SAFETY: a C++ module; two live String cells.
    unsafe {
        call(
            Op::WriteToFile,
            m,
            path.raw() as *const TVMFFIAny as *const c_void,
            format.raw() as *const TVMFFIAny as *const c_void,
            null_mut(),
        )
    }
}

/// `virtual void ImportModule(const Module& other)`.
pub(crate) fn import_module(m: &ModuleObj, other: &Module) -> Result<()> {
    let other_ptr: *mut TVMFFIObject = other.as_raw();
    // SAFETY: a C++ module; `const Module&` is a pointer to the object pointer, alive here.
    unsafe {
        call(
            Op::ImportModule,
            m,
            &other_ptr as *const _ as *const c_void,
            null(),
            null_mut(),
        )
    }
}

/// `virtual void ClearImports()`.
pub(crate) fn clear_imports(m: &ModuleObj) -> Result<()> {
    // SAFETY: a C++ module.
    unsafe { call(Op::ClearImports, m, null(), null(), null_mut()) }
}
