//! `FlatMap`: a hash map kept in one `Vec` (open addressing, linear probing, backward-shift
//! deletion), for tables that live as long as the process.
//!
//! Rationale: valgrind's memcheck, run with its defaults as users run it, reports at exit every
//! block that is only pointed at from its middle as "possibly lost", together with all it holds.
//! std's `HashMap` keeps one buffer and points at the middle of it (its control bytes), so a
//! `HashMap` in a static made hundreds of such records in every program. A `Vec` points at the
//! start of its buffer. A `BTreeMap` does too, but costs 2-4x a hash lookup once it holds
//! thousands of entries (the allocator's live blocks), so the hot tables use this instead.

use std::borrow::Borrow;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher, Hash};

/// A hash map in one `Vec` of slots; `S` hashes the keys (SipHash by default).
pub struct FlatMap<K, V, S = BuildHasherDefault<DefaultHasher>> {
    /// Empty or a power of two long; at most half full.
    slots: Vec<Option<(K, V)>>,
    len: usize,
    hasher: S,
}

impl<K, V, S: Default> Default for FlatMap<K, V, S> {
    fn default() -> Self {
        FlatMap {
            slots: Vec::new(),
            len: 0,
            hasher: S::default(),
        }
    }
}

impl<K: Hash + Eq, V, S: BuildHasher + Default> FlatMap<K, V, S> {
    /// An empty map (allocates on the first insert).
    pub fn new() -> Self {
        Self::default()
    }
}

impl<K: Hash + Eq, V, S: BuildHasher> FlatMap<K, V, S> {
    /// The number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn home<Q: Hash + ?Sized>(&self, key: &Q) -> usize {
        // the high bits: hashers such as a multiplicative one put their entropy there
        let bits = self.slots.len().trailing_zeros();
        (self.hasher.hash_one(key) >> (64 - bits)) as usize
    }

    /// The slot holding `key`, if any.
    fn find<Q>(&self, key: &Q) -> Option<usize>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if self.len == 0 {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            match &self.slots[i] {
                None => return None,
                Some((k, _)) if k.borrow() == key => return Some(i),
                Some(_) => i = (i + 1) & mask,
            }
        }
    }

    /// The value of `key`.
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let i = self.find(key)?;
        self.slots[i].as_ref().map(|(_, v)| v)
    }

    /// The value of `key`, mutably.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let i = self.find(key)?;
        self.slots[i].as_mut().map(|(_, v)| v)
    }

    /// Whether `key` is present.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.find(key).is_some()
    }

    /// Inserts `key` -> `value`; returns the value it replaced.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        if let Some(i) = self.find(&key) {
            let slot = self.slots[i].as_mut().expect("found slot is full");
            return Some(std::mem::replace(&mut slot.1, value));
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(&key);
        while self.slots[i].is_some() {
            i = (i + 1) & mask;
        }
        self.slots[i] = Some((key, value));
        self.len += 1;
        None
    }

    fn grow(&mut self) {
        let cap = (self.slots.len() * 2).max(16);
        let old = std::mem::replace(&mut self.slots, (0..cap).map(|_| None).collect());
        let mask = cap - 1;
        for (k, v) in old.into_iter().flatten() {
            let mut i = self.home(&k);
            while self.slots[i].is_some() {
                i = (i + 1) & mask;
            }
            self.slots[i] = Some((k, v));
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut hole = self.find(key)?;
        let (_, value) = self.slots[hole].take().expect("found slot is full");
        self.len -= 1;
        // Backward shift: pull later entries of the probe run into the hole when their home
        // slot does not lie (cyclically) after the hole, so that every entry stays reachable
        // from its home slot without tombstones.
        let mask = self.slots.len() - 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let home = match &self.slots[j] {
                None => break,
                Some((k, _)) => self.home(k),
            };
            let stays = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !stays {
                self.slots[hole] = self.slots[j].take();
                hole = j;
            }
        }
        Some(value)
    }

    /// The entries, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.slots.iter().flatten().map(|(k, v)| (k, v))
    }

    /// The keys, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.iter().map(|(k, _)| k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn agrees_with_std_hash_map_under_random_churn() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for keys in [8u64, 100, 5000] {
            let (mut ours, mut std) = (FlatMap::<u64, u64>::new(), HashMap::new());
            for step in 0..60_000u64 {
                let k = rnd() % keys;
                match rnd() % 4 {
                    0 | 1 => assert_eq!(ours.insert(k, step), std.insert(k, step)),
                    2 => assert_eq!(ours.remove(&k), std.remove(&k)),
                    _ => assert_eq!(ours.get(&k), std.get(&k)),
                }
                assert_eq!(ours.len(), std.len());
            }
            for k in 0..keys {
                assert_eq!(ours.get(&k), std.get(&k), "key {k}");
            }
            let mut all: Vec<_> = ours.iter().map(|(k, v)| (*k, *v)).collect();
            all.sort();
            let mut want: Vec<_> = std.into_iter().collect();
            want.sort();
            assert_eq!(all, want);
        }
    }

    #[test]
    fn string_keys_are_looked_up_by_str() {
        let mut m: FlatMap<Box<str>, i32> = FlatMap::new();
        assert!(m.get("a").is_none() && m.remove("a").is_none() && m.is_empty());
        m.insert("ffi.Array".into(), 1);
        m.insert("ffi.Map".into(), 2);
        assert_eq!(m.insert("ffi.Array".into(), 3), Some(1));
        assert_eq!(
            (m.get("ffi.Array"), m.get("ffi.Map"), m.len()),
            (Some(&3), Some(&2), 2)
        );
        *m.get_mut("ffi.Map").unwrap() += 10;
        assert_eq!(m.remove("ffi.Map"), Some(12));
        assert!(!m.contains_key("ffi.Map") && m.contains_key("ffi.Array"));
        assert_eq!(m.keys().map(|k| &**k).collect::<Vec<_>>(), ["ffi.Array"]);
    }
}
