//! The Itanium C++ ABI pieces behind the official library's C++ entry points (`cxx_api.rs`):
//! run-time type information, the `tvm::ffi::Error` exception a failing entry point throws,
//! and the vtable every `ffi.Module` carries 8 bytes before its header (spec §3.3).
//!
//! Rationale: code compiled against the official headers calls a handful of non-inline C++
//! functions of `libtvm_ffi.so` (`Module::LoadFromFile`, `StructuralEqual::Equal`,
//! `json::Parse`, ...) and reaches a module's methods through its vtable (`mod->GetFunction`).
//! Those callers catch failures as `tvm::ffi::Error`, so a failure here must be a C++ exception
//! of that type, thrown with libstdc++'s `__cxa_throw`; this is why the library links
//! `libstdc++.so.6` (by file name, so no development package is needed to build).
//!
//! Layouts (x86-64 Itanium ABI, g++/clang):
//! - `class Error : public ObjectRef, public std::exception`: the dynamic base `std::exception`
//!   is the primary base at offset 0 (the vptr), `ObjectRef` (one `Object*`) follows at 8. The
//!   vtable is `[0, typeinfo, ~Error (complete), ~Error (deleting), what]`.
//! - `class ModuleObj : public Object` adds virtual functions to a base without any, so its
//!   vptr precedes the `Object` part: `this` = handle - 8.
//! - A by-value result of a class type with a non-trivial destructor (`Any`, `String`,
//!   `ObjectRef`s, `Optional`s) is returned through a hidden pointer passed first, before
//!   `this`; the function returns that pointer.

use std::ffi::{c_char, c_long, c_uint, c_void};
use std::ptr::addr_of;

use anyffi::abi::TVMFFIObject;
use anyffi::Error;

#[link(name = "libstdc++.so.6", kind = "dylib", modifiers = "+verbatim")]
extern "C-unwind" {
    fn __cxa_allocate_exception(size: usize) -> *mut c_void;
    fn __cxa_throw(
        obj: *mut c_void,
        tinfo: *const c_void,
        dest: Option<unsafe extern "C" fn(*mut c_void)>,
    ) -> !;
    #[link_name = "_ZdlPv"]
    fn operator_delete(p: *mut c_void);
    /// The entry of a pure virtual function: aborts with "pure virtual method called".
    pub(crate) fn __cxa_pure_virtual();
}

extern "C" {
    #[link_name = "_ZTVN10__cxxabiv117__class_type_infoE"]
    static CLASS_TYPE_INFO_VTABLE: [*const c_void; 0];
    #[link_name = "_ZTVN10__cxxabiv121__vmi_class_type_infoE"]
    static VMI_CLASS_TYPE_INFO_VTABLE: [*const c_void; 0];
    #[link_name = "_ZTISt9exception"]
    static STD_EXCEPTION_TYPE_INFO: [*const c_void; 0];
}

/// A static holding raw pointers (type information and vtables are immutable).
#[repr(transparent)]
pub(crate) struct Static<T>(pub T);
// SAFETY: the wrapped tables are never written after static initialisation.
unsafe impl<T> Sync for Static<T> {}

/// The address point of a libstdc++ type-info vtable: two words past its start.
const fn vtable_address_point(vtable: *const [*const c_void; 0]) -> *const c_void {
    (vtable as *const *const c_void).wrapping_add(2) as *const c_void
}

/// `__cxxabiv1::__class_type_info`: a class without bases.
#[repr(C)]
pub(crate) struct ClassTypeInfo {
    vtable: *const c_void,
    name: *const c_char,
}

/// `__cxxabiv1::__base_class_type_info`.
#[repr(C)]
struct BaseClassTypeInfo {
    base: *const c_void,
    /// offset << 8 | flags (2: public).
    offset_flags: c_long,
}

/// `__cxxabiv1::__vmi_class_type_info` with `N` bases (`base_count == N`).
#[repr(C)]
pub(crate) struct VmiClassTypeInfo<const N: usize> {
    vtable: *const c_void,
    name: *const c_char,
    flags: c_uint,
    base_count: c_uint,
    bases: [BaseClassTypeInfo; N],
}

const PUBLIC_BASE: c_long = 2;

static OBJECT_TYPE_INFO: Static<ClassTypeInfo> = Static(ClassTypeInfo {
    // Only the address of the libstdc++ vtable is taken.
    vtable: vtable_address_point(addr_of!(CLASS_TYPE_INFO_VTABLE)),
    name: c"N3tvm3ffi6ObjectE".as_ptr(),
});

static OBJECT_REF_TYPE_INFO: Static<ClassTypeInfo> = Static(ClassTypeInfo {
    vtable: vtable_address_point(addr_of!(CLASS_TYPE_INFO_VTABLE)),
    name: c"N3tvm3ffi9ObjectRefE".as_ptr(),
});

/// `typeid(tvm::ffi::Error)`. Handlers compare type names, so `catch (const Error&)` in code
/// built against the official headers matches it, and `catch (const std::exception&)` finds
/// the base through the table below.
static ERROR_TYPE_INFO: Static<VmiClassTypeInfo<2>> = Static(VmiClassTypeInfo {
    vtable: vtable_address_point(addr_of!(VMI_CLASS_TYPE_INFO_VTABLE)),
    name: c"N3tvm3ffi5ErrorE".as_ptr(),
    flags: 0,
    base_count: 2,
    bases: [
        BaseClassTypeInfo {
            base: addr_of!(OBJECT_REF_TYPE_INFO) as *const c_void,
            offset_flags: (8 << 8) | PUBLIC_BASE,
        },
        BaseClassTypeInfo {
            base: addr_of!(STD_EXCEPTION_TYPE_INFO) as *const c_void,
            offset_flags: PUBLIC_BASE,
        },
    ],
});

/// The name of `typeid(tvm::ffi::ModuleObj)`, exported as the official library exports it.
#[export_name = "_ZTSN3tvm3ffi9ModuleObjE"]
pub static MODULE_TYPE_NAME: [u8; 21] = *b"N3tvm3ffi9ModuleObjE\0";

/// `typeid(tvm::ffi::ModuleObj)`: the vptr comes first, so the non-dynamic base `Object` sits at
/// offset 8 (what g++ emits for the official header). Exported: the type information of a C++
/// subclass of `ModuleObj` names it as its base.
#[export_name = "_ZTIN3tvm3ffi9ModuleObjE"]
pub static MODULE_TYPE_INFO: Static<VmiClassTypeInfo<1>> = Static(VmiClassTypeInfo {
    vtable: vtable_address_point(addr_of!(VMI_CLASS_TYPE_INFO_VTABLE)),
    name: addr_of!(MODULE_TYPE_NAME) as *const c_char,
    flags: 0,
    base_count: 1,
    bases: [BaseClassTypeInfo {
        base: addr_of!(OBJECT_TYPE_INFO) as *const c_void,
        offset_flags: (8 << 8) | PUBLIC_BASE,
    }],
});

/// The C++ object `tvm::ffi::Error`: its vptr, then the `ObjectRef`'s pointer.
#[repr(C)]
struct CxxError {
    vptr: *const c_void,
    data: *mut TVMFFIObject,
}

/// `Error::~Error()` (complete object): releases the error object.
unsafe extern "C" fn error_dtor(this: *mut c_void) {
    let this = this as *mut CxxError;
    // SAFETY: `this` is a CxxError built by `throw_error` (or a copy sharing our vtable).
    let data = unsafe { std::mem::replace(&mut (*this).data, std::ptr::null_mut()) };
    if !data.is_null() {
        // SAFETY: the C++ object owns one strong reference.
        unsafe { anyffi::object::dec_ref(data) };
    }
}

/// `Error::~Error()` (deleting).
unsafe extern "C" fn error_deleting_dtor(this: *mut c_void) {
    // SAFETY: as above; a deleting destructor is only called on `new`-allocated objects.
    unsafe {
        error_dtor(this);
        operator_delete(this);
    }
}

/// `Error::what()`: the message, as the official inline definition returns it.
unsafe extern "C" fn error_what(this: *const c_void) -> *const c_char {
    let this = this as *const CxxError;
    // SAFETY: a live CxxError whose data is an ffi.Error; our messages are NUL-terminated.
    unsafe {
        let obj = (*this).data as *const anyffi::error::ErrorObj;
        if obj.is_null() {
            return c"".as_ptr();
        }
        (*obj).cell.message.data as *const c_char
    }
}

static ERROR_VTABLE: Static<[*const c_void; 5]> = Static([
    std::ptr::null::<c_void>(),
    addr_of!(ERROR_TYPE_INFO) as *const c_void,
    error_dtor as *const c_void,
    error_deleting_dtor as *const c_void,
    error_what as *const c_void,
]);

/// Throws `err` as a C++ `tvm::ffi::Error`.
///
/// Callers must hold no value with a destructor: the exception unwinds their frame.
pub(crate) fn throw_error(err: Error) -> ! {
    let data = err.into_raw();
    // SAFETY: a fresh exception block of the C++ object's size, filled before the throw; the
    // type information and destructor match the layout written.
    unsafe {
        let obj = __cxa_allocate_exception(std::mem::size_of::<CxxError>()) as *mut CxxError;
        obj.write(CxxError {
            vptr: (addr_of!(ERROR_VTABLE.0) as *const *const c_void).add(2) as *const c_void,
            data,
        });
        __cxa_throw(
            obj as *mut c_void,
            addr_of!(ERROR_TYPE_INFO) as *const c_void,
            Some(error_dtor),
        )
    }
}

/// Runs `f`; a returned error or a panic becomes a thrown `tvm::ffi::Error`.
pub(crate) fn run_or_throw<R>(f: impl FnOnce() -> anyffi::Result<R>) -> R {
    let err = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => return v,
        Ok(Err(e)) => e,
        Err(panic) => Error::from_panic(panic),
    };
    throw_error(err)
}
