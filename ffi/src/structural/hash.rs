//! `ffi.StructuralHash(value, map_free_vars, skip_tensor_content)`: the official structural hash,
//! value for value: the same combine order, type-key-hash seeds, free-variable counters inside
//! definition regions, DAG node counters, order-independent map hashing (ties drop their
//! values), tensor content, and the `__s_hash__` hook with its callback.

use std::cell::{Cell, RefCell};
use std::mem::{ManuallyDrop, MaybeUninit};

use super::{
    catch_up, hook_in, key_hash_of, map_for_each, push_region, tensor_parts, type_facts, Buffers,
    FrameStack, HookCallback, Items, PtrMap, PtrSet, TypeFacts, SHALLOW_PATH,
};
use crate::abi::*;
use crate::any::{Any, AnyView};
use crate::bigint::BigIntObj;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::hash::{stable_hash_bytes, stable_hash_combine};
use crate::string::raw_any_bytes;

/// The `__s_hash__` attribute column.
pub const S_HASH_ATTR: &str = "__s_hash__";
static S_HASH_COLUMN: crate::type_table::ColumnCache = crate::type_table::ColumnCache::new();

/// The structural hash of `value` (the official `uint64` bits).
pub fn structural_hash(value: &Any, map_free_vars: bool, skip_tensor_content: bool) -> Result<u64> {
    structural_hash_value(value.clone(), map_free_vars, skip_tensor_content)
}

/// `structural_hash` of a value the caller gives up: the walk's first frame keeps it, with no
/// reference counting of its own (`ffi.StructuralHash`'s argument).
pub fn structural_hash_value(
    value: Any,
    map_free_vars: bool,
    skip_tensor_content: bool,
) -> Result<u64> {
    if let Some(h) = Hasher::leaf(&value) {
        // (what the walk's first step gives a leaf, without making the walker)
        return Ok(h);
    }
    let hasher = Hasher {
        region: Cell::new(if map_free_vars {
            kTVMFFIDefRegionKindPattern
        } else {
            kTVMFFIDefRegionKindNone
        }),
        skip_tensor_content,
        free_var_counter: Cell::new(0),
        graph_node_counter: Cell::new(0),
        memo: RefCell::new(Memo::default()),
        active: RefCell::new(PtrSet::default()),
        depth: Cell::new(0),
        hooks_run: Cell::new(0),
        callback: HookCallback::new(),
        buffers: Buffers::default(),
        map_buffers: Buffers::default(),
        generation: crate::type_table::layout_generation(),
    };
    let result = hasher.hash_any(value);
    hasher.callback.finish();
    result
}

/// Finished objects in the first `MEMO_INLINE` kept in place.
const MEMO_INLINE: usize = 8;

/// Finished objects and their hashes, each kept alive so that its address stays unique. The
/// first `MEMO_INLINE` are kept in place, searched in order: a small walk (one call hashing a
/// few objects) allocated and regrew a map for them, and dropped it, 13% of hashing a
/// 5-object value. The ninth moves them all into the map. The slots start uninitialised: a
/// walk of no object at all (`structural_hash(5)`) paid for filling and dropping them.
struct Memo {
    /// Slots `..len.min(MEMO_INLINE)` hold entries while `len <= MEMO_INLINE`.
    small: [MaybeUninit<(usize, u64, Any)>; MEMO_INLINE],
    len: usize,
    map: PtrMap<usize, (Any, u64)>,
}

impl Default for Memo {
    fn default() -> Self {
        Memo {
            small: [const { MaybeUninit::uninit() }; MEMO_INLINE],
            len: 0,
            map: PtrMap::default(),
        }
    }
}

impl Memo {
    /// The entries kept in place.
    #[inline]
    fn slots(&self) -> &[(usize, u64, Any)] {
        let n = if self.len <= MEMO_INLINE { self.len } else { 0 };
        // SAFETY: the first `n` slots are initialised (see `small`).
        unsafe { std::slice::from_raw_parts(self.small.as_ptr().cast(), n) }
    }

    /// The hash of object `obj`, when it was finished.
    #[inline]
    fn get(&self, obj: usize) -> Option<u64> {
        if self.len <= MEMO_INLINE {
            // (the latest entry of an object, as a map insert would keep)
            self.slots().iter().rev().find(|e| e.0 == obj).map(|e| e.1)
        } else {
            self.map.get(&obj).map(|e| e.1)
        }
    }

    /// Keeps object value `v`, finished with hash `h`.
    fn insert(&mut self, v: &Any, h: u64) {
        let obj = obj_ptr(v) as usize;
        if self.len < MEMO_INLINE {
            self.small[self.len].write((obj, h, v.clone()));
            self.len += 1;
            return;
        }
        if self.len == MEMO_INLINE {
            // (len first: should the map's growth panic, the moved entries are not dropped
            // twice)
            self.len += 1;
            for slot in &self.small {
                // SAFETY: the slots were initialised, and are read out once (len is past them).
                let (o, hh, keep) = unsafe { slot.assume_init_read() };
                self.map.insert(o, (keep, hh));
            }
        }
        self.map.insert(obj, (v.clone(), h));
    }
}

impl Drop for Memo {
    fn drop(&mut self) {
        let n = if self.len <= MEMO_INLINE { self.len } else { 0 };
        for slot in &mut self.small[..n] {
            // SAFETY: an initialised slot, dropped once.
            unsafe { slot.assume_init_drop() };
        }
    }
}

struct Hasher {
    /// `type_table::layout_generation()` when the walk began.
    generation: u64,
    region: Cell<i32>,
    skip_tensor_content: bool,
    free_var_counter: Cell<u32>,
    graph_node_counter: Cell<u32>,
    /// Finished objects (kept alive so their addresses stay unique) and their hashes.
    memo: RefCell<Memo>,
    /// Containers and objects on the current path (beyond `SHALLOW_PATH`), and the path length.
    active: RefCell<PtrSet<usize>>,
    depth: Cell<usize>,
    /// How many hooks (user code, which may change Lists) this walk has called.
    hooks_run: Cell<u64>,
    callback: HookCallback<Hasher>,
    buffers: Buffers,
    /// Spent entry buffers of finished map frames.
    map_buffers: Buffers<(u64, ManuallyDrop<Any>)>,
}

/// A map frame's entries, (order-independent key hash, value) sorted by key hash. A Map's
/// values are copied bit for bit, without references of their own (`owned` false: a Map never
/// changes, and the frame, or the one below, keeps it); a Dict's each take a reference (a hook
/// may change the Dict meanwhile).
struct MapItems {
    entries: Vec<(u64, ManuallyDrop<Any>)>,
    owned: bool,
}

impl MapItems {
    /// Releases owned entries, and hands the buffer back.
    fn into_buffer(mut self) -> Vec<(u64, ManuallyDrop<Any>)> {
        self.release();
        std::mem::take(&mut self.entries)
    }

    fn release(&mut self) {
        if std::mem::take(&mut self.owned) {
            for (_, v) in &mut self.entries {
                // SAFETY: an owned entry, released once (`owned` is now false).
                unsafe { ManuallyDrop::drop(v) };
            }
        }
    }
}

impl Drop for MapItems {
    fn drop(&mut self) {
        self.release();
    }
}

enum Step {
    Done(u64),
    Push(Frame),
}

enum Frame {
    Seq {
        obj: usize,
        hash: u64,
        items: Items,
        next: usize,
        /// `hooks_run` when `items` were read (see `Items::reread`).
        seen: u64,
    },
    Map {
        obj: usize,
        /// The map, when no frame below keeps it (see `Items`).
        keep: Option<Any>,
        hash: u64,
        /// (key hash, value) sorted by key hash: a tie group mixes in only the key hash, a
        /// unique key its hash and then its value's.
        items: MapItems,
        next: usize,
    },
    Fields(FieldsFrame),
}

struct FieldsFrame {
    value: Any,
    kind: i32,
    /// The region to restore once this (free-variable) object is finished.
    free_var_saved: Option<i32>,
    hash: u64,
    facts: &'static TypeFacts,
    next: usize,
    /// The region to restore after the field being hashed (a definition field).
    field_saved: Option<i32>,
}

enum Next {
    Child(Any),
    /// An Array, Map or Dict that the frame on top keeps (an element of its Array or of its
    /// copy of a List's elements, or a value of its map), to be begun without a reference of
    /// its own (`Items::Borrowed`, `begin_map`). A reference per nested container was a
    /// quarter of hashing deep nesting.
    Held(TVMFFIAny),
    Done(u64),
}

fn obj_ptr(v: &Any) -> *mut TVMFFIObject {
    // SAFETY: callers pass object values only.
    unsafe { v.raw().value.v_obj }
}

impl Hasher {
    fn hash_any(&self, root: Any) -> Result<u64> {
        let mut stack = FrameStack::new();
        let r = self.walk(root, &mut stack);
        if r.is_err() {
            // A hook may catch the error and hash on: leave the path this walk had entered, or
            // later walks would take its objects for a cycle.
            while let Some(frame) = stack.pop() {
                self.leave(match &frame {
                    Frame::Seq { obj, .. } | Frame::Map { obj, .. } => *obj,
                    Frame::Fields(f) => obj_ptr(&f.value) as usize,
                });
            }
        }
        r
    }

    fn walk(&self, root: Any, stack: &mut FrameStack<Frame>) -> Result<u64> {
        let mut result = match self.begin(root)? {
            Step::Done(h) => return Ok(h),
            Step::Push(f) => {
                stack.push(f);
                None
            }
        };
        loop {
            let top = stack.last_mut().expect("a frame is open");
            if let Some(h) = result.take() {
                self.accept(top, h);
            }
            match self.next(top)? {
                Next::Child(v) => match self.begin(v)? {
                    Step::Done(h) => result = Some(h),
                    Step::Push(f) => stack.push(f),
                },
                Next::Held(raw) => {
                    let f = self.begin_held(raw)?;
                    stack.push(f);
                }
                Next::Done(h) => {
                    match stack.pop() {
                        Some(Frame::Seq { items, .. }) => items.recycle(&self.buffers),
                        Some(Frame::Map { items, .. }) => self.recycle_map(items),
                        _ => {}
                    }
                    if stack.is_empty() {
                        return Ok(h);
                    }
                    result = Some(h);
                }
            }
        }
    }

    /// Marks a container or object as on the path. Only paths deeper than `SHALLOW_PATH` are
    /// tracked: a cycle makes the path grow without bound, so it is still caught, one loop in.
    fn enter(&self, v: &Any) -> Result<usize> {
        let p = obj_ptr(v) as usize;
        let depth = self.depth.get() + 1;
        self.depth.set(depth);
        if depth > SHALLOW_PATH && !super::path_insert(&mut self.active.borrow_mut(), p) {
            self.depth.set(depth - 1);
            return Err(Error::value_error(format!(
                "StructuralHash: cycle detected, a `{}` contains itself",
                v.as_view().type_key()
            )));
        }
        Ok(p)
    }

    fn leave(&self, p: usize) {
        let depth = self.depth.get();
        self.depth.set(depth - 1);
        if depth > SHALLOW_PATH {
            self.active.borrow_mut().remove(&p);
        }
    }

    /// The hash of a value that holds no other values (POD, strings, big integers), which
    /// needs no frame, memo or path entry: `begin`'s first case, and the containers' loops
    /// take such elements inline rather than one trip through `hash_any` each.
    #[inline(always)]
    fn leaf(v: &Any) -> Option<u64> {
        let raw = v.raw();
        let ti = raw.type_index;
        if ti < kTVMFFIStaticObjectBegin {
            // SAFETY: every value has 8 payload bytes (unused ones zero).
            let word = unsafe { raw.value.v_uint64 };
            return Some(match ti {
                // SAFETY: Float stores v_float64.
                kTVMFFIFloat if unsafe { raw.value.v_float64 }.is_nan() => {
                    stable_hash_combine(ti as u64, f64::NAN.to_bits())
                }
                kTVMFFISmallStr => stable_hash_combine(kTVMFFIStr as u64, word % 2_147_483_647),
                _ => stable_hash_combine(ti as u64, word),
            });
        }
        match ti {
            kTVMFFIBigInt => Some(bigint_hash(obj_ptr(v))),
            kTVMFFIStr | kTVMFFIBytes => {
                // SAFETY: a live string object.
                let bytes = unsafe { raw_any_bytes(raw) }.unwrap_or_default();
                Some(stable_hash_combine(ti as u64, stable_hash_bytes(bytes)))
            }
            _ => None,
        }
    }

    /// Takes the value: a frame keeps what it needs without another reference.
    fn begin(&self, v: Any) -> Result<Step> {
        if let Some(h) = Self::leaf(&v) {
            return Ok(Step::Done(h));
        }
        let raw = v.raw();
        let ti = raw.type_index;
        let obj = obj_ptr(&v);
        match ti {
            kTVMFFIArray | kTVMFFIList => {
                let p = self.enter(&v)?;
                let items = Items::of(v, &self.buffers);
                Ok(Step::Push(Frame::Seq {
                    obj: p,
                    hash: stable_hash_combine(key_hash_of(ti), items.len() as u64),
                    items,
                    next: 0,
                    seen: self.hooks_run.get(),
                }))
            }
            kTVMFFIMap | kTVMFFIDict => {
                let mut frame = self.begin_map(&v)?;
                if let Frame::Map { keep, .. } = &mut frame {
                    *keep = Some(v);
                }
                Ok(Step::Push(frame))
            }
            kTVMFFIShape => {
                let dims = v.get::<crate::shape::Shape>()?;
                let dims = dims.as_slice();
                let mut h = stable_hash_combine(key_hash_of(ti), dims.len() as u64);
                for &d in dims {
                    h = stable_hash_combine(h, d as u64);
                }
                Ok(Step::Done(h))
            }
            kTVMFFITensor => self.tensor_hash(obj).map(Step::Done),
            _ => self.begin_object(v),
        }
    }

    /// The frame of an Array, Map or Dict the frame below keeps (`Next::Held`).
    #[inline(never)]
    fn begin_held(&self, raw: TVMFFIAny) -> Result<Frame> {
        // SAFETY: a live container the frame below keeps; borrowed, never released here.
        let v = ManuallyDrop::new(unsafe { Any::from_raw(raw) });
        if raw.type_index != kTVMFFIArray {
            return self.begin_map(&v);
        }
        let p = self.enter(&v)?;
        let items = Items::Borrowed(obj_ptr(&v));
        Ok(Frame::Seq {
            obj: p,
            hash: stable_hash_combine(key_hash_of(kTVMFFIArray), items.len() as u64),
            items,
            next: 0,
            seen: 0,
        })
    }

    /// A finished map frame's entry buffer back to `map_buffers`. Out of line: inlined into the
    /// walk's loop, hashing a 200k-int Array took 1.06x the time.
    #[inline(never)]
    fn recycle_map(&self, items: MapItems) {
        self.map_buffers.give(items.into_buffer())
    }

    /// Whether a value that is not a leaf may be begun held by the frame that has it
    /// (`Next::Held`): the containers whose frames need no reference of their own.
    #[inline]
    fn holdable(ti: i32) -> bool {
        matches!(ti, kTVMFFIArray | kTVMFFIMap | kTVMFFIDict)
    }

    /// Element `i` of a sequence frame's items, not a leaf. Out of line, so that the leaves'
    /// loop stays small: with this branch inlined `leaf` was no longer inlined into the loop,
    /// and hashing a 200k-int Array took 1.18x the time (with both, 0.80x).
    #[inline(never)]
    fn seq_child(&self, items: &mut Items, i: usize) -> Result<Next> {
        let item = &items.as_slice()[i];
        if Self::holdable(item.type_index()) {
            // held by the sequence frame (its Array, or its copy of a List's items)
            return Ok(Next::Held(*item.raw()));
        }
        Ok(Next::Child(items.take(i)))
    }

    /// The frame of a Map or Dict `v`, which it does not keep (`keep` is `None`): `v` must
    /// outlive it (its address is on the path; see `MapItems` for the entries).
    fn begin_map(&self, v: &Any) -> Result<Frame> {
        let ti = v.type_index();
        let p = self.enter(v)?;
        // (entries whose key has no order-independent hash yet are left out)
        let mut size = 0u64;
        let owned = ti != kTVMFFIMap;
        let mut entries = self.map_buffers.take();
        // SAFETY: a live map object; the closure runs no foreign code.
        unsafe {
            map_for_each(obj_ptr(v), |k, val| {
                size += 1;
                if let Some(h) = self.order_independent_hash(k) {
                    entries.push((
                        h,
                        ManuallyDrop::new(if owned {
                            val.clone()
                        } else {
                            // a Map's value, borrowed for the frame (`MapItems`)
                            Any::from_raw(*val.raw())
                        }),
                    ));
                }
            })
        };
        // (unstable: a tie group mixes in only its key hash, so order within it is moot)
        entries.sort_unstable_by_key(|(h, _)| *h);
        let items = MapItems { entries, owned };
        Ok(Frame::Map {
            obj: p,
            keep: None,
            hash: stable_hash_combine(key_hash_of(ti), size),
            items,
            next: 0,
        })
    }

    fn tensor_hash(&self, obj: *mut TVMFFIObject) -> Result<u64> {
        // SAFETY: a live tensor object.
        let t = unsafe { tensor_parts(obj) };
        let mut h = stable_hash_combine(key_hash_of(kTVMFFITensor), t.shape.len() as u64);
        for &d in t.shape {
            h = stable_hash_combine(h, d as u64);
        }
        h = stable_hash_combine(h, super::dtype_word(t.dtype));
        if !self.skip_tensor_content {
            if t.device.device_type != kDLCPU {
                return Err(Error::internal(format!(
                    "Check failed: tensor.device().device_type == kDLCPU ({} vs. {}) : can only hash CPU tensor",
                    t.device.device_type, kDLCPU
                )));
            }
            if !t.contiguous {
                return Err(Error::internal(
                    "Check failed: (tensor.IsContiguous()) is false: Can only hash contiguous tensor",
                ));
            }
            // SAFETY: a contiguous CPU tensor's data covers its packed size.
            h = stable_hash_combine(h, stable_hash_bytes(unsafe { t.bytes() }));
        }
        Ok(h)
    }

    /// The hash a map key contributes independently of the order entries are visited in, or
    /// `None` for an object key not hashed yet (such keys are left out).
    fn order_independent_hash(&self, k: &Any) -> Option<u64> {
        let raw = k.raw();
        let ti = raw.type_index;
        if ti < kTVMFFIStaticObjectBegin {
            // SAFETY: every value has 8 payload bytes.
            let word = unsafe { raw.value.v_uint64 };
            return Some(if ti == kTVMFFISmallStr {
                // SAFETY: small strings keep their bytes inline.
                let bytes = unsafe { raw_any_bytes(raw) }.unwrap_or_default();
                stable_hash_combine(kTVMFFIStr as u64, stable_hash_bytes(bytes))
            } else {
                stable_hash_combine(ti as u64, word)
            });
        }
        match ti {
            kTVMFFIStr | kTVMFFIBytes => {
                // SAFETY: a live string object.
                let bytes = unsafe { raw_any_bytes(raw) }.unwrap_or_default();
                Some(stable_hash_combine(ti as u64, stable_hash_bytes(bytes)))
            }
            kTVMFFIBigInt => Some(bigint_hash(obj_ptr(k))),
            _ => self.memo.borrow().get(obj_ptr(k) as usize),
        }
    }

    fn begin_object(&self, v: Any) -> Result<Step> {
        let obj = obj_ptr(&v);
        // SAFETY: a live object.
        let ti = unsafe { (*obj).type_index };
        let facts = type_facts(ti)?;
        let kind = facts.kind;
        if let Some(h) = self.memo.borrow().get(obj as usize) {
            return Ok(Step::Done(h));
        }
        self.enter(&v)?;
        let free_var_saved = (kind == kTVMFFISEqHashKindFreeVar).then(|| {
            let saved = self.region.get();
            if saved == kTVMFFIDefRegionKindSimple {
                self.region.set(kTVMFFIDefRegionKindNone);
            }
            saved
        });
        let init = facts.key_hash;
        let hook = match hook_in(&S_HASH_COLUMN, S_HASH_ATTR, ti) {
            Ok(hook) => hook,
            Err(e) => {
                self.leave(obj as usize);
                return Err(e);
            }
        };
        if let Some(hook) = hook {
            let h = self.call_hook(&hook, &v, init);
            if h.is_err() {
                self.leave(obj as usize);
            }
            let h = h?;
            return Ok(Step::Done(self.finish_object(&v, kind, free_var_saved, h)));
        }
        if facts.fields.is_empty() {
            return Ok(Step::Done(self.finish_object(
                &v,
                kind,
                free_var_saved,
                init,
            )));
        }
        Ok(Step::Push(Frame::Fields(FieldsFrame {
            value: v,
            kind,
            free_var_saved,
            hash: init,
            facts,
            next: 0,
            field_saved: None,
        })))
    }

    /// Free-variable and DAG-node mixing, then the memo entry.
    fn finish_object(&self, v: &Any, kind: i32, free_var_saved: Option<i32>, fields: u64) -> u64 {
        let obj = obj_ptr(v);
        let mut h = fields;
        if let Some(saved) = free_var_saved {
            self.region.set(saved);
            h = if saved != kTVMFFIDefRegionKindNone {
                let n = self.free_var_counter.get();
                self.free_var_counter.set(n.wrapping_add(1));
                stable_hash_combine(h, n as u64)
            } else {
                obj as u64
            };
        }
        if kind == kTVMFFISEqHashKindDAGNode {
            let n = self.graph_node_counter.get();
            self.graph_node_counter.set(n.wrapping_add(1));
            h = stable_hash_combine(h, n as u64);
        }
        self.leave(obj as usize);
        self.memo.borrow_mut().insert(v, h);
        h
    }

    fn next(&self, frame: &mut Frame) -> Result<Next> {
        match frame {
            Frame::Seq {
                obj,
                hash,
                items,
                next,
                ..
            } => {
                // (the slice read once: per element, the `Items` match cost 1.2x on long
                // Arrays of leaves)
                let slice = items.as_slice();
                let (mut i, mut h) = (*next, *hash);
                while i < slice.len() {
                    match Self::leaf(&slice[i]) {
                        Some(x) => h = stable_hash_combine(h, x),
                        None => break,
                    }
                    i += 1;
                }
                *hash = h;
                if i < slice.len() {
                    *next = i + 1;
                    return self.seq_child(items, i);
                }
                *next = i;
                self.leave(*obj);
                Ok(Next::Done(h))
            }
            Frame::Map {
                obj,
                hash,
                items,
                next,
                ..
            } => {
                let entries = &mut items.entries;
                while *next < entries.len() {
                    let (i, h) = (*next, entries[*next].0);
                    let mut k = i + 1;
                    while k < entries.len() && entries[k].0 == h {
                        k += 1;
                    }
                    *next = k;
                    *hash = stable_hash_combine(*hash, h);
                    if k == i + 1 {
                        let val: &Any = &entries[i].1;
                        match Self::leaf(val) {
                            Some(hv) => *hash = stable_hash_combine(*hash, hv),
                            None if Self::holdable(val.type_index()) => {
                                return Ok(Next::Held(*val.raw()))
                            }
                            None if items.owned => {
                                // moved out; the slot keeps None, whose release is nothing
                                return Ok(Next::Child(std::mem::take(&mut *entries[i].1)));
                            }
                            None => return Ok(Next::Child(val.clone())),
                        }
                    }
                }
                self.leave(*obj);
                Ok(Next::Done(*hash))
            }
            Frame::Fields(f) => {
                // SAFETY: the frame holds the object.
                unsafe {
                    catch_up(
                        &mut f.facts,
                        &mut f.next,
                        obj_ptr(&f.value),
                        self.generation,
                    )
                }?;
                if let Some(field) = f.facts.fields.get(f.next) {
                    f.next += 1;
                    // SAFETY: the object is live and its type has this field.
                    let value = unsafe { field.get(obj_ptr(&f.value)) }?;
                    if let Some(requested) = field.region {
                        f.field_saved = Some(push_region(&self.region, requested));
                    }
                    return Ok(Next::Child(value));
                }
                let h = self.finish_object(&f.value, f.kind, f.free_var_saved, f.hash);
                Ok(Next::Done(h))
            }
        }
    }

    fn accept(&self, frame: &mut Frame, child: u64) {
        match frame {
            Frame::Seq {
                hash, items, seen, ..
            } => {
                *hash = stable_hash_combine(*hash, child);
                if *seen != self.hooks_run.get() && items.is_copy() {
                    // a hook ran meanwhile: the List's elements not hashed yet are read again
                    items.reread();
                    *seen = self.hooks_run.get();
                }
            }
            Frame::Map { hash, .. } => {
                // (a Dict's entries are hashed as they were when its frame began, as in the
                // official walk, which collects and sorts them first)
                *hash = stable_hash_combine(*hash, child);
            }
            Frame::Fields(f) => {
                f.hash = stable_hash_combine(f.hash, child);
                if let Some(saved) = f.field_saved.take() {
                    self.region.set(saved);
                }
            }
        }
    }

    fn call_hook(&self, hook: &Function, v: &Any, init: u64) -> Result<u64> {
        self.hooks_run.set(self.hooks_run.get() + 1);
        let callback = self.callback();
        let init = Any::from(init as i64);
        let cb = Any::from(callback);
        let r = hook.call(&[v.as_view(), init.as_view(), cb.as_view()])?;
        match r.as_view().as_i64() {
            // (an int64 as the official library reads it: Bool converts too)
            Some(h) if matches!(r.type_index(), kTVMFFIInt | kTVMFFIBool) => Ok(h as u64),
            // (the official conversion's message)
            _ => Err(Error::type_error(format!(
                "Cannot convert from type `{}` to `int`",
                crate::function::mismatch_type_key(&r.as_view())
            ))),
        }
    }

    /// The `(value, init_hash, def_region_kind) -> int` callback handed to `__s_hash__` hooks.
    fn callback(&self) -> Function {
        self.callback.get(self, |walk| {
            Function::from_packed(move |args: &[AnyView<'_>]| -> Result<Any> {
                let h = walk.get("StructuralHash callback")?;
                let (val, init, kind) = callback_args(args)?;
                super::stack::check("StructuralHash")?;
                let saved = push_region(&h.region, kind);
                let r = h.hash_any(val);
                h.region.set(saved);
                Ok(Any::from(stable_hash_combine(init, r?) as i64))
            })
        })
    }
}

fn callback_args(args: &[AnyView<'_>]) -> Result<(Any, u64, i32)> {
    let [val, init, kind] = args else {
        return Err(Error::type_error(format!(
            "StructuralHash callback: expected 3 arguments (value, init_hash, def_region_kind), got {}",
            args.len()
        )));
    };
    let init = init.as_i64().ok_or_else(|| {
        Error::type_error(format!(
            "StructuralHash callback: argument #1 must be an int, got `{}`",
            init.type_key()
        ))
    })?;
    let kind = kind.as_i64().ok_or_else(|| {
        Error::type_error(format!(
            "StructuralHash callback: argument #2 must be an int, got `{}`",
            kind.type_key()
        ))
    })?;
    Ok((val.to_owned()?, init as u64, kind as i32))
}

fn bigint_hash(obj: *mut TVMFFIObject) -> u64 {
    // SAFETY: a live BigInt object.
    let words = unsafe { (*(obj as *const BigIntObj)).words() };
    // SAFETY: the words are plain i64s, viewed as their bytes.
    let bytes = unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, words.len() * 8) };
    stable_hash_combine(kTVMFFIBigInt as u64, stable_hash_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::array_of;
    use crate::list::List;

    fn h(v: Any) -> u64 {
        structural_hash(&v, false, false).unwrap()
    }

    /// Values printed by the official library (tests/python_official/test_structural.py).
    #[test]
    fn official_values() {
        assert_eq!(h(Any::from(1i64)), 2654435835);
        assert_eq!(h(Any::from("abc")), 2660953131);
        assert_eq!(h(Any::from(array_of([1i64, 2, 3]))), 17457834911281713904);
    }

    #[test]
    fn small_and_heap_strings_agree() {
        let heap = Any::from(crate::string::Str::from_content(b"abc"));
        assert_eq!(h(heap), h(Any::from("abc")));
    }

    #[test]
    fn list_cycles_are_errors() {
        let l = List::new();
        l.push(Any::from(1i64));
        l.push(Any::from(l.clone()));
        let e = structural_hash(&Any::from(l.clone()), false, false).unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        l.clear();
    }

    #[test]
    fn deep_nesting_needs_no_stack() {
        let mut v = Any::from(1i64);
        for _ in 0..50_000 {
            v = Any::from(crate::list::List::from_vec(vec![v]));
        }
        let small = std::thread::Builder::new().stack_size(256 << 10);
        let (v, r) = small
            .spawn(move || {
                let r = structural_hash(&v, false, false).is_ok();
                (v, r)
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(r);
        let big = std::thread::Builder::new().stack_size(512 << 20);
        big.spawn(move || drop(v)).unwrap().join().unwrap();
    }
}
