//! `ffi.StructuralEqual(lhs, rhs, map_free_vars, skip_tensor_content)` and the first-mismatch
//! search behind `ffi.GetFirstStructuralMismatch`: the official comparison, including the
//! small/heap string cross-checks, NaN, DAG and free-variable mappings in both directions,
//! definition regions, tensor content, the `__s_equal__` hook and its callback, and the access
//! steps of the first mismatch (innermost step first, as they are found).

use std::cell::{Cell, RefCell};

use super::{
    catch_up, container_len, field_name, hook_in, map_find_in_place, map_get, map_items,
    push_region, tensor_parts, type_facts, Buffers, FrameStack, HookCallback, Items, PtrMap,
    PtrSet, TypeFacts, SHALLOW_PATH,
};
use crate::abi::*;
use crate::any::{Any, AnyView};
use crate::bigint::BigIntObj;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::map_base::{clone_raw, MapBase, RawMap};
use crate::string::raw_any_bytes;

/// The `__s_equal__` attribute column.
pub const S_EQUAL_ATTR: &str = "__s_equal__";
static S_EQUAL_COLUMN: crate::type_table::ColumnCache = crate::type_table::ColumnCache::new();

/// One access step of a mismatch path.
#[derive(Clone, Debug)]
pub enum PathStep {
    Attr(String),
    ArrayItem(i64),
    ArrayItemMissing(i64),
    MapItem(Any),
    MapItemMissing(Any),
}

/// Whether `lhs` and `rhs` are structurally equal.
pub fn structural_equal(
    lhs: &Any,
    rhs: &Any,
    map_free_vars: bool,
    skip_tensor_content: bool,
) -> Result<bool> {
    structural_equal_values(lhs.clone(), rhs.clone(), map_free_vars, skip_tensor_content)
}

/// `structural_equal` of values the caller gives up: the walk's first frame keeps them, with
/// no reference counting of its own (`ffi.StructuralEqual`'s arguments; a tenth of comparing
/// two small objects went to the roots' counts).
pub fn structural_equal_values(
    lhs: Any,
    rhs: Any,
    map_free_vars: bool,
    skip_tensor_content: bool,
) -> Result<bool> {
    Comparer::new(map_free_vars, skip_tensor_content, false).run(lhs, rhs)
}

/// The steps (root first) to the first mismatch on each side, or `None` when equal.
#[allow(clippy::type_complexity)]
pub fn first_mismatch(
    lhs: &Any,
    rhs: &Any,
    map_free_vars: bool,
    skip_tensor_content: bool,
) -> Result<Option<(Vec<PathStep>, Vec<PathStep>)>> {
    let c = Comparer::new(map_free_vars, skip_tensor_content, true);
    if c.run(lhs.clone(), rhs.clone())? {
        return Ok(None);
    }
    let (mut l, mut r) = c.paths.take().unwrap_or_default();
    l.reverse();
    r.reverse();
    Ok(Some((l, r)))
}

/// An access path (from the root) of the given steps.
pub fn access_path(steps: Vec<PathStep>) -> crate::builtin_types::access_path::AccessPath {
    use crate::builtin_types::access_path::{extend, kind, AccessPathObj, AccessStepObj};
    let mut path = AccessPathObj::root();
    for step in steps {
        let (k, key) = match step {
            PathStep::Attr(name) => (kind::ATTR, Any::from(name)),
            PathStep::ArrayItem(i) => (kind::ARRAY_ITEM, Any::from(i)),
            PathStep::ArrayItemMissing(i) => (kind::ARRAY_ITEM_MISSING, Any::from(i)),
            PathStep::MapItem(k) => (kind::MAP_ITEM, k),
            PathStep::MapItemMissing(k) => (kind::MAP_ITEM_MISSING, k),
        };
        path = extend(&path, AccessStepObj::new(k, key));
    }
    path
}

/// `ffi.GetFirstStructuralMismatch`: the pair of access paths to the first mismatch, or `None`
/// when equal.
pub fn first_mismatch_paths(
    lhs: &Any,
    rhs: &Any,
    map_free_vars: bool,
    skip_tensor_content: bool,
) -> Result<Option<crate::array::Array>> {
    Ok(
        first_mismatch(lhs, rhs, map_free_vars, skip_tensor_content)?.map(|(l, r)| {
            crate::array::Array::from_vec(vec![
                Any::from(access_path(l)),
                Any::from(access_path(r)),
            ])
        }),
    )
}

struct Comparer {
    /// `type_table::layout_generation()` when the walk began.
    generation: u64,
    region: Cell<i32>,
    skip_tensor_content: bool,
    /// Reverse mismatch paths (lhs, rhs), when tracing.
    paths: RefCell<Option<(Vec<PathStep>, Vec<PathStep>)>>,
    /// The bound (lhs, rhs) object pairs, which keep both alive (so addresses stay unique).
    /// Up to `BOUND_SEARCHED` of them are found by searching `bound`; past that, through the
    /// maps (lhs object -> its pair's index, rhs object -> its pair's index). A later binding
    /// of an object replaces an earlier one, as a map insert does.
    bound: RefCell<Vec<(Any, Any)>>,
    map_lhs: RefCell<PtrMap<usize, usize>>,
    map_rhs: RefCell<PtrMap<usize, usize>>,
    /// Containers and objects on the current path (beyond `SHALLOW_PATH`), per side, and the
    /// path length.
    active: RefCell<PtrSet<(bool, usize)>>,
    depth: Cell<usize>,
    /// How many hooks (user code, which may change Lists and Dicts) this walk has called.
    hooks_run: Cell<u64>,
    callback: HookCallback<Comparer>,
    buffers: Buffers,
}

/// Bindings up to this many are found by searching them (no maps for a small walk: a
/// comparison of one let-binding made three tables for its one variable).
const BOUND_SEARCHED: usize = 8;

enum Step {
    Done(bool),
    Push(Frame),
}

enum Next {
    Child(Any, Any),
    /// Items `i` of the sequence frame are two maps, to be begun without references of their
    /// own (the sequence frame keeps them alive). An index, not their frame: `Next` stays
    /// small, and `next` returns one per child.
    SeqMaps(usize),
    /// Items `i` of the sequence frame are two Arrays, begun likewise (`Items::Borrowed`).
    SeqArrays(usize),
    /// Two Arrays, values of the two Maps of the map frame, begun likewise (the frame keeps
    /// the Maps, which never change).
    MapArrays(*const Any, *const Any),
    Done(bool),
}

struct SeqFrame {
    ptrs: (usize, usize),
    lhs: Items,
    rhs: Items,
    next: usize,
    /// `hooks_run` when Lists' elements were read (see `Items::reread`).
    seen: u64,
}

struct MapFrame {
    ptrs: (usize, usize),
    /// The two maps, alive while the frame is: through `keep`, or through the sequence frame
    /// below whose items they are (`Next::SeqMaps`).
    lhs_obj: *mut TVMFFIObject,
    rhs_obj: *mut TVMFFIObject,
    keep: Option<(Any, Any)>,
    /// The entries, copied (a Dict's; empty for a Map, read in place).
    lhs: Vec<(Any, Any)>,
    /// A Map read in place: `next` is its next position.
    in_place: bool,
    /// The entry counts when the frame began.
    lens: (usize, usize),
    next: usize,
    /// The lhs key and mapped rhs key of the value being compared.
    current: Option<(Any, Any)>,
    /// `hooks_run` when a Dict's entries were read (see `reread_dict`).
    seen: u64,
}

struct FieldsFrame {
    lhs: Any,
    rhs: Any,
    kind: i32,
    free_var_saved: Option<i32>,
    facts: &'static TypeFacts,
    /// The field being compared, when its result comes back.
    next: usize,
    field_saved: Option<i32>,
}

enum Frame {
    Seq(SeqFrame),
    /// Boxed: the largest frame, and the rarest among objects' fields.
    Map(Box<MapFrame>),
    Fields(FieldsFrame),
}

fn obj_ptr(v: &Any) -> *mut TVMFFIObject {
    // SAFETY: callers pass object values only.
    unsafe { v.raw().value.v_obj }
}

/// Cross-representation string equality (small vs heap, String vs Bytes kinds kept apart).
fn string_cross_equal(l: &TVMFFIAny, r: &TVMFFIAny) -> bool {
    let pair_ok = matches!(
        (l.type_index, r.type_index),
        (kTVMFFIStr, kTVMFFISmallStr)
            | (kTVMFFISmallStr, kTVMFFIStr)
            | (kTVMFFIBytes, kTVMFFISmallBytes)
            | (kTVMFFISmallBytes, kTVMFFIBytes)
    );
    // SAFETY: both are live string-like values.
    pair_ok && unsafe { raw_any_bytes(l) == raw_any_bytes(r) }
}

impl Comparer {
    fn new(map_free_vars: bool, skip_tensor_content: bool, trace: bool) -> Comparer {
        Comparer {
            region: Cell::new(if map_free_vars {
                kTVMFFIDefRegionKindPattern
            } else {
                kTVMFFIDefRegionKindNone
            }),
            skip_tensor_content,
            paths: RefCell::new(trace.then(Default::default)),
            map_lhs: RefCell::new(PtrMap::default()),
            map_rhs: RefCell::new(PtrMap::default()),
            bound: RefCell::new(Vec::new()),
            active: RefCell::new(PtrSet::default()),
            depth: Cell::new(0),
            hooks_run: Cell::new(0),
            callback: HookCallback::new(),
            buffers: Buffers::default(),
            generation: crate::type_table::layout_generation(),
        }
    }

    fn tracing(&self) -> bool {
        self.paths.borrow().is_some()
    }

    fn record(&self, l: PathStep, r: PathStep) {
        if let Some((lp, rp)) = self.paths.borrow_mut().as_mut() {
            lp.push(l);
            rp.push(r);
        }
    }

    fn run(&self, lhs: Any, rhs: Any) -> Result<bool> {
        let r = self.compare_any(lhs, rhs);
        self.callback.finish();
        r
    }

    fn compare_any(&self, lhs: Any, rhs: Any) -> Result<bool> {
        let mut stack = FrameStack::new();
        let r = self.walk(lhs, rhs, &mut stack);
        if r.is_err() {
            // A hook may catch the error and compare on: leave the path this walk had entered,
            // or later walks would take its objects for a cycle.
            while let Some(frame) = stack.pop() {
                self.leave(match &frame {
                    Frame::Seq(f) => f.ptrs,
                    Frame::Map(f) => f.ptrs,
                    Frame::Fields(f) => (obj_ptr(&f.lhs) as usize, obj_ptr(&f.rhs) as usize),
                });
            }
        }
        r
    }

    fn walk(&self, lhs: Any, rhs: Any, stack: &mut FrameStack<Frame>) -> Result<bool> {
        let mut result = match self.begin(lhs, rhs)? {
            Step::Done(b) => return Ok(b),
            Step::Push(f) => {
                stack.push(f);
                None
            }
        };
        loop {
            let top = stack.last_mut().expect("a frame is open");
            let next = match result.take() {
                Some(ok) => self.accept(top, ok)?,
                None => self.next(top)?,
            };
            match next {
                Next::Child(l, r) => match self.begin(l, r)? {
                    Step::Done(b) => result = Some(b),
                    Step::Push(f) => stack.push(f),
                },
                Next::SeqMaps(i) => {
                    let step = match top {
                        Frame::Seq(f) => {
                            self.begin_map(&f.lhs.as_slice()[i], &f.rhs.as_slice()[i])?
                        }
                        _ => unreachable!("only sequence frames name their maps"),
                    };
                    match step {
                        Step::Done(b) => result = Some(b),
                        Step::Push(f) => stack.push(f),
                    }
                }
                Next::SeqArrays(i) => match self.begin_seq_arrays(top, i)? {
                    Step::Done(b) => result = Some(b),
                    Step::Push(f) => stack.push(f),
                },
                // SAFETY: values of the Maps of the frame on top, which keeps them.
                Next::MapArrays(l, r) => match unsafe { self.begin_arrays(&*l, &*r) }? {
                    Step::Done(b) => result = Some(b),
                    Step::Push(f) => stack.push(f),
                },
                Next::Done(b) => {
                    let frame = stack.pop().expect("a frame is open");
                    self.leave_frame(&frame);
                    if let Frame::Seq(f) = frame {
                        f.lhs.recycle(&self.buffers);
                        f.rhs.recycle(&self.buffers);
                    }
                    if stack.is_empty() {
                        return Ok(b);
                    }
                    result = Some(b);
                }
            }
        }
    }

    /// Marks a pair of containers or objects as on the path. Only paths deeper than
    /// `SHALLOW_PATH` are tracked: a cycle makes the path grow without bound, so it is still
    /// caught, one loop in.
    fn enter(&self, l: &Any, r: &Any) -> Result<(usize, usize)> {
        let (lp, rp) = (obj_ptr(l) as usize, obj_ptr(r) as usize);
        let depth = self.depth.get() + 1;
        self.depth.set(depth);
        if depth <= SHALLOW_PATH {
            return Ok((lp, rp));
        }
        let mut active = self.active.borrow_mut();
        for (side, p, v) in [(false, lp, l), (true, rp, r)] {
            if active.contains(&(side, p)) {
                self.depth.set(depth - 1);
                return Err(Error::value_error(format!(
                    "StructuralEqual: cycle detected, a `{}` contains itself",
                    v.as_view().type_key()
                )));
            }
        }
        super::path_insert(&mut active, (false, lp));
        super::path_insert(&mut active, (true, rp));
        Ok((lp, rp))
    }

    fn leave(&self, (lp, rp): (usize, usize)) {
        let depth = self.depth.get();
        self.depth.set(depth - 1);
        if depth <= SHALLOW_PATH {
            return;
        }
        let mut active = self.active.borrow_mut();
        active.remove(&(false, lp));
        active.remove(&(true, rp));
    }

    fn leave_frame(&self, frame: &Frame) {
        match frame {
            Frame::Seq(f) => self.leave(f.ptrs),
            Frame::Map(f) => self.leave(f.ptrs),
            Frame::Fields(_) => {}
        }
    }

    /// The comparison of two values that hold no other values (different kinds, POD, strings,
    /// big integers), which needs no frame, mapping or path entry: `begin`'s first cases, and
    /// the containers' loops take such pairs inline rather than one trip through
    /// `compare_any` each.
    #[inline]
    fn leaf(lhs: &Any, rhs: &Any) -> Option<bool> {
        let (l, r) = (lhs.raw(), rhs.raw());
        let ti = l.type_index;
        if ti != r.type_index {
            return Some(string_cross_equal(l, r));
        }
        if ti < kTVMFFIStaticObjectBegin {
            // SAFETY: Float stores v_float64; every value has 8 payload bytes.
            unsafe {
                if ti == kTVMFFIFloat && l.value.v_float64.is_nan() {
                    return Some(r.value.v_float64.is_nan());
                }
                return Some(
                    l.small_str_len == r.small_str_len && l.value.v_int64 == r.value.v_int64,
                );
            }
        }
        match ti {
            kTVMFFIBigInt => {
                let (lo, ro) = (obj_ptr(lhs), obj_ptr(rhs));
                // SAFETY: live BigInt objects.
                Some(unsafe {
                    (*(lo as *const BigIntObj)).words() == (*(ro as *const BigIntObj)).words()
                })
            }
            // SAFETY: live string objects.
            kTVMFFIStr | kTVMFFIBytes => Some(unsafe { raw_any_bytes(l) == raw_any_bytes(r) }),
            _ => None,
        }
    }

    /// Takes the pair by value: a frame keeps what it needs without another reference each.
    fn begin(&self, lhs: Any, rhs: Any) -> Result<Step> {
        if let Some(eq) = Self::leaf(&lhs, &rhs) {
            return Ok(Step::Done(eq));
        }
        let ti = lhs.raw().type_index;
        let (lo, ro) = (obj_ptr(&lhs), obj_ptr(&rhs));
        match ti {
            kTVMFFIArray | kTVMFFIList => {
                // SAFETY: live sequences (no lock for an Array: `lock_if_mutable`).
                let (ln, rn) = unsafe { (container_len(lo, ti), container_len(ro, ti)) };
                if ln != rn && !self.tracing() {
                    return Ok(Step::Done(false));
                }
                let ptrs = self.enter(&lhs, &rhs)?;
                // (a List may change length meanwhile: `next` compares what was copied)
                let (lv, rv) = (Items::of(lhs, &self.buffers), Items::of(rhs, &self.buffers));
                Ok(self.seq_frame(ptrs, lv, rv))
            }
            kTVMFFIMap | kTVMFFIDict => Ok(match self.begin_map(&lhs, &rhs)? {
                Step::Push(Frame::Map(mut f)) => {
                    f.keep = Some((lhs, rhs));
                    Step::Push(Frame::Map(f))
                }
                step => step,
            }),
            kTVMFFIShape => {
                let a = lhs.get::<crate::shape::Shape>()?;
                let b = rhs.get::<crate::shape::Shape>()?;
                Ok(Step::Done(a.as_slice() == b.as_slice()))
            }
            kTVMFFITensor => self.compare_tensor(lo, ro).map(Step::Done),
            _ => self.begin_object(lhs, rhs),
        }
    }

    /// The frame of Arrays `i` of sequence frame `top` (`Next::SeqArrays`), as `begin` makes
    /// it for two Arrays.
    #[inline(never)]
    fn begin_seq_arrays(&self, top: &Frame, i: usize) -> Result<Step> {
        let Frame::Seq(outer) = top else {
            unreachable!("only sequence frames name their arrays")
        };
        self.begin_arrays(&outer.lhs.as_slice()[i], &outer.rhs.as_slice()[i])
    }

    /// The frame of two Arrays read without references of their own: a frame below keeps them.
    #[inline(never)]
    fn begin_arrays(&self, lhs: &Any, rhs: &Any) -> Result<Step> {
        let (lv, rv) = (Items::Borrowed(obj_ptr(lhs)), Items::Borrowed(obj_ptr(rhs)));
        if lv.len() != rv.len() && !self.tracing() {
            return Ok(Step::Done(false));
        }
        let ptrs = self.enter(lhs, rhs)?;
        Ok(self.seq_frame(ptrs, lv, rv))
    }

    /// The frame of two sequences entered at `ptrs`.
    fn seq_frame(&self, ptrs: (usize, usize), lhs: Items, rhs: Items) -> Step {
        Step::Push(Frame::Seq(SeqFrame {
            ptrs,
            lhs,
            rhs,
            next: 0,
            seen: self.hooks_run.get(),
        }))
    }

    /// The frame of two Maps or two Dicts, which does not keep them (`MapFrame::keep` is
    /// `None`): they must outlive it.
    fn begin_map(&self, lhs: &Any, rhs: &Any) -> Result<Step> {
        let ti = lhs.type_index();
        let (lo, ro) = (obj_ptr(lhs), obj_ptr(rhs));
        // A Map's entries are read in place (copy-on-write: it cannot change while the frame
        // holds it); a Dict's are copied first (a hook may change it meanwhile).
        // SAFETY: live maps.
        let ln = unsafe { container_len(lo, ti) };
        let in_place = ti == kTVMFFIMap;
        let items = if in_place {
            Vec::new()
        } else {
            // SAFETY: a live map.
            unsafe { map_items(lo) }
        };
        let ln = if in_place { ln } else { items.len() };
        // SAFETY: a live map.
        let rn = unsafe { container_len(ro, ti) };
        if ln != rn && !self.tracing() {
            return Ok(Step::Done(false));
        }
        let ptrs = self.enter(lhs, rhs)?;
        let next = if in_place {
            // SAFETY: a live map.
            unsafe { RawMap::from_ptr(lo as *mut MapBase) }.begin() as usize
        } else {
            0
        };
        let frame = MapFrame {
            ptrs,
            lhs_obj: lo,
            rhs_obj: ro,
            keep: None,
            lens: (ln, rn),
            lhs: items,
            in_place,
            next,
            current: None,
            seen: self.hooks_run.get(),
        };
        Ok(Step::Push(Frame::Map(Box::new(frame))))
    }

    fn compare_tensor(&self, lo: *mut TVMFFIObject, ro: *mut TVMFFIObject) -> Result<bool> {
        if lo == ro {
            return Ok(true);
        }
        // SAFETY: live tensors.
        let (a, b) = unsafe { (tensor_parts(lo), tensor_parts(ro)) };
        if a.shape != b.shape {
            return Ok(false);
        }
        if (a.dtype.code, a.dtype.bits, a.dtype.lanes)
            != (b.dtype.code, b.dtype.bits, b.dtype.lanes)
        {
            return Ok(false);
        }
        if self.skip_tensor_content {
            return Ok(true);
        }
        for (side, t) in [("lhs", &a), ("rhs", &b)] {
            if t.device.device_type != kDLCPU {
                return Err(Error::internal(format!(
                    "Check failed: {side}.device().device_type == kDLCPU ({} vs. {}) : can only compare CPU tensor",
                    t.device.device_type, kDLCPU
                )));
            }
        }
        for (side, t) in [("lhs", &a), ("rhs", &b)] {
            if !t.contiguous {
                return Err(Error::internal(format!(
                    "Check failed: ({side}.IsContiguous()) is false: Can only compare contiguous tensor"
                )));
            }
        }
        // SAFETY: contiguous CPU tensors of the same shape and dtype hold `data_size` bytes each.
        Ok(unsafe { a.bytes() == b.bytes() })
    }

    fn begin_object(&self, lhs: Any, rhs: Any) -> Result<Step> {
        let (lo, ro) = (obj_ptr(&lhs), obj_ptr(&rhs));
        // SAFETY: a live object.
        let ti = unsafe { (*lo).type_index };
        let facts = type_facts(ti)?;
        let kind = facts.kind;
        if kind == kTVMFFISEqHashKindUniqueInstance {
            return Ok(Step::Done(lo == ro));
        }
        if kind == kTVMFFISEqHashKindConstTreeNode && lo == ro {
            return Ok(Step::Done(true));
        }
        if kind == kTVMFFISEqHashKindDAGNode || kind == kTVMFFISEqHashKindFreeVar {
            if let Some(at) = self.bound_pair(lo as usize, true) {
                return Ok(Step::Done(obj_ptr(&self.bound.borrow()[at].1) == ro));
            }
            if self.bound_pair(ro as usize, false).is_some() {
                return Ok(Step::Done(false));
            }
        }
        let free_var_saved = (kind == kTVMFFISEqHashKindFreeVar).then(|| {
            let saved = self.region.get();
            if saved == kTVMFFIDefRegionKindSimple {
                self.region.set(kTVMFFIDefRegionKindNone);
            }
            saved
        });
        if let Some(hook) = hook_in(&S_EQUAL_COLUMN, S_EQUAL_ATTR, ti)? {
            let ptrs = self.enter(&lhs, &rhs)?;
            let ok = self.call_hook(&hook, &lhs, &rhs);
            self.leave(ptrs);
            return Ok(Step::Done(self.finish_object(
                &lhs,
                &rhs,
                kind,
                free_var_saved,
                ok?,
            )));
        }
        if facts.fields.is_empty() {
            // (a variable, say: nothing to descend into, so no frame and no path entry)
            return Ok(Step::Done(self.finish_object(
                &lhs,
                &rhs,
                kind,
                free_var_saved,
                true,
            )));
        }
        self.enter(&lhs, &rhs)?;
        Ok(Step::Push(Frame::Fields(FieldsFrame {
            lhs,
            rhs,
            kind,
            free_var_saved,
            facts,
            next: 0,
            field_saved: None,
        })))
    }

    /// The index in `bound` of the latest pair binding object `obj` on the lhs side (`lhs`)
    /// or the rhs side.
    fn bound_pair(&self, obj: usize, lhs: bool) -> Option<usize> {
        let bound = self.bound.borrow();
        if bound.len() <= BOUND_SEARCHED {
            let side = |p: &(Any, Any)| obj_ptr(if lhs { &p.0 } else { &p.1 }) as usize;
            return bound.iter().rposition(|p| side(p) == obj);
        }
        let map = if lhs { &self.map_lhs } else { &self.map_rhs };
        map.borrow().get(&obj).copied()
    }

    fn bind(&self, lhs: &Any, rhs: &Any) {
        let mut bound = self.bound.borrow_mut();
        if bound.capacity() == 0 {
            bound.reserve(BOUND_SEARCHED);
        }
        bound.push((lhs.clone(), rhs.clone()));
        if bound.len() <= BOUND_SEARCHED {
            return;
        }
        let (mut ml, mut mr) = (self.map_lhs.borrow_mut(), self.map_rhs.borrow_mut());
        // the first binding past the search: every pair so far goes into the maps, in order
        let from = if bound.len() == BOUND_SEARCHED + 1 {
            0
        } else {
            bound.len() - 1
        };
        for (at, p) in bound.iter().enumerate().skip(from) {
            ml.insert(obj_ptr(&p.0) as usize, at);
            mr.insert(obj_ptr(&p.1) as usize, at);
        }
    }

    /// The DAG and free-variable bookkeeping after the fields compared `fields_ok`.
    fn finish_object(
        &self,
        lhs: &Any,
        rhs: &Any,
        kind: i32,
        free_var_saved: Option<i32>,
        fields_ok: bool,
    ) -> bool {
        let Some(saved) = free_var_saved else {
            if fields_ok && kind == kTVMFFISEqHashKindDAGNode {
                self.bind(lhs, rhs);
            }
            return fields_ok;
        };
        self.region.set(saved);
        if !fields_ok {
            return false;
        }
        if obj_ptr(lhs) == obj_ptr(rhs) || saved != kTVMFFIDefRegionKindNone {
            self.bind(lhs, rhs);
            return true;
        }
        false
    }

    /// The mapped counterpart of an lhs map key (objects through the lhs->rhs mapping).
    fn map_key(&self, key: &Any, lhs_side: bool) -> Any {
        if key.type_index() < kTVMFFIStaticObjectBegin {
            return key.clone();
        }
        match self.bound_pair(obj_ptr(key) as usize, lhs_side) {
            Some(at) => {
                let pair = &self.bound.borrow()[at];
                if lhs_side {
                    pair.1.clone()
                } else {
                    pair.0.clone()
                }
            }
            None => key.clone(),
        }
    }

    /// Items `i` of a sequence frame, not leaves. Out of line, as in hash (inlined, the
    /// leaves' loop of a 200k-int Array got slower).
    #[inline(never)]
    fn seq_child(f: &mut SeqFrame, i: usize) -> Next {
        match f.lhs.as_slice()[i].type_index() {
            // two maps or Arrays held by this frame's sequences (Arrays, or Lists' copies;
            // `leaf` found the two kinds equal)
            kTVMFFIMap | kTVMFFIDict => return Next::SeqMaps(i),
            kTVMFFIArray => return Next::SeqArrays(i),
            _ => {}
        }
        Next::Child(f.lhs.take(i), f.rhs.take(i))
    }

    fn next(&self, frame: &mut Frame) -> Result<Next> {
        match frame {
            Frame::Seq(f) => {
                // (the slices read once: per element, the `Items` match cost 1.2x on long
                // Arrays of leaves)
                let (ls, rs) = (f.lhs.as_slice(), f.rhs.as_slice());
                let n = ls.len().min(rs.len());
                let mut i = f.next;
                while i < n {
                    match Self::leaf(&ls[i], &rs[i]) {
                        Some(true) => i += 1,
                        // as `accept` records a child's mismatch
                        Some(false) => {
                            f.next = i + 1;
                            self.record(
                                PathStep::ArrayItem(i as i64),
                                PathStep::ArrayItem(i as i64),
                            );
                            return Ok(Next::Done(false));
                        }
                        None => {
                            f.next = i + 1;
                            return Ok(Self::seq_child(f, i));
                        }
                    }
                }
                f.next = i;
                if f.lhs.len() == f.rhs.len() {
                    return Ok(Next::Done(true));
                }
                let (ln, rn) = (f.lhs.len() as i64, f.rhs.len() as i64);
                if ln > rn {
                    self.record(PathStep::ArrayItem(rn), PathStep::ArrayItemMissing(rn));
                } else {
                    self.record(PathStep::ArrayItemMissing(ln), PathStep::ArrayItem(ln));
                }
                Ok(Next::Done(false))
            }
            Frame::Map(f) => {
                let rhs_obj = f.rhs_obj;
                loop {
                    if f.in_place {
                        // Two Maps: the values are read in place, without references of their
                        // own (a Map never changes, and the frame, or the one below, keeps both).
                        // SAFETY: this Map outlives the frame and does not change meanwhile.
                        let m = unsafe { RawMap::from_ptr(f.lhs_obj as *mut MapBase) };
                        let pos = f.next as u64;
                        if pos == m.end() {
                            break;
                        }
                        f.next = m.advance(pos) as usize;
                        // SAFETY: a valid position; the key clone takes its own reference, the
                        // value is borrowed from the Map (`Any` is a transparent `TVMFFIAny`).
                        let (k, v) = unsafe {
                            let kv = &*m.kv_at(pos);
                            (
                                Any::from_raw(clone_raw(&kv.key)),
                                &*(&kv.value as *const TVMFFIAny as *const Any),
                            )
                        };
                        let rk = self.map_key(&k, true);
                        // SAFETY: a live Map.
                        let Some(rv) = unsafe { map_find_in_place(rhs_obj, &rk) }? else {
                            self.record(PathStep::MapItem(k), PathStep::MapItemMissing(rk));
                            return Ok(Next::Done(false));
                        };
                        // SAFETY: the rhs Map outlives the frame and does not change.
                        let rv = unsafe { &*rv };
                        match Self::leaf(v, rv) {
                            Some(true) => continue,
                            // as `accept` records a child's mismatch
                            Some(false) => {
                                self.record(PathStep::MapItem(k), PathStep::MapItem(rk));
                                return Ok(Next::Done(false));
                            }
                            None => {
                                f.current = Some((k, rk));
                                if v.type_index() == kTVMFFIArray {
                                    return Ok(Next::MapArrays(v, rv));
                                }
                                return Ok(Next::Child(v.clone(), rv.clone()));
                            }
                        }
                    }
                    if f.next >= f.lhs.len() {
                        break;
                    }
                    f.next += 1;
                    let (k, v) = std::mem::take(&mut f.lhs[f.next - 1]);
                    let rk = self.map_key(&k, true);
                    // SAFETY: a live map.
                    match unsafe { map_get(rhs_obj, &rk) }? {
                        None => {
                            self.record(PathStep::MapItem(k), PathStep::MapItemMissing(rk));
                            return Ok(Next::Done(false));
                        }
                        Some(rv) => match Self::leaf(&v, &rv) {
                            Some(true) => {}
                            // as `accept` records a child's mismatch
                            Some(false) => {
                                self.record(PathStep::MapItem(k), PathStep::MapItem(rk));
                                return Ok(Next::Done(false));
                            }
                            None => {
                                f.current = Some((k, rk));
                                return Ok(Next::Child(v, rv));
                            }
                        },
                    }
                }
                let lhs_obj = f.lhs_obj;
                let (ln, rn) = f.lens;
                if ln == rn {
                    return Ok(Next::Done(true));
                }
                // SAFETY: a live map.
                for (k, _) in unsafe { map_items(rhs_obj) } {
                    let lk = self.map_key(&k, false);
                    // SAFETY: a live map.
                    if unsafe { map_get(lhs_obj, &lk) }?.is_none() {
                        self.record(PathStep::MapItemMissing(lk), PathStep::MapItem(k));
                        return Ok(Next::Done(false));
                    }
                }
                Ok(Next::Done(false))
            }
            Frame::Fields(f) => {
                // SAFETY: the frame holds the object.
                unsafe { catch_up(&mut f.facts, &mut f.next, obj_ptr(&f.lhs), self.generation) }?;
                if let Some(field) = f.facts.fields.get(f.next) {
                    // SAFETY: the object is live and its type has this field.
                    let lv = unsafe { field.get(obj_ptr(&f.lhs)) }?;
                    // SAFETY: the object is live and its type has this field.
                    let rv = unsafe { field.get(obj_ptr(&f.rhs)) }?;
                    if let Some(requested) = field.region {
                        f.field_saved = Some(push_region(&self.region, requested));
                    }
                    // `next` advances when the result comes back (the failing field is named).
                    return Ok(Next::Child(lv, rv));
                }
                Ok(Next::Done(self.finish_fields(f, true)))
            }
        }
    }

    fn finish_fields(&self, f: &mut FieldsFrame, ok: bool) -> bool {
        self.leave((obj_ptr(&f.lhs) as usize, obj_ptr(&f.rhs) as usize));
        self.finish_object(&f.lhs, &f.rhs, f.kind, f.free_var_saved, ok)
    }

    /// A child's result: continue (`next`) on success, or record this level's step and fail.
    fn accept(&self, frame: &mut Frame, ok: bool) -> Result<Next> {
        match frame {
            Frame::Seq(f) => {
                if ok {
                    if f.seen != self.hooks_run.get() && (f.lhs.is_copy() || f.rhs.is_copy()) {
                        // a hook ran meanwhile: Lists' elements not compared yet are read again
                        f.lhs.reread();
                        f.rhs.reread();
                        f.seen = self.hooks_run.get();
                    }
                    return self.next(frame);
                }
                let i = (f.next - 1) as i64;
                self.record(PathStep::ArrayItem(i), PathStep::ArrayItem(i));
                Ok(Next::Done(false))
            }
            Frame::Map(f) => {
                let (k, rk) = f.current.take().expect("a map value was being compared");
                if ok {
                    if f.seen != self.hooks_run.get() && !f.in_place {
                        self.reread_dict(f)?;
                    }
                    return self.next(frame);
                }
                self.record(PathStep::MapItem(k), PathStep::MapItem(rk));
                Ok(Next::Done(false))
            }
            Frame::Fields(f) => {
                if let Some(saved) = f.field_saved.take() {
                    self.region.set(saved);
                }
                let field = f.facts.fields[f.next].field;
                f.next += 1;
                if ok {
                    return self.next(frame);
                }
                let name = field_name(field);
                self.record(PathStep::Attr(name.clone()), PathStep::Attr(name));
                Ok(Next::Done(self.finish_fields(f, false)))
            }
        }
    }

    /// A hook ran while a Dict frame compared its values: the entries not compared yet get
    /// the lhs Dict's current values (the official walk iterates it live; the rhs side is
    /// looked up live already), and keys no longer there are dropped.
    #[inline(never)]
    fn reread_dict(&self, f: &mut MapFrame) -> Result<()> {
        f.seen = self.hooks_run.get();
        let mut kept = Vec::with_capacity(f.lhs.len() - f.next);
        for (k, _) in f.lhs.drain(f.next..) {
            // SAFETY: a live Dict (the frame, or the one below, keeps it).
            if let Some(v) = unsafe { map_get(f.lhs_obj, &k) }? {
                kept.push((k, v));
            }
        }
        f.lhs.extend(kept);
        Ok(())
    }

    fn call_hook(&self, hook: &Function, lhs: &Any, rhs: &Any) -> Result<bool> {
        self.hooks_run.set(self.hooks_run.get() + 1);
        let cb = Any::from(self.callback());
        let r = hook.call(&[lhs.as_view(), rhs.as_view(), cb.as_view()])?;
        match r.type_index() {
            kTVMFFIBool | kTVMFFIInt => Ok(r.as_view().as_i64().unwrap_or(0) != 0),
            // (the official conversion's message)
            _ => Err(Error::type_error(format!(
                "Cannot convert from type `{}` to `bool`",
                crate::function::mismatch_type_key(&r.as_view())
            ))),
        }
    }

    /// The `(lhs, rhs, def_region_kind, field_name) -> bool` callback of `__s_equal__` hooks.
    fn callback(&self) -> Function {
        self.callback.get(self, |walk| Function::from_packed(move |args: &[AnyView<'_>]| -> Result<Any> {
            let c = walk.get("StructuralEqual callback")?;
            let [l, r, kind, name] = args else {
                return Err(Error::type_error(format!(
                    "StructuralEqual callback: expected 4 arguments (lhs, rhs, def_region_kind, field_name), got {}",
                    args.len()
                )));
            };
            let kind = kind.as_i64().ok_or_else(|| {
                Error::type_error(format!(
                    "StructuralEqual callback: argument #2 must be an int, got `{}`",
                    kind.type_key()
                ))
            })? as i32;
            super::stack::check("StructuralEqual")?;
            let saved = push_region(&c.region, kind);
            let ok = c.compare_any(l.to_owned()?, r.to_owned()?);
            c.region.set(saved);
            let ok = ok?;
            if !ok && c.tracing() {
                let name = name.as_str().ok_or_else(|| {
                    Error::type_error(format!(
                        "Cannot convert from type `{}` to `str`",
                        crate::function::mismatch_type_key(name)
                    ))
                })?;
                c.record(
                    PathStep::Attr(name.to_owned()),
                    PathStep::Attr(name.to_owned()),
                );
            }
            Ok(Any::from(ok))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::array_of;
    use crate::list::List;

    fn eq(a: Any, b: Any) -> bool {
        structural_equal(&a, &b, false, false).unwrap()
    }

    #[test]
    fn basics() {
        assert!(eq(
            Any::from(array_of([1i64, 2])),
            Any::from(array_of([1i64, 2]))
        ));
        assert!(!eq(
            Any::from(array_of([1i64, 2])),
            Any::from(array_of([1i64, 3]))
        ));
        assert!(!eq(Any::from(1i64), Any::from(1.0f64)));
        assert!(eq(Any::from(f64::NAN), Any::from(-f64::NAN)));
        assert!(!eq(Any::from(0.0f64), Any::from(-0.0f64)));
        let heap = Any::from(crate::string::Str::from_content(b"abc"));
        assert!(eq(heap, Any::from("abc")));
    }

    #[test]
    fn mismatch_paths() {
        let a = Any::from(array_of([1i64, 2, 3]));
        let b = Any::from(array_of([1i64, 2]));
        let (l, r) = first_mismatch(&a, &b, false, false).unwrap().unwrap();
        assert!(matches!(l[..], [PathStep::ArrayItem(2)]));
        assert!(matches!(r[..], [PathStep::ArrayItemMissing(2)]));
        assert!(first_mismatch(&a, &a, false, false).unwrap().is_none());
    }

    /// The walks read an Array's elements and a Map's entries in place and copy a List's and a
    /// Dict's: nested mixes of the four compare and hash alike, past `SHALLOW_PATH` too, and a
    /// mismatch deep inside Arrays names its path.
    #[test]
    fn nested_containers_of_every_kind() {
        use crate::map::{Dict, Map};
        let build = |leaf: i64| -> Any {
            let mut v = Any::from(array_of([leaf, 2]));
            for depth in 0..100i64 {
                v = match depth % 4 {
                    0 => Any::from(array_of([v, Any::from(depth), Any::from("s")])),
                    1 => {
                        let l = List::new();
                        l.push(Any::from(depth));
                        l.push(v);
                        Any::from(l)
                    }
                    2 => Any::from(
                        Map::from_pairs([(Any::from("k"), v), (Any::from(depth), Any::from(1.5))])
                            .unwrap(),
                    ),
                    _ => {
                        let d = Dict::new();
                        d.insert(Any::from(depth), v).unwrap();
                        Any::from(d)
                    }
                };
            }
            v
        };
        let (a, b, c) = (build(1), build(1), build(7));
        assert!(eq(a.clone(), b.clone()));
        assert!(!eq(a.clone(), c.clone()));
        let h = |v: &Any| super::super::hash::structural_hash(v, false, false).unwrap();
        assert_eq!(h(&a), h(&b));
        assert_ne!(h(&a), h(&c));
        // the innermost Array, under 100 levels: 25 of each kind
        let (l, r) = first_mismatch(&a, &c, false, false).unwrap().unwrap();
        assert_eq!(l.len(), 101);
        assert_eq!(r.len(), 101);
        assert!(matches!(l[100], PathStep::ArrayItem(0)), "{:?}", l[100]);
        assert!(matches!(l[0], PathStep::MapItem(_)), "{:?}", l[0]);
    }

    /// Maps, small and large, are read in place: equal ones in any insertion order, a differing
    /// value, a missing key on either side (tracing compares past a length difference), each with
    /// the official path steps.
    #[test]
    fn maps_compare_in_place() {
        use crate::map::Map;
        let map = |n: i64, skip: Option<i64>, bump: Option<i64>, rev: bool| -> Any {
            let mut keys: Vec<i64> = (0..n).filter(|&i| Some(i) != skip).collect();
            if rev {
                keys.reverse();
            }
            let pairs = keys.into_iter().map(|i| {
                let v = if Some(i) == bump { i + 100 } else { i };
                (Any::from(format!("key{i}")), Any::from(array_of([v, 1])))
            });
            Any::from(Map::from_pairs(pairs).unwrap())
        };
        // (small maps have their own storage layout)
        for n in [2i64, 5, 8, 9, 20] {
            let (mid, last) = (n / 2, n - 1);
            let a = map(n, None, None, false);
            assert!(eq(a.clone(), map(n, None, None, true)));
            let (l, _) = first_mismatch(&a, &map(n, None, Some(last), true), false, false)
                .unwrap()
                .unwrap();
            let want = format!("key{last}");
            assert!(
                matches!(&l[..], [PathStep::MapItem(k), PathStep::ArrayItem(0)]
                if k.as_view().as_str() == Some(want.as_str())),
                "{n}: {l:?}"
            );
            let (l, r) = first_mismatch(&a, &map(n, Some(mid), None, false), false, false)
                .unwrap()
                .unwrap();
            assert!(matches!(&l[..], [PathStep::MapItem(_)]), "{n}: {l:?}");
            assert!(
                matches!(&r[..], [PathStep::MapItemMissing(_)]),
                "{n}: {r:?}"
            );
            let (l, r) = first_mismatch(&map(n, Some(mid), None, false), &a, false, false)
                .unwrap()
                .unwrap();
            assert!(
                matches!(&l[..], [PathStep::MapItemMissing(_)]),
                "{n}: {l:?}"
            );
            assert!(matches!(&r[..], [PathStep::MapItem(_)]), "{n}: {r:?}");
        }
        let one = |v: i64| Any::from(Map::from_pairs([(Any::from("k"), Any::from(v))]).unwrap());
        assert!(eq(one(1), one(1)) && !eq(one(1), one(2)));
    }

    /// A cycle through an Array (read in place) inside a List is still found.
    #[test]
    fn cycles_through_arrays_are_errors() {
        let l = List::new();
        l.push(Any::from(array_of([Any::from(l.clone()), Any::from(1i64)])));
        let v = Any::from(l.clone());
        let e = structural_equal(&v, &v, false, false).unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        let e = super::super::hash::structural_hash(&v, false, false).unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        l.clear();
    }

    #[test]
    fn cycles_are_errors() {
        let l = List::new();
        l.push(Any::from(l.clone()));
        let v = Any::from(l.clone());
        let e = structural_equal(&v, &v, false, false).unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        l.clear();
    }
}
