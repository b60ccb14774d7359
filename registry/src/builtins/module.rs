//! `ffi.Module*` built-ins: loading, function lookup with imports, metadata and docs, imports,
//! the keep-alive set, and the system library.

use anyffi::{Any, Error, Function};

use crate::global::{self, Registrar};
use crate::module::{self, Module};

pub(super) fn register(r: &mut Registrar<'_>) {
    if let Err(e) = module::register_reflection() {
        eprintln!("anyffi: registering the reflection of ffi.Module failed: {e}");
    }
    r.typed_schema(
        "ffi.ModuleLoadFromFile",
        "Loads a module from a file, by extension.",
        global::function_schema(&["ffi.String"], "ffi.Module"),
        |path: String| module::load_from_file(&path),
    );
    r.typed(
        "ffi.Module.load_from_file.so",
        "Loads a shared object built against the TVM FFI headers as a library module.",
        |path: String, _fmt: String| module::load_dylib(&path),
    );
    r.typed(
        "ffi.ModuleGetFunction",
        "The function `name` of a module (and its imports), or None.",
        |m: Module, name: String, query_imports: bool| -> anyffi::Result<Option<Function>> {
            m.get_function(&name, query_imports)
        },
    );
    r.typed(
        "ffi.ModuleImplementsFunction",
        "Whether a module (or its imports) implements `name`.",
        |m: Module, name: String, query_imports: bool| m.implements(&name, query_imports),
    );
    r.typed(
        "ffi.ModuleGetFunctionMetadata",
        "The metadata JSON a module exports for `name`, or None.",
        |m: Module, name: String, query_imports: bool| m.function_metadata(&name, query_imports),
    );
    r.typed(
        "ffi.ModuleGetFunctionDoc",
        "The documentation a module exports for `name`, or None.",
        |m: Module, name: String, query_imports: bool| m.function_doc(&name, query_imports),
    );
    r.typed("ffi.ModuleGetKind", "The kind of a module.", |m: Module| {
        m.kind()
    });
    r.typed(
        "ffi.ModuleGetPropertyMask",
        "The property bits of a module.",
        |m: Module| m.property_mask(),
    );
    r.typed(
        "ffi.ModuleInspectSource",
        "The source of a module (library modules have none).",
        |m: Module, fmt: String| m.inspect_source(&fmt),
    );
    r.typed_schema(
        "ffi.ModuleGetWriteFormats",
        "The formats a module can be written in.",
        global::function_schema(&["ffi.Module"], "Array<ffi.String>"),
        |m: Module| m.write_formats(),
    );
    r.typed(
        "ffi.ModuleWriteToFile",
        "Writes a module to a file (library modules cannot be written).",
        |m: Module, path: String, fmt: String| m.write_to_file(&path, &fmt),
    );
    r.typed(
        "ffi.ModuleImportModule",
        "Imports `other` into a module (cycles are rejected).",
        |m: Module, other: Module| m.import_module(&other),
    );
    r.typed(
        "ffi.ModuleClearImports",
        "Drops every import of a module.",
        |m: Module| m.clear_imports(),
    );
    r.typed(
        "ffi.ModuleGlobalsAdd",
        "Keeps a module alive for the life of the process.",
        |m: Module| {
            let mut g = module::MODULE_GLOBALS.lock();
            if !g.iter().any(|x| x.module.same_as(&m)) {
                g.push(module::KeptModule::new(m));
            }
        },
    );
    r.typed(
        "ffi.ModuleGlobalsRemove",
        "Releases a module kept by ModuleGlobalsAdd.",
        |m: Module| {
            module::MODULE_GLOBALS
                .lock()
                .retain(|x| !x.module.same_as(&m));
        },
    );
    r.packed(
        "ffi.SystemLib",
        "SystemLib([prefix]): the system library module.",
        |args| {
            let prefix = match args {
                [] => String::new(),
                [p] => p.get::<String>().map_err(|e| {
                    Error::type_error(format!("ffi.SystemLib: `prefix`: {}", e.message()))
                })?,
                _ => {
                    return Err(Error::type_error(format!(
                        "ffi.SystemLib: expected at most 1 argument, got {}",
                        args.len()
                    )))
                }
            };
            Ok(Any::from(module::system_lib(&prefix)?))
        },
    );
}
