//! `ffi.Map` (72, immutable by value, copy-on-write) and `ffi.Dict` (76, mutable in place): the
//! typed handles over the shared storage of `map_base` (spec §2.4, §8).
//!
//! Rationale: the two types differ only in how an update reaches the holders. A Map update copies
//! the storage unless the handle is the only reference (and replaces the handle when the storage
//! grows), so a borrowed Map never changes and may lend views of its keys and values. A Dict is
//! updated in place, switching the object to new storage when it grows, so every holder (Python,
//! C++, Rust) sees the change; its Rust API therefore returns owned copies only.

use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

use crate::abi::{kTVMFFIDict, kTVMFFIMap};
use crate::any::{Any, AnyView};
use crate::error::{Error, Result};
use crate::map_base::{new_small, Inserted, KvPair, MapBase, RawMap, SMALL_INIT};
use crate::object::{ObjectRef, ObjectType, INITIAL_REF_COUNT};
use crate::seq::container_lock;

/// Most nested key lookups tracked per thread; deeper nesting refuses every Dict mutation.
const MAX_TRACKED_LOOKUPS: usize = 16;

thread_local! {
    /// Dicts whose key lookup (which may call `__any_hash__` / `__any_equal__` hooks, i.e. user
    /// code) is running on this thread, innermost last; no destructor (checklist 13).
    static LOOKUPS: Cell<([usize; MAX_TRACKED_LOOKUPS], usize)> =
        const { Cell::new(([0; MAX_TRACKED_LOOKUPS], 0)) };
}

/// Marks a dict as being searched on this thread until dropped. A key hook that mutated the
/// dict being searched would free the keys and storage the search is reading.
pub struct LookupGuard(());

impl LookupGuard {
    /// Marks `map` (a Dict or Map object) as being searched.
    pub fn enter(map: *const MapBase) -> LookupGuard {
        LOOKUPS.with(|c| {
            let (mut stack, depth) = c.get();
            if depth < MAX_TRACKED_LOOKUPS {
                stack[depth] = map as usize;
            }
            c.set((stack, depth + 1));
        });
        LookupGuard(())
    }

    /// A RuntimeError when a lookup of `map` is running on this thread (mutating it now would
    /// pull the storage from under that lookup).
    pub fn check_mutable(map: *const MapBase, op: &str) -> Result<()> {
        let busy = LOOKUPS.with(|c| {
            let (stack, depth) = c.get();
            depth > MAX_TRACKED_LOOKUPS || stack[..depth].contains(&(map as usize))
        });
        if busy {
            return Err(Error::runtime_error(format!(
                "ffi.Dict {op}: the dict is being searched (a key's __any_hash__ / __any_equal__ \
                 hook tried to modify it)"
            )));
        }
        Ok(())
    }
}

impl LookupGuard {
    /// Runs `f`, which releases values a finished update of `map` took out (a replaced value,
    /// an erased pair), with `map`'s innermost search mark lifted: the search is over, and a
    /// released value's destructor may use the dict again (else it would be told a key hook
    /// was searching it). Any other search of `map` on the thread was refused the update.
    pub(crate) fn releasing(map: *const MapBase, f: impl FnOnce()) {
        let lifted = LOOKUPS.with(|c| {
            let (mut stack, depth) = c.get();
            let top = depth.min(MAX_TRACKED_LOOKUPS);
            let i = stack[..top].iter().rposition(|&m| m == map as usize)?;
            stack[i] = 0;
            c.set((stack, depth));
            Some(i)
        });
        struct Restore(Option<usize>, usize);
        impl Drop for Restore {
            fn drop(&mut self) {
                if let Some(i) = self.0 {
                    LOOKUPS.with(|c| {
                        let (mut stack, depth) = c.get();
                        stack[i] = self.1;
                        c.set((stack, depth));
                    });
                }
            }
        }
        let _restore = Restore(lifted, map as usize);
        f();
    }
}

impl Drop for LookupGuard {
    fn drop(&mut self) {
        LOOKUPS.with(|c| {
            let (stack, depth) = c.get();
            c.set((stack, depth.saturating_sub(1)));
        });
    }
}

macro_rules! map_kind {
    ($(#[$doc:meta])* $obj:ident, $key:literal, $index:ident) => {
        $(#[$doc])*
        #[repr(transparent)]
        pub struct $obj(MapBase);

        // SAFETY: transparent over the repr(C) map base; fixed static index.
        unsafe impl ObjectType for $obj {
            const TYPE_KEY: &'static str = $key;
            #[inline]
            fn type_index() -> i32 {
                $index
            }
            #[inline]
            fn is_instance(type_index: i32) -> bool {
                type_index == $index
            }
        }

        impl Deref for $obj {
            type Target = MapBase;
            #[inline]
            fn deref(&self) -> &MapBase {
                &self.0
            }
        }

        impl ObjectRef<$obj> {
            /// The storage, for the raw operations.
            #[inline]
            fn raw_map(&self) -> RawMap {
                // SAFETY: we hold a reference; the pointer carries the whole allocation.
                unsafe { RawMap::from_ptr(self.as_ptr() as *mut MapBase) }
            }

            /// This container's lock (see `seq::container_lock`).
            #[inline]
            fn lock(&self) -> parking_lot::ReentrantMutexGuard<'static, ()> {
                container_lock(self.as_raw())
            }

            /// Number of entries.
            #[inline]
            pub fn len(&self) -> usize {
                let _g = self.lock();
                self.raw_map().size() as usize
            }

            /// Whether there are no entries.
            #[inline]
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// A new, empty container (small layout, room for 2 entries).
            pub fn new() -> Self {
                from_base(new_small($index, SMALL_INIT))
            }

            /// The storage layout: `(small, slots)` (`slots` without the tag bit).
            pub fn layout(&self) -> (bool, u64) {
                let _g = self.lock();
                let m = self.raw_map();
                (m.is_small(), m.num_slots())
            }

            /// Whether `key` is present.
            pub fn contains_key(&self, key: AnyView<'_>) -> Result<bool> {
                let _g = self.lock();
                let m = self.raw_map();
                let _l = LookupGuard::enter(m.as_ptr());
                Ok(m.find(key.raw())?.is_some())
            }
        }

        impl Default for ObjectRef<$obj> {
            fn default() -> Self {
                Self::new()
            }
        }
    };
}

map_kind!(
    /// Payload of `ffi.Map`.
    MapObj, "ffi.Map", kTVMFFIMap
);
map_kind!(
    /// Payload of `ffi.Dict`.
    DictObj, "ffi.Dict", kTVMFFIDict
);

/// Owning handle to an `ffi.Map` (copy-on-write).
pub type Map = ObjectRef<MapObj>;
/// Owning handle to an `ffi.Dict` (shared, mutable in place).
pub type Dict = ObjectRef<DictObj>;

/// Re-types a fresh storage object as the kind its header says.
fn from_base<T: ObjectType>(obj: ObjectRef<MapBase>) -> ObjectRef<T> {
    debug_assert!(T::is_instance(obj.type_index()));
    // SAFETY: MapObj/DictObj are transparent over MapBase and the header carries T's index.
    unsafe { ObjectRef::from_raw_owned(NonNull::new_unchecked(obj.into_raw() as *mut T)) }
}

fn pair(key: Any, value: Any) -> KvPair {
    KvPair {
        key: key.into_raw(),
        value: value.into_raw(),
    }
}

/// Iterator over the borrowed entries of a Map, in the official iteration order.
pub struct MapIter<'a> {
    map: RawMap,
    pos: u64,
    _borrow: PhantomData<&'a Map>,
}

impl<'a> Iterator for MapIter<'a> {
    type Item = (AnyView<'a>, AnyView<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos == self.map.end() {
            return None;
        }
        let kv = self.map.kv_at(self.pos);
        self.pos = self.map.advance(self.pos);
        // SAFETY: a borrowed Map is not mutated (copy-on-write), so the entry lives for 'a.
        unsafe { Some((AnyView::from_raw((*kv).key), AnyView::from_raw((*kv).value))) }
    }
}

impl ObjectRef<MapObj> {
    /// The value of `key`, borrowed.
    pub fn get(&self, key: AnyView<'_>) -> Result<Option<AnyView<'_>>> {
        let m = self.raw_map();
        Ok(m.find(key.raw())?.map(|pos| {
            // SAFETY: a valid position of a map that stays unchanged while borrowed.
            unsafe { AnyView::from_raw((*m.kv_at(pos)).value) }
        }))
    }

    /// The value of a string key, borrowed.
    pub fn get_str(&self, key: &str) -> Result<Option<AnyView<'_>>> {
        let k = Any::from(key);
        self.get(k.as_view())
    }

    /// The entries in iteration order (insertion order, as the official Map).
    pub fn iter(&self) -> MapIter<'_> {
        let map = self.raw_map();
        MapIter {
            map,
            pos: map.begin(),
            _borrow: PhantomData,
        }
    }

    /// Makes this handle the only reference to its storage (copying when shared).
    fn make_unique(&mut self) {
        if self.header().combined_ref_count.load(Ordering::Acquire) != INITIAL_REF_COUNT {
            *self = from_base(self.raw_map().copy());
        }
    }

    /// Sets `key` to `value` (copy-on-write; the handle may move to new storage).
    pub fn insert(&mut self, key: Any, value: Any) -> Result<()> {
        self.make_unique();
        if let Inserted::Grown(g) = self.raw_map().insert(pair(key, value))? {
            *self = from_base(g);
        }
        Ok(())
    }

    /// Removes `key` (copy-on-write); whether it was present.
    pub fn remove(&mut self, key: AnyView<'_>) -> Result<bool> {
        self.make_unique();
        self.raw_map().erase(key.raw())
    }

    /// Replaces the content by an empty map.
    pub fn clear(&mut self) {
        *self = Map::new();
    }

    /// A map built by inserting the pairs in order (a later duplicate key overwrites).
    pub fn from_pairs(pairs: impl IntoIterator<Item = (Any, Any)>) -> Result<Map> {
        let mut m = Map::new();
        for (k, v) in pairs {
            m.insert(k, v)?;
        }
        Ok(m)
    }

    /// A Map built as the C++ `Map(first, last)` constructor builds one (`CreateFromRange`):
    /// fewer than 4 pairs are inserted into a small map, 4 or more into a dense table sized
    /// for all of them, so that a repeated key ends where the official constructor puts it
    /// (last, in the dense table). The JSON parser builds its objects this way; `from_pairs`
    /// is `ffi.Map`'s insertion one pair at a time.
    pub fn from_range(pairs: Vec<(Any, Any)>) -> Result<Map> {
        let n = pairs.len() as u64;
        if n < crate::map_base::SMALL_MAX {
            return Map::from_pairs(pairs);
        }
        let (shift, slots) = crate::map_base::table_size(n);
        let mut m = crate::map_base::new_dense(kTVMFFIMap, shift, slots);
        for (k, v) in pairs {
            if let Inserted::Grown(g) = RawMap::of_owned(&m).insert(pair(k, v))? {
                m = g;
            }
        }
        Ok(from_base(m))
    }

    /// Owned copies of the entries, in iteration order.
    pub fn to_vec(&self) -> Vec<(Any, Any)> {
        self.iter().map(|(k, v)| (owned(k), owned(v))).collect()
    }
}

/// A new reference to a stored value (stored values are always owned kinds).
fn owned(v: AnyView<'_>) -> Any {
    // SAFETY: map entries are owned values; the clone takes its own reference.
    unsafe { Any::from_raw(crate::map_base::clone_raw(v.raw())) }
}

impl ObjectRef<DictObj> {
    /// An owned copy of the value of `key`.
    pub fn get(&self, key: AnyView<'_>) -> Result<Option<Any>> {
        let _g = self.lock();
        let m = self.raw_map();
        let _l = LookupGuard::enter(m.as_ptr());
        Ok(m.find(key.raw())?.map(|pos| {
            // SAFETY: a valid position; the value is copied before anything can change.
            owned(unsafe { AnyView::from_raw((*m.kv_at(pos)).value) })
        }))
    }

    /// Sets `key` to `value` in place (every holder sees the change).
    pub fn insert(&self, key: Any, value: Any) -> Result<()> {
        let _g = self.lock();
        let m = self.raw_map();
        LookupGuard::check_mutable(m.as_ptr(), "insert")?;
        let _l = LookupGuard::enter(m.as_ptr());
        if let Inserted::Grown(g) = m.insert(pair(key, value))? {
            m.inplace_switch_to(g);
        }
        Ok(())
    }

    /// Removes `key` in place; whether it was present.
    pub fn remove(&self, key: AnyView<'_>) -> Result<bool> {
        let _g = self.lock();
        let m = self.raw_map();
        LookupGuard::check_mutable(m.as_ptr(), "remove")?;
        let _l = LookupGuard::enter(m.as_ptr());
        m.erase(key.raw())
    }

    /// Drops every entry in place (the layout and capacity stay). A RuntimeError when called
    /// from a key hook of a lookup of this dict (see [`LookupGuard`]).
    pub fn clear(&self) -> Result<()> {
        let _g = self.lock();
        let m = self.raw_map();
        LookupGuard::check_mutable(m.as_ptr(), "clear")?;
        m.clear();
        Ok(())
    }

    /// Owned copies of the entries, in iteration order.
    pub fn to_vec(&self) -> Vec<(Any, Any)> {
        let _g = self.lock();
        let m = self.raw_map();
        let mut out = Vec::with_capacity(m.size() as usize);
        let mut pos = m.begin();
        while pos != m.end() {
            // SAFETY: a valid position; the pair is copied before anything can change.
            let kv = unsafe { &*m.kv_at(pos) };
            // SAFETY: stored values are live while the pair is copied.
            out.push(unsafe {
                (
                    owned(AnyView::from_raw(kv.key)),
                    owned(AnyView::from_raw(kv.value)),
                )
            });
            pos = m.advance(pos);
        }
        out
    }

    /// A dict built by inserting the pairs in order.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (Any, Any)>) -> Result<Dict> {
        let d = Dict::new();
        for (k, v) in pairs {
            d.insert(k, v)?;
        }
        Ok(d)
    }
}

#[cfg(test)]
mod tests;
