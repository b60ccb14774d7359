//! `ffi.BigInt` (78): arbitrary-precision integers as minimal two's-complement int64 words,
//! little word first, stored in place (spec §1.2 `TVMFFIBigIntFromByteArray`, §2.4).

use std::ptr;

use crate::abi::{kTVMFFIBigInt, TVMFFIObject};
use crate::any::Any;
use crate::object::{make_object_with_extra, ObjectRef, ObjectType};

/// Payload of `ffi.BigInt`: the word count, then the words.
#[repr(C)]
pub struct BigIntObj {
    pub header: TVMFFIObject,
    pub nwords: usize,
}

// SAFETY: repr(C), header first, fixed static index.
unsafe impl ObjectType for BigIntObj {
    const TYPE_KEY: &'static str = "ffi.BigInt";
    #[inline]
    fn type_index() -> i32 {
        kTVMFFIBigInt
    }
    #[inline]
    fn is_instance(type_index: i32) -> bool {
        type_index == kTVMFFIBigInt
    }
}

// SAFETY: immutable after construction.
unsafe impl Send for BigIntObj {}
// SAFETY: immutable after construction.
unsafe impl Sync for BigIntObj {}

impl BigIntObj {
    /// The words, least significant first.
    pub fn words(&self) -> &[i64] {
        // SAFETY: `nwords` words follow the 32-byte object in place.
        unsafe {
            std::slice::from_raw_parts(
                (self as *const Self as *const u8).add(32) as *const i64,
                self.nwords,
            )
        }
    }
}

/// Drops redundant sign-extension words: the minimal two's-complement representation.
pub fn normalize_words(words: &[i64]) -> &[i64] {
    let mut n = words.len();
    while n > 1 {
        let top = words[n - 1];
        let next_sign = if words[n - 2] < 0 { -1 } else { 0 };
        if top == next_sign {
            n -= 1;
        } else {
            break;
        }
    }
    &words[..n]
}

/// Builds the normalised value of `words`: an Int when it fits in int64, else a BigInt.
pub fn any_from_words(words: &[i64]) -> Any {
    let w = normalize_words(words);
    match w {
        [] => Any::from(0i64),
        [v] => Any::from(*v),
        _ => {
            let (obj, tail) = make_object_with_extra(
                BigIntObj {
                    header: TVMFFIObject::new::<BigIntObj>(),
                    nwords: w.len(),
                },
                w.len() * 8,
            );
            // SAFETY: the tail has room for the words.
            unsafe { ptr::copy_nonoverlapping(w.as_ptr(), tail as *mut i64, w.len()) };
            Any::from(obj)
        }
    }
}

/// Owning handle to an `ffi.BigInt`.
pub type BigInt = ObjectRef<BigIntObj>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation() {
        assert_eq!(any_from_words(&[]).get::<i64>().unwrap(), 0);
        assert_eq!(any_from_words(&[-5, -1, -1]).get::<i64>().unwrap(), -5);
        assert_eq!(any_from_words(&[7, 0]).get::<i64>().unwrap(), 7);
        // 2^63 needs a zero sign word.
        let big = any_from_words(&[i64::MIN, 0, 0]);
        assert_eq!(big.type_index(), kTVMFFIBigInt);
        let obj = big.as_view().as_object_of::<BigIntObj>().unwrap();
        assert_eq!(obj.words(), &[i64::MIN, 0]);
        assert_eq!(obj.as_ptr() as usize + 32, obj.words().as_ptr() as usize);
    }
}
