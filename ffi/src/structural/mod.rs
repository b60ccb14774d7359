//! Structural algorithms over values and reflected objects (spec §8, Structural): equality with
//! first-mismatch paths, hashing, and the helpers they share (reflected field walks, type
//! metadata, tensor content, the callback handed to custom hooks).
//!
//! Rationale: values may be nested without bound and mutable containers or objects may contain
//! themselves. Every walk here keeps an explicit stack of frames instead of recursing, and marks
//! the containers and objects on the current path as active: meeting an active one again is a
//! cycle and an error, never a hang. Only custom hooks (`__s_equal__`, `__s_hash__`) re-enter a
//! walk through a callback; those nest on the thread's stack, guarded by `stack::check`.

pub mod equal;
pub mod hash;
pub mod mutate;
pub mod stack;
pub mod visit;

use crate::abi::*;
use crate::any::Any;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::map_base::{clone_raw, MapBase, RawMap};
use crate::reflection::accessor::InPlace;
use crate::reflection::FieldRef;
use crate::seq::SeqObj;
use crate::type_table;

/// Path length up to which walks do not record the containers and objects they are inside of:
/// an acyclic value never meets them again, and a cycle grows the path past this length.
pub const SHALLOW_PATH: usize = 64;

/// Inserts `key` into a walk's path set (whether it was new), reserving room for a deep path
/// at the first insert: growing the table one doubling at a time was a tenth of hashing a
/// 200-deep nesting.
pub(crate) fn path_insert<K: std::hash::Hash + Eq>(set: &mut PtrSet<K>, key: K) -> bool {
    if set.capacity() == 0 {
        set.reserve(256);
    }
    set.insert(key)
}

/// A hasher for keys that are already well spread: object addresses and 64-bit hashes (one
/// multiply instead of SipHash; the walks look such keys up once per container or object).
#[derive(Default, Clone, Copy)]
pub struct WordHasher(u64);

impl std::hash::Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(v as u64);
    }
}

type WordBuild = std::hash::BuildHasherDefault<WordHasher>;
/// A set of addresses.
pub type PtrSet<K> = std::collections::HashSet<K, WordBuild>;
/// A map keyed by addresses or hashes.
pub type PtrMap<K, V> = std::collections::HashMap<K, V, WordBuild>;

/// The reflected fields of type `ti`, ancestors' first (root excluded), as the official walks
/// visit them.
pub fn fields_of(ti: i32) -> Vec<FieldRef> {
    match type_table::type_entry(ti) {
        Some(entry) => crate::reflection::all_fields(&entry.info),
        None => Vec::new(),
    }
}

/// Registers the hooks the library itself provides, while the type table is built (so header
/// code compiled into other libraries finds them before any call): the `__s_visit__`,
/// `__s_mutate__` and `__s_maybe_inplace_mutate__` hooks of the containers and leaves, and
/// BigInt's `__data_to_json__` / `__data_from_json__`.
pub(crate) fn register_hooks(sink: &dyn type_table::TypeSink) -> Result<()> {
    for (ti, hook) in visit::builtin_visit_hooks() {
        // SAFETY: the library's own hooks, with the column's signature.
        unsafe { sink.register_attr(ti, visit::S_VISIT_ATTR, hook.raw()) }?;
    }
    for (ti, column, hook) in mutate::builtin_mutate_hooks() {
        // SAFETY: as above.
        unsafe { sink.register_attr(ti, column, hook.raw()) }?;
    }
    let (to, from) = crate::serialization::bigint_json_hooks();
    for (name, f) in [
        (crate::serialization::DATA_TO_JSON_ATTR, to),
        (crate::serialization::DATA_FROM_JSON_ATTR, from),
    ] {
        // SAFETY: as above.
        unsafe { sink.register_attr(kTVMFFIBigInt, name, Any::from(f).raw()) }?;
    }
    Ok(())
}

/// The name of a field.
pub fn field_name(f: FieldRef) -> String {
    f.name().to_owned()
}

/// Reads field `f` of the live object `obj` through its getter.
///
/// # Safety
/// `obj` must be a live object of a type that has the field.
pub unsafe fn get_field(obj: *mut TVMFFIObject, f: FieldRef) -> Result<Any> {
    // SAFETY: per the caller.
    unsafe { f.get(obj) }
}

/// The metadata of type `ti`, if registered.
pub fn metadata_of(ti: i32) -> Option<&'static TVMFFITypeMetadata> {
    type_table::type_entry(ti).and_then(|e| e.metadata())
}

/// `type_key_hash` of type `ti` (0 for an unknown index).
pub fn key_hash_of(ti: i32) -> u64 {
    type_table::type_entry(ti).map_or(0, |e| e.info.type_key_hash)
}

/// The structural kind of object type `ti` (table entry `entry`), or the official TypeError when
/// it has none.
pub fn structural_kind_of(entry: Option<&type_table::TypeEntry>, ti: i32) -> Result<i32> {
    match entry.and_then(|e| e.metadata()) {
        None => Err(Error::type_error(format!(
            "Type metadata is not set for type `{}`, so StructuralHash is not supported for this type",
            type_table::type_key_of(ti)
        ))),
        Some(m) if m.structural_eq_hash_kind == kTVMFFISEqHashKindUnsupported => {
            Err(Error::type_error(format!(
                "_type_s_eq_hash_kind is not set for type `{}`, so StructuralHash is not supported for this type",
                type_table::type_key_of(ti)
            )))
        }
        Some(m) => Ok(m.structural_eq_hash_kind),
    }
}

/// The Function in attribute column `name` for type `ti`, read through `column` (the column's
/// pointer kept by the caller: walks read a hook per object, as the official walks do, since a
/// hook may register another type's hook mid-walk).
pub fn hook_in(column: &type_table::ColumnCache, name: &str, ti: i32) -> Result<Option<Function>> {
    function_entry(column.entry(name, ti), name, ti)
}

/// What the walks need of one object type: its structural kind, its key hash and the fields they
/// compare and hash (`SEqHashIgnore` ones left out, getters and offsets copied out).
pub struct TypeFacts {
    pub kind: i32,
    pub key_hash: u64,
    pub fields: Box<[WalkField]>,
    /// The type's field count (its own and its ancestors') when these were made: fields are only
    /// ever appended, so another count means another list.
    field_count: usize,
}

/// A field as the walks read it.
pub struct WalkField {
    pub field: FieldRef,
    getter: TVMFFIFieldGetter,
    offset: isize,
    /// The getter is one of this library's that the walk can do in place, without the call
    /// (a tenth of comparing a tree of reflected objects went to the calls).
    in_place: Option<InPlace>,
    /// The definition region the field asks for (`field_region` of its flags).
    pub region: Option<i32>,
}

impl WalkField {
    /// Reads the field of `obj` (as `get_field`).
    ///
    /// # Safety
    /// `obj` must be a live object of a type that has the field.
    #[inline]
    pub unsafe fn get(&self, obj: *mut TVMFFIObject) -> Result<Any> {
        // SAFETY: per the caller, `offset` lies inside the live object.
        let cell = unsafe { (obj as *const u8).offset(self.offset) };
        match self.in_place {
            Some(InPlace::Object) => {
                // SAFETY: the getter says the cell is an object cell.
                return Ok(unsafe { crate::reflection::accessor::read_object_cell(cell.cast()) });
            }
            Some(InPlace::I64) => {
                // SAFETY: the getter says the cell is an int64.
                return Ok(Any::from(unsafe { *(cell as *const i64) }));
            }
            None => {}
        }
        let Some(getter) = self.getter else {
            // SAFETY: per the caller.
            return unsafe { get_field(obj, self.field) };
        };
        // SAFETY: per the caller, `offset` lies inside the live object; `getter` is the field's.
        unsafe {
            crate::reflection::read_field(getter, (obj as *mut u8).offset(self.offset).cast())
        }
    }
}

/// Facts replaced because their type gained a field: never freed, as a walk on another thread
/// may still read them (only a field registered after a walk met its type retires any).
static RETIRED_FACTS: parking_lot::Mutex<Vec<usize>> = parking_lot::Mutex::new(Vec::new());

/// The number of fields of a type, its ancestors' included.
fn field_count(info: &TVMFFITypeInfo) -> usize {
    // SAFETY: a live type info's count slot.
    let mut n = unsafe { type_table::published_count(&info.num_fields) }.max(0) as usize;
    for depth in 1..info.type_depth.max(0) as usize {
        // SAFETY: `type_ancestors` has `type_depth` entries; type infos are never freed.
        n += unsafe { type_table::published_count(&(**info.type_ancestors.add(depth)).num_fields) }
            .max(0) as usize;
    }
    n
}

/// The facts of object type `ti`, or the TypeError of a type without a structural kind.
///
/// Rationale: reading them per object (a locked search of the attribute columns by name, the
/// type key formatted for an error not raised, a field list allocated) was a third of comparing
/// a tree of reflected objects, and reading the fields live from the type table per object still
/// cost 1.1x. They are made once per type and kept with its table entry, checked per object
/// against the type's field count (a few loads): a field registered meanwhile, by a hook
/// mid-walk say, is seen as the official walks see it. Hooks are not kept: they are read per
/// object (`hook_in`). A failure is not kept (each object of the type raises the same error
/// again). Nothing here is per thread or per call.
pub fn type_facts(ti: i32) -> Result<&'static TypeFacts> {
    let Some(entry) = type_table::type_entry(ti) else {
        return Err(structural_kind_of(None, ti).expect_err("an unknown type has no kind"));
    };
    let slot = &entry.walk_facts;
    let current = slot.load(std::sync::atomic::Ordering::Acquire) as *mut TypeFacts;
    let count = field_count(&entry.info);
    // SAFETY: published facts are never freed.
    if let Some(f) = unsafe { current.as_ref() } {
        if f.field_count == count {
            return Ok(f);
        }
    }
    let made = Box::into_raw(Box::new(make_facts(entry, ti, count)?));
    match slot.compare_exchange(
        current.cast(),
        made.cast(),
        std::sync::atomic::Ordering::AcqRel,
        std::sync::atomic::Ordering::Acquire,
    ) {
        Ok(old) => {
            if !old.is_null() {
                RETIRED_FACTS.lock().push(old as usize);
            }
            // SAFETY: just published; never freed.
            Ok(unsafe { &*made })
        }
        Err(theirs) => {
            // Another thread published first: keep theirs (checked again at the next object).
            // SAFETY: `made` was never published.
            drop(unsafe { Box::from_raw(made) });
            // SAFETY: published facts are never freed (non-NULL: the slot never goes back).
            Ok(unsafe { &*(theirs as *const TypeFacts) })
        }
    }
}

fn make_facts(entry: &type_table::TypeEntry, ti: i32, count: usize) -> Result<TypeFacts> {
    let kind = structural_kind_of(Some(entry), ti)?;
    let mut fields = Vec::new();
    let mut cursor = crate::reflection::FieldCursor::new(&entry.info);
    while let Some(field) = cursor.next_field() {
        let info = field.info();
        if info.flags & kTVMFFIFieldFlagBitMaskSEqHashIgnore == 0 {
            fields.push(WalkField {
                field,
                getter: info.getter,
                offset: info.offset as isize,
                in_place: info.getter.and_then(crate::reflection::accessor::in_place),
                region: field_region(info.flags),
            });
        }
    }
    Ok(TypeFacts {
        kind,
        key_hash: entry.info.type_key_hash,
        fields: fields.into_boxed_slice(),
        field_count: count,
    })
}

/// Before a walk reads field `*next` of `obj` from `*facts`: once any field was registered since
/// the walk began (`walk_generation`; by a hook, say), moves both to the type's newer facts, if
/// it gained fields, at the position after the last field compared (fields appended to a level
/// the walk has not finished are read, as the official walks read each level's list live; one
/// appended to a level already passed is not).
///
/// # Safety
/// `obj` must be a live object.
pub unsafe fn catch_up(
    facts: &mut &'static TypeFacts,
    next: &mut usize,
    obj: *mut TVMFFIObject,
    walk_generation: u64,
) -> Result<()> {
    if type_table::layout_generation() == walk_generation {
        return Ok(());
    }
    // SAFETY: per the caller.
    let new = type_facts(unsafe { (*obj).type_index })?;
    if std::ptr::eq(new, *facts) {
        return Ok(());
    }
    let resume = match next.checked_sub(1).map(|i| facts.fields[i].field) {
        None => 0,
        Some(last) => match new.fields.iter().position(|f| f.field == last) {
            Some(i) => i + 1,
            None => return Ok(()),
        },
    };
    *facts = new;
    *next = resume;
    Ok(())
}

/// The Function registered in attribute column `name` for type `ti`: `None` when absent, a
/// TypeError when the entry is not a Function.
pub fn attr_function(name: &str, ti: i32) -> Result<Option<Function>> {
    function_entry(type_table::attr_value(name, ti), name, ti)
}

/// `attr_function` of the entry `v` read from column `name`.
fn function_entry(v: Option<TVMFFIAny>, name: &str, ti: i32) -> Result<Option<Function>> {
    let Some(v) = v else {
        return Ok(None);
    };
    if v.type_index != kTVMFFIFunction {
        return Err(Error::type_error(format!(
            "Cannot treat type `{}` as type `ffi.Function` (the `{name}` attribute of `{}`)",
            type_table::type_key_of(v.type_index),
            type_table::type_key_of(ti)
        )));
    }
    // SAFETY: the column holds a live Function; we take our own reference.
    let any = unsafe { Any::copy_from_raw_view(&v) }?;
    any.get::<Function>().map(Some)
}

/// The container lock (`seq::container_lock`) for a List or Dict, which other threads may
/// mutate in place; none for an Array or Map, which are copy-on-write (a holder of a reference
/// never sees them change), as their own methods read them.
///
/// # Safety
/// `obj` must be a live object.
unsafe fn lock_if_mutable(
    obj: *mut TVMFFIObject,
) -> Option<parking_lot::ReentrantMutexGuard<'static, ()>> {
    // SAFETY: per the caller.
    let ti = unsafe { (*obj).type_index };
    matches!(ti, kTVMFFIList | kTVMFFIDict).then(|| crate::seq::container_lock(obj))
}

/// Owned copies of the elements of an Array or List object.
///
/// # Safety
/// `obj` must be a live Array or List.
pub unsafe fn seq_items(obj: *mut TVMFFIObject) -> Vec<Any> {
    let mut out = Vec::new();
    // SAFETY: per the caller.
    unsafe { seq_items_into(obj, &mut out) };
    out
}

/// `seq_items` into `out` (emptied first), to reuse its buffer.
///
/// # Safety
/// `obj` must be a live Array or List.
pub unsafe fn seq_items_into(obj: *mut TVMFFIObject, out: &mut Vec<Any>) {
    out.clear();
    // SAFETY: per the caller.
    let _g = unsafe { lock_if_mutable(obj) };
    // SAFETY: Array and List share the sequence layout; the elements are cloned at once.
    let items = unsafe { (*(obj as *const SeqObj)).slice_unchecked() };
    // one slot more: `Items` keeps the List after its elements (a push past an exact capacity
    // would copy the whole buffer)
    out.reserve(items.len() + 1);
    out.extend_from_slice(items);
}

/// The elements of a sequence being walked: an Array's are read in place (it is copy-on-write,
/// so it cannot change while the frame holds a reference to it), a List's are copied first (a
/// hook or another thread may change it meanwhile). Either way the frame keeps the sequence:
/// its address is on the walk's path, and were it freed mid-walk (a hook dropping the last
/// other reference) a new container at that address would pass for a cycle.
pub(crate) enum Items {
    Array(Any),
    /// An Array that the frame below keeps (an element of its Array, which cannot change, or of
    /// its copy of a List's elements, or a value of its Map), read without a reference of its
    /// own. A reference per nested Array was a quarter of hashing deep nesting.
    Borrowed(*mut TVMFFIObject),
    /// A List's elements, then the List itself (held, not an element; in a field of its own
    /// `Items` took 40 bytes instead of 24, and equality's sequence frames hold two).
    Copied(Vec<Any>),
}

const _: () = assert!(std::mem::size_of::<Items>() == 24);

impl Items {
    /// The elements of `seq`, a live Array or List (a List's copied into a buffer of `buffers`).
    pub(crate) fn of(seq: Any, buffers: &Buffers) -> Items {
        if seq.type_index() == kTVMFFIArray {
            return Items::Array(seq);
        }
        let mut v = buffers.take();
        // SAFETY: a live List (the caller's kind check).
        unsafe { seq_items_into(seq.raw().value.v_obj, &mut v) };
        v.push(seq);
        Items::Copied(v)
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[Any] {
        match self {
            // SAFETY: a live Array held by this frame; its storage does not change while held.
            Items::Array(a) => unsafe {
                (*(a.raw().value.v_obj as *const SeqObj)).slice_unchecked()
            },
            // SAFETY: a live Array held by the frame below (`borrowed`); it does not change.
            Items::Borrowed(p) => unsafe { (*(*p as *const SeqObj)).slice_unchecked() },
            Items::Copied(v) => &v[..v.len() - 1],
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// Element `i`, to be walked: moved out of a copy, a new reference from an Array.
    #[inline]
    pub(crate) fn take(&mut self, i: usize) -> Any {
        match self {
            Items::Array(_) | Items::Borrowed(_) => self.as_slice()[i].clone(),
            Items::Copied(v) => {
                debug_assert!(i + 1 < v.len());
                std::mem::take(&mut v[i])
            }
        }
    }

    /// After user code ran (a hook) while this frame walked its children: a List's elements
    /// are read again, at most as many as the copy had, so that the elements not walked yet
    /// are the List's current ones (the official walks read a List live). Arrays never change.
    pub(crate) fn reread(&mut self) {
        if let Items::Copied(v) = self {
            let limit = v.len() - 1;
            let list = v.pop().expect("a List's copy ends with the List");
            // SAFETY: a live List (held by this copy).
            unsafe { seq_items_into(list.raw().value.v_obj, v) };
            v.truncate(limit);
            v.push(list);
        }
    }

    /// Whether these are a List's copied elements (`reread` has something to do).
    #[inline]
    pub(crate) fn is_copy(&self) -> bool {
        matches!(self, Items::Copied(_))
    }

    /// Returns a copy's buffer for reuse.
    pub(crate) fn recycle(self, buffers: &Buffers) {
        if let Items::Copied(v) = self {
            buffers.give(v);
        }
    }
}

/// A walk's frame stack: the first `INLINE` frames in place, in the walk's own stack frame,
/// the rest in a Vec. A Vec alone cost one allocation per call, about a fifth of comparing one
/// small object from Python.
pub(crate) struct FrameStack<F> {
    inline: [std::mem::MaybeUninit<F>; FRAMES_INLINE],
    /// Frames in `inline` (all of them before any goes to `spill`).
    len: usize,
    spill: Vec<F>,
}

const FRAMES_INLINE: usize = 8;

impl<F> FrameStack<F> {
    pub(crate) fn new() -> Self {
        FrameStack {
            inline: [const { std::mem::MaybeUninit::uninit() }; FRAMES_INLINE],
            len: 0,
            spill: Vec::new(),
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, f: F) {
        if self.len < FRAMES_INLINE {
            self.inline[self.len].write(f);
            self.len += 1;
        } else {
            self.spill.push(f);
        }
    }

    #[inline]
    pub(crate) fn pop(&mut self) -> Option<F> {
        if let Some(f) = self.spill.pop() {
            return Some(f);
        }
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        // SAFETY: slots below `len` hold frames; this one is moved out and no longer counted.
        Some(unsafe { self.inline[self.len].assume_init_read() })
    }

    #[inline]
    pub(crate) fn last_mut(&mut self) -> Option<&mut F> {
        if let Some(f) = self.spill.last_mut() {
            return Some(f);
        }
        let n = self.len.checked_sub(1)?;
        // SAFETY: slots below `len` hold frames.
        Some(unsafe { self.inline[n].assume_init_mut() })
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<F> Drop for FrameStack<F> {
    fn drop(&mut self) {
        self.spill.clear();
        while self.pop().is_some() {}
    }
}

/// Spent item buffers of finished frames, for the next frames of a walk: one allocation per
/// sequence cost hash and equality a quarter of their time on small arrays (and one per map a
/// tenth of hashing many small maps: hash keeps its map entries in `Buffers<(u64, Any)>`).
pub(crate) struct Buffers<T = Any>(std::cell::RefCell<Vec<Vec<T>>>);

impl<T> Default for Buffers<T> {
    fn default() -> Self {
        Buffers(std::cell::RefCell::new(Vec::new()))
    }
}

impl<T> Buffers<T> {
    /// Buffers kept, and the largest capacity kept.
    const KEEP: usize = 64;
    const KEEP_CAPACITY: usize = 4096;

    /// An empty buffer (a spent one when there is one).
    pub(crate) fn take(&self) -> Vec<T> {
        self.0.borrow_mut().pop().unwrap_or_default()
    }

    /// Returns a spent buffer (its elements are dropped now).
    pub(crate) fn give(&self, mut v: Vec<T>) {
        v.clear();
        let mut kept = self.0.borrow_mut();
        if kept.len() < Self::KEEP && v.capacity() <= Self::KEEP_CAPACITY {
            kept.push(v);
        }
    }
}

/// Owned copies of the entries of a Map or Dict object, in iteration order.
///
/// # Safety
/// `obj` must be a live Map or Dict.
pub unsafe fn map_items(obj: *mut TVMFFIObject) -> Vec<(Any, Any)> {
    // SAFETY: per the caller.
    let _g = unsafe { lock_if_mutable(obj) };
    // SAFETY: per the caller; both kinds share the map storage.
    let m = unsafe { RawMap::from_ptr(obj as *mut MapBase) };
    let mut out = Vec::with_capacity(m.size() as usize);
    let mut pos = m.begin();
    while pos != m.end() {
        // SAFETY: a valid position; the pair is copied before anything can change.
        let kv = unsafe { &*m.kv_at(pos) };
        // SAFETY: stored values are owned kinds; the clones take their own references.
        out.push(unsafe {
            (
                Any::from_raw(clone_raw(&kv.key)),
                Any::from_raw(clone_raw(&kv.value)),
            )
        });
        pos = m.advance(pos);
    }
    out
}

/// Calls `f` with every entry of a Map or Dict, borrowed, in iteration order (a Dict under its
/// lock; a Map in place: copy-on-write, it cannot change while the caller holds it).
///
/// # Safety
/// `obj` must be a live Map or Dict that the caller holds a reference to. `f` must not change
/// the container or run foreign code (which could: the lock is reentrant, and a Dict changed
/// under the loop skips or repeats entries), nor keep the borrowed entries past its call.
pub unsafe fn map_for_each(obj: *mut TVMFFIObject, mut f: impl FnMut(&Any, &Any)) {
    // SAFETY: per the caller.
    let _g = unsafe { lock_if_mutable(obj) };
    // SAFETY: per the caller; both kinds share the map storage.
    let m = unsafe { RawMap::from_ptr(obj as *mut MapBase) };
    let mut pos = m.begin();
    while pos != m.end() {
        // SAFETY: a valid position; `Any` is a transparent `TVMFFIAny`, borrowed for the call.
        unsafe {
            let kv = &*m.kv_at(pos);
            f(
                &*(&kv.key as *const TVMFFIAny as *const Any),
                &*(&kv.value as *const TVMFFIAny as *const Any),
            );
        }
        pos = m.advance(pos);
    }
}

/// The position of `key` in a Map or Dict (AnyEqual lookup).
///
/// # Safety
/// `obj` must be a live Map or Dict.
pub unsafe fn map_get(obj: *mut TVMFFIObject, key: &Any) -> Result<Option<Any>> {
    // SAFETY: per the caller.
    let _g = unsafe { lock_if_mutable(obj) };
    // SAFETY: per the caller.
    let m = unsafe { RawMap::from_ptr(obj as *mut MapBase) };
    let _l = crate::map::LookupGuard::enter(m.as_ptr());
    Ok(m.find(key.raw())?.map(|pos| {
        // SAFETY: a valid position; the value is cloned before anything can change.
        unsafe { Any::from_raw(clone_raw(&(*m.kv_at(pos)).value)) }
    }))
}

/// The value of `key` in Map `obj`, read in place (no reference of its own): it stays valid
/// while the Map is alive, as a Map never changes.
///
/// # Safety
/// `obj` must be a live Map (not a Dict).
pub unsafe fn map_find_in_place(obj: *mut TVMFFIObject, key: &Any) -> Result<Option<*const Any>> {
    // SAFETY: per the caller.
    let m = unsafe { RawMap::from_ptr(obj as *mut MapBase) };
    let _l = crate::map::LookupGuard::enter(m.as_ptr());
    // SAFETY: a valid position; `Any` is a transparent `TVMFFIAny`.
    Ok(m.find(key.raw())?
        .map(|pos| unsafe { &(*m.kv_at(pos)).value as *const TVMFFIAny as *const Any }))
}

/// The number of entries of a Map or Dict, or elements of an Array or List.
///
/// # Safety
/// `obj` must be a live container of the kind `ti` names.
pub unsafe fn container_len(obj: *mut TVMFFIObject, ti: i32) -> usize {
    // SAFETY: per the caller.
    let _g = unsafe { lock_if_mutable(obj) };
    match ti {
        // SAFETY: per the caller.
        kTVMFFIArray | kTVMFFIList => unsafe { (*(obj as *const SeqObj)).len() },
        // SAFETY: per the caller.
        _ => unsafe { RawMap::from_ptr(obj as *mut MapBase) }.size() as usize,
    }
}

/// The parts of a tensor the structural algorithms read.
pub struct TensorParts<'a> {
    pub shape: &'a [i64],
    pub dtype: DLDataType,
    pub device: DLDevice,
    pub contiguous: bool,
    /// `data + byte_offset`.
    pub data: *const u8,
}

/// Reads the DLTensor of a live `ffi.Tensor` object (whichever library made it).
///
/// # Safety
/// `obj` must be a live Tensor; the returned parts borrow it.
pub unsafe fn tensor_parts<'a>(obj: *mut TVMFFIObject) -> TensorParts<'a> {
    // SAFETY: every Tensor carries a DLTensor right after the 24-byte header.
    let t = unsafe { &*((obj as *const u8).add(24) as *const DLTensor) };
    let n = t.ndim.max(0) as usize;
    let shape: &[i64] = if n == 0 || t.shape.is_null() {
        &[]
    } else {
        // SAFETY: a DLTensor's shape has ndim entries.
        unsafe { std::slice::from_raw_parts(t.shape, n) }
    };
    let strides: Option<&[i64]> = if t.strides.is_null() {
        None
    } else {
        // SAFETY: non-NULL strides have ndim entries.
        Some(unsafe { std::slice::from_raw_parts(t.strides, n) })
    };
    TensorParts {
        shape,
        dtype: t.dtype,
        device: t.device,
        contiguous: crate::tensor::is_contiguous(shape, strides),
        data: (t.data as *const u8).wrapping_add(t.byte_offset as usize),
    }
}

impl TensorParts<'_> {
    /// The packed data size in bytes (`(numel * bits * lanes + 7) / 8`).
    pub fn data_size(&self) -> usize {
        let numel: u64 = self.shape.iter().map(|&d| d as u64).product();
        (numel * self.dtype.bits as u64 * self.dtype.lanes as u64).div_ceil(8) as usize
    }

    /// The content bytes.
    ///
    /// # Safety
    /// The tensor must be a CPU tensor whose data is readable for `data_size` bytes.
    pub unsafe fn bytes(&self) -> &[u8] {
        let n = self.data_size();
        if n == 0 || self.data.is_null() {
            return &[];
        }
        // SAFETY: per the caller.
        unsafe { std::slice::from_raw_parts(self.data, n) }
    }
}

/// The dtype as the 8 bytes of an Any payload (code, bits, lanes, zero padding).
pub fn dtype_word(d: DLDataType) -> u64 {
    d.code as u64 | (d.bits as u64) << 8 | (d.lanes as u64) << 16
}

/// The error of a visitor's or mutator's entry called on another thread than the one its
/// traversal runs on (their walk state is that thread's).
pub(crate) fn other_thread_error(what: &str) -> Error {
    Error::runtime_error(format!(
        "{what}: called from a thread other than the one running its traversal; a structural \
         visitor or mutator is used only on its traversal's thread"
    ))
}

/// A raw pointer usable from the `Send + Sync` callback closures handed to custom hooks; the
/// pointee is only touched on the thread that runs the walk, while it runs (checked). Also the
/// re-entry of the dataclass engines (`dataclass.rs`) and of `ffi.ReprPrint` (`repr.rs`). The
/// owner keeps the pointee alive until `clear`, and holds none of its cells borrowed across the
/// callbacks.
pub(crate) struct WalkRef<T> {
    ptr: std::sync::atomic::AtomicPtr<T>,
    thread: usize,
}

// SAFETY: the pointer is dereferenced only on `thread`, checked at each use.
unsafe impl<T> Send for WalkRef<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for WalkRef<T> {}

impl<T> WalkRef<T> {
    pub(crate) fn new(p: *const T) -> Self {
        WalkRef {
            ptr: std::sync::atomic::AtomicPtr::new(p as *mut T),
            thread: crate::thread_token(),
        }
    }

    /// The walk, while it runs on this thread; None otherwise.
    pub(crate) fn live(&self) -> Option<&T> {
        let p = self.ptr.load(std::sync::atomic::Ordering::Acquire);
        if p.is_null() || crate::thread_token() != self.thread {
            return None;
        }
        // SAFETY: non-NULL only while the walk that owns the pointee runs on this thread.
        Some(unsafe { &*p })
    }

    /// Whether the walk is still running (on any thread).
    pub(crate) fn running(&self) -> bool {
        !self
            .ptr
            .load(std::sync::atomic::Ordering::Acquire)
            .is_null()
    }

    /// The walk, while it runs on this thread.
    pub(crate) fn get(&self, what: &str) -> Result<&T> {
        self.live().ok_or_else(|| {
            Error::runtime_error(format!(
                "{what}: the callback was called outside the traversal that created it"
            ))
        })
    }

    /// Marks the walk finished.
    pub(crate) fn clear(&self) {
        self.ptr
            .store(std::ptr::null_mut(), std::sync::atomic::Ordering::Release);
    }
}

/// The region entered for a definition field or a hook's callback request, given the current
/// one: inside a pattern region everything stays a pattern.
pub(crate) fn enter_region(current: i32, requested: i32) -> i32 {
    if current == kTVMFFIDefRegionKindPattern {
        kTVMFFIDefRegionKindPattern
    } else {
        requested
    }
}

/// The region a field's flags ask for (`SEqHashDefSimple` or `SEqHashDefPattern`), if any.
pub(crate) fn field_region(flags: i64) -> Option<i32> {
    if flags & kTVMFFIFieldFlagBitMaskSEqHashDefSimple != 0 {
        Some(kTVMFFIDefRegionKindSimple)
    } else if flags & kTVMFFIFieldFlagBitMaskSEqHashDefPattern != 0 {
        Some(kTVMFFIDefRegionKindPattern)
    } else {
        None
    }
}

/// Enters `requested` (`kTVMFFIDefRegionKindNone` keeps the current region) and returns the
/// region to restore afterwards.
pub(crate) fn push_region(region: &std::cell::Cell<i32>, requested: i32) -> i32 {
    let saved = region.get();
    let requested = if requested == kTVMFFIDefRegionKindNone {
        saved
    } else {
        requested
    };
    region.set(enter_region(saved, requested));
    saved
}

/// The callback a walk hands to custom hooks (`__s_equal__`, `__s_hash__`): made on first use
/// around a [`WalkRef`] back to the walk, reused for the rest of the walk, and disarmed when
/// the walk ends (dropping this), so a hook that keeps the callback gets an error, not a
/// dangling walk.
pub(crate) struct HookCallback<E> {
    function: std::cell::RefCell<Option<Function>>,
    walk: std::cell::RefCell<Option<std::sync::Arc<WalkRef<E>>>>,
}

impl<E> HookCallback<E> {
    pub(crate) fn new() -> Self {
        HookCallback {
            function: std::cell::RefCell::new(None),
            walk: std::cell::RefCell::new(None),
        }
    }

    /// The callback of `engine` (the walk that owns this), built by `make` on first use from
    /// the back-reference it must resolve the walk through.
    pub(crate) fn get(
        &self,
        engine: &E,
        make: impl FnOnce(std::sync::Arc<WalkRef<E>>) -> Function,
    ) -> Function {
        if let Some(f) = self.function.borrow().as_ref() {
            return f.clone();
        }
        let walk = std::sync::Arc::new(WalkRef::new(engine as *const E));
        *self.walk.borrow_mut() = Some(walk.clone());
        let f = make(walk);
        *self.function.borrow_mut() = Some(f.clone());
        f
    }

    /// Disarms the callback: the walk has ended.
    pub(crate) fn finish(&self) {
        if let Some(w) = self.walk.borrow().as_ref() {
            w.clear();
        }
    }
}

impl<E> Drop for HookCallback<E> {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::FrameStack;
    use std::rc::Rc;

    #[test]
    fn frame_stack_is_a_stack_past_its_inline_frames_and_drops_each_frame_once() {
        let token = Rc::new(());
        let mut s = FrameStack::new();
        assert!(s.is_empty() && s.last_mut().is_none() && s.pop().is_none());
        for i in 0..20 {
            s.push((i, token.clone()));
            assert_eq!(s.last_mut().map(|f| f.0), Some(i));
        }
        assert_eq!(Rc::strong_count(&token), 21);
        for i in (5..20).rev() {
            assert_eq!(s.pop().map(|f| f.0), Some(i));
        }
        assert_eq!(Rc::strong_count(&token), 6);
        s.push((99, token.clone()));
        assert_eq!(s.last_mut().map(|f| f.0), Some(99));
        drop(s);
        assert_eq!(Rc::strong_count(&token), 1);
    }
}
