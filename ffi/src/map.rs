//! `ffi.Map` (72, immutable by value, copy-on-write) and `ffi.Dict` (76, mutable in place): the
//! typed handles over the shared storage of `map_base` (spec §2.4, §8).
//!
//! Rationale: the two types differ only in how an update reaches the holders. A Map update copies
//! the storage unless the handle is the only reference (and replaces the handle when the storage
//! grows), so a borrowed Map never changes and may lend views of its keys and values. A Dict is
//! updated in place, switching the object to new storage when it grows, so every holder (Python,
//! C++, Rust) sees the change; its Rust API therefore returns owned copies only.

use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

use crate::abi::{kTVMFFIDict, kTVMFFIMap};
use crate::any::{Any, AnyView};
use crate::error::Result;
use crate::map_base::{new_small, Inserted, KvPair, MapBase, RawMap, SMALL_INIT};
use crate::object::{ObjectRef, ObjectType, INITIAL_REF_COUNT};

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

            /// Number of entries.
            #[inline]
            pub fn len(&self) -> usize {
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
                let m = self.raw_map();
                (m.is_small(), m.num_slots())
            }

            /// Whether `key` is present.
            pub fn contains_key(&self, key: AnyView<'_>) -> Result<bool> {
                Ok(self.raw_map().find(key.raw())?.is_some())
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
        let m = self.raw_map();
        Ok(m.find(key.raw())?.map(|pos| {
            // SAFETY: a valid position; the value is copied before anything can change.
            owned(unsafe { AnyView::from_raw((*m.kv_at(pos)).value) })
        }))
    }

    /// Sets `key` to `value` in place (every holder sees the change).
    pub fn insert(&self, key: Any, value: Any) -> Result<()> {
        let m = self.raw_map();
        if let Inserted::Grown(g) = m.insert(pair(key, value))? {
            m.inplace_switch_to(g);
        }
        Ok(())
    }

    /// Removes `key` in place; whether it was present.
    pub fn remove(&self, key: AnyView<'_>) -> Result<bool> {
        self.raw_map().erase(key.raw())
    }

    /// Drops every entry in place (the layout and capacity stay).
    pub fn clear(&self) {
        self.raw_map().clear();
    }

    /// Owned copies of the entries, in iteration order.
    pub fn to_vec(&self) -> Vec<(Any, Any)> {
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
