//! A List shared between threads: `ffi.ListGetItem` reads under the container lock while other
//! threads append and pop (it read the buffer unlocked: a reallocated buffer or a popped
//! element was read after free, aborting the process in most runs).

use anyffi::abi::kTVMFFIStr;
use anyffi::{Any, AnyView};
use anyffi_registry::get_global;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[test]
fn list_get_item_races_append_and_pop() {
    let list = get_global("ffi.List").unwrap().call(&[]).unwrap();
    let append = get_global("ffi.ListAppend").unwrap();
    let pop = get_global("ffi.ListPop").unwrap();
    let get = get_global("ffi.ListGetItem").unwrap();
    let size = get_global("ffi.ListSize").unwrap();
    let list = Arc::new(list);
    let done = Arc::new(AtomicBool::new(false));
    std::thread::scope(|s| {
        for _ in 0..2 {
            let (list, done, get, size) = (list.clone(), done.clone(), get.clone(), size.clone());
            s.spawn(move || {
                let mut reads = 0u64;
                while !done.load(Ordering::Relaxed) || reads == 0 {
                    let n = size
                        .call(&[AnyView::from(&*list)])
                        .unwrap()
                        .get::<i64>()
                        .unwrap();
                    if n == 0 {
                        continue;
                    }
                    // the writer may pop in between: IndexError is fine, anything else is not
                    if let Ok(v) = get.call(&[AnyView::from(&*list), AnyView::from(n / 2)]) {
                        assert_eq!(v.type_index(), kTVMFFIStr);
                        reads += 1;
                    }
                }
            });
        }
        for i in 0..60_000 {
            let s = Any::from(format!("element string number {i} (heap allocated)").as_str());
            append
                .call(&[AnyView::from(&*list), AnyView::from(&s)])
                .unwrap();
            if i >= 8 {
                pop.call(&[AnyView::from(&*list), AnyView::from(0i64)])
                    .unwrap();
            }
        }
        done.store(true, Ordering::Relaxed);
    });
}
