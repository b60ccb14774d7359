//! `ffi.List` (75): a mutable sequence whose elements live in a separately allocated buffer with
//! a non-NULL `data_deleter` (spec §2.4); growth doubles the capacity, as the official List.
//!
//! Rationale: a list is mutated in place through any handle (Python, C++ and Rust see the same
//! object), so the Rust API never lends references into the buffer: reads return owned copies,
//! and every operation re-reads the cell, which foreign code may have changed in between.
//! The ABI has no lock, but `ListObj` is `Sync` and mutated through `&self`, so every Rust
//! operation holds the list's `seq::container_lock` (C and C++ callers keep the official
//! contract: no concurrent mutation).

use std::ptr;

use crate::abi::{kTVMFFIList, TVMFFIObject, TVMFFISeqCell};
use crate::any::{Any, AnyView, FromAny};
use crate::error::{Error, Result};
use crate::object::{new_object, ObjectRef, ObjectType};
use crate::seq::{alloc_any_buffer, container_lock, free_any_buffer, try_alloc_any_buffer, SeqObj};

/// Initial capacity of lists built from values (`ffi.List(...)`).
pub const LIST_INIT_CAPACITY: usize = 4;

/// Payload of `ffi.List`.
#[repr(transparent)]
pub struct ListObj(SeqObj);

// SAFETY: transparent over a repr(C) layout that starts with the header; fixed static index.
unsafe impl ObjectType for ListObj {
    const TYPE_KEY: &'static str = "ffi.List";
    #[inline]
    fn type_index() -> i32 {
        kTVMFFIList
    }
    #[inline]
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFIList
    }
}

// SAFETY: every Rust operation on the cell and buffer holds `container_lock` (C and C++ code
// keeps the ABI's contract: no concurrent mutation).
unsafe impl Send for ListObj {}
// SAFETY: as above.
unsafe impl Sync for ListObj {}

impl ListObj {
    fn cell(&self) -> *mut TVMFFISeqCell {
        self.0.cell()
    }

    /// This list's lock (see `seq::container_lock`): every method holds it while it touches the
    /// cell or the buffer, and drops removed elements only after releasing it.
    #[inline]
    fn lock(&self) -> parking_lot::ReentrantMutexGuard<'static, ()> {
        container_lock(self as *const ListObj as *const TVMFFIObject)
    }

    fn size(&self) -> i64 {
        // SAFETY: reading the live object's cell (callers hold the lock).
        unsafe { (*self.cell()).size }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        let _g = self.lock();
        self.0.len()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Allocated element slots.
    pub fn capacity(&self) -> usize {
        let _g = self.lock();
        self.0.capacity()
    }

    /// Moves the elements into a buffer of exactly `n` slots when `n` exceeds the capacity; a
    /// MemoryError (the list unchanged) when there is no such buffer.
    pub fn reserve(&self, n: i64) -> Result<()> {
        let _g = self.lock();
        let cell = self.cell();
        // SAFETY: the cell describes `size` initialised values; they are moved bitwise into the
        // new buffer, then the old buffer is released with its own deleter, as C++ does.
        unsafe {
            if n <= (*cell).capacity {
                return Ok(());
            }
            let fresh = try_alloc_any_buffer(n as usize)?;
            let size = (*cell).size as usize;
            if size > 0 {
                ptr::copy_nonoverlapping((*cell).data as *const Any, fresh as *mut Any, size);
            }
            match (*cell).data_deleter {
                Some(d) => d((*cell).data),
                None => (*cell).data_deleter = Some(free_any_buffer),
            }
            (*cell).data = fresh as *mut _;
            (*cell).capacity = n;
        }
        Ok(())
    }

    /// Grows (doubling, at least to fit) so that `extra` more elements fit (lock held).
    fn ensure_capacity(&self, extra: i64) {
        // SAFETY: reading the live object's cell.
        let (size, cap) = unsafe { ((*self.cell()).size, (*self.cell()).capacity) };
        if cap >= size + extra {
            return;
        }
        let n = (cap * 2).max(size + extra);
        if self.reserve(n).is_err() {
            // out of memory for a doubling: abort, as any allocation failure in Rust does
            std::alloc::handle_alloc_error(
                std::alloc::Layout::from_size_align((n as usize).saturating_mul(16), 8)
                    .unwrap_or(std::alloc::Layout::new::<u8>()),
            );
        }
    }

    /// Element `i` (official IndexError when out of range).
    pub fn at(&self, i: i64) -> Result<Any> {
        let _g = self.lock();
        self.0.at(i)
    }

    /// Element `i`, or `None` when out of range.
    pub fn get(&self, i: usize) -> Option<Any> {
        self.at(i64::try_from(i).ok()?).ok()
    }

    /// Replaces element `i`.
    pub fn set(&self, i: i64, value: Any) -> Result<()> {
        let old = {
            let _g = self.lock();
            let n = self.size();
            if i < 0 || i >= n {
                return Err(Error::index_error(format!("Index {i} out of bounds {n}")));
            }
            // SAFETY: in bounds; the old value is dropped after the slot holds the new one.
            unsafe { ptr::replace(self.0.data_ptr().add(i as usize), value) }
        };
        drop(old);
        Ok(())
    }

    /// Appends `value`.
    pub fn push(&self, value: Any) {
        let _g = self.lock();
        self.ensure_capacity(1);
        let cell = self.cell();
        // SAFETY: capacity now exceeds size; the slot past the end is free.
        unsafe {
            self.0.data_ptr().add((*cell).size as usize).write(value);
            (*cell).size += 1;
        }
    }

    /// Inserts `value` before position `i` (`0 <= i <= len`).
    pub fn insert(&self, i: i64, value: Any) -> Result<()> {
        let _g = self.lock();
        self.insert_many(i, std::iter::once(value), 1)
    }

    /// Inserts `count` values from `items` before position `i` (lock held).
    fn insert_many(&self, i: i64, items: impl Iterator<Item = Any>, count: i64) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        self.ensure_capacity(count);
        let size = self.size();
        if i < 0 || i > size {
            return Err(Error::index_error(format!(
                "Index {i} out of bounds [0, {size}]"
            )));
        }
        let cell = self.cell();
        // SAFETY: capacity fits size + count; the tail is moved right bitwise, then the gap is
        // filled and counted in.
        unsafe {
            let base = self.0.data_ptr();
            ptr::copy(
                base.add(i as usize),
                base.add((i + count) as usize),
                (size - i) as usize,
            );
            let mut at = base.add(i as usize);
            let mut written = 0;
            for v in items.take(count as usize) {
                at.write(v);
                at = at.add(1);
                written += 1;
            }
            assert_eq!(
                written, count,
                "ffi.List insert: iterator shorter than its count"
            );
            (*cell).size += count;
        }
        Ok(())
    }

    /// Moves elements `[first, last)` out (lock held); the caller drops them after unlocking.
    fn take_range(&self, first: i64, last: i64) -> Result<Vec<Any>> {
        if first == last {
            return Ok(Vec::new());
        }
        let size = self.size();
        if first < 0 || last > size || first >= last {
            return Err(Error::index_error(format!(
                "Erase range [{first}, {last}) out of bounds {size}"
            )));
        }
        let cell = self.cell();
        // SAFETY: the range is in bounds; values are moved out, the tail shifted left bitwise and
        // the size fixed before the removed values are dropped (their deleters may re-enter).
        Ok(unsafe {
            let base = self.0.data_ptr();
            let n = (last - first) as usize;
            let mut removed = Vec::with_capacity(n);
            removed.extend((0..n).map(|k| base.add(first as usize + k).read()));
            ptr::copy(
                base.add(last as usize),
                base.add(first as usize),
                (size - last) as usize,
            );
            (*cell).size -= n as i64;
            removed
        })
    }

    /// Removes elements `[first, last)`.
    pub fn erase_range(&self, first: i64, last: i64) -> Result<()> {
        let removed = {
            let _g = self.lock();
            self.take_range(first, last)?
        };
        drop(removed);
        Ok(())
    }

    /// Removes element `i`.
    pub fn remove(&self, i: i64) -> Result<()> {
        self.pop(i).map(drop)
    }

    /// Removes and returns element `i`.
    pub fn pop(&self, i: i64) -> Result<Any> {
        let _g = self.lock();
        let size = self.size();
        if i < 0 || i >= size {
            return Err(Error::index_error(format!(
                "Index {i} out of bounds {size}"
            )));
        }
        let mut removed = self.take_range(i, i + 1)?;
        Ok(removed.pop().expect("one element"))
    }

    /// Replaces `[first, last)` by the elements of `replacement` (which may be this list).
    pub fn replace_slice(&self, first: i64, last: i64, replacement: &ListObj) -> Result<()> {
        let rep = replacement.to_vec();
        let removed = {
            let _g = self.lock();
            let removed = self.take_range(first, last)?;
            let n = rep.len() as i64;
            self.insert_many(first, rep.into_iter(), n)?;
            removed
        };
        drop(removed);
        Ok(())
    }

    /// Reverses in place.
    pub fn reverse(&self) {
        let _g = self.lock();
        let n = self.size() as usize;
        if n > 1 {
            // SAFETY: n initialised values; no reference into the buffer escapes.
            unsafe { std::slice::from_raw_parts_mut(self.0.data_ptr(), n) }.reverse();
        }
    }

    /// Drops every element (from the back, after unlocking), keeping the buffer.
    pub fn clear(&self) {
        let mut removed = {
            let _g = self.lock();
            let n = self.size();
            self.take_range(0, n).unwrap_or_default()
        };
        while let Some(v) = removed.pop() {
            drop(v);
        }
    }

    /// Owned copies of the elements.
    pub fn to_vec(&self) -> Vec<Any> {
        let _g = self.lock();
        // SAFETY: the copy is made under the lock.
        unsafe { self.0.slice_unchecked() }.to_vec()
    }

    /// Iterates over owned copies, re-reading the list at every step.
    pub fn iter(&self) -> impl Iterator<Item = Any> + '_ {
        (0..).map_while(move |i| self.get(i))
    }

    /// Converts every element to `T`.
    pub fn to_vec_of<T: FromAny>(&self) -> Result<Vec<T>> {
        self.to_vec().iter().map(|v| v.get::<T>()).collect()
    }
}

/// Owning handle to an `ffi.List`.
pub type List = ObjectRef<ListObj>;

impl ObjectRef<ListObj> {
    /// An empty list with room for `capacity` elements (no buffer when 0).
    ///
    /// # Panics
    /// When `capacity * 16` bytes exceed `isize::MAX` ("capacity overflow", as
    /// `Vec::with_capacity`); when the allocator has no such block the process aborts. Use
    /// [`ListObj::reserve`] for a MemoryError instead.
    pub fn with_capacity(capacity: usize) -> List {
        let data = alloc_any_buffer(capacity);
        let header = TVMFFIObject::new::<ListObj>();
        let cell = TVMFFISeqCell {
            data: data as *mut _,
            size: 0,
            capacity: capacity as i64,
            data_deleter: Some(free_any_buffer),
        };
        new_object(ListObj(SeqObj::new(header, cell)))
    }

    /// An empty list with no buffer (as the C++ `List()` constructor).
    pub fn new() -> List {
        List::with_capacity(0)
    }

    /// A list holding `items`, capacity `max(4, len)` (as `ffi.List(...)`).
    pub fn from_vec(items: Vec<Any>) -> List {
        let l = List::with_capacity(items.len().max(LIST_INIT_CAPACITY));
        for v in items {
            l.push(v);
        }
        l
    }

    /// A list of owned copies of borrowed values.
    pub fn from_views(items: &[AnyView<'_>]) -> Result<List> {
        let l = List::with_capacity(items.len().max(LIST_INIT_CAPACITY));
        for v in items {
            l.push(v.to_owned()?);
        }
        Ok(l)
    }
}

impl FromIterator<Any> for List {
    fn from_iter<I: IntoIterator<Item = Any>>(iter: I) -> Self {
        List::from_vec(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(l: &List) -> Vec<i64> {
        l.to_vec_of::<i64>().unwrap()
    }

    fn list(v: &[i64]) -> List {
        v.iter().map(|&x| Any::from(x)).collect()
    }

    #[test]
    fn growth_follows_the_official_rule() {
        let l = list(&[1, 2, 3]);
        // SAFETY: reading the public cell.
        let cell = unsafe { &*l.cell() };
        assert_eq!((cell.size, cell.capacity), (3, 4));
        assert!(cell.data_deleter.is_some());
        assert_ne!(
            cell.data as usize,
            l.as_ptr() as usize + 56,
            "separate buffer"
        );
        l.push(Any::from(4i64));
        assert_eq!(l.capacity(), 4);
        l.push(Any::from(5i64));
        assert_eq!(l.capacity(), 8);
        assert_eq!(list(&[1, 2, 3, 4, 5, 6]).capacity(), 6);
        let e = List::new();
        assert_eq!(e.capacity(), 0);
        e.push(Any::from(1i64));
        assert_eq!(e.capacity(), 1);
        e.push(Any::from(1i64));
        assert_eq!(e.capacity(), 2);
        e.reserve(10).unwrap();
        assert_eq!(e.capacity(), 10);
        // a capacity no allocator has, or whose size overflows: MemoryError, list unchanged
        for n in [1i64 << 44, 1 << 62, i64::MAX] {
            let err = e.reserve(n).unwrap_err();
            assert_eq!(err.kind(), "MemoryError", "{n}");
            assert_eq!((e.capacity(), e.len()), (10, 2));
        }
    }

    #[test]
    fn edits() {
        let l = list(&[1, 2, 3, 4, 5]);
        l.insert(0, Any::from(0i64)).unwrap();
        l.insert(6, Any::from(6i64)).unwrap();
        assert_eq!(ints(&l), [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(
            l.insert(8, Any::none()).unwrap_err().message(),
            "Index 8 out of bounds [0, 7]"
        );
        assert_eq!(l.pop(0).unwrap().get::<i64>().unwrap(), 0);
        l.erase_range(1, 3).unwrap();
        assert_eq!(ints(&l), [1, 4, 5, 6]);
        assert_eq!(
            l.erase_range(3, 1).unwrap_err().message(),
            "Erase range [3, 1) out of bounds 4"
        );
        l.erase_range(2, 2).unwrap();
        l.set(0, Any::from(9i64)).unwrap();
        l.reverse();
        assert_eq!(ints(&l), [6, 5, 4, 9]);
        let same = l.clone();
        l.replace_slice(1, 3, &same).unwrap();
        assert_eq!(ints(&l), [6, 6, 5, 4, 9, 9]);
        l.remove(5).unwrap();
        assert_eq!(
            l.remove(5).unwrap_err().message(),
            "Index 5 out of bounds 5"
        );
        l.clear();
        assert!(l.is_empty());
    }

    #[test]
    fn elements_are_released() {
        let s = Any::from("a string long enough for the heap");
        let obj = s.as_view().as_object().unwrap();
        let l = List::from_vec(vec![s.clone(), s.clone(), s.clone()]);
        l.pop(1).unwrap();
        l.set(0, Any::none()).unwrap();
        assert_eq!(obj.strong_count(), 3);
        drop(l);
        assert_eq!(obj.strong_count(), 2);
    }
}
