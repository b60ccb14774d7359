//! Reflective object creation: the empty object of a type (native creator, else the `__ffi_new__`
//! attribute), the reflection-generated `__ffi_init__` (positional arguments, then the KWARGS
//! marker and name/value pairs; spec §5.5) and `ffi.MakeObjectFromPackedArgs`.
//!
//! Rationale: the field analysis of an `__ffi_init__` is done once, when it is made; each call
//! only binds arguments. Every failure is a TypeError in the official wording, since Python
//! surfaces these messages to users as its own argument errors.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

use super::{all_fields, type_info, type_key, FieldRef};
use crate::abi::*;
use crate::any::{Any, AnyView};
use crate::error::{fetch_raised, Error, Result};
use crate::function::{call_raw, Function};
use crate::object::{Object, ObjectRef};
use crate::type_table;

/// A new object of type `index` with every field at its creator's default.
pub fn create_empty_object(index: i32) -> Result<ObjectRef<Object>> {
    let info = type_info(index)?;
    if !info.metadata.is_null() {
        // SAFETY: metadata pointers are stable once registered.
        if let Some(creator) = unsafe { (*info.metadata).creator } {
            let mut out: *mut c_void = std::ptr::null_mut();
            // SAFETY: a creator writes one new reference into `out` on success.
            if unsafe { creator(&mut out) } != 0 {
                return Err(fetch_raised("type creator"));
            }
            let obj = NonNull::new(out as *mut Object).ok_or_else(|| {
                Error::internal(format!("the creator of `{}` returned NULL", type_key(info)))
            })?;
            // SAFETY: the creator handed us a new reference.
            return Ok(unsafe { ObjectRef::from_raw_owned(obj) });
        }
    }
    if let Some(new_fn) = type_table::attr_value("__ffi_new__", index) {
        if new_fn.type_index == kTVMFFIFunction {
            // SAFETY: the column keeps the function alive; no arguments.
            let obj = unsafe { call_raw(new_fn.value.v_obj, std::ptr::null(), 0) }?;
            return obj.into_object().ok_or_else(|| {
                Error::type_error(format!(
                    "`{}.__ffi_new__` must return an object",
                    type_key(info)
                ))
            });
        }
    }
    Err(Error::runtime_error(format!(
        "Type `{}` does not support reflection creation (no native creator or __ffi_new__ type attr)",
        type_key(info)
    )))
}

/// The KWARGS marker's address.
fn kwargs_ptr() -> *mut TVMFFIObject {
    crate::sentinel::kwargs().as_raw()
}

/// A string argument (key or type key) or a TypeError naming `what`.
fn string_arg(v: &AnyView<'_>, what: &str) -> Result<String> {
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| Error::type_error(format!("{what} must be a str, got `{}`", v.type_key())))
}

/// The analysis an `__ffi_init__` binds against.
struct InitPlan {
    type_index: i32,
    type_key: String,
    fields: Vec<FieldRef>,
    /// Per field: (takes part in init, keyword-only, has a default).
    traits: Vec<(bool, bool, bool)>,
    /// Positional order: init fields that are not keyword-only, required ones first.
    positional: Vec<usize>,
    by_name: BTreeMap<String, usize>,
}

impl InitPlan {
    fn new(index: i32) -> Result<InitPlan> {
        let info = type_info(index)?;
        let fields = all_fields(info);
        let mut traits = Vec::with_capacity(fields.len());
        let mut by_name = BTreeMap::new();
        let mut required = Vec::new();
        let mut optional = Vec::new();
        for (i, f) in fields.iter().enumerate() {
            let flags = f.flags();
            let init = flags & kTVMFFIFieldFlagBitMaskInitOff == 0;
            let kw_only = flags & kTVMFFIFieldFlagBitMaskKwOnly != 0;
            let has_default = flags & kTVMFFIFieldFlagBitMaskHasDefault != 0;
            traits.push((init, kw_only, has_default));
            if init {
                // A shadowing field (same name lower in the hierarchy) wins, as in a map insert.
                by_name.insert(f.name().to_string(), i);
                if !kw_only {
                    if has_default {
                        optional.push(i);
                    } else {
                        required.push(i);
                    }
                }
            }
        }
        required.extend(optional);
        Ok(InitPlan {
            type_index: index,
            type_key: type_key(info).to_string(),
            fields,
            traits,
            positional: required,
            by_name,
        })
    }

    /// Re-raises a setter failure as `<key>.__ffi_init__() <what> '<name>':` + the indented cause.
    fn setter_error(&self, field: usize, what: &str, err: Error) -> Error {
        let mut msg = format!(
            "{}.__ffi_init__() {what} '{}':\n  ",
            self.type_key,
            self.fields[field].name()
        );
        for ch in err.message().chars() {
            msg.push(ch);
            if ch == '\n' {
                msg.push_str("  ");
            }
        }
        // SAFETY: `err` is alive; the new error retains it as its cause.
        unsafe {
            Error::with_parts(
                err.kind().as_bytes(),
                msg.as_bytes(),
                err.backtrace().as_bytes(),
                Some(err.as_object().as_raw()),
                None,
            )
        }
    }

    fn bind(&self, obj: *mut TVMFFIObject, args: &[AnyView<'_>]) -> Result<()> {
        let key = &self.type_key;
        let mut set = vec![false; self.fields.len()];
        let set_field = |set: &mut Vec<bool>, i: usize, v: &AnyView<'_>| -> Result<()> {
            // SAFETY: `obj` is a fresh object of this type; `v` a live argument.
            unsafe { self.fields[i].set(obj, v.raw()) }
                .map_err(|e| self.setter_error(i, "field", e))?;
            set[i] = true;
            Ok(())
        };
        let marker = kwargs_ptr();
        let kwargs_at = args.iter().position(|a| a.as_object_ptr() == Some(marker));
        let npos = kwargs_at.unwrap_or(args.len());
        let too_many = || {
            Error::type_error(format!(
                "{key}.__ffi_init__() takes at most {} positional argument(s), but {npos} were given",
                self.positional.len()
            ))
        };
        // Without keywords the count is checked first; with them, the positional arguments
        // that fit are bound first (so a bad one among them is the error), as upstream does.
        if kwargs_at.is_none() && npos > self.positional.len() {
            return Err(too_many());
        }
        for (a, &i) in args[..npos].iter().zip(&self.positional) {
            set_field(&mut set, i, a)?;
        }
        if npos > self.positional.len() {
            return Err(too_many());
        }
        if let Some(at) = kwargs_at {
            let rest = &args[at + 1..];
            if rest.len() % 2 != 0 {
                return Err(Error::type_error(format!(
                    "{key}.__ffi_init__() KWARGS requires an even number of key-value arguments"
                )));
            }
            for kv in rest.chunks_exact(2) {
                let name = string_arg(&kv[0], &format!("{key}.__ffi_init__() keyword"))?;
                let Some(&i) = self.by_name.get(&name) else {
                    return Err(Error::type_error(format!(
                        "{key}.__ffi_init__() got an unexpected keyword argument '{name}'"
                    )));
                };
                if set[i] {
                    return Err(Error::type_error(format!(
                        "{key}.__ffi_init__() got multiple values for argument '{name}'"
                    )));
                }
                set_field(&mut set, i, &kv[1])?;
            }
        }
        for (i, f) in self.fields.iter().enumerate() {
            if set[i] {
                continue;
            }
            let (init, kw_only, has_default) = self.traits[i];
            if has_default {
                // SAFETY: as for set_field.
                unsafe { f.set_default(obj) }
                    .map_err(|e| self.setter_error(i, "default for field", e))?;
            } else if init {
                let kind = if kw_only {
                    "required keyword-only argument"
                } else {
                    "required argument"
                };
                return Err(Error::type_error(format!(
                    "{key}.__ffi_init__() missing {kind}: '{}'",
                    f.name()
                )));
            }
        }
        Ok(())
    }
}

/// The reflection-generated `__ffi_init__` of type `index` (what `ffi._RegisterFFIInit`
/// installs): creates an empty object and binds the arguments to its fields.
pub fn make_init(index: i32) -> Result<Function> {
    let plan = Arc::new(InitPlan::new(index)?);
    Ok(Function::from_packed(move |args| {
        let obj = create_empty_object(plan.type_index)?;
        plan.bind(obj.as_raw(), args)?;
        Ok(Any::from(obj))
    }))
}

/// `ffi.MakeObjectFromPackedArgs(type_key_or_index, name1, value1, ...)`.
pub fn make_object_from_packed_args(args: &[AnyView<'_>]) -> Result<Any> {
    const WHAT: &str = "ffi.MakeObjectFromPackedArgs";
    let Some((first, rest)) = args.split_first() else {
        return Err(Error::type_error(format!(
            "{WHAT}: expected a type key or type index as the first argument"
        )));
    };
    let index = match first.type_index() {
        kTVMFFIInt => {
            let ti = first.as_i64().unwrap_or(-1);
            i32::try_from(ti)
                .ok()
                .filter(|&ti| type_table::type_entry(ti).is_some())
                .ok_or_else(|| Error::value_error(format!("{WHAT}: unknown type index {ti}")))?
        }
        _ => {
            let key = string_arg(first, &format!("{WHAT}: argument #0 (type key)"))?;
            type_table::key_to_index(&key)
                .ok_or_else(|| Error::runtime_error(format!("{WHAT}: Cannot find type `{key}`")))?
        }
    };
    if rest.len() % 2 != 0 {
        return Err(Error::type_error(format!(
            "{WHAT}: expected name/value pairs after the type, got {} trailing argument(s)",
            rest.len()
        )));
    }
    let info = type_info(index)?;
    let key = type_key(info).to_string();
    // first whether the type can be created at all, as the official library checks
    let obj = create_empty_object(index)?;
    let mut names = Vec::with_capacity(rest.len() / 2);
    for (i, kv) in rest.chunks_exact(2).enumerate() {
        names.push(string_arg(
            &kv[0],
            &format!("{WHAT}: argument #{} (field name)", 2 * i + 1),
        )?);
    }
    let mut used = vec![false; names.len()];
    for f in all_fields(info) {
        let found = names
            .iter()
            .enumerate()
            .position(|(i, n)| !used[i] && n == f.name());
        match found {
            Some(i) => {
                // SAFETY: a fresh object of this type; a live argument.
                unsafe { f.set(obj.as_raw(), rest[2 * i + 1].raw()) }?;
                used[i] = true;
            }
            None if f.flags() & kTVMFFIFieldFlagBitMaskHasDefault != 0 => {
                // SAFETY: as above.
                unsafe { f.set_default(obj.as_raw()) }?;
            }
            None => {
                return Err(Error::type_error(format!(
                    "Required field `{}` not set in type `{key}`",
                    f.name()
                )))
            }
        }
    }
    if let Some(i) = used.iter().position(|u| !u) {
        return Err(Error::type_error(format!(
            "Type `{key}` does not have field `{}`",
            names[i]
        )));
    }
    Ok(Any::from(obj))
}
