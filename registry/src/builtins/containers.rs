//! `ffi.Array*`, `ffi.List*`, `ffi.Map*`, `ffi.Dict*`, the MISSING/KWARGS sentinels,
//! `ffi.ContainerFindFirstNonCPUDevice` and `ffi.GetRegisteredTypeKeys` (spec §8), with the
//! official names, signatures, errors and in-place/copy semantics.
//!
//! Rationale: parameters the official library declares as `List<Any>` / `Dict<Any, Any>` (the
//! mutating ones) accept an Array / a Map too, converted into a fresh List / Dict as the C++
//! conversion does, so such a call succeeds without touching the argument. Parameters declared
//! as `const ListObj*` etc. accept the exact type only.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};

use anyffi::abi::{
    kDLCPU, kTVMFFIArray, kTVMFFIByteArrayPtr, kTVMFFIDict, kTVMFFIList, kTVMFFIMap,
    kTVMFFIObjectRValueRef, kTVMFFIRawStr, kTVMFFITensor, DLDevice, TVMFFIAny,
};
use anyffi::function::signature;
use anyffi::hash::any_equal;
use anyffi::map_base::{clone_raw, MapBase, RawMap};
use anyffi::seq::SeqObj;
use anyffi::{
    sentinel, Any, AnyView, Array, Dict, Error, FromAny, Function, IntoAny, List, Map, ObjectRef,
    Result,
};

use crate::global::Registrar;

/// A `List[Any]` argument: a List itself, or a new List copied from an Array.
struct ListArg(List);

impl FromAny for ListArg {
    const TYPE_NAME: &'static str = "List<Any>";
    fn schema() -> String {
        r#"{"type":"ffi.List","args":[{"type":"Any"}]}"#.into()
    }
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
    const TYPE_NAME: &'static str = "Dict<Any, Any>";
    fn schema() -> String {
        r#"{"type":"ffi.Dict","args":[{"type":"Any"},{"type":"Any"}]}"#.into()
    }
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
        // SAFETY: the values are stored in, or borrowed from, live objects.
        if unsafe { any_equal(e.raw(), value.raw()) }? {
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

/// The signature of a hand-read (borrowing) function, for errors worded as the typed ones.
struct Sig {
    name: &'static str,
    params: &'static [&'static str],
    ret: &'static str,
}

impl Sig {
    fn count(&self, args: &[AnyView<'_>]) -> Result<()> {
        if args.len() == self.params.len() {
            return Ok(());
        }
        Err(Error::type_error(format!(
            "Mismatched number of arguments when calling: `{}`. Expected {} but got {} arguments",
            signature(self.name, self.params, self.ret),
            self.params.len(),
            args.len()
        )))
    }

    /// The official wording; the type is named by the value's own type index (so a short
    /// string reads `ffi.SmallStr`, as in the official message).
    #[cold]
    fn mismatch(&self, i: usize, got: &AnyView<'_>) -> Error {
        Error::type_error(format!(
            "Mismatched type on argument #{i} when calling: `{}`. Expected `{}` but got `{}`",
            signature(self.name, self.params, self.ret),
            self.params[i],
            anyffi::type_table::type_key_of(got.type_index())
        ))
    }

    /// Argument `i` as a borrowed object of exact type `ti` (valid for the call).
    fn object(
        &self,
        args: &[AnyView<'_>],
        i: usize,
        ti: i32,
    ) -> Result<*mut anyffi::abi::TVMFFIObject> {
        let v = &args[i];
        match v.as_object_ptr() {
            Some(p) if v.type_index() == ti && !p.is_null() => Ok(p),
            _ => Err(self.mismatch(i, v)),
        }
    }

    /// Argument `i` as an int (Int or Bool, as the typed conversion accepts).
    fn int(&self, args: &[AnyView<'_>], i: usize) -> Result<i64> {
        args[i].as_i64().ok_or_else(|| self.mismatch(i, &args[i]))
    }

    /// Argument `i` as a borrowed map of exact type `ti` (valid for the call).
    fn map(&self, args: &[AnyView<'_>], i: usize, ti: i32) -> Result<RawMap> {
        let v = &args[i];
        if v.type_index() != ti {
            return Err(self.mismatch(i, v));
        }
        let obj = v
            .as_object_ptr()
            .filter(|p| !p.is_null())
            .ok_or_else(|| self.mismatch(i, v))?;
        // SAFETY: a borrowed argument of a map type stays alive (and, by the calling convention,
        // untouched by others) for the duration of the call.
        Ok(unsafe { RawMap::from_ptr(obj as *mut MapBase) })
    }
}

/// A key argument: borrowed as is, or converted when it is a raw string, byte array or moved
/// object (which hash as the String/Bytes/object they stand for).
enum Key<'a> {
    Borrowed(&'a TVMFFIAny),
    Owned(Any),
}

impl Key<'_> {
    fn of<'a>(v: &'a AnyView<'_>) -> Result<Key<'a>> {
        Ok(match v.type_index() {
            kTVMFFIRawStr | kTVMFFIByteArrayPtr | kTVMFFIObjectRValueRef => {
                Key::Owned(v.to_owned()?)
            }
            _ => Key::Borrowed(v.raw()),
        })
    }

    fn raw(&self) -> &TVMFFIAny {
        match self {
            Key::Borrowed(r) => r,
            Key::Owned(a) => a.raw(),
        }
    }
}

/// The value stored for key `args[1]` in map `args[0]` (of exact type `ti`), as a new reference.
fn lookup(sig: &Sig, args: &[AnyView<'_>], ti: i32) -> Result<Option<Any>> {
    sig.count(args)?;
    let map = sig.map(args, 0, ti)?;
    let key = Key::of(&args[1])?;
    // A Dict may be changed in place by another holder (another thread, or a key hook of
    // this very lookup); a Map never is while shared (copy-on-write), so it needs neither.
    let dict = ti == kTVMFFIDict;
    let _g = dict.then(|| anyffi::seq::container_lock(map.as_ptr() as *const _));
    let _l = dict.then(|| anyffi::map::LookupGuard::enter(map.as_ptr()));
    Ok(map.find(key.raw())?.map(|pos| {
        // SAFETY: a valid position of the borrowed map; the copy takes its own reference.
        unsafe { Any::from_raw(clone_raw(&(*map.kv_at(pos)).value)) }
    }))
}

/// Registers the borrowing lookups `ffi.<Kind>GetItem`, `ffi.<Kind>Count` and
/// `ffi.<Kind>GetItemOrMissing` of the map kind `ti` (hot paths: no reference is taken on the
/// map or the key).
fn register_lookups(r: &mut Registrar<'_>, kind: &'static str, ti: i32) {
    let params: &'static [&'static str] = if ti == kTVMFFIMap {
        &["ffi.Map", "Any"]
    } else {
        &["ffi.Dict", "Any"]
    };
    let name = |suffix: &str| -> &'static str {
        Box::leak(format!("ffi.{kind}{suffix}").into_boxed_str())
    };

    let get = Sig {
        name: name("GetItem"),
        params,
        ret: "Any",
    };
    let doc = format!("{kind}GetItem(m, k): the value of k (KeyError when absent).");
    let f = move |args: &[AnyView<'_>]| {
        lookup(&get, args, ti)?.ok_or_else(|| Error::key_error(KEY_ERROR))
    };
    register_as::<_, Result<Any>>(r, ti, &format!("ffi.{kind}GetItem"), &doc, f);

    let count = Sig {
        name: name("Count"),
        params,
        ret: "int",
    };
    let doc = format!("{kind}Count(m, k): 1 when k is present, else 0.");
    let f =
        move |args: &[AnyView<'_>]| Ok(Any::from(i64::from(lookup(&count, args, ti)?.is_some())));
    register_as::<_, i64>(r, ti, &format!("ffi.{kind}Count"), &doc, f);

    let missing = Sig {
        name: name("GetItemOrMissing"),
        params,
        ret: "Any",
    };
    let doc = format!("{kind}GetItemOrMissing(m, k): the value of k, or the MISSING object.");
    let f = move |args: &[AnyView<'_>]| {
        Ok(lookup(&missing, args, ti)?.unwrap_or_else(|| Any::from(sentinel::missing())))
    };
    register_as::<_, Result<Any>>(r, ti, &format!("ffi.{kind}GetItemOrMissing"), &doc, f);
}

/// Registers `<name>(seq, i) -> Any` for Array or List (the sequence is borrowed, not retained).
fn register_seq_get_item(r: &mut Registrar<'_>, name: &'static str, ti: i32) {
    let params: &'static [&'static str] = if ti == kTVMFFIArray {
        &["ffi.Array", "int"]
    } else {
        &["ffi.List", "int"]
    };
    let sig = Sig {
        name,
        params,
        ret: "Any",
    };
    let short = name.trim_start_matches("ffi.");
    let doc = format!("{short}(seq, i): element i (IndexError when out of range).");
    let f = move |args: &[AnyView<'_>]| {
        sig.count(args)?;
        let obj = sig.object(args, 0, ti)?;
        let i = sig.int(args, 1)?;
        // A List may be changed in place by another holder (another thread): read it under
        // the container lock, as `ListObj::at` does; an Array is never mutated while shared.
        let _g = (ti == kTVMFFIList).then(|| anyffi::seq::container_lock(obj as *const _));
        // SAFETY: a borrowed Array/List argument is alive for the call; both start with the
        // sequence base, whose `at` copies the element out.
        unsafe { (*(obj as *const SeqObj)).at(i) }
    };
    if ti == kTVMFFIArray {
        r.packed_as(
            name,
            &doc,
            |_: Array, _: i64| -> Result<Any> { unreachable!("schema only") },
            f,
        );
    } else {
        r.packed_as(
            name,
            &doc,
            |_: List, _: i64| -> Result<Any> { unreachable!("schema only") },
            f,
        );
    }
}

/// Registers a borrowing function `f` described by the typed signature `(Map|Dict, Any) -> R`.
fn register_as<F, R>(r: &mut Registrar<'_>, ti: i32, name: &str, doc: &str, f: F)
where
    F: Fn(&[AnyView<'_>]) -> Result<Any> + Send + Sync + 'static,
    R: anyffi::function::FnReturn + 'static,
{
    if ti == kTVMFFIMap {
        r.packed_as(
            name,
            doc,
            |_: Map, _: Any| -> R { unreachable!("schema only") },
            f,
        );
    } else {
        r.packed_as(
            name,
            doc,
            |_: Dict, _: Any| -> R { unreachable!("schema only") },
            f,
        );
    }
}

/// The storage of a Map or Dict handle.
fn storage<T: anyffi::ObjectType>(m: &ObjectRef<T>) -> ObjectRef<MapBase> {
    match m.clone().upcast().downcast::<MapBase>() {
        Ok(base) => base,
        Err(_) => unreachable!("a map kind"),
    }
}

/// `it(0)` = current key, `it(1)` = current value, `it(other)` = advance; "not at end".
/// The functor holds a reference to the map, and checks its position against the current
/// state on every call (a Dict may change between calls).
fn forward_iter_functor(name: &'static str, keep: ObjectRef<MapBase>) -> Function {
    // SAFETY: `keep` holds the map alive while the functor exists.
    let start = unsafe { RawMap::of(&keep) };
    let pos = AtomicU64::new(start.begin());
    // A Dict changed under the iterator (an insertion or removal: its positions may now name
    // other entries, or none) ends the iteration with an error, as a Python dict's does.
    let token = (start.type_index() == kTVMFFIDict).then(|| start.iteration_token());
    Function::from_typed(name, move |command: i64| -> Result<Any> {
        // SAFETY: as above.
        let map = unsafe { RawMap::of(&keep) };
        let _g = anyffi::seq::container_lock(keep.as_raw());
        if token.is_some_and(|t| t != map.iteration_token()) {
            return Err(Error::runtime_error(format!(
                "{name}: the dict changed during iteration (an entry added or removed, or its \
                 storage rebuilt)"
            )));
        }
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

/// The device of the first non-CPU tensor in `root`, in depth-first pre-order over Array/List
/// elements and Map/Dict values.
///
/// Iterative (an explicit stack of owned values) so that nesting of any depth cannot overflow the
/// thread's stack, and each container is entered once (keyed by its object address) so that a
/// List/Dict that contains itself terminates and a shared sub-value is scanned only once. A
/// container seen before held no non-CPU tensor (else the walk would have returned), so skipping
/// it keeps the result of the recursive definition.
fn first_non_cpu_device(root: &AnyView<'_>) -> Option<DLDevice> {
    let mut seen: HashSet<usize> = HashSet::new();
    let mut stack: Vec<Any> = vec![root.to_owned().ok()?];
    while let Some(v) = stack.pop() {
        let view = v.as_view();
        let ti = view.type_index();
        if ti == kTVMFFITensor {
            if let Some(t) = view.as_object_of::<anyffi::TensorObj>() {
                if t.dl_tensor.device.device_type != kDLCPU {
                    return Some(t.dl_tensor.device);
                }
            }
            continue;
        }
        if !matches!(ti, kTVMFFIArray | kTVMFFIList | kTVMFFIMap | kTVMFFIDict) {
            continue;
        }
        let Some(ptr) = view.as_object_ptr() else {
            continue;
        };
        if !seen.insert(ptr as usize) {
            continue;
        }
        let children: Vec<Any> = match ti {
            kTVMFFIArray => view
                .as_object_of::<anyffi::ArrayObj>()
                .map(|a| a.to_vec())
                .unwrap_or_default(),
            kTVMFFIList => view
                .as_object_of::<anyffi::ListObj>()
                .map(|l| l.to_vec())
                .unwrap_or_default(),
            kTVMFFIMap => view
                .as_object_of::<anyffi::MapObj>()
                .map(|m| m.to_vec().into_iter().map(|(_, val)| val).collect())
                .unwrap_or_default(),
            _ => view
                .as_object_of::<anyffi::DictObj>()
                .map(|d| d.to_vec().into_iter().map(|(_, val)| val).collect())
                .unwrap_or_default(),
        };
        // Reversed, so the first child is popped (visited) first.
        stack.extend(children.into_iter().rev());
    }
    None
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
    register_seq_get_item(r, "ffi.ArrayGetItem", kTVMFFIArray);
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
    register_seq_get_item(r, "ffi.ListGetItem", kTVMFFIList);
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
        |l: List, v: Any| {
            // element by element, each read when it is compared (an `__any_equal__` hook may
            // change the List meanwhile, and the official search reads it live)
            let mut i = 0;
            while let Some(e) = l.get(i) {
                if contains(std::slice::from_ref(&e), &v)? {
                    return Ok(true);
                }
                i += 1;
            }
            Ok(false)
        },
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
    register_lookups(r, "Map", kTVMFFIMap);
    r.typed(
        "ffi.MapForwardIterFunctor",
        "MapForwardIterFunctor(m): it(0) key, it(1) value, it(2) advance and return not-at-end.",
        |m: Map| forward_iter_functor("ffi.MapForwardIterFunctor.<it>", storage(&m)),
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
    register_lookups(r, "Dict", kTVMFFIDict);
    r.typed(
        "ffi.DictSetItem",
        "DictSetItem(d, k, v): sets k to v in place.",
        |d: DictArg, k: Any, v: Any| d.0.insert(k, v),
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
}

/// An `Array[str]` result (for its type schema).
struct StrArray(Array);

impl IntoAny for StrArray {
    fn into_any(self) -> Any {
        Any::from(self.0)
    }
    fn schema() -> String {
        r#"{"type":"ffi.Array","args":[{"type":"ffi.String"}]}"#.into()
    }
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
        || {
            StrArray(
                anyffi::type_table::registered_keys()
                    .into_iter()
                    .map(Any::from)
                    .collect(),
            )
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::global::get_global;

    fn call(name: &str, args: &[Any]) -> Result<Any> {
        let f = get_global(name).unwrap_or_else(|| panic!("{name} is registered"));
        let views: Vec<AnyView<'_>> = args.iter().map(Any::as_view).collect();
        f.call(&views)
    }

    fn s(v: &str) -> Any {
        Any::from(v)
    }

    fn i(v: i64) -> Any {
        Any::from(v)
    }

    #[test]
    fn map_globals_and_iteration_protocol() {
        let mut args = Vec::new();
        for k in 0..6 {
            args.push(s(&format!("key-number-{k}")));
            args.push(i(k));
        }
        args.push(s("key-number-0"));
        args.push(i(100));
        let m = call("ffi.Map", &args).unwrap();
        assert_eq!(
            call("ffi.MapSize", &[m.clone()])
                .unwrap()
                .get::<i64>()
                .unwrap(),
            6
        );
        assert_eq!(
            call("ffi.MapGetItem", &[m.clone(), s("key-number-0")])
                .unwrap()
                .get::<i64>()
                .unwrap(),
            100
        );
        let e = call("ffi.MapGetItem", &[m.clone(), s("nope")]).unwrap_err();
        assert_eq!(
            (e.kind(), e.message().as_ref()),
            ("KeyError", "key is not in Map")
        );
        assert_eq!(
            call("ffi.MapCount", &[m.clone(), s("nope")])
                .unwrap()
                .get::<i64>()
                .unwrap(),
            0
        );
        let missing = call("ffi.MapGetItemOrMissing", &[m.clone(), s("nope")]).unwrap();
        assert!(missing
            .as_view()
            .as_object()
            .unwrap()
            .same_as(&sentinel::missing()));
        let it = call("ffi.MapForwardIterFunctor", &[m.clone()]).unwrap();
        let it = it.as_view().as_object_of::<anyffi::FunctionObj>().unwrap();
        let mut seen = Vec::new();
        loop {
            let k = it
                .call(&[AnyView::from(0i64)])
                .unwrap()
                .get::<String>()
                .unwrap();
            let v = it
                .call(&[AnyView::from(1i64)])
                .unwrap()
                .get::<i64>()
                .unwrap();
            seen.push((k, v));
            if !it
                .call(&[AnyView::from(2i64)])
                .unwrap()
                .get::<bool>()
                .unwrap()
            {
                break;
            }
        }
        // The duplicate key updated a dense map: it moved to the end.
        let order: Vec<i64> = seen.iter().map(|(_, v)| *v).collect();
        assert_eq!(order, [1, 2, 3, 4, 5, 100]);
        assert_eq!(
            it.call(&[AnyView::from(0i64)]).unwrap_err().kind(),
            "IndexError"
        );
        let e = call("ffi.Map", &[s("odd")]).unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        let d = call("ffi.Dict", &[s("a"), i(1)]).unwrap();
        let e = call("ffi.MapGetItem", &[d, s("a")]).unwrap_err();
        assert!(
            e.message()
                .contains("Expected `ffi.Map` but got `ffi.Dict`"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn dict_globals_mutate_in_place() {
        let d = call("ffi.Dict", &[]).unwrap();
        for k in 0..10 {
            call("ffi.DictSetItem", &[d.clone(), i(k), s("v")]).unwrap();
        }
        assert_eq!(
            call("ffi.DictSize", &[d.clone()])
                .unwrap()
                .get::<i64>()
                .unwrap(),
            10
        );
        call("ffi.DictErase", &[d.clone(), i(3)]).unwrap();
        call("ffi.DictErase", &[d.clone(), i(42)]).unwrap();
        assert_eq!(
            call("ffi.DictCount", &[d.clone(), i(3)])
                .unwrap()
                .get::<i64>()
                .unwrap(),
            0
        );
        assert_eq!(
            call("ffi.DictGetItem", &[d.clone(), i(4)])
                .unwrap()
                .get::<String>()
                .unwrap(),
            "v"
        );
        call("ffi.DictClear", &[d.clone()]).unwrap();
        assert_eq!(
            call("ffi.DictSize", &[d.clone()])
                .unwrap()
                .get::<i64>()
                .unwrap(),
            0
        );
        // A Map passed where a Dict[Any, Any] is declared is converted (and left untouched).
        let m = call("ffi.Map", &[s("a"), i(1)]).unwrap();
        call("ffi.DictSetItem", &[m.clone(), s("b"), i(2)]).unwrap();
        assert_eq!(call("ffi.MapSize", &[m]).unwrap().get::<i64>().unwrap(), 1);
    }

    #[test]
    fn array_and_list_globals() {
        let a = call("ffi.Array", &[i(1), s("two"), i(3)]).unwrap();
        assert_eq!(
            call("ffi.ArraySize", &[a.clone()])
                .unwrap()
                .get::<i64>()
                .unwrap(),
            3
        );
        assert_eq!(
            call("ffi.ArrayGetItem", &[a.clone(), i(1)])
                .unwrap()
                .get::<String>()
                .unwrap(),
            "two"
        );
        let e = call("ffi.ArrayGetItem", &[a.clone(), i(3)]).unwrap_err();
        assert_eq!(
            (e.kind(), e.message().as_ref()),
            ("IndexError", "Index 3 out of bounds 3")
        );
        assert!(call("ffi.ArrayContains", &[a.clone(), s("two")])
            .unwrap()
            .get::<bool>()
            .unwrap());
        assert!(!call("ffi.ArrayContains", &[a, Any::from(1.0f64)])
            .unwrap()
            .get::<bool>()
            .unwrap());

        let l = call("ffi.List", &[i(1), i(2), i(3)]).unwrap();
        let list = l.as_view().as_object_of::<anyffi::ListObj>().unwrap();
        assert_eq!(list.capacity(), 4);
        call("ffi.ListAppend", &[l.clone(), i(4)]).unwrap();
        call("ffi.ListAppend", &[l.clone(), i(5)]).unwrap();
        assert_eq!(list.capacity(), 8);
        call("ffi.ListInsert", &[l.clone(), i(0), i(0)]).unwrap();
        assert_eq!(
            call("ffi.ListPop", &[l.clone(), i(5)])
                .unwrap()
                .get::<i64>()
                .unwrap(),
            5
        );
        call("ffi.ListErase", &[l.clone(), i(0)]).unwrap();
        call("ffi.ListEraseRange", &[l.clone(), i(0), i(1)]).unwrap();
        let rep = call("ffi.List", &[i(7), i(8)]).unwrap();
        call("ffi.ListReplaceSlice", &[l.clone(), i(0), i(1), rep]).unwrap();
        call("ffi.ListReverse", &[l.clone()]).unwrap();
        call("ffi.ListSetItem", &[l.clone(), i(0), i(9)]).unwrap();
        assert_eq!(list.to_vec_of::<i64>().unwrap(), [9, 3, 8, 7]);
        assert!(call("ffi.ListContains", &[l.clone(), i(7)])
            .unwrap()
            .get::<bool>()
            .unwrap());
        call("ffi.ListReserve", &[l.clone(), i(100)]).unwrap();
        assert_eq!(list.capacity(), 100);
        call("ffi.ListClear", &[l.clone()]).unwrap();
        assert_eq!(call("ffi.ListSize", &[l]).unwrap().get::<i64>().unwrap(), 0);
    }

    #[test]
    fn sentinels_devices_and_type_keys() {
        let a = call("ffi.GetInvalidObject", &[]).unwrap();
        let b = call("ffi.GetKwargsObject", &[]).unwrap();
        assert_eq!(a.type_index(), anyffi::abi::kTVMFFIObject);
        assert!(!a
            .as_view()
            .as_object()
            .unwrap()
            .same_as(&b.as_view().as_object().unwrap()));
        let dev = call(
            "ffi.ContainerFindFirstNonCPUDevice",
            &[call("ffi.Array", &[i(1)]).unwrap()],
        )
        .unwrap();
        assert_eq!(
            dev.get::<DLDevice>().unwrap(),
            DLDevice {
                device_type: kDLCPU,
                device_id: 0
            }
        );
        let keys = call("ffi.GetRegisteredTypeKeys", &[]).unwrap();
        let keys = keys
            .as_view()
            .as_object_of::<anyffi::ArrayObj>()
            .unwrap()
            .to_vec_of::<String>()
            .unwrap();
        assert_eq!(keys[0], "None");
        assert!(keys.iter().any(|k| k == "ffi.Dict"));
    }
}
