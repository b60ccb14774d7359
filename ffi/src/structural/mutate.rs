//! Structural mutators (C++ `extra/structural_mutate.h`): the C-ABI layout of
//! `ffi.StructuralMutator` objects (header, four-entry vtable, definition-region mode), default
//! mutation (`__s_mutate__` / `__s_maybe_inplace_mutate__` hooks, the variable-remap protocol of
//! free variables and DAG nodes, copy-on-write of reflected fields), the hooks of the built-in
//! containers and immutable leaves, the map engine behind `ffi.StructuralMap` (pre/post-order
//! rewriting) and the mutate engine behind `ffi.StructuralMutate` (a matched callback owns its
//! subtree).
//!
//! Results travel as raw owned values: a replacement, the `ffi.Unchanged` marker (type index 13:
//! keep the original), or an Error. In-place mutation happens only where the caller allows it and
//! the object is uniquely owned, exactly as in the official engines.
//!
//! Rationale: as with visitors, foreign hooks re-enter a mutator through its vtable, so descent
//! recurses on the thread's stack; `stack::check` bounds it and the engines refuse a value that
//! contains itself.

use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicI32, Ordering};

use super::visit::{error_raw, runtime_type_index_match, take_error, update_visit_error_context};
use super::{fields_of, get_field, metadata_of, stack, PtrMap, PtrSet};
use crate::abi::*;
use crate::any::{Any, AnyView};
use crate::builtin_types::STRUCTURAL_MUTATOR_INDEX;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::map_base::{drop_raw, MapBase, RawMap};
use crate::object::{new_object, ObjectRef, ObjectType};
use crate::seq::SeqObj;
use crate::type_table;

/// The `__s_mutate__` attribute column.
pub const S_MUTATE_ATTR: &str = "__s_mutate__";
/// The `__s_maybe_inplace_mutate__` attribute column.
pub const S_MAYBE_INPLACE_MUTATE_ATTR: &str = "__s_maybe_inplace_mutate__";

/// `FStructuralMutateABI`.
pub type MutateFn = unsafe extern "C" fn(*mut TVMFFIObject, TVMFFIAny) -> TVMFFIAny;
/// `FStructuralVarRemapGet`.
pub type RemapGetFn = unsafe extern "C" fn(*mut TVMFFIObject, TVMFFIAny) -> TVMFFIAny;
/// `FStructuralVarRemapSet`.
pub type RemapSetFn = unsafe extern "C" fn(*mut TVMFFIObject, TVMFFIAny, TVMFFIAny) -> TVMFFIAny;

/// `StructuralMutatorVTable`.
#[repr(C)]
pub struct MutatorVTable {
    pub mutate: Option<MutateFn>,
    pub maybe_inplace_mutate: Option<MutateFn>,
    pub var_remap_get: Option<RemapGetFn>,
    pub var_remap_set: Option<RemapSetFn>,
}

/// The C++ layout of `StructuralMutatorObj`: header, vtable, definition-region mode.
#[repr(C)]
pub struct MutatorHead {
    pub header: TVMFFIObject,
    pub vtable: *const MutatorVTable,
    /// As the visitor's (`visit::VisitorHead`): changed while the walk holds the mutator.
    pub def_region_mode: AtomicI32,
}

const _: () = assert!(std::mem::size_of::<MutatorHead>() == 40);

/// `InplaceMode::kDisallow` / `kAllow`.
pub const INPLACE_DISALLOW: i32 = 0;
pub const INPLACE_ALLOW: i32 = 1;

/// The raw `ffi.Unchanged` marker.
pub fn unchanged() -> TVMFFIAny {
    TVMFFIAny {
        type_index: kTVMFFIUnchanged,
        small_str_len: 0,
        value: TVMFFIAnyValue { v_int64: 0 },
    }
}

fn is_unchanged(r: &TVMFFIAny) -> bool {
    r.type_index == kTVMFFIUnchanged
}

/// `UnchangedOrSameAs(original)`: the marker, or the same 16 bytes.
fn unchanged_or_same(r: &TVMFFIAny, original: &TVMFFIAny) -> bool {
    is_unchanged(r) || crate::hash::same_value(r, original)
}

/// A callback's result as the official engines read it (`CallExpected<Any>`): an Error value
/// the callback returned, not raised, is a failure as well, and gets the visit context.
fn expected(r: Result<Any>) -> Result<Any> {
    r.and_then(|v| decode(v.into_raw()))
}

/// Adopts a raw owned result as a Rust result (the marker stays a value).
fn decode(raw: TVMFFIAny) -> Result<Any> {
    if raw.type_index == kTVMFFIError {
        // SAFETY: an owned Error value.
        return Err(unsafe { take_error(raw) });
    }
    // SAFETY: an owned value (the marker is a POD index).
    Ok(unsafe { Any::from_raw(raw) })
}

fn encode(r: Result<Any>) -> TVMFFIAny {
    match r {
        Ok(v) => v.into_raw(),
        Err(e) => error_raw(e),
    }
}

/// `ValueOrUnchanged(original)`.
pub fn value_or_unchanged(r: Any, original: &AnyView<'_>) -> Result<Any> {
    if r.type_index() == kTVMFFIUnchanged {
        original.to_owned()
    } else {
        Ok(r)
    }
}

fn annotate(raw: &TVMFFIAny, node: &AnyView<'_>) {
    if raw.type_index == kTVMFFIError {
        // SAFETY: an Error value owned by the caller; borrowed for the update.
        let e = unsafe { take_error(*raw) };
        update_visit_error_context(&e, node);
        std::mem::forget(e);
    }
}

/// Checks that `v` is a live mutator object and returns its pointer.
pub fn mutator_ptr(v: &AnyView<'_>) -> Option<*mut TVMFFIObject> {
    v.as_object_ptr().filter(|&p| !p.is_null()).filter(|&p| {
        // SAFETY: an object view points at a live object.
        type_table::is_instance_of(unsafe { (*p).type_index }, STRUCTURAL_MUTATOR_INDEX)
    })
}

fn vtable<'a>(m: *mut TVMFFIObject) -> Option<&'a MutatorVTable> {
    // SAFETY: callers pass a live mutator, whose vtable outlives it.
    unsafe { (*(m as *const MutatorHead)).vtable.as_ref() }
}

fn missing_entry() -> TVMFFIAny {
    error_raw(Error::internal(
        "structural mutator has an incomplete vtable",
    ))
}

/// `mutator->MutateExpected(value, inplace_mode)`: in-place dispatch only for a uniquely owned
/// object when allowed.
///
/// # Safety
/// `m` must be a live mutator object; `value` a live value.
pub unsafe fn mutate_raw(m: *mut TVMFFIObject, value: &TVMFFIAny, inplace: i32) -> TVMFFIAny {
    let Some(vt) = vtable(m) else {
        return missing_entry();
    };
    let unique = value.type_index >= kTVMFFIStaticObjectBegin
        // SAFETY: an object value points at a live object.
        && unsafe { !value.value.v_obj.is_null() && crate::object::is_sole_owner(value.value.v_obj) };
    let f = if inplace == INPLACE_ALLOW && unique {
        vt.maybe_inplace_mutate
    } else {
        vt.mutate
    };
    match f {
        // SAFETY: the mutator's own dispatch with a borrowed value.
        Some(f) => unsafe { f(m, *value) },
        None => missing_entry(),
    }
}

/// `mutate_raw` of a value lent from a container's slot without a reference of its own: should
/// a callback release it meanwhile (clearing the List or Dict that holds it), it is kept alive
/// until the call returns ([`crate::object::while_lent`]), so the frames walking it never read
/// freed memory nor take a new object at its address for a cycle.
///
/// # Safety
/// As for [`mutate_raw`].
unsafe fn mutate_lent(m: *mut TVMFFIObject, item: &TVMFFIAny, inplace: i32) -> TVMFFIAny {
    // SAFETY: object values hold a pointer.
    let obj = unsafe { item.value.v_obj };
    if item.type_index >= kTVMFFIStaticObjectBegin && !obj.is_null() {
        // SAFETY: per the caller.
        crate::object::while_lent(obj, || unsafe { mutate_raw(m, item, inplace) })
    } else {
        // SAFETY: per the caller.
        unsafe { mutate_raw(m, item, inplace) }
    }
}

/// `VarRemapGetExpected(var)`: the replacement (owned), None on a miss, or an Error.
///
/// # Safety
/// `m` must be a live mutator object.
pub unsafe fn var_remap_get(m: *mut TVMFFIObject, var: &TVMFFIAny) -> TVMFFIAny {
    match vtable(m).and_then(|v| v.var_remap_get) {
        // SAFETY: the mutator's own entry with a borrowed value.
        Some(f) => unsafe { f(m, *var) },
        None => missing_entry(),
    }
}

/// `VarRemapSetExpected(var, mapped)`.
///
/// # Safety
/// `m` must be a live mutator object.
pub unsafe fn var_remap_set(
    m: *mut TVMFFIObject,
    var: &TVMFFIAny,
    mapped: &TVMFFIAny,
) -> TVMFFIAny {
    match vtable(m).and_then(|v| v.var_remap_set) {
        // SAFETY: the mutator's own entry with borrowed values.
        Some(f) => unsafe { f(m, *var, *mapped) },
        None => missing_entry(),
    }
}

/// The definition-region mode of a mutator (the same prefix as a visitor's).
///
/// # Safety
/// `m` must be a live mutator object.
pub unsafe fn region(m: *mut TVMFFIObject) -> i32 {
    // SAFETY: per the caller.
    unsafe {
        (*(m as *const MutatorHead))
            .def_region_mode
            .load(Ordering::Relaxed)
    }
}

fn mutator_any(m: *mut TVMFFIObject) -> Any {
    // SAFETY: a live object; the copy takes its own reference.
    unsafe {
        Any::copy_from_raw_view(&TVMFFIAny {
            type_index: (*m).type_index,
            small_str_len: 0,
            value: TVMFFIAnyValue { v_obj: m },
        })
    }
    .unwrap_or_default()
}

fn call_function_hook(f: &TVMFFIAny, m: *mut TVMFFIObject, value: &TVMFFIAny) -> TVMFFIAny {
    let me = mutator_any(m);
    let args = [*me.raw(), *value];
    // SAFETY: the column keeps the function alive; two valid argument views.
    encode(unsafe { crate::function::call_raw(f.value.v_obj, args.as_ptr(), 2) })
}

/// `DefaultMutateExpected(value, inplace_mode)`.
///
/// # Safety
/// `m` must be a live mutator object; `value` a live value.
pub unsafe fn default_mutate_raw(
    m: *mut TVMFFIObject,
    value: &TVMFFIAny,
    inplace: i32,
) -> TVMFFIAny {
    // SAFETY: per the caller.
    unsafe {
        if inplace == INPLACE_ALLOW {
            default_maybe_inplace_raw(m, value)
        } else {
            default_copy_raw(m, value)
        }
    }
}

/// `DefaultMutateRaw`: the `__s_mutate__` hook, a POD as itself, or the reflected fields with
/// the variable-remap protocol; an error names `value` in its visit context.
///
/// # Safety
/// `m` must be a live mutator object; `value` a live value.
pub unsafe fn default_copy_raw(m: *mut TVMFFIObject, value: &TVMFFIAny) -> TVMFFIAny {
    // SAFETY: per the caller.
    let r = unsafe { default_copy_inner(m, value) };
    // SAFETY: `value` is live for the call.
    annotate(&r, &unsafe { AnyView::from_raw(*value) });
    r
}

unsafe fn default_copy_inner(m: *mut TVMFFIObject, value: &TVMFFIAny) -> TVMFFIAny {
    let ti = value.type_index;
    if let Some(attr) = type_table::attr_value(S_MUTATE_ATTR, ti) {
        return match attr.type_index {
            kTVMFFIOpaquePtr => {
                // SAFETY: an OpaquePtr entry of this column is an `FStructuralMutateABI`.
                let f = unsafe { std::mem::transmute::<*mut c_void, MutateFn>(attr.value.v_ptr) };
                // SAFETY: the hook gets the live mutator and a borrowed value.
                unsafe { f(m, *value) }
            }
            kTVMFFIFunction => call_function_hook(&attr, m, value),
            _ => error_raw(Error::type_error(
                "__s_mutate__ must be a direct hook pointer or ffi.Function",
            )),
        };
    }
    if ti < kTVMFFIStaticObjectBegin {
        // SAFETY: a live value; the copy takes its own reference (none for PODs).
        return encode(unsafe { Any::copy_from_raw_view(value) });
    }
    let kind = metadata_of(ti).map_or(kTVMFFISEqHashKindUnsupported, |md| {
        md.structural_eq_hash_kind
    });
    let free_var = kind == kTVMFFISEqHashKindFreeVar;
    let dag = kind == kTVMFFISEqHashKindDAGNode;
    if free_var || dag {
        // SAFETY: per the caller.
        let mapped = unsafe { var_remap_get(m, value) };
        if mapped.type_index != kTVMFFINone {
            return mapped;
        }
    }
    // SAFETY: per the caller.
    let mode = unsafe { region(m) };
    if free_var && mode == kTVMFFIDefRegionKindNone {
        return unchanged();
    }
    // SAFETY: per the caller.
    let result = match unsafe { mutate_reflected_fields(m, value) } {
        Ok(r) => r,
        Err(e) => return error_raw(e),
    };
    if (free_var || dag)
        && (dag || mode == kTVMFFIDefRegionKindPattern || result.type_index() != kTVMFFIUnchanged)
    {
        // SAFETY: per the caller.
        let set = unsafe { var_remap_set(m, value, result.raw()) };
        if set.type_index == kTVMFFIError {
            return set;
        }
        // SAFETY: an owned non-error result (None), released.
        drop(unsafe { Any::from_raw(set) });
    }
    result.into_raw()
}

/// `DefaultMaybeInplaceMutateRaw`: the in-place hook, else ordinary mutation.
///
/// # Safety
/// `m` must be a live mutator object; `value` a live value.
pub unsafe fn default_maybe_inplace_raw(m: *mut TVMFFIObject, value: &TVMFFIAny) -> TVMFFIAny {
    if let Some(attr) = type_table::attr_value(S_MAYBE_INPLACE_MUTATE_ATTR, value.type_index) {
        let r = match attr.type_index {
            kTVMFFIOpaquePtr => {
                // SAFETY: an OpaquePtr entry of this column is an `FStructuralMutateABI`.
                let f = unsafe { std::mem::transmute::<*mut c_void, MutateFn>(attr.value.v_ptr) };
                // SAFETY: the hook gets the live mutator and a borrowed value.
                unsafe { f(m, *value) }
            }
            kTVMFFIFunction => call_function_hook(&attr, m, value),
            // SAFETY: per the caller.
            _ => return unsafe { default_copy_raw(m, value) },
        };
        // SAFETY: `value` is live for the call.
        annotate(&r, &unsafe { AnyView::from_raw(*value) });
        return r;
    }
    // SAFETY: per the caller.
    unsafe { default_copy_raw(m, value) }
}

/// `WithDefRegionKind` for mutators.
///
/// # Safety
/// `m` must be a live mutator object.
pub unsafe fn with_region<R>(m: *mut TVMFFIObject, kind: i32, f: impl FnOnce() -> R) -> R {
    // SAFETY: a mutator has the visitor's prefix layout.
    unsafe { super::visit::with_region(m, kind, f) }
}

/// Copy-on-write mutation of the reflected structural fields: a shallow copy whose changed
/// fields are set, or the marker when nothing changed.
///
/// # Safety
/// `m` must be a live mutator object; `value` a live object value.
unsafe fn mutate_reflected_fields(m: *mut TVMFFIObject, value: &TVMFFIAny) -> Result<Any> {
    let ti = value.type_index;
    let copy_fn = match type_table::attr_value("__ffi_shallow_copy__", ti) {
        Some(f) if f.type_index == kTVMFFIFunction => f,
        _ => {
            return Err(Error::type_error(
                "__ffi_shallow_copy__ must be an ffi.Function",
            ))
        }
    };
    // SAFETY: the column keeps the function alive; one valid argument view.
    let copy = unsafe { crate::function::call_raw(copy_fn.value.v_obj, value, 1) }?;
    let new_obj = copy.as_view().as_object_ptr().filter(|p| !p.is_null());
    // SAFETY: an object value points at a live object.
    let ok = new_obj
        .is_some_and(|p| unsafe { (*p).type_index } == ti && p != unsafe { value.value.v_obj });
    let Some(new_obj) = new_obj.filter(|_| ok) else {
        return Err(Error::type_error(
            "Shallow copy callback must return a distinct object with the same type as its input",
        ));
    };
    let mut changed = false;
    let mut mutate_fields = || -> Result<()> {
        for field in fields_of(ti) {
            if field.flags() & kTVMFFIFieldFlagBitMaskSEqHashIgnore != 0 {
                continue;
            }
            // SAFETY: the object is live and its type has this field.
            let old = unsafe { get_field(new_obj, field) }?;
            let child = || {
                // SAFETY: per the caller.
                decode(unsafe { mutate_raw(m, old.raw(), INPLACE_DISALLOW) })
            };
            let mutated = if field.flags() & kTVMFFIFieldFlagBitMaskSEqHashDefSimple != 0 {
                // SAFETY: per the caller.
                unsafe { with_region(m, kTVMFFIDefRegionKindSimple, child) }
            } else if field.flags() & kTVMFFIFieldFlagBitMaskSEqHashDefPattern != 0 {
                // SAFETY: per the caller.
                unsafe { with_region(m, kTVMFFIDefRegionKindPattern, child) }
            } else {
                child()
            }?;
            if unchanged_or_same(mutated.raw(), old.raw()) {
                continue;
            }
            if field.info().setter.is_null() {
                return Err(Error::type_error(format!(
                    "Cannot structurally mutate field `{}` of type `{}` because it does not define a setter",
                    super::field_name(field),
                    type_table::type_key_of(ti)
                )));
            }
            // SAFETY: the copy is a live object of the field's type; a valid view.
            unsafe { field.set(new_obj, mutated.raw()) }?;
            changed = true;
        }
        Ok(())
    };
    let free_var =
        metadata_of(ti).is_some_and(|md| md.structural_eq_hash_kind == kTVMFFISEqHashKindFreeVar);
    // SAFETY: per the caller.
    if free_var && unsafe { region(m) } == kTVMFFIDefRegionKindSimple {
        // SAFETY: per the caller.
        unsafe { with_region(m, kTVMFFIDefRegionKindNone, mutate_fields) }?;
    } else {
        mutate_fields()?;
    }
    if !changed {
        // SAFETY: the marker is a POD value.
        return Ok(unsafe { Any::from_raw(unchanged()) });
    }
    Ok(copy)
}

// ---------------------------------------------------------------------------------------------
// Hooks of the built-in containers and leaves
// ---------------------------------------------------------------------------------------------

unsafe extern "C" fn mutate_leaf(_m: *mut TVMFFIObject, _value: TVMFFIAny) -> TVMFFIAny {
    unchanged()
}

/// Copy-on-write mutation of an Array's or List's elements. Each element is lent to the mutator
/// straight from its slot (no extra reference), as the official engine does: a callback sees a
/// uniquely owned element of a shared sequence as unique, with `InplaceMode::kDisallow`.
unsafe extern "C" fn mutate_seq(m: *mut TVMFFIObject, value: TVMFFIAny) -> TVMFFIAny {
    // SAFETY: the column entry of Array/List is only called with a live sequence.
    let seq = unsafe { &*(value.value.v_obj as *const SeqObj) };
    let mut out: Option<Vec<Any>> = None;
    let mut i = 0;
    // The length is read again each step: a callback may change a List it can reach.
    while i < seq.len() {
        // SAFETY: in bounds; the slot keeps the element alive while it is lent.
        let item: TVMFFIAny = unsafe { *(*seq.data_ptr().add(i)).raw() };
        // SAFETY: the caller passes a live mutator.
        let r = unsafe { mutate_lent(m, &item, INPLACE_DISALLOW) };
        if r.type_index == kTVMFFIError {
            return r;
        }
        // SAFETY: an owned non-error result.
        let r = unsafe { Any::from_raw(r) };
        match &mut out {
            None if unchanged_or_same(r.raw(), &item) => {}
            None => {
                // SAFETY: the elements before `i` (bounded by the current length) are live.
                let before = unsafe { seq.slice_unchecked() };
                let mut v: Vec<Any> = before[..i.min(before.len())].to_vec();
                v.push(r);
                out = Some(v);
            }
            Some(v) => v.push(if is_unchanged(r.raw()) {
                // SAFETY: the unchanged element, read from its slot while in bounds.
                match unsafe { seq.slice_unchecked() }.get(i) {
                    Some(a) => a.clone(),
                    None => Any::default(),
                }
            } else {
                r
            }),
        }
        i += 1;
    }
    match out {
        None => unchanged(),
        Some(v) if value.type_index == kTVMFFIArray => {
            Any::from(crate::array::Array::from_vec(v)).into_raw()
        }
        Some(v) => Any::from(crate::list::List::from_vec(v)).into_raw(),
    }
}

/// In-place mutation of a uniquely owned Array's or List's elements. Each element is lent to the
/// mutator straight from its slot (no extra reference), so a uniquely owned element can itself
/// be mutated in place, as in the official engine.
unsafe extern "C" fn maybe_inplace_mutate_seq(m: *mut TVMFFIObject, value: TVMFFIAny) -> TVMFFIAny {
    // SAFETY: the column entry of Array/List is only called with a live, uniquely owned sequence.
    let seq = unsafe { &*(value.value.v_obj as *const SeqObj) };
    let mut i = 0;
    while i < seq.len() {
        // SAFETY: in bounds; the slot keeps the element alive while it is lent.
        let item: TVMFFIAny = unsafe { *(*seq.data_ptr().add(i)).raw() };
        // SAFETY: the caller passes a live mutator.
        let r = unsafe { mutate_lent(m, &item, INPLACE_ALLOW) };
        if r.type_index == kTVMFFIError {
            return r;
        }
        // SAFETY: an owned non-error result.
        let r = unsafe { Any::from_raw(r) };
        if i < seq.len() {
            // SAFETY: in bounds.
            let slot = unsafe { seq.data_ptr().add(i) };
            // SAFETY: the slot holds a live value.
            if !unchanged_or_same(r.raw(), unsafe { (*slot).raw() }) {
                // SAFETY: the old element is released after the new one is stored.
                drop(unsafe { std::ptr::replace(slot, r) });
            }
        }
        i += 1;
    }
    unchanged()
}

/// Copy-on-write mutation of a Map's or Dict's values (keys stay), each lent from its slot.
unsafe extern "C" fn mutate_map(m: *mut TVMFFIObject, value: TVMFFIAny) -> TVMFFIAny {
    if value.type_index == kTVMFFIDict {
        // SAFETY: a live Dict, per the column.
        return unsafe { mutate_dict(m, value.value.v_obj, false) };
    }
    // SAFETY: the column entry of Map/Dict is only called with a live map.
    let src = unsafe { RawMap::from_ptr(value.value.v_obj as *mut MapBase) };
    let mut out: Option<ObjectRef<MapBase>> = None;
    let mut pos = src.begin();
    let mut index = 0usize;
    while pos != src.end() {
        // SAFETY: a valid position; the slot keeps the value alive while it is lent (no extra
        // reference, as in the official engine: uniqueness stays visible to callbacks).
        let old: TVMFFIAny = unsafe { (*src.kv_at(pos)).value };
        // SAFETY: the caller passes a live mutator.
        let r = unsafe { mutate_lent(m, &old, INPLACE_DISALLOW) };
        if r.type_index == kTVMFFIError {
            return r;
        }
        // SAFETY: an owned non-error result.
        let r = unsafe { Any::from_raw(r) };
        if !unchanged_or_same(r.raw(), &old) {
            let copy = out.get_or_insert_with(|| src.copy());
            // SAFETY: the copy is ours alone; entries are in the source's order.
            unsafe { set_value_at(RawMap::of(copy), index, r) };
        }
        pos = src.advance(pos);
        index += 1;
    }
    match out {
        None => unchanged(),
        // SAFETY: the copy carries the source's type index (Map or Dict).
        Some(c) => unsafe {
            let p = c.into_raw();
            TVMFFIAny {
                type_index: (*p).type_index,
                small_str_len: 0,
                value: TVMFFIAnyValue { v_obj: p },
            }
        },
    }
}

/// Replaces the value of the `index`-th entry (in iteration order).
///
/// # Safety
/// Nobody else may be reading or changing `map`.
unsafe fn set_value_at(map: RawMap, index: usize, value: Any) {
    let mut pos = map.begin();
    for _ in 0..index {
        pos = map.advance(pos);
    }
    if pos == map.end() {
        return;
    }
    // SAFETY: a valid position; the old value is released after the new one is stored.
    unsafe {
        let kv = map.kv_at(pos);
        let old = std::mem::replace(&mut (*kv).value, value.into_raw());
        drop_raw(old);
    }
}

/// In-place mutation of a uniquely owned Map's or Dict's values (each lent from its slot).
unsafe extern "C" fn maybe_inplace_mutate_map(m: *mut TVMFFIObject, value: TVMFFIAny) -> TVMFFIAny {
    if value.type_index == kTVMFFIDict {
        // SAFETY: a live, uniquely owned Dict, per the column.
        return unsafe { mutate_dict(m, value.value.v_obj, true) };
    }
    // SAFETY: the column entry of Map/Dict is only called with a live, uniquely owned map.
    let map = unsafe { RawMap::from_ptr(value.value.v_obj as *mut MapBase) };
    let mut pos = map.begin();
    while pos != map.end() {
        // SAFETY: a valid position; the slot keeps the value alive while it is lent.
        let old: TVMFFIAny = unsafe { (*map.kv_at(pos)).value };
        // SAFETY: the caller passes a live mutator.
        let r = unsafe { mutate_lent(m, &old, INPLACE_ALLOW) };
        if r.type_index == kTVMFFIError {
            return r;
        }
        // SAFETY: an owned non-error result.
        let r = unsafe { Any::from_raw(r) };
        // The position stays valid: only this call changes the map's entries.
        let kv = map.kv_at(pos);
        // SAFETY: the slot holds a live value.
        if !unchanged_or_same(r.raw(), unsafe { &(*kv).value }) {
            // SAFETY: the old value is released after the new one is stored.
            unsafe {
                let prev = std::mem::replace(&mut (*kv).value, r.into_raw());
                drop_raw(prev);
            }
        }
        pos = map.advance(pos);
    }
    unchanged()
}

/// Mutation of a Dict's values, copy-on-write or (`inplace`) in place, each lent from its slot.
/// A callback may change the Dict meanwhile (it is mutable: an insertion can move its storage,
/// a removal can leave an iterator position on nothing), so the walk follows a copy of its keys
/// and finds each key's slot again after every callback; a key no longer there is skipped. The
/// copy-on-write result is the Dict as it was at the first change, with the new values.
///
/// # Safety
/// `m` must be a live mutator object; `dict` a live Dict.
unsafe fn mutate_dict(m: *mut TVMFFIObject, dict: *mut TVMFFIObject, inplace: bool) -> TVMFFIAny {
    // SAFETY: per the caller.
    let keys: Vec<Any> = unsafe { super::map_items(dict) }
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    // SAFETY: per the caller; Dicts use the map storage.
    let src = unsafe { RawMap::from_ptr(dict as *mut MapBase) };
    let slot_of = |map: RawMap, key: &Any| -> Result<Option<*mut TVMFFIAny>> {
        // (a key hook may not change the Dict while it is searched)
        let _l = crate::map::LookupGuard::enter(map.as_ptr());
        // SAFETY: a found position holds a pair; its value field stays put until the map
        // changes, and it is read or written at once.
        Ok(map
            .find(key.raw())?
            .map(|pos| unsafe { std::ptr::addr_of_mut!((*map.kv_at(pos)).value) }))
    };
    let mode = if inplace {
        INPLACE_ALLOW
    } else {
        INPLACE_DISALLOW
    };
    let mut out: Option<ObjectRef<MapBase>> = None;
    for key in &keys {
        let slot = match slot_of(src, key) {
            Ok(Some(slot)) => slot,
            Ok(None) => continue,
            Err(e) => return error_raw(e),
        };
        // SAFETY: the slot holds a live value, lent for the call.
        let old: TVMFFIAny = unsafe { *slot };
        // SAFETY: the caller passes a live mutator.
        let r = unsafe { mutate_lent(m, &old, mode) };
        if r.type_index == kTVMFFIError {
            return r;
        }
        // SAFETY: an owned non-error result.
        let r = unsafe { Any::from_raw(r) };
        if unchanged_or_same(r.raw(), &old) {
            continue;
        }
        let target = if inplace {
            src
        } else {
            // SAFETY: the copy is ours alone.
            unsafe { RawMap::of(out.get_or_insert_with(|| src.copy())) }
        };
        match slot_of(target, key) {
            // SAFETY: the slot holds a live value, released after the new one is stored.
            Ok(Some(slot)) => unsafe { drop_raw(std::mem::replace(&mut *slot, r.into_raw())) },
            Ok(None) => {}
            Err(e) => return error_raw(e),
        }
    }
    match out {
        None => unchanged(),
        Some(c) => {
            let p = c.into_raw();
            TVMFFIAny {
                type_index: kTVMFFIDict,
                small_str_len: 0,
                value: TVMFFIAnyValue { v_obj: p },
            }
        }
    }
}

/// The `(type index, column, hook)` entries the library registers for mutation.
pub fn builtin_mutate_hooks() -> Vec<(i32, &'static str, Any)> {
    let p = |f: MutateFn| Any::from(f as *mut c_void);
    let mut out = Vec::new();
    for ti in [kTVMFFIBigInt, kTVMFFIStr, kTVMFFIBytes] {
        out.push((ti, S_MUTATE_ATTR, p(mutate_leaf)));
        out.push((ti, S_MAYBE_INPLACE_MUTATE_ATTR, p(mutate_leaf)));
    }
    for ti in [kTVMFFIArray, kTVMFFIList] {
        out.push((ti, S_MUTATE_ATTR, p(mutate_seq)));
        out.push((ti, S_MAYBE_INPLACE_MUTATE_ATTR, p(maybe_inplace_mutate_seq)));
    }
    for ti in [kTVMFFIMap, kTVMFFIDict] {
        out.push((ti, S_MUTATE_ATTR, p(mutate_map)));
        out.push((ti, S_MAYBE_INPLACE_MUTATE_ATTR, p(maybe_inplace_mutate_map)));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Engines
// ---------------------------------------------------------------------------------------------

/// `(type_index, function)` and, for StructuralMutate, whether it takes the in-place mode.
pub type MapLink = (i32, Function);
pub type MutateLink = (i32, Function, bool);

enum Engine {
    Map {
        pre_order: bool,
        links: Vec<MapLink>,
        links_with_region: Vec<MapLink>,
    },
    Mutate {
        links: Vec<MutateLink>,
    },
}

/// A mutator made by this library: the C++ prefix, then its engine, variable-remap environment
/// and the objects on the current path. That state is the walking thread's (`RefCell`s): the
/// mutator is an object any thread may get hold of (a callback's argument kept), so its entries
/// refuse other threads (`thread`).
#[repr(C)]
pub struct EngineMutator {
    head: MutatorHead,
    engine: Engine,
    remap: RefCell<PtrMap<usize, (Any, Any)>>,
    active: RefCell<PtrSet<usize>>,
    thread: usize,
}

// SAFETY: repr(C) with the mutator prefix first; the type index is ffi.StructuralMutator's.
unsafe impl ObjectType for EngineMutator {
    const TYPE_KEY: &'static str = "ffi.StructuralMutator";
    fn type_index() -> i32 {
        STRUCTURAL_MUTATOR_INDEX
    }
}

static ENGINE_VTABLE: MutatorVTable = MutatorVTable {
    mutate: Some(engine_mutate),
    maybe_inplace_mutate: Some(engine_maybe_inplace_mutate),
    var_remap_get: Some(engine_remap_get),
    var_remap_set: Some(engine_remap_set),
};

fn new_engine(engine: Engine) -> ObjectRef<EngineMutator> {
    new_object(EngineMutator {
        head: MutatorHead {
            header: TVMFFIObject::new::<EngineMutator>(),
            vtable: &ENGINE_VTABLE,
            def_region_mode: AtomicI32::new(kTVMFFIDefRegionKindNone),
        },
        engine,
        remap: RefCell::new(PtrMap::default()),
        active: RefCell::new(PtrSet::default()),
        thread: crate::thread_token(),
    })
}

fn find<T>(links: &[T], ti: i32, key: impl Fn(&T) -> i32) -> Option<&T> {
    links.iter().find(|l| runtime_type_index_match(ti, key(l)))
}

impl EngineMutator {
    fn as_obj(&self) -> *mut TVMFFIObject {
        self as *const EngineMutator as *mut TVMFFIObject
    }

    /// Engine entry for both vtable slots: cycle and stack guards, then the engine.
    fn dispatch(&self, value: &TVMFFIAny, inplace: i32) -> TVMFFIAny {
        if let Err(e) = stack::check("structural mutate") {
            return error_raw(e);
        }
        // SAFETY: object values hold a pointer.
        let key = (value.type_index >= kTVMFFIStaticObjectBegin)
            .then_some(unsafe { value.value.v_obj } as usize);
        if let Some(k) = key {
            if !self.active.borrow_mut().insert(k) {
                // SAFETY: `value` is live for the call.
                let view = unsafe { AnyView::from_raw(*value) };
                return error_raw(Error::value_error(format!(
                    "structural mutate: cycle detected, a `{}` contains itself",
                    view.type_key()
                )));
            }
        }
        let r = match &self.engine {
            Engine::Map {
                pre_order,
                links,
                links_with_region,
            } => self.map_impl(*pre_order, links, links_with_region, value, inplace),
            Engine::Mutate { links } => self.mutate_impl(links, value, inplace),
        };
        if let Some(k) = key {
            self.active.borrow_mut().remove(&k);
        }
        r
    }

    fn call_map_link(&self, f: &Function, with_region: bool, target: &TVMFFIAny) -> Result<Any> {
        // SAFETY: `target` is live for the call.
        let view = unsafe { AnyView::from_raw(*target) };
        expected(if with_region {
            let kind = Any::from(self.head.def_region_mode.load(Ordering::Relaxed) as i64);
            f.call(&[view, kind.as_view()])
        } else {
            f.call(&[view])
        })
    }

    fn map_link(
        &self,
        links: &[MapLink],
        with_region: &[MapLink],
        ti: i32,
    ) -> Option<(Function, bool)> {
        if let Some((_, f)) = find(links, ti, |l| l.0) {
            return Some((f.clone(), false));
        }
        find(with_region, ti, |l| l.0).map(|(_, f)| (f.clone(), true))
    }

    fn map_impl(
        &self,
        pre_order: bool,
        links: &[MapLink],
        with_region: &[MapLink],
        value: &TVMFFIAny,
        inplace: i32,
    ) -> TVMFFIAny {
        let me = self.as_obj();
        if !pre_order {
            // SAFETY: this mutator is live; `value` is live.
            let out = unsafe { default_mutate_raw(me, value, inplace) };
            if out.type_index == kTVMFFIError {
                return out;
            }
            // SAFETY: an owned non-error result.
            let out = unsafe { Any::from_raw(out) };
            let target = if is_unchanged(out.raw()) {
                *value
            } else {
                *out.raw()
            };
            let Some((f, kind)) = self.map_link(links, with_region, target.type_index) else {
                return out.into_raw();
            };
            return match self.call_map_link(&f, kind, &target) {
                Err(e) => {
                    // SAFETY: `target` is live (held by `out` or the caller).
                    update_visit_error_context(&e, &unsafe { AnyView::from_raw(target) });
                    error_raw(e)
                }
                Ok(r) if is_unchanged(r.raw()) => out.into_raw(),
                Ok(r) => r.into_raw(),
            };
        }
        let Some((f, kind)) = self.map_link(links, with_region, value.type_index) else {
            // SAFETY: this mutator is live; `value` is live.
            return unsafe { default_mutate_raw(me, value, inplace) };
        };
        let mapped = match self.call_map_link(&f, kind, value) {
            Ok(r) => r,
            Err(e) => {
                // SAFETY: `value` is live for the call.
                update_visit_error_context(&e, &unsafe { AnyView::from_raw(*value) });
                return error_raw(e);
            }
        };
        let descent = if is_unchanged(mapped.raw()) {
            *value
        } else {
            *mapped.raw()
        };
        let mode = if inplace != INPLACE_ALLOW {
            INPLACE_DISALLOW
        } else if crate::hash::same_value(&descent, value) {
            INPLACE_ALLOW
        } else {
            let unique = descent.type_index >= kTVMFFIStaticObjectBegin
                // SAFETY: an object value points at a live object.
                && unsafe { crate::object::is_sole_owner(descent.value.v_obj) };
            if unique {
                INPLACE_ALLOW
            } else {
                INPLACE_DISALLOW
            }
        };
        // SAFETY: this mutator is live; `descent` is live (held by `mapped` or the caller).
        let out = unsafe { default_mutate_raw(me, &descent, mode) };
        if is_unchanged(&out) {
            return mapped.into_raw();
        }
        out
    }

    fn mutate_impl(&self, links: &[MutateLink], value: &TVMFFIAny, inplace: i32) -> TVMFFIAny {
        let me = self.as_obj();
        let Some((_, f, takes_mode)) = find(links, value.type_index, |l| l.0) else {
            // SAFETY: this mutator is live; `value` is live.
            return unsafe {
                if inplace == INPLACE_ALLOW {
                    default_maybe_inplace_raw(me, value)
                } else {
                    default_copy_raw(me, value)
                }
            };
        };
        // SAFETY: `value` is live for the call.
        let view = unsafe { AnyView::from_raw(*value) };
        let mutator = mutator_any(me);
        let r = expected(if *takes_mode {
            let mode = Any::from(inplace as i64);
            f.call(&[view, mutator.as_view(), mode.as_view()])
        } else {
            f.call(&[view, mutator.as_view()])
        });
        if let Err(e) = &r {
            update_visit_error_context(e, &view);
        }
        encode(r)
    }

    fn remap_get(&self, var: &TVMFFIAny) -> TVMFFIAny {
        if var.type_index < kTVMFFIStaticObjectBegin {
            return error_raw(Error::type_error(
                "Variable-remap key must be an object-backed value",
            ));
        }
        // SAFETY: object values hold a pointer.
        let k = unsafe { var.value.v_obj } as usize;
        match self.remap.borrow().get(&k) {
            Some((_, v)) => v.clone().into_raw(),
            None => TVMFFIAny::NONE,
        }
    }

    fn remap_set(&self, var: &TVMFFIAny, mapped: &TVMFFIAny) -> TVMFFIAny {
        if var.type_index < kTVMFFIStaticObjectBegin {
            return error_raw(Error::type_error(
                "Variable-remap key must be an object-backed value",
            ));
        }
        // SAFETY: live values borrowed for the call; the copies take their own references.
        let (key, value) = match unsafe {
            (
                Any::copy_from_raw_view(var),
                Any::copy_from_raw_view(mapped),
            )
        } {
            (Ok(k), Ok(v)) => (k, v),
            (Err(e), _) | (_, Err(e)) => return error_raw(e),
        };
        // SAFETY: object values hold a pointer.
        let k = unsafe { var.value.v_obj } as usize;
        let old = self.remap.borrow_mut().insert(k, (key, value));
        drop(old);
        TVMFFIAny::NONE
    }
}

/// The engine entries' frame: the thread check, then `f` with panics turned into errors.
fn guarded(e: &EngineMutator, f: impl FnOnce() -> TVMFFIAny) -> TVMFFIAny {
    if crate::thread_token() != e.thread {
        return error_raw(super::other_thread_error("ffi.StructuralMutator"));
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => error_raw(Error::from_panic(p)),
    }
}

unsafe extern "C" fn engine_mutate(m: *mut TVMFFIObject, value: TVMFFIAny) -> TVMFFIAny {
    // SAFETY: this vtable is only installed on EngineMutator objects.
    let e = unsafe { &*(m as *const EngineMutator) };
    guarded(e, || e.dispatch(&value, INPLACE_DISALLOW))
}

unsafe extern "C" fn engine_maybe_inplace_mutate(
    m: *mut TVMFFIObject,
    value: TVMFFIAny,
) -> TVMFFIAny {
    // SAFETY: this vtable is only installed on EngineMutator objects.
    let e = unsafe { &*(m as *const EngineMutator) };
    guarded(e, || e.dispatch(&value, INPLACE_ALLOW))
}

unsafe extern "C" fn engine_remap_get(m: *mut TVMFFIObject, var: TVMFFIAny) -> TVMFFIAny {
    // SAFETY: this vtable is only installed on EngineMutator objects.
    let e = unsafe { &*(m as *const EngineMutator) };
    guarded(e, || e.remap_get(&var))
}

unsafe extern "C" fn engine_remap_set(
    m: *mut TVMFFIObject,
    var: TVMFFIAny,
    mapped: TVMFFIAny,
) -> TVMFFIAny {
    // SAFETY: this vtable is only installed on EngineMutator objects.
    let e = unsafe { &*(m as *const EngineMutator) };
    guarded(e, || e.remap_set(&var, &mapped))
}

fn run(engine: Engine, root: Any) -> Result<Any> {
    let m = new_engine(engine);
    // SAFETY: a live mutator of ours; `root` is owned here (its uniqueness is the caller's).
    let r = decode(unsafe { mutate_raw(m.as_raw(), root.raw(), INPLACE_ALLOW) })?;
    if r.type_index() == kTVMFFIUnchanged {
        return Ok(root);
    }
    Ok(r)
}

/// `ffi.StructuralMap(root, callbacks, callbacks_with_def_region_kind, order)`.
pub fn structural_map(
    root: Any,
    links: Vec<MapLink>,
    links_with_region: Vec<MapLink>,
    order: i32,
) -> Result<Any> {
    run(
        Engine::Map {
            pre_order: order == 0,
            links,
            links_with_region,
        },
        root,
    )
}

/// `ffi.StructuralMutate(root, callbacks)`.
pub fn structural_mutate(root: Any, links: Vec<MutateLink>) -> Result<Any> {
    run(Engine::Mutate { links }, root)
}
