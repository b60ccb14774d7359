//! `ffi.Array` (71): an immutable sequence whose elements live in place right after the 56-byte
//! object (`data = obj + 56`, `data_deleter = NULL`, capacity == size; spec §2.4).
//!
//! Rationale: arrays are shared by value between languages and never mutated through a shared
//! handle (C++ copies on write unless it holds the only reference), so Rust can lend `&[Any]`
//! views of the elements for as long as it holds the array.

use std::ops::Deref;
use std::ptr;

use crate::abi::{
    kTVMFFIArray, kTVMFFIByteArrayPtr, kTVMFFIObjectRValueRef, kTVMFFIRawStr,
    kTVMFFIStaticObjectBegin, TVMFFIAny, TVMFFIObject, TVMFFISeqCell,
};
use crate::any::{Any, AnyView, FromAny};
use crate::error::Result;
use crate::function::IntoAny;
use crate::object::{new_object_with_extra, ObjectRef, ObjectType};
use crate::seq::SeqObj;

/// Payload of `ffi.Array`.
#[repr(transparent)]
pub struct ArrayObj(SeqObj);

// SAFETY: transparent over a repr(C) layout that starts with the header; fixed static index.
unsafe impl ObjectType for ArrayObj {
    const TYPE_KEY: &'static str = "ffi.Array";
    #[inline]
    fn type_index() -> i32 {
        kTVMFFIArray
    }
    #[inline]
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFIArray
    }
}

// SAFETY: immutable while shared (see the module rationale); elements are thread-safe values.
unsafe impl Send for ArrayObj {}
// SAFETY: as above.
unsafe impl Sync for ArrayObj {}

impl Deref for ArrayObj {
    type Target = SeqObj;
    #[inline]
    fn deref(&self) -> &SeqObj {
        &self.0
    }
}

impl ArrayObj {
    /// The elements.
    #[inline]
    pub fn as_slice(&self) -> &[Any] {
        // SAFETY: arrays are not mutated while a reference to them is held.
        unsafe { self.0.slice_unchecked() }
    }

    /// Element `i`, borrowed.
    #[inline]
    pub fn get(&self, i: usize) -> Option<AnyView<'_>> {
        self.as_slice().get(i).map(Any::as_view)
    }

    /// Element `i` (negative or past the end: the official IndexError).
    pub fn at(&self, i: i64) -> Result<Any> {
        self.0.at(i)
    }

    /// Iterates over borrowed elements.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = AnyView<'_>> + '_ {
        self.as_slice().iter().map(Any::as_view)
    }
}

/// Owning handle to an `ffi.Array`.
pub type Array = ObjectRef<ArrayObj>;

impl ObjectRef<ArrayObj> {
    /// An array of `n` elements produced by `fill(i)`, written in place. `fill` may fail; the
    /// elements written so far are then released with the half-built array.
    fn build(n: usize, mut fill: impl FnMut(usize) -> Result<Any>) -> Result<Array> {
        let bytes = n
            .checked_mul(std::mem::size_of::<TVMFFIAny>())
            .expect("array length overflows usize");
        let header = TVMFFIObject::new::<ArrayObj>();
        let cell = TVMFFISeqCell {
            data: ptr::null_mut(),
            size: 0,
            capacity: n as i64,
            data_deleter: None,
        };
        let (arr, tail) = new_object_with_extra(ArrayObj(SeqObj::new(header, cell)), bytes);
        let cell = arr.0.cell();
        let slots = tail as *mut Any;
        // SAFETY: `tail` has room for n values and belongs to the new array.
        unsafe { (*cell).data = tail as *mut _ };
        for i in 0..n {
            match fill(i) {
                // SAFETY: slot i is within the capacity and not yet written.
                Ok(v) => unsafe { slots.add(i).write(v) },
                Err(e) => {
                    // SAFETY: exactly the i slots written so far are counted, so dropping the
                    // half-built array releases them.
                    unsafe { (*cell).size = i as i64 };
                    return Err(e);
                }
            }
        }
        // SAFETY: every slot is written.
        unsafe { (*cell).size = n as i64 };
        Ok(arr)
    }

    /// A new array holding `items`.
    pub fn from_vec(items: Vec<Any>) -> Array {
        let mut items = items.into_iter();
        Array::build(items.len(), |_| Ok(items.next().expect("exact length")))
            .expect("infallible fill")
    }

    /// A new array of owned copies of borrowed values (raw strings become `ffi.String`).
    pub fn from_views(items: &[AnyView<'_>]) -> Result<Array> {
        // The common kinds (PODs and objects) are copied inline; raw strings, byte arrays and
        // moved objects take the general conversion.
        Array::build(items.len(), |i| match owned_fast(items[i].raw()) {
            // SAFETY: `owned_fast` took the reference the new value owns.
            Some(raw) => Ok(unsafe { Any::from_raw(raw) }),
            None => items[i].to_owned(),
        })
    }

    /// The empty array.
    pub fn empty() -> Array {
        Array::from_vec(Vec::new())
    }

    /// Owned copies of the elements.
    pub fn to_vec(&self) -> Vec<Any> {
        self.as_slice().to_vec()
    }

    /// Converts every element to `T`.
    pub fn to_vec_of<T: FromAny>(&self) -> Result<Vec<T>> {
        self.iter().map(|v| v.get::<T>()).collect()
    }
}

/// An owned copy of a borrowed value when it needs no conversion (a POD, or an object that
/// gains one reference); `None` for the kinds `AnyView::to_owned` converts.
#[inline(always)]
fn owned_fast(v: &TVMFFIAny) -> Option<TVMFFIAny> {
    match v.type_index {
        ti if ti >= kTVMFFIStaticObjectBegin => {
            // SAFETY: a borrowed object value points at a live object; the copy owns the new
            // reference.
            unsafe { crate::object::inc_ref(v.value.v_obj) };
            Some(*v)
        }
        kTVMFFIRawStr | kTVMFFIByteArrayPtr | kTVMFFIObjectRValueRef => None,
        _ => Some(*v),
    }
}

impl FromIterator<Any> for Array {
    fn from_iter<I: IntoIterator<Item = Any>>(iter: I) -> Self {
        Array::from_vec(iter.into_iter().collect())
    }
}

impl From<Vec<Any>> for Array {
    fn from(v: Vec<Any>) -> Self {
        Array::from_vec(v)
    }
}

/// Builds an array from values that convert into `Any`: `array_of([1i64, 2, 3])`.
pub fn array_of<T: IntoAny>(items: impl IntoIterator<Item = T>) -> Array {
    items.into_iter().map(IntoAny::into_any).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::kTVMFFIStr;

    #[test]
    fn in_place_layout() {
        let a = array_of([1i64, 2, 3]);
        // SAFETY: reading the public cell of a live array.
        let cell = unsafe { &*a.cell() };
        assert_eq!(cell.data as usize, a.as_ptr() as usize + 56);
        assert_eq!((cell.size, cell.capacity), (3, 3));
        assert!(cell.data_deleter.is_none());
        assert_eq!(a.to_vec_of::<i64>().unwrap(), vec![1, 2, 3]);
        assert_eq!(a.at(-1).unwrap_err().message(), "Index -1 out of bounds 3");
        assert_eq!(a.at(3).unwrap_err().kind(), "IndexError");
        assert!(Array::empty().is_empty());
    }

    #[test]
    fn elements_are_released() {
        let s = Any::from("a string long enough for the heap");
        assert_eq!(s.type_index(), kTVMFFIStr);
        let obj = s.as_view().as_object().unwrap();
        let a = Array::from_vec(vec![s.clone(), s.clone()]);
        drop(s);
        assert_eq!(obj.strong_count(), 3);
        drop(a);
        assert_eq!(obj.strong_count(), 1);
    }

    #[test]
    fn failed_fill_releases_written_elements() {
        let s = Any::from("another string long enough");
        let obj = s.as_view().as_object().unwrap();
        let r = Array::build(3, |i| {
            if i < 2 {
                Ok(s.clone())
            } else {
                Err(crate::Error::value_error("x"))
            }
        });
        assert!(r.is_err());
        drop(s);
        assert_eq!(obj.strong_count(), 1);
    }
}
