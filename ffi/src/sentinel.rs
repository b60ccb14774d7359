//! The two `ffi.Object` singletons of the protocol (spec §8): MISSING (`ffi.GetInvalidObject`,
//! also what `ffi.MapGetItemOrMissing` returns for an absent key) and KWARGS
//! (`ffi.GetKwargsObject`, the keyword-argument marker).
//!
//! Rationale: callers compare these by identity, so each is one static object for the life of
//! the process. Its deleter is NULL, which the reference-count protocol defines as "never freed",
//! so handing out and dropping references is harmless however unbalanced.

use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

use crate::abi::{kTVMFFIObject, TVMFFIObject};
use crate::object::{Object, ObjectRef, INITIAL_REF_COUNT};

const fn static_object() -> Object {
    Object {
        header: TVMFFIObject {
            combined_ref_count: AtomicU64::new(INITIAL_REF_COUNT),
            type_index: kTVMFFIObject,
            __padding: 0,
            deleter: None,
        },
    }
}

static MISSING: Object = static_object();
static KWARGS: Object = static_object();

fn handle(obj: &'static Object) -> ObjectRef<Object> {
    // SAFETY: a static object lives forever; its count is atomic and its NULL deleter never
    // frees it, so a new strong reference may be taken (and dropped) freely.
    unsafe { ObjectRef::from_raw_borrowed(NonNull::from(obj)) }
}

/// The MISSING sentinel (a new reference).
pub fn missing() -> ObjectRef<Object> {
    handle(&MISSING)
}

/// The KWARGS sentinel (a new reference).
pub fn kwargs() -> ObjectRef<Object> {
    handle(&KWARGS)
}

/// Whether `obj` is the MISSING sentinel.
pub fn is_missing(obj: *const TVMFFIObject) -> bool {
    std::ptr::eq(obj, &MISSING.header)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn singletons_are_stable_and_distinct() {
        let a = missing();
        let b = missing();
        assert!(a.same_as(&b));
        assert!(!a.same_as(&kwargs()));
        assert_eq!(a.type_index(), kTVMFFIObject);
        assert!(is_missing(a.as_raw()));
        drop((a, b));
        assert!(missing().strong_count() >= 1);
    }
}
