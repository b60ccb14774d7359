//! The structural built-ins (spec §8, Structural): `ffi.StructuralEqual`, `ffi.StructuralHash`,
//! `ffi.GetFirstStructuralMismatch`, `ffi.StructuralKey`, `ffi.StructuralKeyEqual`, over the
//! algorithms of `anyffi::structural`.

use anyffi::builtin_types::structural::{
    structural_key_equal, StructuralKeyObj, VisitErrorContextObj, VisitInterruptObj,
};
use anyffi::structural::mutate;
use anyffi::structural::visit::{self, Link};
use anyffi::structural::{equal, hash};
use anyffi::{Any, AnyView, Array, Error, Function, ObjectRef, Result};

use crate::global::Registrar;

pub(super) fn register(r: &mut Registrar<'_>) {
    r.typed(
        "ffi.StructuralEqual",
        "StructuralEqual(lhs, rhs, map_free_vars, skip_tensor_content): structural equality \
         (containers by content, reflected objects by their structural kind and fields).",
        |lhs: Any, rhs: Any, map_free_vars: bool, skip_tensor_content: bool| -> Result<bool> {
            equal::structural_equal_values(lhs, rhs, map_free_vars, skip_tensor_content)
        },
    );
    r.typed(
        "ffi.StructuralHash",
        "StructuralHash(value, map_free_vars, skip_tensor_content): the structural hash \
         (uint64 bits as int), consistent with StructuralEqual.",
        |value: Any, map_free_vars: bool, skip_tensor_content: bool| -> Result<i64> {
            hash::structural_hash_value(value, map_free_vars, skip_tensor_content).map(|h| h as i64)
        },
    );
    r.typed(
        "ffi.GetFirstStructuralMismatch",
        "GetFirstStructuralMismatch(lhs, rhs, map_free_vars, skip_tensor_content): None when \
         structurally equal, else the (lhs, rhs) access paths of the first mismatch.",
        |lhs: Any,
         rhs: Any,
         map_free_vars: bool,
         skip_tensor_content: bool|
         -> Result<Option<MismatchPair>> {
            equal::first_mismatch_paths(&lhs, &rhs, map_free_vars, skip_tensor_content)
                .map(|p| p.map(MismatchPair))
        },
    );
    r.typed(
        "ffi.StructuralKey",
        "StructuralKey(key): a key compared by structural equality, its structural hash cached.",
        |key: Any| -> Result<ObjectRef<StructuralKeyObj>> { StructuralKeyObj::new(key) },
    );
    r.typed(
        "ffi.StructuralKeyEqual",
        "StructuralKeyEqual(lhs, rhs): the same value, or two StructuralKeys with equal hashes \
         and structurally equal keys.",
        |lhs: Any, rhs: Any| -> Result<bool> {
            if anyffi::hash::same_value(lhs.raw(), rhs.raw()) {
                return Ok(true);
            }
            let key = |v: &Any, side: &str| {
                v.as_view()
                    .as_object_of::<StructuralKeyObj>()
                    .ok_or_else(|| Error::internal(format!("Check not null: {side}_obj ")))
            };
            structural_key_equal(&*key(&lhs, "lhs")?, &*key(&rhs, "rhs")?)
        },
    );
    register_visit(r);
    register_mutate(r);
}

fn register_mutate(r: &mut Registrar<'_>) {
    const MUTATE: Sig = Sig {
        name: "ffi.StructuralMutatorMutate",
        params: &["ffi.StructuralMutator", "AnyView"],
        ret: "Any",
    };
    r.packed_schema(
        MUTATE.name,
        "StructuralMutatorMutate(mutator, value): value mutated through the mutator's dispatch \
         (copy-on-write; the value itself when unchanged).",
        MUTATE.schema(),
        |args| {
            let args = MUTATE.count::<2>(args)?;
            let (_keep, m) = MUTATE.mutator(args, 0)?;
            // SAFETY: a live mutator held by `_keep`; the value is borrowed for the call.
            let raw = unsafe { mutate::mutate_raw(m, args[1].raw(), mutate::INPLACE_DISALLOW) };
            mutate::value_or_unchanged(decode_raw(raw)?, &args[1])
        },
    );
    const DEFAULT_MUTATE: Sig = Sig {
        name: "ffi.StructuralMutatorDefaultMutate",
        params: &["ffi.StructuralMutator", "AnyView"],
        ret: "Any",
    };
    r.packed_schema(
        DEFAULT_MUTATE.name,
        "StructuralMutatorDefaultMutate(mutator, value): the default mutation of value (its \
         __s_mutate__ hook, or its reflected fields copy-on-write).",
        DEFAULT_MUTATE.schema(),
        |args| {
            let args = DEFAULT_MUTATE.count::<2>(args)?;
            let (_keep, m) = DEFAULT_MUTATE.mutator(args, 0)?;
            // SAFETY: a live mutator held by `_keep`; the value is borrowed for the call.
            let raw = unsafe { mutate::default_copy_raw(m, args[1].raw()) };
            mutate::value_or_unchanged(decode_raw(raw)?, &args[1])
        },
    );
    const REMAP_GET: Sig = Sig {
        name: "ffi.StructuralMutatorVarRemapGet",
        params: &["ffi.StructuralMutator", "AnyView"],
        ret: "Any",
    };
    r.packed_schema(
        REMAP_GET.name,
        "StructuralMutatorVarRemapGet(mutator, var): the replacement recorded for var, or None.",
        REMAP_GET.schema(),
        |args| {
            let args = REMAP_GET.count::<2>(args)?;
            let (_keep, m) = REMAP_GET.mutator(args, 0)?;
            // SAFETY: a live mutator held by `_keep`; the value is borrowed for the call.
            decode_raw(unsafe { mutate::var_remap_get(m, args[1].raw()) })
        },
    );
    const REMAP_SET: Sig = Sig {
        name: "ffi.StructuralMutatorVarRemapSet",
        params: &["ffi.StructuralMutator", "AnyView", "AnyView"],
        ret: "void",
    };
    r.packed_schema(
        REMAP_SET.name,
        "StructuralMutatorVarRemapSet(mutator, var, value): record value as the replacement of var.",
        REMAP_SET.schema(),
        |args| {
            let args = REMAP_SET.count::<3>(args)?;
            let (_keep, m) = REMAP_SET.mutator(args, 0)?;
            // SAFETY: a live mutator held by `_keep`; the values are borrowed for the call.
            decode_raw(unsafe { mutate::var_remap_set(m, args[1].raw(), args[2].raw()) })?;
            Ok(Any::none())
        },
    );
    const REGION: Sig = Sig {
        name: "ffi.StructuralMutatorDefRegionKind",
        params: &["ffi.StructuralMutator"],
        ret: "int",
    };
    r.packed_schema(
        REGION.name,
        "StructuralMutatorDefRegionKind(mutator): the current definition-region kind.",
        REGION.schema(),
        |args| {
            let args = REGION.count::<1>(args)?;
            let (_keep, m) = REGION.mutator(args, 0)?;
            // SAFETY: a live mutator held by `_keep`.
            Ok(Any::from(unsafe { mutate::region(m) } as i64))
        },
    );
    const WITH_REGION: Sig = Sig {
        name: "ffi.StructuralMutatorWithDefRegionKind",
        params: &["ffi.StructuralMutator", "int", "ffi.Function"],
        ret: "Any",
    };
    r.packed_schema(
        WITH_REGION.name,
        "StructuralMutatorWithDefRegionKind(mutator, kind, callback): callback() with the \
         definition-region kind set (inside a pattern region the pattern stays).",
        WITH_REGION.schema(),
        |args| {
            let args = WITH_REGION.count::<3>(args)?;
            let (_keep, m) = WITH_REGION.mutator(args, 0)?;
            let kind = WITH_REGION.int(args, 1)? as i32;
            let cb = WITH_REGION.function(args, 2)?;
            // SAFETY: a live mutator held by `_keep`.
            unsafe { mutate::with_region(m, kind, || cb.call(&[])) }
        },
    );
    const MAP: Sig = Sig {
        name: "ffi.StructuralMap",
        params: &["Any", TABLE, TABLE, "int"],
        ret: "Any",
    };
    r.packed_schema(
        MAP.name,
        "StructuralMap(root, callbacks, callbacks_with_def_region_kind, order): rewrite root, \
         calling the first matching callback before (order 0) or after the children are \
         rewritten; a callback returns the replacement.",
        MAP.schema(),
        |args| {
            let args = MAP.count::<4>(args)?;
            let root = args[0].to_owned()?;
            let links = MAP.links(args, 1)?;
            let links_kind = MAP.links(args, 2)?;
            let order = MAP.int(args, 3)? as i32;
            mutate::structural_map(root, links, links_kind, order)
        },
    );
    const SMUTATE: Sig = Sig {
        name: "ffi.StructuralMutate",
        params: &["Any", "Array<Tuple<int, ffi.Function, bool>>"],
        ret: "Any",
    };
    r.packed_schema(
        SMUTATE.name,
        "StructuralMutate(root, callbacks): mutate root; the first matching callback, called as \
         callback(value, mutator[, inplace_mode]), owns the mutation of its value.",
        SMUTATE.schema(),
        |args| {
            let args = SMUTATE.count::<2>(args)?;
            let root = args[0].to_owned()?;
            let links = SMUTATE.mutate_links(args, 1)?;
            mutate::structural_mutate(root, links)
        },
    );
}

/// Adopts a raw owned result (an Error becomes `Err`).
fn decode_raw(raw: anyffi::abi::TVMFFIAny) -> Result<Any> {
    if raw.type_index == anyffi::abi::kTVMFFIError {
        // SAFETY: an owned Error value.
        return Err(unsafe { visit::take_error(raw) });
    }
    // SAFETY: an owned value.
    Ok(unsafe { Any::from_raw(raw) })
}

/// A signature for hand-checked arguments, producing the official mismatch messages.
struct Sig {
    name: &'static str,
    params: &'static [&'static str],
    ret: &'static str,
}

/// The type key a mismatch message names: the value's own type index (`ffi.SmallStr` for a
/// short string), the object's type for objects.
fn mismatch_key(v: &AnyView<'_>) -> String {
    if v.type_index() >= anyffi::abi::kTVMFFIStaticObjectBegin {
        v.type_key()
    } else {
        anyffi::type_table::type_key_of(v.type_index())
    }
}

const TABLE: &str = "Array<Tuple<int, ffi.Function>>";
const OPT_INTERRUPT: &str = "Optional<ffi.VisitInterrupt>";

impl Sig {
    fn text(&self) -> String {
        anyffi::function::signature(self.name, self.params, self.ret)
    }

    /// The metadata type schema of this signature, as the official library writes it.
    fn schema(&self) -> String {
        crate::global::function_schema(self.params, self.ret)
    }

    fn count<'a, const N: usize>(&self, args: &'a [AnyView<'a>]) -> Result<&'a [AnyView<'a>; N]> {
        args.try_into().map_err(|_| {
            Error::type_error(format!(
                "Mismatched number of arguments when calling: `{}`. Expected {} but got {} arguments",
                self.text(),
                self.params.len(),
                args.len()
            ))
        })
    }

    fn mismatch(&self, i: usize, got: String) -> Error {
        Error::type_error(format!(
            "Mismatched type on argument #{i} when calling: `{}`. Expected `{}` but got `{got}`",
            self.text(),
            self.params[i]
        ))
    }

    fn int(&self, args: &[AnyView<'_>], i: usize) -> Result<i64> {
        match args[i].type_index() {
            anyffi::abi::kTVMFFIInt | anyffi::abi::kTVMFFIBool => Ok(args[i].as_i64().unwrap_or(0)),
            _ => Err(self.mismatch(i, mismatch_key(&args[i]))),
        }
    }

    fn visitor(
        &self,
        args: &[AnyView<'_>],
        i: usize,
    ) -> Result<(Any, *mut anyffi::abi::TVMFFIObject)> {
        self.object_of(args, i, visit::visitor_ptr)
    }

    fn mutator(
        &self,
        args: &[AnyView<'_>],
        i: usize,
    ) -> Result<(Any, *mut anyffi::abi::TVMFFIObject)> {
        self.object_of(args, i, mutate::mutator_ptr)
    }

    fn object_of(
        &self,
        args: &[AnyView<'_>],
        i: usize,
        check: fn(&AnyView<'_>) -> Option<*mut anyffi::abi::TVMFFIObject>,
    ) -> Result<(Any, *mut anyffi::abi::TVMFFIObject)> {
        match check(&args[i]) {
            Some(p) => Ok((args[i].to_owned()?, p)),
            None => Err(self.mismatch(i, mismatch_key(&args[i]))),
        }
    }

    fn function(&self, args: &[AnyView<'_>], i: usize) -> Result<Function> {
        args[i]
            .as_object_of::<anyffi::FunctionObj>()
            .ok_or_else(|| self.mismatch(i, mismatch_key(&args[i])))
    }

    /// An `Array<Tuple<int, Function, bool>>` argument.
    fn mutate_links(&self, args: &[AnyView<'_>], i: usize) -> Result<Vec<mutate::MutateLink>> {
        let v = &args[i];
        let items = seq_of(v).ok_or_else(|| self.mismatch(i, mismatch_key(v)))?;
        let mut out = Vec::with_capacity(items.len());
        for (k, item) in items.iter().enumerate() {
            let bad = |inner: String| self.mismatch(i, format!("Array[index {k}: {inner}]"));
            let t = seq_of(&item.as_view()).ok_or_else(|| bad(mismatch_key(&item.as_view())))?;
            if t.len() != 3 {
                return Err(bad(format!("Array[size={}]", t.len())));
            }
            let ti = match t[0].type_index() {
                anyffi::abi::kTVMFFIInt | anyffi::abi::kTVMFFIBool => t[0].get::<i64>()? as i32,
                _ => {
                    return Err(bad(format!(
                        "Array[index 0: {}]",
                        mismatch_key(&t[0].as_view())
                    )))
                }
            };
            let f = t[1]
                .as_view()
                .as_object_of::<anyffi::FunctionObj>()
                .ok_or_else(|| bad(format!("Array[index 1: {}]", mismatch_key(&t[1].as_view()))))?;
            let takes_mode = match t[2].type_index() {
                anyffi::abi::kTVMFFIBool | anyffi::abi::kTVMFFIInt => {
                    t[2].as_view().as_i64().unwrap_or(0) != 0
                }
                _ => {
                    return Err(bad(format!(
                        "Array[index 2: {}]",
                        mismatch_key(&t[2].as_view())
                    )))
                }
            };
            out.push((ti, f, takes_mode));
        }
        Ok(out)
    }

    /// An `Array<Tuple<int, Function>>` argument (a List converts, as in the official library).
    fn links(&self, args: &[AnyView<'_>], i: usize) -> Result<Vec<Link>> {
        let v = &args[i];
        let items = seq_of(v).ok_or_else(|| self.mismatch(i, mismatch_key(v)))?;
        let mut out = Vec::with_capacity(items.len());
        for (k, item) in items.iter().enumerate() {
            let bad = |inner: String| self.mismatch(i, format!("Array[index {k}: {inner}]"));
            let pair = seq_of(&item.as_view()).ok_or_else(|| bad(mismatch_key(&item.as_view())))?;
            if pair.len() != 2 {
                return Err(bad(format!("Array[size={}]", pair.len())));
            }
            let ti = match pair[0].type_index() {
                anyffi::abi::kTVMFFIInt | anyffi::abi::kTVMFFIBool => pair[0].get::<i64>()? as i32,
                _ => {
                    return Err(bad(format!(
                        "Array[index 0: {}]",
                        mismatch_key(&pair[0].as_view())
                    )))
                }
            };
            let f = pair[1]
                .as_view()
                .as_object_of::<anyffi::FunctionObj>()
                .ok_or_else(|| {
                    bad(format!(
                        "Array[index 1: {}]",
                        mismatch_key(&pair[1].as_view())
                    ))
                })?;
            out.push((ti, f));
        }
        Ok(out)
    }
}

/// The elements of an Array or List value.
fn seq_of(v: &AnyView<'_>) -> Option<Vec<Any>> {
    match (
        v.as_object_of::<anyffi::ArrayObj>(),
        v.as_object_of::<anyffi::ListObj>(),
    ) {
        (Some(a), _) => Some(a.to_vec()),
        (_, Some(l)) => Some(l.to_vec()),
        _ => None,
    }
}

fn register_visit(r: &mut Registrar<'_>) {
    r.typed(
        "ffi.VisitInterrupt",
        "VisitInterrupt(value): an interrupt carrying value, which stops a structural visit.",
        |value: Any| -> ObjectRef<VisitInterruptObj> { visit::visit_interrupt(value) },
    );
    const VISIT: Sig = Sig {
        name: "ffi.StructuralVisitorVisit",
        params: &["ffi.StructuralVisitor", "AnyView"],
        ret: OPT_INTERRUPT,
    };
    r.packed_schema(
        VISIT.name,
        "StructuralVisitorVisit(visitor, value): visit value through the visitor's dispatch.",
        VISIT.schema(),
        |args| {
            let args = VISIT.count::<2>(args)?;
            let (_keep, v) = VISIT.visitor(args, 0)?;
            // SAFETY: a live visitor held by `_keep`; the value is borrowed for the call.
            let r = visit::decode_visit(unsafe { visit::visit_raw(v, args[1].raw()) })?;
            Ok(r.unwrap_or_default())
        },
    );
    const DEFAULT_VISIT: Sig = Sig {
        name: "ffi.StructuralVisitorDefaultVisit",
        params: &["ffi.StructuralVisitor", "AnyView"],
        ret: OPT_INTERRUPT,
    };
    r.packed_schema(
        DEFAULT_VISIT.name,
        "StructuralVisitorDefaultVisit(visitor, value): the default descent into value \
         (its __s_visit__ hook or its reflected fields).",
        DEFAULT_VISIT.schema(),
        |args| {
            let args = DEFAULT_VISIT.count::<2>(args)?;
            let (_keep, v) = DEFAULT_VISIT.visitor(args, 0)?;
            // SAFETY: a live visitor held by `_keep`; the value is borrowed for the call.
            let r = visit::decode_visit(unsafe { visit::default_visit_raw(v, args[1].raw()) })?;
            Ok(r.unwrap_or_default())
        },
    );
    const REGION: Sig = Sig {
        name: "ffi.StructuralVisitorDefRegionKind",
        params: &["ffi.StructuralVisitor"],
        ret: "int",
    };
    r.packed_schema(
        REGION.name,
        "StructuralVisitorDefRegionKind(visitor): the current definition-region kind.",
        REGION.schema(),
        |args| {
            let args = REGION.count::<1>(args)?;
            let (_keep, v) = REGION.visitor(args, 0)?;
            // SAFETY: a live visitor held by `_keep`.
            Ok(Any::from(unsafe { visit::region(v) } as i64))
        },
    );
    const WITH_REGION: Sig = Sig {
        name: "ffi.StructuralVisitorWithDefRegionKind",
        params: &["ffi.StructuralVisitor", "int", "ffi.Function"],
        ret: "Any",
    };
    r.packed_schema(
        WITH_REGION.name,
        "StructuralVisitorWithDefRegionKind(visitor, kind, callback): callback() with the \
         definition-region kind set (inside a pattern region the pattern stays).",
        WITH_REGION.schema(),
        |args| {
            let args = WITH_REGION.count::<3>(args)?;
            let (_keep, v) = WITH_REGION.visitor(args, 0)?;
            let kind = WITH_REGION.int(args, 1)? as i32;
            let cb = WITH_REGION.function(args, 2)?;
            // SAFETY: a live visitor held by `_keep`.
            unsafe { visit::with_region(v, kind, || cb.call(&[])) }
        },
    );
    const WALK: Sig = Sig {
        name: "ffi.StructuralWalk",
        params: &["AnyView", TABLE, TABLE, "int"],
        ret: OPT_INTERRUPT,
    };
    r.packed_schema(
        WALK.name,
        "StructuralWalk(root, callbacks, callbacks_with_def_region_kind, order): visit every \
         occurrence, calling the first matching callback before (order 0) or after the \
         children; a callback returns None/0 (advance), 1 (skip children) or a VisitInterrupt.",
        WALK.schema(),
        |args| {
            let args = WALK.count::<4>(args)?;
            let links = WALK.links(args, 1)?;
            let links_kind = WALK.links(args, 2)?;
            let order = WALK.int(args, 3)? as i32;
            // the root as given (an `AnyView` parameter): a `const char*` root is visited as
            // type 8, as in the official library, not as the String it would convert to
            Ok(visit::structural_walk(args[0], links, links_kind, order)?.unwrap_or_default())
        },
    );
    const SVISIT: Sig = Sig {
        name: "ffi.StructuralVisit",
        params: &["AnyView", TABLE],
        ret: OPT_INTERRUPT,
    };
    r.packed_schema(
        SVISIT.name,
        "StructuralVisit(root, callbacks): visit root; the first matching callback, called as \
         callback(value, visitor), owns the descent into its value.",
        SVISIT.schema(),
        |args| {
            let args = SVISIT.count::<2>(args)?;
            let links = SVISIT.links(args, 1)?;
            Ok(visit::structural_visit(args[0], links)?.unwrap_or_default())
        },
    );
    const FIND: Sig = Sig {
        name: "ffi.VisitErrorContext.FindAccessPaths",
        params: &["ffi.Object", "ffi.VisitErrorContext", "bool"],
        ret: "Array<ffi.reflection.AccessPath>",
    };
    r.packed_schema(
        FIND.name,
        "VisitErrorContext.FindAccessPaths(root, context, allow_prefix_match): the access paths \
         from root that follow the objects the error context recorded.",
        FIND.schema(),
        |args| {
            let args = FIND.count::<3>(args)?;
            if args[0].type_index() < anyffi::abi::kTVMFFIStaticObjectBegin {
                return Err(FIND.mismatch(0, mismatch_key(&args[0])));
            }
            let ctx = args[1]
                .as_object_of::<VisitErrorContextObj>()
                .ok_or_else(|| FIND.mismatch(1, mismatch_key(&args[1])))?;
            let prefix = match args[2].type_index() {
                anyffi::abi::kTVMFFIBool | anyffi::abi::kTVMFFIInt => {
                    args[2].as_i64().unwrap_or(0) != 0
                }
                _ => return Err(FIND.mismatch(2, mismatch_key(&args[2]))),
            };
            let root = args[0].to_owned()?;
            let paths = visit::find_access_paths(&root, &ctx, prefix)?;
            Ok(Any::from(Array::from_vec(
                paths.into_iter().map(Any::from).collect(),
            )))
        },
    );
}

/// `Tuple<AccessPath, AccessPath>` (an Array of the two paths).
struct MismatchPair(Array);

impl anyffi::IntoAny for MismatchPair {
    fn into_any(self) -> Any {
        Any::from(self.0)
    }
    fn schema() -> String {
        r#"{"type":"Tuple","args":[{"type":"ffi.reflection.AccessPath"},{"type":"ffi.reflection.AccessPath"}]}"#
            .into()
    }
}
