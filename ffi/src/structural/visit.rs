//! Structural visitors (C++ `extra/structural_visit.h`): the C-ABI layout of
//! `ffi.StructuralVisitor` objects (header, vtable pointer, definition-region mode), default
//! descent (`__s_visit__` hooks, reflected fields with definition regions), the `__s_visit__`
//! hooks of the built-in containers, the walk engine behind `ffi.StructuralWalk` (pre/post-order
//! callbacks returning Advance/Skip/Interrupt) and the visit engine behind `ffi.StructuralVisit`
//! (a matched callback owns its subtree), and the visit-error-context frames errors collect.
//!
//! Rationale: a visitor is re-entered by foreign hooks through its vtable (`visitor->Visit(x)`
//! compiled into other libraries), so every visitor this library creates has exactly the C++
//! layout and every operation here works on any visitor, ours or foreign, through that vtable.
//! Descent therefore recurses on the thread's stack; `stack::check` turns a nesting that would
//! exhaust it into an error, and the engines mark the containers and objects on the current path
//! so a value that contains itself is an error rather than an endless walk.

use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicI32, Ordering};

use super::{fields_of, get_field, metadata_of, stack, PtrSet};
use crate::abi::*;
use crate::any::{Any, AnyView};
use crate::builtin_types::structural::{VisitErrorContextObj, VisitInterruptObj};
use crate::builtin_types::{STRUCTURAL_VISITOR_INDEX, VISIT_ERROR_CONTEXT_INDEX};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::list::List;
use crate::object::{new_object, ObjectRef, ObjectType};
use crate::type_table;

/// The `__s_visit__` attribute column.
pub const S_VISIT_ATTR: &str = "__s_visit__";

/// `FStructuralVisitABI`: `(visitor, value) -> raw Expected<Optional<VisitInterrupt>>` (None,
/// a VisitInterrupt, or an Error; owned).
pub type VisitFn = unsafe extern "C" fn(*mut TVMFFIObject, TVMFFIAny) -> TVMFFIAny;

/// `StructuralVisitorVTable`.
#[repr(C)]
pub struct VisitorVTable {
    pub visit: Option<VisitFn>,
}

/// The C++ layout of `StructuralVisitorObj`: header, vtable, definition-region mode.
#[repr(C)]
pub struct VisitorHead {
    pub header: TVMFFIObject,
    pub vtable: *const VisitorVTable,
    /// Changed by `WithDefRegionKind` while the walk holds the visitor: an atomic (the layout
    /// of an `i32`) so that the write goes through shared access.
    pub def_region_mode: AtomicI32,
}

const _: () = assert!(std::mem::size_of::<VisitorHead>() == 40);

/// Whether the runtime type `actual` matches a callback registered for `target`
/// (`RuntimeTypeIndexMatch`: exact, Any, small strings for str/bytes, Object for objects, or a
/// subclass).
pub fn runtime_type_index_match(actual: i32, target: i32) -> bool {
    if actual == target || target == -1 {
        return true;
    }
    match target {
        kTVMFFIStr => actual == kTVMFFISmallStr,
        kTVMFFIBytes => actual == kTVMFFISmallBytes,
        kTVMFFIObject => actual >= kTVMFFIStaticObjectBegin,
        _ => {
            actual >= kTVMFFIStaticObjectBegin
                && target >= kTVMFFIStaticObjectBegin
                && type_table::is_ancestor(target, actual)
        }
    }
}

/// The official error of a callback result of the wrong type.
pub fn result_mismatch(expected: &str, got: &Any) -> Error {
    let key = if got.type_index() >= kTVMFFIStaticObjectBegin {
        got.as_view().type_key()
    } else {
        type_table::type_key_of(got.type_index())
    };
    Error::type_error(format!(
        "CallExpected: result type mismatch, expected {expected}, but got {key}"
    ))
}

fn none_raw() -> TVMFFIAny {
    TVMFFIAny::NONE
}

/// A raw owned Error value.
pub fn error_raw(e: Error) -> TVMFFIAny {
    TVMFFIAny {
        type_index: kTVMFFIError,
        small_str_len: 0,
        value: TVMFFIAnyValue {
            v_obj: e.into_raw(),
        },
    }
}

/// Takes the Error out of a raw owned Error value.
///
/// # Safety
/// `raw` must be an owned Error value.
pub unsafe fn take_error(raw: TVMFFIAny) -> Error {
    // SAFETY: per the caller; the reference moves into the Error.
    unsafe { Error::from_raw_owned(std::ptr::NonNull::new_unchecked(raw.value.v_obj)) }
}

/// Decodes a raw visit result: no interrupt, an interrupt, or the error.
pub fn decode_visit(raw: TVMFFIAny) -> Result<Option<Any>> {
    match raw.type_index {
        kTVMFFINone => Ok(None),
        // SAFETY: an owned Error value.
        kTVMFFIError => Err(unsafe { take_error(raw) }),
        // SAFETY: an owned interrupt value.
        kTVMFFIVisitInterrupt => Ok(Some(unsafe { Any::from_raw(raw) })),
        _ => {
            // SAFETY: an owned value of another kind, released here.
            let v = unsafe { Any::from_raw(raw) };
            Err(Error::type_error(format!(
                "structural visit returned `{}`, expected None or ffi.VisitInterrupt",
                v.as_view().type_key()
            )))
        }
    }
}

/// A visit result as its raw owned form.
pub fn encode_visit(r: Result<Option<Any>>) -> TVMFFIAny {
    match r {
        Ok(None) => none_raw(),
        Ok(Some(i)) => i.into_raw(),
        Err(e) => error_raw(e),
    }
}

/// Appends `node` (when it is an object) to the visit error context of `err`, creating the
/// context (and keeping any earlier extra context) when there is none.
pub fn update_visit_error_context(err: &Error, node: &AnyView<'_>) {
    let Some(node) = node.as_object() else {
        return;
    };
    let obj = err.as_object().as_raw();
    // SAFETY: every Error (ours or foreign) keeps its cell right after the header; the error is
    // being propagated by this thread, which holds the only interest in its extra context.
    unsafe {
        let cell = &mut (*(obj as *mut crate::error::ErrorObj)).cell;
        let extra = cell.extra_context as *mut TVMFFIObject;
        if !extra.is_null() && (*extra).type_index == VISIT_ERROR_CONTEXT_INDEX {
            let ctx = &*(extra as *const VisitErrorContextObj);
            ctx.reverse_visit_pattern.push(Any::from(node));
            return;
        }
        let prev = if extra.is_null() {
            None
        } else {
            crate::object::inc_ref(extra);
            Some(ObjectRef::from_raw_owned(std::ptr::NonNull::new_unchecked(
                extra as *mut crate::object::Object,
            )))
        };
        let ctx = new_object(VisitErrorContextObj {
            header: TVMFFIObject::new::<VisitErrorContextObj>(),
            reverse_visit_pattern: List::from_vec(vec![Any::from(node)]),
            prev_error_context: prev,
        });
        cell.extra_context = ctx.into_raw() as *mut c_void;
        if !extra.is_null() {
            crate::object::dec_ref(extra);
        }
    }
}

/// Attaches `node` to the error a raw result carries (no-op for other results).
fn annotate_raw(raw: &TVMFFIAny, node: &AnyView<'_>) {
    if raw.type_index == kTVMFFIError {
        // SAFETY: an Error value owned by the caller; we borrow it for the update.
        let e = unsafe { take_error(*raw) };
        update_visit_error_context(&e, node);
        std::mem::forget(e);
    }
}

/// Checks that `v` is a live visitor object and returns its pointer.
pub fn visitor_ptr(v: &AnyView<'_>) -> Option<*mut TVMFFIObject> {
    v.as_object_ptr().filter(|&p| !p.is_null()).filter(|&p| {
        // SAFETY: an object view points at a live object.
        type_table::is_instance_of(unsafe { (*p).type_index }, STRUCTURAL_VISITOR_INDEX)
    })
}

/// `visitor->VisitExpected(value)`: dispatch through the visitor's vtable.
///
/// # Safety
/// `v` must be a live visitor object.
pub unsafe fn visit_raw(v: *mut TVMFFIObject, value: &TVMFFIAny) -> TVMFFIAny {
    // SAFETY: per the caller, a visitor starts with the C++ layout.
    let vt = unsafe { (*(v as *const VisitorHead)).vtable };
    // SAFETY: a constructed visitor's vtable is non-null and outlives it.
    match unsafe { vt.as_ref() }.and_then(|t| t.visit) {
        // SAFETY: the vtable entry is the visitor's own dispatch function.
        Some(f) => unsafe { f(v, *value) },
        None => error_raw(Error::internal("structural visitor has no visit entry")),
    }
}

/// The current definition-region mode of a visitor.
///
/// # Safety
/// `v` must be a live visitor object.
pub unsafe fn region(v: *mut TVMFFIObject) -> i32 {
    // SAFETY: per the caller.
    unsafe {
        (*(v as *const VisitorHead))
            .def_region_mode
            .load(Ordering::Relaxed)
    }
}

/// Sets the definition-region mode of a visitor.
///
/// # Safety
/// `v` must be a live visitor object.
pub unsafe fn set_region(v: *mut TVMFFIObject, kind: i32) {
    // SAFETY: per the caller; the mode is traversal state, written through shared access.
    unsafe {
        (*(v as *const VisitorHead))
            .def_region_mode
            .store(kind, Ordering::Relaxed)
    };
}

/// `WithDefRegionKind(kind, f)`: `f` runs with the mode set (no change inside a pattern region),
/// then the mode is restored.
///
/// # Safety
/// `v` must be a live visitor (or mutator: same prefix) object.
pub unsafe fn with_region<R>(v: *mut TVMFFIObject, kind: i32, f: impl FnOnce() -> R) -> R {
    // SAFETY: per the caller.
    let old = unsafe { region(v) };
    if old == kTVMFFIDefRegionKindPattern {
        return f();
    }
    // SAFETY: per the caller.
    unsafe { set_region(v, kind) };
    let r = f();
    // SAFETY: per the caller.
    unsafe { set_region(v, old) };
    r
}

fn object_any(p: *mut TVMFFIObject) -> Any {
    // SAFETY: a live object; the copy takes its own reference.
    unsafe {
        Any::copy_from_raw_view(&TVMFFIAny {
            type_index: (*p).type_index,
            small_str_len: 0,
            value: TVMFFIAnyValue { v_obj: p },
        })
    }
    .unwrap_or_default()
}

/// `DefaultVisitExpected`: the value's `__s_visit__` hook, or its reflected fields.
///
/// # Safety
/// `v` must be a live visitor object; `value` a live value.
pub unsafe fn default_visit_raw(v: *mut TVMFFIObject, value: &TVMFFIAny) -> TVMFFIAny {
    let ti = value.type_index;
    if let Some(attr) = type_table::attr_value(S_VISIT_ATTR, ti) {
        match attr.type_index {
            kTVMFFIOpaquePtr => {
                // SAFETY: an OpaquePtr entry of this column is an `FStructuralVisitABI`.
                let f = unsafe { std::mem::transmute::<*mut c_void, VisitFn>(attr.value.v_ptr) };
                // SAFETY: the hook gets the live visitor and a borrowed value.
                return unsafe { f(v, *value) };
            }
            kTVMFFIFunction => {
                let visitor = object_any(v);
                let args = [*visitor.raw(), *value];
                // SAFETY: the column keeps the function alive; two valid argument views.
                let r = unsafe { crate::function::call_raw(attr.value.v_obj, args.as_ptr(), 2) };
                return encode_visit(r.and_then(|r| match r.type_index() {
                    kTVMFFINone => Ok(None),
                    kTVMFFIVisitInterrupt => Ok(Some(r)),
                    _ => Err(result_mismatch("Optional<ffi.VisitInterrupt>", &r)),
                }));
            }
            _ => {
                return error_raw(Error::type_error(
                    "__s_visit__ must be an opaque function pointer or ffi.Function",
                ))
            }
        }
    }
    if ti < kTVMFFIStaticObjectBegin {
        return none_raw();
    }
    // SAFETY: per the caller.
    encode_visit(unsafe { visit_reflected_fields(v, value.value.v_obj) })
}

/// Visits the reflected structural fields of `obj` (definition regions scoped, a free variable
/// in a simple region visiting its own fields as uses).
///
/// # Safety
/// `v` must be a live visitor object, `obj` a live object.
pub unsafe fn visit_reflected_fields(
    v: *mut TVMFFIObject,
    obj: *mut TVMFFIObject,
) -> Result<Option<Any>> {
    // SAFETY: a live object.
    let ti = unsafe { (*obj).type_index };
    let visit_fields = || -> Result<Option<Any>> {
        for field in fields_of(ti) {
            if field.flags() & kTVMFFIFieldFlagBitMaskSEqHashIgnore != 0 {
                continue;
            }
            // SAFETY: the object is live and its type has this field.
            let value = unsafe { get_field(obj, field) }?;
            let child = || {
                // SAFETY: per the caller.
                decode_visit(unsafe { visit_raw(v, value.raw()) })
            };
            let r = if field.flags() & kTVMFFIFieldFlagBitMaskSEqHashDefSimple != 0 {
                // SAFETY: per the caller.
                unsafe { with_region(v, kTVMFFIDefRegionKindSimple, child) }
            } else if field.flags() & kTVMFFIFieldFlagBitMaskSEqHashDefPattern != 0 {
                // SAFETY: per the caller.
                unsafe { with_region(v, kTVMFFIDefRegionKindPattern, child) }
            } else {
                child()
            }?;
            if r.is_some() {
                return Ok(r);
            }
        }
        Ok(None)
    };
    let free_var =
        metadata_of(ti).is_some_and(|m| m.structural_eq_hash_kind == kTVMFFISEqHashKindFreeVar);
    // SAFETY: per the caller.
    if free_var && unsafe { region(v) } == kTVMFFIDefRegionKindSimple {
        // SAFETY: per the caller.
        return unsafe { with_region(v, kTVMFFIDefRegionKindNone, visit_fields) };
    }
    visit_fields()
}

/// Native `__s_visit__` of Array and List: every element in order.
unsafe extern "C" fn visit_seq(v: *mut TVMFFIObject, value: TVMFFIAny) -> TVMFFIAny {
    // SAFETY: the column entry of Array/List is only called with a sequence value.
    let items = unsafe { super::seq_items(value.value.v_obj) };
    for item in &items {
        // SAFETY: the caller passes a live visitor.
        let r = unsafe { visit_raw(v, item.raw()) };
        if r.type_index != kTVMFFINone {
            return r;
        }
    }
    none_raw()
}

/// Native `__s_visit__` of Map and Dict: every value in order (keys are anchors, not visited).
unsafe extern "C" fn visit_map(v: *mut TVMFFIObject, value: TVMFFIAny) -> TVMFFIAny {
    // SAFETY: the column entry of Map/Dict is only called with a map value.
    let items = unsafe { super::map_items(value.value.v_obj) };
    for (_, item) in &items {
        // SAFETY: the caller passes a live visitor.
        let r = unsafe { visit_raw(v, item.raw()) };
        if r.type_index != kTVMFFINone {
            return r;
        }
    }
    none_raw()
}

/// The `(column, type index, hook)` entries of the built-in containers' visit hooks.
pub fn builtin_visit_hooks() -> Vec<(i32, Any)> {
    let seq: VisitFn = visit_seq;
    let map: VisitFn = visit_map;
    vec![
        (kTVMFFIArray, Any::from(seq as *mut c_void)),
        (kTVMFFIList, Any::from(seq as *mut c_void)),
        (kTVMFFIMap, Any::from(map as *mut c_void)),
        (kTVMFFIDict, Any::from(map as *mut c_void)),
    ]
}

// ---------------------------------------------------------------------------------------------
// Engines
// ---------------------------------------------------------------------------------------------

/// One callback entry `(type_index, function)`.
pub type Link = (i32, Function);

/// Which engine a visitor object runs.
enum Engine {
    Walk {
        pre_order: bool,
        links: Vec<Link>,
        links_with_region: Vec<Link>,
    },
    Visit {
        links: Vec<Link>,
    },
}

/// A visitor made by this library: the C++ prefix, then the engine and the active path. Its
/// state is the walking thread's (`RefCell`s): the visitor is an object any thread may get hold
/// of (a callback's argument kept), so its entry refuses other threads (`thread`).
#[repr(C)]
pub struct EngineVisitor {
    head: VisitorHead,
    engine: Engine,
    active: RefCell<PtrSet<usize>>,
    thread: usize,
}

// SAFETY: repr(C) with the visitor prefix first; the type index is ffi.StructuralVisitor's.
unsafe impl ObjectType for EngineVisitor {
    const TYPE_KEY: &'static str = "ffi.StructuralVisitor";
    fn type_index() -> i32 {
        STRUCTURAL_VISITOR_INDEX
    }
}

static ENGINE_VTABLE: VisitorVTable = VisitorVTable {
    visit: Some(engine_visit),
};

fn new_engine(engine: Engine) -> ObjectRef<EngineVisitor> {
    new_object(EngineVisitor {
        head: VisitorHead {
            header: TVMFFIObject::new::<EngineVisitor>(),
            vtable: &ENGINE_VTABLE,
            def_region_mode: AtomicI32::new(kTVMFFIDefRegionKindNone),
        },
        engine,
        active: RefCell::new(PtrSet::default()),
        thread: crate::thread_token(),
    })
}

/// The walk result of a callback: Advance (None/0), Skip (1) or an interrupt.
enum WalkResult {
    Advance,
    Skip,
    Interrupt(Any),
}

fn walk_result(r: Any) -> Result<WalkResult> {
    match r.type_index() {
        kTVMFFINone => Ok(WalkResult::Advance),
        kTVMFFIInt | kTVMFFIBool => Ok(if r.as_view().as_i64() == Some(1) {
            WalkResult::Skip
        } else {
            WalkResult::Advance
        }),
        kTVMFFIVisitInterrupt => Ok(WalkResult::Interrupt(r)),
        _ => Err(result_mismatch("WalkResult", &r)),
    }
}

fn find_link(links: &[Link], ti: i32) -> Option<&Function> {
    links
        .iter()
        .find(|(t, _)| runtime_type_index_match(ti, *t))
        .map(|(_, f)| f)
}

impl EngineVisitor {
    fn as_obj(&self) -> *mut TVMFFIObject {
        self as *const EngineVisitor as *mut TVMFFIObject
    }

    /// Runs a walk callback on `value`; `None` when no callback matches.
    fn walk_link(
        &self,
        links: &[Link],
        with_region: &[Link],
        value: &TVMFFIAny,
    ) -> Option<Result<WalkResult>> {
        // SAFETY: `value` is live for the call.
        let view = unsafe { AnyView::from_raw(*value) };
        if let Some(f) = find_link(links, value.type_index) {
            return Some(f.call(&[view]).and_then(walk_result));
        }
        let f = find_link(with_region, value.type_index)?;
        let kind = Any::from(self.head.def_region_mode.load(Ordering::Relaxed) as i64);
        Some(f.call(&[view, kind.as_view()]).and_then(walk_result))
    }

    fn visit(&self, value: &TVMFFIAny) -> TVMFFIAny {
        if value.type_index == kTVMFFINone {
            return none_raw();
        }
        if let Err(e) = stack::check("structural visit") {
            return error_raw(e);
        }
        // A container or object met again while it is being visited contains itself.
        // SAFETY: object values hold a pointer.
        let key = (value.type_index >= kTVMFFIStaticObjectBegin)
            .then_some(unsafe { value.value.v_obj } as usize);
        if let Some(k) = key {
            if !self.active.borrow_mut().insert(k) {
                // SAFETY: `value` is live for the call.
                let view = unsafe { AnyView::from_raw(*value) };
                return error_raw(Error::value_error(format!(
                    "structural visit: cycle detected, a `{}` contains itself",
                    view.type_key()
                )));
            }
        }
        let r = self.visit_inner(value);
        if let Some(k) = key {
            self.active.borrow_mut().remove(&k);
        }
        r
    }

    fn visit_inner(&self, value: &TVMFFIAny) -> TVMFFIAny {
        // SAFETY: `value` is live for the call.
        let view = unsafe { AnyView::from_raw(*value) };
        let fail = |e: Error| {
            update_visit_error_context(&e, &view);
            error_raw(e)
        };
        match &self.engine {
            Engine::Walk {
                pre_order,
                links,
                links_with_region,
            } => {
                if *pre_order {
                    match self.walk_link(links, links_with_region, value) {
                        Some(Err(e)) => return fail(e),
                        Some(Ok(WalkResult::Interrupt(i))) => return i.into_raw(),
                        Some(Ok(WalkResult::Skip)) => return none_raw(),
                        Some(Ok(WalkResult::Advance)) | None => {}
                    }
                }
                // SAFETY: this visitor is live; `value` is live.
                let r = unsafe { default_visit_raw(self.as_obj(), value) };
                if r.type_index != kTVMFFINone {
                    annotate_raw(&r, &view);
                    return r;
                }
                if !*pre_order {
                    match self.walk_link(links, links_with_region, value) {
                        Some(Err(e)) => return fail(e),
                        Some(Ok(WalkResult::Interrupt(i))) => return i.into_raw(),
                        _ => {}
                    }
                }
                none_raw()
            }
            Engine::Visit { links } => {
                let r = match find_link(links, value.type_index) {
                    Some(f) => {
                        let me = object_any(self.as_obj());
                        encode_visit(f.call(&[view, me.as_view()]).and_then(
                            |r| match r.type_index() {
                                kTVMFFINone => Ok(None),
                                kTVMFFIVisitInterrupt => Ok(Some(r)),
                                _ => Err(result_mismatch("Optional<ffi.VisitInterrupt>", &r)),
                            },
                        ))
                    }
                    // SAFETY: this visitor is live; `value` is live.
                    None => unsafe { default_visit_raw(self.as_obj(), value) },
                };
                annotate_raw(&r, &view);
                r
            }
        }
    }
}

unsafe extern "C" fn engine_visit(v: *mut TVMFFIObject, value: TVMFFIAny) -> TVMFFIAny {
    // SAFETY: this vtable is only installed on EngineVisitor objects.
    let engine = unsafe { &*(v as *const EngineVisitor) };
    if crate::thread_token() != engine.thread {
        return error_raw(super::other_thread_error("ffi.StructuralVisitor"));
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| engine.visit(&value))) {
        Ok(r) => r,
        Err(p) => error_raw(Error::from_panic(p)),
    }
}

/// `ffi.StructuralWalk(root, callbacks, callbacks_with_def_region_kind, order)`.
pub fn structural_walk(
    root: AnyView<'_>,
    links: Vec<Link>,
    links_with_region: Vec<Link>,
    order: i32,
) -> Result<Option<Any>> {
    let v = new_engine(Engine::Walk {
        pre_order: order == 0,
        links,
        links_with_region,
    });
    // SAFETY: a live visitor of ours.
    decode_visit(unsafe { visit_raw(v.as_raw(), root.raw()) })
}

/// `ffi.StructuralVisit(root, callbacks)`.
pub fn structural_visit(root: AnyView<'_>, links: Vec<Link>) -> Result<Option<Any>> {
    let v = new_engine(Engine::Visit { links });
    // SAFETY: a live visitor of ours.
    decode_visit(unsafe { visit_raw(v.as_raw(), root.raw()) })
}

/// `ffi.VisitInterrupt(value)`.
pub fn visit_interrupt(value: Any) -> ObjectRef<VisitInterruptObj> {
    VisitInterruptObj::new(value)
}

// ---------------------------------------------------------------------------------------------
// Access paths of a visit error context
// ---------------------------------------------------------------------------------------------

/// `VisitErrorContext::FindAccessPaths(root, context, allow_prefix_match)`: the access paths
/// from `root` along which the context's recorded objects (outermost first) are found in order.
pub fn find_access_paths(
    root: &Any,
    context: &VisitErrorContextObj,
    allow_prefix_match: bool,
) -> Result<Vec<crate::builtin_types::access_path::AccessPath>> {
    // The pattern without empty entries and runs of the same object.
    let mut records: Vec<usize> = Vec::new();
    for entry in context.reverse_visit_pattern.to_vec() {
        let Some(p) = entry.as_view().as_object_ptr().filter(|p| !p.is_null()) else {
            continue;
        };
        if records.last() != Some(&(p as usize)) {
            records.push(p as usize);
        }
    }
    let mut finder = PathFinder {
        records,
        allow_prefix_match,
        matched: 0,
        steps: Vec::new(),
        materialized: Vec::new(),
        results: Vec::new(),
        active: PtrSet::default(),
    };
    if let Some(p) = root.as_view().as_object_ptr().filter(|p| !p.is_null()) {
        finder.visit_object(p)?;
    }
    Ok(finder.results)
}

enum TempStep {
    Attr(crate::reflection::FieldRef),
    ArrayItem(i64),
    MapItem(Any),
}

struct PathFinder {
    records: Vec<usize>,
    allow_prefix_match: bool,
    matched: usize,
    steps: Vec<TempStep>,
    /// `materialized[k]` is the path of `steps[..=k]`.
    materialized: Vec<crate::builtin_types::access_path::AccessPath>,
    results: Vec<crate::builtin_types::access_path::AccessPath>,
    /// Containers and objects on the current path (a cycle is not descended again).
    active: PtrSet<usize>,
}

impl PathFinder {
    fn push(&mut self, s: TempStep) {
        self.steps.push(s);
    }

    fn pop(&mut self) {
        self.steps.pop();
        self.materialized.truncate(self.steps.len());
    }

    fn path(&mut self) -> crate::builtin_types::access_path::AccessPath {
        use crate::builtin_types::access_path::{extend, kind, AccessPathObj, AccessStepObj};
        if self.steps.is_empty() {
            return AccessPathObj::root();
        }
        for i in self.materialized.len()..self.steps.len() {
            let parent = if i == 0 {
                AccessPathObj::root()
            } else {
                self.materialized[i - 1].clone()
            };
            let step = match &self.steps[i] {
                TempStep::Attr(f) => {
                    AccessStepObj::new(kind::ATTR, Any::from(super::field_name(*f)))
                }
                TempStep::ArrayItem(k) => AccessStepObj::new(kind::ARRAY_ITEM, Any::from(*k)),
                TempStep::MapItem(k) => AccessStepObj::new(kind::MAP_ITEM, k.clone()),
            };
            self.materialized.push(extend(&parent, step));
        }
        self.materialized.last().expect("non-empty").clone()
    }

    fn visit_any(&mut self, v: &Any) -> Result<()> {
        let ti = v.type_index();
        if ti < kTVMFFIStaticObjectBegin {
            return Ok(());
        }
        stack::check("VisitErrorContext.FindAccessPaths")?;
        // SAFETY: object values hold a live pointer.
        let p = unsafe { v.raw().value.v_obj };
        match ti {
            kTVMFFIArray | kTVMFFIList | kTVMFFIMap | kTVMFFIDict => {
                if !self.active.insert(p as usize) {
                    return Ok(());
                }
                if ti == kTVMFFIArray || ti == kTVMFFIList {
                    // SAFETY: a live sequence.
                    for (i, item) in unsafe { super::seq_items(p) }.iter().enumerate() {
                        if item.type_index() == kTVMFFINone {
                            continue;
                        }
                        self.push(TempStep::ArrayItem(i as i64));
                        self.visit_any(item)?;
                        self.pop();
                    }
                } else {
                    // SAFETY: a live map.
                    for (k, item) in unsafe { super::map_items(p) } {
                        if k.type_index() == kTVMFFINone || item.type_index() == kTVMFFINone {
                            continue;
                        }
                        self.push(TempStep::MapItem(k));
                        self.visit_any(&item)?;
                        self.pop();
                    }
                }
                self.active.remove(&(p as usize));
                Ok(())
            }
            _ => self.visit_object(p),
        }
    }

    fn visit_object(&mut self, p: *mut TVMFFIObject) -> Result<()> {
        // SAFETY: a live object.
        let ti = unsafe { (*p).type_index };
        if metadata_of(ti).is_none() || self.active.contains(&(p as usize)) {
            return Ok(());
        }
        let n = self.records.len();
        let matched_step = self.matched < n && self.records[n - 1 - self.matched] == p as usize;
        if matched_step {
            self.matched += 1;
            if self.matched == n {
                let path = self.path();
                self.results.push(path);
                self.matched -= 1;
                return Ok(());
            }
        }
        self.active.insert(p as usize);
        let before = self.results.len();
        for field in fields_of(ti) {
            // SAFETY: the object is live and its type has this field.
            let child = unsafe { get_field(p, field) }?;
            self.push(TempStep::Attr(field));
            self.visit_any(&child)?;
            self.pop();
        }
        if self.allow_prefix_match
            && self.matched > 0
            && self.matched < n
            && !self.steps.is_empty()
            && self.results.len() == before
        {
            let path = self.path();
            self.results.push(path);
        }
        self.active.remove(&(p as usize));
        if matched_step {
            self.matched -= 1;
        }
        Ok(())
    }
}
