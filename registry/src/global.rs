//! The global function table (spec §6): set with override rules, get (new reference), remove,
//! list, and per-function metadata (`{"type_schema": ...}` JSON).
//!
//! Rationale: lookups are far more frequent than registrations, so the table is a read-mostly
//! `RwLock<HashMap>`; the built-in functions are inserted when the table is first touched, so
//! every entry point (C, Rust tests, other crates) sees them without an init call.

use std::collections::HashMap;
use std::sync::LazyLock;

use anyffi::abi::kTVMFFIFieldFlagBitMaskIsStaticMethod;
use anyffi::{Any, AnyView, Error, Function, Result, TypedFn};
use parking_lot::RwLock;

/// One registered function with its documentation.
#[derive(Clone)]
pub struct GlobalEntry {
    pub function: Function,
    pub doc: String,
    /// JSON object text, `""` when none was given.
    pub metadata: String,
    pub flags: i64,
}

type Table = HashMap<Box<str>, GlobalEntry>;

static TABLE: LazyLock<RwLock<Table>> = LazyLock::new(|| {
    let mut t = Table::new();
    crate::builtins::register_all(&mut Registrar(&mut t));
    // Library types whose methods call global functions (StructuralKey) find them through this.
    anyffi::reflection::set_global_lookup(get_global);
    RwLock::new(t)
});

/// Inserts into a table under construction (used by the built-ins before the lock exists).
pub struct Registrar<'a>(&'a mut Table);

impl Registrar<'_> {
    /// Adds a packed function.
    pub fn packed<F>(&mut self, name: &str, doc: &str, f: F)
    where
        F: Fn(&[AnyView<'_>]) -> Result<Any> + Send + Sync + 'static,
    {
        self.0
            .insert(name.into(), packed_entry(doc, Function::from_packed(f)));
    }

    /// Adds a packed function that reads its arguments by hand (borrowing them, for hot paths)
    /// but is described by the type schema of the typed signature `Args -> R` it implements.
    pub fn packed_as<Args, S: TypedFn<Args>, F>(
        &mut self,
        name: &str,
        doc: &str,
        _signature: S,
        f: F,
    ) where
        F: Fn(&[AnyView<'_>]) -> Result<Any> + Send + Sync + 'static,
    {
        let mut entry = packed_entry(doc, Function::from_packed(f));
        entry.metadata = metadata_json(&S::type_schema());
        self.0.insert(name.into(), entry);
    }

    /// Adds a typed function with its type schema.
    pub fn typed<Args, F: TypedFn<Args>>(&mut self, name: &str, doc: &str, f: F) {
        self.0
            .insert(name.into(), typed_entry::<Args, F>(name, doc, f));
    }
}

fn packed_entry(doc: &str, function: Function) -> GlobalEntry {
    GlobalEntry {
        function,
        doc: doc.into(),
        metadata: metadata_json("{\"type\":\"ffi.Function\"}"),
        flags: kTVMFFIFieldFlagBitMaskIsStaticMethod,
    }
}

fn typed_entry<Args, F: TypedFn<Args>>(name: &str, doc: &str, f: F) -> GlobalEntry {
    GlobalEntry {
        function: Function::from_typed(name, f),
        doc: doc.into(),
        metadata: metadata_json(&F::type_schema()),
        flags: kTVMFFIFieldFlagBitMaskIsStaticMethod,
    }
}

/// `{"type_schema": "<schema as a JSON string>"}`.
pub fn metadata_json(schema: &str) -> String {
    format!("{{\"type_schema\":{}}}", json_string(schema))
}

/// A JSON string literal of `s`.
pub fn json_string(s: &str) -> String {
    anyffi::reflection::json_quote(s)
}

/// Registers `entry` under `name`; an existing name is an error unless `allow_override`.
pub fn register_global(name: &str, entry: GlobalEntry, allow_override: bool) -> Result<()> {
    insert_global(name, entry, allow_override, || {
        Error::runtime_error(format!("Global Function `{name}` is already registered"))
    })
}

/// [`register_global`] for `TVMFFIFunctionSetGlobalFromMethodInfo` (every C++ `GlobalDef().def`
/// and the Rust binding's registrations go through it): the duplicate error names its likely
/// cause, and is printed to stderr (traceback, kind and message) before it is raised, as the
/// official library logs it.
pub fn register_global_from_method_info(
    name: &str,
    entry: GlobalEntry,
    allow_override: bool,
) -> Result<()> {
    insert_global(name, entry, allow_override, || {
        let e = Error::runtime_error(format!(
            "Global Function `{name}` is already registered, possible causes:\n\
             - Two GlobalDef().def registrations for the same function \n\
             Please remove the duplicate registration."
        ));
        eprint!("{}", e.full_message());
        e
    })
}

fn insert_global(
    name: &str,
    entry: GlobalEntry,
    allow_override: bool,
    duplicate: impl FnOnce() -> Error,
) -> Result<()> {
    let old = {
        let mut t = TABLE.write();
        if !allow_override && t.contains_key(name) {
            return Err(duplicate());
        }
        t.insert(name.into(), entry)
    };
    // The replaced function is released outside the lock: its deleter may call back in.
    drop(old);
    Ok(())
}

/// Registers a packed Rust function.
pub fn register_packed<F>(name: &str, f: F, allow_override: bool) -> Result<()>
where
    F: Fn(&[AnyView<'_>]) -> Result<Any> + Send + Sync + 'static,
{
    register_global(
        name,
        packed_entry("", Function::from_packed(f)),
        allow_override,
    )
}

/// Registers a typed Rust function with its type-schema metadata, e.g.
/// `register_typed("my.add", |a: i64, b: i64| a + b, false)`.
pub fn register_typed<Args, F: TypedFn<Args>>(
    name: &str,
    f: F,
    allow_override: bool,
) -> Result<()> {
    register_global(name, typed_entry::<Args, F>(name, "", f), allow_override)
}

/// A plain entry as `TVMFFIFunctionSetGlobal` makes it (empty doc and metadata).
pub fn plain_entry(function: Function) -> GlobalEntry {
    GlobalEntry {
        function,
        doc: String::new(),
        metadata: String::new(),
        flags: kTVMFFIFieldFlagBitMaskIsStaticMethod,
    }
}

/// The function registered under `name` (a new reference).
#[inline]
pub fn get_global(name: &str) -> Option<Function> {
    TABLE.read().get(name).map(|e| e.function.clone())
}

/// A borrowed pointer to the function registered under `name`, valid while it stays registered.
pub fn get_global_borrowed(name: &str) -> Option<*mut anyffi::abi::TVMFFIObject> {
    TABLE.read().get(name).map(|e| e.function.as_raw())
}

/// The whole entry registered under `name`.
pub fn get_entry(name: &str) -> Option<GlobalEntry> {
    TABLE.read().get(name).cloned()
}

/// Removes `name`; whether it was registered.
pub fn remove_global(name: &str) -> bool {
    let old = TABLE.write().remove(name);
    old.is_some()
}

/// A snapshot of every registered name, sorted.
pub fn global_names() -> Vec<String> {
    let mut v: Vec<String> = TABLE.read().keys().map(|k| k.to_string()).collect();
    v.sort();
    v
}
