//! `ffi.Array*`, `ffi.List*`, `ffi.Map*`, `ffi.Dict*`, the MISSING/KWARGS sentinels,
//! `ffi.ContainerFindFirstNonCPUDevice` and `ffi.GetRegisteredTypeKeys` (spec §8), with the
//! official names, signatures, errors and in-place/copy semantics.
//!
//! Rationale: parameters the official library declares as `List<Any>` / `Dict<Any, Any>` (the
//! mutating ones) accept an Array / a Map too, converted into a fresh List / Dict as the C++
//! conversion does, so such a call succeeds without touching the argument. Parameters declared
//! as `const ListObj*` etc. accept the exact type only.

use std::sync::atomic::{AtomicU64, Ordering};

use anyffi::abi::{
    kDLCPU, kTVMFFIArray, kTVMFFIDict, kTVMFFIList, kTVMFFIMap, kTVMFFITensor, DLDevice,
};
use anyffi::hash::any_equal;
use anyffi::map_base::{MapBase, RawMap};
use anyffi::{
    sentinel, Any, AnyView, Array, Dict, Error, FromAny, Function, List, Map, ObjectRef, Result,
};

use crate::global::Registrar;

/// A `List[Any]` argument: a List itself, or a new List copied from an Array.
struct ListArg(List);

impl FromAny for ListArg {
    const TYPE_NAME: &'static str = "ffi.List";
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        if let Some(l) = v.as_object_of::<anyffi::ListObj>() {
            return Some(ListArg(l));
        }
        let a = v.as_object_of::<anyffi::ArrayObj>()?;
        Some(ListArg(List::from_vec(a.to_vec())))
    }
}

/// A `Dict[Any, Any]` argument: a Dict itself, or a new Dict copied from a Map.
struct DictArg(Dict);

impl FromAny for DictArg {
    const TYPE_NAME: &'static str = "ffi.Dict";
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        if let Some(d) = v.as_object_of::<anyffi::DictObj>() {
            return Some(DictArg(d));
        }
        let m = v.as_object_of::<anyffi::MapObj>()?;
        Dict::from_pairs(m.to_vec()).ok().map(DictArg)
    }
}

fn contains(items: &[Any], value: &Any) -> Result<bool> {
    for e in items {
        if any_equal(e.raw(), value.raw())? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Builds a map kind from `k1, v1, k2, v2, ...` by successive insertion.
fn pairs_of<'a>(
    name: &str,
    args: &'a [AnyView<'a>],
) -> Result<impl Iterator<Item = Result<(Any, Any)>> + 'a> {
    if args.len() % 2 != 0 {
        return Err(Error::value_error(format!(
            "{name}: expected an even number of arguments (key, value, ...), got {}",
            args.len()
        )));
    }
    Ok(args
        .chunks_exact(2)
        .map(|kv| Ok((kv[0].to_owned()?, kv[1].to_owned()?))))
}

const KEY_ERROR: &str = "key is not in Map";

/// The storage of a Map or Dict handle.
fn storage<T: anyffi::ObjectType>(m: &ObjectRef<T>) -> ObjectRef<MapBase> {
    m.clone()
        .upcast()
        .downcast::<MapBase>()
        .ok()
        .expect("a map kind")
}

/// `it(0)` = current key, `it(1)` = current value, `it(other)` = advance; "not at end".
/// The functor holds a reference to the map, and checks its position against the current
/// state on every call (a Dict may change between calls).
fn forward_iter_functor(name: &'static str, keep: ObjectRef<MapBase>) -> Function {
    // SAFETY: `keep` holds the map alive while the functor exists.
    let pos = AtomicU64::new(unsafe { RawMap::of(&keep) }.begin());
    Function::from_typed(name, move |command: i64| -> Result<Any> {
        // SAFETY: as above.
        let map = unsafe { RawMap::of(&keep) };
        let p = pos.load(Ordering::Relaxed);
        match command {
            0 | 1 => {
                if !map.is_valid_pos(p) {
                    return Err(Error::index_error(format!(
                        "{name}: the iterator is past the end"
                    )));
                }
                // SAFETY: a valid position of a map kept alive by `keep`; the value is copied.
                let kv = unsafe { &*map.kv_at(p) };
                let v = if command == 0 { &kv.key } else { &kv.value };
                // SAFETY: stored values are live; to_owned takes a new reference.
                unsafe { AnyView::from_raw(*v) }.to_owned()
            }
            _ => {
                let next = if map.is_valid_pos(p) {
                    map.advance(p)
                } else {
                    map.end()
                };
                pos.store(next, Ordering::Relaxed);
                Ok(Any::from(next != map.end()))
            }
        }
    })
}

/// The first non-CPU device of a tensor found in `v`, scanning containers recursively.
fn first_non_cpu_device(v: &AnyView<'_>) -> Option<DLDevice> {
    match v.type_index() {
        kTVMFFITensor => {
            let t = v.as_object_of::<anyffi::TensorObj>()?;
            (t.dl_tensor.device.device_type != kDLCPU).then_some(t.dl_tensor.device)
        }
        kTVMFFIArray => v
            .as_object_of::<anyffi::ArrayObj>()?
            .iter()
            .find_map(|e| first_non_cpu_device(&e)),
        kTVMFFIList => v
            .as_object_of::<anyffi::ListObj>()?
            .to_vec()
            .iter()
            .find_map(|e| first_non_cpu_device(&e.as_view())),
        kTVMFFIMap => {
            let m = v.as_object_of::<anyffi::MapObj>()?;
            m.iter().find_map(|(_, val)| first_non_cpu_device(&val))
        }
        kTVMFFIDict => {
            let d = v.as_object_of::<anyffi::DictObj>()?;
            d.to_vec()
                .iter()
                .find_map(|(_, val)| first_non_cpu_device(&val.as_view()))
        }
        _ => None,
    }
}

pub(super) fn register(r: &mut Registrar<'_>) {
    register_array(r);
    register_list(r);
    register_map(r);
    register_dict(r);
    register_misc(r);
}

fn register_array(r: &mut Registrar<'_>) {
    r.packed(
        "ffi.Array",
        "Array(*args): a new ffi.Array of the arguments.",
        |args| Ok(Any::from(Array::from_views(args)?)),
    );
    r.typed(
        "ffi.ArrayGetItem",
        "ArrayGetItem(a, i): element i (IndexError when out of range).",
        |a: Array, i: i64| a.at(i),
    );
    r.typed(
        "ffi.ArraySize",
        "ArraySize(a): number of elements.",
        |a: Array| a.len() as i64,
    );
    r.typed(
        "ffi.ArrayContains",
        "ArrayContains(a, v): whether an element equals v (AnyEqual).",
        |a: Array, v: Any| contains(a.as_slice(), &v),
    );
}

fn register_list(r: &mut Registrar<'_>) {
    r.packed(
        "ffi.List",
        "List(*args): a new ffi.List of the arguments.",
        |args| Ok(Any::from(List::from_views(args)?)),
    );
    r.typed(
        "ffi.ListGetItem",
        "ListGetItem(l, i): element i (IndexError when out of range).",
        |l: List, i: i64| l.at(i),
    );
    r.typed(
        "ffi.ListSetItem",
        "ListSetItem(l, i, v): sets element i in place.",
        |l: ListArg, i: i64, v: Any| l.0.set(i, v),
    );
    r.typed(
        "ffi.ListSize",
        "ListSize(l): number of elements.",
        |l: List| l.len() as i64,
    );
    r.typed(
        "ffi.ListContains",
        "ListContains(l, v): whether an element equals v (AnyEqual).",
        |l: List, v: Any| contains(&l.to_vec(), &v),
    );
    r.typed(
        "ffi.ListAppend",
        "ListAppend(l, v): appends v in place.",
        |l: ListArg, v: Any| l.0.push(v),
    );
    r.typed(
        "ffi.ListInsert",
        "ListInsert(l, i, v): inserts v before position i.",
        |l: ListArg, i: i64, v: Any| l.0.insert(i, v),
    );
    r.typed(
        "ffi.ListPop",
        "ListPop(l, i): removes and returns element i.",
        |l: ListArg, i: i64| l.0.pop(i),
    );
    r.typed(
        "ffi.ListErase",
        "ListErase(l, i): removes element i.",
        |l: ListArg, i: i64| l.0.remove(i),
    );
    r.typed(
        "ffi.ListEraseRange",
        "ListEraseRange(l, a, b): removes elements [a, b).",
        |l: ListArg, a: i64, b: i64| l.0.erase_range(a, b),
    );
    r.typed(
        "ffi.ListReplaceSlice",
        "ListReplaceSlice(l, a, b, rep): replaces elements [a, b) by the elements of rep.",
        |l: ListArg, a: i64, b: i64, rep: ListArg| l.0.replace_slice(a, b, &rep.0),
    );
    r.typed(
        "ffi.ListReverse",
        "ListReverse(l): reverses in place.",
        |l: ListArg| l.0.reverse(),
    );
    r.typed(
        "ffi.ListClear",
        "ListClear(l): removes every element.",
        |l: ListArg| l.0.clear(),
    );
    r.typed(
        "ffi.ListReserve",
        "ListReserve(l, n): makes room for n elements.",
        |l: ListArg, n: i64| l.0.reserve(n),
    );
}

fn register_map(r: &mut Registrar<'_>) {
    r.packed(
        "ffi.Map",
        "Map(k1, v1, ...): a new ffi.Map; a later duplicate key overwrites.",
        |args| {
            let mut m = Map::new();
            for kv in pairs_of("ffi.Map", args)? {
                let (k, v) = kv?;
                m.insert(k, v)?;
            }
            Ok(Any::from(m))
        },
    );
    r.typed("ffi.MapSize", "MapSize(m): number of entries.", |m: Map| {
        m.len() as i64
    });
    r.typed(
        "ffi.MapGetItem",
        "MapGetItem(m, k): the value of k (KeyError when absent).",
        |m: Map, k: Any| match m.get(k.as_view())? {
            Some(v) => v.to_owned(),
            None => Err(Error::key_error(KEY_ERROR)),
        },
    );
    r.typed(
        "ffi.MapCount",
        "MapCount(m, k): 1 when k is present, else 0.",
        |m: Map, k: Any| m.contains_key(k.as_view()).map(i64::from),
    );
    r.typed(
        "ffi.MapForwardIterFunctor",
        "MapForwardIterFunctor(m): it(0) key, it(1) value, it(2) advance and return not-at-end.",
        |m: Map| forward_iter_functor("ffi.MapForwardIterFunctor.<it>", storage(&m)),
    );
    r.typed(
        "ffi.MapGetItemOrMissing",
        "MapGetItemOrMissing(m, k): the value of k, or the MISSING object.",
        |m: Map, k: Any| match m.get(k.as_view())? {
            Some(v) => v.to_owned(),
            None => Ok(Any::from(sentinel::missing())),
        },
    );
}

fn register_dict(r: &mut Registrar<'_>) {
    r.packed(
        "ffi.Dict",
        "Dict(k1, v1, ...): a new ffi.Dict; a later duplicate key overwrites.",
        |args| {
            let d = Dict::new();
            for kv in pairs_of("ffi.Dict", args)? {
                let (k, v) = kv?;
                d.insert(k, v)?;
            }
            Ok(Any::from(d))
        },
    );
    r.typed(
        "ffi.DictSize",
        "DictSize(d): number of entries.",
        |d: Dict| d.len() as i64,
    );
    r.typed(
        "ffi.DictGetItem",
        "DictGetItem(d, k): the value of k (KeyError when absent).",
        |d: Dict, k: Any| {
            d.get(k.as_view())?
                .ok_or_else(|| Error::key_error(KEY_ERROR))
        },
    );
    r.typed(
        "ffi.DictSetItem",
        "DictSetItem(d, k, v): sets k to v in place.",
        |d: DictArg, k: Any, v: Any| d.0.insert(k, v),
    );
    r.typed(
        "ffi.DictCount",
        "DictCount(d, k): 1 when k is present, else 0.",
        |d: Dict, k: Any| d.contains_key(k.as_view()).map(i64::from),
    );
    r.typed(
        "ffi.DictErase",
        "DictErase(d, k): removes k in place (no error when absent).",
        |d: DictArg, k: Any| d.0.remove(k.as_view()).map(|_| ()),
    );
    r.typed(
        "ffi.DictClear",
        "DictClear(d): removes every entry in place.",
        |d: DictArg| d.0.clear(),
    );
    r.typed(
        "ffi.DictForwardIterFunctor",
        "DictForwardIterFunctor(d): it(0) key, it(1) value, it(2) advance and return not-at-end.",
        |d: Dict| forward_iter_functor("ffi.DictForwardIterFunctor.<it>", storage(&d)),
    );
    r.typed(
        "ffi.DictGetItemOrMissing",
        "DictGetItemOrMissing(d, k): the value of k, or the MISSING object.",
        |d: Dict, k: Any| -> Result<Any> {
            Ok(d.get(k.as_view())?
                .unwrap_or_else(|| Any::from(sentinel::missing())))
        },
    );
}

fn register_misc(r: &mut Registrar<'_>) {
    r.typed(
        "ffi.GetInvalidObject",
        "GetInvalidObject(): the MISSING sentinel object.",
        sentinel::missing,
    );
    r.typed(
        "ffi.GetKwargsObject",
        "GetKwargsObject(): the KWARGS sentinel object.",
        sentinel::kwargs,
    );
    r.typed(
        "ffi.ContainerFindFirstNonCPUDevice",
        "ContainerFindFirstNonCPUDevice(x): the device of the first non-CPU tensor in x (recursing \
         into Array/List/Map/Dict values), else cpu:0.",
        |x: Any| first_non_cpu_device(&x.as_view()).unwrap_or(DLDevice { device_type: kDLCPU, device_id: 0 }),
    );
    r.typed(
        "ffi.GetRegisteredTypeKeys",
        "GetRegisteredTypeKeys(): every registered type key, by type index.",
        || -> Array {
            anyffi::type_table::registered_keys()
                .into_iter()
                .map(Any::from)
                .collect()
        },
    );
}
