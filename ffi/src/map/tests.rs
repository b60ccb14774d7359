//! Layout and behaviour tests of `ffi.Map` / `ffi.Dict`. The expected layouts were produced by
//! the official library 0.1.15.post2 (maps built through its `ffi.Map` / `ffi.Dict` /
//! `ffi.DictSetItem` / `ffi.DictErase` globals and read back byte by byte with a ctypes probe), so
//! these tests pin slot placement, chains, iteration links and growth bit for bit. The probe is
//! `tests/probe/map_layout.py` (run it on both libraries and diff the JSON).

use super::*;
use crate::abi::*;
use crate::map_base::{MapBase, RawMap, INVALID};

/// A dense layout: slot count, shift, iteration list ends, metadata bytes, and per occupied
/// slot `(slot, key, value, prev, next)` (prev/next -1 for "none").
struct Dense {
    slots: u64,
    fib_shift: u32,
    head: i64,
    tail: i64,
    meta: &'static [u8],
    items: &'static [(u64, &'static str, &'static str, i64, i64)],
}

mod fixtures;
use fixtures::*;

/// `s:` small string, `S:` heap string, `i` int, as the probe prints them.
fn describe(v: &TVMFFIAny) -> String {
    // SAFETY: the value is live for the duration of the call.
    let view = unsafe { AnyView::from_raw(*v) };
    match v.type_index {
        kTVMFFIInt => format!("i{}", view.as_i64().unwrap()),
        kTVMFFISmallStr => format!("s:{}", view.as_str().unwrap()),
        kTVMFFIStr => format!("S:{}", view.as_str().unwrap()),
        t => format!("t{t}"),
    }
}

fn signed(v: u64) -> i64 {
    if v == INVALID {
        -1
    } else {
        v as i64
    }
}

fn check_dense(m: RawMap, want: &Dense) {
    assert!(!m.is_small());
    assert_eq!(m.num_slots(), want.slots, "slots");
    let (shift, head, tail) = m.dense_fields();
    assert_eq!(
        (shift, signed(head), signed(tail)),
        (want.fib_shift, want.head, want.tail),
        "fields"
    );
    assert_eq!(m.dense_metadata(), want.meta, "metadata bytes");
    let got: Vec<(u64, String, String, i64, i64)> = (0..m.num_slots())
        .filter_map(|i| {
            m.dense_slot(i)
                .map(|(k, v, p, n)| (i, describe(&k), describe(&v), signed(p), signed(n)))
        })
        .collect();
    let want: Vec<(u64, String, String, i64, i64)> = want
        .items
        .iter()
        .map(|&(i, k, v, p, n)| (i, k.to_string(), v.to_string(), p, n))
        .collect();
    assert_eq!(got, want, "items");
}

fn probe_key(k: i64) -> Any {
    if k % 3 != 0 {
        Any::from(format!("key{k}"))
    } else {
        Any::from(format!("a-long-key-number-{k}"))
    }
}

/// As the probe's `ffi.Map(key0, 0, key1, 1, ...)`.
fn probe_map(n: i64) -> Map {
    Map::from_pairs((0..n).map(|k| (probe_key(k), Any::from(k)))).unwrap()
}

fn raw(m: &Map) -> RawMap {
    m.raw_map()
}

fn keys(m: &Map) -> Vec<String> {
    m.iter().map(|(k, _)| describe(k.raw())).collect()
}

#[test]
fn small_layout_and_growth() {
    let mut m = Map::new();
    assert_eq!(m.layout(), (true, 2));
    let r = raw(&m);
    // SAFETY: reading the base words of a live map.
    unsafe {
        let base = r.as_ptr() as *const u8;
        assert_eq!(
            *(base.add(24) as *const usize),
            base as usize + 56,
            "data_ = obj + 56"
        );
        assert_eq!(
            *(base.add(40) as *const u64),
            (1 << 63) | 2,
            "slots_ carries the small tag"
        );
        assert_eq!(
            *(base.add(48) as *const usize),
            0,
            "no data deleter for in-place pairs"
        );
    }
    for (n, cap) in [(1, 2), (2, 2), (3, 4), (4, 4)] {
        m.insert(probe_key(n), Any::from(n)).unwrap();
        assert_eq!((m.len(), m.layout()), (n as usize, (true, cap)));
    }
    m.insert(probe_key(5), Any::from(5i64)).unwrap();
    assert_eq!(
        m.layout(),
        (false, 8),
        "a fifth entry turns the map dense with 8 slots"
    );
    assert_eq!(m.raw_map().dense_fields().0, 61);
}

#[test]
fn dense_layouts_match_the_official_library() {
    check_dense(raw(&probe_map(5)), &MAP5);
    check_dense(raw(&probe_map(6)), &MAP6);
    check_dense(raw(&probe_map(17)), &MAP17);
    let m = probe_map(17);
    assert_eq!(
        keys(&m),
        (0..17)
            .map(|k| describe(probe_key(k).raw()))
            .collect::<Vec<_>>()
    );
}

#[test]
fn colliding_int_keys_updates_and_duplicates() {
    let mut pairs: Vec<(Any, Any)> = (0..30)
        .map(|k| (Any::from(k * 7919), Any::from(k)))
        .collect();
    pairs.push((Any::from(7919i64 * 3), Any::from(-1i64)));
    pairs.push((Any::from(0i64), Any::from(-2i64)));
    let m = Map::from_pairs(pairs).unwrap();
    check_dense(raw(&m), &INT30);
    // A dense update moves the key to the end of the iteration order.
    let tail: Vec<String> = keys(&m).into_iter().rev().take(2).collect();
    assert_eq!(tail, ["i0", "i23757"]);
}

#[test]
fn full_small_map_turns_dense_on_update() {
    let mut m = Map::new();
    for (k, v) in [("a", 1i64), ("b", 2), ("c", 3), ("d", 4), ("a", 5)] {
        m.insert(Any::from(k), Any::from(v)).unwrap();
    }
    check_dense(raw(&m), &SMALL_FULL_UPDATE);
    assert_eq!(keys(&m), ["s:b", "s:c", "s:d", "s:a"]);
}

#[test]
fn dict_grows_and_erases_in_place_as_the_official_library() {
    let d = Dict::new();
    let obj = d.as_raw();
    let mut steps = Vec::new();
    let step = |d: &Dict| {
        let (small, slots) = d.layout();
        (
            if small { slots } else { 0 },
            if small { 0 } else { slots },
            d.len() as u64,
        )
    };
    for k in 0..12i64 {
        d.insert(Any::from(format!("k{k}")), Any::from(k)).unwrap();
        steps.push(step(&d));
    }
    for k in [3, 0, 11, 5] {
        assert!(d.remove(Any::from(format!("k{k}")).as_view()).unwrap());
        steps.push(step(&d));
    }
    d.insert(Any::from("k3"), Any::from(33i64)).unwrap();
    d.insert(Any::from("k1"), Any::from(11i64)).unwrap();
    steps.push(step(&d));
    assert_eq!(steps, DICT_STEPS);
    assert_eq!(d.as_raw(), obj, "the same object throughout");
    // SAFETY: the dict is alive and unshared.
    check_dense(
        unsafe { RawMap::from_ptr(d.as_ptr() as *mut MapBase) },
        &DICT_LOG_LAST,
    );
    assert!(!d.remove(Any::from("k0").as_view()).unwrap());
    d.clear().unwrap();
    assert_eq!((d.len(), d.layout()), (0, (false, 16)));
}

#[test]
fn small_dict_growth_adopts_the_new_pairs() {
    let d = Dict::new();
    for (k, v) in [("x", 1i64), ("y", 2), ("z", 3)] {
        d.insert(Any::from(k), Any::from(v)).unwrap();
    }
    d.remove(Any::from("x").as_view()).unwrap();
    let r = d.raw_map();
    // SAFETY: reading the base words of a live dict.
    unsafe {
        let base = r.as_ptr() as *const u8;
        assert_ne!(
            *(base.add(24) as *const usize),
            base as usize + 56,
            "pairs live in the grown object"
        );
        assert_ne!(
            *(base.add(48) as *const usize),
            0,
            "released through a data deleter"
        );
    }
    assert_eq!(d.layout(), (true, 4));
    let items: Vec<(String, i64)> = d
        .to_vec()
        .iter()
        .map(|(k, v)| (k.get::<String>().unwrap(), v.get::<i64>().unwrap()))
        .collect();
    assert_eq!(items, [("y".to_string(), 2), ("z".to_string(), 3)]);
}

#[test]
fn copy_on_write_leaves_other_holders_alone() {
    let mut a = probe_map(6);
    let b = a.clone();
    a.insert(Any::from("new"), Any::from(1i64)).unwrap();
    assert!(!a.same_as(&b));
    assert_eq!((a.len(), b.len()), (7, 6));
    check_dense(raw(&b), &MAP6);
    // A unique map is updated in place.
    let before = a.as_raw();
    a.insert(Any::from("new"), Any::from(2i64)).unwrap();
    assert_eq!(a.as_raw(), before);
    assert_eq!(a.get_str("new").unwrap().unwrap().as_i64(), Some(2));
    let mut c = a.clone();
    assert!(c.remove(Any::from("key1").as_view()).unwrap());
    assert_eq!((a.len(), c.len()), (7, 6));
    assert!(a.contains_key(Any::from("key1").as_view()).unwrap());
}

#[test]
fn erase_keeps_chains_and_order() {
    let mut m = probe_map(40);
    let mut expect: Vec<i64> = (0..40).collect();
    for k in [5i64, 0, 39, 17, 18, 3, 21, 30, 31, 32] {
        assert!(m.remove(probe_key(k).as_view()).unwrap());
        expect.retain(|&x| x != k);
        for &x in &expect {
            assert_eq!(
                m.get(probe_key(x).as_view())
                    .unwrap()
                    .and_then(|v| v.as_i64()),
                Some(x),
                "lookup {x}"
            );
        }
        let order: Vec<i64> = m.iter().map(|(_, v)| v.as_i64().unwrap()).collect();
        assert_eq!(order, expect);
    }
    assert!(!m.remove(probe_key(5).as_view()).unwrap());
}

#[test]
fn rehash_doubles_and_keeps_insertion_order() {
    let mut m = Map::new();
    let mut slots = Vec::new();
    for k in 0..1000i64 {
        m.insert(Any::from(format!("key-{k}")), Any::from(k))
            .unwrap();
        let s = m.layout().1;
        if slots.last() != Some(&s) {
            slots.push(s);
        }
    }
    // The official library also ends at 2048 slots for these keys (a chain found no empty slot
    // within its 126 jumps before the load factor was reached).
    assert_eq!(slots, [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048]);
    assert_eq!(
        m.iter()
            .map(|(_, v)| v.as_i64().unwrap())
            .collect::<Vec<_>>(),
        (0..1000).collect::<Vec<_>>()
    );
    for k in 0..1000i64 {
        assert_eq!(
            m.get_str(&format!("key-{k}")).unwrap().unwrap().as_i64(),
            Some(k)
        );
    }
    assert!(m.get_str("key-1000").unwrap().is_none());
}

#[test]
fn entries_are_released() {
    let s = Any::from("a value string long enough for the heap");
    let obj = s.as_view().as_object().unwrap();
    {
        let mut m = Map::new();
        let d = Dict::new();
        for k in 0..20i64 {
            m.insert(Any::from(k), s.clone()).unwrap();
            d.insert(Any::from(k), s.clone()).unwrap();
        }
        let copy = m.clone();
        m.insert(Any::from(0i64), Any::none()).unwrap();
        d.remove(Any::from(1i64).as_view()).unwrap();
        assert_eq!(obj.strong_count(), 2 + 20 + 19 + 19);
        drop(copy);
    }
    assert_eq!(obj.strong_count(), 2);
}

#[test]
fn failing_custom_hash_leaves_the_map_intact() {
    use crate::function::Function;
    let ti =
        crate::type_table::get_or_alloc_index("maptest.BadHash", -1, 1, 0, true, kTVMFFIObject)
            .unwrap();
    let hook = Function::from_packed(|_| Err(crate::Error::value_error("no hash for you")));
    // SAFETY: a live Function value.
    unsafe { crate::type_table::register_attr(ti, "__any_hash__", Any::from(hook).raw()) }.unwrap();
    // A fresh header-only object of the test type.
    let bad = Any::from(crate::object::new_object(crate::object::Object {
        header: TVMFFIObject::with_index::<crate::object::Object>(ti),
    }));
    let mut m = probe_map(6);
    let e = m.insert(bad.clone(), Any::from(1i64)).unwrap_err();
    assert_eq!(
        (e.kind(), e.message().as_ref()),
        ("ValueError", "no hash for you")
    );
    check_dense(raw(&m), &MAP6);
    assert!(m.get(bad.as_view()).is_err());
    let d = Dict::new();
    assert!(d.insert(Any::from(1i64), Any::from(1i64)).is_ok());
    assert!(
        d.insert(bad, Any::none()).is_ok(),
        "small maps compare, they do not hash"
    );
}
