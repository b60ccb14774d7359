//! Reflection-driven dataclass operations (spec §8): `ffi.DeepCopy`, `ffi.RecursiveHash` and the
//! three-way `ffi.RecursiveEq/Lt/Le/Gt/Ge`, over containers and every reflected object, with the
//! `__ffi_shallow_copy__`, `__ffi_hash__`, `__ffi_eq__` and `__ffi_compare__` hooks.
//!
//! Rationale: object graphs may be deep, shared or cyclic, so each walk keeps an explicit stack
//! (no recursion on the Rust stack), memoises finished objects, and treats an object it is still
//! inside of as a cycle: hashing mixes in the type's key hash, equality treats the pair as equal,
//! ordering refuses. Deep copies of mutable containers and objects are made before their
//! children so cycles can point back at them; immutable containers (Array, Map) are built after
//! their children, and any reference to one still being built is patched in a final pass.

use std::cell::RefCell;
use std::sync::Arc;

use crate::abi::*;
use crate::any::{Any, AnyView};
use crate::array::{Array, ArrayObj};
use crate::bigint::BigIntObj;
use crate::builtin_types::ENUM_INDEX;
use crate::error::{Error, Result};
use crate::function::{call_raw, Function};
use crate::hash::{stable_hash_bytes, stable_hash_combine};
use crate::list::{List, ListObj};
use crate::map::{Dict, DictObj, Map, MapObj};
use crate::reflection::{fields, type_info, type_key, FieldRef};
use crate::shape::ShapeObj;
use crate::structural::{PtrMap, PtrSet, WalkRef};
use crate::type_table;

/// Objects deeper than this are refused rather than exhausting memory.
const MAX_DEPTH: usize = 1 << 20;

fn obj_of(v: &Any) -> Option<*mut TVMFFIObject> {
    v.as_view().as_object_ptr().filter(|p| !p.is_null())
}

/// The runtime type index of a value (objects report their own).
fn runtime_index(v: &Any) -> i32 {
    match obj_of(v) {
        // SAFETY: a live object held by `v`.
        Some(p) => unsafe { (*p).type_index },
        None => v.type_index(),
    }
}

fn type_key_hash(ti: i32) -> u64 {
    type_table::type_entry(ti).map_or(0, |e| e.info.type_key_hash)
}

/// String (`true`) or bytes (`false`) content of a string-like value.
fn text(v: &Any) -> Option<(bool, &[u8])> {
    let is_str = match v.type_index() {
        kTVMFFIStr | kTVMFFISmallStr => true,
        kTVMFFIBytes | kTVMFFISmallBytes => false,
        _ => return None,
    };
    // SAFETY: a string-like value owned by `v`; inline bytes live in `v`.
    unsafe { crate::string::raw_any_bytes(v.raw()) }.map(|b| (is_str, b))
}

/// The words of an Int or BigInt value.
fn int_words(v: &Any) -> Option<Vec<i64>> {
    match v.type_index() {
        kTVMFFIInt => v.as_view().as_i64().map(|x| vec![x]),
        kTVMFFIBigInt => v
            .as_view()
            .as_object_of::<BigIntObj>()
            .map(|b| b.words().to_vec()),
        _ => None,
    }
}

/// Signed comparison of canonical two's-complement words.
pub fn compare_words(a: &[i64], b: &[i64]) -> i32 {
    let neg = |w: &[i64]| w.last().is_some_and(|&x| x < 0);
    if neg(a) != neg(b) {
        return if neg(a) { -1 } else { 1 };
    }
    let sign = |w: &[i64]| if neg(w) { u64::MAX } else { 0 };
    for i in (0..a.len().max(b.len())).rev() {
        let x = a.get(i).map_or(sign(a), |&w| w as u64);
        let y = b.get(i).map_or(sign(b), |&w| w as u64);
        if x != y {
            return if x > y { 1 } else { -1 };
        }
    }
    0
}

/// The elements of a sequence object, owned.
fn seq_items(v: &Any, ti: i32) -> Vec<Any> {
    let view = v.as_view();
    if ti == kTVMFFIArray {
        view.as_object_of::<ArrayObj>()
            .map(|a| a.as_slice().to_vec())
            .unwrap_or_default()
    } else {
        view.as_object_of::<ListObj>()
            .map(|l| l.to_vec())
            .unwrap_or_default()
    }
}

/// The entries of a map object, owned, in iteration order.
fn map_items(v: &Any, ti: i32) -> Vec<(Any, Any)> {
    let view = v.as_view();
    if ti == kTVMFFIMap {
        view.as_object_of::<MapObj>()
            .map(|m| m.to_vec())
            .unwrap_or_default()
    } else {
        view.as_object_of::<DictObj>()
            .map(|m| m.to_vec())
            .unwrap_or_default()
    }
}

/// The reflected fields of `obj` not masked by `skip`, with their values.
fn fields_with_values(obj: *mut TVMFFIObject, skip: i64) -> Result<(Vec<FieldRef>, Vec<Any>)> {
    // SAFETY: a live object per the callers.
    let info = type_info(unsafe { (*obj).type_index })?;
    let mut refs = Vec::new();
    let mut values = Vec::new();
    for f in fields(info) {
        if f.flags() & skip != 0 {
            continue;
        }
        // SAFETY: `obj` is an instance of a type that has this field.
        values.push(unsafe { f.get(obj) }?);
        refs.push(f);
    }
    Ok((refs, values))
}

/// A type-attribute hook function of the object's type, if registered.
fn hook(name: &str, ti: i32) -> Option<TVMFFIAny> {
    type_table::attr_value(name, ti).filter(|v| v.type_index == kTVMFFIFunction)
}

/// Calls `hook(args..., callback)` and closes the callback's re-entry afterwards.
fn call_hook<T>(
    hook: TVMFFIAny,
    args: &[&Any],
    callback: &Function,
    slot: &WalkRef<T>,
) -> Result<Any> {
    let mut raw: Vec<TVMFFIAny> = args.iter().map(|a| *a.raw()).collect();
    raw.push(*AnyView::from(callback).raw());
    // SAFETY: the column keeps the hook alive; the arguments outlive the call.
    let r = unsafe { call_raw(hook.value.v_obj, raw.as_ptr(), raw.len() as i32) };
    slot.clear();
    r
}

// ---------------------------------------------------------------------------------------------
// RecursiveHash
// ---------------------------------------------------------------------------------------------

enum HashKind {
    Seq,
    Map,
    Object,
}

struct HashFrame {
    kind: HashKind,
    obj: usize,
    children: Vec<Any>,
    next: usize,
    hash: u64,
    seq_index: u64,
    key_hash: Option<u64>,
    entries: Vec<u64>,
}

struct Hasher {
    on_stack: RefCell<PtrSet<usize>>,
    memo: RefCell<PtrMap<usize, u64>>,
    stack: RefCell<Vec<HashFrame>>,
    /// Objects whose `__ffi_hash__` hooks are running, this walk's and those of the walk it
    /// was seeded from (see `Hasher::seeded`).
    hooks: RefCell<Vec<usize>>,
}

/// `ffi.RecursiveHash`: a hash consistent with `RecursiveEq`.
pub fn recursive_hash(value: &Any) -> Result<i64> {
    Ok(Hasher::new().hash(value)? as i64)
}

fn hash_pod(v: &TVMFFIAny) -> u64 {
    let ti = v.type_index;
    // SAFETY: each arm reads the union member its type index names.
    unsafe {
        match ti {
            kTVMFFIBool => stable_hash_combine(ti as u64, u64::from(v.value.v_int64 != 0)),
            kTVMFFIInt => stable_hash_combine(ti as u64, v.value.v_int64 as u64),
            kTVMFFIFloat => {
                let x = v.value.v_float64;
                let bits = if x.is_nan() {
                    f64::NAN.to_bits()
                } else if x == 0.0 {
                    0
                } else {
                    x.to_bits()
                };
                stable_hash_combine(ti as u64, bits)
            }
            kTVMFFIDataType => {
                let d = v.value.v_dtype;
                let h = stable_hash_combine(ti as u64, d.code as u64);
                let h = stable_hash_combine(h, d.bits as u64);
                stable_hash_combine(h, d.lanes as u64)
            }
            kTVMFFIDevice => {
                let d = v.value.v_device;
                let h = stable_hash_combine(ti as u64, d.device_type as u64);
                stable_hash_combine(h, d.device_id as u64)
            }
            _ => stable_hash_combine(ti as u64, v.value.v_uint64),
        }
    }
}

impl Hasher {
    fn new() -> Self {
        Hasher {
            on_stack: RefCell::new(PtrSet::default()),
            memo: RefCell::new(PtrMap::default()),
            stack: RefCell::new(Vec::new()),
            hooks: RefCell::new(Vec::new()),
        }
    }

    /// The walk a hook's `fn_hash` makes when called on another thread while the hook runs:
    /// the objects whose hooks are running are on its stack too, so that a hook hashing itself
    /// through another thread meets its own object, as the one walk of the official library
    /// does, rather than starting over without end.
    fn seeded(hooks: Vec<usize>) -> Self {
        let h = Hasher::new();
        h.on_stack.borrow_mut().extend(hooks.iter().copied());
        *h.hooks.borrow_mut() = hooks;
        h
    }

    fn hash(&self, v: &Any) -> Result<u64> {
        if let Some(h) = self.immediate(v)? {
            return Ok(h);
        }
        let saved = std::mem::take(&mut *self.stack.borrow_mut());
        let r = self.push(v).and_then(|()| self.run());
        *self.stack.borrow_mut() = saved;
        r
    }

    fn immediate(&self, v: &Any) -> Result<Option<u64>> {
        let ti = v.type_index();
        if ti == kTVMFFINone {
            return Ok(Some(stable_hash_combine(0, 0)));
        }
        if let Some((is_str, b)) = text(v) {
            let tag = if is_str { kTVMFFIStr } else { kTVMFFIBytes };
            return Ok(Some(stable_hash_combine(tag as u64, stable_hash_bytes(b))));
        }
        if ti < kTVMFFIStaticObjectBegin {
            return Ok(Some(hash_pod(v.raw())));
        }
        let Some(obj) = obj_of(v) else {
            return Ok(Some(stable_hash_combine(0, 0)));
        };
        let key = obj as usize;
        if let Some(&h) = self.memo.borrow().get(&key) {
            return Ok(Some(h));
        }
        if self.on_stack.borrow().contains(&key) {
            return Ok(Some(type_key_hash(ti)));
        }
        if ti == kTVMFFIShape {
            let s = v
                .as_view()
                .as_object_of::<ShapeObj>()
                .expect("an ffi.Shape");
            let dims = s.as_slice();
            let mut h = stable_hash_combine(type_key_hash(ti), dims.len() as u64);
            for &d in dims {
                h = stable_hash_combine(h, d as u64);
            }
            self.memo.borrow_mut().insert(key, h);
            return Ok(Some(h));
        }
        if let Some(hk) = hook("__ffi_hash__", ti) {
            self.on_stack.borrow_mut().insert(key);
            let slot = Arc::new(WalkRef::new(self));
            let inner = slot.clone();
            self.hooks.borrow_mut().push(key);
            let hooks = self.hooks.borrow().clone();
            let cb =
                Function::from_typed("ffi.RecursiveHash.fn_hash", move |x: Any| -> Result<i64> {
                    Ok(match inner.live() {
                        Some(h) => h.hash(&x)?,
                        // another thread while the hook runs; after it, a walk of its own
                        None if inner.running() => Hasher::seeded(hooks.clone()).hash(&x)?,
                        None => Hasher::new().hash(&x)?,
                    } as i64)
                });
            let r = call_hook(hk, &[v], &cb, &slot);
            self.hooks.borrow_mut().pop();
            self.on_stack.borrow_mut().remove(&key);
            let h = r?.get::<i64>()? as u64;
            self.memo.borrow_mut().insert(key, h);
            return Ok(Some(h));
        }
        if ti >= kTVMFFIStaticObjectEnd
            && (hook("__ffi_eq__", ti).is_some() || hook("__ffi_compare__", ti).is_some())
        {
            return Err(Error::value_error(format!(
                "RecursiveHash: type '{}' defines __ffi_eq__ or __ffi_compare__ but not \
                 __ffi_hash__. Add a __ffi_hash__ hook to maintain the invariant \
                 RecursiveEq(a,b) => RecursiveHash(a)==RecursiveHash(b).",
                type_table::type_key_of(ti)
            )));
        }
        Ok(None)
    }

    fn push(&self, v: &Any) -> Result<()> {
        if self.stack.borrow().len() >= MAX_DEPTH {
            return Err(Error::value_error(format!(
                "RecursiveHash: maximum depth ({MAX_DEPTH}) exceeded"
            )));
        }
        let obj = obj_of(v).expect("frames hold objects");
        let ti = runtime_index(v);
        self.on_stack.borrow_mut().insert(obj as usize);
        let tkh = type_key_hash(ti);
        let (kind, children, hash) = match ti {
            kTVMFFIArray | kTVMFFIList => {
                let items = seq_items(v, ti);
                let h = stable_hash_combine(tkh, items.len() as u64);
                (HashKind::Seq, items, h)
            }
            kTVMFFIMap | kTVMFFIDict => {
                let items = map_items(v, ti);
                let h = stable_hash_combine(tkh, items.len() as u64);
                let flat = items.into_iter().flat_map(|(k, v)| [k, v]).collect();
                (HashKind::Map, flat, h)
            }
            _ => {
                let skip = kTVMFFIFieldFlagBitMaskHashOff | kTVMFFIFieldFlagBitMaskCompareOff;
                let (_, values) = fields_with_values(obj, skip)?;
                (HashKind::Object, values, tkh)
            }
        };
        self.stack.borrow_mut().push(HashFrame {
            kind,
            obj: obj as usize,
            children,
            next: 0,
            hash,
            seq_index: 0,
            key_hash: None,
            entries: Vec::new(),
        });
        Ok(())
    }

    fn feed(f: &mut HashFrame, h: u64) {
        match f.kind {
            HashKind::Seq => {
                f.hash = stable_hash_combine(f.hash, stable_hash_combine(h, f.seq_index));
                f.seq_index += 1;
            }
            HashKind::Map => match f.key_hash.take() {
                None => f.key_hash = Some(h),
                Some(k) => f.entries.push(stable_hash_combine(k, h)),
            },
            HashKind::Object => f.hash = stable_hash_combine(f.hash, h),
        }
    }

    fn run(&self) -> Result<u64> {
        loop {
            let next = {
                let mut st = self.stack.borrow_mut();
                let f = st.last_mut().expect("a frame is on the stack");
                f.next += 1;
                f.children.get(f.next - 1).cloned()
            };
            match next {
                Some(child) => match self.immediate(&child)? {
                    Some(h) => Self::feed(self.stack.borrow_mut().last_mut().unwrap(), h),
                    None => self.push(&child)?,
                },
                None => {
                    let mut f = self.stack.borrow_mut().pop().unwrap();
                    if let HashKind::Map = f.kind {
                        f.entries.sort_unstable();
                        for &e in &f.entries {
                            f.hash = stable_hash_combine(f.hash, e);
                        }
                    }
                    self.memo.borrow_mut().insert(f.obj, f.hash);
                    self.on_stack.borrow_mut().remove(&f.obj);
                    let mut st = self.stack.borrow_mut();
                    match st.last_mut() {
                        Some(parent) => Self::feed(parent, f.hash),
                        None => return Ok(f.hash),
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Recursive comparison
// ---------------------------------------------------------------------------------------------

enum CmpKind {
    Seq(usize, usize),
    Map,
    Object,
}

struct CmpFrame {
    kind: CmpKind,
    pair: (usize, usize),
    children: Vec<(Any, Any)>,
    next: usize,
}

struct Comparer {
    eq_only: bool,
    on_stack: RefCell<PtrSet<(usize, usize)>>,
    stack: RefCell<Vec<CmpFrame>>,
    /// Pairs whose `__ffi_eq__` / `__ffi_compare__` hooks are running (see `Hasher::hooks`).
    hooks: RefCell<Vec<(usize, usize)>>,
}

/// `ffi.RecursiveEq` (`eq_only`) or the three-way order behind `ffi.RecursiveLt/Le/Gt/Ge`:
/// -1, 0 or 1.
pub fn recursive_compare(lhs: &Any, rhs: &Any, eq_only: bool) -> Result<i32> {
    Comparer::new(eq_only).compare(lhs, rhs)
}

fn ordering(o: std::cmp::Ordering) -> i32 {
    o as i32
}

/// The order of two strings or byte strings as the official comparison gives it: byte by
/// byte as C `char`, which is signed on x86-64 (a byte from 0x80 on, as in any non-ASCII UTF-8
/// text, sorts before ASCII), then the shorter first.
fn memncmp(l: &[u8], r: &[u8]) -> std::cmp::Ordering {
    match l.iter().zip(r).find(|(a, b)| a != b) {
        Some((&a, &b)) => (a as i8).cmp(&(b as i8)),
        None => l.len().cmp(&r.len()),
    }
}

impl Comparer {
    fn new(eq_only: bool) -> Self {
        Comparer {
            eq_only,
            on_stack: RefCell::new(PtrSet::default()),
            stack: RefCell::new(Vec::new()),
            hooks: RefCell::new(Vec::new()),
        }
    }

    /// As `Hasher::seeded`, for `fn_eq` / `fn_cmp` called on another thread.
    fn seeded(eq_only: bool, hooks: Vec<(usize, usize)>) -> Self {
        let c = Comparer::new(eq_only);
        c.on_stack.borrow_mut().extend(hooks.iter().copied());
        *c.hooks.borrow_mut() = hooks;
        c
    }

    fn compare(&self, l: &Any, r: &Any) -> Result<i32> {
        if let Some(c) = self.immediate(l, r)? {
            return Ok(c);
        }
        let saved = std::mem::take(&mut *self.stack.borrow_mut());
        let res = match self.push_pair(l, r) {
            Ok(Some(eager)) => Ok(eager),
            Ok(None) => self.run(),
            Err(e) => Err(e),
        };
        *self.stack.borrow_mut() = saved;
        res
    }

    /// Unequal values that cannot be ordered: 1 for equality, else a TypeError.
    fn unordered(&self, msg: impl FnOnce() -> String) -> Result<i32> {
        if self.eq_only {
            Ok(1)
        } else {
            Err(Error::type_error(msg()))
        }
    }

    fn compare_pod(&self, l: &TVMFFIAny, r: &TVMFFIAny) -> Result<i32> {
        let ti = l.type_index;
        // SAFETY: both values have type `ti`; each arm reads the member it names.
        unsafe {
            Ok(match ti {
                kTVMFFIBool => i32::from(l.value.v_int64 != 0) - i32::from(r.value.v_int64 != 0),
                kTVMFFIInt => ordering(l.value.v_int64.cmp(&r.value.v_int64)),
                kTVMFFIFloat => {
                    let (a, b) = (l.value.v_float64, r.value.v_float64);
                    if a.is_nan() || b.is_nan() {
                        if self.eq_only {
                            return Ok(i32::from(!(a.is_nan() && b.is_nan())));
                        }
                        return Err(Error::type_error("Cannot order NaN values"));
                    }
                    ordering(a.partial_cmp(&b).unwrap_or(std::cmp::Ordering::Equal))
                }
                kTVMFFIDataType => {
                    let (a, b) = (l.value.v_dtype, r.value.v_dtype);
                    ordering((a.code, a.bits, a.lanes).cmp(&(b.code, b.bits, b.lanes)))
                }
                kTVMFFIDevice => {
                    let (a, b) = (l.value.v_device, r.value.v_device);
                    ordering((a.device_type, a.device_id).cmp(&(b.device_type, b.device_id)))
                }
                _ => {
                    if l.small_str_len == r.small_str_len && l.value.v_int64 == r.value.v_int64 {
                        0
                    } else {
                        return self.unordered(|| {
                            format!(
                                "Cannot order values of type {}",
                                type_table::type_key_of(ti)
                            )
                        });
                    }
                }
            })
        }
    }

    fn immediate(&self, l: &Any, r: &Any) -> Result<Option<i32>> {
        let (lti, rti) = (l.type_index(), r.type_index());
        match (lti == kTVMFFINone, rti == kTVMFFINone) {
            (true, true) => return Ok(Some(0)),
            (true, false) => return Ok(Some(-1)),
            (false, true) => return Ok(Some(1)),
            _ => {}
        }
        if let (Some((ls, lb)), Some((rs, rb))) = (text(l), text(r)) {
            if ls == rs {
                return Ok(Some(ordering(memncmp(lb, rb))));
            }
        }
        if lti != rti {
            if self.eq_only {
                return Ok(Some(1));
            }
            if let (Some(a), Some(b)) = (int_words(l), int_words(r)) {
                return Ok(Some(compare_words(&a, &b)));
            }
            return Err(Error::type_error(format!(
                "Cannot compare values of different types: {} vs {}",
                crate::function::mismatch_type_key(&l.as_view()),
                crate::function::mismatch_type_key(&r.as_view())
            )));
        }
        if lti < kTVMFFIStaticObjectBegin {
            return self.compare_pod(l.raw(), r.raw()).map(Some);
        }
        if lti == kTVMFFIBigInt {
            let (a, b) = (int_words(l).unwrap(), int_words(r).unwrap());
            return Ok(Some(if self.eq_only {
                i32::from(a != b)
            } else {
                compare_words(&a, &b)
            }));
        }
        let (lo, ro) = (obj_of(l), obj_of(r));
        if lo == ro {
            return Ok(Some(0));
        }
        let (Some(lo), Some(ro)) = (lo, ro) else {
            return Ok(Some(if lo.is_none() { -1 } else { 1 }));
        };
        if lti == kTVMFFIShape {
            let s = |v: &Any| {
                v.as_view()
                    .as_object_of::<ShapeObj>()
                    .expect("an ffi.Shape")
            };
            let (a, b) = (s(l), s(r));
            return Ok(Some(ordering(a.as_slice().cmp(b.as_slice()))));
        }
        let pair = (lo as usize, ro as usize);
        if self.on_stack.borrow().contains(&pair) {
            if self.eq_only {
                return Ok(Some(0));
            }
            return Err(Error::value_error(
                "RecursiveCompare: cyclic reference detected in ordering",
            ));
        }
        if lti >= kTVMFFIStaticObjectEnd {
            return self.custom_hook(l, r, lo, ro);
        }
        Ok(None)
    }

    fn custom_hook(
        &self,
        l: &Any,
        r: &Any,
        lo: *mut TVMFFIObject,
        ro: *mut TVMFFIObject,
    ) -> Result<Option<i32>> {
        // SAFETY: live objects held by `l` and `r`.
        let (lti, rti) = unsafe { ((*lo).type_index, (*ro).type_index) };
        if lti != rti {
            return self
                .unordered(|| {
                    format!(
                        "Cannot compare objects of different types: {} vs {}",
                        type_table::type_key_of(lti),
                        type_table::type_key_of(rti)
                    )
                })
                .map(Some);
        }
        let eq = hook("__ffi_eq__", lti).filter(|_| self.eq_only);
        let (hk, is_eq) = match (eq, hook("__ffi_compare__", lti)) {
            (Some(h), _) => (h, true),
            (None, Some(h)) => (h, false),
            (None, None) => return Ok(None),
        };
        let pair = (lo as usize, ro as usize);
        self.on_stack.borrow_mut().insert(pair);
        let slot = Arc::new(WalkRef::new(self));
        let inner = slot.clone();
        let eq_only = self.eq_only;
        self.hooks.borrow_mut().push(pair);
        let hooks = self.hooks.borrow().clone();
        // another thread while the hook runs: a walk seeded with the running hooks; after it,
        // a walk of its own
        let compare = move |a: &Any, b: &Any| match inner.live() {
            Some(c) => c.compare(a, b),
            None if inner.running() => Comparer::seeded(eq_only, hooks.clone()).compare(a, b),
            None => Comparer::new(eq_only).compare(a, b),
        };
        let cb = if is_eq {
            Function::from_typed(
                "ffi.RecursiveEq.fn_eq",
                move |a: Any, b: Any| -> Result<bool> { Ok(compare(&a, &b)? == 0) },
            )
        } else {
            Function::from_typed("ffi.RecursiveCompare.fn_cmp", move |a: Any, b: Any| {
                compare(&a, &b)
            })
        };
        let res = call_hook(hk, &[l, r], &cb, &slot);
        self.hooks.borrow_mut().pop();
        self.on_stack.borrow_mut().remove(&pair);
        let res = res?;
        Ok(Some(if is_eq {
            i32::from(!res.get::<bool>()?)
        } else {
            res.get::<i64>()?.signum() as i32
        }))
    }

    /// Pushes the frame of a pair of objects of the same type, or returns an eager result.
    fn push_pair(&self, l: &Any, r: &Any) -> Result<Option<i32>> {
        if self.stack.borrow().len() >= MAX_DEPTH {
            return Err(Error::value_error(format!(
                "RecursiveCompare: maximum stack depth ({MAX_DEPTH}) exceeded"
            )));
        }
        let (lo, ro) = (obj_of(l).unwrap(), obj_of(r).unwrap());
        let pair = (lo as usize, ro as usize);
        self.on_stack.borrow_mut().insert(pair);
        let ti = runtime_index(l);
        let mismatch = |this: &Self, msg: &str| -> Result<Option<i32>> {
            this.on_stack.borrow_mut().remove(&pair);
            let msg = msg.to_string();
            this.unordered(|| msg).map(Some)
        };
        let (kind, children) = match ti {
            kTVMFFIArray | kTVMFFIList => {
                let (a, b) = (seq_items(l, ti), seq_items(r, ti));
                let kind = CmpKind::Seq(a.len(), b.len());
                (kind, a.into_iter().zip(b).collect())
            }
            kTVMFFIMap | kTVMFFIDict => {
                let (a, b) = (map_items(l, ti), map_items(r, ti));
                if a.len() != b.len() {
                    return mismatch(self, "Cannot order Map/Dict values");
                }
                let mut children = Vec::with_capacity(a.len());
                for (k, lv) in a {
                    let rv = if ti == kTVMFFIMap {
                        let m = r.as_view().as_object_of::<MapObj>().expect("an ffi.Map");
                        m.get(k.as_view())?.map(|v| v.to_owned()).transpose()?
                    } else {
                        let d = r.as_view().as_object_of::<DictObj>().expect("an ffi.Dict");
                        d.get(k.as_view())?
                    };
                    match rv {
                        Some(rv) => children.push((lv, rv)),
                        None => return mismatch(self, "Cannot order Map/Dict values"),
                    }
                }
                (CmpKind::Map, children)
            }
            _ => {
                let rti = runtime_index(r);
                if ti != rti {
                    self.on_stack.borrow_mut().remove(&pair);
                    return self
                        .unordered(|| {
                            format!(
                                "Cannot compare objects of different types: {} vs {}",
                                type_table::type_key_of(ti),
                                type_table::type_key_of(rti)
                            )
                        })
                        .map(Some);
                }
                let skip = kTVMFFIFieldFlagBitMaskCompareOff;
                let (_, a) = fields_with_values(lo, skip)?;
                let (_, b) = fields_with_values(ro, skip)?;
                (CmpKind::Object, a.into_iter().zip(b).collect())
            }
        };
        self.stack.borrow_mut().push(CmpFrame {
            kind,
            pair,
            children,
            next: 0,
        });
        Ok(None)
    }

    /// Ends the walk with a non-zero result; ordering through a map is refused.
    fn terminate(&self, r: i32) -> Result<i32> {
        let frames = std::mem::take(&mut *self.stack.borrow_mut());
        let through_map = frames.iter().any(|f| matches!(f.kind, CmpKind::Map));
        let mut on_stack = self.on_stack.borrow_mut();
        for f in &frames {
            on_stack.remove(&f.pair);
        }
        if !self.eq_only && through_map {
            return Err(Error::type_error("Cannot order Map/Dict values"));
        }
        Ok(r)
    }

    fn run(&self) -> Result<i32> {
        loop {
            let next = {
                let mut st = self.stack.borrow_mut();
                let f = st.last_mut().expect("a frame is on the stack");
                f.next += 1;
                f.children.get(f.next - 1).cloned()
            };
            let r = match next {
                Some((a, b)) => match self.immediate(&a, &b)? {
                    Some(c) => c,
                    None => match self.push_pair(&a, &b)? {
                        Some(eager) => eager,
                        None => continue,
                    },
                },
                None => {
                    let f = self.stack.borrow_mut().pop().unwrap();
                    self.on_stack.borrow_mut().remove(&f.pair);
                    let r = match f.kind {
                        CmpKind::Seq(a, b) => ordering(a.cmp(&b)),
                        _ => 0,
                    };
                    if self.stack.borrow().is_empty() {
                        return Ok(r);
                    }
                    r
                }
            };
            if r != 0 {
                return self.terminate(r);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// DeepCopy
// ---------------------------------------------------------------------------------------------

enum CopyKind {
    Array,
    List,
    Map,
    Dict,
    Object,
}

struct CopyFrame {
    kind: CopyKind,
    obj: usize,
    children: Vec<Any>,
    fields: Vec<FieldRef>,
    next: usize,
    copy: Any,
    resolved: Vec<Any>,
    key: Option<Any>,
}

#[derive(Default)]
struct Copier {
    copies: PtrMap<usize, Any>,
    building: PtrSet<usize>,
    deferred: bool,
    stack: Vec<CopyFrame>,
}

/// `ffi.DeepCopy`: a copy sharing nothing mutable with `value` (strings, shapes, big integers
/// and enum singletons are shared).
pub fn deep_copy(value: &Any) -> Result<Any> {
    let mut c = Copier::default();
    let out = match c.immediate(value) {
        Some(v) => v,
        None => {
            c.push(value)?;
            c.run()?
        }
    };
    if c.deferred {
        c.fixup()?;
    }
    Ok(out)
}

/// Whether two values are the same (bitwise for PODs, identity for objects).
fn same(a: &Any, b: &Any) -> bool {
    // SAFETY: comparing the raw payload words.
    a.type_index() == b.type_index() && unsafe { a.raw().value.v_uint64 == b.raw().value.v_uint64 }
}

impl Copier {
    fn immediate(&mut self, v: &Any) -> Option<Any> {
        let Some(obj) = obj_of(v) else {
            return Some(v.clone());
        };
        if let Some(c) = self.copies.get(&(obj as usize)) {
            return Some(c.clone());
        }
        if self.building.contains(&(obj as usize)) {
            self.deferred = true;
            return Some(v.clone());
        }
        let ti = runtime_index(v);
        if matches!(ti, kTVMFFIStr | kTVMFFIBytes | kTVMFFIShape | kTVMFFIBigInt)
            || type_table::is_instance_of(ti, ENUM_INDEX)
        {
            return Some(v.clone());
        }
        None
    }

    fn push(&mut self, v: &Any) -> Result<()> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(Error::value_error(format!(
                "DeepCopy: maximum stack depth ({MAX_DEPTH}) exceeded"
            )));
        }
        let obj = obj_of(v).expect("frames hold objects");
        let key = obj as usize;
        let ti = runtime_index(v);
        let mut fields = Vec::new();
        let (kind, children, copy) = match ti {
            kTVMFFIArray => {
                self.building.insert(key);
                (CopyKind::Array, seq_items(v, ti), Any::none())
            }
            kTVMFFIList => {
                let items = seq_items(v, ti);
                let l = List::with_capacity(items.len());
                (CopyKind::List, items, Any::from(l))
            }
            kTVMFFIMap => {
                self.building.insert(key);
                let flat = map_items(v, ti)
                    .into_iter()
                    .flat_map(|(k, v)| [k, v])
                    .collect();
                (CopyKind::Map, flat, Any::none())
            }
            kTVMFFIDict => {
                let flat = map_items(v, ti)
                    .into_iter()
                    .flat_map(|(k, v)| [k, v])
                    .collect();
                (CopyKind::Dict, flat, Any::from(Dict::new()))
            }
            _ => {
                let Some(copy_fn) = hook("__ffi_shallow_copy__", ti) else {
                    return Err(Error::internal(format!(
                        "Check failed: (copy_fn.has_value()) is false: Cannot deep copy object of type \"{}\" because it is not copy-constructible",
                        type_key(type_info(ti)?)
                    )));
                };
                // SAFETY: the column keeps the function alive; one live argument.
                let copy = unsafe { call_raw(copy_fn.value.v_obj, v.raw(), 1) }?;
                if runtime_index(&copy) != ti || obj_of(&copy).is_none() {
                    return Err(Error::type_error(format!(
                        "DeepCopy: `{}.__ffi_shallow_copy__` returned {}, not a copy",
                        type_key(type_info(ti)?),
                        copy.as_view().type_key()
                    )));
                }
                let (refs, values) = fields_with_values(obj, 0)?;
                fields = refs;
                (CopyKind::Object, values, copy)
            }
        };
        if !copy.as_view().is_none() {
            self.copies.insert(key, copy.clone());
        }
        self.stack.push(CopyFrame {
            kind,
            obj: key,
            children,
            fields,
            next: 0,
            copy,
            resolved: Vec::new(),
            key: None,
        });
        Ok(())
    }

    fn feed(f: &mut CopyFrame, v: Any) -> Result<()> {
        match f.kind {
            CopyKind::Array | CopyKind::Map => f.resolved.push(v),
            CopyKind::List => {
                let l = f
                    .copy
                    .as_view()
                    .as_object_of::<ListObj>()
                    .expect("a list copy");
                l.push(v);
            }
            CopyKind::Dict => match f.key.take() {
                None => f.key = Some(v),
                Some(k) => {
                    let d = f
                        .copy
                        .as_view()
                        .as_object_of::<DictObj>()
                        .expect("a dict copy");
                    d.insert(k, v)?;
                }
            },
            CopyKind::Object => {
                let i = f.next - 1;
                if !same(&f.children[i], &v) {
                    let dst = obj_of(&f.copy).expect("an object copy");
                    // SAFETY: the copy has the original's type, so it has this field.
                    unsafe { f.fields[i].set(dst, v.raw()) }?;
                }
            }
        }
        Ok(())
    }

    fn run(&mut self) -> Result<Any> {
        loop {
            let f = self.stack.last_mut().expect("a frame is on the stack");
            if f.next < f.children.len() {
                f.next += 1;
                let child = f.children[f.next - 1].clone();
                match self.immediate(&child) {
                    Some(c) => Self::feed(self.stack.last_mut().unwrap(), c)?,
                    None => self.push(&child)?,
                }
                continue;
            }
            let f = self.stack.pop().unwrap();
            let result = match f.kind {
                CopyKind::Array => {
                    let a = Any::from(Array::from_vec(f.resolved));
                    self.copies.insert(f.obj, a.clone());
                    self.building.remove(&f.obj);
                    a
                }
                CopyKind::Map => {
                    let mut it = f.resolved.into_iter();
                    let mut pairs = Vec::new();
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        pairs.push((k, v));
                    }
                    let m = Any::from(Map::from_pairs(pairs)?);
                    self.copies.insert(f.obj, m.clone());
                    self.building.remove(&f.obj);
                    m
                }
                _ => f.copy,
            };
            match self.stack.last_mut() {
                Some(parent) => {
                    // The frame whose child this was records where its next value goes.
                    Self::feed(parent, result)?
                }
                None => return Ok(result),
            }
        }
    }

    /// Replaces references to originals that were still being built by their copies.
    fn fixup(&self) -> Result<()> {
        let mapped = |v: &Any| obj_of(v).and_then(|o| self.copies.get(&(o as usize)).cloned());
        for copy in self.copies.values() {
            let ti = runtime_index(copy);
            if ti == kTVMFFIList {
                let l = copy.as_view().as_object_of::<ListObj>().expect("a list");
                for (i, e) in l.to_vec().iter().enumerate() {
                    if let Some(m) = mapped(e) {
                        l.set(i as i64, m)?;
                    }
                }
            } else if ti == kTVMFFIDict {
                let d = copy.as_view().as_object_of::<DictObj>().expect("a dict");
                let mut changes = Vec::new();
                for (k, v) in d.to_vec() {
                    let (nk, nv) = (mapped(&k), mapped(&v));
                    if nk.is_some() || nv.is_some() {
                        let nk = nk.unwrap_or_else(|| k.clone());
                        changes.push((k, nk, nv.unwrap_or(v)));
                    }
                }
                for (old, k, v) in changes {
                    d.remove(old.as_view())?;
                    d.insert(k, v)?;
                }
            } else if ti >= kTVMFFIStaticObjectEnd {
                let obj = obj_of(copy).expect("an object");
                let (refs, values) = fields_with_values(obj, 0)?;
                for (f, v) in refs.iter().zip(values) {
                    if let Some(m) = mapped(&v).filter(|m| !same(m, &v)) {
                        // SAFETY: the copy has this field.
                        unsafe { f.set(obj, m.raw()) }?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arr(items: Vec<Any>) -> Any {
        Any::from(Array::from_vec(items))
    }

    #[test]
    fn compare_and_hash_are_structural() {
        let a = arr(vec![Any::from(1i64), Any::from("x")]);
        let b = arr(vec![Any::from(1i64), Any::from("x")]);
        assert_eq!(recursive_compare(&a, &b, true).unwrap(), 0);
        assert_eq!(recursive_hash(&a).unwrap(), recursive_hash(&b).unwrap());
        let c = arr(vec![Any::from(1i64), Any::from("y")]);
        assert_eq!(recursive_compare(&a, &c, false).unwrap(), -1);
        let short = arr(vec![Any::from(1i64)]);
        assert_eq!(recursive_compare(&short, &a, false).unwrap(), -1);
        let e = recursive_compare(&a, &Any::from(1i64), false).unwrap_err();
        assert_eq!(e.kind(), "TypeError");
        assert_eq!(recursive_compare(&a, &Any::from(1i64), true).unwrap(), 1);
        // NaN equals NaN for equality, but cannot be ordered.
        let nan = Any::from(f64::NAN);
        assert_eq!(recursive_compare(&nan, &nan, true).unwrap(), 0);
        assert!(recursive_compare(&nan, &nan, false).is_err());
        // Maps: equal regardless of insertion order; ordering refused.
        let m1 = Map::from_pairs([(Any::from("a"), Any::from(1i64)), (Any::from("b"), a)]).unwrap();
        let m2 = Map::from_pairs([(Any::from("b"), b), (Any::from("a"), Any::from(1i64))]).unwrap();
        let (m1, m2) = (Any::from(m1), Any::from(m2));
        assert_eq!(recursive_compare(&m1, &m2, true).unwrap(), 0);
        assert_eq!(recursive_hash(&m1).unwrap(), recursive_hash(&m2).unwrap());
        assert_eq!(compare_words(&[-1], &[0, 1]), -1);
        assert_eq!(compare_words(&[5], &[5]), 0);
    }

    #[test]
    fn deep_copy_keeps_cycles_and_sharing() {
        let l = List::new();
        let shared = Any::from(List::new());
        l.push(shared.clone());
        l.push(shared.clone());
        l.push(Any::from(l.clone()));
        let copy = deep_copy(&Any::from(l.clone())).unwrap();
        let c = copy.as_view().as_object_of::<ListObj>().unwrap();
        assert!(!c.same_as(&l));
        let items = c.to_vec();
        assert!(same(&items[0], &items[1]), "sharing is preserved");
        assert!(!same(&items[0], &shared));
        assert!(same(&items[2], &copy), "the cycle points at the copy");
        // An Array inside a cycle through a List is patched after it is built.
        let inner = List::new();
        let a = arr(vec![Any::from(inner.clone())]);
        inner.push(a.clone());
        let ca = deep_copy(&a).unwrap();
        let ca_arr = ca.as_view().as_object_of::<ArrayObj>().unwrap();
        let cl = ca_arr.get(0).unwrap().as_object_of::<ListObj>().unwrap();
        assert!(same(&cl.to_vec()[0], &ca));
        l.clear();
        c.clear();
        inner.clear();
        cl.clear();
    }
}
