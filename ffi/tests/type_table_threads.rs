//! Fields and methods registered while other threads read the type's info without a lock (a
//! structural walk, `repr`, `FieldCursor`): the table grew the field array in place, freeing the
//! buffer a reader was on; `ffi.ReprPrint` on another thread segfaulted (session 24 audit). Its
//! own binary: freed memory is filled with a pattern (`M_PERTURB`) so a stale read shows.

use anyffi::abi::*;
use anyffi::reflection::FieldCursor;
use anyffi::type_table::{get_or_alloc_index, register_field, type_entry};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

#[test]
fn fields_registered_while_readers_walk_them() {
    // SAFETY: mallopt only sets an allocator option.
    unsafe { libc::mallopt(libc::M_PERTURB, 0xaa) };
    let names: Vec<String> = (0..400).map(|i| format!("f{i}")).collect();
    let done = AtomicBool::new(false);
    // the type being registered: the readers walk it, where the array grows
    let current = AtomicI32::new(-1);
    let types: Vec<i32> = (0..32)
        .map(|t| {
            let key = format!("tt_threads.T{t}");
            get_or_alloc_index(&key, -1, 1, 0, false, kTVMFFIObject).unwrap()
        })
        .collect();
    std::thread::scope(|s| {
        let types = &types;
        for _ in 0..2 {
            let (done, current) = (&done, &current);
            s.spawn(move || {
                let mut seen = 0usize;
                while !done.load(Ordering::Acquire) {
                    let ti = current.load(Ordering::Acquire);
                    if ti >= 0 {
                        let info = &type_entry(ti).unwrap().info;
                        let mut cursor = FieldCursor::new(info);
                        let mut i = 0;
                        while let Some(f) = cursor.next_field() {
                            assert_eq!(f.name(), format!("f{i}"), "a stale or torn field");
                            assert_eq!(f.info().offset, 24 + 8 * i as i64);
                            i += 1;
                        }
                        seen += i;
                    }
                }
                let _ = seen;
            });
        }
        for &ti in types.iter() {
            current.store(ti, Ordering::Release);
            for (i, name) in names.iter().enumerate() {
                let field = TVMFFIFieldInfo {
                    name: TVMFFIByteArray {
                        data: name.as_ptr() as *const _,
                        size: name.len(),
                    },
                    doc: TVMFFIByteArray {
                        data: std::ptr::null(),
                        size: 0,
                    },
                    metadata: TVMFFIByteArray {
                        data: std::ptr::null(),
                        size: 0,
                    },
                    flags: 0,
                    size: 8,
                    alignment: 8,
                    offset: 24 + 8 * i as i64,
                    getter: None,
                    setter: std::ptr::null_mut(),
                    default_value_or_factory: TVMFFIAny::NONE,
                    field_static_type_index: kTVMFFIInt,
                };
                // SAFETY: a plain int64 field, no getter (the info is only read).
                unsafe { register_field(ti, &field) }.unwrap();
            }
        }
        done.store(true, Ordering::Release);
    });
}
