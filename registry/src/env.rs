//! The environment (`c_env_api.h`): per-thread streams, DLPack tensor allocators, init-once
//! handles, host-language C APIs (signal checks), the custom object allocator, and the symbol
//! tables of modules.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::LazyLock;

use anyffi::abi::{
    DLManagedTensorVersioned, DLPackManagedTensorAllocator, DLTensor, TVMFFICustomAllocator,
    TVMFFIObjectAllocHeader,
};
use anyffi::{Error, Result, Tensor};
use parking_lot::Mutex;

// ---------------------------------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------------------------------

thread_local! {
    static STREAMS: RefCell<Vec<((i32, i32), usize)>> = const { RefCell::new(Vec::new()) };
}

/// Sets this thread's current stream of a device; returns the previous one (NULL initially).
/// While the thread's storage is torn down (a deleter calling in at thread exit) the table is
/// gone: nothing is set and NULL is returned.
pub fn set_stream(device_type: i32, device_id: i32, stream: *mut c_void) -> *mut c_void {
    STREAMS
        .try_with(|s| {
            let mut s = s.borrow_mut();
            let key = (device_type, device_id);
            match s.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => std::mem::replace(v, stream as usize) as *mut c_void,
                None => {
                    s.push((key, stream as usize));
                    std::ptr::null_mut()
                }
            }
        })
        .unwrap_or(std::ptr::null_mut())
}

/// This thread's current stream of a device, or NULL (also while the thread's storage is torn
/// down).
pub fn get_stream(device_type: i32, device_id: i32) -> *mut c_void {
    STREAMS
        .try_with(|s| {
            s.borrow()
                .iter()
                .find(|(k, _)| *k == (device_type, device_id))
                .map_or(std::ptr::null_mut(), |(_, v)| *v as *mut c_void)
        })
        .unwrap_or(std::ptr::null_mut())
}

// ---------------------------------------------------------------------------------------------
// DLPack tensor allocators
// ---------------------------------------------------------------------------------------------

thread_local! {
    static TLS_ALLOCATOR: Cell<DLPackManagedTensorAllocator> = const { Cell::new(None) };
}
static GLOBAL_ALLOCATOR: Mutex<DLPackManagedTensorAllocator> = Mutex::new(None);
/// The library's own allocator (the runtime's, installed at load), used by
/// `TVMFFIEnvTensorAlloc` when neither this thread nor the process has one. It is not an
/// allocator a host installed, so `TVMFFIEnvGetDLPackManagedTensorAllocator` and the
/// previous value `TVMFFIEnvSetDLPackManagedTensorAllocator` reports never show it: with no
/// host allocator both report NULL, as in the official library.
static FALLBACK_ALLOCATOR: Mutex<DLPackManagedTensorAllocator> = Mutex::new(None);

/// Sets this thread's allocator (and the process-wide one with `write_global`); returns the
/// previous thread-local value.
pub fn set_tensor_allocator(
    a: DLPackManagedTensorAllocator,
    write_global: bool,
) -> DLPackManagedTensorAllocator {
    let prev = TLS_ALLOCATOR.with(|c| c.replace(a));
    if write_global {
        *GLOBAL_ALLOCATOR.lock() = a;
    }
    prev
}

/// Installs the library's fallback allocator unless one is installed; whether it was
/// installed. `TVMFFIEnvTensorAlloc` uses it when neither the thread nor the process has an
/// allocator a host set, and the allocator getters never report it.
pub fn set_fallback_tensor_allocator(a: DLPackManagedTensorAllocator) -> bool {
    let mut fallback = FALLBACK_ALLOCATOR.lock();
    if fallback.is_some() {
        return false;
    }
    *fallback = a;
    true
}

/// The thread-local allocator if set, else the process-wide one (what a host installed).
pub fn tensor_allocator() -> DLPackManagedTensorAllocator {
    TLS_ALLOCATOR.with(|c| c.get()).or(*GLOBAL_ALLOCATOR.lock())
}

unsafe extern "C" fn forward_alloc_error(
    _ctx: *mut c_void,
    kind: *const c_char,
    message: *const c_char,
) {
    // SAFETY: the allocator passes NUL-terminated strings.
    unsafe { anyffi::capi::TVMFFIErrorSetRaisedFromCStr(kind, message) };
}

/// `TVMFFIEnvTensorAlloc`: a tensor shaped like `prototype` from the current allocator.
///
/// # Safety
/// `prototype` must be a valid DLTensor (only dtype, ndim, shape and device are read).
pub unsafe fn env_tensor_alloc(prototype: *mut DLTensor) -> Result<Tensor> {
    // SAFETY: forwarded contract.
    unsafe { env_tensor_alloc_rc(prototype) }.map_err(|(_, e)| e)
}

/// `env_tensor_alloc` with the allocator's own return code on failure (the C function returns
/// it as the official one does: -2 says the host raised the error), beside the error raised.
///
/// # Safety
/// As [`env_tensor_alloc`].
pub unsafe fn env_tensor_alloc_rc(
    prototype: *mut DLTensor,
) -> std::result::Result<Tensor, (c_int, Error)> {
    let Some(alloc) = tensor_allocator().or(*FALLBACK_ALLOCATOR.lock()) else {
        return Err((
            -1,
            Error::runtime_error(
                "TVMFFIEnvTensorAlloc: allocator is nullptr, likely because \
                 TVMFFIEnvSetDLPackManagedTensorAllocator has not been called.",
            ),
        ));
    };
    let mut mt: *mut DLManagedTensorVersioned = std::ptr::null_mut();
    // SAFETY: calling the registered allocator with its documented arguments.
    let rc = unsafe {
        alloc(
            prototype,
            &mut mt,
            std::ptr::null_mut(),
            Some(forward_alloc_error),
        )
    };
    if rc != 0 {
        let e = anyffi::error::take_raised().unwrap_or_else(|| {
            Error::internal(format!(
                "the DLPack tensor allocator returned {rc} but raised no error"
            ))
        });
        return Err((rc, e));
    }
    if mt.is_null() {
        return Err((
            -1,
            Error::runtime_error("TVMFFIEnvTensorAlloc: the allocator returned no tensor"),
        ));
    }
    // SAFETY: the allocator produced a valid managed tensor that we now own.
    unsafe { Tensor::from_dlpack_versioned(mt, 0, false) }.map_err(|e| {
        // refused (a version, flags or layout this library cannot hold): it is still ours
        // to release
        // SAFETY: the allocator's managed tensor, not taken by the failed import.
        unsafe {
            if let Some(d) = (*mt).deleter {
                d(mt);
            }
        }
        (-1, e)
    })
}

// ---------------------------------------------------------------------------------------------
// Init-once handles
// ---------------------------------------------------------------------------------------------

static INIT_LOCK: Mutex<()> = Mutex::new(());

/// `TVMFFIHandleInitOnce`: initialises `*addr` exactly once with `init`.
///
/// # Safety
/// `addr` must be a valid, suitably aligned pointer slot used only through these functions.
pub unsafe fn handle_init_once(
    addr: *mut *mut c_void,
    init: unsafe extern "C" fn(*mut *mut c_void) -> c_int,
) -> Result<c_int> {
    // SAFETY: per the caller, the slot is a pointer-sized atomic location.
    let slot = unsafe { AtomicPtr::from_ptr(addr) };
    if !slot.load(Ordering::Acquire).is_null() {
        return Ok(0);
    }
    let _g = INIT_LOCK.lock();
    if !slot.load(Ordering::Acquire).is_null() {
        return Ok(0);
    }
    let mut out = std::ptr::null_mut();
    // SAFETY: the caller's init function.
    let rc = unsafe { init(&mut out) };
    if rc != 0 {
        return Ok(rc);
    }
    if out.is_null() {
        return Err(Error::runtime_error(
            "TVMFFIHandleInitOnce: init_func must return a non-NULL handle",
        ));
    }
    slot.store(out, Ordering::Release);
    Ok(0)
}

/// `TVMFFIHandleDeinitOnce`: clears `*addr` and runs `deinit` on the old value if any.
///
/// # Safety
/// As for [`handle_init_once`].
pub unsafe fn handle_deinit_once(
    addr: *mut *mut c_void,
    deinit: unsafe extern "C" fn(*mut c_void) -> c_int,
) -> c_int {
    // SAFETY: per the caller.
    let old = unsafe { AtomicPtr::from_ptr(addr) }.swap(std::ptr::null_mut(), Ordering::AcqRel);
    if old.is_null() {
        0
    } else {
        // SAFETY: the caller's deinit function on the value it initialised.
        unsafe { deinit(old) }
    }
}

// ---------------------------------------------------------------------------------------------
// Host C APIs (Python's signal handling)
// ---------------------------------------------------------------------------------------------

static PY_CHECK_SIGNALS: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static PY_GIL_ENSURE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static PY_GIL_RELEASE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// `TVMFFIEnvRegisterCAPI`: accepts the three Python entry points the official package registers.
///
/// # Safety
/// `f` must be NULL or the named function of the host (`int (*)(void)` for
/// `PyErr_CheckSignals`, `void* (*)(void)` / `void (*)(void*)` for the GIL pair): `check_signals`
/// calls it.
pub unsafe fn register_capi(name: &str, f: *mut c_void) -> Result<()> {
    let slot = match name {
        "PyErr_CheckSignals" => &PY_CHECK_SIGNALS,
        "PyGILState_Ensure" => &PY_GIL_ENSURE,
        "PyGILState_Release" => &PY_GIL_RELEASE,
        _ => {
            return Err(Error::value_error(format!(
                "TVMFFIEnvRegisterCAPI: Unknown env API {name} (expected PyErr_CheckSignals, \
                 PyGILState_Ensure or PyGILState_Release)"
            )))
        }
    };
    slot.store(f, Ordering::Release);
    Ok(())
}

/// `TVMFFIEnvCheckSignals`: -1 when the host reports a pending signal (its error stays pending
/// in the host; callers raise `EnvErrorAlreadySet`), else 0.
pub fn check_signals() -> c_int {
    let check = PY_CHECK_SIGNALS.load(Ordering::Acquire);
    if check.is_null() {
        return 0;
    }
    let ensure = PY_GIL_ENSURE.load(Ordering::Acquire);
    let release = PY_GIL_RELEASE.load(Ordering::Acquire);
    // SAFETY: the registered pointers are the host's functions with their C signatures.
    unsafe {
        let check: unsafe extern "C" fn() -> c_int = std::mem::transmute(check);
        let state = if ensure.is_null() {
            None
        } else {
            // The official library passes the GIL state around as a pointer-sized value.
            let ensure: unsafe extern "C" fn() -> *mut c_void = std::mem::transmute(ensure);
            Some(ensure())
        };
        let rc = check();
        if let (Some(s), false) = (state, release.is_null()) {
            let release: unsafe extern "C" fn(*mut c_void) = std::mem::transmute(release);
            release(s);
        }
        if rc != 0 {
            -1
        } else {
            0
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Custom object allocator (stored and returned; dormant in this ABI version, spec §2.3)
// ---------------------------------------------------------------------------------------------

/// Bytes before the body that the builtin allocator uses: the block's base pointer (for the
/// free), then the allocation header right before the body.
const PREFIX: usize = 16;

unsafe extern "C" fn default_delete_space(body: *mut c_void) {
    // SAFETY: `body` came from `default_allocate`, which stored the malloc base PREFIX bytes
    // before it.
    unsafe { libc::free(*((body as *mut u8).sub(PREFIX) as *const *mut c_void)) };
}

/// The builtin allocator: any power-of-two alignment (the body is aligned inside a block
/// `align` bytes larger when that is more than malloc's 16). Failures raise an error before
/// returning NULL, as `c_api.h` asks of an allocator.
unsafe extern "C" fn default_allocate(
    size: usize,
    align: usize,
    _ti: i32,
    _ctx: *mut c_void,
) -> *mut c_void {
    match default_block(size, align) {
        Ok(body) => body,
        Err(e) => {
            anyffi::error::set_raised(e);
            std::ptr::null_mut()
        }
    }
}

/// `default_allocate`'s block, or the error it raises.
fn default_block(size: usize, align: usize) -> Result<*mut c_void> {
    if !align.is_power_of_two() {
        return Err(Error::value_error(format!(
            "object allocation: alignment {align} is not a power of two"
        )));
    }
    let slack = align.saturating_sub(16);
    let total = size.checked_add(PREFIX + slack).ok_or_else(|| {
        Error::new(
            "MemoryError",
            format!(
                "object allocation: {size} bytes aligned to {align} overflow the address space"
            ),
        )
    })?;
    // SAFETY: plain malloc of the prefix, the alignment slack and the body.
    let base = unsafe { libc::malloc(total) } as *mut u8;
    if base.is_null() {
        return Err(Error::new(
            "MemoryError",
            format!("object allocation: out of memory for {size} bytes"),
        ));
    }
    // SAFETY: the block has room for the prefix and the slack; the base pointer and the header
    // sit right before the aligned body.
    Ok(unsafe {
        let first = base as usize + PREFIX;
        let body = base.add(first.next_multiple_of(align.max(16)) - base as usize);
        *(body.sub(PREFIX) as *mut *mut u8) = base;
        let hdr = body.sub(std::mem::size_of::<TVMFFIObjectAllocHeader>())
            as *mut TVMFFIObjectAllocHeader;
        hdr.write(TVMFFIObjectAllocHeader {
            delete_space: Some(default_delete_space),
        });
        body as *mut c_void
    })
}

struct AllocatorPtr(*mut TVMFFICustomAllocator);
// SAFETY: a pointer to a table the registrant keeps alive for the process.
unsafe impl Send for AllocatorPtr {}
// SAFETY: as above.
unsafe impl Sync for AllocatorPtr {}

static DEFAULT_ALLOCATOR: LazyLock<AllocatorPtr> = LazyLock::new(|| {
    AllocatorPtr(Box::into_raw(Box::new(TVMFFICustomAllocator {
        allocate: Some(default_allocate),
        context: std::ptr::null_mut(),
    })))
});
static CUSTOM_ALLOCATOR: AtomicPtr<TVMFFICustomAllocator> = AtomicPtr::new(std::ptr::null_mut());

/// Stores `a` (NULL restores the builtin default).
///
/// # Safety
/// `a` must be NULL or point at an allocator whose functions honour the
/// `TVMFFICustomAllocator` contract, valid for as long as it stays installed: every object
/// that C++ code built on the official headers allocates goes through it.
pub unsafe fn set_custom_allocator(a: *mut TVMFFICustomAllocator) {
    CUSTOM_ALLOCATOR.store(a, Ordering::Release);
}

/// The allocator last registered, or the builtin default; never NULL.
pub fn custom_allocator() -> *mut TVMFFICustomAllocator {
    let a = CUSTOM_ALLOCATOR.load(Ordering::Acquire);
    if a.is_null() {
        DEFAULT_ALLOCATOR.0
    } else {
        a
    }
}

// ---------------------------------------------------------------------------------------------
// Module symbol tables
// ---------------------------------------------------------------------------------------------

/// (name, address) pairs written into every library loaded as a module.
pub static CONTEXT_SYMBOLS: Mutex<Vec<(String, usize)>> = Mutex::new(Vec::new());
/// The system library's symbol map.
pub static SYSTEM_LIB_SYMBOLS: LazyLock<Mutex<BTreeMap<String, usize>>> =
    LazyLock::new(Default::default);

/// `TVMFFIEnvModRegisterSystemLibSymbol`: stores the symbol; warns when an address changes.
///
/// # Safety
/// `sym` must stay valid for the process; a `__tvm_ffi_<name>` symbol must be a packed function
/// (`TVMFFISafeCallType`) that accepts a NULL handle: the system library calls it.
pub unsafe fn register_system_lib_symbol(name: &str, sym: *mut c_void) {
    let mut m = SYSTEM_LIB_SYMBOLS.lock();
    if let Some(&old) = m.get(name) {
        if old != sym as usize {
            eprintln!(
                "anyffi: warning: system-lib symbol `{name}` re-registered at a different address"
            );
        }
    }
    m.insert(name.to_string(), sym as usize);
}

/// `TVMFFIEnvModLookupFromImports`: the function `name` (borrowed) for the library whose
/// context is `library_ctx` (the module the loader wrote into `__tvm_ffi__library_ctx`): its
/// imports first, then the global registry. With a NULL context only the registry is searched.
///
/// # Safety
/// `library_ctx` must be NULL or a live `ffi.Module` created by this library's loader.
pub unsafe fn lookup_from_imports(
    library_ctx: *mut c_void,
    name: &str,
) -> Result<*mut anyffi::abi::TVMFFIObject> {
    if let Some(p) = std::ptr::NonNull::new(library_ctx as *mut crate::module::ModuleObj) {
        // SAFETY: per the caller, a live module; we take our own reference for the lookup.
        let m = unsafe { anyffi::ObjectRef::from_raw_borrowed(p) };
        return m.lookup_from_imports(name);
    }
    crate::global::get_global_borrowed(name).ok_or_else(|| {
        Error::runtime_error(format!(
            "Cannot find function {name} in the imported modules or global registry."
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_per_thread_and_per_device() {
        let a = 0x10 as *mut c_void;
        assert!(set_stream(2, 0, a).is_null());
        assert_eq!(get_stream(2, 0), a);
        assert!(get_stream(2, 1).is_null());
        std::thread::spawn(|| assert!(get_stream(2, 0).is_null()))
            .join()
            .unwrap();
        assert_eq!(set_stream(2, 0, std::ptr::null_mut()), a);
    }

    #[test]
    fn default_custom_allocator_round_trip() {
        let a = custom_allocator();
        // SAFETY: the builtin allocator.
        unsafe {
            let body = (*a).allocate.unwrap()(40, 8, 64, std::ptr::null_mut());
            assert_eq!(body as usize % 16, 0);
            let hdr = (body as *mut TVMFFIObjectAllocHeader).sub(1);
            (*hdr).delete_space.unwrap()(body);
        }
    }
}
