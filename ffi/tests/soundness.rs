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
        inner.clear(); // releases every key, including the ones the lookup still reads
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
