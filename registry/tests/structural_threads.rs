//! A structural visitor or mutator is an object a callback can keep and hand to another thread
//! (`Any` is `Send + Sync` whatever it holds), but its walk state is its traversal's thread's:
//! its entries refuse other threads with a RuntimeError (two threads setting remap entries at
//! once raced on the mutator's `RefCell`s: "RefCell already borrowed", or a corrupted map).

use anyffi::abi::kTVMFFIStr;
use anyffi::structural::mutate::structural_mutate;
use anyffi::structural::visit::structural_visit;
use anyffi::{Any, AnyView, Array, Error, Function, List};
use anyffi_registry::get_global;
use std::sync::{Arc, Mutex};

const LONG: &str = "a string long enough to be an ffi.String object";

fn assert_other_thread(e: &Error, what: &str) {
    assert_eq!(e.kind(), "RuntimeError", "{e}");
    assert!(
        e.message().contains(what) && e.message().contains("thread other than"),
        "{e}"
    );
}

#[test]
fn a_mutator_refuses_other_threads_and_serves_its_own() {
    let set = get_global("ffi.StructuralMutatorVarRemapSet").unwrap();
    let get = get_global("ffi.StructuralMutatorVarRemapGet").unwrap();
    let seen = Arc::new(Mutex::new(Vec::<Error>::new()));
    let kept = Arc::new(Mutex::new(None::<Any>));
    let (seen2, kept2) = (seen.clone(), kept.clone());
    let cb = Function::from_packed(move |args| {
        let mutator = args[1].to_owned()?;
        let var = List::new();
        let val = Any::from(7i64);
        std::thread::scope(|s| {
            s.spawn(|| {
                let r = set.call(&[mutator.as_view(), AnyView::from(&var), val.as_view()]);
                seen2.lock().unwrap().push(r.unwrap_err());
                let r = get.call(&[mutator.as_view(), AnyView::from(&var)]);
                seen2.lock().unwrap().push(r.unwrap_err());
            });
        });
        // on the walk's own thread the same calls work
        set.call(&[mutator.as_view(), AnyView::from(&var), val.as_view()])?;
        let back = get.call(&[mutator.as_view(), AnyView::from(&var)])?;
        assert_eq!(back.get::<i64>()?, 7);
        *kept2.lock().unwrap() = Some(mutator);
        Ok(Any::from("replaced"))
    });
    let root = Array::from_vec(vec![Any::from(LONG)]);
    let out = structural_mutate(Any::from(root), vec![(kTVMFFIStr, cb, false)]).unwrap();
    assert_eq!(
        out.get::<Array>().unwrap().get(0).unwrap().as_str(),
        Some("replaced")
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    for e in seen.iter() {
        assert_other_thread(e, "ffi.StructuralMutator");
    }
    // kept past the walk: still refused elsewhere, still usable here
    let m = kept.lock().unwrap().take().unwrap();
    let var = List::new();
    let e = std::thread::scope(|s| {
        s.spawn(|| {
            get_global("ffi.StructuralMutatorVarRemapGet")
                .unwrap()
                .call(&[m.as_view(), AnyView::from(&var)])
                .unwrap_err()
        })
        .join()
        .unwrap()
    });
    assert_other_thread(&e, "ffi.StructuralMutator");
}

#[test]
fn a_visitor_refuses_other_threads() {
    let visit = get_global("ffi.StructuralVisitorVisit").unwrap();
    let seen = Arc::new(Mutex::new(Vec::<Error>::new()));
    let seen2 = seen.clone();
    let cb = Function::from_packed(move |args| {
        let visitor = args[1].to_owned()?;
        let value = args[0].to_owned()?;
        std::thread::scope(|s| {
            s.spawn(|| {
                let r = visit.call(&[visitor.as_view(), value.as_view()]);
                seen2.lock().unwrap().push(r.unwrap_err());
            });
        });
        Ok(Any::none())
    });
    let root = Array::from_vec(vec![Any::from(LONG)]);
    let r = structural_visit(Any::from(root).as_view(), vec![(kTVMFFIStr, cb)]);
    assert!(r.is_ok(), "{:?}", r.err());
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_other_thread(&seen[0], "ffi.StructuralVisitor");
}
