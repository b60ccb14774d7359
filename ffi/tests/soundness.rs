//! Soundness of the safe Rust API (an audit found each of these reaching undefined behaviour
//! through safe code; with valgrind several showed invalid reads, natively crashes or lost
//! elements): List/Dict mutated from two threads, a backtrace read while another handle updates
//! it, map storage made with a type index or shift that does not fit, a key hook that mutates
//! the dict it is being looked up in. The other findings (a public reference-count word, safe
//! constructors of forged objects, safe functions taking raw pointers) are now compile errors:
//! those functions are `unsafe fn`.
#![deny(unsafe_code)]

use anyffi::abi::kTVMFFIFunction;
use anyffi::{Any, Dict, Error, Function, FunctionObj, List};

// ---- F1: List / Dict mutated through &self from two threads (one lock serialises them) ---

#[test]
fn f1_list_push_from_two_threads() {
    let l = List::new();
    let n = 200_000i64;
    std::thread::scope(|s| {
        for _ in 0..2 {
            let l = l.clone();
            s.spawn(move || {
                for i in 0..n {
                    l.push(Any::from(i));
                }
            });
        }
    });
    assert_eq!(
        l.len() as i64,
        2 * n,
        "lost or duplicated elements: data race"
    );
}

#[test]
fn f1_dict_insert_from_two_threads() {
    let d = Dict::new();
    let n = 50_000i64;
    std::thread::scope(|s| {
        for t in 0..2i64 {
            let d = d.clone();
            s.spawn(move || {
                for i in 0..n {
                    d.insert(Any::from(t * n + i), Any::from(i)).unwrap();
                }
            });
        }
    });
    assert_eq!(d.len() as i64, 2 * n, "lost entries: data race");
}

// ---- F2: Error::backtrace() is a copy; update_backtrace(&self) may reallocate the text ----

#[test]
fn f2_error_backtrace_dangles_after_update() {
    let e = Error::from_parts(
        b"ValueError",
        b"m",
        b"original backtrace text, 40 bytes long.",
    );
    let bt = e.backtrace(); // Cow::Borrowed into the error's Vec
    e.update_backtrace(&"x".repeat(1 << 16), true); // grows (reallocates) that Vec
    assert_eq!(&*bt, "original backtrace text, 40 bytes long.");
}

// ---- F4: map storage whose type index or hash shift does not fit is refused ----------------

#[test]
#[should_panic(expected = "map storage must be an ffi.Map (72) or ffi.Dict (76)")]
fn f4_map_base_new_small_with_any_type_index() {
    let m = anyffi::map_base::new_small(kTVMFFIFunction, 2);
    let Ok(f) = m.upcast().downcast::<FunctionObj>() else {
        panic!("claims to be a Function")
    };
    let f: Function = f;
    let _ = f.call(&[]); // calls the map's data pointer (heap) as code
}

#[test]
#[allow(unsafe_code)]
fn f6_dict_mutated_by_equal_hook_during_lookup() {
    use anyffi::{Shape, ShapeObj};
    let d = Dict::new();
    let inner = d.clone();
    let hook = Function::from_packed(move |args| {
        inner.clear()?; // would release every key, including the ones the lookup still reads
        let lhs = args[0].as_object_of::<ShapeObj>().expect("a shape");
        Ok(Any::from(lhs.as_slice() == [7]))
    });
    let hook = Any::from(hook);
    // SAFETY: a live Function value (register_attr is unsafe after the F5 fix).
    unsafe {
        anyffi::type_table::register_attr(anyffi::abi::kTVMFFIShape, "__any_equal__", hook.raw())
    }
    .unwrap();
    d.insert(Any::from(Shape::new(&[1])), Any::from(1i64))
        .unwrap();
    let e2 = d
        .insert(Any::from(Shape::new(&[2])), Any::from(2i64))
        .unwrap_err();
    let e3 = d.insert(Any::from(Shape::new(&[3])), Any::from(3i64));
    assert!(e2.message().contains("being searched"), "{}", e2.message());
    let _ = e3;
    assert_eq!(d.len(), 1, "the dict is intact");
}

#[test]
#[should_panic(expected = "16 slots need fib_shift 60, got 0")]
fn f4_map_base_new_dense_with_inconsistent_shift() {
    // fib_shift 0 with 16 slots: buckets are full 64-bit products, used unreduced as slot indices
    let m = anyffi::map_base::new_dense(anyffi::abi::kTVMFFIDict, 0, 16);
    let Ok(d) = m.upcast().downcast::<anyffi::DictObj>() else {
        panic!("a dict")
    };
    let d: Dict = d;
    d.insert(Any::from(12345i64), Any::from(1i64)).unwrap(); // reads metadata far outside the table
}

// ---- Session 11 audit: sizes that wrapped, loops that never ended, values read as i32 ----

#[test]
fn s11_shape_of_too_many_dimensions_panics_instead_of_writing_past_its_block() {
    // n * 8 wrapped in release: a 48-byte block, then one write per dimension past it
    let r = std::panic::catch_unwind(|| {
        anyffi::Shape::try_from_fn((1usize << 61) + 1, |_| Ok::<i64, Error>(1)).map(|_| ())
    });
    assert!(r.is_err(), "a size that overflows usize must panic");
}

#[test]
fn s11_small_map_whose_pair_storage_overflows_panics() {
    // n * 32 wrapped to 0: a map promising 2^59 in-place pairs with no storage (heap corruption
    // on the first insert)
    let r = std::panic::catch_unwind(|| {
        anyffi::map_base::new_small(anyffi::abi::kTVMFFIDict, 1 << 59);
    });
    assert!(r.is_err());
}

#[test]
fn s11_list_capacity_overflow_panics_with_a_message() {
    let r = std::panic::catch_unwind(|| List::with_capacity(usize::MAX).len());
    let e = r.expect_err("capacity overflow");
    let msg = e
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(msg.contains("capacity overflow"), "{msg}");
}

#[test]
fn s11_bigint_decimal_of_no_words_is_zero() {
    // the division loop never ended (memory grew until the OOM killer)
    assert_eq!(anyffi::repr::bigint_decimal(&[]), "0");
    assert_eq!(anyffi::repr::bigint_decimal(&[0]), "0");
}

#[test]
fn s11_json_graph_device_outside_int32_is_a_value_error() {
    // [4294967297, 1] was read as cpu:1 (`as i32`)
    for data in ["[4294967297, 1]", "[1, -2147483649]"] {
        let text =
            format!(r#"{{"root_index": 0, "nodes": [{{"type": "Device", "data": {data}}}]}}"#);
        let g = anyffi::json::parse(text.as_bytes()).unwrap();
        let e = anyffi::serialization::from_json_graph(g.as_view()).unwrap_err();
        assert_eq!(e.kind(), "ValueError", "{}", e.message());
        assert!(e.message().contains("int32"), "{}", e.message());
    }
    let g =
        anyffi::json::parse(br#"{"root_index": 0, "nodes": [{"type": "Device", "data": [2, 3]}]}"#)
            .unwrap();
    let d = anyffi::serialization::from_json_graph(g.as_view()).unwrap();
    let d = d.get::<anyffi::abi::DLDevice>().unwrap();
    assert_eq!((d.device_type, d.device_id), (2, 3));
}

#[test]
fn s11_layout_helpers_on_odd_input() {
    use anyffi::tensor::{compact_strides, is_contiguous};
    // strides shorter than the shape described a "contiguous" layout (zip stopped early)
    assert!(!is_contiguous(&[2, 3], Some(&[1])));
    assert!(!is_contiguous(&[2, 3], Some(&[])));
    assert!(is_contiguous(&[2, 3], Some(&[3, 1])));
    // strides past i64 saturate instead of wrapping (release) or panicking (debug)
    let s = compact_strides(&[2, 1 << 40, 1 << 40]);
    assert_eq!(s, vec![i64::MAX, 1 << 40, 1]);
}

// ---- Session 24: structural in-place mutation of an object a WeakRef can still reach ------

#[test]
fn s24_structural_mutate_copies_what_a_weak_ref_can_reach() {
    use anyffi::abi::kTVMFFIStr;
    use anyffi::structural::mutate::structural_mutate;
    use anyffi::{Array, ArrayObj, WeakRef};
    use std::sync::{Arc, Mutex};
    // Uniqueness went by the strong count alone, so an Array with a WeakRef was changed in
    // place; a handle upgraded during the walk saw its elements replaced under it (and its
    // borrowed element views read the freed string, under valgrind).
    let long = "a string long enough to be an ffi.String object";
    let arr = Array::from_vec(vec![Any::from(long), Any::from(7i64)]);
    let weak: Arc<Mutex<WeakRef<ArrayObj>>> = Arc::new(Mutex::new(arr.downgrade()));
    let held: Arc<Mutex<Option<Array>>> = Arc::new(Mutex::new(None));
    let (w, h) = (weak.clone(), held.clone());
    let cb = Function::from_packed(move |_args| {
        *h.lock().unwrap() = w.lock().unwrap().upgrade();
        Ok(Any::from("the replacement, also long enough"))
    });
    let out = structural_mutate(Any::from(arr), vec![(kTVMFFIStr, cb, false)]).unwrap();
    let out = out.get::<Array>().unwrap();
    assert_eq!(
        out.get(0).unwrap().as_str(),
        Some("the replacement, also long enough")
    );
    let held = held
        .lock()
        .unwrap()
        .clone()
        .expect("upgraded during the walk");
    assert_eq!(
        held.get(0).unwrap().as_str(),
        Some(long),
        "changed in place"
    );
    assert_eq!(held.get(1).unwrap().as_i64(), Some(7));
}
