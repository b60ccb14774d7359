//! The exported C symbols of the global function table and the environment (`c_api.h`
//! "Function registry", `c_env_api.h`). Thin shells over `global` and `env`.
// The `# Safety` contract of every exported function is the C one in its doc comment.
#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr::NonNull;

use anyffi::abi::*;
use anyffi::capi::{guard, non_null, str_arg};
use anyffi::error::{bytes_of, Error};
use anyffi::{Function, FunctionObj, ObjectRef};

use crate::{env, global};

unsafe fn c_str_arg<'a>(p: *const c_char, func: &str, arg: &str) -> anyffi::Result<&'a str> {
    let p = non_null(p, func, arg)?;
    // SAFETY: the caller passes a NUL-terminated string.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| Error::value_error(format!("{func}: `{arg}` is not valid UTF-8")))
}

/// A borrowed function handle as a new owned reference, type-checked.
unsafe fn function_arg(f: *mut c_void, func: &str) -> anyffi::Result<Function> {
    let p = NonNull::new(f as *mut FunctionObj)
        .ok_or_else(|| Error::value_error(format!("{func}: `f` must not be NULL")))?;
    // SAFETY: the caller passes a live object.
    let ti = unsafe { p.as_ref().header.type_index };
    if ti != kTVMFFIFunction {
        return Err(Error::type_error(format!(
            "{func}: expected an ffi.Function, got {}",
            anyffi::type_table::type_key_of(ti)
        )));
    }
    // SAFETY: checked live function; we take our own reference.
    Ok(unsafe { ObjectRef::from_raw_borrowed(p) })
}

/// Registers `f` (borrowed; the table takes its own reference) under `name`. An existing name is
/// a RuntimeError unless `allow_override` is non-zero.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionSetGlobal(
    name: *const TVMFFIByteArray,
    f: *mut c_void,
    allow_override: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller passes a valid byte array and a live function.
        let name = unsafe { str_arg(name, "TVMFFIFunctionSetGlobal", "name") }?;
        // SAFETY: as above.
        let f = unsafe { function_arg(f, "TVMFFIFunctionSetGlobal") }?;
        global::register_global(name, global::plain_entry(f), allow_override != 0)
    })
}

/// Registers a global function from a method description (name, doc, metadata, flags, and the
/// `ffi.Function` in `method`, retained).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionSetGlobalFromMethodInfo(
    info: *const TVMFFIMethodInfo,
    allow_override: c_int,
) -> c_int {
    guard(|| {
        let info = non_null(info, "TVMFFIFunctionSetGlobalFromMethodInfo", "method_info")?;
        // SAFETY: the caller passes a valid description.
        let info = unsafe { &*info };
        // SAFETY: the name is a valid byte array.
        let name = unsafe {
            str_arg(
                &info.name,
                "TVMFFIFunctionSetGlobalFromMethodInfo",
                "method_info->name",
            )
        }?;
        if info.method.type_index != kTVMFFIFunction {
            return Err(Error::type_error(format!(
                "TVMFFIFunctionSetGlobalFromMethodInfo: `{name}`: method must be an ffi.Function, got {}",
                anyffi::type_table::type_key_of(info.method.type_index)
            )));
        }
        // SAFETY: checked function value.
        let f = unsafe {
            function_arg(
                info.method.value.v_obj as *mut c_void,
                "TVMFFIFunctionSetGlobalFromMethodInfo",
            )
        }?;
        // SAFETY: doc and metadata are valid byte arrays.
        let (doc, metadata) = unsafe { (bytes_of(&info.doc), bytes_of(&info.metadata)) };
        let entry = global::GlobalEntry {
            function: f,
            doc: String::from_utf8_lossy(doc).into_owned(),
            metadata: String::from_utf8_lossy(metadata).into_owned(),
            flags: info.flags,
        };
        global::register_global_from_method_info(name, entry, allow_override != 0)
    })
}

/// Writes a new reference to the function registered under `name`, or NULL (rc 0) when missing.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionGetGlobal(
    name: *const TVMFFIByteArray,
    out: *mut *mut c_void,
) -> c_int {
    guard(|| {
        let out = non_null(out, "TVMFFIFunctionGetGlobal", "out")? as *mut *mut c_void;
        // SAFETY: the caller passes a valid byte array.
        let name = unsafe { str_arg(name, "TVMFFIFunctionGetGlobal", "name") }?;
        let f =
            global::get_global(name).map_or(std::ptr::null_mut(), |f| f.into_raw() as *mut c_void);
        // SAFETY: checked out-parameter.
        unsafe { *out = f };
        Ok(())
    })
}

/// Initialises `*handle_addr` once with `init_func` (thread-safe).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIHandleInitOnce(
    handle_addr: *mut *mut c_void,
    init_func: Option<unsafe extern "C" fn(*mut *mut c_void) -> c_int>,
) -> c_int {
    let mut rc = 0;
    let g = guard(|| {
        let addr =
            non_null(handle_addr, "TVMFFIHandleInitOnce", "handle_addr")? as *mut *mut c_void;
        let init = init_func.ok_or_else(|| {
            Error::value_error("TVMFFIHandleInitOnce: `init_func` must not be NULL")
        })?;
        // SAFETY: the caller passes a valid slot.
        rc = unsafe { env::handle_init_once(addr, init) }?;
        Ok(())
    });
    if g != 0 {
        g
    } else {
        rc
    }
}

/// Clears `*handle_addr` and runs `deinit_func` on its old value, if any.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIHandleDeinitOnce(
    handle_addr: *mut *mut c_void,
    deinit_func: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
) -> c_int {
    let mut rc = 0;
    let g = guard(|| {
        let addr =
            non_null(handle_addr, "TVMFFIHandleDeinitOnce", "handle_addr")? as *mut *mut c_void;
        let deinit = deinit_func.ok_or_else(|| {
            Error::value_error("TVMFFIHandleDeinitOnce: `deinit_func` must not be NULL")
        })?;
        // SAFETY: the caller passes a valid slot.
        rc = unsafe { env::handle_deinit_once(addr, deinit) };
        Ok(())
    });
    if g != 0 {
        g
    } else {
        rc
    }
}

/// Sets this thread's stream for a device; writes the previous one to `opt_out_original_stream`.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvSetStream(
    device_type: i32,
    device_id: i32,
    stream: *mut c_void,
    opt_out_original_stream: *mut *mut c_void,
) -> c_int {
    let prev = env::set_stream(device_type, device_id, stream);
    if !opt_out_original_stream.is_null() {
        // SAFETY: non-null out-parameter.
        unsafe { *opt_out_original_stream = prev };
    }
    0
}

/// This thread's stream for a device, or NULL.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvGetStream(device_type: i32, device_id: i32) -> *mut c_void {
    env::get_stream(device_type, device_id)
}

/// Sets this thread's DLPack tensor allocator (and the process-wide one with `write_to_global_context`).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvSetDLPackManagedTensorAllocator(
    allocator: DLPackManagedTensorAllocator,
    write_to_global_context: c_int,
    opt_out_original_allocator: *mut DLPackManagedTensorAllocator,
) -> c_int {
    let prev = env::set_tensor_allocator(allocator, write_to_global_context != 0);
    if !opt_out_original_allocator.is_null() {
        // SAFETY: non-null out-parameter.
        unsafe { *opt_out_original_allocator = prev };
    }
    0
}

/// The thread-local DLPack allocator if set, else the process-wide one, else NULL.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvGetDLPackManagedTensorAllocator() -> DLPackManagedTensorAllocator
{
    env::tensor_allocator()
}

/// Allocates a tensor like `prototype` through the current DLPack allocator (new reference).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvTensorAlloc(
    prototype: *mut DLTensor,
    out: *mut *mut c_void,
) -> c_int {
    let mut code = -1;
    let rc = guard(|| {
        let out = non_null(out, "TVMFFIEnvTensorAlloc", "out")? as *mut *mut c_void;
        let proto = non_null(prototype, "TVMFFIEnvTensorAlloc", "prototype")? as *mut DLTensor;
        // SAFETY: the caller passes a valid prototype.
        match unsafe { env::env_tensor_alloc_rc(proto) } {
            Ok(t) => {
                // SAFETY: checked out-parameter.
                unsafe { *out = t.into_raw() as *mut c_void };
                Ok(())
            }
            Err((c, e)) => {
                code = c;
                Err(e)
            }
        }
    });
    // the allocator's own code when it failed (-2: the host raised the error), as upstream
    if rc != 0 {
        code
    } else {
        0
    }
}

/// Polls the host for pending signals: -1 when one is pending (the host keeps the error).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvCheckSignals() -> c_int {
    env::check_signals()
}

/// Registers a host C API by name (`PyErr_CheckSignals`, `PyGILState_Ensure`, `PyGILState_Release`).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvRegisterCAPI(name: *const c_char, symbol: *mut c_void) -> c_int {
    guard(|| {
        // SAFETY: the caller passes a NUL-terminated name.
        let name = unsafe { c_str_arg(name, "TVMFFIEnvRegisterCAPI", "name") }?;
        // SAFETY: the host registers its own functions under their names (c_env_api.h).
        unsafe { env::register_capi(name, symbol) }
    })
}

/// Looks `func_name` up for a loaded library (imports, then the global registry); the result
/// is borrowed.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvModLookupFromImports(
    library_ctx: *mut c_void,
    func_name: *const c_char,
    out: *mut *mut c_void,
) -> c_int {
    guard(|| {
        let out = non_null(out, "TVMFFIEnvModLookupFromImports", "out")? as *mut *mut c_void;
        // SAFETY: the caller passes a NUL-terminated name.
        let name = unsafe { c_str_arg(func_name, "TVMFFIEnvModLookupFromImports", "func_name") }?;
        // SAFETY: the context is the module our loader wrote into the library.
        let f = unsafe { env::lookup_from_imports(library_ctx, name) }?;
        // SAFETY: checked out-parameter.
        unsafe { *out = f as *mut c_void };
        Ok(())
    })
}

/// Adds a symbol written into every library later loaded as a module.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvModRegisterContextSymbol(
    name: *const c_char,
    symbol: *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: the caller passes a NUL-terminated name.
        let name = unsafe { c_str_arg(name, "TVMFFIEnvModRegisterContextSymbol", "name") }?;
        env::CONTEXT_SYMBOLS
            .lock()
            .push((name.to_string(), symbol as usize));
        Ok(())
    })
}

/// Adds a symbol to the system library. Always returns 0.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvModRegisterSystemLibSymbol(
    name: *const c_char,
    symbol: *mut c_void,
) -> c_int {
    if !name.is_null() {
        // SAFETY: the caller passes a NUL-terminated name.
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        // SAFETY: the C caller passes a symbol of its own code (c_env_api.h).
        unsafe { env::register_system_lib_symbol(&name, symbol) };
    }
    0
}

/// Stores the custom object allocator (NULL restores the builtin default).
#[no_mangle]
pub unsafe extern "C" fn TVMFFISetCustomAllocator(allocator: *mut TVMFFICustomAllocator) -> c_int {
    // SAFETY: the C caller vouches for the allocator, as the C API documents.
    unsafe { env::set_custom_allocator(allocator) };
    0
}

/// The custom object allocator last stored, or the builtin default (never NULL).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIGetCustomAllocator() -> *mut TVMFFICustomAllocator {
    env::custom_allocator()
}

/// A `PyCapsule` destructor for DLPack capsules that were never consumed (still named
/// `dltensor` / `dltensor_versioned`): runs the managed tensor's deleter. It reads the capsule at
/// CPython's fixed layout (pointer at +16, name at +24) and calls no Python API, so it works
/// whatever the interpreter's error state: the Python package's own (ctypes) destructor could
/// not run while a consumer's exception was pending (`np.from_dlpack` of a bfloat16 tensor
/// leaked the tensor and turned numpy's error into a SystemError). Not part of the TVM FFI ABI.
///
/// # Safety
/// `capsule` must be NULL or a live `PyCapsule` whose pointer, when the name says it is
/// unconsumed, is a managed tensor of that kind.
#[no_mangle]
pub unsafe extern "C" fn AnyFFIDLPackCapsuleDestructor(capsule: *mut c_void) {
    if capsule.is_null() {
        return;
    }
    let p = capsule as *const u8;
    // SAFETY: a PyCapsule per the caller: PyObject_HEAD (16 bytes), pointer, name.
    let (mt, name) = unsafe {
        (
            *(p.add(16) as *const *mut c_void),
            *(p.add(24) as *const *const c_char),
        )
    };
    if mt.is_null() || name.is_null() {
        return;
    }
    // SAFETY: capsule names are NUL-terminated C strings.
    let deleter_offset = match unsafe { CStr::from_ptr(name) }.to_bytes() {
        b"dltensor" => 56,           // DLManagedTensor.deleter
        b"dltensor_versioned" => 16, // DLManagedTensorVersioned.deleter
        _ => return,                 // consumed ("used_dltensor...")
    };
    // SAFETY: an unconsumed managed tensor of that kind, per the caller.
    let deleter = unsafe {
        *((mt as *const u8).add(deleter_offset) as *const Option<unsafe extern "C" fn(*mut c_void)>)
    };
    if let Some(d) = deleter {
        // SAFETY: the producer's deleter, called once as the capsule dies unconsumed.
        unsafe { d(mt) };
    }
}
