//! `AnyHash` / `AnyEqual` (spec §4.3): the key hash and key equality of `ffi.Map` and `ffi.Dict`,
//! including the `__any_hash__` / `__any_equal__` type-attribute hooks and the BigInt hooks.
//!
//! Rationale: C++ header code compiled into other libraries looks keys up in our maps (and we in
//! theirs), so both sides must place every key in the same bucket. Everything here is therefore
//! defined bit for bit by the spec: the Fowler-style byte hash modulo 2^31-1, the boost-style
//! combine with the type index, and raw 16-byte identity before any content comparison.

use std::ffi::c_void;
use std::ptr::NonNull;

use crate::abi::*;
use crate::any::Any;
use crate::bigint::BigIntObj;
use crate::error::{Error, Result};
use crate::function::call_raw;
use crate::string::StrObj;

const HASH_MUL: u64 = 1_099_511_628_211;
const HASH_MOD: u64 = 2_147_483_647;

/// Name of the type-attribute column holding custom key hashes.
pub const ANY_HASH_ATTR: &str = "__any_hash__";
/// Name of the type-attribute column holding custom key equalities.
pub const ANY_EQUAL_ATTR: &str = "__any_equal__";

/// `StableHashCombine(key, value)`: mixes `value` into `key` (wrapping u64 arithmetic).
#[inline]
pub fn stable_hash_combine(key: u64, value: u64) -> u64 {
    key ^ value
        .wrapping_add(0x9e37_79b9)
        .wrapping_add(key << 6)
        .wrapping_add(key >> 2)
}

/// `StableHashBytes`: little-endian 8-byte words folded as `r = (r * P + w) mod (2^31 - 1)`,
/// the product wrapping at 2^64; a short tail is zero-padded into one last word.
#[inline]
pub fn stable_hash_bytes(bytes: &[u8]) -> u64 {
    let mut r = 0u64;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let w = u64::from_le_bytes(w.try_into().expect("8-byte chunk"));
        r = r.wrapping_mul(HASH_MUL).wrapping_add(w) % HASH_MOD;
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        let mut buf = [0u8; 8];
        buf[..tail.len()].copy_from_slice(tail);
        r = r
            .wrapping_mul(HASH_MUL)
            .wrapping_add(u64::from_le_bytes(buf))
            % HASH_MOD;
    }
    r
}

/// The string content of a Str/Bytes object.
///
/// # Safety
/// `obj` must be a live `ffi.String` or `ffi.Bytes` (both share the byte-array cell at 24).
#[inline]
unsafe fn object_bytes<'a>(obj: *mut TVMFFIObject) -> &'a [u8] {
    // SAFETY: per the caller; the cell describes the object's own content.
    unsafe { (*(obj as *const StrObj)).as_bytes() }
}

/// The inline content of a SmallStr/SmallBytes value.
#[inline]
fn small_bytes(v: &TVMFFIAny) -> &[u8] {
    let len = (v.small_str_len as usize).min(crate::string::MAX_SMALL_LEN);
    // SAFETY: small strings store their content in v_bytes.
    unsafe { &v.value.v_bytes[..len] }
}

static HASH_COLUMN: crate::type_table::ColumnCache = crate::type_table::ColumnCache::new();
static EQUAL_COLUMN: crate::type_table::ColumnCache = crate::type_table::ColumnCache::new();

/// Native hook signatures of the `NativeFunctionView` convention: the argument is `const Any&`
/// (a pointer), the result an Int/Bool, or an `ffi.Error` object on failure.
type NativeHash = unsafe extern "C" fn(*const TVMFFIAny) -> TVMFFIAny;
type NativeEqual = unsafe extern "C" fn(*const TVMFFIAny, *const TVMFFIAny) -> TVMFFIAny;

/// Turns a hook's non-`want` result into the error it carries (or a TypeError).
fn hook_failure(result: TVMFFIAny, attr: &str, want: &str) -> Error {
    // SAFETY: a native hook returns an owned value.
    let result = unsafe { Any::from_raw(result) };
    if result.type_index() == kTVMFFIError {
        let obj = result.into_object().expect("error object");
        // SAFETY: checked to be an ffi.Error; the reference moves into the Error.
        return unsafe { Error::from_raw_owned(NonNull::new_unchecked(obj.into_raw())) };
    }
    Error::type_error(format!(
        "{attr}: the hook must return {want}, got {}",
        result.as_view().type_key()
    ))
}

/// Calls a custom `__any_hash__` entry (OpaquePtr to a native function, or an ffi.Function).
fn call_custom_hash(hook: TVMFFIAny, v: &TVMFFIAny) -> Result<u64> {
    let result = match hook.type_index {
        kTVMFFIOpaquePtr => {
            // SAFETY: an OpaquePtr entry of this column is a `NativeHash` by convention.
            let f: NativeHash =
                unsafe { std::mem::transmute::<*mut c_void, NativeHash>(hook.value.v_ptr) };
            // SAFETY: `v` is a live value for the duration of the call.
            unsafe { f(v) }
        }
        kTVMFFIFunction => {
            // SAFETY: the column keeps the function alive; `v` is one valid argument.
            unsafe { call_raw(hook.value.v_obj, v, 1) }?.into_raw()
        }
        _ => {
            return Err(Error::type_error(format!(
                "{ANY_HASH_ATTR}: expected a native function pointer or an ffi.Function, got {}",
                crate::type_table::type_key_of(hook.type_index)
            )))
        }
    };
    if result.type_index == kTVMFFIInt {
        // SAFETY: Int stores v_int64.
        Ok(unsafe { result.value.v_int64 } as u64)
    } else {
        Err(hook_failure(result, ANY_HASH_ATTR, "an int"))
    }
}

/// Calls a custom `__any_equal__` entry.
fn call_custom_equal(hook: TVMFFIAny, lhs: &TVMFFIAny, rhs: &TVMFFIAny) -> Result<bool> {
    let result = match hook.type_index {
        kTVMFFIOpaquePtr => {
            // SAFETY: an OpaquePtr entry of this column is a `NativeEqual` by convention.
            let f: NativeEqual =
                unsafe { std::mem::transmute::<*mut c_void, NativeEqual>(hook.value.v_ptr) };
            // SAFETY: both values are live for the call.
            unsafe { f(lhs, rhs) }
        }
        kTVMFFIFunction => {
            let args = [*lhs, *rhs];
            // SAFETY: the column keeps the function alive; two valid argument views.
            unsafe { call_raw(hook.value.v_obj, args.as_ptr(), 2) }?.into_raw()
        }
        _ => {
            return Err(Error::type_error(format!(
                "{ANY_EQUAL_ATTR}: expected a native function pointer or an ffi.Function, got {}",
                crate::type_table::type_key_of(hook.type_index)
            )))
        }
    };
    if result.type_index == kTVMFFIBool {
        // SAFETY: Bool stores v_int64.
        Ok(unsafe { result.value.v_int64 } != 0)
    } else {
        Err(hook_failure(result, ANY_EQUAL_ATTR, "a bool"))
    }
}

/// `AnyHash` of a stored or borrowed value. Fails only when a custom hook fails.
///
/// # Safety
/// `v` must be a valid value: an object kind must point at a live object.
#[inline]
pub unsafe fn any_hash(v: &TVMFFIAny) -> Result<u64> {
    let ti = v.type_index;
    match ti {
        kTVMFFISmallStr | kTVMFFISmallBytes => {
            // SAFETY: small strings keep their zero-padded content in v_uint64.
            let word = unsafe { v.value.v_uint64 };
            let as_object = if ti == kTVMFFISmallStr {
                kTVMFFIStr
            } else {
                kTVMFFIBytes
            };
            Ok(stable_hash_combine(as_object as u64, word % HASH_MOD))
        }
        kTVMFFIStr | kTVMFFIBytes => {
            // SAFETY: a Str/Bytes value holds a live object.
            let bytes = unsafe { object_bytes(v.value.v_obj) };
            Ok(stable_hash_combine(ti as u64, stable_hash_bytes(bytes)))
        }
        _ => {
            if ti >= kTVMFFIStaticObjectBegin {
                if let Some(hook) = HASH_COLUMN.entry(ANY_HASH_ATTR, ti) {
                    return Ok(stable_hash_combine(ti as u64, call_custom_hash(hook, v)?));
                }
            }
            // SAFETY: every value has 8 payload bytes (unused ones zero).
            Ok(stable_hash_combine(ti as u64, unsafe { v.value.v_uint64 }))
        }
    }
}

/// Whether two values are the same (`Any::same_as`: the same 16 bytes).
#[inline]
pub fn same_value(a: &TVMFFIAny, b: &TVMFFIAny) -> bool {
    same_bits(a, b)
}

/// Raw 16-byte identity, the fast path of `AnyEqual`.
#[inline]
fn same_bits(a: &TVMFFIAny, b: &TVMFFIAny) -> bool {
    // SAFETY: TVMFFIAny is 16 plain bytes; every union member covers the 8 payload bytes.
    unsafe {
        a.type_index == b.type_index
            && a.small_str_len == b.small_str_len
            && a.value.v_uint64 == b.value.v_uint64
    }
}

/// `AnyEqual(lhs, rhs)`. Fails only when a custom hook fails.
///
/// # Safety
/// `lhs` and `rhs` must be valid values: object kinds must point at live objects.
#[inline]
pub unsafe fn any_equal(lhs: &TVMFFIAny, rhs: &TVMFFIAny) -> Result<bool> {
    if same_bits(lhs, rhs) {
        return Ok(true);
    }
    let (lt, rt) = (lhs.type_index, rhs.type_index);
    if lt == rt {
        if lt == kTVMFFIStr || lt == kTVMFFIBytes {
            // SAFETY: both hold live string objects.
            return Ok(unsafe { object_bytes(lhs.value.v_obj) == object_bytes(rhs.value.v_obj) });
        }
        if lt >= kTVMFFIStaticObjectBegin {
            if let Some(hook) = EQUAL_COLUMN.entry(ANY_EQUAL_ATTR, lt) {
                return call_custom_equal(hook, lhs, rhs);
            }
        }
        return Ok(false);
    }
    Ok(match (lt, rt) {
        (kTVMFFIStr, kTVMFFISmallStr) | (kTVMFFIBytes, kTVMFFISmallBytes) => {
            // SAFETY: the left side holds a live string object.
            unsafe { object_bytes(lhs.value.v_obj) == small_bytes(rhs) }
        }
        (kTVMFFISmallStr, kTVMFFIStr) | (kTVMFFISmallBytes, kTVMFFIBytes) => {
            // SAFETY: the right side holds a live string object.
            small_bytes(lhs) == unsafe { object_bytes(rhs.value.v_obj) }
        }
        _ => false,
    })
}

/// The words of an Int or BigInt value (`BigInt::hash` hashes an Int as itself).
fn bigint_words(v: &TVMFFIAny) -> Option<&[i64]> {
    if v.type_index == kTVMFFIBigInt {
        // SAFETY: a BigInt value holds a live BigInt object.
        Some(unsafe { (*(v.value.v_obj as *const BigIntObj)).words() })
    } else {
        None
    }
}

fn int_any(v: i64) -> TVMFFIAny {
    TVMFFIAny {
        type_index: kTVMFFIInt,
        small_str_len: 0,
        value: TVMFFIAnyValue { v_int64: v },
    }
}

fn bool_any(v: bool) -> TVMFFIAny {
    TVMFFIAny {
        type_index: kTVMFFIBool,
        small_str_len: 0,
        value: TVMFFIAnyValue { v_int64: v as i64 },
    }
}

fn error_any(e: Error) -> TVMFFIAny {
    TVMFFIAny {
        type_index: kTVMFFIError,
        small_str_len: 0,
        value: TVMFFIAnyValue {
            v_obj: e.into_raw(),
        },
    }
}

/// Native `__any_hash__` of `ffi.BigInt`: `StableHashBytes` of its words.
unsafe extern "C" fn bigint_any_hash(v: *const TVMFFIAny) -> TVMFFIAny {
    // SAFETY: the caller passes a live value.
    let v = unsafe { &*v };
    match v.type_index {
        // SAFETY: Int stores v_int64.
        kTVMFFIInt => int_any(unsafe { v.value.v_int64 }),
        _ => match bigint_words(v) {
            Some(w) => {
                // SAFETY: the words are plain i64s, viewed as their bytes.
                let bytes =
                    unsafe { std::slice::from_raw_parts(w.as_ptr() as *const u8, w.len() * 8) };
                int_any(stable_hash_bytes(bytes) as i64)
            }
            None => error_any(Error::type_error(format!(
                "ffi.BigInt {ANY_HASH_ATTR}: expected ffi.BigInt, got {}",
                crate::type_table::type_key_of(v.type_index)
            ))),
        },
    }
}

/// Native `__any_equal__` of `ffi.BigInt`: equal words (both sides are normalised).
unsafe extern "C" fn bigint_any_equal(lhs: *const TVMFFIAny, rhs: *const TVMFFIAny) -> TVMFFIAny {
    // SAFETY: the caller passes live values.
    let (l, r) = unsafe { (&*lhs, &*rhs) };
    match (bigint_words(l), bigint_words(r)) {
        (Some(a), Some(b)) => bool_any(a == b),
        _ => error_any(Error::type_error(format!(
            "ffi.BigInt {ANY_EQUAL_ATTR}: expected two ffi.BigInt values"
        ))),
    }
}

/// The type-attribute entries the library itself registers at start-up: BigInt's native key
/// hash and equality (as the official library does), as `(column, type index, value)`.
pub fn builtin_attr_entries() -> [(&'static str, i32, TVMFFIAny); 2] {
    let ptr_any = |p: *mut c_void| TVMFFIAny {
        type_index: kTVMFFIOpaquePtr,
        small_str_len: 0,
        value: TVMFFIAnyValue { v_ptr: p },
    };
    [
        (
            ANY_HASH_ATTR,
            kTVMFFIBigInt,
            ptr_any(bigint_any_hash as NativeHash as *mut c_void),
        ),
        (
            ANY_EQUAL_ATTR,
            kTVMFFIBigInt,
            ptr_any(bigint_any_equal as NativeEqual as *mut c_void),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::any::Any;

    fn h(a: &Any) -> u64 {
        // SAFETY: the values are stored in, or borrowed from, live objects.
        unsafe { any_hash(a.raw()) }.unwrap()
    }

    #[test]
    fn combine_and_bytes() {
        assert_eq!(stable_hash_combine(0, 0), 0x9e37_79b9);
        assert_eq!(stable_hash_bytes(b""), 0);
        // A single short word is the word itself (below the modulus).
        assert_eq!(stable_hash_bytes(b"a"), 0x61);
        assert_eq!(
            stable_hash_bytes(&[1, 0, 0, 0, 0, 0, 0, 0, 2]),
            (HASH_MUL + 2) % HASH_MOD
        );
    }

    #[test]
    fn small_and_heap_strings_hash_and_compare_alike() {
        // Build a heap string of short content, as C++ does for std::string-backed strings.
        let heap = Any::from(crate::string::Str::from_content(b"key"));
        let small = Any::from("key");
        assert_eq!(small.type_index(), kTVMFFISmallStr);
        assert_eq!(heap.type_index(), kTVMFFIStr);
        assert_eq!(h(&heap), h(&small));
        // SAFETY: the values are stored in, or borrowed from, live objects.
        assert!(unsafe { any_equal(heap.raw(), small.raw()) }.unwrap());
        // SAFETY: the values are stored in, or borrowed from, live objects.
        assert!(unsafe { any_equal(small.raw(), heap.raw()) }.unwrap());
        let other = Any::from("kez");
        // SAFETY: the values are stored in, or borrowed from, live objects.
        assert!(!unsafe { any_equal(heap.raw(), other.raw()) }.unwrap());
        // Bytes never equal strings of the same content.
        let b = Any::from(&b"key"[..]);
        // SAFETY: the values are stored in, or borrowed from, live objects.
        assert!(!unsafe { any_equal(b.raw(), small.raw()) }.unwrap());
        assert_ne!(h(&b), h(&small));
    }

    #[test]
    fn pods_are_typed() {
        // SAFETY: the values are stored in, or borrowed from, live objects.
        assert!(!unsafe { any_equal(Any::from(1i64).raw(), Any::from(1.0f64).raw()) }.unwrap());
        // SAFETY: the values are stored in, or borrowed from, live objects.
        assert!(!unsafe { any_equal(Any::from(1i64).raw(), Any::from(true).raw()) }.unwrap());
        assert_eq!(h(&Any::from(5i64)), stable_hash_combine(1, 5));
    }

    /// Values printed by `tvm::ffi::AnyHash` of the official headers and library.
    #[test]
    fn matches_official_any_hash() {
        let heap = |s: &str| Any::from(crate::string::Str::from_content(s.as_bytes()));
        let cases: [(Any, u64); 13] = [
            (Any::from("key"), 2662395701),
            (Any::from(""), 2654440008),
            (Any::from("abcdefg"), 4352227701),
            (Any::from("abcdefgh"), 3546921335),
            (Any::from("a-long-key-number-0"), 3378085925),
            (Any::from(&b"key"[..]), 2662395894),
            (Any::from(&b"0123456789abcdef!"[..]), 3549304159),
            (Any::from(0i64), 2654435832),
            (Any::from(42i64), 2654435874),
            (Any::from(-1i64), 2654435833),
            (Any::from(1.5f64), 4609434221268138618),
            (Any::from(true), 2654435896),
            (Any::none(), 2654435769),
        ];
        for (v, want) in &cases {
            assert_eq!(h(v), *want, "{v:?}");
        }
        // std::string-backed (heap) strings hash as their small form.
        assert_eq!(h(&heap("key")), 2662395701);
        assert_eq!(stable_hash_bytes(b"hello world"), 1085901259);
        // BigInt: 2^64 and -(3 * 2^100).
        assert_eq!(h(&crate::bigint::any_from_words(&[0, 1])), 2654440707);
        assert_eq!(
            h(&crate::bigint::any_from_words(&[0, -(3i64 << 36)])),
            4801924257
        );
    }

    #[test]
    fn bigint_hooks() {
        let a = crate::bigint::any_from_words(&[0, 1]);
        let b = crate::bigint::any_from_words(&[0, 1]);
        assert!(!same_bits(a.raw(), b.raw()));
        // SAFETY: the values are stored in, or borrowed from, live objects.
        assert!(unsafe { any_equal(a.raw(), b.raw()) }.unwrap());
        assert_eq!(h(&a), h(&b));
        let bytes: Vec<u8> = [0i64, 1].iter().flat_map(|w| w.to_le_bytes()).collect();
        assert_eq!(
            h(&a),
            stable_hash_combine(kTVMFFIBigInt as u64, stable_hash_bytes(&bytes))
        );
    }
}
