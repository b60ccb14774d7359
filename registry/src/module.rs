//! `ffi.Module` (73): libraries of packed functions loaded from shared objects built against the
//! official headers (`__tvm_ffi_<name>` symbols, metadata and doc symbols, the library context
//! symbol), the system library, imports, and the process-lifetime keep-alive set.
//!
//! Rationale: a library module owns its `dlopen` handle, and every function it hands out keeps
//! the module alive, so a library is never unloaded while one of its functions can still be
//! called. Exported symbols are called with a NULL `self`, as the official loader does.

use std::cell::UnsafeCell;
use std::collections::BTreeMap;
use std::ffi::{c_void, CStr, CString};
use std::sync::LazyLock;

use anyffi::abi::{kTVMFFIModule, TVMFFIAny, TVMFFIObject, TVMFFISafeCallType};
use anyffi::array::Array;
use anyffi::{Any, Error, Function, ObjectRef, ObjectType, Result};
use parking_lot::Mutex;

use crate::cxx_module;

/// Property bits of a module (`Module::kBinarySerializable`, `kRunnable`, `kCompilationExportable`).
pub const PROPERTY_BINARY_SERIALIZABLE: i64 = 0b001;
pub const PROPERTY_RUNNABLE: i64 = 0b010;

/// Prefix of exported packed functions.
const SYMBOL_PREFIX: &str = "__tvm_ffi_";
const METADATA_PREFIX: &str = "__tvm_ffi__metadata_";
const DOC_PREFIX: &str = "__tvm_ffi__doc_";
const LIBRARY_CTX: &str = "__tvm_ffi__library_ctx";
const LIBRARY_BIN: &str = "__tvm_ffi__library_bin";

/// Where a module finds its symbols. Libraries are never closed (below), so a clone is just
/// another handle to the same one.
#[derive(Clone)]
enum Library {
    /// A shared object opened with `dlopen`; closed when the module dies.
    Dylib { handle: *mut c_void, path: String },
    /// The system library: symbols registered with `TVMFFIEnvModRegisterSystemLibSymbol`.
    System { prefix: String },
}

impl Library {
    fn symbol(&self, name: &str) -> *mut c_void {
        match self {
            Library::Dylib { handle, .. } => {
                let Ok(c) = CString::new(name) else {
                    return std::ptr::null_mut();
                };
                // SAFETY: a live handle from dlopen and a NUL-terminated name.
                unsafe { libc::dlsym(*handle, c.as_ptr()) }
            }
            Library::System { prefix } => {
                let syms = crate::env::SYSTEM_LIB_SYMBOLS.lock();
                let with_prefix = syms.get(&format!("{prefix}{name}"));
                with_prefix
                    .or_else(|| syms.get(name))
                    .map_or(std::ptr::null_mut(), |&p| p as *mut c_void)
            }
        }
    }

    /// The packed-function symbol of `name` (`__tvm_ffi_<name>`, with the system prefix tried first).
    fn function_symbol(&self, name: &str) -> *mut c_void {
        match self {
            Library::System { prefix } if !prefix.is_empty() => {
                let p = self.symbol(&format!("{SYMBOL_PREFIX}{prefix}{name}"));
                if !p.is_null() {
                    return p;
                }
                self.symbol(&format!("{SYMBOL_PREFIX}{name}"))
            }
            _ => self.symbol(&format!("{SYMBOL_PREFIX}{name}")),
        }
    }
}

// A loaded library is never closed: its static initialisers may have registered global
// functions, types or deleters whose code lives in it, and those outlive any module object
// (the official library keeps such modules alive for the process for the same reason).

/// `ffi.Module` as C++ lays out `tvm::ffi::ModuleObj` after its vptr (which sits at header - 8):
/// the header, `imports_` (an `ffi.Array` of modules) at offset 24, the import lookup cache at
/// 32. Modules made here and modules made by C++ code (subclasses of `ModuleObj` built on the
/// official headers, see `cxx_module.rs`) share this part; ours keep their library and locks
/// after it, in the same allocation (`ModuleBlock`).
#[repr(C)]
pub struct ModuleObj {
    pub header: TVMFFIObject,
    /// `ffi.Array` of imported modules, replaced (never mutated in place) by us; in our modules
    /// only under `LibState::imports_lock`.
    imports: UnsafeCell<Array>,
    /// C++ `import_lookup_cache_` (a `Map`); NULL in our modules, never touched in C++ ones.
    cxx_lookup_cache: *mut c_void,
}

/// What our modules keep past the C++ layout.
struct LibState {
    imports_lock: Mutex<()>,
    lib: Library,
    /// Lookups through `TVMFFIEnvModLookupFromImports`, kept alive here (results are borrowed).
    import_cache: Mutex<BTreeMap<String, Function>>,
}

// SAFETY: repr(C), header first, fixed static index.
unsafe impl ObjectType for ModuleObj {
    const TYPE_KEY: &'static str = "ffi.Module";
    fn type_index() -> i32 {
        kTVMFFIModule
    }
}

// SAFETY: the dlopen handle is process-global; mutable state is behind mutexes.
unsafe impl Send for ModuleObj {}
// SAFETY: as above.
unsafe impl Sync for ModuleObj {}

/// Owning handle to a module.
pub type Module = ObjectRef<ModuleObj>;

/// Registers the reflection of `ffi.Module` as the official library does: `total_size` 48 (the
/// C++ object, vptr included), no creator, the read-only field `imports_`, and finality.
pub(crate) fn register_reflection() -> Result<()> {
    use anyffi::abi::{kTVMFFIArray, kTVMFFISEqHashKindUnsupported};
    use anyffi::reflection::{Accessor, FieldDef, TypeDef};
    // SAFETY: the C++ `ModuleObj` layout, which `ModuleObj` mirrors; fields described below.
    unsafe {
        TypeDef::new(
            &anyffi::type_table::GlobalTypes,
            kTVMFFIModule,
            ModuleObj::TYPE_KEY,
        )
    }
    .metadata(48, kTVMFFISEqHashKindUnsupported, None)?
    .field(FieldDef::new(
        "imports_",
        std::mem::offset_of!(ModuleObj, imports),
        Accessor::object::<{ kTVMFFIArray }, false>(kTVMFFIArray),
        r#"{"type":"ffi.Array","args":[{"type":"Any"}]}"#,
    ))?
    .type_final(true)?;
    Ok(())
}

/// A module's allocation: the C++ vptr, then the object (spec §3.3: the vptr sits at
/// header - 8, so C++ code compiled against the official headers can call the module's virtual
/// functions; see `cxx_api.rs`), then our state.
#[repr(C)]
struct ModuleBlock {
    vptr: *const c_void,
    module: ModuleObj,
    state: LibState,
}

/// The block a module made by `make_module` lives in (the address is only computed). For a
/// module made by C++ code it is where that object starts: its vtable pointer comes first too.
fn block_of(module: *const ModuleObj) -> *mut ModuleBlock {
    (module as *mut u8).wrapping_sub(std::mem::offset_of!(ModuleBlock, module)) as *mut ModuleBlock
}

/// The deleter of modules: drops the module and frees its block (vptr included).
unsafe extern "C" fn delete_module(obj: *mut c_void, flags: i32) {
    use anyffi::abi::{kTVMFFIObjectDeleterFlagBitMaskStrong, kTVMFFIObjectDeleterFlagBitMaskWeak};
    let block = block_of(obj as *const ModuleObj);
    if flags & kTVMFFIObjectDeleterFlagBitMaskStrong != 0 {
        // SAFETY: called once, when the last strong reference goes; `obj` is the module of a
        // block made by `make_module`.
        unsafe {
            std::ptr::drop_in_place(obj as *mut ModuleObj);
            std::ptr::drop_in_place(std::ptr::addr_of_mut!((*block).state));
        }
    }
    if flags & kTVMFFIObjectDeleterFlagBitMaskWeak != 0 {
        // SAFETY: the block was allocated by `make_module` with malloc.
        unsafe { libc::free(block as *mut c_void) };
    }
}

fn make_module(lib: Library) -> Module {
    let mut header = TVMFFIObject::new::<ModuleObj>();
    header.deleter = Some(delete_module);
    let block = ModuleBlock {
        vptr: crate::cxx_api::module_vptr(),
        module: ModuleObj {
            header,
            imports: UnsafeCell::new(Array::empty()),
            cxx_lookup_cache: std::ptr::null_mut(),
        },
        state: LibState {
            imports_lock: Mutex::new(()),
            lib,
            import_cache: Mutex::new(BTreeMap::new()),
        },
    };
    // SAFETY: a fresh malloc block of the block's size (malloc aligns to 16 >= 8).
    unsafe {
        let p = libc::malloc(std::mem::size_of::<ModuleBlock>()) as *mut ModuleBlock;
        if p.is_null() {
            std::alloc::handle_alloc_error(std::alloc::Layout::new::<ModuleBlock>());
        }
        p.write(block);
        let obj = std::ptr::addr_of_mut!((*p).module);
        ObjectRef::from_raw_owned(std::ptr::NonNull::new_unchecked(obj))
    }
}

/// The module behind a handle reached from C++: ours or one made by C++ code (every
/// `ffi.Module` object has the layout of `ModuleObj`).
///
/// # Safety
/// `handle` must point at a live object header.
pub(crate) unsafe fn from_cxx_handle<'a>(handle: *mut TVMFFIObject) -> Option<&'a ModuleObj> {
    if handle.is_null() {
        return None;
    }
    // SAFETY: per the caller; the caller keeps the handle alive.
    unsafe { ((*handle).type_index == kTVMFFIModule).then(|| &*(handle as *const ModuleObj)) }
}

/// Calls a `TVMFFISafeCallType` symbol with no arguments and `self = NULL`; expects a string.
fn call_string_symbol(sym: *mut c_void, what: &str) -> Result<String> {
    // SAFETY: the symbol is an exported safe-call function, by the naming convention.
    let f: unsafe extern "C" fn(*mut c_void, *const TVMFFIAny, i32, *mut TVMFFIAny) -> i32 =
        unsafe { std::mem::transmute(sym) };
    let mut out = Any::none();
    // SAFETY: zero arguments, a None result slot.
    let rc = unsafe { f(std::ptr::null_mut(), std::ptr::null(), 0, out.as_out_ptr()) };
    if rc != 0 {
        return Err(anyffi::error::fetch_raised(what));
    }
    out.get::<String>()
}

impl ModuleObj {
    /// Our state, for modules made here; None for modules made by C++ code (a subclass of
    /// `tvm::ffi::ModuleObj`), whose methods are its virtual functions, called through
    /// `cxx_module`.
    fn state(&self) -> Option<&LibState> {
        let ours = self.header.deleter.map(|d| d as *const () as usize)
            == Some(delete_module as *const () as usize);
        // SAFETY: a module with our deleter was made by `make_module`: a ModuleBlock.
        ours.then(|| unsafe { &(*block_of(self)).state })
    }

    /// The kind: `library` for ours, `kind()` for C++ modules.
    pub fn kind(&self) -> Result<String> {
        match self.state() {
            Some(_) => Ok(LIBRARY_KIND.to_str().unwrap_or_default().to_string()),
            None => cxx_module::kind(self),
        }
    }

    /// The property bits (ours: `Module::kBinarySerializable | kRunnable`).
    pub fn property_mask(&self) -> Result<i64> {
        match self.state() {
            Some(_) => Ok(PROPERTY_BINARY_SERIALIZABLE | PROPERTY_RUNNABLE),
            None => cxx_module::property_mask(self),
        }
    }

    /// The path of the loaded file, if any.
    pub fn path(&self) -> Option<&str> {
        match &self.state()?.lib {
            Library::Dylib { path, .. } => Some(path),
            Library::System { .. } => None,
        }
    }

    /// The imported modules.
    pub fn imports(&self) -> Vec<Module> {
        let arr = {
            let _g = self.state().map(|st| st.imports_lock.lock());
            // SAFETY: we replace the array handle only under the lock held here (ours); a C++
            // module's own code reads and writes it without one, as the official library does.
            unsafe { (*self.imports.get()).clone() }
        };
        arr.iter()
            .filter_map(|v| v.as_object_of::<ModuleObj>())
            .collect()
    }

    fn set_imports(&self, mods: Vec<Module>) {
        let arr = Array::from_vec(mods.into_iter().map(Any::from).collect());
        let old = {
            let _g = self.state().map(|st| st.imports_lock.lock());
            // SAFETY: as in `imports`.
            unsafe { std::mem::replace(&mut *self.imports.get(), arr) }
        };
        drop(old);
    }
}

/// Kind of the modules made here.
pub(crate) const LIBRARY_KIND: &CStr = c"library";

impl ModuleObj {
    /// A new strong reference to this module.
    fn strong_ref(&self) -> Module {
        // SAFETY: `self` lives inside a live module object (every ModuleObj is heap-allocated
        // behind its header); we take our own reference.
        unsafe { ObjectRef::from_raw_borrowed(std::ptr::NonNull::from(self)) }
    }

    /// The function `name` of this module alone (C++ `virtual GetFunction(name)`).
    pub fn own_function(&self, name: &str) -> Result<Option<Function>> {
        let Some(st) = self.state() else {
            return cxx_module::get_function(self, name);
        };
        let sym = st.lib.function_symbol(name);
        if sym.is_null() {
            return Ok(None);
        }
        // SAFETY: exported packed functions have the safe-call signature.
        let call: TVMFFISafeCallType = unsafe { std::mem::transmute(sym) };
        // SAFETY: the symbol is an exported packed function of a library that stays loaded
        // (never closed) while `self` lives.
        Ok(Some(unsafe {
            Function::from_symbol(call, self.strong_ref().upcast())
        }))
    }

    /// `own(self)`, else (with `query_imports`) the first `Some` of `own` over the imports,
    /// depth first: how C++ `ModuleObj::GetFunction(name, query_imports)` and its siblings
    /// search.
    fn search<R>(
        &self,
        query_imports: bool,
        own: &impl Fn(&ModuleObj) -> Result<Option<R>>,
    ) -> Result<Option<R>> {
        if let Some(r) = own(self)? {
            return Ok(Some(r));
        }
        if query_imports {
            for m in self.imports() {
                if let Some(r) = m.search(true, own)? {
                    return Ok(Some(r));
                }
            }
        }
        Ok(None)
    }

    /// The function `name` of this module (then of its imports when `query_imports`).
    pub fn get_function(&self, name: &str, query_imports: bool) -> Result<Option<Function>> {
        self.search(query_imports, &|m| m.own_function(name))
    }

    /// Whether `name` is implemented here (or in the imports).
    pub fn implements(&self, name: &str, query_imports: bool) -> Result<bool> {
        let here = |m: &ModuleObj| -> Result<Option<()>> {
            let found = match m.state() {
                Some(st) => !st.lib.function_symbol(name).is_null(),
                None => cxx_module::implements(m, name)?,
            };
            Ok(found.then_some(()))
        };
        Ok(self.search(query_imports, &here)?.is_some())
    }

    /// The doc (`DOC_PREFIX`) or metadata string of `name` in this module alone.
    fn own_string(&self, prefix: &str, name: &str) -> Result<Option<String>> {
        let Some(st) = self.state() else {
            return if prefix == DOC_PREFIX {
                cxx_module::function_doc(self, name)
            } else {
                cxx_module::function_metadata(self, name)
            };
        };
        let sym = st.lib.symbol(&format!("{prefix}{name}"));
        if sym.is_null() {
            return Ok(None);
        }
        call_string_symbol(sym, &format!("{prefix}{name}")).map(Some)
    }

    fn string_symbol(
        &self,
        prefix: &str,
        name: &str,
        query_imports: bool,
    ) -> Result<Option<String>> {
        self.search(query_imports, &|m| m.own_string(prefix, name))
    }

    /// The metadata JSON exported for `name`.
    pub fn function_metadata(&self, name: &str, query_imports: bool) -> Result<Option<String>> {
        self.string_symbol(METADATA_PREFIX, name, query_imports)
    }

    /// The documentation exported for `name`.
    pub fn function_doc(&self, name: &str, query_imports: bool) -> Result<Option<String>> {
        self.string_symbol(DOC_PREFIX, name, query_imports)
    }

    /// The source of the module in `format` (ours have none: "").
    pub fn inspect_source(&self, format: &str) -> Result<String> {
        match self.state() {
            Some(_) => Ok(String::new()),
            None => cxx_module::inspect_source(self, format),
        }
    }

    /// The formats `write_to_file` accepts (ours: none).
    pub fn write_formats(&self) -> Result<Array> {
        match self.state() {
            Some(_) => Ok(Array::empty()),
            None => cxx_module::write_formats(self),
        }
    }

    /// Writes the module to `path` (ours cannot be written).
    pub fn write_to_file(&self, path: &str, format: &str) -> Result<()> {
        match self.state() {
            Some(_) => Err(Error::runtime_error(format!(
                "Module[{}] does not support WriteToFile",
                self.kind()?
            ))),
            None => cxx_module::write_to_file(self, path, format),
        }
    }

    /// `ImportModule` (virtual in C++: a C++ module may override it).
    pub fn import_module(&self, other: &Module) -> Result<()> {
        match self.state() {
            Some(_) => self.import_module_base(other),
            None => cxx_module::import_module(self, other),
        }
    }

    /// `ClearImports` (virtual in C++, as `import_module`).
    pub fn clear_imports(&self) -> Result<()> {
        match self.state() {
            Some(_) => {
                self.clear_imports_base();
                Ok(())
            }
            None => cxx_module::clear_imports(self),
        }
    }

    /// The base `ModuleObj::ImportModule`: adds `other` to the imports; an import that would
    /// create a cycle is a RuntimeError.
    pub fn import_module_base(&self, other: &Module) -> Result<()> {
        let mut stack = vec![other.clone()];
        let mut seen = vec![other.as_raw()];
        while let Some(m) = stack.pop() {
            for i in m.imports() {
                if !seen.contains(&i.as_raw()) {
                    seen.push(i.as_raw());
                    stack.push(i);
                }
            }
        }
        if seen.contains(&self.strong_ref().as_raw()) {
            return Err(Error::runtime_error(
                "ffi.ModuleImportModule: Cyclic dependency detected during import",
            ));
        }
        let mut mods = self.imports();
        mods.push(other.clone());
        self.set_imports(mods);
        Ok(())
    }

    /// The base `ModuleObj::ClearImports`: drops every import.
    pub fn clear_imports_base(&self) {
        self.set_imports(Vec::new());
    }

    /// `TVMFFIEnvModLookupFromImports`: imports first (recursively), then the global registry;
    /// the result is cached here and returned borrowed.
    pub fn lookup_from_imports(&self, name: &str) -> Result<*mut TVMFFIObject> {
        let st = self.state().ok_or_else(|| {
            Error::type_error(format!(
                "TVMFFIEnvModLookupFromImports: the library context of `{name}` is not a \
                 library module"
            ))
        })?;
        if let Some(f) = st.import_cache.lock().get(name) {
            return Ok(f.as_raw());
        }
        let mut found = None;
        for m in self.imports() {
            if let Some(f) = m.get_function(name, true)? {
                found = Some(f);
                break;
            }
        }
        let found = found
            .or_else(|| crate::global::get_global(name))
            .ok_or_else(|| {
                Error::runtime_error(format!(
                    "Cannot find function {name} in the imported modules or global registry."
                ))
            })?;
        // Another thread may have cached `name` meanwhile: keep (and return) the cached one,
        // since its pointer may already have been handed out borrowed; ours is released
        // outside the lock (its deleter may call back in).
        let (raw, unused) = {
            let mut cache = st.import_cache.lock();
            match cache.entry(name.to_string()) {
                std::collections::btree_map::Entry::Occupied(e) => (e.get().as_raw(), Some(found)),
                std::collections::btree_map::Entry::Vacant(v) => (v.insert(found).as_raw(), None),
            }
        };
        drop(unused);
        Ok(raw)
    }
}

/// Loads a shared object as a library module (`ffi.Module.load_from_file.so`).
pub fn load_dylib(path: &str) -> Result<Module> {
    let c = CString::new(path).map_err(|_| {
        Error::value_error(format!(
            "ffi.ModuleLoadFromFile: path {path:?} contains a NUL byte"
        ))
    })?;
    // SAFETY: a NUL-terminated path; RTLD_LOCAL keeps the library's symbols to itself.
    let handle =
        unsafe { crate::cxx_module::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
    if handle.is_null() {
        // SAFETY: dlerror returns a thread-local message or NULL.
        let msg = unsafe {
            let e = libc::dlerror();
            if e.is_null() {
                "unknown error".to_string()
            } else {
                CStr::from_ptr(e).to_string_lossy().into_owned()
            }
        };
        // The official kind and message (a failed check in its loader).
        return Err(Error::internal(format!(
            "Check failed: (lib_handle_ != nullptr) is false: Failed to load dynamic shared \
             library {path} {msg}"
        )));
    }
    let lib = Library::Dylib {
        handle,
        path: path.to_string(),
    };
    create_library_module(lib, path)
}

/// The official `CreateLibraryModule`, shared by shared objects and the system library: writes
/// the context symbols into the library, rebuilds embedded modules (`__tvm_ffi__library_bin`)
/// and writes the root's library module into `__tvm_ffi__library_ctx`.
fn create_library_module(lib: Library, path: &str) -> Result<Module> {
    for (name, sym) in crate::env::CONTEXT_SYMBOLS.lock().iter() {
        let slot = lib.symbol(name) as *mut *mut c_void;
        if !slot.is_null() {
            // SAFETY: context symbols are `void*` variables of the library, by convention.
            unsafe { *slot = *sym as *mut c_void };
        }
    }
    let ctx_slot = lib.symbol(LIBRARY_CTX) as *mut *mut c_void;
    let bin = lib.symbol(LIBRARY_BIN) as *const u8;
    if !bin.is_null() {
        // SAFETY: the symbol is the library's embedded blob, which starts with its length.
        let blob = unsafe {
            let n = u64::from_le_bytes(std::ptr::read_unaligned(bin as *const [u8; 8]));
            std::slice::from_raw_parts(bin.add(8), n as usize)
        };
        return load_library_bin(path, blob, &lib, ctx_slot);
    }
    let module = make_module(lib);
    set_library_ctx(ctx_slot, &module);
    Ok(module)
}

/// Writes the library module into the library's context variable, if it has one.
fn set_library_ctx(ctx_slot: *mut *mut c_void, module: &Module) {
    if !ctx_slot.is_null() {
        // SAFETY: the library context is a `void*` variable; it receives the module, which the
        // library only uses while it is loaded (i.e. while the module lives).
        unsafe { *ctx_slot = module.as_raw() as *mut c_void };
    }
}

/// Little-endian reads from the embedded blob, each failing with a RuntimeError that names
/// the file when the blob ends early.
struct BlobReader<'a> {
    path: &'a str,
    rest: &'a [u8],
}

impl<'a> BlobReader<'a> {
    fn malformed(&self, what: &str) -> Error {
        Error::runtime_error(format!(
            "ffi.ModuleLoadFromFile: {}: malformed `{LIBRARY_BIN}`: {what}",
            self.path
        ))
    }

    fn bytes(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        let n = usize::try_from(n).ok().filter(|&n| n <= self.rest.len());
        let Some(n) = n else {
            return Err(self.malformed(&format!("{what} runs past the end")));
        };
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.bytes(8, what)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    /// `<size: u64> <size x u64>`.
    fn u64_vec(&mut self, what: &str) -> Result<Vec<u64>> {
        let n = self.u64(what)?;
        let b = self.bytes(n.saturating_mul(8), what)?;
        Ok(b.chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect())
    }

    /// `<size: u64> <bytes>`.
    fn sized(&mut self, what: &str) -> Result<&'a [u8]> {
        let n = self.u64(what)?;
        self.bytes(n, what)
    }
}

/// A library that embeds serialized modules (`__tvm_ffi__library_bin`: `<import_tree>` as CSR
/// arrays `<indptr: vec<u64>> <child_indices: vec<u64>>`, then per module `<kind: str>` and,
/// except for the library itself (`_lib`), `<bytes>` for `ffi.Module.load_from_bytes.<kind>`):
/// rebuilds the modules and their imports and returns the first, the root.
fn load_library_bin(
    path: &str,
    blob: &[u8],
    lib: &Library,
    ctx_slot: *mut *mut c_void,
) -> Result<Module> {
    let mut r = BlobReader { path, rest: blob };
    let indptr = r.u64_vec("the import tree's index pointers")?;
    let children = r.u64_vec("the import tree's child indices")?;
    if indptr.len() < 2 {
        return Err(r.malformed("the import tree has no module"));
    }
    let n = indptr.len() - 1;
    let ordered = indptr.windows(2).all(|w| w[0] <= w[1]);
    if indptr[0] != 0 || !ordered || indptr[n] as usize != children.len() {
        return Err(r.malformed("the import tree's index pointers are inconsistent"));
    }
    if let Some(&c) = children.iter().find(|&&c| c >= n as u64) {
        return Err(r.malformed(&format!("the import tree names module {c} of {n}")));
    }
    let mut modules = Vec::with_capacity(n);
    for i in 0..n {
        let kind = r.sized(&format!("the kind of module {i}"))?;
        let kind = std::str::from_utf8(kind)
            .map_err(|_| r.malformed(&format!("the kind of module {i} is not UTF-8")))?;
        if kind == "_lib" {
            let m = make_module(lib.clone());
            set_library_ctx(ctx_slot, &m);
            modules.push(m);
            continue;
        }
        let bytes = r.sized(&format!("the bytes of module {i} ({kind})"))?;
        let loader_name = format!("ffi.Module.load_from_bytes.{kind}");
        let Some(loader) = crate::global::get_global(&loader_name) else {
            return Err(Error::runtime_error(format!(
                "ffi.ModuleLoadFromFile: {path} embeds a module of kind `{kind}`, but no \
                 loader is registered for it: load the runtime that registers \
                 `{loader_name}` first"
            )));
        };
        let m = loader.call(&[Any::from(bytes).as_view()])?;
        let m = m.as_view().as_object_of::<ModuleObj>().ok_or_else(|| {
            Error::type_error(format!(
                "ffi.ModuleLoadFromFile: `{loader_name}` returned {}, not an ffi.Module",
                m.as_view().type_key()
            ))
        })?;
        modules.push(m);
    }
    for (i, m) in modules.iter().enumerate() {
        let range = indptr[i] as usize..indptr[i + 1] as usize;
        if range.is_empty() {
            continue;
        }
        // As written by the exporter: appended directly, no cycle check, no virtual call.
        let mut imports = m.imports();
        imports.extend(children[range].iter().map(|&c| modules[c as usize].clone()));
        m.set_imports(imports);
    }
    Ok(modules.swap_remove(0))
}

/// A module kept for the life of the process, with the address of the block it lives in. A
/// module's handle points past the C++ vtable pointer that starts its block (ours and C++ ones
/// alike), so with the handle alone valgrind reports every kept module, and all it holds, as
/// "possibly lost" at exit; the block address makes them reachable.
pub struct KeptModule {
    pub module: Module,
    _block: usize,
}

impl KeptModule {
    pub fn new(module: Module) -> Self {
        let block = block_of(module.as_ptr()) as usize;
        KeptModule {
            module,
            _block: block,
        }
    }
}

static SYSTEM_LIBS: LazyLock<Mutex<BTreeMap<String, KeptModule>>> = LazyLock::new(Default::default);

/// The system library module for `prefix` (one per prefix, created on first use, as the
/// official library does: context symbols, `__tvm_ffi__library_ctx` and an embedded
/// `__tvm_ffi__library_bin` registered as system-library symbols are honoured).
pub fn system_lib(prefix: &str) -> Result<Module> {
    if let Some(k) = SYSTEM_LIBS.lock().get(prefix) {
        return Ok(k.module.clone());
    }
    // Created without the lock: embedded modules run loaders (user code, which may ask for a
    // system library too). Two threads may both create it; the first one cached wins.
    let lib = Library::System {
        prefix: prefix.to_string(),
    };
    let m = create_library_module(lib, "<system library>")?;
    let kept = SYSTEM_LIBS
        .lock()
        .entry(prefix.to_string())
        .or_insert_with(|| KeptModule::new(m))
        .module
        .clone();
    Ok(kept)
}

/// Modules kept alive for the life of the process (`ffi.ModuleGlobalsAdd`).
pub static MODULE_GLOBALS: Mutex<Vec<KeptModule>> = Mutex::new(Vec::new());

/// `ffi.ModuleLoadFromFile(path)`: dispatches on the extension to `ffi.Module.load_from_file.<ext>`.
pub fn load_from_file(path: &str) -> Result<Any> {
    let Some((_, ext)) = path.rsplit_once('.') else {
        // (the official wording, without the function's name: C++ callers of
        // `Module::LoadFromFile` see these messages as the official library words them)
        return Err(Error::runtime_error(format!(
            "Failed to get file format from {path}"
        )));
    };
    let ext = match ext {
        "dll" | "dylib" | "dso" => "so",
        e => e,
    };
    let loader_name = format!("ffi.Module.load_from_file.{ext}");
    let Some(loader) = crate::global::get_global(&loader_name) else {
        return Err(Error::runtime_error(format!(
            "Loader for `.{ext}` files is not registered, resolved to ({loader_name}) in the \
             global registry.Ensure that you have loaded the correct runtime code, andthat you \
             are on the correct hardware architecture."
        )));
    };
    let (p, f) = (Any::from(path), Any::from(ext));
    let m = loader.call(&[p.as_view(), f.as_view()])?;
    // As the official `(*floader)(file_name, format).cast<Module>()`.
    if m.as_view().as_object_of::<ModuleObj>().is_none() {
        return Err(Error::type_error(format!(
            "Cannot convert from type `{}` to `ffi.Module`",
            m.as_view().type_key()
        )));
    }
    Ok(m)
}

// The C++ layout: `imports_` at offset 24 (reflection reads it there), 40 bytes past the vptr.
const _: () = assert!(std::mem::offset_of!(ModuleObj, imports) == 24);
const _: () = assert!(std::mem::size_of::<ModuleObj>() == 40);
const _: () = assert!(std::mem::offset_of!(ModuleBlock, module) == 8);

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(tree: &[&[u64]], kinds: &[&str]) -> Vec<u8> {
        let mut indptr = vec![0u64];
        for c in tree {
            indptr.push(indptr.last().unwrap() + c.len() as u64);
        }
        let children: Vec<u64> = tree.iter().flat_map(|c| c.iter().copied()).collect();
        let mut b = Vec::new();
        for v in [&indptr, &children] {
            b.extend((v.len() as u64).to_le_bytes());
            v.iter().for_each(|x| b.extend(x.to_le_bytes()));
        }
        for k in kinds {
            b.extend((k.len() as u64).to_le_bytes());
            b.extend(k.as_bytes());
        }
        b
    }

    fn load(b: &[u8]) -> Result<Module> {
        let lib = Library::System {
            prefix: "anyffi.test.".into(),
        };
        load_library_bin("blob.so", b, &lib, std::ptr::null_mut())
    }

    unsafe extern "C" fn race_g(
        _h: *mut c_void,
        _args: *const anyffi::abi::TVMFFIAny,
        _n: i32,
        result: *mut anyffi::abi::TVMFFIAny,
    ) -> i32 {
        // SAFETY: the caller's result slot.
        unsafe {
            (*result).type_index = anyffi::abi::kTVMFFIInt;
            (*result).value.v_int64 = 42;
        }
        0
    }

    #[test]
    fn concurrent_first_import_lookups_get_one_cached_function() {
        // A library module makes a new Function per lookup; two threads' first
        // `TVMFFIEnvModLookupFromImports` of one name both missed the cache and both inserted,
        // so the second insert freed the function the first had already handed out borrowed.
        for round in 0..40 {
            let (a, b) = (format!("race{round}_a_"), format!("race{round}_b_"));
            // SAFETY: `race_g` is a packed function that accepts any handle.
            unsafe {
                crate::env::register_system_lib_symbol(
                    &format!("{SYMBOL_PREFIX}{b}g"),
                    race_g as *mut c_void,
                )
            };
            let (ma, mb) = (system_lib(&a).unwrap(), system_lib(&b).unwrap());
            ma.import_module(&mb).unwrap();
            let barrier = std::sync::Barrier::new(4);
            let ptrs: Vec<usize> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..4)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            ma.lookup_from_imports("g").unwrap() as usize
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            assert!(
                ptrs.iter().all(|&p| p == ptrs[0]),
                "round {round}: {ptrs:x?}"
            );
            // the one pointer handed out is the cached, live function
            let f = ma.lookup_from_imports("g").unwrap();
            assert_eq!(f as usize, ptrs[0]);
            // SAFETY: a borrowed, live function object.
            let ti = unsafe { (*f).type_index };
            assert_eq!(ti, anyffi::abi::kTVMFFIFunction);
        }
    }

    #[test]
    fn library_bin_rebuilds_the_import_tree() {
        let root = load(&blob(&[&[1, 2], &[2], &[]], &["_lib", "_lib", "_lib"])).unwrap();
        let imports = root.imports();
        assert_eq!(imports.len(), 2);
        assert_eq!(imports[0].imports().len(), 1);
        assert!(imports[0].imports()[0].same_as(&imports[1]));
        assert_eq!(root.kind().unwrap(), "library");
    }

    #[test]
    fn malformed_library_bin_is_an_error() {
        let good = blob(&[&[1], &[]], &["_lib", "_lib"]);
        for cut in [0, 7, 8, 20, good.len() - 1] {
            let e = load(&good[..cut]).unwrap_err();
            assert_eq!(e.kind(), "RuntimeError");
            assert!(
                e.message()
                    .contains("blob.so: malformed `__tvm_ffi__library_bin`"),
                "{}",
                e.message()
            );
        }
        let e = load(&blob(&[&[5], &[]], &["_lib", "_lib"])).unwrap_err();
        assert!(
            e.message().contains("names module 5 of 2"),
            "{}",
            e.message()
        );
        let e = load(&blob(&[], &[])).unwrap_err();
        assert!(e.message().contains("no module"), "{}", e.message());
        // index pointers that decrease
        let mut b = Vec::new();
        for v in [&[0u64, 2, 1][..], &[1, 0][..]] {
            b.extend((v.len() as u64).to_le_bytes());
            v.iter().for_each(|x| b.extend(x.to_le_bytes()));
        }
        let e = load(&b).unwrap_err();
        assert!(e.message().contains("inconsistent"), "{}", e.message());
        let e = load(&blob(&[&[]], &["nokind\u{0}"])).unwrap_err();
        assert!(e.message().contains("runs past the end"), "{}", e.message());
        let mut nonutf8 = blob(&[&[]], &["x"]);
        *nonutf8.last_mut().unwrap() = 0xff;
        let e = load(&nonutf8).unwrap_err();
        assert!(e.message().contains("not UTF-8"), "{}", e.message());
    }
}
