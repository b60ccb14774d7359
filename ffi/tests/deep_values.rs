//! Values nested far deeper than any stack: releasing them and printing them must take
//! neither stack nor time in proportion to more than their size. Each test runs on a thread
//! with a 256 KiB stack, where a release or a printer that recursed once per level would
//! overflow at a few thousand levels (before the fix, a million-deep array from
//! `ffi.json.Parse` crashed the process when released, and `ffi.ReprPrint` of a 100 000-deep
//! one built a string per level: O(n^2) time and memory, 45 s and ~10 GB).
#![deny(unsafe_code)]

use anyffi::repr::repr_print;
use anyffi::{Any, Array, Dict, List, Map};

const SMALL_STACK: usize = 256 * 1024;

fn on_small_stack<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    std::thread::Builder::new()
        .stack_size(SMALL_STACK)
        .spawn(f)
        .unwrap()
        .join()
        .expect("the thread finished without overflowing its stack")
}

/// `n` levels of `wrap`, innermost `Any::from(())` (None).
fn nest(n: usize, mut wrap: impl FnMut(Any) -> Any) -> Any {
    let mut v = Any::from(());
    for _ in 0..n {
        v = wrap(v);
    }
    v
}

#[test]
fn releasing_deep_values_of_every_container_kind() {
    on_small_stack(|| {
        let n = 300_000;
        drop(nest(n, |v| Any::from(Array::from_vec(vec![v]))));
        drop(nest(n, |v| Any::from(List::from_vec(vec![v]))));
        drop(nest(n, |v| {
            let mut m = Map::new();
            m.insert(Any::from("k"), v).unwrap();
            Any::from(m)
        }));
        drop(nest(n, |v| {
            let d = Dict::new();
            d.insert(Any::from(1i64), v).unwrap();
            Any::from(d)
        }));
        // kinds alternating, and a wide level in the middle: every member still released
        let mut i = 0;
        let mixed = nest(n, |v| {
            i += 1;
            if i == n / 2 {
                let mut wide: Vec<Any> = (0..1000i64)
                    .map(|j| Any::from(List::from_vec(vec![Any::from(j)])))
                    .collect();
                wide.push(v);
                Any::from(Array::from_vec(wide))
            } else if i % 2 == 0 {
                Any::from(Array::from_vec(vec![v]))
            } else {
                Any::from(List::from_vec(vec![v]))
            }
        });
        drop(mixed);
    });
}

#[test]
fn released_members_are_gone_when_the_outer_release_returns() {
    on_small_stack(|| {
        // a member kept alive elsewhere: its count drops by exactly one, and by the time the
        // deep value's release returns (a deferred one included)
        let shared = List::new();
        let witness = shared.clone();
        let v = nest(5_000, |v| Any::from(Array::from_vec(vec![v])));
        let outer = Array::from_vec(vec![v, Any::from(shared)]);
        let deep = nest(5_000, |v| Any::from(List::from_vec(vec![v])));
        let top = Array::from_vec(vec![deep, Any::from(outer)]);
        assert_eq!(witness.strong_count(), 2);
        drop(top);
        assert_eq!(witness.strong_count(), 1);
    });
}

#[test]
fn printing_deep_values_is_linear() {
    on_small_stack(|| {
        let n = 300_000;
        let a = nest(n, |v| Any::from(Array::from_vec(vec![v])));
        let text = repr_print(a.as_view()).unwrap();
        assert_eq!(text, format!("{}None{}", "(".repeat(n), ",)".repeat(n)));
        let l = nest(n, |v| Any::from(List::from_vec(vec![v])));
        let text = repr_print(l.as_view()).unwrap();
        assert_eq!(text, format!("{}None{}", "[".repeat(n), "]".repeat(n)));
        let m = nest(n, |v| {
            let mut m = Map::new();
            m.insert(Any::from("k"), v).unwrap();
            Any::from(m)
        });
        let text = repr_print(m.as_view()).unwrap();
        assert_eq!(
            text,
            format!("{}None{}", "{\"k\": ".repeat(n), "}".repeat(n))
        );
    });
}

#[test]
fn printing_shared_members_and_cycles() {
    // a member met twice prints its text twice; a list inside itself prints as `...` (as the official printer)
    let inner = Array::from_vec(vec![Any::from(1i64), Any::from("x")]);
    let outer = List::from_vec(vec![Any::from(inner.clone()), Any::from(inner)]);
    assert_eq!(
        repr_print(Any::from(outer.clone()).as_view()).unwrap(),
        "[(1, \"x\"), (1, \"x\")]"
    );
    outer.push(Any::from(outer.clone()));
    assert_eq!(
        repr_print(Any::from(outer.clone()).as_view()).unwrap(),
        "[(1, \"x\"), (1, \"x\"), ...]"
    );
    outer.clear();
    let d = Dict::new();
    d.insert(Any::from("a"), Any::from(Array::from_vec(vec![])))
        .unwrap();
    d.insert(Any::from("b"), Any::from(2.5f64)).unwrap();
    assert_eq!(
        repr_print(Any::from(d).as_view()).unwrap(),
        "{\"a\": (), \"b\": 2.5}"
    );
}
