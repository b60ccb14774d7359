//! The non-inline C++ functions of the official library (its `TVM_FFI_EXTRA_CXX_API`), under
//! their Itanium-mangled names, and the vtable of `ffi.Module` (see `cxx_abi.rs` for the ABI).
//!
//! Each entry point forwards to the global function of the same meaning (`ffi.DeepCopy`,
//! `ffi.json.Parse`, `ffi.ModuleLoadFromFile`, ...), so C++ callers and packed-function callers
//! get the same results and errors; an error is thrown as `tvm::ffi::Error`.
//!
//! Argument and result representations (all x86-64 Itanium):
//! - `const Any&`, `const String&`, `const Optional<int>&`: a pointer to a `TVMFFIAny` cell;
//! - `const ObjectRef&` (and `Module`, `VisitErrorContext`, `TypedFunction`): a pointer to an
//!   object pointer (NULL for a null reference);
//! - by-value `Any`, `String`, `Optional<String>`, `json::Value`: a hidden result pointer to an
//!   uninitialised `TVMFFIAny`; by-value `Module`, `Array`, `Optional<ObjectRef-like>`: a hidden
//!   result pointer to an uninitialised object pointer (NULL for `std::nullopt`).

use std::ffi::{c_char, c_int, c_void};
use std::ptr::{addr_of, null_mut};

use anyffi::abi::{kTVMFFINone, kTVMFFIStaticObjectBegin, TVMFFIAny, TVMFFIObject};
use anyffi::{Any, AnyView, Error, Function, Result};

use crate::cxx_abi::{run_or_throw, Static, MODULE_TYPE_INFO};
use crate::module::ModuleObj;

/// A borrowed view of a `const Any&` (or `String`, `Optional<T>` cell).
///
/// # Safety
/// `p` must point at a live, initialised cell.
unsafe fn any_ref<'a>(p: *const TVMFFIAny) -> AnyView<'a> {
    // SAFETY: per the caller.
    unsafe { AnyView::from_raw(*p) }
}

/// A borrowed view of a `const ObjectRef&` (None for a null reference).
///
/// # Safety
/// `p` must point at an object pointer that is NULL or live.
unsafe fn object_ref<'a>(p: *const *mut TVMFFIObject) -> AnyView<'a> {
    // SAFETY: per the caller.
    let obj = unsafe { *p };
    let raw = if obj.is_null() {
        TVMFFIAny::NONE
    } else {
        TVMFFIAny {
            // SAFETY: a live object header.
            type_index: unsafe { (*obj).type_index },
            small_str_len: 0,
            value: anyffi::abi::TVMFFIAnyValue { v_obj: obj },
        }
    };
    // SAFETY: the object outlives the call.
    unsafe { AnyView::from_raw(raw) }
}

/// Writes an owned value into a by-value `Any`-like result.
///
/// # Safety
/// `ret` must be writable (its old content is not released).
unsafe fn put_any(ret: *mut TVMFFIAny, v: Any) -> *mut TVMFFIAny {
    // SAFETY: per the caller.
    unsafe { ret.write(v.into_raw()) };
    ret
}

/// Writes an owned object (or NULL for None) into a by-value `ObjectRef`-like result; other
/// kinds are a TypeError naming `what`.
///
/// # Safety
/// `ret` must be writable (its old content is not released).
unsafe fn put_object(
    ret: *mut *mut TVMFFIObject,
    v: Any,
    what: &str,
) -> Result<*mut *mut TVMFFIObject> {
    let ti = v.type_index();
    let obj = if ti == kTVMFFINone {
        null_mut()
    } else if ti >= kTVMFFIStaticObjectBegin {
        v.into_object().map(|o| o.into_raw()).unwrap_or(null_mut())
    } else {
        return Err(Error::type_error(format!(
            "{what}: expected an object result, got {}",
            v.as_view().type_key()
        )));
    };
    // SAFETY: per the caller.
    unsafe { ret.write(obj) };
    Ok(ret)
}

fn global(name: &str) -> Result<Function> {
    crate::global::get_global(name)
        .ok_or_else(|| Error::runtime_error(format!("global function `{name}` is not registered")))
}

fn call(name: &str, args: &[AnyView<'_>]) -> Result<Any> {
    global(name)?.call(args)
}

fn call_bool(name: &str, args: &[AnyView<'_>]) -> Result<bool> {
    call(name, args)?.get::<bool>()
}

// --- dataclass.h ----------------------------------------------------------------------------

/// `Any DeepCopy(const Any&)`.
#[export_name = "_ZN3tvm3ffi8DeepCopyERKNS0_3AnyE"]
pub unsafe extern "C-unwind" fn cxx_deep_copy(
    ret: *mut TVMFFIAny,
    value: *const TVMFFIAny,
) -> *mut TVMFFIAny {
    // SAFETY: the C++ caller passes a live Any and a result slot.
    run_or_throw(|| unsafe { Ok(put_any(ret, call("ffi.DeepCopy", &[any_ref(value)])?)) })
}

/// `String ReprPrint(const Any&)`.
#[export_name = "_ZN3tvm3ffi9ReprPrintERKNS0_3AnyE"]
pub unsafe extern "C-unwind" fn cxx_repr_print(
    ret: *mut TVMFFIAny,
    value: *const TVMFFIAny,
) -> *mut TVMFFIAny {
    // SAFETY: as above.
    run_or_throw(|| unsafe { Ok(put_any(ret, call("ffi.ReprPrint", &[any_ref(value)])?)) })
}

/// `int64_t RecursiveHash(const Any&)`.
#[export_name = "_ZN3tvm3ffi13RecursiveHashERKNS0_3AnyE"]
pub unsafe extern "C-unwind" fn cxx_recursive_hash(value: *const TVMFFIAny) -> i64 {
    // SAFETY: as above.
    run_or_throw(|| unsafe { call("ffi.RecursiveHash", &[any_ref(value)])?.get::<i64>() })
}

macro_rules! recursive_compare {
    ($fn_name:ident, $symbol:literal, $global:literal) => {
        #[doc = concat!("`bool ", $global, "(const Any&, const Any&)`.")]
        #[export_name = $symbol]
        pub unsafe extern "C-unwind" fn $fn_name(
            lhs: *const TVMFFIAny,
            rhs: *const TVMFFIAny,
        ) -> bool {
            // SAFETY: the C++ caller passes two live Any values.
            run_or_throw(|| unsafe { call_bool($global, &[any_ref(lhs), any_ref(rhs)]) })
        }
    };
}

recursive_compare!(
    cxx_recursive_eq,
    "_ZN3tvm3ffi11RecursiveEqERKNS0_3AnyES3_",
    "ffi.RecursiveEq"
);
recursive_compare!(
    cxx_recursive_lt,
    "_ZN3tvm3ffi11RecursiveLtERKNS0_3AnyES3_",
    "ffi.RecursiveLt"
);
recursive_compare!(
    cxx_recursive_le,
    "_ZN3tvm3ffi11RecursiveLeERKNS0_3AnyES3_",
    "ffi.RecursiveLe"
);
recursive_compare!(
    cxx_recursive_gt,
    "_ZN3tvm3ffi11RecursiveGtERKNS0_3AnyES3_",
    "ffi.RecursiveGt"
);
recursive_compare!(
    cxx_recursive_ge,
    "_ZN3tvm3ffi11RecursiveGeERKNS0_3AnyES3_",
    "ffi.RecursiveGe"
);

// --- serialization.h, json.h ----------------------------------------------------------------

/// `json::Value ToJSONGraph(const Any& value, const Any& metadata)`.
#[export_name = "_ZN3tvm3ffi11ToJSONGraphERKNS0_3AnyES3_"]
pub unsafe extern "C-unwind" fn cxx_to_json_graph(
    ret: *mut TVMFFIAny,
    value: *const TVMFFIAny,
    metadata: *const TVMFFIAny,
) -> *mut TVMFFIAny {
    // SAFETY: as above.
    run_or_throw(|| unsafe {
        let args = [any_ref(value), any_ref(metadata)];
        Ok(put_any(ret, call("ffi.ToJSONGraph", &args)?))
    })
}

/// `Any FromJSONGraph(const json::Value&)`.
#[export_name = "_ZN3tvm3ffi13FromJSONGraphERKNS0_3AnyE"]
pub unsafe extern "C-unwind" fn cxx_from_json_graph(
    ret: *mut TVMFFIAny,
    value: *const TVMFFIAny,
) -> *mut TVMFFIAny {
    // SAFETY: as above.
    run_or_throw(|| unsafe { Ok(put_any(ret, call("ffi.FromJSONGraph", &[any_ref(value)])?)) })
}

/// Replaces the `String` at `p` (releasing its old value) with `s`.
///
/// # Safety
/// `p` must point at a live `String` cell.
unsafe fn assign_string(p: *mut TVMFFIAny, s: &str) {
    // SAFETY: per the caller: the old value is owned by the cell and dropped here.
    unsafe {
        drop(Any::from_raw(p.read()));
        p.write(Any::from(s).into_raw());
    }
}

/// `json::Value json::Parse(const String& json_str, String* error_msg)`: with `error_msg`, a
/// syntax error is reported there (and None returned); it is set to "" on success.
#[export_name = "_ZN3tvm3ffi4json5ParseERKNS0_6StringEPS2_"]
pub unsafe extern "C-unwind" fn cxx_json_parse(
    ret: *mut TVMFFIAny,
    json_str: *const TVMFFIAny,
    error_msg: *mut TVMFFIAny,
) -> *mut TVMFFIAny {
    // SAFETY: the C++ caller passes a live String, a result slot and NULL or a live String.
    run_or_throw(|| unsafe {
        let parsed = call("ffi.json.Parse", &[any_ref(json_str)]);
        if error_msg.is_null() {
            return Ok(put_any(ret, parsed?));
        }
        match parsed {
            Ok(v) => {
                assign_string(error_msg, "");
                Ok(put_any(ret, v))
            }
            Err(e) if e.kind() == "ValueError" => {
                assign_string(error_msg, &e.message());
                Ok(put_any(ret, Any::none()))
            }
            Err(e) => Err(e),
        }
    })
}

/// `String json::Stringify(const json::Value&, const Optional<int>& indent)`.
#[export_name = "_ZN3tvm3ffi4json9StringifyERKNS0_3AnyERKNS0_8OptionalIivEE"]
pub unsafe extern "C-unwind" fn cxx_json_stringify(
    ret: *mut TVMFFIAny,
    value: *const TVMFFIAny,
    indent: *const TVMFFIAny,
) -> *mut TVMFFIAny {
    // SAFETY: as above (`Optional<int>` is an Any cell: None or Int).
    run_or_throw(|| unsafe {
        let args = [any_ref(value), any_ref(indent)];
        Ok(put_any(ret, call("ffi.json.Stringify", &args)?))
    })
}

// --- structural_equal.h, structural_hash.h, visit_error_context.h ---------------------------

/// `bool StructuralEqual::Equal(const Any&, const Any&, bool map_free_vars, bool
/// skip_tensor_content)`.
#[export_name = "_ZN3tvm3ffi15StructuralEqual5EqualERKNS0_3AnyES4_bb"]
pub unsafe extern "C-unwind" fn cxx_structural_equal(
    lhs: *const TVMFFIAny,
    rhs: *const TVMFFIAny,
    map_free_vars: bool,
    skip_tensor_content: bool,
) -> bool {
    // SAFETY: as above.
    run_or_throw(|| unsafe {
        let (m, s) = (Any::from(map_free_vars), Any::from(skip_tensor_content));
        let args = [any_ref(lhs), any_ref(rhs), m.as_view(), s.as_view()];
        call_bool("ffi.StructuralEqual", &args)
    })
}

/// `Optional<reflection::AccessPathPair> StructuralEqual::GetFirstMismatch(const Any&, const
/// Any&, bool, bool)`.
#[export_name = "_ZN3tvm3ffi15StructuralEqual16GetFirstMismatchERKNS0_3AnyES4_bb"]
pub unsafe extern "C-unwind" fn cxx_structural_first_mismatch(
    ret: *mut *mut TVMFFIObject,
    lhs: *const TVMFFIAny,
    rhs: *const TVMFFIAny,
    map_free_vars: bool,
    skip_tensor_content: bool,
) -> *mut *mut TVMFFIObject {
    const NAME: &str = "ffi.GetFirstStructuralMismatch";
    // SAFETY: as above.
    run_or_throw(|| unsafe {
        let (m, s) = (Any::from(map_free_vars), Any::from(skip_tensor_content));
        let args = [any_ref(lhs), any_ref(rhs), m.as_view(), s.as_view()];
        put_object(ret, call(NAME, &args)?, NAME)
    })
}

/// `uint64_t StructuralHash::Hash(const Any&, bool map_free_vars, bool skip_tensor_content)`.
#[export_name = "_ZN3tvm3ffi14StructuralHash4HashERKNS0_3AnyEbb"]
pub unsafe extern "C-unwind" fn cxx_structural_hash(
    value: *const TVMFFIAny,
    map_free_vars: bool,
    skip_tensor_content: bool,
) -> u64 {
    // SAFETY: as above.
    run_or_throw(|| unsafe {
        let (m, s) = (Any::from(map_free_vars), Any::from(skip_tensor_content));
        let args = [any_ref(value), m.as_view(), s.as_view()];
        Ok(call("ffi.StructuralHash", &args)?.get::<i64>()? as u64)
    })
}

/// `Array<reflection::AccessPath> VisitErrorContext::FindAccessPaths(const ObjectRef& root,
/// const VisitErrorContext&, bool allow_prefix_match)`.
#[export_name = "_ZN3tvm3ffi17VisitErrorContext15FindAccessPathsERKNS0_9ObjectRefERKS1_b"]
pub unsafe extern "C-unwind" fn cxx_find_access_paths(
    ret: *mut *mut TVMFFIObject,
    root: *const *mut TVMFFIObject,
    context: *const *mut TVMFFIObject,
    allow_prefix_match: bool,
) -> *mut *mut TVMFFIObject {
    const NAME: &str = "ffi.VisitErrorContext.FindAccessPaths";
    // SAFETY: the C++ caller passes two live references and a result slot.
    run_or_throw(|| unsafe {
        let p = Any::from(allow_prefix_match);
        let args = [object_ref(root), object_ref(context), p.as_view()];
        put_object(ret, call(NAME, &args)?, NAME)
    })
}

// --- module.h -------------------------------------------------------------------------------

/// `static Module Module::LoadFromFile(const String& file_name)`.
#[export_name = "_ZN3tvm3ffi6Module12LoadFromFileERKNS0_6StringE"]
pub unsafe extern "C-unwind" fn cxx_module_load_from_file(
    ret: *mut *mut TVMFFIObject,
    file_name: *const TVMFFIAny,
) -> *mut *mut TVMFFIObject {
    const NAME: &str = "ffi.ModuleLoadFromFile";
    // SAFETY: the C++ caller passes a live String and a result slot.
    run_or_throw(|| unsafe { put_object(ret, call(NAME, &[any_ref(file_name)])?, NAME) })
}

/// `static void Module::VisitContextSymbols(const TypedFunction<void(String, void*)>&)`: the
/// callback sees every (name, address) registered with `TVMFFIEnvModRegisterContextSymbol`.
#[export_name = "_ZN3tvm3ffi6Module19VisitContextSymbolsERKNS0_13TypedFunctionIFvNS0_6StringEPvEEE"]
pub unsafe extern "C-unwind" fn cxx_module_visit_context_symbols(
    callback: *const *mut TVMFFIObject,
) {
    // SAFETY: the C++ caller passes a live function reference.
    run_or_throw(|| unsafe {
        let f = object_ref(callback).get::<Function>()?;
        let symbols = crate::env::CONTEXT_SYMBOLS.lock().clone();
        for (name, addr) in symbols {
            let (n, a) = (Any::from(name.as_str()), Any::from(addr as *mut c_void));
            f.call(&[n.as_view(), a.as_view()])?;
        }
        Ok(())
    })
}

/// The module behind a C++ `ModuleObj* this` (the handle is 8 bytes past it): ours or one made
/// by C++ code.
///
/// # Safety
/// `this` must be a `ModuleObj*` obtained from a live module handle.
unsafe fn module_of<'a>(this: *const c_void, what: &str) -> Result<&'a ModuleObj> {
    let handle = (this as *const u8).wrapping_add(8) as *mut TVMFFIObject;
    // SAFETY: per the caller, the header of a live module follows the vptr.
    unsafe { crate::module::from_cxx_handle(handle) }
        .ok_or_else(|| Error::type_error(format!("{what}: `this` is not an ffi.Module")))
}

/// The text of a `const String&` (copied: a short string's bytes live in the cell itself).
///
/// # Safety
/// `p` must point at a live String cell.
unsafe fn string_ref(p: *const TVMFFIAny, what: &str) -> Result<String> {
    // SAFETY: per the caller.
    let v = unsafe { any_ref(p) };
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| Error::type_error(format!("{what}: expected a String argument")))
}

fn optional_string(v: Option<String>) -> Any {
    v.map_or_else(Any::none, |s| Any::from(s.as_str()))
}

fn optional_function(v: Option<Function>) -> *mut TVMFFIObject {
    v.map_or(null_mut(), |f| f.into_raw())
}

/// `Optional<Function> ModuleObj::GetFunction(const String& name, bool query_imports)`.
#[export_name = "_ZN3tvm3ffi9ModuleObj11GetFunctionERKNS0_6StringEb"]
pub unsafe extern "C-unwind" fn cxx_module_get_function_q(
    ret: *mut *mut TVMFFIObject,
    this: *const c_void,
    name: *const TVMFFIAny,
    query_imports: bool,
) -> *mut *mut TVMFFIObject {
    const WHAT: &str = "ModuleObj::GetFunction";
    // SAFETY: the C++ caller passes a module, a live String and a result slot.
    run_or_throw(|| unsafe {
        let m = module_of(this, WHAT)?;
        let f = m.get_function(&string_ref(name, WHAT)?, query_imports)?;
        ret.write(optional_function(f));
        Ok(ret)
    })
}

/// `bool ModuleObj::ImplementsFunction(const String& name, bool query_imports)`.
#[export_name = "_ZN3tvm3ffi9ModuleObj18ImplementsFunctionERKNS0_6StringEb"]
pub unsafe extern "C-unwind" fn cxx_module_implements_q(
    this: *const c_void,
    name: *const TVMFFIAny,
    query_imports: bool,
) -> bool {
    const WHAT: &str = "ModuleObj::ImplementsFunction";
    // SAFETY: as above.
    run_or_throw(|| unsafe {
        module_of(this, WHAT)?.implements(&string_ref(name, WHAT)?, query_imports)
    })
}

/// `Optional<String> ModuleObj::GetFunctionDoc(const String& name, bool query_imports)`.
#[export_name = "_ZN3tvm3ffi9ModuleObj14GetFunctionDocERKNS0_6StringEb"]
pub unsafe extern "C-unwind" fn cxx_module_doc_q(
    ret: *mut TVMFFIAny,
    this: *const c_void,
    name: *const TVMFFIAny,
    query_imports: bool,
) -> *mut TVMFFIAny {
    const WHAT: &str = "ModuleObj::GetFunctionDoc";
    // SAFETY: as above.
    run_or_throw(|| unsafe {
        let m = module_of(this, WHAT)?;
        let doc = m.function_doc(&string_ref(name, WHAT)?, query_imports)?;
        Ok(put_any(ret, optional_string(doc)))
    })
}

/// `Optional<String> ModuleObj::GetFunctionMetadata(const String& name, bool query_imports)`.
#[export_name = "_ZN3tvm3ffi9ModuleObj19GetFunctionMetadataERKNS0_6StringEb"]
pub unsafe extern "C-unwind" fn cxx_module_metadata_q(
    ret: *mut TVMFFIAny,
    this: *const c_void,
    name: *const TVMFFIAny,
    query_imports: bool,
) -> *mut TVMFFIAny {
    const WHAT: &str = "ModuleObj::GetFunctionMetadata";
    // SAFETY: as above.
    run_or_throw(|| unsafe {
        let m = module_of(this, WHAT)?;
        let meta = m.function_metadata(&string_ref(name, WHAT)?, query_imports)?;
        Ok(put_any(ret, optional_string(meta)))
    })
}

/// `virtual void ModuleObj::ImportModule(const Module& other)`: the base implementation (our
/// modules' vtable entry, and what C++ subclasses that do not override it call).
#[export_name = "_ZN3tvm3ffi9ModuleObj12ImportModuleERKNS0_6ModuleE"]
pub unsafe extern "C-unwind" fn cxx_module_import(
    this: *const c_void,
    other: *const *mut TVMFFIObject,
) {
    const WHAT: &str = "ModuleObj::ImportModule";
    // SAFETY: the C++ caller passes a module and a live module reference.
    run_or_throw(|| unsafe {
        let m = module_of(this, WHAT)?;
        let other = object_ref(other)
            .as_object_of::<ModuleObj>()
            .ok_or_else(|| Error::type_error(format!("{WHAT}: expected a Module")))?;
        m.import_module_base(&other)
    })
}

/// `virtual void ModuleObj::ClearImports()`: the base implementation.
#[export_name = "_ZN3tvm3ffi9ModuleObj12ClearImportsEv"]
pub unsafe extern "C-unwind" fn cxx_module_clear_imports(this: *const c_void) {
    // SAFETY: the C++ caller passes a module.
    run_or_throw(|| unsafe {
        module_of(this, "ModuleObj::ClearImports")?.clear_imports_base();
        Ok(())
    })
}

// --- the vtable of our modules --------------------------------------------------------------

/// `virtual const char* kind() const`.
unsafe extern "C-unwind" fn vt_kind(this: *const c_void) -> *const c_char {
    // SAFETY: called through the vtable of one of our modules.
    run_or_throw(|| unsafe {
        module_of(this, "ModuleObj::kind")?;
        Ok(crate::module::LIBRARY_KIND.as_ptr())
    })
}

/// `virtual int GetPropertyMask() const`.
unsafe extern "C-unwind" fn vt_property_mask(this: *const c_void) -> c_int {
    // SAFETY: as above.
    run_or_throw(|| unsafe {
        Ok(module_of(this, "ModuleObj::GetPropertyMask")?.property_mask()? as c_int)
    })
}

/// `virtual Optional<Function> GetFunction(const String& name)`.
unsafe extern "C-unwind" fn vt_get_function(
    ret: *mut *mut TVMFFIObject,
    this: *const c_void,
    name: *const TVMFFIAny,
) -> *mut *mut TVMFFIObject {
    const WHAT: &str = "ModuleObj::GetFunction";
    // SAFETY: as above.
    run_or_throw(|| unsafe {
        let f = module_of(this, WHAT)?.get_function(&string_ref(name, WHAT)?, false)?;
        ret.write(optional_function(f));
        Ok(ret)
    })
}

/// `virtual bool ImplementsFunction(const String& name)`.
unsafe extern "C-unwind" fn vt_implements(this: *const c_void, name: *const TVMFFIAny) -> bool {
    // SAFETY: as above.
    unsafe { cxx_module_implements_q(this, name, false) }
}

/// `virtual Optional<String> GetFunctionDoc(const String& name)`.
unsafe extern "C-unwind" fn vt_doc(
    ret: *mut TVMFFIAny,
    this: *const c_void,
    name: *const TVMFFIAny,
) -> *mut TVMFFIAny {
    // SAFETY: as above.
    unsafe { cxx_module_doc_q(ret, this, name, false) }
}

/// `virtual Optional<String> GetFunctionMetadata(const String& name)`.
unsafe extern "C-unwind" fn vt_metadata(
    ret: *mut TVMFFIAny,
    this: *const c_void,
    name: *const TVMFFIAny,
) -> *mut TVMFFIAny {
    // SAFETY: as above.
    unsafe { cxx_module_metadata_q(ret, this, name, false) }
}

/// `virtual void WriteToFile(const String& file_name, const String& format) const`.
unsafe extern "C-unwind" fn vt_write_to_file(
    this: *const c_void,
    _file_name: *const TVMFFIAny,
    _format: *const TVMFFIAny,
) {
    // SAFETY: as above.
    run_or_throw(|| unsafe {
        let m = module_of(this, "ModuleObj::WriteToFile")?;
        Err(Error::runtime_error(format!(
            "Module[{}] does not support WriteToFile",
            m.kind()?
        )))
    })
}

/// `virtual Array<String> GetWriteFormats() const`: none.
unsafe extern "C-unwind" fn vt_write_formats(
    ret: *mut *mut TVMFFIObject,
    this: *const c_void,
) -> *mut *mut TVMFFIObject {
    // SAFETY: as above.
    run_or_throw(|| unsafe {
        module_of(this, "ModuleObj::GetWriteFormats")?;
        ret.write(anyffi::Array::empty().into_raw());
        Ok(ret)
    })
}

/// `virtual Bytes SaveToBytes() const`.
unsafe extern "C-unwind" fn vt_save_to_bytes(
    _ret: *mut TVMFFIAny,
    this: *const c_void,
) -> *mut TVMFFIAny {
    // SAFETY: as above.
    run_or_throw(|| unsafe {
        let m = module_of(this, "ModuleObj::SaveToBytes")?;
        Err(Error::runtime_error(format!(
            "Module[{}] does not support SaveToBytes",
            m.kind()?
        )))
    })
}

/// `virtual String InspectSource(const String& format) const`: "".
unsafe extern "C-unwind" fn vt_inspect_source(
    ret: *mut TVMFFIAny,
    this: *const c_void,
    _format: *const TVMFFIAny,
) -> *mut TVMFFIAny {
    // SAFETY: as above.
    run_or_throw(|| unsafe {
        module_of(this, "ModuleObj::InspectSource")?;
        Ok(put_any(ret, Any::from("")))
    })
}

/// A `vtable for tvm::ffi::ModuleObj`: offset to top, type information, then the virtual
/// functions in declaration order. The first six (`kind` .. `GetFunctionMetadata`) differ
/// between our modules and the base class; `WriteToFile` .. `ClearImports` are the same.
const fn module_vtable(first: [*const c_void; 6]) -> [*const c_void; 14] {
    [
        std::ptr::null::<c_void>(),
        addr_of!(MODULE_TYPE_INFO) as *const c_void,
        first[0],
        first[1],
        first[2],
        first[3],
        first[4],
        first[5],
        vt_write_to_file as *const c_void,
        vt_write_formats as *const c_void,
        vt_save_to_bytes as *const c_void,
        vt_inspect_source as *const c_void,
        cxx_module_import as *const c_void,
        cxx_module_clear_imports as *const c_void,
    ]
}

/// The vtable our modules carry.
static MODULE_VTABLE: Static<[*const c_void; 14]> = Static(module_vtable([
    vt_kind as *const c_void,
    vt_property_mask as *const c_void,
    vt_get_function as *const c_void,
    vt_implements as *const c_void,
    vt_doc as *const c_void,
    vt_metadata as *const c_void,
]));

// --- the vtable of tvm::ffi::ModuleObj itself ------------------------------------------------

/// `int ModuleObj::GetPropertyMask() const` of the base class: no property.
unsafe extern "C-unwind" fn base_property_mask(_this: *const c_void) -> c_int {
    0
}

/// `bool ModuleObj::ImplementsFunction(const String&)` of the base class: whether the (virtual)
/// `GetFunction` finds it.
unsafe extern "C-unwind" fn base_implements(this: *const c_void, name: *const TVMFFIAny) -> bool {
    const WHAT: &str = "ModuleObj::ImplementsFunction";
    // SAFETY: the C++ caller passes a module and a live String.
    run_or_throw(|| unsafe {
        Ok(module_of(this, WHAT)?
            .own_function(&string_ref(name, WHAT)?)?
            .is_some())
    })
}

/// `Optional<String> GetFunctionDoc/GetFunctionMetadata(const String&)` of the base class: none.
unsafe extern "C-unwind" fn base_no_string(
    ret: *mut TVMFFIAny,
    _this: *const c_void,
    _name: *const TVMFFIAny,
) -> *mut TVMFFIAny {
    // SAFETY: the C++ caller passes a result slot.
    unsafe { put_any(ret, Any::none()) }
}

/// `vtable for tvm::ffi::ModuleObj`, exported: the constructor and destructor of a C++ subclass
/// install it while the `ModuleObj` part is built or torn down, and a subclass's type
/// information refers to `MODULE_TYPE_INFO`. The pure virtual functions (`kind`,
/// `GetFunction`) are `__cxa_pure_virtual`; the others behave as the header's definitions.
#[export_name = "_ZTVN3tvm3ffi9ModuleObjE"]
pub static MODULE_BASE_VTABLE: Static<[*const c_void; 14]> = Static(module_vtable([
    crate::cxx_abi::__cxa_pure_virtual as *const c_void,
    base_property_mask as *const c_void,
    crate::cxx_abi::__cxa_pure_virtual as *const c_void,
    base_implements as *const c_void,
    base_no_string as *const c_void,
    base_no_string as *const c_void,
]));

/// The vptr value of our modules (the vtable's address point).
pub(crate) fn module_vptr() -> *const c_void {
    (addr_of!(MODULE_VTABLE.0) as *const *const c_void).wrapping_add(2) as *const c_void
}
