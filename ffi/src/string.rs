//! `ffi.String` (65) and `ffi.Bytes` (66), plus their inline Any forms SmallStr (11) and
//! SmallBytes (12) (spec §2.4, §4.2).
//!
//! Rationale: readers in other libraries always go through the `{data, size}` cell, but the
//! official library's own strings keep the characters in place right after the 40-byte object
//! with a trailing NUL; ours do the same so that `data[size] == 0` holds for every string we make.

use std::ptr;

use crate::abi::{
    kTVMFFIBytes, kTVMFFISmallBytes, kTVMFFISmallStr, kTVMFFIStr, TVMFFIAny, TVMFFIAnyValue,
    TVMFFIByteArray, TVMFFIObject,
};
use crate::object::{new_object_with_extra, ObjectRef, ObjectType};

/// Longest content stored inline in an Any (`sizeof(int64) - 1`).
pub const MAX_SMALL_LEN: usize = 7;

macro_rules! bytes_like_object {
    ($(#[$doc:meta])* $obj:ident, $handle:ident, $key:literal, $index:ident, $small:ident) => {
        $(#[$doc])*
        #[repr(C)]
        pub struct $obj {
            pub header: TVMFFIObject,
            /// Points at the content (in place after the object for the ones we create).
            pub bytes: TVMFFIByteArray,
        }

        // SAFETY: repr(C) with the header first; index fixed by the ABI.
        unsafe impl ObjectType for $obj {
            const TYPE_KEY: &'static str = $key;
            const KEPT_WHILE_LENT: bool = false;
            #[inline]
            fn type_index() -> i32 {
                $index
            }
            #[inline]
            fn is_instance(type_index: i32) -> bool {
                type_index == $index
            }
        }

        // SAFETY: immutable after construction.
        unsafe impl Send for $obj {}
        // SAFETY: immutable after construction.
        unsafe impl Sync for $obj {}

        impl $obj {
            /// The content.
            #[inline]
            pub fn as_bytes(&self) -> &[u8] {
                if self.bytes.size == 0 {
                    return &[];
                }
                // SAFETY: the cell describes the object's own live content.
                unsafe { std::slice::from_raw_parts(self.bytes.data as *const u8, self.bytes.size) }
            }
        }

        /// Owning handle.
        pub type $handle = ObjectRef<$obj>;

        impl ObjectRef<$obj> {
            /// A new heap object holding a copy of `content`, NUL-terminated in place.
            pub fn from_content(content: &[u8]) -> Self {
                let len = content.len();
                let (obj, tail) = new_object_with_extra(
                    $obj {
                        header: TVMFFIObject::new::<$obj>(),
                        bytes: TVMFFIByteArray { data: ptr::null(), size: len },
                    },
                    len + 1,
                );
                // SAFETY: `tail` has len + 1 writable bytes that belong to the new object.
                unsafe {
                    ptr::copy_nonoverlapping(content.as_ptr(), tail, len);
                    *tail.add(len) = 0;
                    (*obj.as_ptr()).bytes.data = tail as *const _;
                }
                obj
            }
        }

        impl $obj {
            /// An owned Any: inline (`$small`) when short, else a heap object.
            pub fn any_from(content: &[u8]) -> TVMFFIAny {
                if content.len() <= MAX_SMALL_LEN {
                    small_any($small, content)
                } else {
                    let obj = <ObjectRef<$obj>>::from_content(content);
                    TVMFFIAny {
                        type_index: $index,
                        small_str_len: 0,
                        value: TVMFFIAnyValue { v_obj: obj.into_raw() },
                    }
                }
            }
        }
    };
}

bytes_like_object!(
    /// Payload of `ffi.String`.
    StrObj, Str, "ffi.String", kTVMFFIStr, kTVMFFISmallStr
);
bytes_like_object!(
    /// Payload of `ffi.Bytes`.
    BytesObj, Bytes, "ffi.Bytes", kTVMFFIBytes, kTVMFFISmallBytes
);

/// An inline small string/bytes Any with every unused byte zero (hashing compares raw bytes).
fn small_any(type_index: i32, content: &[u8]) -> TVMFFIAny {
    debug_assert!(content.len() <= MAX_SMALL_LEN);
    let mut bytes = [0u8; 8];
    bytes[..content.len()].copy_from_slice(content);
    TVMFFIAny {
        type_index,
        small_str_len: content.len() as u32,
        value: TVMFFIAnyValue { v_bytes: bytes },
    }
}

/// The content of a string-like raw Any (SmallStr/SmallBytes, Str/Bytes, RawStr, ByteArrayPtr),
/// borrowed from `v`.
///
/// # Safety
/// `v` must be a valid Any (view); for object and pointer kinds the target must outlive the
/// returned slice.
pub unsafe fn raw_any_bytes(v: &TVMFFIAny) -> Option<&[u8]> {
    use crate::abi::{kTVMFFIByteArrayPtr, kTVMFFIRawStr};
    // SAFETY: each arm reads the union member its type index names.
    unsafe {
        match v.type_index {
            kTVMFFISmallStr | kTVMFFISmallBytes => {
                let len = (v.small_str_len as usize).min(MAX_SMALL_LEN);
                Some(&v.value.v_bytes[..len])
            }
            kTVMFFIStr | kTVMFFIBytes => {
                let obj = &*(v.value.v_obj as *const StrObj);
                Some(obj.as_bytes())
            }
            kTVMFFIRawStr => {
                let p = v.value.v_c_str;
                if p.is_null() {
                    None
                } else {
                    Some(std::ffi::CStr::from_ptr(p).to_bytes())
                }
            }
            kTVMFFIByteArrayPtr => {
                let p = v.value.v_ptr as *const TVMFFIByteArray;
                if p.is_null() {
                    None
                } else if (*p).size == 0 {
                    Some(&[])
                } else {
                    Some(std::slice::from_raw_parts(
                        (*p).data as *const u8,
                        (*p).size,
                    ))
                }
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::any::Any;

    #[test]
    fn small_strings_are_zero_padded() {
        let a = StrObj::any_from(b"abcdef");
        assert_eq!(a.type_index, kTVMFFISmallStr);
        assert_eq!(a.small_str_len, 6);
        // SAFETY: small strings use v_uint64.
        assert_eq!(unsafe { a.value.v_uint64 }, 0x0000_6665_6463_6261);
        let b = StrObj::any_from(b"abcdefg");
        assert_eq!(b.type_index, kTVMFFISmallStr);
        // SAFETY: as above.
        assert_eq!(unsafe { b.value.v_bytes }[7], 0);
    }

    #[test]
    fn long_strings_are_in_place_and_nul_terminated() {
        // SAFETY: any_from returns an owned Any.
        let a = unsafe { Any::from_raw(StrObj::any_from(b"abcdefgh")) };
        assert_eq!(a.type_index(), kTVMFFIStr);
        let obj = a.as_view().as_object().unwrap();
        let s = obj.downcast_ref::<StrObj>().unwrap();
        assert_eq!(s.as_bytes(), b"abcdefgh");
        assert_eq!(s.bytes.data as usize, s.as_ptr() as usize + 40);
        // SAFETY: the NUL is part of the allocation.
        assert_eq!(unsafe { *s.bytes.data.add(8) }, 0);
        assert_eq!(a.as_view().as_str(), Some("abcdefgh"));
    }
}
