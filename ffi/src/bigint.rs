//! `ffi.BigInt` (78): arbitrary-precision integers as minimal two's-complement int64 words,
//! little word first, stored in place (spec §1.2 `TVMFFIBigIntFromByteArray`, §2.4).

use std::ptr;

use crate::abi::{kTVMFFIBigInt, TVMFFIObject};
use crate::any::Any;
use crate::object::{new_object_with_extra, ObjectRef, ObjectType};

/// Payload of `ffi.BigInt`: the word count, then the words.
#[repr(C)]
pub struct BigIntObj {
    pub header: TVMFFIObject,
    pub nwords: usize,
}

// SAFETY: repr(C), header first, fixed static index.
unsafe impl ObjectType for BigIntObj {
    const TYPE_KEY: &'static str = "ffi.BigInt";
    const KEPT_WHILE_LENT: bool = false;
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
            let (obj, tail) = new_object_with_extra(
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

/// The integer of a complete decimal text (optional `+`/`-`, then at least one digit, nothing
/// else), as an Int when it fits in int64 and a BigInt otherwise; `None` when malformed.
pub fn from_decimal(text: &[u8]) -> Option<Any> {
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut mag: Vec<u64> = vec![0];
    for chunk in digits.chunks(18) {
        let mul = 10u128.pow(chunk.len() as u32);
        let mut carry: u128 = chunk
            .iter()
            .fold(0u128, |acc, d| acc * 10 + (d - b'0') as u128);
        for limb in mag.iter_mut() {
            let cur = *limb as u128 * mul + carry;
            *limb = cur as u64;
            carry = cur >> 64;
        }
        if carry != 0 {
            mag.push(carry as u64);
        }
    }
    // Two's complement with room for the sign.
    mag.push(0);
    if negative {
        let mut carry = true;
        for limb in mag.iter_mut() {
            *limb = !*limb;
            if carry {
                let (v, c) = limb.overflowing_add(1);
                *limb = v;
                carry = c;
            }
        }
    }
    let words: Vec<i64> = mag.into_iter().map(|l| l as i64).collect();
    Some(any_from_words(&words))
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

    #[test]
    fn decimal_text() {
        for text in [
            "1208925819614629174706176",
            "-99999999999999999999999999999999",
            "12",
        ] {
            let v = from_decimal(text.as_bytes()).unwrap();
            let back = match v.as_view().as_object_of::<BigIntObj>() {
                Some(b) => crate::repr::bigint_decimal(b.words()),
                None => v.get::<i64>().unwrap().to_string(),
            };
            assert_eq!(back, text);
        }
        assert_eq!(from_decimal(b"+5").unwrap().get::<i64>().unwrap(), 5);
        assert_eq!(from_decimal(b"-0").unwrap().get::<i64>().unwrap(), 0);
        assert!(from_decimal(b"").is_none());
        assert!(from_decimal(b"-").is_none());
        assert!(from_decimal(b" 1").is_none());
        assert!(from_decimal(b"1 ").is_none());
    }
}
