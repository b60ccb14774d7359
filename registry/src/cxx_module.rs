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

/// A C++ `String` holding `s` (a `TVMFFIAny` cell), for `const String&` arguments.
fn string_cell(s: &str) -> Any {
    Any::from(s)
}

/// A `TVMFFIAny` owned by C++ until written: None.
fn empty_cell() -> TVMFFIAny {
    TVMFFIAny::NONE
}

/// `const char* kind() const`.
pub(crate) fn kind(m: &ModuleObj) -> Result<String> {
    let mut out: *const c_char = null();
    // SAFETY: a C++ module; the result is a `const char*`.
    unsafe {
        call(
            Op::Kind,
            m,
            null(),
            null(),
            &mut out as *mut _ as *mut c_void,
        )?
    };
    if out.is_null() {
        return Ok(String::new());
    }
    // SAFETY: kind() returns a NUL-terminated string that lives as long as the module.
    Ok(unsafe { CStr::from_ptr(out) }
        .to_string_lossy()
        .into_owned())
}

/// `int GetPropertyMask() const`.
pub(crate) fn property_mask(m: &ModuleObj) -> Result<i64> {
    let mut out: c_int = 0;
    // SAFETY: a C++ module; the result is an int.
    unsafe {
        call(
            Op::PropertyMask,
            m,
            null(),
            null(),
            &mut out as *mut _ as *mut c_void,
        )?
    };
    Ok(out as i64)
}

/// `Optional<Function> GetFunction(const String& name)`.
pub(crate) fn get_function(m: &ModuleObj, name: &str) -> Result<Option<Function>> {
    let name = string_cell(name);
    let mut out: *mut TVMFFIObject = null_mut();
    // SAFETY: a C++ module; `name` is a live String cell; the result an owned object or NULL.
    unsafe {
        call(
            Op::GetFunction,
            m,
            name.raw() as *const TVMFFIAny as *const c_void,
            null(),
            &mut out as *mut _ as *mut c_void,
        )?;
        Ok(std::ptr::NonNull::new(out).map(|p| Function::from_raw_owned(p.cast())))
    }
}

/// `bool ImplementsFunction(const String& name)`.
pub(crate) fn implements(m: &ModuleObj, name: &str) -> Result<bool> {
    let name = string_cell(name);
    let mut out: c_int = 0;
    // SAFETY: as above; the result is an int.
    unsafe {
        call(
            Op::Implements,
            m,
            name.raw() as *const TVMFFIAny as *const c_void,
            null(),
            &mut out as *mut _ as *mut c_void,
        )?
    };
    Ok(out != 0)
}

/// An owned `Optional<String>`/`String`/`Bytes` result cell.
///
/// # Safety
/// `cell` must hold an owned value the caller gives away.
unsafe fn owned_cell(cell: TVMFFIAny) -> Any {
    // SAFETY: per the caller.
    unsafe { Any::from_raw(cell) }
}

fn optional_string_result(op: Op, m: &ModuleObj, name: &str) -> Result<Option<String>> {
    let name = string_cell(name);
    let mut out = empty_cell();
    // SAFETY: a C++ module; the result is an owned Optional<String> cell.
    let v = unsafe {
        call(
            op,
            m,
            name.raw() as *const TVMFFIAny as *const c_void,
            null(),
            &mut out as *mut _ as *mut c_void,
        )?;
        owned_cell(out)
    };
    if v.type_index() == anyffi::abi::kTVMFFINone {
        return Ok(None);
    }
    v.get::<String>().map(Some)
}

/// `Optional<String> GetFunctionDoc(const String& name)`.
pub(crate) fn function_doc(m: &ModuleObj, name: &str) -> Result<Option<String>> {
    optional_string_result(Op::FunctionDoc, m, name)
}

/// `Optional<String> GetFunctionMetadata(const String& name)`.
pub(crate) fn function_metadata(m: &ModuleObj, name: &str) -> Result<Option<String>> {
    optional_string_result(Op::FunctionMetadata, m, name)
}

/// `String InspectSource(const String& format) const`.
pub(crate) fn inspect_source(m: &ModuleObj, format: &str) -> Result<String> {
    let format = string_cell(format);
    let mut out = empty_cell();
    // SAFETY: a C++ module; the result is an owned String cell.
    let v = unsafe {
        call(
            Op::InspectSource,
            m,
            format.raw() as *const TVMFFIAny as *const c_void,
            null(),
            &mut out as *mut _ as *mut c_void,
        )?;
        owned_cell(out)
    };
    v.get::<String>()
}

/// `Array<String> GetWriteFormats() const`.
pub(crate) fn write_formats(m: &ModuleObj) -> Result<Array> {
    let mut out: *mut TVMFFIObject = null_mut();
    // SAFETY: a C++ module; the result is an owned Array (never NULL in C++).
    unsafe {
        call(
            Op::WriteFormats,
            m,
            null(),
            null(),
            &mut out as *mut _ as *mut c_void,
        )?;
        Ok(std::ptr::NonNull::new(out)
            .map_or_else(Array::empty, |p| ObjectRef::from_raw_owned(p.cast())))
    }
}

/// `void WriteToFile(const String& file_name, const String& format) const`.
pub(crate) fn write_to_file(m: &ModuleObj, path: &str, format: &str) -> Result<()> {
    let (path, format) = (string_cell(path), string_cell(format));
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
