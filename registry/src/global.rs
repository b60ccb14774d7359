//! The global function table (spec §6): set with override rules, get (new reference), remove,
//! list, and per-function metadata (`{"type_schema": ...}` JSON).
//!
//! Rationale: lookups are far more frequent than registrations, so the table is a read-mostly
//! `RwLock`; the built-in functions are inserted when the table is first touched, so every entry
//! point (C, Rust tests, other crates) sees them without an init call. It is a `FlatMap` (one
//! `Vec`), not a `HashMap`, so that valgrind sees the table and the functions in it as reachable
//! at exit (see `anyffi::flat_map`).

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

type Table = anyffi::flat_map::FlatMap<Box<str>, GlobalEntry>;

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

    /// Adds a packed function described by the given type schema (see `function_schema`).
    pub fn packed_schema<F>(&mut self, name: &str, doc: &str, schema: String, f: F)
    where
        F: Fn(&[AnyView<'_>]) -> Result<Any> + Send + Sync + 'static,
    {
        let mut entry = packed_entry(doc, Function::from_packed(f));
        entry.metadata = metadata_json(&schema);
        self.0.insert(name.into(), entry);
    }

    /// Adds a typed function whose schema is more precise than its Rust types say (a `Module`
    /// returned as `Any`, an `Array` of strings): `schema` replaces the derived one.
    pub fn typed_schema<Args, F: TypedFn<Args>>(
        &mut self,
        name: &str,
        doc: &str,
        schema: String,
        f: F,
    ) {
        let mut entry = typed_entry::<Args, F>(name, doc, f);
        entry.metadata = metadata_json(&schema);
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

/// The type schema of a function taking `params` and returning `ret`, each written as in a
/// C++ signature (`Array<Tuple<int, ffi.Function>>`, `Optional<ffi.VisitInterrupt>`, `AnyView`,
/// `void`): `{"type":"ffi.Function","named_args":{"return":[..],"params":[..]}}`.
pub fn function_schema(params: &[&str], ret: &str) -> String {
    let params: Vec<String> = params.iter().map(|p| type_schema_of(p)).collect();
    format!(
        "{{\"type\":\"ffi.Function\",\"named_args\":{{\"return\":[{}],\"params\":[{}]}}}}",
        type_schema_of(ret),
        params.join(",")
    )
}

/// The schema of one C++-style type text: `{"type":"ffi.Array","args":[...]}` and so on.
pub fn type_schema_of(text: &str) -> String {
    let text = text.trim();
    let (base, inner) = match text.find('<') {
        Some(i) if text.ends_with('>') => (&text[..i], Some(&text[i + 1..text.len() - 1])),
        _ => (text, None),
    };
    let key = match base.trim() {
        "Array" => "ffi.Array",
        "Map" => "ffi.Map",
        "List" => "ffi.List",
        "Dict" => "ffi.Dict",
        "String" | "str" => "ffi.String",
        "AnyView" => "Any",
        "void" => "None",
        other => other,
    };
    let Some(inner) = inner else {
        return format!("{{\"type\":{}}}", json_string(key));
    };
    // split the arguments at top-level commas
    let (mut args, mut depth, mut start) = (Vec::new(), 0i32, 0usize);
    for (i, c) in inner.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            ',' if depth == 0 => {
                args.push(type_schema_of(&inner[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    args.push(type_schema_of(&inner[start..]));
    format!(
        "{{\"type\":{},\"args\":[{}]}}",
        json_string(key),
        args.join(",")
    )
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
